"""Nodes lost under an admitted topology-aware workload: status.unhealthyNodes, the
TopologyNodesReady condition and the Warning event, written on the fake API server."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from kqueue.api.v1alpha1 import Workload, encode_assignment
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.node_health import NodeHealth, node_problem, placed_nodes
from kqueue.controller.resources import NODES, WORKLOADS
from kqueue.controller.topology import NODE_UNAVAILABLE_REASON, slim_node
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


async def _setup(cluster: FakeCluster, nodes: list[Obj], workloads: list[Obj]) -> _Setup:
    for n in nodes:
        cluster.server.add(NODES, n)
    for w in workloads:
        cluster.server.add(WORKLOADS, w)
    wl_informer = await cluster.informer(WORKLOADS, model(Workload))
    node_informer = await cluster.informer(NODES, slim_node)
    events = Events()
    health = NodeHealth(workloads=wl_informer.store, nodes=node_informer.store,
                        kube=cluster.kube, events=events, now=lambda: NOW)
    return _Setup(cluster, events, health)


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
