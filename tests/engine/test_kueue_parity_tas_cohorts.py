"""More of Kueue's ``TestScheduleForTASCohorts``, ``TestScheduleForTASPreemption`` and
``TestScheduleForTAS``
(pkg/scheduler/scheduler_tas_test.go), ported by name as in test_kueue_parity_tas.py: one cycle,
the classical preemptor; ``want`` the new assignments, ``want_pending`` the start of the pending
message (Kueue's, without its "Total nodes: ...; excluded: ..." statistics), ``want_preempted``
the victims and ``REASONS`` Kueue's pending reasons. Only the
TASRecomputeAssignmentWithinSchedulingCycle-enabled variant of a case is ported: kqueue always
recomputes (docs/topology.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kqueue.engine.tas.topology import Node
from kqueue.engine.types import ClusterQueueSpec, FlavorName, PodSet, ResourceFlavor, ResourceName

from .builders import make_cohort, make_cq, q
from .tas_support import HOST, SINGLE, Cluster, Held, node, pset, wl
from .test_kueue_parity_tas import (
    CQ_A,
    CQ_B,
    LQS,
    MAIN,
    SINGLE_NODE,
    TAS,
    Case,
    _check,
    _cohort_cq,
)

CQ_C = _cohort_cq("tas-cq-c")


def _two_nodes_8_cpu(*extra_labels: dict[str, str]) -> list[Node]:
    return [
        node(f"node-{i}", cpu="8", labels=labels)
        for i, labels in enumerate(extra_labels or ({}, {}), start=1)
    ]


def _cq(
    name: str, *flavors: str, cpu: str = "8", within: str = "Never", borrowing: str | None = None
) -> ClusterQueueSpec:
    b = make_cq(name).cohort("tas-cohort-main")
    for f in flavors:
        if borrowing is None:
            b.quota(f, cpu=cpu)
        else:
            b.quota(f, cpu=cpu, borrowing_limit=borrowing)
    return b.preemption(within=within).obj()


def _flavor_on(name: str, value: str) -> ResourceFlavor:
    """A flavor over the nodes labelled ``tas-flavor: value`` (Kueue's NodeLabel)."""
    return ResourceFlavor(FlavorName(name), {"tas-flavor": value}, topology_name=SINGLE.name)


FLAVOR_1 = _flavor_on("tas-flavor-1", "f1")
FLAVOR_2 = _flavor_on("tas-flavor-2", "f2")

COHORTS: dict[str, Case] = {
    "reclaim within cohort; capacity reserved by preempting workload does not allow to schedule "
    "last workload; TASRecomputeAssignmentWithinSchedulingCycle enabled": Case(
        Cluster(
            [node("x1", cpu="3", memory="5Gi"), node("y1", cpu="5", memory="3Gi")],
            [SINGLE], [TAS], [CQ_A, CQ_B, CQ_C],  # type: ignore[list-item]
            [
                wl("a1-admitted", pset("one", 5, required=HOST, cpu="1"), queue="tas-lq-a",
                   priority=2, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["x1"], 3), (["y1"], 2)])]),
                wl("a2-admitted", pset("one", 1, required=HOST, cpu="1"), queue="tas-lq-a",
                   priority=1, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["y1"], 1)])]),
                wl("a3-admitted", pset("one", 1, required=HOST, cpu="1"), queue="tas-lq-a",
                   priority=1, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["y1"], 1)])]),
                wl("b1", pset("one", 3, required=HOST, cpu="1"), queue="tas-lq-b", priority=3),
                wl("c1", pset("one", 1, preferred=HOST, cpu="1"), queue="tas-lq-c", priority=1),
            ],
            lqs=LQS,
        ),
        want_pending={
            "b1": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" allows '
            "to fit only 1 out of 3 pod(s)",
        },
        # kqueue's message starts with the cycle's re-check ("Workload no longer fits after
        # processing another workload: ") where Kueue's says "couldn't assign flavors to pod set
        # one: "; the same placement failure.
        want_pending_contains={
            "c1": 'topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s)',
        },
        want_preempted={"a1-admitted", "a2-admitted", "a3-admitted"},
    ),
    "two flavors in cohort; re-evaluation is sticky and does not switch to second flavor; "
    "TASRecomputeAssignmentWithinSchedulingCycle enabled": Case(
        Cluster(
            _two_nodes_8_cpu({"tas-flavor": "f1"}, {"tas-flavor": "f2"}),
            [SINGLE], [FLAVOR_1, FLAVOR_2],
            [_cq("tas-cq-a", "tas-flavor-1"), _cq("tas-cq-b", "tas-flavor-1", "tas-flavor-2")],
            [
                wl("a1", pset("one", 1, required=HOST, cpu="8"), queue="tas-lq-a", priority=10,
                   created=-60),
                wl("b1", pset("one", 1, required=HOST, cpu="8"), queue="tas-lq-b", priority=5),
            ],
            lqs=LQS,
        ),
        want={"a1": {"one": [(("node-1",), 1)]}},
        # b1 stays on tas-flavor-1 (node-2 of tas-flavor-2 is free); kqueue's message starts
        # with the cycle's re-check, as above.
        want_pending_contains={
            "b1": 'topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s)',
        },
    ),
    "two workloads in cohort nominated to the same node; enough capacity to admit both; "
    "TASRecomputeAssignmentWithinSchedulingCycle enabled": Case(
        Cluster(
            _two_nodes_8_cpu(), [SINGLE], [TAS],
            [_cq("tas-cq-a", "tas-default"), _cq("tas-cq-b", "tas-default")],
            [
                wl("a1", pset("one", 1, required=HOST, cpu="8"), queue="tas-lq-a", priority=10,
                   created=-60),
                wl("b1", pset("one", 1, required=HOST, cpu="8"), queue="tas-lq-b", priority=5),
            ],
            lqs=LQS,
        ),
        want={"a1": {"one": [(("node-1",), 1)]}, "b1": {"one": [(("node-2",), 1)]}},
    ),
    "workload with preemption target recomputes stale TAS assignment in cohort; "
    "TASRecomputeAssignmentWithinSchedulingCycle enabled": Case(
        Cluster(
            [node("node-1", cpu="1"), node("node-2", cpu="2"), node("node-3", cpu="2")],
            [SINGLE], [TAS],
            [_cq("tas-cq-a", "tas-default", cpu="2"),
             _cq("tas-cq-b", "tas-default", cpu="2", within="LowerPriority", borrowing="0")],
            [
                wl("b-low-admitted", pset("one", 1, required=HOST, cpu="1"), queue="tas-lq-b",
                   priority=1, held_in="tas-cq-b",
                   held=[Held("one", "tas-default", [(["node-1"], 1)])]),
                wl("a1", pset("one", 1, preferred=HOST, cpu="2"), queue="tas-lq-a", priority=2,
                   created=-60),
                wl("b1", pset("one", 1, preferred=HOST, cpu="2"), queue="tas-lq-b", priority=2),
            ],
            lqs=LQS,
        ),
        want={"a1": {"one": [(("node-2",), 1)]}},
        want_pending={
            "b1": "couldn't assign flavors to pod set one: insufficient unused quota for cpu in "
            "flavor tas-default, 1 more needed",
        },
        want_preempted={"b-low-admitted"},
    ),
}

