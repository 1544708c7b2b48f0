"""A followed binding (``topologyHandOff: Constraint``) goes through the engine's books: the
gang placement writes the follow and the Workloads the engine re-booked off the hosts it took
(kqueue/controller/gang.py ``follow_binding``, kqueue/engine/tas/follow.py). The case of
docs/topology.md ("stale books"), without a cluster: four rack Jobs fill four racks, low-0 and
low-1 are bound into the racks booked for low-2 and low-3 (admitted, not bound yet), and a
fifth, higher-priority rack Job must preempt."""

from __future__ import annotations

from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gang import PODGROUPS_V1BETA1, GangPlacement, rebooking
from kqueue.controller.gang_topology import Books, booked_where_bound
from kqueue.controller.resources import WORKLOADS
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.tas.topology import Topology
from kqueue.engine.types import WorkloadKey
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import Events
from tests.controller.test_gang import NOW
from tests.controller.test_gang_topology import _assignment, _bound
from tests.controller.test_job_reconciler import World, gated_pods, job, workload
from tests.engine.builders import make_cq, make_engine, t
from tests.engine.tas_support import node, pset, tas_flavor, wl

Obj = dict[str, Any]

RACK = "cloud.example.com/rack"
HOST = "kubernetes.io/hostname"
FLAVOR = "tas"


def _hosts(rack: int) -> list[str]:
    return [f"r{rack}-h{i}" for i in range(4)]


def _tas_pods(name: str) -> list[Obj]:
    """The 4 gated pods of Job ``name``, labelled as kqueue releases TAS pods."""
    pods = gated_pods(job(name, count=4), 4)
    for p in pods:
        p["metadata"]["labels"][c.TAS_LABEL] = "true"
    return pods


