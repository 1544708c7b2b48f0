"""Workload status transitions, as Kueue's ``workload`` package makes them.

Pure functions on copies of :class:`~kqueue.api.v1alpha1.Workload`: each returns the Workload as
it should be written (or None when nothing would change, so no write is made). Condition types,
reasons and messages are Kueue's, so tooling written for Kueue reads kqueue's status unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from kqueue.api.quantity import Quantity
from kqueue.api.v1alpha1 import (
    Admission,
    PodSetAssignment,
    TopologyAssignment,
    Workload,
    encode_assignment,
    set_condition,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.engine import checks as checks_of
from kqueue.engine import types as t

# Kueue's reasons for conditions it turns off.
NO_RESERVATION = "NoReservation"
PENDING = "Pending"
# Kueue's Requeued=True reason once a PodsReady requeue backoff is over, and its message.
BACKOFF_FINISHED = "BackoffFinished"
BACKOFF_FINISHED_MESSAGE = "The workload backoff was finished"


def api_admission(admission: t.Admission) -> Admission:
    """The engine's admission as ``status.admission`` (totals per pod set, exact quantities)."""
    return Admission(
        cluster_queue=admission.cluster_queue,
        pod_set_assignments=[
            PodSetAssignment(
                name=ps.name,
                flavors={str(r): str(f) for r, f in sorted(ps.flavors.items())},
                resource_usage={
                    str(r): Quantity.from_units(v, r) for r, v in sorted(ps.resource_usage.items())
                },
                count=ps.count,
                topology_assignment=_topology(ps.topology),
                delayed_topology_request=ps.delayed_topology,
            )
            for ps in admission.pod_sets
        ],
    )


def _topology(ta: t.TopologyAssignment | None) -> TopologyAssignment | None:
    """Kueue v1beta2's compact form of a pod set's placement."""
    if ta is None:
        return None
    return encode_assignment(list(ta.levels), [(list(v), n) for v, n in ta.domains])


def _with_status_copy(wl: Workload) -> Workload:
    """A copy of ``wl`` whose status may be changed in place.

    Only the status is copied: metadata and spec are shared with ``wl`` (the informer's object,
    which nobody mutates), as every transition here changes the status alone. Copying the whole
    Workload (its pod templates, its managedFields) cost more than the rest of an admission
    write.
    """
    return wl.model_copy(update={"status": wl.status.model_copy(deep=True)})


def status_body(wl: Workload) -> dict[str, Any]:
    """The body of a status write (PUT .../status) of ``wl``: the object without its spec.

    The API server takes only the status from a status write: it keeps the stored spec and
    metadata (and ignores the spec when it records managed fields), so the spec would be
    serialized, encoded and sent for nothing; with pod templates it is most of the object.
    The metadata stays: it carries the name and the resourceVersion the write is conditional on.
    tests/cluster/test_status_writes.py checks on a real API server that the object stored is
    the one a whole-object write stores.
    """
    return wl.model_dump(mode="json", by_alias=True, exclude={"spec"})


def quota_reserved_message(cluster_queue: str) -> str:
    return f"Quota reserved in ClusterQueue {cluster_queue}"


ADMITTED_MESSAGE = "The workload is admitted"


