"""StatefulSets and Deployments turned into Workloads (pure), which ones are managed, the
Configuration's framework dependencies, and ``kqueue simulate``/``explain``/``convert`` on them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kqueue.api.config import Configuration
from kqueue.api.integrations import IntegrationError, PriorityClasses, workload_for_pod
from kqueue.api.integrations.deployment import deployment_pods, is_deployment_pod
from kqueue.api.integrations.management import ManagementPolicy, manages
from kqueue.api.integrations.statefulset import (
    replicas,
    workload_for_statefulset,
    workload_name_for_statefulset,
)
from kqueue.api.v1alpha1 import WorkloadPriorityClass, parse_object
from kqueue.api.v1alpha1 import constants as c
from kqueue.cli.main import cli

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "config" / "samples"
NO_CLASSES = PriorityClasses.from_objects([], [])


def _sts(**meta: Any) -> Obj:
    obj: Obj = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "db",
            "namespace": "team-a",
            "uid": "uid-db",
            "generation": 1,
            "labels": {c.QUEUE_NAME_LABEL: "batch"},
        },
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "db"}, "creationTimestamp": None},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
    }
    obj["metadata"].update(meta)
    return obj


# -- StatefulSet -> Workload ------------------------------------------------------------------------


def test_statefulset_is_one_gang_workload_owned_by_it() -> None:
    wl = workload_for_statefulset(_sts(), NO_CLASSES)
    assert wl.namespace == "team-a"
    assert wl.spec.queue_name == "batch"
    [ps] = wl.spec.pod_sets
    assert (ps.name, ps.count, ps.min_count) == ("main", 2, None)
    assert ps.template.to_dict()["metadata"] == {"labels": {"app": "db"}}
    [ref] = wl.metadata.owner_references
    assert (ref.api_version, ref.kind, ref.name, ref.uid, ref.controller) == (
        "apps/v1", "StatefulSet", "db", "uid-db", True,
    )
    assert wl.name.startswith("statefulset-db-")
    assert c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION not in wl.metadata.annotations


def test_statefulset_slices_are_named_by_generation_and_mark_what_they_replace() -> None:
    first = workload_for_statefulset(_sts(), NO_CLASSES)
    grown = _sts(generation=2)
    grown["spec"]["replicas"] = 4
    second = workload_for_statefulset(grown, NO_CLASSES, replacement_for=f"team-a/{first.name}")
    assert second.name != first.name
    assert second.spec.pod_sets[0].count == 4
    assert second.metadata.annotations[c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION] == (
        f"team-a/{first.name}"
    )
    # A manifest without a generation is the API server's generation 1.
    no_generation = _sts()
    del no_generation["metadata"]["generation"]
    assert workload_name_for_statefulset(no_generation) == first.name
    # A re-created StatefulSet of the same name gets a new Workload.
    assert workload_name_for_statefulset(_sts(uid="uid-other")) != first.name


def test_statefulset_priority_labels_on_the_top_level_object() -> None:
    classes = PriorityClasses.from_objects(
        [],
        [{"metadata": {"name": "serving"}, "value": 500}],
    )
    sts = _sts(labels={c.QUEUE_NAME_LABEL: "batch", c.PREEMPTIBILITY_LABEL: "non-preemptible"})
    sts["spec"]["template"]["spec"]["priorityClassName"] = "serving"
    wl = workload_for_statefulset(sts, classes)
    assert wl.spec.priority == 500
    assert wl.metadata.labels == {c.PREEMPTIBILITY_LABEL: "non-preemptible"}


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        pytest.param({"replicas": -1}, "spec.replicas", "non-negative", id="negative replicas"),
        pytest.param({"replicas": "2"}, "spec.replicas", "non-negative", id="replicas not a number"),
        pytest.param({"replicas": 0}, "spec.replicas", "scaled to 0", id="scaled to zero"),
        pytest.param({"template": None}, "spec.template.spec", "required", id="no template"),
        pytest.param(
            {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "x"}}}]}}},
            "spec.template.spec.containers[0].resources.requests",
            "",
            id="bad quantity named at the StatefulSet's field",
        ),
    ],
)
def test_statefulset_errors_name_the_field(spec: Obj, path: str, fragment: str) -> None:
    sts = _sts()
    sts["spec"].update(spec)
    with pytest.raises(IntegrationError) as err:
        workload_for_statefulset(sts, NO_CLASSES)
    assert err.value.path.startswith(path), err.value.path
    assert fragment in err.value.detail


@given(st.integers(min_value=1, max_value=10_000))
def test_statefulset_pod_set_count_is_its_replicas(n: int) -> None:
    sts = _sts()
    sts["spec"]["replicas"] = n
    assert replicas(sts) == n
    assert workload_for_statefulset(sts, NO_CLASSES).spec.pod_sets[0].count == n


def test_replicas_default_to_one() -> None:
    sts = _sts()
    del sts["spec"]["replicas"]
    assert replicas(sts) == 1


# -- Deployment -> pods -> Workloads ----------------------------------------------------------------


def _deployment(n: int = 3) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "team-a",
            "uid": "uid-web",
            "labels": {c.QUEUE_NAME_LABEL: "batch", c.PRIORITY_CLASS_LABEL: "high", "team": "a"},
        },
        "spec": {
            "replicas": n,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
    }


def test_each_pod_of_a_deployment_is_its_own_workload() -> None:
    wpc = parse_object(
        {"apiVersion": c.API_VERSION, "kind": "WorkloadPriorityClass",
         "metadata": {"name": "high"}, "value": 1000}
    )
    assert isinstance(wpc, WorkloadPriorityClass)
    classes = PriorityClasses.from_objects([wpc], [])
    pods = deployment_pods(_deployment(3))
    assert [p["metadata"]["name"] for p in pods] == ["web-0", "web-1", "web-2"]
    for pod in pods:
        assert is_deployment_pod(pod)
        labels = pod["metadata"]["labels"]
        assert labels == {"app": "web", c.QUEUE_NAME_LABEL: "batch", c.PRIORITY_CLASS_LABEL: "high"}
        wl = workload_for_pod(pod, classes)
        assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("main", 1)]
        assert wl.spec.queue_name == "batch" and wl.spec.priority == 1000
    names = {workload_for_pod(p, classes).name for p in pods}
    assert len(names) == 3


def test_a_deployment_scaled_to_zero_has_no_pods() -> None:
    assert deployment_pods(_deployment(0)) == []


# -- which objects are managed ---------------------------------------------------------------------

APPS = ManagementPolicy(frameworks=frozenset({"batch/job", "pod", "statefulset", "deployment"}))


def _rs_pod(marked: bool) -> Obj:
    pod = deployment_pods(_deployment(1))[0]
    if not marked:
        del pod["metadata"]["annotations"][c.SUSPENDED_BY_PARENT_ANNOTATION]
    return pod


MANAGES = {
    "labelled StatefulSet": (_sts(), APPS, True, "labelled"),
    "StatefulSet, framework off": (_sts(), ManagementPolicy(), False, "statefulset integration is not enabled"),
    "unlabelled StatefulSet, even with manageJobsWithoutQueueName": (
        _sts(labels={}),
        ManagementPolicy(frameworks=APPS.frameworks, manage_jobs_without_queue_name=True),
        False,
        "queues only when it names a queue",
    ),
    "labelled Deployment": (_deployment(), APPS, True, "labelled"),
    "a Deployment's pod": (_rs_pod(True), APPS, True, "labelled"),
    "a ReplicaSet's pod without the Deployment mark": (_rs_pod(False), APPS, False, "controlled by ReplicaSet"),
}


@pytest.mark.parametrize(
    ("obj", "policy", "managed", "fragment"), MANAGES.values(), ids=MANAGES.keys()
)
def test_manages(obj: Obj, policy: ManagementPolicy, managed: bool, fragment: str) -> None:
    decision = manages(obj, policy=policy)
    assert bool(decision) is managed
    assert fragment in decision.reason


@pytest.mark.parametrize(
    ("frameworks", "error"),
    [
        pytest.param(["batch/job", "pod", "statefulset", "deployment"], None, id="with pod"),
        pytest.param(["statefulset"], "'statefulset' needs 'pod'", id="statefulset without pod"),
        pytest.param(["batch/job", "deployment"], "'deployment' needs 'pod'", id="deployment without pod"),
    ],
)
def test_frameworks_that_need_pod(frameworks: list[str], error: str | None) -> None:
    if error is None:
        Configuration.model_validate({"integrations": {"frameworks": frameworks}})
        return
    with pytest.raises(ValidationError) as err:
        Configuration.model_validate({"integrations": {"frameworks": frameworks}})
    assert error in str(err.value) and "integrations.frameworks" in str(err.value)


# -- simulate, explain, convert ---------------------------------------------------------------------

CONFIG = {
    "apiVersion": "config.kqueue.io/v1alpha1",
    "kind": "Configuration",
    "integrations": {"frameworks": ["batch/job", "pod", "statefulset", "deployment"]},
}
SETUP = ["flavors.yaml", "priority-classes.yaml", "cohort.yaml", "local-queues.yaml"]


def _inputs(tmp_path: Path, *, config: Obj | None = CONFIG) -> list[str]:
    files = [str(SAMPLES / n) for n in [*SETUP, "statefulset.yaml", "deployment.yaml"]]
    if config is not None:
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        files.insert(0, str(path))
    return files


def test_samples_simulate_as_the_controller_builds_them(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["simulate", "-o", "json", *_inputs(tmp_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.stdout + res.stderr
    out = json.loads(res.stdout)
    workloads = out["workloads"]
    sts = [wl for key, wl in workloads.items() if key.startswith("team-a/statefulset-db-")]
    assert len(sts) == 1 and sts[0]["state"] == "Admitted"
    assert [ps["count"] for ps in sts[0]["podSets"]] == [2]
    pods = [wl for key, wl in workloads.items() if key.startswith("team-a/pod-web-")]
    assert len(pods) == 3 and all(wl["state"] == "Admitted" for wl in pods)
    assert all([ps["count"] for ps in wl["podSets"]] == [1] for wl in pods)


def test_simulate_reports_the_kinds_when_their_frameworks_are_off(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["simulate", "-o", "json", *_inputs(tmp_path, config=None)], catch_exceptions=False)
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "the statefulset integration is not enabled" in res.stderr
    assert "the deployment integration is not enabled" in res.stderr
    out = json.loads(res.stdout)
    assert not [k for k in out["workloads"] if "statefulset-db" in k or "pod-web" in k]


def test_explain_accepts_a_statefulset_by_name(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        cli, ["explain", "team-a/db", *[a for f in _inputs(tmp_path) for a in ("-f", f)], "-o", "json"],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert out["workload"].startswith("team-a/statefulset-db-")


def test_convert_maps_kueues_labels_on_statefulsets_and_deployments(tmp_path: Path) -> None:
    docs = []
    for kind in ("StatefulSet", "Deployment"):
        obj = _sts() if kind == "StatefulSet" else _deployment()
        obj = copy.deepcopy(obj)
        obj["metadata"]["labels"] = {
            "kueue.x-k8s.io/queue-name": "batch",
            "kueue.x-k8s.io/priority-class": "high",
        }
        obj["spec"]["template"]["metadata"]["annotations"] = {
            "kueue.x-k8s.io/suspended-by-parent": kind.lower()
        }
        docs.append(obj)
    path = tmp_path / "kueue.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    res = CliRunner().invoke(cli, ["convert", str(path)], catch_exceptions=False)
    assert res.exit_code == 0, res.stdout + res.stderr
    out = [d for d in yaml.safe_load_all(res.stdout) if d]
    for doc in out:
        assert doc["metadata"]["labels"] == {
            c.QUEUE_NAME_LABEL: "batch",
            c.PRIORITY_CLASS_LABEL: "high",
        }
        # Kueue's own bookkeeping is dropped: kqueue's webhooks set their own.
        assert not doc["spec"]["template"]["metadata"].get("annotations")


def test_a_dump_with_a_deployments_pods_counts_each_pod_once(tmp_path: Path) -> None:
    """``kubectl get deploy,pods -o yaml`` lists the pods too: they are the Workloads, and an
    unlabelled Deployment (every cluster has some) is not worth a warning."""
    dep = _deployment(2)
    del dep["metadata"]["labels"][c.PRIORITY_CLASS_LABEL]
    pods = []
    for i, pod in enumerate(deployment_pods(dep)):
        pod["metadata"]["name"] = f"web-7d9f8-{i}abcd"
        pod["metadata"]["ownerReferences"][0]["name"] = "web-7d9f8"
        pods.append(pod)
    unlabelled = copy.deepcopy(_deployment(1))
    unlabelled["metadata"]["name"] = "coredns"
    unlabelled["metadata"]["labels"] = {}
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all([dep, *pods, unlabelled]))
    files = [str(SAMPLES / n) for n in SETUP]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    res = CliRunner().invoke(
        cli, ["simulate", "-o", "json", str(config), *files, str(dump)], catch_exceptions=False
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    keys = sorted(json.loads(res.stdout)["workloads"])
    assert len(keys) == 2 and all(k.startswith("team-a/pod-web-7d9f8-") for k in keys), keys
    assert "coredns" not in res.stderr
