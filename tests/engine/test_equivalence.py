"""Equivalent workloads are evaluated once per change of state (Kueue's
SchedulingEquivalenceHashing, queue.py): evaluations are counted as the heads cycles consider
(``CycleResult.heads``), not timed."""

from __future__ import annotations

from datetime import datetime

import pytest

from kqueue.engine.engine import Engine
from kqueue.engine.types import ClusterQueueName, PendingReason, WorkloadKey

from .builders import make_cq, make_flavor, make_lq, make_workload, t

CQ = ClusterQueueName("cq")


def _engine(cpu: str = "4", *, strict: bool = False) -> Engine:
    engine = Engine()
    engine.upsert_flavor(make_flavor("f").obj())
    b = make_cq("cq").quota("f", cpu=cpu)
    engine.upsert_cluster_queue((b.strict_fifo() if strict else b).obj())
    engine.upsert_local_queue(make_lq("lq", "cq"))
    return engine


def _run(engine: Engine, now: datetime) -> tuple[int, list[WorkloadKey]]:
    """Cycles until nothing changes: (evaluations, admitted in order)."""
    heads = 0
    admitted: list[WorkloadKey] = []
    for _ in range(50):
        result = engine.schedule(now, admissions=1000)
        heads += result.heads
        admitted += [a.workload for a in result.admitted]
        if not result.heads:
            break
    return heads, admitted


def _key(i: int) -> WorkloadKey:
    return WorkloadKey(f"default/w{i:05d}")


def test_10000_identical_pending_workloads_cost_about_one_evaluation() -> None:
    engine = _engine("4")
    # One 4-cpu workload holds the quota; 10,000 identical 2-cpu workloads wait behind it.
    engine.upsert_workload(make_workload("big").request("cpu", "4").reserved_in("cq", "f").obj())
    for i in range(10_000):
        engine.upsert_workload(make_workload(f"w{i:05d}").request("cpu", "2").created(i).obj())
    heads, admitted = _run(engine, t(20_000))
    assert admitted == []
    assert heads == 1  # the first head did not fit; the 9,999 behind it were parked with it
    assert engine.pending_counts(CQ) == (0, 10_000)
    # Every one of them reports the verdict, with the numbers.
    details = engine.explain(_key(9_999))
    assert details is not None and details.reason == PendingReason.WAITING_FOR_QUOTA
    assert "insufficient unused quota for cpu in flavor f, 2 more needed" in details.message
    # A new arrival of the same class is parked at once, without an evaluation.
    engine.upsert_workload(make_workload("late").request("cpu", "2").created(30_000).obj())
    assert _run(engine, t(30_001)) == (0, [])

    # Quota freed: all are looked at again; two fit, then one evaluation parks the rest again.
    engine.finish(WorkloadKey("default/big"))
    heads, admitted = _run(engine, t(30_002))
    assert admitted == [_key(0), _key(1)]
    assert heads == 3
    assert engine.pending_counts(CQ) == (0, 9_999)


def test_different_workloads_are_each_evaluated() -> None:
    engine = _engine("4")
    engine.upsert_workload(make_workload("big").request("cpu", "4").reserved_in("cq", "f").obj())
    for i, (cpu, priority) in enumerate([("2", 0), ("3", 0), ("2", 1), ("2", 0)]):
        engine.upsert_workload(
            make_workload(f"w{i:05d}").request("cpu", cpu).priority(priority).created(i).obj()
        )
    heads, _ = _run(engine, t(10))
    # w2 (priority 1) first, then w0 parks w3 with it, then w1 (other request): 3 evaluations.
    assert heads == 3
    assert engine.pending_counts(CQ) == (0, 4)


def test_strict_fifo_keeps_evaluating_its_head() -> None:
    engine = _engine("4", strict=True)
    engine.upsert_workload(make_workload("big").request("cpu", "4").reserved_in("cq", "f").obj())
    for i in range(100):
        engine.upsert_workload(make_workload(f"w{i:05d}").request("cpu", "2").created(i).obj())
    result = engine.schedule(t(200))
    assert result.heads == 1
    # StrictFIFO: the head stays at the head, nothing is parked behind it.
    assert engine.pending_counts(CQ) == (100, 0)


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("quota raised", lambda e: e.upsert_cluster_queue(make_cq("cq").quota("f", cpu="8").obj())),
        ("workload finished", lambda e: e.finish(WorkloadKey("default/big"))),
    ],
)
def test_a_change_re_evaluates_the_class(name: str, change: object) -> None:
    engine = _engine("4")
    engine.upsert_workload(make_workload("big").request("cpu", "4").reserved_in("cq", "f").obj())
    for i in range(50):
        engine.upsert_workload(make_workload(f"w{i:05d}").request("cpu", "2").created(i).obj())
    assert _run(engine, t(100))[0] == 1
    assert callable(change)
    change(engine)
    heads, admitted = _run(engine, t(101))
    assert admitted == [_key(0), _key(1)]
    assert heads == 3