def admit(
    wl: Workload,
    admission: t.Admission,
    now: datetime,
    *,
    checks: Sequence[str] = (),
    past_execution_seconds: int | None = None,
) -> Workload:
    """``status.admission`` set, ``QuotaReserved=True`` and ``Admitted=True``; with admission
    ``checks`` (two-phase admission, kqueue/engine/checks.py), ``status.admissionChecks`` lists
    them (new ones Pending) and ``Admitted`` stays False until all are Ready.
    ``past_execution_seconds``: ``status.accumulatedPastExecutionTimeSeconds`` from now on, the
    time a WorkloadSlice carries from the slice it replaces (kqueue/engine/slice.py); None
    leaves it as it is.

    A previous eviction's ``Evicted``/``Preempted`` conditions turn False, as Kueue does when
    quota is reserved again, so ``Evicted=True`` always means "being evicted now".
    """
    out = _with_status_copy(wl)
    conds = out.status.conditions
    gen = wl.metadata.generation
    out.status.admission = api_admission(admission)
    if past_execution_seconds is not None:
        out.status.accumulated_past_execution_time_seconds = past_execution_seconds
    set_condition(
        conds,
        c.QUOTA_RESERVED,
        "True",
        c.QUOTA_RESERVED_REASON,
        quota_reserved_message(admission.cluster_queue),
        now,
        gen,
    )
    out.status.admission_checks, _ = checks_of.sync(out.status.admission_checks, checks, now)
    admitted, reason, message = checks_of.admitted_condition(True, out.status.admission_checks)
    set_condition(conds, c.ADMITTED, "True" if admitted else "False", reason, message, now, gen)
    if in_backoff(wl):
        # The engine admits only after the backoff: if the admission comes before the write
        # that declares the backoff over, it says so itself, so Requeued=False never stands
        # next to an admission.
        _backoff_over(out, now)
    for type_ in (c.EVICTED, c.PREEMPTED):
        cond = out.condition(type_)
        if cond is not None and cond.is_true:
            set_condition(
                conds,
                type_,
                "False",
                c.QUOTA_RESERVED_REASON,
                f"Previously: {cond.message}",
                now,
                gen,
            )
    return out


def pending(wl: Workload, reason: str, message: str, now: datetime) -> Workload | None:
    """``QuotaReserved=False`` with the engine's reason and message; None if already so."""
    cond = wl.condition(c.QUOTA_RESERVED)
    if (
        cond is not None
        and cond.status == "False"
        and cond.reason == reason
        and cond.message == message
    ):
        return None
    if wl.status.admission is not None or wl.is_finished:
        return None  # holds quota (our view is stale) or done: not ours to mark pending
    out = _with_status_copy(wl)
    set_condition(
        out.status.conditions, c.QUOTA_RESERVED, "False", reason, message, now,
        wl.metadata.generation,
    )
    return out


def evict(
    wl: Workload,
    reason: str,
    message: str,
    now: datetime,
    *,
    preempted_reason: str | None = None,
    preempted_message: str = "",
) -> Workload | None:
    """``Evicted=True`` (and ``Preempted=True`` for a preemption); None if already evicting."""
    cond = wl.condition(c.EVICTED)
    if cond is not None and cond.is_true and cond.reason == reason:
        return None
    out = _with_status_copy(wl)
    gen = wl.metadata.generation
    set_condition(out.status.conditions, c.EVICTED, "True", reason, message, now, gen)
    if preempted_reason is not None:
        set_condition(
            out.status.conditions,
            c.PREEMPTED,
            "True",
            preempted_reason,
            preempted_message or message,
            now,
            gen,
        )
    return out


def release(wl: Workload, now: datetime) -> Workload | None:
    """The workload stopped after an eviction: quota released, back in its queue.

    ``status.admission`` cleared, ``QuotaReserved=False`` and ``Admitted=False``, and
    ``Requeued`` with the eviction's reason (Kueue's ``UnsetQuotaReservationWithCondition``
    followed by the requeue): True, except after a PodsReady timeout, whose requeue backoff
    keeps it False until :func:`backoff_finished` (a deactivated workload is kept out of its
    queue by ``spec.active: false`` itself, and requeued when reactivated). The time it was
    admitted adds to
    ``status.accumulatedPastExecutionTimeSeconds`` (its maximum execution time counts every
    admission), except when it was deactivated for exceeding it (the count starts over).
    None if it holds no quota.
    """
    if wl.status.admission is None and not wl.has_quota_reservation:
        return None
    evicted = wl.condition(c.EVICTED)
    why = evicted.reason if evicted is not None and evicted.is_true else PENDING
    message = evicted.message if evicted is not None and evicted.is_true else "Quota released"
    out = _with_status_copy(wl)
    gen = wl.metadata.generation
    conds = out.status.conditions
    out.status.admission = None
    set_condition(conds, c.QUOTA_RESERVED, "False", PENDING, message, now, gen)
    set_condition(
        conds, c.ADMITTED, "False", NO_RESERVATION, "The workload has no reservation", now, gen
    )
    # Kueue's resetChecksOnEviction: the next reservation starts every check over.
    out.status.admission_checks = checks_of.reset_on_eviction(out.status.admission_checks, now)
    # MultiKueue (Kueue: reset after the Workload is evicted): dispatched afresh next time.
    out.status.cluster_name = None
    out.status.nominated_cluster_names = []
    admitted = wl.condition(c.ADMITTED)
    if why == c.EVICTED_BY_MAXIMUM_EXECUTION_TIME:
        out.status.accumulated_past_execution_time_seconds = None
    elif admitted is not None and admitted.is_true:
        ran = int((now - admitted.last_transition_time).total_seconds())
        before = wl.status.accumulated_past_execution_time_seconds or 0
        out.status.accumulated_past_execution_time_seconds = before + max(ran, 0)
    backing_off = why == c.EVICTED_BY_PODS_READY_TIMEOUT
    set_condition(conds, c.REQUEUED, "False" if backing_off else "True", why, message, now, gen)
    return out