GPU = ResourceName("example.com/gpu")


def _gpu(ps: PodSet, amount: str) -> PodSet:
    """``ps`` requesting ``amount`` of example.com/gpu per pod too."""
    return replace(ps, requests={**ps.requests, GPU: q(GPU, amount)})


GPU_NODES = [
    Node(name, {HOST: name, "tas-node": "true"},
         {ResourceName("cpu"): q("cpu", "8"), GPU: 8,
          ResourceName("pods"): 10})
    for name in ("node-1", "node-2")
]


def _borrowing_only_cq(name: str) -> ClusterQueueSpec:
    """Nominal 0, borrowing up to the cohort's 16 (Kueue's case's ClusterQueues)."""
    return make_cq(name).cohort("tas-cohort-main").quota(
        "tas-default", cpu="0", **{"example.com/gpu": "0"},
        borrowing_limit={"cpu": "16", "example.com/gpu": "16"},
    ).preemption(within="LowerPriority", reclaim="Any", borrow_within="LowerPriority").obj()


COHORTS |= {
    "reclaim within cohort; preempting with partial admission": Case(
        Cluster(
            [node("x1", cpu="3", memory="5Gi"), node("y1", cpu="5", memory="3Gi")],
            [SINGLE], [TAS], [CQ_A, CQ_B],  # type: ignore[list-item]
            [
                # As Kueue's fixture: a pod set of 4 whose topology assignment places 5 pods
                # on y1 (its quota counts 4, y1 is full).
                wl("a1-admitted", pset("one", 4, required=HOST, cpu="1"), queue="tas-lq-a",
                   priority=3, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["y1"], 5)])]),
                wl("a2-admitted", pset("one", 3, required=HOST, cpu="1"), queue="tas-lq-a",
                   priority=2, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["x1"], 3)])]),
                wl("b1", pset("one", 4, required=HOST, min_count=3, cpu="1", memory="1"),
                   queue="tas-lq-b", priority=3),
            ],
            lqs=LQS,
        ),
        want_pending={
            "b1": "couldn't assign flavors to pod set one: insufficient unused quota for cpu in "
            "flavor tas-default, 2 more needed",
        },
        want_preempted={"a2-admitted"},
    ),
    "preempting workload without targets doesn't reserve capacity when it can always reclaim":
    Case(
        Cluster(
            [node("y1", cpu="5", memory="3Gi")], [SINGLE], [TAS],
            [make_cq("tas-cq-a").cohort("tas-cohort-main").quota(
                "tas-default", cpu="8", memory="4Gi", borrowing_limit="0"
            ).preemption(within="LowerPriority", reclaim="Any").obj(), CQ_B],  # type: ignore[list-item]
            [
                wl("a1-admitted", pset("one", 2, required=HOST, cpu="1"), queue="tas-lq-a",
                   priority=2, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["y1"], 2)])]),
                wl("a2", pset("one", 4, preferred=HOST, cpu="1"), queue="tas-lq-a", priority=2),
                wl("b1", pset("one", 3, preferred=HOST, cpu="1"), queue="tas-lq-b", priority=1),
            ],
            lqs=LQS,
        ),
        want={"b1": {"one": [(("y1",), 3)]}},
        want_pending={
            "a2": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" allows '
            "to fit only 3 out of 4 pod(s)",
        },
    ),
    "preempt in multiple flavors out of which one requires update Fit -> Preempt due to "
    "fragmentation": Case(
        Cluster(
            GPU_NODES, [SINGLE], [TAS],
            [_borrowing_only_cq("tas-cq-a"), _borrowing_only_cq("tas-cq-b")],
            [
                wl("low-cpu", pset("one", 2, required=HOST, cpu="5"), queue="tas-lq-a",
                   priority=-1000, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["node-1"], 1), (["node-2"], 1)])]),
                wl("low-gpu", _gpu(pset("one", 2, required=HOST, cpu="10m"), "8"),
                   queue="tas-lq-a", priority=-1000, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["node-1"], 1), (["node-2"], 1)])]),
                wl("standard", _gpu(pset("one", 1, required=HOST, cpu="5"), "8"),
                   queue="tas-lq-b", priority=0),
            ],
            cohorts=[make_cohort("tas-cohort-main").quota(
                "tas-default", cpu="16", **{"example.com/gpu": "16"}).obj()],
            lqs=LQS,
        ),
        want_pending={
            "standard": "couldn't assign flavors to pod set one: insufficient unused quota for "
            "example.com/gpu in flavor tas-default, 8 more needed",
        },
        want_preempted={"low-cpu", "low-gpu"},
    ),
}

