"""A batched ``schedule`` (several admissions per ClusterQueue per call) decides what the same
cycles decide when run one call at a time (merged_cycles.py, Kueue issue #14477).

Two engines get the same random scenario: ClusterQueues in cohorts (StrictFIFO and
BestEffortFIFO, preemption on or off), two flavors, workloads pending with priorities, some
already holding quota (victims for preemption). One engine runs ``schedule(now, admissions=n)``,
the other runs single cycles at the same ``now`` as many times as the batch did. Then some
admitted workloads finish and both go again. The admissions (workload, ClusterQueue, flavors,
counts, in order), the preemptions (in order), the evictions, each workload's last pending
reason and message, the quota held and what waits where must be the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey

from .builders import make_cohort, make_cq, make_flavor, make_lq, make_workload, t

CQS = {"a1": "team-a", "a2": "team-a", "a3": "team-a", "b1": "team-b", "solo": None}


@dataclass(frozen=True)
class CQChoice:
    nominal: tuple[int, int]
    borrowing: int | None
    strict: bool
    preempt: bool


@dataclass(frozen=True)
class WlChoice:
    cq: str
    priority: int
    cpu: int
    count: int
    partial: bool
    held_in: str | None  # already holding quota in this flavor ("f1"/"f2")
    created: int


cq_choice = st.builds(
    CQChoice,
    st.tuples(st.integers(0, 12), st.integers(0, 6)),
    st.one_of(st.none(), st.integers(0, 6)),
    st.booleans(),
    st.booleans(),
)
wl_choice = st.builds(
    WlChoice,
    st.sampled_from(sorted(CQS)),
    st.integers(0, 3),
    st.integers(1, 4),
    st.integers(1, 3),
    st.booleans(),
    st.sampled_from([None, None, None, "f1", "f2"]),
    st.integers(0, 5),
)


def _build(cqs: dict[str, CQChoice], wls: list[WlChoice]) -> Engine:
    engine = Engine()
    for f in ("f1", "f2"):
        engine.upsert_flavor(make_flavor(f).obj())
    engine.upsert_cohort(make_cohort("team-a").obj())
    engine.upsert_cohort(make_cohort("team-b").quota("f1", cpu="4").obj())
    for name, c in sorted(cqs.items()):
        b = make_cq(name)
        cohort = CQS[name]
        if cohort is not None:
            b = b.cohort(cohort)
        if c.strict:
            b = b.strict_fifo()
        if c.preempt:
            b = b.preemption(within="LowerPriority", reclaim="Any")
        bl = str(c.borrowing) if cohort is not None and c.borrowing is not None else None
        b = b.quota("f1", cpu=str(c.nominal[0]), borrowing_limit=bl)
        b = b.quota("f2", cpu=str(c.nominal[1]))
        engine.upsert_cluster_queue(b.obj())
        engine.upsert_local_queue(make_lq(name, name))
    for i, w in enumerate(wls):
        wb = make_workload(f"w{i:02d}").queue(w.cq).priority(w.priority).created(w.created)
        wb = wb.count(w.count).request("cpu", str(w.cpu))
        if w.partial and w.count > 1:
            wb = wb.min_count(1)
        if w.held_in is not None:
            wb = wb.reserved_in(w.cq, w.held_in)
        engine.upsert_workload(wb.obj())
    return engine


def _decisions(results: list[CycleResult]) -> tuple[object, ...]:
    admitted = [(a.workload, a.cluster_queue, a.admission.pod_sets) for r in results for a in r.admitted]
    preempted = [(p.victim, p.preemptor, p.reason) for r in results for p in r.preempted]
    evicted = [(e.workload, e.reason) for r in results for e in r.evicted]
    return (admitted, preempted, evicted)


def _state(engine: Engine) -> tuple[object, ...]:
    held = sorted((k, w.cluster_queue, w.usage == w.admission.usage()) for k, w in engine.cache.workloads.items())
    evicting = sorted(engine.cache.evicting)
    waiting = sorted(
        (name, sorted(i.key for i in q.infos()), sorted(q.inadmissible), q.sticky)
        for name, q in engine.queues.queues.items()
    )
    reasons = sorted(
        (k, d.reason, d.message) for k in engine.pending_keys() if (d := engine.explain(k)) is not None
    )
    return (held, evicting, waiting, reasons)


def _last_pending(results: list[CycleResult]) -> dict[WorkloadKey, tuple[object, ...]]:
    out: dict[WorkloadKey, tuple[object, ...]] = {}
    for r in results:
        for a in r.admitted:
            out.pop(a.workload, None)
        for p in r.pending:
            out[p.workload] = (p.reason, p.message)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cqs=st.fixed_dictionaries({name: cq_choice for name in CQS}),
    wls=st.lists(wl_choice, min_size=1, max_size=24),
    batch=st.integers(2, 12),
    finish=st.lists(st.integers(0, 23), max_size=6),
)
def test_batched_cycle_decides_as_sequential_cycles(
    cqs: dict[str, CQChoice], wls: list[WlChoice], batch: int, finish: list[int]
) -> None:
    batched, single = _build(cqs, wls), _build(cqs, wls)
    for step in range(3):
        now = t(10 + step)
        got = batched.schedule(now, admissions=batch)
        want = [single.schedule(now) for _ in range(got.cycles)]
        # Coverage (--hypothesis-show-statistics): ~80% of the calls run several cycles,
        # ~10% preempt.
        event(f"several cycles: {got.cycles > 1}")
        event(f"preempted: {bool(got.preempted)}")
        assert got.cycles == len(want)
        assert _decisions([got]) == _decisions(want)
        assert {p.workload: (p.reason, p.message) for p in got.pending} == _last_pending(want)
        assert got.heads == sum(r.heads for r in want)
        assert _state(batched) == _state(single)
        # The batch stops only when a cycle admits nothing, the budget is spent, or a slice
        # was replaced: never while the sequential cycles would still admit within budget.
        if len(got.admitted) < batch and not got.finished:
            assert not want[-1].admitted
        # Some admissions are written, some workloads finish; evictions land.
        for victim in [*(p.victim for p in got.preempted), *(e.workload for e in got.evicted)]:
            batched.evicted(victim, now=now)
            single.evicted(victim, now=now)
        for i in finish:
            key = WorkloadKey(f"default/w{i:02d}")
            if batched.holds_quota(key) and (step + i) % 2 == 0:
                batched.finish(key)
                single.finish(key)


def test_batch_of_one_is_one_cycle() -> None:
    cqs = {n: CQChoice((10, 0), None, False, False) for n in CQS}
    wls = [WlChoice("a1", 0, 1, 1, False, None, i) for i in range(5)]
    engine = _build(cqs, wls)
    result = engine.schedule(t(1))
    assert result.cycles == 1
    assert [a.workload for a in result.admitted] == ["default/w00"]


def test_busy_cluster_queue_admits_many_heads_per_call() -> None:
    """Kueue #14477: ten fitting heads in a ClusterQueue without a cohort, one call admits all ten in queue
    order, each in a cycle of its own."""
    cqs = {n: CQChoice((10, 0), None, False, False) for n in CQS}
    wls = [WlChoice("solo", 0, 1, 1, False, None, i) for i in range(12)]
    engine = _build(cqs, wls)
    result = engine.schedule(t(1), admissions=64)
    assert [a.workload for a in result.admitted] == [f"default/w{i:02d}" for i in range(10)]
    # 10 cycles admitted one each; the 11th found w10 no longer fits and admitted nothing.
    assert result.cycles == 11
    assert [p.workload for p in result.pending] == ["default/w10"]
