"""Nodes lost under an admitted topology-aware workload: status.unhealthyNodes, the
TopologyNodesReady condition and the Warning event, written on the fake API server."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from kqueue.api.v1alpha1 import TopologyAssignment as TopologyAssignmentApi
from kqueue.api.v1alpha1 import Workload, encode_assignment
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.node_health import (
    NODE_REPLACED_REASON,
    NodeHealth,
    node_failed,
    node_problem,
    placed_nodes,
)
from kqueue.controller.resources import NODES, PODS, WORKLOADS
from kqueue.controller.topology import NODE_UNAVAILABLE_REASON, slim_node, slim_pod
from kqueue.controller.workqueue import Requeue
from kqueue.engine.tas.replacement import NotReplaced, Replaced
from kqueue.engine.types import TopologyAssignment
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import Events, model
from tests.controller.test_job_reconciler import job, workload

Obj = dict[str, Any]
HOST = "kubernetes.io/hostname"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _node(name: str, *, ready: bool = True, cordoned: bool = False) -> Obj:
    return {
        "metadata": {"name": name, "labels": {HOST: name, "rack": "r1"}},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"allocatable": {"cpu": "4", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _tas_workload(name: str, placement: list[tuple[str, int]]) -> Obj:
    """An admitted Workload of a Job whose pod set ``main`` is placed per node."""
    count = sum(n for _, n in placement)
    wl = workload(job(name, count=count), admitted=count)
    doc = wl.to_dict()
    doc["metadata"]["name"] = name
    doc["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = encode_assignment(
        [HOST], [([node], n) for node, n in placement]
    ).to_dict()
    return doc


class _Setup:
    def __init__(self, cluster: FakeCluster, events: Events, health: NodeHealth) -> None:
        self.cluster, self.events, self.health = cluster, events, health

    def status(self, name: str) -> Obj:
        got = self.cluster.server.get(WORKLOADS, name, "team-a")
        assert got is not None
        return dict(got.get("status") or {})

    def condition(self, name: str) -> Obj | None:
        found = [x for x in self.status(name).get("conditions", [])
                 if x["type"] == c.TOPOLOGY_NODES_READY]
        return found[0] if found else None

    async def reconcile(self, name: str) -> None:
        await self.cluster.synced()
        assert await self.health(f"team-a/{name}") is None
        await self.cluster.synced()


async def _setup(
    cluster: FakeCluster, nodes: list[Obj], workloads: list[Obj], engine: Any = None, **kw: Any
) -> _Setup:
    for n in nodes:
        cluster.server.add(NODES, n)
    for w in workloads:
        cluster.server.add(WORKLOADS, w)
    wl_informer = await cluster.informer(WORKLOADS, model(Workload))
    node_informer = await cluster.informer(NODES, slim_node)
    pod_informer = await cluster.informer(PODS, slim_pod)
    events = Events()
    health = NodeHealth(workloads=wl_informer.store, nodes=node_informer.store,
                        kube=cluster.kube, events=events, now=lambda: NOW,
                        engine=None if engine is None else (lambda: engine),
                        pods=pod_informer.store, **kw)
    return _Setup(cluster, events, health)


class _Engine:
    """The engine's answer to replace_failed_nodes, fixed by the test (its placement is tested
    in tests/engine/test_tas_replacement.py); records what it was asked."""

    def __init__(self, answer: dict[str, Replaced] | NotReplaced) -> None:
        self.answer = answer
        self.asked: list[tuple[str, list[str]]] = []
        self.claimed: list[str] = []

    def replace_failed_nodes(self, key: str, failed: list[str]) -> object:
        self.asked.append((key, list(failed)))
        return self.answer

    def claim_replacement(self, key: str, got: dict[str, Replaced]) -> None:
        assert got is self.answer
        self.claimed.append(key)


MOVED_TO_N3 = {"main": Replaced(
    TopologyAssignment((HOST,), ((("n2",), 1), (("n3",), 2))), (("n3", 2),)
)}


def _tas_pod(name: str, node: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "team-a", "labels": {c.TAS_LABEL: "true"}},
            "spec": {"nodeName": node, "containers": []}, "status": {"phase": "Running"}}


def _domains(s: _Setup, name: str) -> list[tuple[list[str], int]]:
    ta = s.status(name)["admission"]["podSetAssignments"][0]["topologyAssignment"]
    return [(list(v), n) for v, n in TopologyAssignmentApi.model_validate(ta).domains()]


async def test_a_deleted_node_is_replaced(cluster: FakeCluster) -> None:
    engine = _Engine(MOVED_TO_N3)
    s = await _setup(cluster, [_node("n1"), _node("n2"), _node("n3")],
                     [_tas_workload("train", [("n1", 2), ("n2", 1)])], engine)
    cluster.server.remove(NODES, "n1")
    await s.reconcile("train")
    assert engine.asked == [("team-a/train", ["n1"])]
    # Held in the engine before it is written (no cycle meanwhile takes n3).
    assert engine.claimed == ["team-a/train"]
    assert _domains(s, "train") == [(["n2"], 1), (["n3"], 2)]
    assert not s.status("train").get("unhealthyNodes")
    cond = s.condition("train")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", c.NODES_READY)
    assert "Node n1 was deleted" in cond["message"] and "n3 (2)" in cond["message"]
    assert s.events.reasons("train") == [NODE_REPLACED_REASON]


async def test_no_room_for_the_pods_of_a_failed_node_evicts(cluster: FakeCluster) -> None:
    why = "Workload was evicted as there was no replacement for unhealthy node(s): n1"
    engine = _Engine(NotReplaced(why))
    s = await _setup(cluster, [_node("n1", ready=False), _node("n2")],
                     [_tas_workload("train", [("n1", 2), ("n2", 1)])], engine)
    await s.reconcile("train")
    ev = [x for x in s.status("train")["conditions"] if x["type"] == c.EVICTED]
    assert [(x["status"], x["reason"]) for x in ev] == [("True", "NodeFailures")]
    assert why in ev[0]["message"]
    assert _domains(s, "train") == [(["n1"], 2), (["n2"], 1)], "the admission is left as is"
    assert s.events.reasons("train") == [c.EVICTED]


async def test_a_not_ready_node_is_replaced_once_its_pods_stopped(cluster: FakeCluster) -> None:
    """Kueue's TASReplaceNodeOnPodTermination: "Node NotReady, pod running, not marked as
    unavailable, requeued", then "Node NotReady, pod terminating, marked as unavailable"."""
    await replaced_once_its_pods_stopped(cluster, _node("n1", ready=False), _setup)


