"""One scheduling cycle, step by step as Kueue's ``scheduler.schedule``.

1. Heads: at most one head per active ClusterQueue.
2. Snapshot of the cache.
3. Nominate: flavor assignment (and preemption targets) per head.
4. Order: not borrowing before borrowing (lower borrowing height first), higher priority, earlier
   queue-order timestamp; UID and key break ties so the order is deterministic. With fair
   sharing, the tournament of ``fairness/tournament.py`` instead, re-run before each entry.
5. Process in order, re-checking each entry against what the cycle already did.
6. Requeue what was not admitted, with the reason that decides whether it waits for an event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from .cache import Cache
from .explain import PendingDetails, details_of
from .fairness.tournament import FairOrder
from .nominate import Entry, Status, assignments, nominate
from .preemption.preemptor import ClassicalPreemptor
from .preemption.protection import Protection
from .preemption.seam import Preemptor, preemption_message
from .queue import QueueManager
from .slice import FinishSlice, carried_time, finish_message
from .snapshot import ClusterQueueSnapshot, Snapshot
from .tas.delayed import DELAYED_PENDING
from .tas.fit import delayed_pod_sets
from .tas.fit import place_now as place_topology
from .tas.fit import reserve as reserve_topology
from .types import (
    Admission,
    ClusterQueueName,
    EvictionReason,
    Mode,
    PendingReason,
    PodSetAssignment,
    PreemptionReason,
    RequeueReason,
    ResourceName,
    Usage,
    WorkloadKey,
)
from .workload import AdmittedWorkload, WorkloadInfo

# -- decisions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Admit:
    """Reserve quota for ``workload``: write ``admission`` to its status."""

    workload: WorkloadKey
    cluster_queue: ClusterQueueName
    admission: Admission
    usage: Usage
    # Borrowing height (0: within the ClusterQueue's nominal quota).
    borrowing: int
    # status.accumulatedPastExecutionTimeSeconds to write with the admission: a WorkloadSlice
    # that carries the time of the slice it replaces (slice.py); None: left as it is.
    past_execution_seconds: int | None = None

    @property
    def pod_sets(self) -> tuple[PodSetAssignment, ...]:
        return self.admission.pod_sets


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict ``victim`` (reason ``Preempted``) so that ``preemptor`` fits."""

    victim: WorkloadKey
    preemptor: WorkloadKey
    cluster_queue: ClusterQueueName
    reason: PreemptionReason
    message: str
    # The preemptor's ClusterQueue (``cluster_queue`` is the victim's).
    preemptor_cluster_queue: ClusterQueueName | None = None


@dataclass(frozen=True, slots=True)
class Evict:
    """Evict ``workload`` for a reason other than preemption (stop policies, deactivation)."""

    workload: WorkloadKey
    cluster_queue: ClusterQueueName
    reason: EvictionReason
    message: str
    # PodsReady timeouts (readiness.py): the status.requeueState to write, and whether the
    # workload is to be deactivated (spec.active false, DeactivationTarget) rather than requeued.
    requeue_at: datetime | None = None
    requeue_count: int | None = None
    deactivate: bool = False


@dataclass(frozen=True, slots=True)
class Pending:
    """``workload`` stays pending: ``QuotaReserved=False`` with ``reason`` and ``message``."""

    workload: WorkloadKey
    cluster_queue: ClusterQueueName | None
    reason: PendingReason
    message: str
    details: PendingDetails


@dataclass(frozen=True, slots=True)
class Requeued:
    workload: WorkloadKey
    cluster_queue: ClusterQueueName
    reason: RequeueReason
    # False when parked until an event (BestEffortFIFO inadmissible).
    active: bool


@dataclass(frozen=True, slots=True)
class Deferred:
    """A preemptor waiting for a preemption protection to end, and the quota of its
    ClusterQueue it holds back meanwhile."""

    workload: WorkloadKey
    cluster_queue: ClusterQueueName
    holds: Usage


@dataclass(frozen=True, slots=True)
class CycleResult:
    cycle: int
    now: datetime
    admitted: tuple[Admit, ...] = ()
    preempted: tuple[Preempt, ...] = ()
    evicted: tuple[Evict, ...] = ()
    pending: tuple[Pending, ...] = ()
    requeued: tuple[Requeued, ...] = ()
    heads: int = 0
    # Replaced WorkloadSlices to finish, each next to the Admit of its replacement.
    finished: tuple[FinishSlice, ...] = ()
    # Per ClusterQueue whose heads were processed: how many had preemption targets but were
    # skipped because another head of the cycle took the same resources (Kueue's
    # admission_cycle_preemption_skips); 0 for a queue with none skipped.
    preemption_skips: tuple[tuple[ClusterQueueName, int], ...] = ()
    # How many cycles this result stands for (Engine.schedule may run several, merged_cycles.py).
    cycles: int = 1
    # Preemptors that found no victims because the workloads that would make room are
    # protected (preemption/protection.py), one per cycle that deferred them.
    protection_deferred: tuple[Deferred, ...] = ()

    def is_empty(self) -> bool:
        return not (self.admitted or self.preempted or self.evicted or self.pending)