PREEMPTION: dict[str, Case] = {
    "workload preempted due to quota is using deleted Node": Case(
        Cluster(
            [node("x1", cpu="5", memory="5Gi"), node("y1", cpu="5", memory="5Gi")],
            [SINGLE], [TAS],
            [make_cq("tas-main").quota("tas-default", cpu="10", memory="10Gi")
             .preemption(within="LowerPriority").obj()],
            [
                wl("foo", pset("one", 10, preferred=HOST, cpu="1"), priority=3),
                # Placed on z1, a node that no longer exists.
                wl("low-priority-admitted", pset("one", 1, required=HOST, cpu="5"), priority=1,
                   held_in="tas-main", held=[Held("one", "tas-default", [(["z1"], 1)])]),
            ],
        ),
        want_pending={
            "foo": "couldn't assign flavors to pod set one: insufficient unused quota for cpu in "
            "flavor tas-default, 5 more needed",
        },
        want_preempted={"low-priority-admitted"},
    ),
    "preempt in multiple flavors out of which one requires update Fit -> Preempt due to "
    "fragmentation": Case(
        Cluster(
            [node("x1", cpu="5", memory="5Gi"), node("y1", cpu="5", memory="5Gi")],
            [SINGLE], [TAS],
            [make_cq("tas-main").quota("tas-default", cpu="10", memory="10Gi")
             .preemption(within="LowerPriority").obj()],
            [
                wl("low-cpu", pset("one", 2, required=HOST, cpu="3"), priority=-1000,
                   held_in="tas-main",
                   held=[Held("one", "tas-default", [(["x1"], 1), (["y1"], 1)])]),
                wl("low-mem", pset("one", 2, required=HOST, cpu="10m", memory="5Gi"),
                   priority=-1000, held_in="tas-main",
                   held=[Held("one", "tas-default", [(["x1"], 1), (["y1"], 1)])]),
                wl("high-priority", pset("one", 1, required=HOST, cpu="3", memory="5Gi"),
                   priority=0),
            ],
        ),
        want_pending={
            "high-priority": "couldn't assign flavors to pod set one: insufficient unused quota "
            "for memory in flavor tas-default, 5Gi more needed",
        },
        want_preempted={"low-cpu", "low-mem"},
    ),
}