async def replaced_once_its_pods_stopped(cluster: FakeCluster, n1: Obj, setup: Any) -> None:
    """A lost ``n1`` whose pod still runs is waited on, then replaced once the pod is gone."""
    engine = _Engine(MOVED_TO_N3)
    cluster.server.add(PODS, _tas_pod("train-0", "n1"))
    s = await setup(cluster, [n1, _node("n2"), _node("n3")],
                    [_tas_workload("train", [("n1", 2), ("n2", 1)])], engine)
    await cluster.synced()
    got = await s.health("team-a/train")
    assert isinstance(got, Requeue), "the pod still runs on n1: look again"
    assert engine.asked == []
    await cluster.synced()
    assert s.status("train")["unhealthyNodes"] == [{"name": "n1"}]
    cluster.server.remove(PODS, "train-0", "team-a")
    await s.reconcile("train")
    assert engine.asked == [("team-a/train", ["n1"])]
    assert _domains(s, "train") == [(["n2"], 1), (["n3"], 2)]
    assert not s.status("train").get("unhealthyNodes")


async def test_a_cordoned_node_is_not_replaced(cluster: FakeCluster) -> None:
    engine = _Engine(MOVED_TO_N3)
    s = await _setup(cluster, [_node("n1", cordoned=True), _node("n2"), _node("n3")],
                     [_tas_workload("train", [("n1", 2), ("n2", 1)])], engine)
    await s.reconcile("train")
    assert engine.asked == []
    assert s.status("train")["unhealthyNodes"] == [{"name": "n1"}]


