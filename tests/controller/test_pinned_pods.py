"""Released topology-placed pods waiting, unbound, for a node they cannot get are marked Failed
(kqueue/controller/pinned_pods.py, driven by kqueue/controller/node_health.py).

Ported by name from Kueue's ``TestNodeFailureReconciler`` and ``TestGetWorkloadStatus``
(``pkg/controller/tas/node_controller_test.go``): the cases about pending pods. Kueue's
"Unhealthy" is a node kqueue takes as failed (the engine is asked for a replacement), "pod
patched" a pod marked Failed with ``TerminatedByKqueue`` (Kueue's ``TerminatedByKueue``).
Kueue's gate ``TopologySchedulingGate`` is kqueue's one admission gate, ``kqueue.io/admission``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1 import encode_assignment
from kqueue.controller.kube import Kube
from kqueue.controller.pinned_pods import (
    POD_TERMINATED_REASON,
    TERMINATED_BY_KQUEUE,
    UNSCHEDULABLE_ON_ASSIGNED_NODE,
    fail_pod,
    pinned_node,
)
from kqueue.controller.resources import PODS
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import Events
from tests.controller.test_node_health import (
    HOST,
    MOVED_TO_N3,
    NOW,
    _domains,
    _Engine,
    _node,
    _Setup,
    _tas_workload,
)
from tests.controller.test_node_health import _setup as _health_setup

Obj = dict[str, Any]
NO_EXECUTE = {"key": "foo", "effect": "NoExecute"}
NO_SCHEDULE = {"key": "foo", "effect": "NoSchedule"}


def _pod(name: str, *, on: str | None = None, gated: bool = False, selector: Obj | None = None,
         phase: str = "Pending") -> Obj:
    spec: Obj = {"containers": []}
    if on is not None:
        spec["nodeSelector"] = {HOST: on}
    if selector is not None:
        spec["nodeSelector"] = selector
    if gated:
        spec["schedulingGates"] = [{"name": c.ADMISSION_GATE}]
    return {"metadata": {"name": name, "namespace": "team-a", "labels": {c.TAS_LABEL: "true"}},
            "spec": spec, "status": {"phase": phase}}


def _tainted(name: str, taint: Obj) -> Obj:
    node = _node(name)
    node["spec"]["taints"] = [taint]
    return node


def _on_racks() -> Obj:
    doc = _tas_workload("train", [("n1", 1)])
    doc["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = encode_assignment(
        ["rack"], [(["rack-1"], 1)]
    ).to_dict()
    return doc


def _unadmitted() -> Obj:
    doc = _tas_workload("train", [("n1", 1)])
    doc["status"] = {}
    return doc


def _with_condition(kind: str, reason: str) -> Obj:
    doc = _tas_workload("train", [("n1", 1)])
    doc["status"]["conditions"].append({
        "type": kind, "status": "True", "reason": reason, "message": "",
        "lastTransitionTime": "2026-03-01T11:00:00Z",
    })
    return doc


@dataclass
class Case:
    nodes: list[Obj]
    pods: list[Obj]
    want_failed: list[str]
    # The nodes the engine was asked to replace (Kueue's "Unhealthy": a failed node).
    want_asked: list[str] = field(default_factory=list)
    workload: Obj = field(default_factory=lambda: _tas_workload("train", [("n1", 1)]))
    taints: bool = False


CASES = {
    "Node NotReady, pod pending (assigned via nodeSelector) -> Unhealthy": Case(
        [_node("n1", ready=False), _node("n2")],
        [_pod("pending-pod-selector", on="n1")], ["pending-pod-selector"], ["n1"],
    ),
    "Node NotReady, pod pending (gated by TopologySchedulingGate) -> Unhealthy (immediate)": Case(
        [_node("n1", ready=False), _node("n2")], [_pod("gated-pod", gated=True)], [], ["n1"],
    ),
    "Node has untolerated NoExecute taint, pod pending (assigned via nodeSelector) -> "
    "Unhealthy": Case(
        [_tainted("n1", NO_EXECUTE), _node("n2")],
        [_pod("pending-pod-selector", on="n1")], ["pending-pod-selector"], ["n1"], taints=True,
    ),
    "Node has untolerated NoExecute taint, pod pending (gated by TopologySchedulingGate) -> "
    "Unhealthy (immediate)": Case(
        [_tainted("n1", NO_EXECUTE), _node("n2")], [_pod("gated-pod", gated=True)], [], ["n1"],
        taints=True,
    ),
    "Node NotReady, pod pending, no hostname topology level -> Healthy (ignore)": Case(
        [_node("n1", ready=False)], [_pod("pending-pod-rack", selector={"rack": "rack-1"})], [],
        workload=_on_racks(),
    ),
    "Node has NoSchedule taint, pod is Pending and on node, ReplaceNodeOnPodTermination on -> "
    "Unhealthy, pod patched": Case(
        [_tainted("n1", NO_SCHEDULE), _node("n2")], [_pod("pending-pod", on="n1")],
        ["pending-pod"], ["n1"], taints=True,
    ),
    "Node has NoSchedule taint, multiple pending pods, only matching one patched": Case(
        [_tainted("n1", NO_SCHEDULE), _node("n2")],
        [_pod("pending-pod-1", on="n1"), _pod("pending-pod-2", on="n2")], ["pending-pod-1"],
        ["n1"], workload=_tas_workload("train", [("n1", 1), ("n2", 1)]), taints=True,
    ),
    "Node has untolerated NoSchedule taint, pod is Gated -> Healthy": Case(
        [_tainted("n1", NO_SCHEDULE), _node("n2")], [_pod("gated-pod", gated=True)], [], ["n1"],
        taints=True,
    ),
    "Workload without admission (nil Admission status) - handled safely": Case(
        [_node("n1")], [_pod("stray-pod-on-node", on="n1")], ["stray-pod-on-node"],
        workload=_unadmitted(),
    ),
    "Node NotReady, workload missing TAS assignment but has late pod -> Workload marked "
    "Healthy, pod patched": Case(
        [_node("n1"), _node("unassigned-node", ready=False)],
        [_pod("stray-pod", on="unassigned-node")], ["stray-pod"],
    ),
    "Stray pending pod on unassigned node gets terminated (expectedOnNode == 0)": Case(
        [_node("n1"), _node("unassigned-node")], [_pod("stray-pod", on="unassigned-node")],
        ["stray-pod"],
    ),
    "Node NotReady, finished workload on TAS node -> ignored": Case(
        [_node("n1", ready=False)], [_pod("pending-pod-selector", on="n1")], [],
        workload=_with_condition(c.FINISHED, "Finished"),
    ),
    "Node NotReady, evicted workload on TAS node -> ignored": Case(
        [_node("n1", ready=False)], [_pod("pending-pod-selector", on="n1")], [],
        workload=_with_condition(c.EVICTED, "Evicted"),
    ),
    # kqueue's own: a deleted node is failed at once and its pinned pods are left to the owner
    # (Kueue's reconciler returns before looking at pods when the node is gone).
    "kqueue: deleted node, pinned pod left": Case(
        [_node("n2")], [_pod("pending-pod-selector", on="n1")], [], ["n1"],
    ),
    # A cordoned node keeps its pods in kqueue (docs/topology.md).
    "kqueue: cordoned node, pinned pod left": Case(
        [_node("n1", cordoned=True)], [_pod("pending-pod-selector", on="n1")], [],
    ),
    "kqueue: healthy node of the assignment, pinned pod left": Case(
        [_node("n1")], [_pod("pending-pod-selector", on="n1")], [],
    ),
    "kqueue: a pod already bound or ended is not pinned": Case(
        [_node("n1", ready=False)],
        [_pod("ended", on="n1", phase="Failed"), _pod("running", on="n1", phase="Running")], [],
        ["n1"],
    ),
}


async def _setup(cluster: FakeCluster, case: Case, engine: _Engine, **kw: Any) -> _Setup:
    for p in case.pods:
        cluster.server.add(PODS, p)
    whole = await cluster.informer(PODS, lambda o: o)

    def pods_of(wl: Any) -> list[Obj]:
        return [p for p in whole.store.objects()
                if p["metadata"]["namespace"] == (wl.namespace or "default")]

    return await _health_setup(cluster, case.nodes, [case.workload], engine,
                               taints=case.taints, pods_of=pods_of, **kw)


def _failed(cluster: FakeCluster, pods: list[Obj]) -> list[str]:
    out = []
    for p in pods:
        got = cluster.server.get(PODS, p["metadata"]["name"], "team-a")
        assert got is not None
        if got["status"].get("phase") == "Failed" and any(
            x["type"] == TERMINATED_BY_KQUEUE for x in got["status"].get("conditions") or []
        ):
            out.append(p["metadata"]["name"])
    return out


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_node_failure_reconciler_pending_pods(cluster: FakeCluster, case: Case) -> None:
    engine = _Engine({})
    s = await _setup(cluster, case, engine)
    await cluster.synced()
    await s.health("team-a/train")
    await cluster.synced()
    assert _failed(cluster, case.pods) == case.want_failed
    assert engine.asked == ([("team-a/train", case.want_asked)] if case.want_asked else [])
    for name in case.want_failed:
        got = cluster.server.get(PODS, name, "team-a")
        assert got is not None
        cond = next(x for x in got["status"]["conditions"] if x["type"] == TERMINATED_BY_KQUEUE)
        assert (cond["status"], cond["reason"]) == ("True", UNSCHEDULABLE_ON_ASSIGNED_NODE)
        node = got["spec"]["nodeSelector"][HOST]
        assert f"waits, unbound, for node {node}" in cond["message"]
        assert s.events.reasons(name) == [POD_TERMINATED_REASON]


async def test_the_pinned_pod_fails_and_the_node_is_replaced_in_one_pass(
    cluster: FakeCluster,
) -> None:
    """n1 NotReady with no pod running there: its pinned pod is failed (the Job creates it
    again) and the assignment moves n1's pods to n3; TopologyNodesReady says where."""
    engine = _Engine(MOVED_TO_N3)
    case = Case([_node("n1", ready=False), _node("n2"), _node("n3")],
                [_pod("train-0", on="n1"), _pod("train-1", on="n2")], ["train-0"], ["n1"],
                workload=_tas_workload("train", [("n1", 2), ("n2", 1)]))
    s = await _setup(cluster, case, engine)
    await s.reconcile("train")
    assert _failed(cluster, case.pods) == ["train-0"]
    cond = next(x for x in cluster.server.get(PODS, "train-0", "team-a")["status"]["conditions"]
                if x["type"] == TERMINATED_BY_KQUEUE)
    assert "node n1 (nodeSelector kubernetes.io/hostname), which is not Ready" in cond["message"]
    assert _domains(s, "train") == [(["n2"], 1), (["n3"], 2)]
    ready = s.condition("train")
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", c.NODES_READY)


