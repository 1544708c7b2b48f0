"""The one manifest loader: documents, Lists, Kueue objects, and errors that say where."""

from __future__ import annotations

import pytest

from kqueue.api.loader import LoadError, load_text
from kqueue.api.v1alpha1 import ClusterQueue, LocalQueue, Workload

CQ = """\
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: "4"}]
"""

LQ = """\
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata: {name: lq, namespace: team}
spec: {clusterQueue: cq}
"""


def test_multi_document_with_empty_documents_and_list() -> None:
    text = (
        "---\n"
        + CQ
        + "---\n---\n"
        + "apiVersion: v1\nkind: List\nitems:\n"
        + "".join(
            "- " + line + "\n" if i == 0 else "  " + line + "\n"
            for i, line in enumerate(LQ.splitlines())
        )
    )
    result = load_text(text, "in.yaml")
    assert [type(o.model) for o in result.objects] == [ClusterQueue, LocalQueue]
    assert str(result.objects[0].location) == "in.yaml: document 1"
    assert str(result.objects[1].location) == "in.yaml: document 2 item 0"
    assert result.objects[1].ref == "LocalQueue team/lq"


def test_kubernetes_kinds_kept_and_others_skipped() -> None:
    text = (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {tier: a}}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n"
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 5\n"
    )
    result = load_text(text, "k.yaml")
    assert [(o.kind, o.model) for o in result.objects] == [
        ("Namespace", None),
        ("PriorityClass", None),
    ]
    assert result.skipped == ["k.yaml: document 2: v1 ConfigMap is not read by kqueue; skipped"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            CQ + "---\n" + CQ.replace('nominalQuota: "4"', 'nominalQuota: "lots"'),
            "bad.yaml: document 2 (ClusterQueue cq): "
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota:",
            id="bad quantity names document, object and field",
        ),
        pytest.param(
            LQ.replace("spec: {clusterQueue: cq}", "spec: {clusterQueue: cq, color: red}"),
            "bad.yaml: document 1 (LocalQueue lq): spec.color: unknown field",
            id="unknown field in a kqueue object is an error",
        ),
        pytest.param(
            "kind: ClusterQueue\nmetadata: {name: x}\n",
            "bad.yaml: document 1 (ClusterQueue): apiVersion: required",
            id="missing apiVersion",
        ),
        pytest.param(
            "apiVersion: kqueue.io/v1alpha1\nkind: ClusterQueue\nmetadata: {}\n",
            "bad.yaml: document 1 (ClusterQueue): metadata.name: required",
            id="missing name",
        ),
        pytest.param("- a\n- b\n", "bad.yaml: document 1: expected an object", id="not a mapping"),
        pytest.param(
            CQ + "---\nkey: [unclosed\n",
            "bad.yaml: document 2: invalid YAML at line",
            id="yaml syntax error names the document",
        ),
        pytest.param(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadSlice\nmetadata: {name: mk}\n",
            "bad.yaml: document 1 (WorkloadSlice mk): kind 'WorkloadSlice'",
            id="kueue kind without an equivalent",
        ),
    ],
)
def test_errors_name_source_document_object_and_field(text: str, message: str) -> None:
    with pytest.raises(LoadError) as info:
        load_text(text, "bad.yaml")
    assert str(info.value).startswith(message), str(info.value)


def test_kueue_unknown_fields_dropped_with_warning() -> None:
    text = (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\n"
        "metadata: {name: lq, namespace: team}\n"
        "spec: {clusterQueue: cq, futureKnob: 3}\n"
    )
    result = load_text(text, "k.yaml")
    assert isinstance(result.objects[0].model, LocalQueue)
    assert result.warnings == [
        "k.yaml: document 1 (LocalQueue team/lq): spec.futureKnob: not supported by kqueue; ignored"
    ]


def test_kueue_invalid_value_still_fails() -> None:
    text = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\n"
        "metadata: {name: w, namespace: team}\n"
        "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: 2\n    minCount: 5\n"
        "    template: {spec: {containers: [{name: c, image: i}]}}\n"
    )
    with pytest.raises(LoadError) as info:
        load_text(text, "w.yaml")
    assert info.value.path == "spec.podSets[0].minCount"


def test_kueue_workload_status_is_kept() -> None:
    text = (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\n"
        "metadata: {name: w, namespace: team}\n"
        "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: 2\n"
        "    template: {spec: {containers: [{name: c, image: i, resources: {requests: {cpu: 1}}}]}}\n"
        "status:\n  admission:\n    clusterQueue: cq\n    podSetAssignments:\n"
        "    - {name: main, flavors: {cpu: default}, resourceUsage: {cpu: '2'}, count: 2}\n"
    )
    wl = load_text(text, "w.yaml").objects[0].model
    assert isinstance(wl, Workload)
    assert wl.status is not None and wl.status.admission is not None
    assert wl.status.admission.cluster_queue == "cq"