@pytest.mark.parametrize(
    ("node", "running", "want"),
    [
        pytest.param(None, 1, True, id="Node Deleted - marked as unavailable"),
        pytest.param({"metadata": {"name": "n"}, "status": {"conditions": []}}, 1, True,
                     id="NodeReady missing - marked as unavailable"),
        pytest.param(_node("n"), 0, False, id="Node Found and Healthy - not marked"),
        pytest.param(_node("n", ready=False), 1, False,
                     id="Node NotReady, pod running, not marked as unavailable, requeued"),
        pytest.param(_node("n", ready=False), 0, True,
                     id="Node NotReady, pod terminating, marked as unavailable"),
        pytest.param(_node("n", cordoned=True), 0, False, id="cordoned - kqueue: not failed"),
    ],
)
def test_node_failed(node: Obj | None, running: int, want: bool) -> None:
    assert node_failed(node, running) is want


@pytest.mark.parametrize(
    ("change", "what"),
    [
        pytest.param(lambda s: s.server.remove(NODES, "n1"), "was deleted", id="deleted"),
        pytest.param(lambda s: s.server.add(NODES, _node("n1", ready=False)), "is not Ready",
                     id="not ready"),
        pytest.param(lambda s: s.server.add(NODES, _node("n1", cordoned=True)),
                     "is cordoned (spec.unschedulable)", id="cordoned"),
    ],
)
async def test_a_lost_node_then_back(cluster: FakeCluster, change: Any, what: str) -> None:
    s = await _setup(cluster, [_node("n1"), _node("n2")],
                     [_tas_workload("train", [("n1", 2), ("n2", 1)])])
    await s.reconcile("train")
    assert s.condition("train") is None, "no node lost yet: no condition"
    assert not s.status("train").get("unhealthyNodes")

    change(cluster)
    await s.reconcile("train")
    assert s.status("train")["unhealthyNodes"] == [{"name": "n1"}]
    cond = s.condition("train")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", c.NODE_UNAVAILABLE)
    msg = cond["message"]
    assert f"Node n1 {what}" in msg and "2 pod(s) of pod set main" in msg
    assert "spec.active false, then true" in msg and "n2" not in msg
    assert s.events.reasons("train") == [NODE_UNAVAILABLE_REASON]

    # Reconciling again changes nothing and tells nothing twice.
    before = cluster.server.get(WORKLOADS, "train", "team-a")
    await s.reconcile("train")
    assert cluster.server.get(WORKLOADS, "train", "team-a") == before
    assert s.events.reasons("train") == [NODE_UNAVAILABLE_REASON]

    cluster.server.add(NODES, _node("n1"))
    await s.reconcile("train")
    assert not s.status("train").get("unhealthyNodes")
    cond = s.condition("train")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", c.NODES_READY)


async def test_two_lost_nodes_leave_one_by_one(cluster: FakeCluster) -> None:
    s = await _setup(cluster, [_node("n1", ready=False), _node("n2", cordoned=True), _node("n3")],
                     [_tas_workload("train", [("n1", 1), ("n2", 1), ("n3", 1)])])
    await s.reconcile("train")
    assert s.status("train")["unhealthyNodes"] == [{"name": "n1"}, {"name": "n2"}]
    assert s.events.reasons("train") == [NODE_UNAVAILABLE_REASON] * 2

    cluster.server.add(NODES, _node("n1"))
    await s.reconcile("train")
    assert s.status("train")["unhealthyNodes"] == [{"name": "n2"}]
    cond = s.condition("train")
    assert cond is not None and cond["status"] == "False"
    assert "Node n2" in cond["message"] and "Node n1" not in cond["message"]


async def test_unrelated_nodes_and_workloads_are_left_alone(cluster: FakeCluster) -> None:
    other = _tas_workload("other", [("n2", 2)])
    plain = workload(job("plain", count=1), admitted=1).to_dict()  # no topology assignment
    plain["metadata"]["name"] = "plain"
    s = await _setup(cluster, [_node("n1", ready=False), _node("n2")], [other, plain])
    for name in ("other", "plain"):
        before = copy.deepcopy(cluster.server.get(WORKLOADS, name, "team-a"))
        await s.reconcile(name)
        assert cluster.server.get(WORKLOADS, name, "team-a") == before
    assert s.events.recorded == []


@pytest.mark.parametrize(
    ("node", "want"),
    [
        pytest.param(None, "was deleted", id="absent"),
        pytest.param(_node("n"), None, id="ready"),
        pytest.param(_node("n", ready=False), "is not Ready", id="not ready"),
        pytest.param(_node("n", ready=False, cordoned=True), "is not Ready",
                     id="not ready and cordoned"),
        pytest.param(_node("n", cordoned=True), "is cordoned (spec.unschedulable)", id="cordoned"),
    ],
)
def test_node_problem(node: Obj | None, want: str | None) -> None:
    assert node_problem(node) == want


