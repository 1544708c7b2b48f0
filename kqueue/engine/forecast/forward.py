"""The engine run forward in simulated time: when would each pending workload be admitted?

From ``now``, on a fresh engine rebuilt from a captured state (state.py):

1. each workload holding quota ends at its estimated end: ``maximumExecutionTimeSeconds`` (less
   the execution time it already accumulated) when set, else its LocalQueue's p50 run time from
   the history (history.py) or, once it has run past that, the p90; past the p90, or without
   history, its end is unknown and it holds its quota to the end of the forecast;
2. cycles run at the current instant until nothing more changes; a workload admitted is
   predicted to start then, and ends after its own estimated run time (a chosen preemption's
   victims release their quota at once, as in the simulator, docs/contracts.md §4);
3. the clock jumps to the next estimated end (or engine deadline); those workloads finish;
   back to 2, until no pending workload is left, nothing more can end, the horizon is reached
   or the caller's budget says stop.

Arrivals are not guessed: no new work is assumed. A workload not admitted by then has no
prediction (unknown). Predictions are never before ``now``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from kqueue.engine.engine import Engine
from kqueue.engine.types import Workload, WorkloadKey

from .history import RunTimeHistory
from .state import EngineState, rebuild

DEFAULT_HORIZON: Final = timedelta(days=7)
# Cycles at one instant before the forecast moves on (a queue that keeps deciding the same).
_SETTLE_CYCLES: Final = 64
# Admissions per ``schedule`` call: as many as the cycles can make at one instant.
_ADMISSIONS: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class End:
    """When a workload holding quota is expected to release it, and why."""

    at: datetime
    # e.g. "its queue's p50 run time: 42 min", "its maximumExecutionTimeSeconds: 60 min".
    basis: str


@dataclass(frozen=True, slots=True)
class Prediction:
    workload: WorkloadKey
    start: datetime
    # The workload whose end let it start (None: it could start at once, or after a deadline),
    # and why that end was expected then.
    after: WorkloadKey | None = None
    after_basis: str = ""


@dataclass(frozen=True, slots=True)
class Forecast:
    now: datetime
    predictions: dict[WorkloadKey, Prediction] = field(default_factory=dict)
    # Pending workloads the forecast looked at (those without a prediction: unknown).
    considered: int = 0
    # False when the budget or the horizon cut it short.
    complete: bool = True
    cycles: int = 0


def spoken(seconds: int) -> str:
    """A run time as a person says it: "45 s", "42 min", "2 h 5 min"."""
    if seconds < 120:
        return f"{seconds} s"
    minutes = (seconds + 30) // 60
    if minutes < 180:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h" + (f" {rest} min" if rest else "")


def expected_end(
    wl: Workload, started: datetime, now: datetime, history: RunTimeHistory
) -> End | None:
    """When ``wl``, holding quota since ``started``, should release it, as seen at ``now``."""
    if wl.max_execution_seconds is not None:
        left = max(wl.max_execution_seconds - wl.past_execution_seconds, 0)
        at = started + timedelta(seconds=left)
        limit = spoken(wl.max_execution_seconds)
        return End(max(at, now), f"its maximumExecutionTimeSeconds: {limit}")
    rt = history.estimate(wl.local_queue, wl, now)
    if rt is None:
        return None
    elapsed = now - started
    for name, seconds in (("p50", rt.p50), ("p90", rt.p90)):
        if elapsed < timedelta(seconds=seconds):
            return End(started + timedelta(seconds=seconds),
                       f"its queue's {name} run time: {spoken(seconds)}")
    return None


class _Ends:
    """Estimated ends of the workloads holding quota in the forecast, earliest first."""

    def __init__(self) -> None:
        self._heap: list[tuple[datetime, int, WorkloadKey]] = []
        self._live: dict[WorkloadKey, tuple[int, End]] = {}
        self._seq = 0

    def add(self, key: WorkloadKey, end: End | None) -> None:
        self._seq += 1
        if end is None:
            self._live.pop(key, None)
            return
        self._live[key] = (self._seq, end)
        heapq.heappush(self._heap, (end.at, self._seq, key))

    def drop(self, key: WorkloadKey) -> None:
        self._live.pop(key, None)

    def _prune(self) -> None:
        while self._heap:
            _, seq, key = self._heap[0]
            live = self._live.get(key)
            if live is not None and live[0] == seq:
                return
            heapq.heappop(self._heap)

    def next(self) -> datetime | None:
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, t: datetime) -> list[tuple[WorkloadKey, End]]:
        out = []
        while (n := self.next()) is not None and n <= t:
            _, _, key = heapq.heappop(self._heap)
            out.append((key, self._live.pop(key)[1]))
        return out


def forecast(
    state: EngineState,
    now: datetime,
    history: RunTimeHistory,
    *,
    horizon: timedelta = DEFAULT_HORIZON,
    stop: Callable[[], bool] | None = None,
) -> Forecast:
    """Predicted starts of the pending workloads of ``state`` (see the module docstring).

    ``stop`` is asked between instants; True ends the forecast early (a time budget: the
    engine reads no clock itself), with the predictions made so far.
    """
    engine = rebuild(state, now)
    targets = {wl.key for wl in state.pending}
    ends = _Ends()
    for wl in state.admitted:
        assert wl.admission is not None
        ends.add(wl.key, expected_end(wl, wl.admission.reserved_at, now, history))
    predictions: dict[WorkloadKey, Prediction] = {}
    freed: tuple[WorkloadKey, str] | None = None
    t = now
    complete = True
    while True:
        _settle(engine, t, now, history, ends, targets, predictions, freed)
        if len(predictions) == len(targets):
            break
        if stop is not None and stop():
            complete = False
            break
        deadline = engine.next_deadline()
        candidates = [x for x in (ends.next(), deadline) if x is not None and x > t]
        if not candidates:
            break
        nxt = min(candidates)
        if nxt > now + horizon:
            complete = False
            break
        t = nxt
        freed = None
        for key, end in ends.pop_due(t):
            engine.finish(key)
            freed = (key, end.basis)
    return Forecast(now, predictions, len(targets), complete, engine.cycles)


def _settle(
    engine: Engine,
    t: datetime,
    now: datetime,
    history: RunTimeHistory,
    ends: _Ends,
    targets: set[WorkloadKey],
    predictions: dict[WorkloadKey, Prediction],
    freed: tuple[WorkloadKey, str] | None,
) -> None:
    last: tuple[tuple[str, str], ...] | None = None
    for _ in range(_SETTLE_CYCLES):
        result = engine.schedule(t, admissions=_ADMISSIONS)
        for a in result.admitted:
            if a.workload in targets and a.workload not in predictions:
                after, basis = freed if freed is not None else (None, "")
                predictions[a.workload] = Prediction(a.workload, max(t, now), after, basis)
            held = engine.admitted_workload(a.workload)
            if held is not None:
                # Its run starts now: estimated from the history as of the forecast's ``now``.
                ends.add(a.workload, expected_end(held.info.obj, t, t, history))
        for done in result.finished:
            ends.drop(done.old)
        for p in result.preempted:
            ends.drop(p.victim)
            engine.evicted(p.victim, now=t)
        for ev in result.evicted:
            ends.drop(ev.workload)
            engine.evicted(ev.workload, requeue_at=ev.requeue_at, now=t)
        if result.heads == 0:
            return
        if not (result.admitted or result.preempted or result.evicted):
            decided = tuple((str(p.workload), p.message) for p in result.pending)
            if decided == last:
                return
            last = decided
