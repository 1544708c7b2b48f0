"""What a Workload says, as Kueue's metrics label and time it: its priority class, its
LocalQueue, the (reason, underlying cause) of an eviction, and the times between its conditions.
"""

from __future__ import annotations

from datetime import datetime

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c

# PodsReady condition reasons (readiness.py writes them): the underlying cause of a PodsReady
# timeout, as Kueue labels it.
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"


def priority_class(wl: Workload | None) -> str:
    """Kueue's ``priority_class`` label: the Workload's priority class name, "" without one."""
    if wl is None or wl.spec.priority_class_ref is None:
        return ""
    return wl.spec.priority_class_ref.name


def workload_local_queue(wl: Workload | None) -> tuple[str, str] | None:
    """(namespace, name) of the LocalQueue the Workload names, if any."""
    if wl is None or not wl.spec.queue_name:
        return None
    return wl.namespace or "default", wl.spec.queue_name


def eviction_labels(wl: Workload | None, reason: str) -> tuple[str, str]:
    """(reason, underlying_cause) labels of an eviction written with reason ``reason``."""
    if reason.startswith(c.EVICTED_BY_DEACTIVATION_DUE_TO):
        return c.EVICTED_BY_DEACTIVATION, reason.removeprefix(c.EVICTED_BY_DEACTIVATION_DUE_TO)
    if reason == c.EVICTED_BY_PODS_READY_TIMEOUT:
        ready = wl.condition(c.PODS_READY) if wl is not None else None
        recovering = ready is not None and ready.reason == WAIT_FOR_RECOVERY
        return reason, WAIT_FOR_RECOVERY if recovering else WAIT_FOR_START
    return reason, ""


def api_timestamp(value: object) -> datetime | None:
    """An API timestamp (RFC 3339, as the API server writes it), or None."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def ready_until_evicted_s(wl: Workload | None) -> float | None:
    """Seconds from PodsReady=True to the eviction (Evicted=True), both on the evicted
    Workload; None when its pods were not ready."""
    if wl is None:
        return None
    ready, evicted = wl.condition(c.PODS_READY), wl.condition(c.EVICTED)
    if (
        ready is None
        or not ready.is_true
        or ready.last_transition_time is None
        or evicted is None
        or not evicted.is_true
        or evicted.last_transition_time is None
    ):
        return None
    return max((evicted.last_transition_time - ready.last_transition_time).total_seconds(), 0.0)


def admitted_at(wl: Workload) -> datetime | None:
    cond = wl.condition(c.ADMITTED)
    if cond is not None and cond.is_true and cond.last_transition_time is not None:
        return cond.last_transition_time
    return wl.quota_reserved_at


def execution_time_s(wl: Workload) -> float | None:
    """Seconds a finished workload was admitted: its past admissions plus the last one (Kueue's
    TotalExecutionTime); None when it was not admitted when it finished."""
    admitted = admitted_at(wl)
    done = wl.condition(c.FINISHED)
    if admitted is None or done is None or done.last_transition_time is None:
        return None
    past = wl.status.accumulated_past_execution_time_seconds or 0
    return max(past + (done.last_transition_time - admitted).total_seconds(), 0.0)
