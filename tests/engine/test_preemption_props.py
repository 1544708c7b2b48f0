"""Properties of preemption over random cohorts, policies and workloads.

* Every Preempt is justified by the policy its reason names: the victim's ClusterQueue relative to
  the preemptor's, its preemption priority against the preemptor's scheduling priority, and
  ``borrowWithinCohort`` for reclaims while borrowing. A non-preemptible workload is never a victim.
* Once the victims are gone, the preemptor fits (it is admitted in the next cycle).
* Quota is never exceeded at any level of the tree.
* Every simulation leaves the snapshot as it found it (``CheckedPreemptor``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kqueue.engine.cycle import Preempt
from kqueue.engine.engine import Engine
from kqueue.engine.preemption.preemptibility import resolve_preemptibility
from kqueue.engine.preemption.seam import NoPreemption
from kqueue.engine.types import (
    BorrowWithinCohortPolicy,
    ClusterQueueName,
    ClusterQueueSpec,
    FlavorName,
    Preemptibility,
    PreemptionPolicy,
    PreemptionReason,
    ResourceName,
    Workload,
    WorkloadKey,
)
from kqueue.engine.workload import AdmittedWorkload, WorkloadInfo

from .builders import (
    admitted_flavors,
    make_cq,
    make_engine,
    make_flavor,
    make_workload,
    run_until_quiet,
    t,
    with_preemption,
)
from .test_preemption import CheckedPreemptor

F = make_flavor("default").obj()
CPU = (FlavorName("default"), ResourceName("cpu"))
NAMES = ("a", "b", "c")


@dataclass(frozen=True)
class CQ:
    nominal: int
    borrowing_limit: int | None
    within: str
    reclaim: str
    borrow_within: str
    max_threshold: int | None
    preemptible_threshold: int | None
    order: str


@dataclass(frozen=True)
class W:
    cq: int
    priority: int
    extra: int
    cpu: int
    created: int
    non_preemptible: bool


cq_st = st.builds(
    CQ,
    nominal=st.integers(0, 5),
    borrowing_limit=st.one_of(st.none(), st.integers(0, 4)),
    within=st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
    reclaim=st.sampled_from(["Never", "LowerPriority", "LowerPriority", "Any", "Any"]),
    borrow_within=st.sampled_from(["Never", "LowerPriority"]),
    max_threshold=st.one_of(st.none(), st.integers(0, 5)),
    preemptible_threshold=st.one_of(st.none(), st.none(), st.integers(0, 6)),
    order=st.sampled_from(["Newest", "Oldest"]),
)


def w_st(n_cqs: int, priorities: st.SearchStrategy[int]) -> st.SearchStrategy[W]:
    return st.builds(
        W,
        cq=st.integers(0, n_cqs - 1),
        priority=priorities,
        extra=st.sampled_from([0, 0, 0, 2, 10]),
        cpu=st.integers(1, 4),
        created=st.integers(0, 20),
        non_preemptible=st.sampled_from([False, False, False, True]),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[CQ], list[W], W]:
    cqs = draw(st.lists(cq_st, min_size=1, max_size=3))
    ws = draw(st.lists(w_st(len(cqs), st.integers(0, 5)), min_size=1, max_size=10))
    preemptor = draw(w_st(len(cqs), st.integers(2, 8)))
    return cqs, ws, preemptor


def _spec(i: int, c: CQ, cohort: bool) -> ClusterQueueSpec:
    b = make_cq(NAMES[i])
    if cohort:
        b = b.cohort("co")
    limit = None if c.borrowing_limit is None else str(c.borrowing_limit)
    spec = (
        b.quota("default", cpu=str(c.nominal), borrowing_limit=limit)
        .preemption(c.within, c.reclaim, c.borrow_within, c.preemptible_threshold)
        .obj()
    )
    return with_preemption(
        spec,
        borrow_within_cohort_max_priority_threshold=c.max_threshold,
        preemption_order=c.order,
    )


def _workload(name: str, w: W) -> Workload:
    b = (
        make_workload(name)
        .queue(NAMES[w.cq])
        .priority(w.priority)
        .preemption_priority(w.priority + w.extra)
        .request("cpu", str(w.cpu))
        .created(w.created)
    )
    if w.non_preemptible:
        b = b.non_preemptible()
    return b.obj()


def _satisfies(policy: PreemptionPolicy, preemptor: WorkloadInfo, victim: AdmittedWorkload) -> bool:
    mine, theirs = preemptor.priority, victim.info.preemption_priority
    if policy == PreemptionPolicy.NEVER:
        return False
    if policy == PreemptionPolicy.ANY:
        return True
    if theirs < mine:
        return True
    return (
        policy == PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        and theirs == mine
        and preemptor.order_time() < victim.info.order_time()
    )


def _check_justified(
    engine: Engine, p: Preempt, before: dict[WorkloadKey, AdmittedWorkload]
) -> None:
    victim = before[p.victim]
    preemptor = engine.pending_workload(p.preemptor)
    assert preemptor is not None
    lq = engine.local_queue(preemptor.local_queue)
    assert lq is not None
    pspec = engine.cache.cluster_queues[lq.cluster_queue]
    vspec = engine.cache.cluster_queues[victim.cluster_queue]
    res = resolve_preemptibility(
        spec=victim.info.obj.preemptibility,
        owner_label=None,
        pod_label=None,
        preemption_priority=victim.info.preemption_priority,
        priority_threshold=vspec.preemption.preemptible_priority_threshold,
    )
    assert res.value == Preemptibility.PREEMPTIBLE, f"non-preemptible victim {p.victim}"
    policy = pspec.preemption
    if p.reason == PreemptionReason.IN_CLUSTER_QUEUE:
        assert victim.cluster_queue == pspec.name
        assert _satisfies(policy.within_cluster_queue, preemptor, victim)
        return
    assert victim.cluster_queue != pspec.name
    assert pspec.cohort is not None and pspec.cohort == vspec.cohort
    assert _satisfies(policy.reclaim_within_cohort, preemptor, victim)
    # Reclaiming means taking back lent quota: the victim's ClusterQueue was borrowing.
    used = _cpu_used(before, victim.cluster_queue)
    assert used > vspec.quotas()[CPU].nominal
    if p.reason == PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING:
        assert policy.borrow_within_cohort != BorrowWithinCohortPolicy.NEVER
        assert victim.info.preemption_priority < preemptor.priority
        limit = policy.borrow_within_cohort_max_priority_threshold
        assert limit is None or victim.info.preemption_priority <= limit
    else:
        assert p.reason == PreemptionReason.IN_COHORT_RECLAMATION


def _cpu_used(before: dict[WorkloadKey, AdmittedWorkload], cq: ClusterQueueName) -> int:
    return sum(aw.usage.get(CPU, 0) for aw in before.values() if aw.cluster_queue == cq)


def _check_quota(engine: Engine) -> None:
    snap = engine.cache.snapshot()
    for cq in snap.cluster_queues.values():
        for fr in cq.spec.quotas():
            assert cq.available(fr) >= 0, f"{cq.name} over quota for {fr}"


@st.composite
def reclaim_scenarios(draw: st.DrawFn) -> tuple[list[CQ], list[W], W]:
    """Other ClusterQueues borrow the preemptor's quota: the cohort reasons get exercised."""
    cqs = draw(st.lists(cq_st, min_size=2, max_size=3))
    cqs[0] = replace(cqs[0], reclaim="LowerPriority", borrow_within="LowerPriority")
    others = st.integers(1, len(cqs) - 1)
    ws = draw(
        st.lists(
            st.builds(
                W,
                cq=others,
                priority=st.integers(0, 5),
                extra=st.sampled_from([0, 0, 2]),
                cpu=st.integers(1, 4),
                created=st.integers(0, 20),
                non_preemptible=st.sampled_from([False, False, False, True]),
            ),
            min_size=2,
            max_size=8,
        )
    )
    lender = cqs[0]
    preemptor = draw(
        st.builds(
            W,
            cq=st.just(0),
            priority=st.integers(1, 8),
            extra=st.just(0),
            cpu=st.integers(max(1, lender.nominal - 1), lender.nominal + 3),
            created=st.integers(0, 20),
            non_preemptible=st.sampled_from([False, False, True]),
        )
    )
    return cqs, ws, preemptor


SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(scenarios())
def test_preemption_properties(scenario: tuple[list[CQ], list[W], W]) -> None:
    _run(*scenario)


@SETTINGS
@given(reclaim_scenarios())
def test_reclaim_properties(scenario: tuple[list[CQ], list[W], W]) -> None:
    _run(*scenario)


def _run(cqs: list[CQ], ws: list[W], pw: W) -> None:
    cohort = len(cqs) > 1
    specs = [_spec(i, c, cohort) for i, c in enumerate(cqs)]
    # The starting state is what fits without preemption: preemptions during the set-up would
    # leave victims marked as evicting, which the preemptor under test must not inherit.
    engine = make_engine(
        F, *specs, *[_workload(f"w{i}", w) for i, w in enumerate(ws)], preemptor=NoPreemption()
    )
    run_until_quiet(engine, start=0)
    for key in sorted(engine.queues.pending):
        engine.finish(key)
    _check_quota(engine)
    preemptor = CheckedPreemptor()
    engine.preemptor = preemptor
    engine.upsert_workload(_workload("preemptor", pw))
    before = {k: v for k, v in engine.cache.workloads.items()}
    r = engine.schedule(t(100))
    _check_quota(engine)
    for p in r.preempted:
        _check_justified(engine, p, before)
    event("preempted" if r.preempted else "no preemption")
    event(", ".join(sorted({str(p.reason) for p in r.preempted})) or "-")
    if not r.preempted:
        return
    for p in r.preempted:
        engine.evicted(p.victim)
        engine.finish(p.victim)
    r2 = engine.schedule(t(101))
    assert "preemptor" in admitted_flavors(r2)
    _check_quota(engine)
