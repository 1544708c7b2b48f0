"""The node-fit guard, controller side (kqueue/controller/node_fit.py): the NodesFit condition
and events written on the fake API server, the hold, and the wake on what the guard reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.node_fit import FITS_EVENT, HELD_EVENT, NodeFitHold
from kqueue.controller.resources import WORKLOADS
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.tas.topology import BoundPod, Node
from kqueue.engine.types import FlavorName, ResourceFlavor, ResourceName
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import Events, model
from tests.controller.test_job_reconciler import job, workload
from tests.engine.builders import make_cq, make_lq

Obj = dict[str, Any]
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CPU, MEMORY, PODS = ResourceName("cpu"), ResourceName("memory"), ResourceName("pods")


def _node(name: str) -> Node:
    return Node(name, {"kubernetes.io/hostname": name}, {CPU: 1000, MEMORY: 8 << 30, PODS: 10})


def _released_pod(name: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "other", "labels": {c.MANAGED_LABEL: "true"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }


class _Setup:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.engine = Engine()
        self.engine.upsert_flavor(ResourceFlavor(FlavorName("on-demand")))
        self.engine.upsert_cluster_queue(make_cq("cq").quota("on-demand", cpu="10").obj())
        self.engine.upsert_local_queue(make_lq("main", "cq", namespace="team-a"))
        self.events = Events()
        self.guard = NodeFitHold(
            engine=lambda: self.engine, kube=cluster.kube, events=self.events, now=lambda: NOW
        )
        self.woken = 0

    async def gang(self) -> Workload:
        wl = workload(job("gang", count=3), admitted=3)
        doc = wl.to_dict()
        doc["metadata"]["name"] = "gang"
        self.cluster.server.add(WORKLOADS, doc)
        self.informer = await self.cluster.informer(WORKLOADS, model(Workload))
        self.engine.upsert_workload(from_api.workload(self.current()))
        return self.current()

    def current(self) -> Workload:
        got = self.informer.store.get("team-a/gang")
        assert got is not None
        return got

    def wake(self) -> None:
        self.woken += 1

    async def admit(self) -> bool:
        await self.cluster.synced()
        ok = await self.guard.admit(self.current(), {"main": 3}, [], self.wake)
        await self.cluster.synced()
        return ok

    def condition(self) -> Obj | None:
        got = self.cluster.server.get(WORKLOADS, "gang", "team-a")
        assert got is not None
        found = [x for x in got["status"].get("conditions", []) if x["type"] == c.NODES_FIT]
        return found[0] if found else None


async def test_held_with_the_numbers_then_released_when_a_node_comes(cluster: FakeCluster) -> None:
    s = _Setup(cluster)
    for n in ("kwok-1", "kwok-2"):
        s.engine.upsert_node(_node(n))
    await s.gang()
    assert not await s.admit()
    cond = s.condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", c.NODES_FIT_INSUFFICIENT)
    assert cond["message"].startswith(
        "3 pods need 1 cpu each; free: kwok-1 1, kwok-2 1; 2 of 3 fit. The workload keeps its quota"
    )
    assert s.events.reasons("gang") == [HELD_EVENT]
    assert s.guard.held == {"team-a/gang"}

    # Checked again with nothing changed: nothing written, nothing told twice.
    assert not await s.admit()
    assert s.events.reasons("gang") == [HELD_EVENT]

    # An event that changes nothing the guard reads (a node's heartbeat) wakes nobody.
    s.engine.upsert_node(_node("kwok-1"))
    s.guard.wake()
    assert s.woken == 0

    s.engine.upsert_node(_node("kwok-3"))
    s.guard.wake()
    assert s.woken == 1 and s.guard.held == frozenset()
    assert await s.admit()
    cond = s.condition()
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", c.NODES_FIT_FITS)
    assert s.events.reasons("gang") == [HELD_EVENT, FITS_EVENT]


async def test_a_released_pod_deleted_before_binding_wakes_the_held(cluster: FakeCluster) -> None:
    s = _Setup(cluster)
    for n in ("kwok-1", "kwok-2", "kwok-3"):
        s.engine.upsert_node(_node(n))
    await s.gang()
    other = _released_pod("p-0")
    s.guard.on_pod("other/p-0", other)
    assert not await s.admit()
    cond = s.condition()
    assert cond is not None and "counting 1 pods of other workloads" in cond["message"]

    # Bound: it moves to the bound pods (the topology feed), no room freed, nobody woken.
    bound = {**other, "spec": {**other["spec"], "nodeName": "kwok-1"}}
    s.guard.on_pod("other/p-0", other, bound)
    s.engine.upsert_pod(BoundPod("other/p-0", "kwok-1", {CPU: 1000}))
    assert s.woken == 0
    assert not await s.admit()

    s.engine.delete_pod("other/p-0")
    s.guard.on_pod_delete("other/p-0", bound)
    assert s.woken == 0, "no longer a released pod: the bound-pod feed tells"
    s.guard.wake()  # the topology feed's part: a bound pod gone
    assert s.woken == 1
    assert await s.admit()


async def test_a_released_pod_ended_before_binding_wakes_the_held(cluster: FakeCluster) -> None:
    s = _Setup(cluster)
    for n in ("kwok-1", "kwok-2", "kwok-3"):
        s.engine.upsert_node(_node(n))
    await s.gang()
    other = _released_pod("p-0")
    s.guard.on_pod("other/p-0", other)
    assert not await s.admit()
    s.guard.on_pod("other/p-0", other, {**other, "status": {"phase": "Failed"}})
    assert s.woken == 1
    assert await s.admit()


async def test_a_gated_pod_wakes_nobody(cluster: FakeCluster) -> None:
    s = _Setup(cluster)
    s.engine.upsert_node(_node("kwok-1"))
    await s.gang()
    assert not await s.admit()
    gated = _released_pod("g-0")
    gated["spec"]["schedulingGates"] = [{"name": c.ADMISSION_GATE}]
    s.guard.on_pod("other/g-0", gated)
    s.guard.on_pod_delete("other/g-0", gated)
    assert s.woken == 0 and s.guard.held == {"team-a/gang"}