SCHEDULE_FOR_TAS: dict[str, Case] = {
    "admits workload with zero-quantity request for resource not in ClusterQueue with TAS": Case(
        Cluster(SINGLE_NODE, [SINGLE], [TAS], [MAIN],
                [wl("foo", _gpu(pset("one", 1, preferred=HOST, cpu="1"), "0"))]),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
}

# Kueue's wantEvents reason per pending workload, by case name.
REASONS: dict[str, dict[str, str]] = {
    "reclaim within cohort; capacity reserved by preempting workload does not allow to schedule "
    "last workload; TASRecomputeAssignmentWithinSchedulingCycle enabled": {
        "b1": "WaitingForPreemptedWorkloads", "c1": "WaitingForPreemptedWorkloads"},
    "two flavors in cohort; re-evaluation is sticky and does not switch to second flavor; "
    "TASRecomputeAssignmentWithinSchedulingCycle enabled": {"b1": "WaitingForQuota"},
    "workload with preemption target recomputes stale TAS assignment in cohort; "
    "TASRecomputeAssignmentWithinSchedulingCycle enabled": {
        "b1": "WaitingForPreemptedWorkloads"},
    "reclaim within cohort; preempting with partial admission": {
        "b1": "WaitingForPreemptedWorkloads"},
    "preempting workload without targets doesn't reserve capacity when it can always reclaim": {
        "a2": "WaitingForQuota"},
    "preempt in multiple flavors out of which one requires update Fit -> Preempt due to "
    "fragmentation": {"standard": "WaitingForPreemptedWorkloads",
                      "high-priority": "WaitingForPreemptedWorkloads"},
    "workload preempted due to quota is using deleted Node": {
        "foo": "WaitingForPreemptedWorkloads"},
}


@pytest.mark.parametrize("name", sorted(COHORTS))
def test_schedule_for_tas_cohorts(name: str) -> None:
    _check(COHORTS[name], name, REASONS.get(name, {}))


@pytest.mark.parametrize("name", sorted(PREEMPTION))
def test_schedule_for_tas_preemption(name: str) -> None:
    _check(PREEMPTION[name], name, REASONS.get(name, {}))


@pytest.mark.parametrize("name", sorted(SCHEDULE_FOR_TAS))
def test_schedule_for_tas(name: str) -> None:
    _check(SCHEDULE_FOR_TAS[name], name, REASONS.get(name, {}))
