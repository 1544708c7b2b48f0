"""Workload status transitions, as Kueue's ``workload`` package makes them.

Pure functions on copies of :class:`~kqueue.api.v1alpha1.Workload`: each returns the Workload as
it should be written (or None when nothing would change, so no write is made). Condition types,
reasons and messages are Kueue's, so tooling written for Kueue reads kqueue's status unchanged.
"""

from __future__ import annotations

from datetime import datetime

from kqueue.api.quantity import Quantity
from kqueue.api.v1alpha1 import Admission, PodSetAssignment, Workload, set_condition
from kqueue.api.v1alpha1 import constants as c
from kqueue.engine import types as t

# Kueue's reasons for conditions it turns off.
NO_RESERVATION = "NoReservation"
PENDING = "Pending"


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
            )
            for ps in admission.pod_sets
        ],
    )


def quota_reserved_message(cluster_queue: str) -> str:
    return f"Quota reserved in ClusterQueue {cluster_queue}"


ADMITTED_MESSAGE = "The workload is admitted"


def admit(wl: Workload, admission: t.Admission, now: datetime) -> Workload:
    """``status.admission`` set, ``QuotaReserved=True`` and ``Admitted=True``.

    A previous eviction's ``Evicted``/``Preempted`` conditions turn False, as Kueue does when
    quota is reserved again, so ``Evicted=True`` always means "being evicted now".
    """
    out = wl.model_copy(deep=True)
    conds = out.status.conditions
    gen = wl.metadata.generation
    out.status.admission = api_admission(admission)
    set_condition(
        conds,
        c.QUOTA_RESERVED,
        "True",
        c.QUOTA_RESERVED_REASON,
        quota_reserved_message(admission.cluster_queue),
        now,
        gen,
    )
    set_condition(conds, c.ADMITTED, "True", c.ADMITTED_REASON, ADMITTED_MESSAGE, now, gen)
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
    out = wl.model_copy(deep=True)
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
    out = wl.model_copy(deep=True)
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
    ``Requeued=True`` with the eviction's reason (Kueue's ``UnsetQuotaReservationWithCondition``
    followed by the requeue). None if it holds no quota.
    """
    if wl.status.admission is None and not wl.has_quota_reservation:
        return None
    evicted = wl.condition(c.EVICTED)
    why = evicted.reason if evicted is not None and evicted.is_true else PENDING
    message = evicted.message if evicted is not None and evicted.is_true else "Quota released"
    out = wl.model_copy(deep=True)
    gen = wl.metadata.generation
    conds = out.status.conditions
    out.status.admission = None
    set_condition(conds, c.QUOTA_RESERVED, "False", PENDING, message, now, gen)
    set_condition(
        conds, c.ADMITTED, "False", NO_RESERVATION, "The workload has no reservation", now, gen
    )
    set_condition(conds, c.REQUEUED, "True", why, message, now, gen)
    return out


def finish(wl: Workload, reason: str, message: str, now: datetime) -> Workload | None:
    """``Finished=True`` with Succeeded/Failed; the quota is then free. None if finished."""
    if wl.is_finished:
        return None
    out = wl.model_copy(deep=True)
    set_condition(
        out.status.conditions, c.FINISHED, "True", reason, message, now, wl.metadata.generation
    )
    return out


def holds_quota(wl: Workload) -> bool:
    return wl.status.admission is not None and not wl.is_finished


def is_evicting(wl: Workload) -> bool:
    """Told to go (Evicted=True) and still holding its quota."""
    return holds_quota(wl) and wl.is_true(c.EVICTED)


def queued_since(wl: Workload) -> datetime | None:
    """When the workload entered its queue the last time: its last requeue, else creation."""
    requeued = wl.condition(c.REQUEUED)
    if requeued is not None and requeued.is_true:
        return requeued.last_transition_time
    return wl.metadata.creation_timestamp
