"""Predicted start times from a cluster's Workloads: the run-time history their finished ones
make, and the engine run forward (kqueue/engine/forecast) over the rest.

Shared by the controller (which keeps a history as Workloads finish and recomputes off its
admission path) and ``kubectl kqueue`` / ``kqueue explain`` (which read the finished Workloads
a cluster still holds and compute once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from kqueue.api.v1alpha1 import Workload as ApiWorkload
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1 import parse_object
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.forecast.forward import Forecast, Prediction, forecast
from kqueue.engine.forecast.history import RunTimeHistory
from kqueue.engine.forecast.state import capture
from kqueue.engine.types import WorkloadKey


def run_span(wl: ApiWorkload) -> tuple[datetime, datetime] | None:
    """(admitted, finished) of a Workload that finished while holding quota; None otherwise
    (not finished, never admitted, or a WorkloadSlice replaced by its scale-up)."""
    done = wl.condition(c.FINISHED)
    if done is None or not done.is_true or done.last_transition_time is None:
        return None
    if done.reason == c.WORKLOAD_SLICE_REPLACED or wl.status.admission is None:
        return None
    admitted = wl.condition(c.ADMITTED)
    start = (
        admitted.last_transition_time
        if admitted is not None and admitted.is_true and admitted.last_transition_time
        else wl.quota_reserved_at
    )
    if start is None:
        return None
    return start, done.last_transition_time


def record_finished(history: RunTimeHistory, wl: ApiWorkload) -> bool:
    """Add ``wl``'s run to its LocalQueue's history if it is a finished run (once per UID)."""
    span = run_span(wl)
    if span is None or not wl.spec.queue_name:
        return False
    view = from_api.workload(wl)
    return history.record(view.local_queue, view, *span, uid=wl.metadata.uid or None)


def history_of(
    workloads: Iterable[ApiWorkload], *, half_life: timedelta | None = None
) -> RunTimeHistory:
    """The run-time history the finished ones among ``workloads`` make."""
    history = RunTimeHistory() if half_life is None else RunTimeHistory(half_life=half_life)
    finished = [(span[1], wl.key, wl) for wl in workloads if (span := run_span(wl)) is not None]
    # Oldest first: a history keeps the most recent runs of each queue.
    for _, _, wl in sorted(finished, key=lambda f: (f[0], f[1])):
        record_finished(history, wl)
    return history


def estimate(
    engine: Engine,
    now: datetime,
    history: RunTimeHistory,
    *,
    stop: Callable[[], bool] | None = None,
) -> Forecast:
    """Predicted starts of ``engine``'s pending workloads (the engine is not changed)."""
    return forecast(capture(engine), now, history, stop=stop)


def describe(p: Prediction, *, local: Callable[[datetime], str]) -> str:
    """"expected to start around 14:20, when team-b/train-7 finishes (its queue's p50 run time:
    42m)"; ``local`` formats the time for the reader."""
    text = f"expected to start around {local(p.start)}"
    if p.after is not None:
        text += f", when {p.after} finishes"
        if p.after_basis:
            text += f" ({p.after_basis})"
    return text


def workloads_of(docs: Iterable[Mapping[str, Any]]) -> list[ApiWorkload]:
    """The Workloads among listed objects (one that cannot be read is left out: it only
    misses the history)."""
    out = []
    for doc in docs:
        if doc.get("kind") != "Workload":
            continue
        try:
            obj = parse_object(doc, validate=False)
        except ValueError:
            continue
        if isinstance(obj, ApiWorkload):
            out.append(obj)
    return out


def starts_from_documents(
    engine: Engine, docs: Iterable[Mapping[str, Any]], now: datetime
) -> dict[WorkloadKey, datetime]:
    """Predicted starts over a cluster's listed objects (``kubectl kqueue``, ``kqueue
    explain``): the history their finished Workloads make, the engine built from them run
    forward from ``now``."""
    fc = estimate(engine, now, history_of(workloads_of(docs)))
    return {k: p.start for k, p in fc.predictions.items()}
