"""Predicted start times from a cluster's Workloads: the run-time history their finished ones
make, and the engine run forward (kqueue/engine/forecast) over the rest.

The finished runs themselves are read by kqueue/engine/forecast/finished.py (re-exported here).
Shared by the controller (which keeps a history as Workloads finish and recomputes off its
admission path) and ``kubectl kqueue`` / ``kqueue explain`` (which read the finished Workloads
a cluster still holds and compute once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from kqueue.api.v1alpha1 import Workload as ApiWorkload
from kqueue.api.v1alpha1 import parse_object
from kqueue.engine.engine import Engine
from kqueue.engine.forecast.finished import history_of, record_finished, run_span
from kqueue.engine.forecast.forward import Forecast, Prediction, forecast
from kqueue.engine.forecast.history import RunTimeHistory
from kqueue.engine.forecast.state import capture
from kqueue.engine.types import WorkloadKey


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


__all__ = [
    "describe", "estimate", "history_of", "record_finished", "run_span",
    "starts_from_documents", "workloads_of",
]
