"""maximumExecutionTimeSeconds: a workload admitted for longer than its budget is deactivated
(Kueue's workload controller ``reconcileMaxExecutionTime``; the time that adds up over evictions
is Kueue's ``SyncAdmittedCondition``).

1. A workload's budget is ``spec.maximumExecutionTimeSeconds``. It has used
   ``status.accumulatedPastExecutionTimeSeconds`` in earlier admissions, plus the time since its
   current admission: ``Admission.admitted_since``, when the quota was reserved, or with
   admission checks (checks.py) when they were all Ready; a workload still waiting for its
   checks has not started and uses none of its budget (Kueue counts from ``Admitted``).
2. Its deadline is ``admitted_since + (max - past)`` seconds. From then on (Kueue: remaining time
   <= 0) the engine evicts it with reason ``DeactivatedDueToMaximumExecutionTimeExceeded`` and
   deactivates it (``spec.active`` false); it stays out of its queue until someone reactivates it.
   The check runs in ``Engine.schedule`` with the clock the caller passes, and
   ``Engine.next_deadline`` includes these deadlines, so the caller wakes the engine on time.
3. Any other eviction adds the seconds of the admission it ends (whole seconds, truncated, as
   Kueue's int32 conversion) to the accumulated time. The deactivation resets it to 0, so a
   workload reactivated by its owner has its whole budget again (Kueue sets the field to nil at
   this point; docs/concepts.md says where kqueue differs).
4. A WorkloadSlice of a StatefulSet (``Workload.max_execution_spans_slices``) that replaces an
   admitted one starts with that one's time, :func:`accumulated` at the replacement
   (slice.py), so the budget spans the resizes as under Kueue's one Workload per StatefulSet.

Nothing here reads a clock or keeps timers: deadlines are derived from the workload as last seen.
The only state is which workloads the engine is deactivating, so that their eviction sends them
back to the queue inactive.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from .types import Workload, WorkloadKey
from .workload import AdmittedWorkload

# Kueue's DeactivationTarget message for MaximumExecutionTimeExceeded; its Evicted message is
# "The workload is deactivated due to " + this message.
EXCEEDING_MESSAGE = "exceeding the maximum execution time"


def admitted_seconds(since: datetime, until: datetime) -> int:
    """Whole seconds admitted from ``since`` to ``until`` (never negative: a clock that went
    backwards, or an admission time from the future, counts as nothing)."""
    return max((until - since) // timedelta(seconds=1), 0)


def accumulated(wl: Workload, admitted_since: datetime | None, released_at: datetime) -> int:
    """The accumulated past execution time once the admission from ``admitted_since`` ends at
    ``released_at`` (Kueue's ``SyncAdmittedCondition``); a workload never admitted (it waited
    for its admission checks) adds nothing."""
    if admitted_since is None:
        return wl.past_execution_seconds
    return wl.past_execution_seconds + admitted_seconds(admitted_since, released_at)


def deadline(wl: AdmittedWorkload) -> datetime | None:
    """When ``wl`` exceeds its maximum execution time if it stays admitted (None: no limit, or
    already deactivated)."""
    obj = wl.info.obj
    limit = obj.max_execution_seconds
    since = wl.admission.admitted_since
    if limit is None or not obj.active or since is None:
        return None
    return since + timedelta(seconds=limit - obj.past_execution_seconds)


def exceeded_message(wl: AdmittedWorkload, now: datetime) -> str:
    """The Evicted message: Kueue's, then the numbers and what the owner can do."""
    obj = wl.info.obj
    limit = obj.max_execution_seconds
    current = admitted_seconds(wl.admission.admitted_since or now, now)
    past = obj.past_execution_seconds
    used = f"admitted for {past + current}s in total"
    if past:
        used += f" ({past}s before its last eviction, {current}s since)"
    return (
        f"The workload is deactivated due to {EXCEEDING_MESSAGE}: it exceeded its maximum "
        f"execution time of {limit}s; {used}; set spec.active to true to queue it again with "
        f"a new budget of {limit}s, or raise the limit first "
        "(spec.maximumExecutionTimeSeconds, from the kqueue.io/max-exec-time-seconds label)"
    )


@dataclass(frozen=True, slots=True)
class Exceeded:
    """A workload past its maximum execution time: evict and deactivate it."""

    workload: WorkloadKey
    message: str


class ExecutionLimits:
    """Which admitted workloads are past their maximum execution time."""

    def __init__(self) -> None:
        # Deactivated by the engine, eviction not yet complete.
        self._deactivating: set[WorkloadKey] = set()

    def next_deadline(
        self, workloads: Mapping[WorkloadKey, AdmittedWorkload], evicting: set[WorkloadKey]
    ) -> datetime | None:
        best: datetime | None = None
        for key, wl in workloads.items():
            if key in evicting:
                continue
            d = deadline(wl)
            if d is not None and (best is None or d < best):
                best = d
        return best

    def expired(
        self,
        workloads: Mapping[WorkloadKey, AdmittedWorkload],
        evicting: set[WorkloadKey],
        now: datetime,
    ) -> list[Exceeded]:
        """Workloads whose budget is used up by ``now``, in key order; each is remembered as
        being deactivated until :meth:`after_eviction` or :meth:`forget`."""
        out: list[Exceeded] = []
        for key in sorted(workloads):
            if key in evicting:
                continue
            wl = workloads[key]
            d = deadline(wl)
            if d is None or d > now:
                continue
            self._deactivating.add(key)
            out.append(Exceeded(key, exceeded_message(wl, now)))
        return out

    def after_eviction(self, key: WorkloadKey) -> bool:
        """The workload's quota is released: whether the engine deactivated it."""
        if key in self._deactivating:
            self._deactivating.discard(key)
            return True
        return False

    def forget(self, key: WorkloadKey) -> None:
        """Finished or deleted."""
        self._deactivating.discard(key)