def test_placed_nodes_only_for_hostname_level_assignments() -> None:
    wl = Workload.model_validate(_tas_workload("train", [("n1", 2), ("n2", 1)]))
    assert placed_nodes(wl) == {"n1": [("main", 2)], "n2": [("main", 1)]}
    doc = _tas_workload("racks", [("x", 1)])
    doc["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = encode_assignment(
        ["rack"], [(["r1"], 1)]
    ).to_dict()
    assert placed_nodes(Workload.model_validate(doc)) == {}


# Kueue's scheduler_tas_test.go cases about writing the eviction when no replacement fits
# (FailFast): the write's errors, and a Workload changed meanwhile.
NO_ROOM = NotReplaced("Workload was evicted as there was no replacement for unhealthy node(s): n1")


async def _no_room(cluster: FakeCluster) -> _Setup:
    return await _setup(cluster, [_node("n2")], [_tas_workload("foo", [("n1", 1)])],
                        _Engine(NO_ROOM))


def _evicted(s: _Setup, name: str) -> list[tuple[str, str, str]]:
    return [(x["status"], x["reason"], x["message"]) for x in s.status(name)["conditions"]
            if x["type"] == c.EVICTED]


async def test_workload_with_unhealthy_node_second_pass_failfast_not_found_error_on_patch(
    cluster: FakeCluster,
) -> None:
    """Kueue's "workload with unhealthyNode annotation; second pass; preferred; no fit;
    FailFast (not found error on patch)": the Workload is gone when the eviction is written;
    nothing is told and nothing retried."""
    s = await _no_room(cluster)
    cluster.server.fail("PUT", WORKLOADS, "foo", code=404)
    await s.reconcile("foo")
    assert _evicted(s, "foo") == []
    assert s.events.recorded == []


async def test_workload_with_unhealthy_node_second_pass_failfast_test_error_on_patch(
    cluster: FakeCluster,
) -> None:
    """Kueue's "workload with unhealthyNode annotation; second pass; preferred; no fit;
    FailFast (test error on patch)": the write fails; the Workload keeps its admission and the
    error goes to the work queue, which retries; the retry evicts it."""
    s = await _no_room(cluster)
    cluster.server.fail("PUT", WORKLOADS, "foo", code=500, times=1)
    await cluster.synced()
    with pytest.raises(KubeError) as raised:
        await s.health("team-a/foo")
    assert raised.value.status == 500
    assert _evicted(s, "foo") == []
    assert _domains(s, "foo") == [(["n1"], 1)]
    await s.reconcile("foo")
    assert [(st, r) for st, r, _ in _evicted(s, "foo")] == [("True", "NodeFailures")]


async def test_use_patch_in_evict_workload_after_failed_tas_replacement(
    cluster: FakeCluster,
) -> None:
    """Kueue's "use patch in evictWorkloadAfterFailedTASReplacement": someone changes the
    Workload just before the eviction is written; the eviction still lands (kqueue: the write
    conflicts, the reconciler is called again on the newer Workload), keeping their change."""
    s = await _no_room(cluster)
    await cluster.synced()
    changed = copy.deepcopy(cluster.server.get(WORKLOADS, "foo", "team-a"))
    assert changed is not None
    changed["metadata"].setdefault("labels", {})["test.kqueue.io/timestamp"] = "now"
    stale = s.health._workloads.get("team-a/foo")  # what the reconciler reads first
    cluster.server.add(WORKLOADS, changed)
    got = await s.health._evict(stale, NO_ROOM.reason) if stale is not None else None
    assert isinstance(got, Requeue), "the stale write conflicts"
    await s.reconcile("foo")
    evicted = _evicted(s, "foo")
    assert [(st, r) for st, r, _ in evicted] == [("True", "NodeFailures")]
    assert NO_ROOM.reason in evicted[0][2]
    doc = cluster.server.get(WORKLOADS, "foo", "team-a")
    assert doc is not None and doc["metadata"]["labels"]["test.kqueue.io/timestamp"] == "now"
    assert s.events.reasons("foo") == [c.EVICTED]