def _low(i: int) -> Obj:
    """low-i, 4 pods of 3 cpu requiring a rack, admitted and booked on rack i's hosts."""
    doc = workload(job(f"low-{i}", count=4), admitted=4).to_dict()
    doc["metadata"]["name"] = f"low-{i}"
    doc["spec"]["priority"] = 100
    pod_set = doc["spec"]["podSets"][0]
    pod_set["topologyRequest"] = {"required": RACK}
    pod_set["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    psa = doc["status"]["admission"]["podSetAssignments"][0]
    psa.update(flavors={"cpu": FLAVOR}, resourceUsage={"cpu": "12"},
               topologyAssignment=_assignment(_hosts(i)))
    return doc


def _engine(workloads: list[Workload]) -> Engine:
    """The engine as the manager feeds it: four racks of four 4-cpu hosts, 64 cpu of quota."""
    engine = make_engine(
        tas_flavor(FLAVOR, "racks"),
        make_cq("cq").quota(FLAVOR, cpu="64").preemption(within="LowerPriority").obj(),
        preemptor=ClassicalPreemptor(),
    )
    engine.upsert_topology(Topology("racks", (RACK, HOST)))
    for r in range(4):
        for h in _hosts(r):
            engine.upsert_node(node(h, cpu="4", labels={RACK: f"r{r}"}))
    for w in workloads:
        engine.upsert_workload(from_api.workload(w))
    return engine


def _stored(cluster: FakeCluster, name: str) -> Workload:
    doc = cluster.server.get(WORKLOADS, name, "team-a")
    assert doc is not None
    return Workload.model_validate(doc)


def _racks(w: Workload) -> set[str]:
    assert w.status.admission is not None
    ta = w.status.admission.pod_set_assignments[0].topology_assignment
    assert ta is not None
    return {values[0].split("-")[0] for values, _ in ta.domains()}


async def _follow_two(cluster: FakeCluster, events: Events, *, books: bool) -> Engine:
    """low-0 bound on rack 2's hosts, then low-1 on rack 3's, through the gang placement (with
    the engine's books, or without them as before)."""
    placement = GangPlacement(kube=cluster.kube, events=events, now=lambda: NOW,
                              topology="Constraint")
    placement.enabled, placement.pod_groups = True, PODGROUPS_V1BETA1
    placement.topology_constraints = True
    for i in range(4):
        cluster.server.add(WORKLOADS, _low(i))
    engine = _engine([_stored(cluster, f"low-{i}") for i in range(4)])
    pods = {f"low-{i}": _tas_pods(f"low-{i}") for i in range(4)}

    def lookup(key: str) -> Workload | None:
        return _stored(cluster, key.split("/", 1)[1])

    def movable(other: Workload) -> bool:
        # As the job reconciler's: unpinned, and not all bound where booked.
        return placement.unpinned(other) and not booked_where_bound(other, pods[other.name])

    for name, rack in (("low-0", 2), ("low-1", 3)):
        _bound(pods[name], _hosts(rack))
        await placement.follow_binding(
            _stored(cluster, name), {"main": pods[name]},
            Books(engine, lookup, movable) if books else None,
        )
    return engine


async def test_two_follows_into_other_gangs_racks_re_book_them_and_a_fifth_must_preempt(
    cluster: FakeCluster,
) -> None:
    events = Events()
    engine = await _follow_two(cluster, events, books=True)
    assert {n: _racks(_stored(cluster, n)) for n in ("low-0", "low-1", "low-2", "low-3")} == {
        "low-0": {"r2"}, "low-1": {"r3"}, "low-2": {"r0"}, "low-3": {"r1"},
    }
    assert events.reasons("low-0") == ["TopologyAssignmentFollowed"]
    assert events.reasons("low-2") == ["TopologyAssignmentRebooked"]
    assert events.reasons("low-3") == ["TopologyAssignmentRebooked"]
    high = wl("high", pset("main", 4, required=RACK, cpu="3"), queue="cq", priority=1000)
    # The running engine (its claims) and one rebuilt from the Workloads as written agree.
    rebuilt = _engine([_stored(cluster, f"low-{i}") for i in range(4)])
    for e in (engine, rebuilt):
        e.upsert_workload(high)
        result = e.schedule(t(10))
        assert result.admitted == ()
        assert [p.preemptor for p in result.preempted] == [WorkloadKey("default/high")]


async def test_without_the_books_the_fifth_is_admitted_into_room_that_does_not_exist(
    cluster: FakeCluster,
) -> None:
    """The bug as observed on the cluster (``assert 0 == 1`` evictions): the follows written
    alone count racks 2 and 3 twice and leave racks 0 and 1 free."""
    await _follow_two(cluster, Events(), books=False)
    assert _racks(_stored(cluster, "low-2")) == {"r2"}
    rebuilt = _engine([_stored(cluster, f"low-{i}") for i in range(4)])
    rebuilt.upsert_workload(wl("high", pset("main", 4, required=RACK, cpu="3"), queue="cq",
                               priority=1000))
    result = rebuilt.schedule(t(10))
    assert [a.workload for a in result.admitted] == [WorkloadKey("default/high")]
    assert result.preempted == ()


def test_a_booking_is_a_fact_only_once_every_pod_is_bound_where_it_names() -> None:
    w = Workload.model_validate(_low(0))
    pods = _tas_pods("low-0")
    assert not booked_where_bound(w, pods)  # none bound
    _bound(pods, [*_hosts(0)[:3], None])
    assert not booked_where_bound(w, pods)  # 3 of 4
    _bound(pods, _hosts(0))
    assert booked_where_bound(w, pods)
    _bound(pods, _hosts(2))
    assert not booked_where_bound(w, pods)  # bound elsewhere, not followed yet


async def test_the_job_reconciler_moves_a_booking_only_while_its_pods_are_unpinned_and_unbound(
    cluster: FakeCluster,
) -> None:
    """The job reconciler's books (``_books``): low-0's pods are gated, low-1's all bound
    (kube-scheduler chose its hosts: its booking is a fact or about to follow); pinned pods
    (``NodeSelector``) are never moved."""
    placement = GangPlacement(kube=cluster.kube, events=Events(), now=lambda: NOW,
                              topology="Constraint")
    placement.enabled, placement.pod_groups = True, PODGROUPS_V1BETA1
    placement.topology_constraints = True
    engine = _engine([])
    world = await World.start(cluster, gang=placement, engine=lambda: engine)
    for i in (0, 1):
        j = job(f"low-{i}", count=4)
        pods = _tas_pods(f"low-{i}")
        if i == 1:
            _bound(pods, _hosts(1))
        await world.add_job(j, Workload.model_validate(_low(i)), pods)
    books = world.reconciler._books()
    assert books is not None
    assert [books.movable(_stored(cluster, f"low-{i}")) for i in (0, 1)] == [True, False]
    placement.topology = "NodeSelector"
    assert not books.movable(_stored(cluster, "low-0"))


async def test_a_re_booking_that_meets_a_conflict_is_read_again_and_written(
    cluster: FakeCluster,
) -> None:
    """low-2's re-booking write is answered 409 Conflict once (the Workload changed since it
    was read): it is read again, the re-booked assignment applied to it, and written."""
    events = Events()
    cluster.server.fail("PUT", WORKLOADS, "low-2", code=409, times=1)
    await _follow_two(cluster, events, books=True)
    assert _racks(_stored(cluster, "low-2")) == {"r0"}
    assert events.reasons("low-2") == ["TopologyAssignmentRebooked"]
    puts = [
        r.status for r in cluster.server.requests_to("PUT", WORKLOADS, subresource="status")
        if r.name == "low-2"
    ]
    assert puts == [409, 200]  # the one refused, then the one written


def test_a_re_booking_is_not_applied_to_a_workload_no_longer_admitted() -> None:
    """Read again after a conflict, a Workload evicted meanwhile gets nothing written: its
    booking was released, and the engine books it afresh when it is admitted again."""
    low = Workload.model_validate(_low(2))
    change = rebooking(low)
    evicted = _low(2)
    evicted["status"].pop("admission")
    assert change(evicted) is None
    elsewhere = _low(2)
    elsewhere["status"]["admission"]["clusterQueue"] = "other"
    assert change(elsewhere) is None
    same = _low(2)
    same["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = _assignment(
        _hosts(0)
    )
    written = change(same)
    assert written is not None
    assert written["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == (
        low.to_dict()["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    )