# -- the cycle --------------------------------------------------------------------------------


class FlavorScans:
    """Where each pending workload's last flavor search stopped (Kueue's LastAssignment).

    The next search resumes after the last flavor tried, as long as the workload and what its
    ClusterQueue can allocate are unchanged; a skipped entry or one that issued preemptions
    starts over, as in Kueue.
    """

    def __init__(self) -> None:
        self._state: dict[
            WorkloadKey,
            tuple[WorkloadInfo, ClusterQueueName, tuple[int, int], tuple[dict[ResourceName, int], ...]],
        ] = {}

    def get(
        self, cache: Cache, info: WorkloadInfo, cq: ClusterQueueName
    ) -> tuple[dict[ResourceName, int], ...] | None:
        state = self._state.get(info.key)
        if state is None:
            return None
        seen, seen_cq, generation, last = state
        if seen is not info or seen_cq != cq or generation != cache.generation(cq):
            del self._state[info.key]
            return None
        return last

    def record(self, cache: Cache, e: Entry) -> bool:
        """Remember ``e``'s search; returns whether flavors are left to try."""
        skipped = e.status == Status.SKIPPED or e.requeue_reason == RequeueReason.PENDING_PREEMPTION
        if e.assignment is None or skipped:
            self.forget(e.info.key)
            return False
        last = e.assignment.last_tried()
        if not any(idx != -1 for per_pod_set in last for idx in per_pod_set.values()):
            self.forget(e.info.key)
            return False
        self._state[e.info.key] = (e.info, e.cluster_queue, cache.generation(e.cluster_queue), last)
        return True

    def forget(self, key: WorkloadKey) -> None:
        self._state.pop(key, None)


def _order_key(e: Entry) -> tuple[bool, int, int, datetime, str, str]:
    # A preemptor first (Kueue's PrioritizePreemptorWorkloads): its victims, requeued, would
    # otherwise take back the quota they freed for it.
    return (
        not e.preemptor, e.borrowing(), -e.info.priority, e.info.order_time(), e.info.uid,
        e.info.key,
    )


def _resources_to_reserve(e: Entry, cq: ClusterQueueSnapshot) -> Usage:
    """Quota a Preempt entry without victims holds back this cycle (quotaResourcesToReserve).

    Without it, lower entries of the cohort could take the quota this entry waits for.
    Clamped at zero: a ClusterQueue already past its limits reserves nothing more.
    """
    assert e.assignment is not None
    out: Usage = {}
    for fr, amount in e.assignment.usage.items():
        q = cq.resources.quota(fr)
        used = cq.usage_of(fr)
        if e.assignment.borrowing > 0:
            if q.borrowing_limit is None:
                reserved = amount
            else:
                reserved = min(amount, q.nominal + q.borrowing_limit - used)
        else:
            reserved = min(amount, q.nominal - used)
        if reserved > 0:
            out[fr] = reserved
    return out


