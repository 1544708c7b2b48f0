"""Admission fair sharing: the usage ledger's exact arithmetic, the per-LocalQueue head order,
and a hypothesis property of the long run."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.engine.engine import Engine
from kqueue.engine.fairness.usage_ledger import (
    NANO,
    AdmissionFairSharingConfig,
    FairUsage,
    UsageLedger,
    alpha,
    decayed,
)
from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.types import LocalQueueKey, ResourceName, WorkloadKey

from .builders import make_flavor, make_workload, t
from .parity_support import cluster_queue, fq, lq

CPU = ResourceName("cpu")
GPU = ResourceName("nvidia.com/gpu")
A, B = LocalQueueKey("ns/a"), LocalQueueKey("ns/b")
MIN = timedelta(minutes=1)


def test_alpha_is_exact_at_whole_half_lives_and_zero_without_memory() -> None:
    assert alpha(timedelta(minutes=10), timedelta(minutes=10)) == Decimal("0.5")
    assert alpha(timedelta(minutes=20), timedelta(minutes=10)) == Decimal("0.75")
    assert alpha(timedelta(minutes=5), timedelta(0)) == 0
    assert alpha(timedelta(0), timedelta(minutes=10)) == 0


def test_decay_rounds_down_to_a_nano_unit() -> None:
    # One half-life: half of the old usage, half of the new.
    assert decayed({CPU: 8 * NANO}, {CPU: 2 * NANO}, timedelta(hours=1), timedelta(hours=1)) == {
        CPU: 5 * NANO
    }
    # 1 - 0.5^0.1 = 0.0669670084631925...: 1 cpu contributes 66967008 nano-cpu (rounded down).
    assert decayed({}, {CPU: NANO}, timedelta(seconds=1), timedelta(seconds=10)) == {
        CPU: 66967008
    }


def test_usage_weights_resources_and_local_queues() -> None:
    cfg = AdmissionFairSharingConfig(
        timedelta(minutes=10), MIN, {GPU: Fraction(10), ResourceName("memory"): Fraction(0)}
    )
    ledger = UsageLedger(cfg)
    ledger.seed(A, {CPU: 3 * NANO, GPU: NANO, ResourceName("memory"): 5 * NANO}, t(0))
    assert ledger.usage(A, Fraction(1)) == FairUsage(False, Fraction(13))
    assert ledger.usage(A, Fraction(2)) == FairUsage(False, Fraction(13, 2))
    assert ledger.usage(A, Fraction(0)).infinite
    assert ledger.usage(B, Fraction(0)) > ledger.usage(A, Fraction(1000))  # weight 0 is last
    assert ledger.usage(B, Fraction(1)) == FairUsage(False, Fraction(0))


def test_entry_penalty_is_pending_until_settled_then_folded() -> None:
    cfg = AdmissionFairSharingConfig(timedelta(seconds=10), timedelta(seconds=1))
    ledger = UsageLedger(cfg)
    w = WorkloadKey("ns/w")
    ledger.push_penalty(A, w, {CPU: 4 * NANO}, t(0))
    penalty = 267868033  # 4e9 x alpha(1s/10s) = 267868033.85..., rounded down once
    assert ledger.entry(A) is not None and ledger.entry(A).pending() == {CPU: penalty}  # type: ignore[union-attr]
    ledger.settle(A, w, {CPU: 4 * NANO}, t(0))  # no time passed: nothing decays
    entry = ledger.entry(A)
    assert entry is not None and entry.pending() == {} and entry.consumed == {CPU: penalty}
    ledger.drop_penalty(A, w)  # already settled: nothing to drop
    assert ledger.entry(A).consumed == {CPU: penalty}  # type: ignore[union-attr]


def test_half_life_zero_remembers_nothing() -> None:
    ledger = UsageLedger(AdmissionFairSharingConfig(timedelta(0), MIN))
    ledger.seed(A, {CPU: 5 * NANO}, t(0))
    ledger.sample(A, {CPU: 5 * NANO}, t(60))
    assert ledger.usage(A, Fraction(1)) == FairUsage(False, Fraction(0))


@settings(max_examples=60, deadline=None)
@given(
    old=st.integers(0, 10**15),
    new=st.integers(0, 10**15),
    elapsed_s=st.integers(0, 10**6),
    half_life_s=st.integers(1, 10**6),
)
def test_decay_stays_between_old_and_new(old: int, new: int, elapsed_s: int, half_life_s: int) -> None:
    got = decayed({CPU: old}, {CPU: new}, timedelta(seconds=elapsed_s), timedelta(seconds=half_life_s))
    value = got.get(CPU, 0)
    # Each of the two products is rounded down to a nano-unit: at most 2 below the exact mix.
    assert min(old, new) - 2 <= value <= max(old, new)


@settings(max_examples=40, deadline=None)
@given(
    start=st.integers(0, 10**13),
    steps=st.lists(st.integers(1, 3600), min_size=1, max_size=8),
    half_life_s=st.integers(1, 7200),
)
def test_idle_decay_composes(start: int, steps: list[int], half_life_s: int) -> None:
    """Sampling an idle queue often or once gives the same usage, up to the rounding of each
    sample (a nano-unit each): why an idle queue needs no sampling deadline."""
    h = timedelta(seconds=half_life_s)
    often = {CPU: start}
    for s in steps:
        often = decayed(often, {}, timedelta(seconds=s), h)
    once = decayed({CPU: start}, {}, timedelta(seconds=sum(steps)), h)
    assert abs(often.get(CPU, 0) - once.get(CPU, 0)) <= len(steps) + 1


def _flood_engine(cfg: AdmissionFairSharingConfig, weight_a: int, weight_b: int) -> Engine:
    engine = Engine(ClassicalPreemptor(), admission_fair_sharing=cfg)
    engine.upsert_flavor(make_flavor("default").obj())
    engine.upsert_cluster_queue(
        replace(cluster_queue("cq", [fq("default", cpu="4")]), usage_based_admission=True)
    )
    engine.upsert_local_queue(replace(lq("ns", "a", "cq"), fair_weight=Fraction(weight_a)))
    engine.upsert_local_queue(replace(lq("ns", "b", "cq"), fair_weight=Fraction(weight_b)))
    return engine


def test_heads_come_from_the_queue_with_the_lowest_usage_and_keep_their_own_order() -> None:
    cfg = AdmissionFairSharingConfig(timedelta(minutes=10), MIN)
    engine = _flood_engine(cfg, 1, 1)
    engine.seed_local_queue_usage(A, {CPU: 10 * NANO}, t(0))
    engine.upsert_workload(make_workload("a-high", "ns").queue("a").priority(100).created(0)
                           .request("cpu", "1").obj())
    engine.upsert_workload(make_workload("b-low", "ns").queue("b").priority(0).created(5)
                           .request("cpu", "1").obj())
    engine.upsert_workload(make_workload("b-high", "ns").queue("b").priority(50).created(9)
                           .request("cpu", "1").obj())
    order = [i.key for i in engine.queued_in_order(engine.cluster_queue_of(WorkloadKey("ns/a-high")))]  # type: ignore[arg-type]
    assert order == ["ns/b-high", "ns/b-low", "ns/a-high"]


@settings(max_examples=10, deadline=None)
@given(
    half_life_min=st.integers(1, 60),
    sampling_s=st.sampled_from([10, 30, 60, 300]),
    run_min=st.integers(1, 6),
    head_start=st.sampled_from([0, 0, 1, 5, 20]),
)
def test_equal_weights_share_admissions_in_the_long_run(
    half_life_min: int, sampling_s: int, run_min: int, head_start: int
) -> None:
    """Two LocalQueues with equal weights flood one 4-cpu ClusterQueue with 1-cpu jobs, one of
    them with a head start of ``head_start`` admissions' worth of usage. Whatever the decay
    parameters, over an hour the queue without a head start gets at least 40% of the admissions
    and the other never gets ahead (the decayed usage remembers too little to be exact with a
    short half-life, but enough that neither starves), and the ClusterQueue is kept full."""
    cfg = AdmissionFairSharingConfig(
        timedelta(minutes=half_life_min), timedelta(seconds=sampling_s)
    )
    engine = _flood_engine(cfg, 1, 1)
    engine.seed_local_queue_usage(A, {CPU: head_start * NANO}, t(0))
    backlog = 130
    for i in range(backlog):
        for q in ("a", "b"):
            engine.upsert_workload(
                make_workload(f"{q}{i:03d}", "ns").queue(q).created(i).request("cpu", "1").obj()
            )
    running: list[tuple[int, WorkloadKey]] = []
    admitted = {"a": 0, "b": 0}
    for minute in range(60):
        for done_at, key in [r for r in running if r[0] <= minute]:
            engine.finish(key)
            running.remove((done_at, key))
        for _ in range(4):
            result = engine.schedule(t(minute * 60))
            for adm in result.admitted:
                admitted[str(adm.workload).split("/")[1][0]] += 1
                running.append((minute + run_min, adm.workload))
    total = admitted["a"] + admitted["b"]
    # Neither starves; the queue with the head start (which also wins ties) never gets ahead.
    assert admitted["b"] >= total * 2 // 5, admitted
    assert admitted["a"] <= admitted["b"] + 4, admitted
    if head_start == 0:
        assert admitted["a"] >= total * 2 // 5, admitted
    assert admitted["a"] + admitted["b"] >= 4 * 60 // run_min - 4


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["push", "delete", "pop", "usage", "toggle"]),
            st.integers(0, 11),  # workload
            st.integers(0, 2),  # LocalQueue (push) or usage value
            st.integers(0, 3),  # priority
        ),
        max_size=60,
    )
)
def test_fair_pops_take_the_lowest_usage_then_queue_order(
    ops: list[tuple[str, int, int, int]],
) -> None:
    """Whatever the pushes, deletions, usage changes and switches of order, each pop under
    admission fair sharing is the minimum of (its LocalQueue's usage, queue order) over what is
    queued, and without it the minimum of the queue order (the per-LocalQueue heaps agree)."""
    from kqueue.engine.queue import ClusterQueueQueue
    from kqueue.engine.types import ClusterQueueName, QueueingStrategy
    from kqueue.engine.workload import make_info

    usage: dict[LocalQueueKey, int] = {}

    def fair(lq: LocalQueueKey) -> FairUsage:
        return FairUsage(False, Fraction(usage.get(lq, 0)))

    q = ClusterQueueQueue(ClusterQueueName("cq"), QueueingStrategy.BEST_EFFORT_FIFO)
    q.set_fair(fair)
    queued: dict[str, object] = {}
    for op, w, x, prio in ops:
        name = f"w{w}"
        if op == "push":
            info = make_info(
                make_workload(name, "ns").queue(f"q{x}").priority(prio).created(w)
                .request("cpu", "1").obj(),
                {},
            )
            q.push_or_update(info)
            queued[f"ns/{name}"] = info
        elif op == "delete":
            q.delete(WorkloadKey(f"ns/{name}"))
            queued.pop(f"ns/{name}", None)
        elif op == "usage":
            usage[LocalQueueKey(f"ns/q{w % 3}")] = x
        elif op == "toggle":
            q.set_fair(None if q.fair is not None else fair)
        else:
            got = q.pop()
            if not queued:
                assert got is None
                continue
            assert got is not None

            def rank(i: object) -> tuple[object, ...]:
                info = i  # WorkloadInfo
                base = info.queue_key()  # type: ignore[attr-defined]
                if q.fair is None:
                    return (base,)
                return (fair(info.local_queue), base)  # type: ignore[attr-defined]

            best = min(queued.values(), key=rank)
            assert rank(got) == rank(best)
            queued.pop(str(got.key))
    assert len(q) == len(queued)


def _two_queue_engine() -> Engine:
    cfg = AdmissionFairSharingConfig(timedelta(seconds=2), timedelta(seconds=1))
    engine = Engine(ClassicalPreemptor(), admission_fair_sharing=cfg)
    engine.upsert_flavor(make_flavor("default").obj())
    engine.upsert_cluster_queue(
        replace(cluster_queue("cq", [fq("default", cpu="32")]), usage_based_admission=True)
    )
    engine.upsert_local_queue(lq("ns", "a", "cq"))
    engine.upsert_local_queue(lq("ns", "b", "cq"))
    return engine


def _wl(name: str, queue: str, created: int) -> object:
    return make_workload(name, "ns").queue(queue).created(created).request("cpu", "32").obj()


def test_admits_from_the_local_queue_whose_weight_is_raised() -> None:
    """Kueue's integration spec "admits from the LocalQueue whose weight is raised through the
    API": the weight is read when the head is taken, so raising it flips the order at once."""
    engine = _two_queue_engine()
    engine.seed_local_queue_usage(A, {CPU: 32 * NANO}, t(0))
    engine.seed_local_queue_usage(B, {CPU: 1 * NANO}, t(0))
    engine.upsert_workload(_wl("wa", "a", 0))  # type: ignore[arg-type]
    engine.upsert_workload(_wl("wb", "b", 1))  # type: ignore[arg-type]
    cq = engine.cluster_queue_of(WorkloadKey("ns/wa"))
    assert cq is not None
    assert [i.key for i in engine.queued_in_order(cq)] == ["ns/wb", "ns/wa"]
    engine.upsert_local_queue(replace(lq("ns", "a", "cq"), fair_weight=Fraction(1_000_000)))
    assert [i.key for i in engine.queued_in_order(cq)] == ["ns/wa", "ns/wb"]
    assert [a.workload for a in engine.schedule(t(0)).admitted] == ["ns/wa"]


def test_retains_the_local_queues_historical_usage_across_a_restart() -> None:
    """Kueue's integration spec "should retain the LocalQueue's historical usage across a
    restart": a new engine seeded from the status the old one wrote orders as the old did."""
    old = _two_queue_engine()
    old.upsert_workload(_wl("first", "a", 0))  # type: ignore[arg-type]
    assert [a.workload for a in old.schedule(t(0)).admitted] == ["ns/first"]
    old.finish(WorkloadKey("ns/first"))
    old.schedule(t(1))  # settles the penalty, samples
    status = old.local_queue_consumed(A)
    assert status is not None and status[0][CPU] > 0
    new = _two_queue_engine()
    new.seed_local_queue_usage(A, *status)
    assert new.local_queue_fair_usage(A) == old.local_queue_fair_usage(A)
    new.upsert_workload(_wl("wa", "a", 2))  # type: ignore[arg-type]
    new.upsert_workload(_wl("wb", "b", 3))  # type: ignore[arg-type]
    assert [a.workload for a in new.schedule(t(1)).admitted] == ["ns/wb"]


def test_a_failed_admission_write_is_not_charged_even_after_the_next_cycle() -> None:
    """The controller writes admissions while the next cycle runs: a write that fails after the
    penalty was settled takes it back; a confirmed admission keeps it."""
    for confirm in (False, True):
        engine = _two_queue_engine()
        wl = _wl("wa", "a", 0)
        engine.upsert_workload(wl)  # type: ignore[arg-type]
        [adm] = engine.schedule(t(0)).admitted
        engine.schedule(t(0))  # settles the penalty (no time passed: nothing else moves)
        charged = engine.local_queue_fair_usage(A)
        assert charged.value > 0
        if confirm:
            engine.upsert_workload(replace(wl, admission=adm.admission))  # type: ignore[type-var]
        engine.forget(WorkloadKey("ns/wa"))
        assert engine.local_queue_fair_usage(A) == (
            charged if confirm else FairUsage(False, Fraction(0))
        )