def in_backoff(wl: Workload) -> bool:
    """Requeued=False for a PodsReady timeout: the requeue backoff has not been declared over."""
    cond = wl.condition(c.REQUEUED)
    return (
        cond is not None
        and cond.status == "False"
        and cond.reason == c.EVICTED_BY_PODS_READY_TIMEOUT
        and wl.status.admission is None
    )


def backoff_end(wl: Workload, now: datetime, *, unwritten: timedelta) -> datetime | None:
    """When the PodsReady backoff of ``wl`` ends; None when it is not in one.

    ``status.requeueState.requeueAt`` says; if it was never written (the write after the
    eviction failed), the backoff lasts ``unwritten`` from the Requeued=False transition.
    """
    if not in_backoff(wl):
        return None
    state = wl.status.requeue_state
    if state is not None and state.requeue_at is not None:
        return state.requeue_at
    cond = wl.condition(c.REQUEUED)
    since = cond.last_transition_time if cond is not None else None
    return (since or now) + unwritten


def backoff_finished(
    wl: Workload, now: datetime, *, unwritten: timedelta = timedelta(0)
) -> Workload | None:
    """``Requeued=True`` (``BackoffFinished``) and ``requeueState.requeueAt`` cleared, the count
    kept, once the PodsReady backoff is over (Kueue's workload controller); None before that,
    or when the workload is not waiting for one.
    """
    end = backoff_end(wl, now, unwritten=unwritten)
    if end is None or end > now:
        return None
    out = _with_status_copy(wl)
    _backoff_over(out, now)
    return out


def _backoff_over(out: Workload, now: datetime) -> None:
    if out.status.requeue_state is not None:
        out.status.requeue_state.requeue_at = None
    set_condition(
        out.status.conditions, c.REQUEUED, "True", BACKOFF_FINISHED, BACKOFF_FINISHED_MESSAGE,
        now, out.metadata.generation,
    )


def finish(wl: Workload, reason: str, message: str, now: datetime) -> Workload | None:
    """``Finished=True`` with Succeeded/Failed; the quota is then free. None if finished."""
    if wl.is_finished:
        return None
    out = _with_status_copy(wl)
    set_condition(
        out.status.conditions, c.FINISHED, "True", reason, message, now, wl.metadata.generation
    )
    return out


def waits(wl: Workload) -> bool:
    """Neither reserved nor admitted: the API lets its queue, budget and pod sets change (they
    are fixed while it holds quota)."""
    return not wl.has_quota_reservation and wl.status.admission is None


def holds_quota(wl: Workload) -> bool:
    return wl.status.admission is not None and not wl.is_finished


def may_run(wl: Workload) -> bool:
    """Holds quota and is not waiting for admission checks: its pods may be released. A
    workload that reserved quota in a ClusterQueue with admission checks carries
    ``Admitted=False`` and waits, held, until all of them are Ready."""
    if not holds_quota(wl):
        return False
    admitted = wl.condition(c.ADMITTED)
    return admitted is None or admitted.is_true


def is_evicting(wl: Workload) -> bool:
    """Told to go (Evicted=True) and still holding its quota."""
    return holds_quota(wl) and wl.is_true(c.EVICTED)


def queued_since(wl: Workload) -> datetime | None:
    """When the workload entered its queue the last time: its last requeue, else creation."""
    requeued = wl.condition(c.REQUEUED)
    if requeued is not None and requeued.is_true:
        return requeued.last_transition_time
    return wl.metadata.creation_timestamp
