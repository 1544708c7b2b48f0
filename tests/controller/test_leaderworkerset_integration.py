"""The LeaderWorkerSet integration without a cluster: its webhooks, the group label of its pods,
and one gang Workload per group (the pod integration's pod groups)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.integrations import PriorityClasses
from kqueue.api.integrations.leaderworkerset import (
    GROUP_INDEX_LABEL,
    LWS_NAME_LABEL,
    is_lws_pod,
    leaderworkerset_pods,
)
from kqueue.api.integrations.pod import group_pods, workload_for_pod_group
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import registry
from kqueue.controller.integrations.leaderworkerset import webhook
from kqueue.controller.integrations.leaderworkerset.labeller import wanted_group
from kqueue.controller.integrations.pod.generic import is_plain
from kqueue.controller.webhook_server import AdmissionRequest
from tests.controller.fake_apiserver import FakeCluster

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])


def _template(cpu: str = "1") -> Obj:
    return {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}


def lws(*, replicas: int = 2, size: int = 3, leader: bool = True, queue: str | None = "lq") -> Obj:
    lwt: Obj = {"size": size, "workerTemplate": _template()}
    if leader:
        lwt["leaderTemplate"] = _template("2")
    meta: Obj = {"name": "serve", "namespace": "ns", "labels": {}, "annotations": {}}
    if queue:
        meta["labels"][c.QUEUE_NAME_LABEL] = queue
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt},
    }


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u", operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "leaderworkerset.x-k8s.io", "version": "v1", "kind": "LeaderWorkerSet"},
        resource={"group": "leaderworkerset.x-k8s.io", "version": "v1", "resource": "leaderworkersets"},
        namespace="ns", name="serve", object=new, old_object=old,
    )


async def test_templates_are_held_and_marked_as_the_leaderworkersets() -> None:
    obj = lws()
    obj["metadata"]["labels"][c.PRIORITY_CLASS_LABEL] = "high"
    out = (await webhook.mutate(_request(obj))).patched
    assert out is not None
    for name in ("leaderTemplate", "workerTemplate"):
        template = out["spec"]["leaderWorkerTemplate"][name]
        assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]
        assert template["metadata"]["labels"] == {
            c.QUEUE_NAME_LABEL: "lq", c.PRIORITY_CLASS_LABEL: "high", c.MANAGED_LABEL: "true",
        }
        assert template["metadata"]["annotations"] == {
            c.SUSPENDED_BY_PARENT_ANNOTATION: "leaderworkerset",
            c.POD_GROUP_TOTAL_COUNT_ANNOTATION: "3",
        }


async def test_an_unlabelled_leaderworkerset_is_left_alone() -> None:
    assert (await webhook.mutate(_request(lws(queue=None)))).patched is None


def _with(obj: Obj, change: Any) -> Obj:
    change(obj)
    return obj


@pytest.mark.parametrize(
    ("obj", "old", "fields"),
    [
        pytest.param(lws(), None, [], id="valid"),
        pytest.param(_with(lws(), lambda o: o["metadata"]["annotations"].__setitem__(c.ELASTIC_JOB_ANNOTATION, "true")),
                     None, [f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]"], id="elastic annotation"),
        pytest.param(_with(lws(), lambda o: o["spec"].__setitem__("startupPolicy", "LeaderReady")),
                     None, ["spec.startupPolicy"], id="leader ready startup"),
        pytest.param(_with(lws(), lambda o: o["metadata"]["annotations"].__setitem__(webhook.EXCLUSIVE_TOPOLOGY_ANNOTATION, "rack")),
                     None, [f"metadata.annotations[{webhook.EXCLUSIVE_TOPOLOGY_ANNOTATION}]"], id="exclusive placement"),
        pytest.param(_with(lws(), lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"].setdefault("metadata", {})
                           .__setitem__("labels", {c.POD_GROUP_NAME_LABEL: "g"})),
                     None, [f"spec.leaderWorkerTemplate.workerTemplate.metadata.labels[{c.POD_GROUP_NAME_LABEL}]"],
                     id="pod group label in a template"),
        pytest.param(lws(size=4), lws(size=3), ["spec.leaderWorkerTemplate.size"], id="size changed"),
        pytest.param(lws(replicas=4), lws(replicas=2), [], id="replicas changed: scaling is allowed"),
        pytest.param(lws(queue=None), lws(), [f"metadata.labels[{c.QUEUE_NAME_LABEL}]"], id="queue label removed"),
        pytest.param(lws(queue="other"), _with(lws(), lambda o: o.__setitem__("status", {"readyReplicas": 1})),
                     [f"metadata.labels[{c.QUEUE_NAME_LABEL}]"], id="queue changed with ready groups"),
        pytest.param(lws(queue="other"), lws(), [], id="queue changed before any group is ready"),
    ],
)
async def test_validation(obj: Obj, old: Obj | None, fields: list[str]) -> None:
    verdict = await webhook.validate(_request(obj, old))
    assert [e.field for e in verdict.errors] == fields


def _pod(labels: dict[str, str], *, gated: bool = True) -> Obj:
    return {
        "metadata": {
            "name": "serve-1", "namespace": "ns", "resourceVersion": "5",
            "labels": {c.QUEUE_NAME_LABEL: "lq", c.MANAGED_LABEL: "true", **labels},
            "annotations": {c.SUSPENDED_BY_PARENT_ANNOTATION: "leaderworkerset", c.POD_GROUP_TOTAL_COUNT_ANNOTATION: "3"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "serve", "uid": "s", "controller": True}],
        },
        "spec": {"schedulingGates": [{"name": c.ADMISSION_GATE}] if gated else [], "containers": []},
    }


@pytest.mark.parametrize(
    ("labels", "gated", "want"),
    [
        pytest.param({}, True, None, id="not indexed yet"),
        pytest.param({LWS_NAME_LABEL: "serve", GROUP_INDEX_LABEL: "1"}, True, "serve-1", id="indexed"),
        pytest.param({LWS_NAME_LABEL: "serve", GROUP_INDEX_LABEL: "1", c.POD_GROUP_NAME_LABEL: "serve-1"}, True, None,
                     id="labelled already"),
        pytest.param({LWS_NAME_LABEL: "serve", GROUP_INDEX_LABEL: "1"}, False, None, id="released: left alone"),
    ],
)
def test_a_pod_joins_its_groups_pod_group_once_indexed(labels: dict[str, str], gated: bool, want: str | None) -> None:
    assert wanted_group(_pod(labels, gated=gated)) == want


def test_an_lws_pod_is_the_pod_integrations_only_once_in_its_group() -> None:
    pod = _pod({LWS_NAME_LABEL: "serve", GROUP_INDEX_LABEL: "1"})
    assert is_lws_pod(pod) and not is_plain(pod)
    pod["metadata"]["labels"][c.POD_GROUP_NAME_LABEL] = "serve-1"
    assert is_plain(pod)
    # Another StatefulSet's pod is not, whatever its labels.
    del pod["metadata"]["annotations"][c.SUSPENDED_BY_PARENT_ANNOTATION]
    assert not is_lws_pod(pod) and not is_plain(pod)


def test_one_gang_workload_per_group() -> None:
    pods = leaderworkerset_pods(lws(replicas=2, size=3))
    groups: dict[str, list[Obj]] = {}
    for p in pods:
        groups.setdefault(p["metadata"]["labels"][c.POD_GROUP_NAME_LABEL], []).append(p)
    assert sorted(groups) == ["serve-0", "serve-1"]
    wl = workload_for_pod_group(group_pods(groups["serve-0"]), NO_CLASSES)
    assert wl.name == "serve-0" and wl.spec.queue_name == "lq"
    # The leader (2 CPUs) and the workers (1 CPU) differ in shape: two pod sets, 1 + 2 pods.
    assert sorted(ps.count for ps in wl.spec.pod_sets) == [1, 2]
    same = leaderworkerset_pods(lws(replicas=1, size=3, leader=False))
    one = workload_for_pod_group(group_pods(same), NO_CLASSES)
    assert [ps.count for ps in one.spec.pod_sets] == [3]


def test_registered_and_needs_pod() -> None:
    from kqueue.api.config import Configuration

    fw = registry.get("leaderworkerset.x-k8s.io/leaderworkerset")
    assert fw.kind == "LeaderWorkerSet" and not fw.suspendable and not fw.default_enabled
    with pytest.raises(ValueError, match="needs 'pod'"):
        Configuration.model_validate({"integrations": {"frameworks": ["batch/job", fw.name]}})
    copy.deepcopy(fw)


async def test_the_labeller_puts_an_indexed_gated_pod_in_its_group(cluster: FakeCluster) -> None:
    from kqueue.controller.integrations.leaderworkerset.labeller import GroupLabeller
    from kqueue.controller.resources import PODS

    indexed = _pod({LWS_NAME_LABEL: "serve", GROUP_INDEX_LABEL: "1"})
    not_yet = copy.deepcopy(_pod({}))
    not_yet["metadata"]["name"] = "serve-2"
    for pod in (indexed, not_yet):
        del pod["metadata"]["resourceVersion"]
        cluster.server.add(PODS, pod)
    pods = await cluster.informer(PODS, lambda o: o)
    labeller = GroupLabeller(pods=pods.store, kube=cluster.kube)
    assert await labeller("ns/serve-1") is None
    assert await labeller("ns/serve-2") is None
    labelled = cluster.server.get(PODS, "serve-1", "ns")
    assert labelled is not None
    assert labelled["metadata"]["labels"][c.POD_GROUP_NAME_LABEL] == "serve-1"
    untouched = cluster.server.get(PODS, "serve-2", "ns")
    assert untouched is not None and c.POD_GROUP_NAME_LABEL not in untouched["metadata"]["labels"]
    assert len(cluster.server.requests_to("PATCH", PODS)) == 1
