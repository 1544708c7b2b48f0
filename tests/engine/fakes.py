"""A small priority-based Preemptor for exercising the cycle's preemption seam.

Not kqueue's victim search: it only evicts lower-priority workloads of the preemptor's own
ClusterQueue (or of its whole cohort tree), lowest priority and newest first, until the assignment fits. It checks that every
simulation restores the snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kqueue.engine.assignment import Assignment
from kqueue.engine.preemption.seam import PreemptionOracle, PreemptionPossibility, Target
from kqueue.engine.snapshot import ClusterQueueSnapshot, Snapshot
from kqueue.engine.types import FlavorResource, PreemptionReason
from kqueue.engine.workload import AdmittedWorkload, WorkloadInfo


def _candidates(
    cq: ClusterQueueSnapshot, wl: WorkloadInfo, snapshot: Snapshot, cohort_wide: bool
) -> list[AdmittedWorkload]:
    pool = [cq]
    if cohort_wide:
        root = cq.root()
        pool = [c for c in snapshot.cluster_queues.values() if c.root() is root]
    out = [
        w for c in pool for w in c.workloads.values() if w.info.preemption_priority < wl.priority
    ]
    out.sort(key=lambda w: (w.info.preemption_priority, -w.reserved_at.timestamp(), w.key))
    return out


@dataclass
class _Oracle:
    snapshot: Snapshot
    cohort_wide: bool

    def simulate_preemption(
        self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionPossibility, int]:
        before = self.snapshot.state()
        cands = [
            w for w in _candidates(cq, wl, self.snapshot, self.cohort_wide) if fr in w.usage
        ]
        restore = self.snapshot.simulate_removal(cands)
        ok = max(0, cq.available(fr)) >= quantity
        restore()
        assert self.snapshot.state() == before
        if not cands or not ok:
            return PreemptionPossibility.NO_CANDIDATES, 0
        return PreemptionPossibility.PREEMPT, 0


@dataclass
class LowerPriorityPreemptor:
    cohort_wide: bool = False
    calls: int = 0
    simulations_checked: int = field(default=0)

    def oracle(self, snapshot: Snapshot) -> PreemptionOracle:
        return _Oracle(snapshot, self.cohort_wide)

    def get_targets(
        self, wl: WorkloadInfo, assignment: Assignment, snapshot: Snapshot
    ) -> list[Target]:
        self.calls += 1
        cq = snapshot.cluster_queues[assignment.cluster_queue]
        before = snapshot.state()
        chosen: list[AdmittedWorkload] = []
        found = False
        for cand in _candidates(cq, wl, snapshot, self.cohort_wide):
            chosen.append(cand)
            restore = snapshot.simulate_removal(chosen)
            fits = cq.fits(assignment.usage)
            restore()
            if fits:
                found = True
                break
        assert snapshot.state() == before
        self.simulations_checked += 1
        if not found:
            return []
        return [
            Target(
                w,
                PreemptionReason.IN_CLUSTER_QUEUE
                if w.cluster_queue == cq.cq_name
                else PreemptionReason.IN_COHORT_RECLAMATION,
            )
            for w in chosen
        ]