@dataclass(slots=True)
class _Cycle:
    now: datetime
    cache: Cache
    snapshot: Snapshot
    preemptor: Preemptor
    preempted: dict[WorkloadKey, AdmittedWorkload]
    admitted: list[Admit]
    preemptions: list[Preempt]
    finished: list[FinishSlice] = field(default_factory=list)
    preemption_skips: dict[ClusterQueueName, int] = field(default_factory=dict)
    # Why no admission may happen now (waitForPodsReady.blockAdmission), if so.
    admission_gate: Callable[[], str | None] | None = None
    # The usage held in the snapshot for each entry that issued preemptions this cycle.
    held_for_preemptors: list[tuple[ClusterQueueSnapshot, Usage]] = field(default_factory=list)
    deferred: list[Deferred] = field(default_factory=list)

    def process(self, e: Entry) -> None:
        assert e.assignment is not None
        cq = self.snapshot.cluster_queues[e.cluster_queue]
        self._recompute_if_placement_is_stale(e, cq)
        mode = e.mode()
        self.preemption_skips.setdefault(e.cluster_queue, 0)
        if mode == Mode.NO_FIT:
            e.requeue_reason = RequeueReason.NO_FIT
            e.reason = e.assignment.no_fit_reason or PendingReason.WAITING_FOR_QUOTA
            return
        if mode == Mode.PREEMPT and not e.targets:
            e.requeue_reason = RequeueReason.PREEMPTION_NO_CANDIDATES
            e.reason = PendingReason.WAITING_FOR_QUOTA
            waits = self._waits_for_protection(e)
            if not cq.can_always_reclaim() or waits or e.preemptor:
                reserve = _resources_to_reserve(e, cq)
                cq.add_usage(reserve)
                if waits:
                    self.deferred.append(Deferred(e.info.key, e.cluster_queue, reserve))
                # As Kueue: hold the domains an empty cluster would give it, so that lower
                # entries do not take what it waits for.
                held, _ = place_topology(
                    e.info, e.assignment, cq, self.snapshot.topology, simulate_empty=True
                )
                reserve_topology(e.info, held, self.snapshot.topology)
            return
        if any(t.workload.key in self.preempted for t in e.targets):
            self._skip(e, "Workload has overlapping preemption targets with another workload")
            self.preemption_skips[e.cluster_queue] += 1
            return
        restore = self.snapshot.simulate_removal(self._victims(e))
        fits = cq.fits(e.assignment.usage, within_nominal=e.non_preemptible)
        # Topology-aware pod sets are placed again on the snapshot as this cycle left it
        # (victims gone): an earlier entry may have taken the domain nomination chose.
        placed, no_room = place_topology(e.info, e.assignment, cq, self.snapshot.topology)
        restore()
        if fits and mode != Mode.PREEMPT and self.held_for_preemptors:
            fits = self._fits_while_victims_hold(e, cq)
        if not fits or no_room is not None:
            message = "Workload no longer fits after processing another workload"
            self._skip(e, message if no_room is None else f"{message}: {no_room}")
            if mode == Mode.PREEMPT:
                self.preemption_skips[e.cluster_queue] += 1
            return
        e.assignment = placed
        for t in e.targets:
            self.preempted[t.workload.key] = t.workload
        if e.replaces is not None:
            self.snapshot.remove_workload(e.replaces)
        cq.add_usage(e.assignment.usage)
        reserve_topology(e.info, e.assignment, self.snapshot.topology)
        if mode == Mode.PREEMPT:
            self.held_for_preemptors.append((cq, dict(e.assignment.usage)))
            self._issue_preemptions(e)
            return
        blocked = self.admission_gate() if self.admission_gate is not None else None
        if blocked is not None:
            self._skip(e, blocked)
            return
        e.status = Status.NOMINATED
        self._admit(e)

    def _victims(self, e: Entry) -> list[AdmittedWorkload]:
        """What is gone once ``e`` runs: this cycle's victims, its own, the slice it replaces."""
        victims = [*self.preempted.values(), *(t.workload for t in e.targets)]
        if e.replaces is not None:
            victims.append(e.replaces)
        return victims

    def _recompute_if_placement_is_stale(self, e: Entry, cq: ClusterQueueSnapshot) -> None:
        """Kueue's updateAssignmentIfNeeded with TASRecomputeAssignmentWithinSchedulingCycle:
        an entry whose quota still fits but whose topology placement no longer does (an earlier
        entry of the cycle took its domain) gets its assignment, and preemption targets,
        computed again on the snapshot as the cycle left it, keeping the flavors it was
        nominated with (Kueue's NominationMapping). It may then preempt where nomination saw a
        free domain."""
        assert e.assignment is not None
        if e.mode() == Mode.NO_FIT or not any(ps.topology for ps in e.assignment.pod_sets):
            return
        restore = self.snapshot.simulate_removal(self._victims(e))
        quota_fits = cq.fits(e.assignment.usage, within_nominal=e.non_preemptible)
        _, no_room = place_topology(e.info, e.assignment, cq, self.snapshot.topology)
        restore()
        if not quota_fits or no_room is None:
            return
        sticky = tuple(
            {r: choice.flavor for r, choice in ps.flavors.items()} for ps in e.assignment.pod_sets
        )
        restore = self.snapshot.simulate_removal([e.replaces] if e.replaces else [])
        e.assignment, e.targets = assignments(
            e.info, cq, self.snapshot, self.preemptor, self.preemptor.oracle(self.snapshot),
            non_preemptible=e.non_preemptible, sticky=sticky,
        )
        restore()
        e.message = e.assignment.message()

    def _waits_for_protection(self, e: Entry) -> bool:
        """Whether ``e`` found no victims because the ones it needs are protected: then even
        a ClusterQueue that can always reclaim its quota cannot do so now, and holds back what
        it waits for, so that other entries do not take it (and become protected in turn); the
        engine keeps holding it in the next cycles (``run_cycle``'s ``held``)."""
        return (
            isinstance(self.preemptor, ClassicalPreemptor)
            and self.preemptor.protection_wait(e.info.key) is not None
        )

    def _fits_while_victims_hold(self, e: Entry, cq: ClusterQueueSnapshot) -> bool:
        """Whether ``e`` also fits with this cycle's victims still in place.

        An entry admitted now holds quota at once, while the victims keep theirs until their
        eviction lands: admitted into what only the victims will free, it would take its
        ClusterQueue or cohort past its quota until then. The quota held in the snapshot for
        the preemptors does not count here, as they are admitted only once the victims are gone
        (the check with the victims gone counts it). Kueue admits such an entry; its own
        DeferredFit makes an entry that fits only after this cycle's preemptions wait for them.
        """
        assert e.assignment is not None
        for holder, usage in self.held_for_preemptors:
            holder.remove_usage(usage)
        restore = self.snapshot.simulate_removal([e.replaces] if e.replaces is not None else [])
        try:
            return cq.fits(e.assignment.usage, within_nominal=e.non_preemptible)
        finally:
            restore()
            for holder, usage in self.held_for_preemptors:
                holder.add_usage(usage)

    def _skip(self, e: Entry, message: str) -> None:
        e.status = Status.SKIPPED
        e.message = message
        e.reason = PendingReason.WAITING_FOR_QUOTA

    def _issue_preemptions(self, e: Entry) -> None:
        for t in e.targets:
            if t.workload.key in self.cache.evicting:
                continue  # already leaving: never evicted twice
            self.cache.evicting.add(t.workload.key)
            self.preemptions.append(
                Preempt(
                    victim=t.workload.key,
                    preemptor=e.info.key,
                    cluster_queue=t.workload.cluster_queue,
                    reason=t.reason,
                    message=t.message or preemption_message(e.info, t.reason),
                    preemptor_cluster_queue=e.cluster_queue,
                )
            )
        e.reason = PendingReason.WAITING_FOR_PREEMPTED_WORKLOADS
        e.requeue_reason = RequeueReason.PENDING_PREEMPTION
        e.message += f". Pending the preemption of {len(e.targets)} workload(s)"

    def _admit(self, e: Entry) -> None:
        assert e.assignment is not None
        # Pod sets behind a ProvisioningRequest check reserve quota only (tas/delayed.py).
        delayed = delayed_pod_sets(
            e.info, e.assignment, self.snapshot.cluster_queues[e.cluster_queue],
            self.snapshot.topology,
        )
        pod_sets = tuple(
            PodSetAssignment(
                name=ps.name,
                flavors={r: c.flavor for r, c in sorted(ps.flavors.items())},
                resource_usage={r: ps.requests[r] for r in sorted(ps.flavors)},
                count=ps.count,
                topology=ps.topology,
                delayed_topology=DELAYED_PENDING if ps.name in delayed else None,
            )
            for ps in e.assignment.pod_sets
        )
        # With admission checks the workload is admitted later, when they are Ready.
        awaiting = bool(self.cache.admission_checks_for(e.cluster_queue, pod_sets))
        admission = Admission(
            e.cluster_queue, pod_sets, reserved_at=self.now,
            admitted_at=None if awaiting else self.now, awaiting_checks=awaiting,
        )
        info, past = e.info, None
        if e.replaces is not None:
            # The old slice is finished in the same step; its pods now belong to this one.
            self.cache.remove_workload(e.replaces.key)
            self.finished.append(
                FinishSlice(e.replaces.key, e.info.key, e.cluster_queue, finish_message(e.info))
            )
            info, past = carried_time(e.info, e.replaces, self.now)
        self.cache.add_workload(AdmittedWorkload.of(info, admission, assumed=True))
        e.status = Status.ASSUMED
        self.admitted.append(
            Admit(
                workload=e.info.key,
                cluster_queue=e.cluster_queue,
                admission=admission,
                usage=dict(e.assignment.usage),
                borrowing=e.assignment.borrowing,
                past_execution_seconds=past,
            )
        )


