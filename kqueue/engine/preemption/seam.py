"""The seams to preemption: the oracle the flavor assigner asks, and the Preemptor the cycle calls.

Both are small protocols owned by their callers (as Kueue's flavor assigner owns its
``preemptionOracle``), so that preemption can be implemented separately. The engine's default
is ``ClassicalPreemptor`` (preemptor.py), chosen in one place, ``Engine.__init__``: callers that
want it pass nothing. ``NoPreemption`` never finds victims, which makes every "would need
preemption" outcome pend with ``WaitingForQuota``; tests use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from ..assignment import Assignment
from ..hierarchy import find_height_of_lowest_subtree_that_fits
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..types import FlavorResource, PreemptionReason
from ..workload import AdmittedWorkload, WorkloadInfo


class PreemptionPossibility(IntEnum):
    """What preempting could achieve for one flavor/resource (Kueue's PreemptionPossibility)."""

    # Admission would need preemption but no allowed victims exist.
    NO_CANDIDATES = 0
    # Victims exist, some in the preemptor's own ClusterQueue.
    PREEMPT = 1
    # Victims exist, all in other ClusterQueues of the cohort (reclaiming lent quota).
    RECLAIM = 2


class PreemptionOracle(Protocol):
    """Asked by the flavor assigner when ``quantity`` of ``fr`` does not fit as unused quota."""

    def simulate_preemption(
        self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionPossibility, int]:
        """Whether preemption in ``cq``'s tree could free ``quantity`` of ``fr`` for ``wl``.

        Returns the possibility and the borrowing height the workload would need after the
        preemptions (see hierarchy.find_height_of_lowest_subtree_that_fits). Must leave the
        snapshot exactly as it found it.
        """
        ...


@dataclass(frozen=True, slots=True)
class Target:
    """A workload to evict so that a preemptor fits."""

    workload: AdmittedWorkload
    reason: PreemptionReason
    # The Preempted condition message; empty means preemption_message's default.
    message: str = ""


class Preemptor(Protocol):
    """Victim search, called by the cycle for entries whose assignment mode is Preempt."""

    def oracle(self, snapshot: Snapshot) -> PreemptionOracle:
        """The oracle the flavor assigner uses during this cycle."""
        ...

    def get_targets(
        self, wl: WorkloadInfo, assignment: Assignment, snapshot: Snapshot
    ) -> list[Target]:
        """Victims whose removal makes ``assignment`` fit; empty when none would.

        Implementations simulate on ``snapshot`` and must restore it before returning. Victims
        in ``snapshot.evicting`` are already leaving: they may be returned (the cycle does not
        evict them twice) but must not be counted as new preemptions.
        """
        ...


class _NoCandidatesOracle:
    def simulate_preemption(
        self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionPossibility, int]:
        borrow, _ = find_height_of_lowest_subtree_that_fits(cq, fr, quantity)
        return PreemptionPossibility.NO_CANDIDATES, borrow


class NoPreemption:
    """A Preemptor that never preempts."""

    def oracle(self, snapshot: Snapshot) -> PreemptionOracle:
        return _NoCandidatesOracle()

    def get_targets(
        self, wl: WorkloadInfo, assignment: Assignment, snapshot: Snapshot
    ) -> list[Target]:
        return []


_HUMAN_REASONS: dict[PreemptionReason, str] = {
    PreemptionReason.IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    PreemptionReason.IN_COHORT_RECLAMATION: "reclamation within the cohort",
    PreemptionReason.IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


def preemption_message(preemptor: WorkloadInfo, reason: PreemptionReason) -> str:
    """Kueue's Preempted condition message."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid}, Key: {preemptor.key}) "
        f"due to {_HUMAN_REASONS[reason]}"
    )
