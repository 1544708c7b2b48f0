"""Nomination: for each head, the checks that need no quota, then its flavor assignment.

Kueue's ``nominate`` and ``getInitialAssignments``: a head in a missing or inactive ClusterQueue,
in a namespace outside its ``namespaceSelector``, or whose resources can never run
(``admissibility.py``), pends at once; otherwise the full counts are
tried; ``Preempt`` asks the preemptor for victims; when neither works and pod sets have
``minCount``, partial admission looks for smaller counts that fit or can preempt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from .assignment import Assignment
from .flavor import FlavorAssigner
from .partial import reduce_counts
from .preemption.seam import PreemptionOracle, Preemptor, Target
from .selectors import selector_matches
from .slice import StickyFlavors, replaced_slice, sticky_flavors
from .snapshot import ClusterQueueSnapshot, Snapshot
from .tas.fit import fit as topology_fit
from .types import (
    ClusterQueueName,
    Mode,
    PendingReason,
    Preemptibility,
    RequeueReason,
    ResourceName,
)
from .workload import AdmittedWorkload, WorkloadInfo


class Status(StrEnum):
    NOT_NOMINATED = "notNominated"
    NOMINATED = "nominated"
    SKIPPED = "skipped"
    ASSUMED = "assumed"


@dataclass(slots=True)
class Entry:
    """A head being considered in this cycle."""

    info: WorkloadInfo
    cluster_queue: ClusterQueueName
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    status: Status = Status.NOT_NOMINATED
    reason: PendingReason | None = None
    message: str = ""
    requeue_reason: RequeueReason = RequeueReason.GENERIC
    non_preemptible: bool = False
    # The admitted WorkloadSlice this entry replaces (finished when it is admitted).
    replaces: AdmittedWorkload | None = None
    # It issued preemptions in an earlier cycle and waits to be admitted in their place (Kueue's
    # IsPreemptor): ordered before the other heads, it holds back what it waits for.
    preemptor: bool = False

    def mode(self) -> Mode:
        return Mode.NO_FIT if self.assignment is None else self.assignment.mode()

    def borrowing(self) -> int:
        return 0 if self.assignment is None else self.assignment.borrowing


NAMESPACE_MISMATCH = "workload namespace doesn't match ClusterQueue selector"


LastTried = Callable[[WorkloadInfo, ClusterQueueName], Sequence[Mapping[ResourceName, int]] | None]


def nominate(
    heads: list[tuple[WorkloadInfo, ClusterQueueName]],
    snapshot: Snapshot,
    preemptor: Preemptor,
    namespace_labels: Callable[[str], Mapping[str, str]],
    last_tried: LastTried | None = None,
    *,
    misconfigured: Callable[[WorkloadInfo], str | None] | None = None,
) -> tuple[list[Entry], list[Entry]]:
    """Entries to process, and entries already known to be inadmissible.

    ``last_tried`` gives, per head, where the previous flavor search stopped (Kueue's
    LastTriedFlavorIdx), so that it resumes with the next flavor. ``misconfigured`` says why a
    head's resources can never run (requests above limits, outside a LimitRange), or None.
    """
    oracle = preemptor.oracle(snapshot)
    entries: list[Entry] = []
    inadmissible: list[Entry] = []
    for info, cq_name in heads:
        e = Entry(info, cq_name)
        cq = snapshot.cluster_queue(cq_name)
        if cq is None:
            e.reason = PendingReason.MISCONFIGURED
            e.message = f"ClusterQueue {cq_name} doesn't exist"
        elif cq.inactive is not None:
            e.reason = cq.inactive.reason
            e.message = cq.inactive.message
        elif not selector_matches(cq.spec.namespace_selector, namespace_labels(info.obj.namespace)):
            e.reason = PendingReason.MISCONFIGURED
            e.message = NAMESPACE_MISMATCH
            e.requeue_reason = RequeueReason.NAMESPACE_MISMATCH
        elif misconfigured is not None and (why := misconfigured(info)) is not None:
            e.reason = PendingReason.MISCONFIGURED
            e.message = why
        else:
            threshold = cq.spec.preemption.preemptible_priority_threshold
            e.non_preemptible = info.preemptibility(threshold) == Preemptibility.NON_PREEMPTIBLE
            # A WorkloadSlice is charged only its delta: the old slice's quota counts as free.
            e.replaces = replaced_slice(info, snapshot, cq_name)
            restore = snapshot.simulate_removal([e.replaces] if e.replaces else [])
            e.assignment, e.targets = assignments(
                info,
                cq,
                snapshot,
                preemptor,
                oracle,
                non_preemptible=e.non_preemptible,
                last_tried=(
                    last_tried(info, cq_name)
                    if last_tried is not None and e.replaces is None
                    else None
                ),
                sticky=sticky_flavors(info, e.replaces) if e.replaces else None,
            )
            restore()
            e.message = e.assignment.message()
            entries.append(e)
            continue
        inadmissible.append(e)
    return entries, inadmissible


def assignments(
    info: WorkloadInfo,
    cq: ClusterQueueSnapshot,
    snapshot: Snapshot,
    preemptor: Preemptor,
    oracle: PreemptionOracle,
    *,
    non_preemptible: bool,
    last_tried: Sequence[Mapping[ResourceName, int]] | None = None,
    sticky: StickyFlavors | None = None,
) -> tuple[Assignment, list[Target]]:
    """The assignment to try this cycle and its preemption targets (Kueue's getAssignments)."""
    assigner = FlavorAssigner(
        info, cq, snapshot.flavors, oracle, non_preemptible=non_preemptible,
        last_tried=last_tried, sticky=sticky, fair_sharing=snapshot.fair_sharing is not None,
        topology=snapshot.topology,
    )
    full = topology_fit(info, assigner.assign(), cq, snapshot.topology)
    mode = full.mode()
    if mode == Mode.FIT:
        return full, []
    if mode == Mode.PREEMPT:
        targets = preemptor.get_targets(info, full, snapshot)
        if targets:
            return full, targets
    if info.obj.can_be_partially_admitted():

        def fits(counts: tuple[int, ...]) -> tuple[Assignment, list[Target]] | None:
            a = topology_fit(info, assigner.assign(counts), cq, snapshot.topology)
            m = a.mode()
            if m == Mode.FIT:
                return a, []
            if m == Mode.PREEMPT:
                t = preemptor.get_targets(info, a, snapshot)
                if t:
                    return a, t
            return None

        found = reduce_counts(info.pod_sets, fits)
        if found is not None:
            return found
    return full, []
