"""Preemption protection (docs/contracts.md §6): a minimum admitted time before a workload may be
preempted, per preemption path.

* ``withinClusterQueue`` guards ``InClusterQueue``, ``reclaimWithinCohort`` guards
  ``InCohortReclamation`` and ``InCohortReclaimWhileBorrowing``, ``fairSharing`` guards
  ``InCohortFairSharing``.
* The victim's ClusterQueue (``spec.preemption.protection``) sets it for its own workloads,
  path by path; a path it leaves unset takes the Configuration's ``preemptionProtection``.
* It counts from the victim's current ``Admitted`` condition (``Admission.admitted_at``): a
  workload holding quota but not admitted yet has done no work and is not protected; nor is a
  workload already being evicted (preempting it again costs nothing).

A protected workload is not a candidate on that path until its time is up. The searches record
each one they pass over (``Protected``); when no set of the others makes room, the preemptor
waits (``ProtectionWait``): its pending message names them and the engine wakes at the first
expiry (``Engine.next_deadline``), so the preemptor is retried then without any other event.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from kqueue.api.durations import format_duration

from ..snapshot import Snapshot
from ..types import ClusterQueueName, PreemptionReason, ProtectionConfig, WorkloadKey
from ..workload import AdmittedWorkload

# The Configuration / ClusterQueue field guarding each path.
FIELDS: dict[PreemptionReason, str] = {
    PreemptionReason.IN_CLUSTER_QUEUE: "withinClusterQueue",
    PreemptionReason.IN_COHORT_RECLAMATION: "reclaimWithinCohort",
    PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING: "reclaimWithinCohort",
    PreemptionReason.IN_COHORT_FAIR_SHARING: "fairSharing",
}


def _on_path(cfg: ProtectionConfig, reason: PreemptionReason) -> timedelta | None:
    if reason == PreemptionReason.IN_CLUSTER_QUEUE:
        return cfg.within_cluster_queue
    if reason == PreemptionReason.IN_COHORT_FAIR_SHARING:
        return cfg.fair_sharing
    return cfg.reclaim_within_cohort


@dataclass(frozen=True, slots=True)
class Protected:
    """A workload passed over as a victim because its protection on ``reason``'s path runs."""

    workload: WorkloadKey
    cluster_queue: ClusterQueueName
    reason: PreemptionReason
    until: datetime
    duration: timedelta
    # Where the duration comes from: the victim's ClusterQueue or the Configuration.
    source: str

    def describe(self, now: datetime | None = None) -> str:
        """``team-b/train-7 protected until 14:05:00 (reclaimWithinCohort.minAdmitDuration
        10m0s of ClusterQueue team-b)``."""
        return (
            f"{self.workload} protected until {clock(self.until, now)} "
            f"({FIELDS[self.reason]}.minAdmitDuration {format_duration(self.duration)} "
            f"of {self.source})"
        )


@dataclass(frozen=True, slots=True)
class Protection:
    """The rule as the snapshot of one cycle sees it: the Configuration's default, the time."""

    default: ProtectionConfig | None
    now: datetime

    def check(
        self,
        wl: AdmittedWorkload,
        reason: PreemptionReason,
        victim_cq: ProtectionConfig | None,
        evicting: bool,
    ) -> Protected | None:
        """Whether ``wl`` is protected from preemption for ``reason`` now, and until when."""
        start = wl.admission.admitted_at
        if evicting or start is None:
            return None
        duration = _on_path(victim_cq, reason) if victim_cq is not None else None
        source = f"ClusterQueue {wl.cluster_queue}"
        if duration is None and self.default is not None:
            duration = _on_path(self.default, reason)
            source = "the Configuration"
        if not duration:
            return None
        until = start + duration
        if until <= self.now:
            return None
        return Protected(wl.key, wl.cluster_queue, reason, until, duration, source)


def protected(
    snapshot: Snapshot, wl: AdmittedWorkload, reason: PreemptionReason
) -> Protected | None:
    """Whether ``wl`` may not be preempted for ``reason`` in this cycle (None: it may)."""
    rule = snapshot.protection
    if rule is None:
        return None
    cq = snapshot.cluster_queues.get(wl.cluster_queue)
    own = cq.spec.preemption.protection if cq is not None else None
    return rule.check(wl, reason, own, wl.key in snapshot.evicting)


@dataclass(frozen=True, slots=True)
class ProtectionWait:
    """A preemptor that found no allowed set of victims while protected workloads were passed
    over: it is retried at ``until``, the first of their protections to end."""

    protected: tuple[Protected, ...]

    @property
    def until(self) -> datetime:
        return min(p.until for p in self.protected)

    def message(self, now: datetime | None = None) -> str:
        names = ", ".join(p.describe(now) for p in self.protected)
        return (
            f"waiting for preemption protection to end: {names}; retrying at "
            f"{clock(self.until, now)}"
        )

    @staticmethod
    def of(found: Iterable[Protected]) -> ProtectionWait | None:
        by_key: dict[WorkloadKey, Protected] = {}
        for p in found:
            old = by_key.get(p.workload)
            if old is None or p.until < old.until:
                by_key[p.workload] = p
        if not by_key:
            return None
        return ProtectionWait(tuple(sorted(by_key.values(), key=lambda p: (p.until, p.workload))))

    def merged(self, other: ProtectionWait | None) -> ProtectionWait:
        if other is None:
            return self
        wait = ProtectionWait.of([*self.protected, *other.protected])
        assert wait is not None
        return wait


def clock(at: datetime, now: datetime | None = None) -> str:
    """``14:05:00`` on the day of ``now`` (UTC), the full RFC 3339 time otherwise."""
    if now is not None and at.date() == now.date():
        return at.strftime("%H:%M:%S")
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")
