"""Predicted start times: the engine run forward from a captured state (forecast/forward.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.engine.engine import Engine
from kqueue.engine.forecast.forward import Forecast, forecast, spoken
from kqueue.engine.forecast.history import RunTimeHistory
from kqueue.engine.forecast.state import capture
from kqueue.engine.types import ClusterQueueName, Workload, local_queue_key

from ..builders import key, make_cq, make_engine, make_flavor, make_workload, t

F = make_flavor("default").obj()
LQ = local_queue_key("default", "lq")
CQ = ClusterQueueName("cq")


def running(name: str, cpu: int, at: float, *, max_exec: int | None = None) -> Workload:
    b = make_workload(name).request("cpu", str(cpu))
    if max_exec is not None:
        b = b.max_exec(max_exec)
    return b.reserved_in("cq", "default", at=at).obj()


def pending(name: str, cpu: int, created: float = 0, priority: int = 0) -> Workload:
    return make_workload(name).request("cpu", str(cpu)).created(created).priority(priority).obj()


def history(*seconds: int) -> RunTimeHistory:
    """A queue whose past runs (of one-cpu workloads, all finished at t=0) took ``seconds``."""
    h = RunTimeHistory()
    one = make_workload("past").request("cpu", "1").obj()
    for i, s in enumerate(seconds):
        h.record(LQ, one, t(-s), t(0), uid=f"past-{i}")
    return h


def run(engine: Engine, now: float, h: RunTimeHistory) -> Forecast:
    return forecast(capture(engine), t(now), h)


def starts(fc: Forecast) -> dict[str, float]:
    return {str(k).split("/")[1]: (p.start - t(0)).total_seconds() for k, p in fc.predictions.items()}


@dataclass(frozen=True)
class Case:
    name: str
    workloads: list[Workload]
    now: float
    runs: tuple[int, ...] = ()
    cpu: int = 4
    strict: bool = False
    want: dict[str, float] = field(default_factory=dict)
    # The prediction of ``why[0]`` names ``why[1]`` and a basis containing ``why[2]``.
    why: tuple[str, str, str] | None = None


CASES = [
    Case(
        "maximumExecutionTimeSeconds bounds a running workload",
        [running("a", 4, 0, max_exec=600), pending("b", 4)],
        now=100,
        want={"b": 600},
        why=("b", "a", "maximumExecutionTimeSeconds: 10 min"),
    ),
    Case(
        "the queue's p50 run time",
        [running("a", 4, 0), pending("b", 4)],
        now=100,
        runs=(200, 300, 400),
        want={"b": 300},
        why=("b", "a", "p50 run time: 5 min"),
    ),
    Case(
        "past its p50 a running workload is given its p90",
        [running("a", 4, 0), pending("b", 4)],
        now=350,
        runs=(200, 300, 400),
        want={"b": 400},
        why=("b", "a", "p90 run time"),
    ),
    Case(
        "past its p90 its end is unknown: no estimate",
        [running("a", 4, 0), pending("b", 4)],
        now=500,
        runs=(200, 300, 400),
        want={},
    ),
    Case("no history and no maximum: no estimate", [running("a", 4, 0), pending("b", 4)],
         now=10, want={}),
    Case("free quota: starts now", [pending("b", 2)], now=42, want={"b": 42}),
    Case(
        "a queue of waiting workloads, each after the one before",
        [running("a", 4, 0), pending("b", 4, 1), pending("c", 4, 2), pending("d", 2, 3)],
        now=0,
        runs=(100,),
        want={"b": 100, "c": 200, "d": 300},
        why=("c", "b", "p50 run time"),
    ),
    Case(
        "higher priority goes first",
        [running("a", 4, 0), pending("low", 4, 1), pending("high", 4, 2, priority=10)],
        now=0,
        runs=(100,),
        want={"high": 100, "low": 200},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forecast(case: Case) -> None:
    b = make_cq("cq").quota("default", cpu=str(case.cpu))
    engine = make_engine(F, (b.strict_fifo() if case.strict else b).obj(), *case.workloads)
    fc = run(engine, case.now, history(*case.runs))
    assert starts(fc) == case.want
    if case.why is not None:
        p = fc.predictions[key(case.why[0])]
        assert p.after == key(case.why[1])
        assert case.why[2] in p.after_basis


def test_the_live_engine_is_left_as_it_was() -> None:
    engine = make_engine(F, make_cq("cq").quota("default", cpu="4").obj(),
                         running("a", 4, 0), pending("b", 4))
    before = (engine.workload_keys(), engine.cycles, engine.usage(CQ))
    run(engine, 0, history(100))
    assert (engine.workload_keys(), engine.cycles, engine.usage(CQ)) == before
    assert engine.holds_quota(key("a")) and not engine.holds_quota(key("b"))


def test_a_workload_finishing_early_moves_the_prediction_earlier() -> None:
    engine = make_engine(F, make_cq("cq").quota("default", cpu="4").obj(),
                         running("a", 4, 0, max_exec=3600), pending("b", 4))
    h = history()
    late = run(engine, 60, h).predictions[key("b")].start
    engine.finish(key("a"))
    early = run(engine, 120, h).predictions[key("b")].start
    assert (late, early) == (t(3600), t(120))


def test_a_budget_that_runs_out_stops_the_forecast() -> None:
    engine = make_engine(F, make_cq("cq").quota("default", cpu="1").obj(), running("a", 1, 0),
                         *(pending(f"p{i}", 1, i) for i in range(5)))
    fc = forecast(capture(engine), t(0), history(10), stop=lambda: True)
    assert not fc.complete
    assert fc.considered == 5 and not fc.predictions


# -- properties -------------------------------------------------------------------------------

_running = st.lists(
    st.tuples(st.integers(1, 4), st.integers(0, 1000), st.none() | st.integers(1, 2000)),
    max_size=4,
)
_pending = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 5)), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(
    _running,
    _pending,
    st.lists(st.integers(1, 1500), max_size=5),
    st.integers(0, 3000),
    st.booleans(),
)
def test_predictions_never_lie_in_the_past_and_keep_fifo_order(
    held: list[tuple[int, int, int | None]],
    waiting: list[tuple[int, int]],
    runs: list[int],
    now: int,
    strict: bool,
) -> None:
    """Every prediction is at or after ``now``; in a StrictFIFO queue of one priority the
    predicted starts follow the queue order (no workload is predicted to overtake an earlier
    one); the prediction for a workload that can start now is now."""
    b = make_cq("cq").quota("default", cpu="8")
    cq = (b.strict_fifo() if strict else b).obj()
    objs: list[Workload] = []
    used = 0
    for i, (cpu, at, max_exec) in enumerate(held):
        if used + cpu > 8:
            break
        used += cpu
        objs.append(running(f"r{i}", cpu, min(at, now), max_exec=max_exec))
    for i, (cpu, _prio) in enumerate(waiting):
        objs.append(pending(f"w{i}", cpu, created=i))
    engine = make_engine(F, cq, *objs)
    fc = run(engine, now, history(*runs))
    for p in fc.predictions.values():
        assert p.start >= t(now)
    if strict:
        predicted = [fc.predictions.get(key(f"w{i}")) for i in range(len(waiting))]
        known = [p.start for p in predicted if p is not None]
        assert known == sorted(known)
        # An unknown start is never followed by a known one in a StrictFIFO queue.
        first_unknown = next((i for i, p in enumerate(predicted) if p is None), len(predicted))
        assert all(p is None for p in predicted[first_unknown:])
    if used + waiting[0][0] <= 8:
        assert fc.predictions[key("w0")].start == t(now)


@pytest.mark.parametrize(
    ("seconds", "want"),
    [(45, "45 s"), (119, "119 s"), (120, "2 min"), (2520, "42 min"), (10_740, "179 min"), (10_799, "3 h"),
     (7500 + 3600, "3 h 5 min"), (4 * 3600, "4 h")],
)
def test_spoken_run_times(seconds: int, want: str) -> None:
    assert spoken(seconds) == want