def run_cycle(
    *,
    number: int,
    now: datetime,
    cache: Cache,
    queues: QueueManager,
    preemptor: Preemptor,
    namespace_labels: Callable[[str], Mapping[str, str]],
    scan: FlavorScans | None = None,
    admission_gate: Callable[[], str | None] | None = None,
    misconfigured: Callable[[WorkloadInfo], str | None] | None = None,
    held: Mapping[WorkloadKey, Deferred] | None = None,
) -> CycleResult:
    """Run one cycle; ``scan`` keeps where each head's flavor search stopped across cycles;
    ``misconfigured`` says why a head's resources can never run (admissibility.py); ``held``:
    the quota preemptors waiting for a protection hold back (parked, they are no heads)."""
    scan = scan if scan is not None else FlavorScans()
    # 1. Heads.
    active = {name for name in queues.queues if cache.inactive(name) is None}
    heads = queues.heads(active)
    if not heads:
        return CycleResult(cycle=number, now=now)
    # 2. Snapshot.
    snapshot = cache.snapshot()
    snapshot.protection = Protection(cache.protection, now)
    # The heads popped for this cycle are pending too (preemption/undo.py weighs them): a head
    # of another ClusterQueue that would reclaim a preemptor at once must count.
    heads_in: dict[ClusterQueueName, list[WorkloadInfo]] = {}
    for info, cq in heads:
        heads_in.setdefault(cq, []).append(info)
    snapshot.pending = lambda cq: (*queues.pending_in(cq), *heads_in.get(cq, ()))
    popped = {info.key for info, _ in heads}
    for key in sorted(held or {}):
        d = (held or {})[key]
        holder = snapshot.cluster_queues.get(d.cluster_queue)
        if holder is not None and key not in popped:
            holder.add_usage(d.holds)
    # 3. Nominate.
    entries, inadmissible = nominate(
        heads,
        snapshot,
        preemptor,
        namespace_labels,
        lambda i, cq: scan.get(cache, i, cq),
        misconfigured=misconfigured,
    )
    for e in entries:
        e.preemptor = queues.is_preemptor(e.info.key, e.cluster_queue)
    if isinstance(preemptor, ClassicalPreemptor):
        for e in [*entries, *inadmissible]:
            why = preemptor.refusal(e.info.key)
            if why is not None:
                e.message += f"; {why}"
    # 4. Order, and 5. process: by the fair-sharing tournament, re-run before every entry, or
    # sorted once.
    entries.sort(key=_order_key)
    cycle = _Cycle(now, cache, snapshot, preemptor, {}, [], [], admission_gate=admission_gate)
    fair = FairOrder(entries, snapshot) if snapshot.fair_sharing is not None else None
    fair_notes: dict[WorkloadKey, str] = {}
    for e in fair if fair is not None else entries:
        cycle.process(e)
        match = fair.lost.get(e.info.key) if fair is not None else None
        if match is not None and e.status == Status.SKIPPED:
            # Say where fair sharing decided that another head of the cohort went first.
            e.message += f" ({match.describe()})"
            fair_notes[e.info.key] = match.summary()
    # 6. Requeue.
    pending: list[Pending] = []
    requeued: list[Requeued] = []
    for e in [*entries, *inadmissible]:
        if e.status == Status.ASSUMED:
            scan.forget(e.info.key)
            queues.delete(e.info.key)
            continue
        if e.status != Status.NOT_NOMINATED and e.requeue_reason == RequeueReason.GENERIC:
            e.requeue_reason = RequeueReason.FAILED_AFTER_NOMINATION
        more_flavors = scan.record(cache, e)
        # A head with flavors left to try has no final verdict: its equivalents stay queued.
        active_again = queues.requeue(
            e.info, e.cluster_queue, e.requeue_reason, equivalents=not more_flavors
        )
        if not active_again and more_flavors and e.cluster_queue in queues.queues:
            # Kueue: a head with flavors left to try goes back at once (PendingFlavors).
            active_again = queues.queues[e.cluster_queue].queue_inadmissible({e.info.key}) > 0
        requeued.append(Requeued(e.info.key, e.cluster_queue, e.requeue_reason, active_again))
        reason = e.reason or PendingReason.WAITING_FOR_QUOTA
        targets = tuple(t.workload.key for t in e.targets)
        details = details_of(
            reason, e.message, e.cluster_queue, e.assignment, targets,
            fair_sharing=fair_notes.get(e.info.key),
        )
        pending.append(Pending(e.info.key, e.cluster_queue, reason, e.message, details))
    result = CycleResult(
        cycle=number,
        now=now,
        admitted=tuple(cycle.admitted),
        preempted=tuple(cycle.preemptions),
        pending=tuple(sorted(pending, key=lambda p: p.workload)),
        requeued=tuple(sorted(requeued, key=lambda r: r.workload)),
        heads=len(heads),
        finished=tuple(cycle.finished),
        preemption_skips=tuple(sorted(cycle.preemption_skips.items())),
        protection_deferred=tuple(cycle.deferred),
    )
    return result