async def test_with_replacement_off_pinned_pods_are_left(cluster: FakeCluster) -> None:
    """featureGates TASFailedNodeReplacement: false: the node is only reported."""
    case = CASES["Node NotReady, pod pending (assigned via nodeSelector) -> Unhealthy"]
    s = await _setup(cluster, case, _Engine({}), replace=False)
    await s.reconcile("train")
    assert _failed(cluster, case.pods) == []
    assert s.status("train")["unhealthyNodes"] == [{"name": "n1"}]


async def test_a_pod_changed_since_it_was_seen_is_not_failed(cluster: FakeCluster) -> None:
    """The patch tests the resourceVersion: a pod bound meanwhile keeps running."""
    cluster.server.add(PODS, _pod("p", on="n1"))
    seen = cluster.server.get(PODS, "p", "team-a")
    assert seen is not None
    bound = {**seen, "spec": {**seen["spec"], "nodeName": "n1"}}
    cluster.server.add(PODS, bound)
    kube: Kube = cluster.kube
    events = Events()
    assert not await fail_pod(seen, "why", kube=kube, events=events, now=NOW)
    got = cluster.server.get(PODS, "p", "team-a")
    assert got is not None and got["status"]["phase"] == "Pending"
    assert events.recorded == []
    assert await fail_pod(got, "why", kube=kube, events=events, now=NOW)
    got = cluster.server.get(PODS, "p", "team-a")
    assert got is not None and got["status"]["phase"] == "Failed"


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(_pod("p", on="n1"), "n1", id="released, unbound"),
        pytest.param(_pod("p", on="n1", gated=True), None, id="gated"),
        pytest.param(_pod("p", on="n1", phase="Running"), None, id="running"),
        pytest.param({**_pod("p", on="n1"), "metadata": {"name": "p"}}, None,
                     id="not topology-placed"),
        pytest.param(_pod("p", selector={"rack": "r1"}), None, id="pinned to a rack"),
    ],
)
def test_pinned_node(pod: Obj, want: str | None) -> None:
    assert pinned_node(pod) == want
