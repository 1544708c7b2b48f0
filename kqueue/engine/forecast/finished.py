"""Run times of finished Workloads (API objects) into a history (history.py).

Shared by everything that reads Workloads: the controller's informer, ``kubectl kqueue`` and
``kqueue explain`` over a cluster's objects, the simulator's scenarios.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from kqueue.api.v1alpha1 import Workload as ApiWorkload
from kqueue.api.v1alpha1 import constants as c
from kqueue.engine import from_api

from .history import RunTimeHistory


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
    uid = wl.metadata.uid or None
    if uid is not None and history.knows(uid):
        return False  # seen before: not converted again
    span = run_span(wl)
    if span is None or not wl.spec.queue_name:
        return False
    view = from_api.workload(wl)
    return history.record(view.local_queue, view, *span, uid=uid)


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
