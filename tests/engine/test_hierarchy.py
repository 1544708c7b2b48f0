"""Quota in the cohort tree: Kueue's available()/potentialAvailable() and usage bubbling."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kqueue.engine.cache import Cache
from kqueue.engine.hierarchy import find_height_of_lowest_subtree_that_fits
from kqueue.engine.types import (
    Admission,
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    FlavorName,
    FlavorQuotas,
    PodSetAssignment,
    PodSetName,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    Workload,
)
from kqueue.engine.workload import AdmittedWorkload, make_info

F = FlavorName("default")
CPU = ResourceName("cpu")
FR = (F, CPU)


def cq(
    name: str,
    nominal: int,
    cohort: str | None = None,
    borrowing: int | None = None,
    lending: int | None = None,
) -> ClusterQueueSpec:
    rg = ResourceGroup(
        (CPU,), (FlavorQuotas(F, {CPU: ResourceQuota(nominal, borrowing, lending)}),)
    )
    return ClusterQueueSpec(
        ClusterQueueName(name), CohortName(cohort) if cohort else None, (rg,)
    )


def cohort(
    name: str,
    parent: str | None = None,
    nominal: int = 0,
    borrowing: int | None = None,
    lending: int | None = None,
) -> CohortSpec:
    rgs = ()
    if nominal or borrowing is not None or lending is not None:
        rgs = (
            ResourceGroup(
                (CPU,), (FlavorQuotas(F, {CPU: ResourceQuota(nominal, borrowing, lending)}),)
            ),
        )
    return CohortSpec(CohortName(name), CohortName(parent) if parent else None, rgs)


def holding(name: str, cq_name: str, amount: int) -> AdmittedWorkload:
    wl = Workload(namespace="ns", name=name, queue_name="lq", pod_sets=())
    adm = Admission(
        ClusterQueueName(cq_name),
        (PodSetAssignment(PodSetName("main"), {CPU: F}, {CPU: amount}, 1),),
    )
    return AdmittedWorkload.of(make_info(wl, {}), adm)


@dataclass
class Case:
    name: str
    cqs: list[ClusterQueueSpec]
    cohorts: list[CohortSpec] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    want_available: dict[str, int] = field(default_factory=dict)
    want_potential: dict[str, int] = field(default_factory=dict)


CASES = [
    Case(
        "no cohort: nominal minus usage",
        [cq("a", 10)],
        usage={"a": 4},
        want_available={"a": 6},
        want_potential={"a": 10},
    ),
    Case(
        "flat cohort: unused quota of others is borrowable",
        [cq("a", 10, "c"), cq("b", 10, "c")],
        usage={"a": 4, "b": 2},
        want_available={"a": 14, "b": 14},
        want_potential={"a": 20, "b": 20},
    ),
    Case(
        "borrowing limit caps what comes from the cohort",
        [cq("a", 10, "c", borrowing=3), cq("b", 10, "c")],
        usage={"a": 4},
        want_available={"a": 9, "b": 16},
        want_potential={"a": 13, "b": 20},
    ),
    Case(
        "lending limit keeps part of the quota local",
        [cq("a", 10, "c", lending=4), cq("b", 10, "c")],
        usage={},
        want_available={"a": 20, "b": 14},
        want_potential={"a": 20, "b": 14},
    ),
    Case(
        "lending limit: local usage does not eat the lent part first",
        [cq("a", 10, "c", lending=4), cq("b", 10, "c")],
        usage={"a": 6},
        want_available={"a": 14, "b": 14},
    ),
    Case(
        "over-admission shows as negative available",
        [cq("a", 2, "c"), cq("b", 0, "c")],
        usage={"a": 5},
        want_available={"a": -3, "b": -3},
    ),
    Case(
        "hierarchical: cohort quota and its borrowing limit",
        [cq("a", 10, "left"), cq("b", 10, "right")],
        [
            cohort("root"),
            cohort("left", "root", nominal=5, borrowing=2),
            cohort("right", "root", nominal=0),
        ],
        usage={"b": 10},
        # a: its 10 + left's 5 + at most 2 more from root (which has right's 0 unused).
        want_available={"a": 15, "b": 15},
        want_potential={"a": 17, "b": 25},
    ),
    Case(
        "hierarchical: lending limit of a cohort",
        [cq("a", 10, "left"), cq("b", 10, "right")],
        [cohort("root"), cohort("left", "root", lending=3), cohort("right", "root")],
        want_available={"a": 20, "b": 13},
        want_potential={"a": 20, "b": 13},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_available(case: Case) -> None:
    cache = Cache()
    cache.upsert_flavor(ResourceFlavor(F))
    for spec in case.cohorts:
        cache.upsert_cohort(spec)
    for spec in case.cqs:
        cache.upsert_cluster_queue(spec)
    for name, amount in case.usage.items():
        cache.add_workload(holding(f"w-{name}", name, amount))
    snap = cache.snapshot()
    for name, want in case.want_available.items():
        assert snap.cluster_queues[ClusterQueueName(name)].available(FR) == want, name
    for name, want in case.want_potential.items():
        assert snap.cluster_queues[ClusterQueueName(name)].potential_available(FR) == want, name


def test_usage_bubbles_past_local_quota_and_back() -> None:
    cache = Cache()
    cache.upsert_cluster_queue(cq("a", 10, "c", lending=4))
    cache.upsert_cluster_queue(cq("b", 10, "c"))
    w1, w2 = holding("w1", "a", 5), holding("w2", "a", 4)
    cache.add_workload(w1)
    root = cache.cohort_node(CohortName("c"))
    assert root is not None
    # a keeps 6 local; 5 fits there, nothing stored in the cohort.
    assert root.resources.usage.get(FR, 0) == 0
    cache.add_workload(w2)
    assert root.resources.usage[FR] == 3
    cache.remove_workload(w1.key)
    assert root.resources.usage.get(FR, 0) == 0
    cache.check_consistency()


def test_snapshot_simulations_restore_exactly() -> None:
    cache = Cache()
    cache.upsert_cohort(cohort("root"))
    cache.upsert_cohort(cohort("left", "root", nominal=3, lending=1))
    cache.upsert_cluster_queue(cq("a", 10, "left", lending=2))
    cache.upsert_cluster_queue(cq("b", 5, "root", borrowing=4))
    ws = [holding("w1", "a", 7), holding("w2", "a", 6), holding("w3", "b", 8)]
    for w in ws:
        cache.add_workload(w)
    snap = cache.snapshot()
    before = snap.state()
    for subset in ([ws[0]], [ws[1], ws[2]], ws, [ws[2], ws[0]]):
        restore = snap.simulate_removal(subset)
        assert snap.state() != before
        restore()
        assert snap.state() == before
    restore = snap.simulate_usage(ClusterQueueName("a"), {FR: 3})
    restore()
    assert snap.state() == before
    # The cache is untouched by anything done to the snapshot.
    snap.remove_workload(ws[0])
    assert cache.snapshot().state() == before


def test_borrowing_height() -> None:
    cache = Cache()
    cache.upsert_cohort(cohort("root"))
    cache.upsert_cohort(cohort("left", "root", nominal=5))
    cache.upsert_cluster_queue(cq("a", 10, "left"))
    cache.upsert_cluster_queue(cq("b", 10, "root"))
    a = cache.snapshot().cluster_queues[ClusterQueueName("a")]
    assert find_height_of_lowest_subtree_that_fits(a, FR, 10) == (0, True)
    # Fits in "left" (height 1, has a parent: may reclaim within it).
    assert find_height_of_lowest_subtree_that_fits(a, FR, 14) == (1, True)
    # Needs the root.
    assert find_height_of_lowest_subtree_that_fits(a, FR, 20) == (2, False)


def test_cohort_cycle_makes_cluster_queues_inactive() -> None:
    cache = Cache()
    cache.upsert_flavor(ResourceFlavor(F))
    cache.upsert_cohort(cohort("x", "y"))
    cache.upsert_cohort(cohort("y", "x"))
    cache.upsert_cluster_queue(cq("a", 10, "x"))
    why = cache.inactive(ClusterQueueName("a"))
    assert why is not None and "cycle" in why.message
    cache.snapshot()  # terminates
