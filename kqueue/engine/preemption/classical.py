"""Victim search: which admitted workloads may be preempted for a preemptor, in which order, and
the minimal set among them that makes the preemptor fit.

A port of Kueue's classical preemption (``preemption.go`` and ``classical/``) with the additions
of docs/contracts.md §3:

* **Candidates** are workloads that use a flavor/resource the preemptor's assignment cannot get
  without preemption (the *contested* resources). In the preemptor's ClusterQueue they must satisfy
  ``withinClusterQueue``; in other ClusterQueues of its cohort tree they must satisfy
  ``reclaimWithinCohort`` and sit in a part of the tree that uses more than its nominal quota of a
  contested resource. Victims are compared by their *preemption priority*, the preemptor by its
  *scheduling priority*; a non-preemptible workload is never a candidate.
* **Variants** (Kueue's ``preemptionVariant``): a candidate in another ClusterQueue over which the
  preemptor has a hierarchical advantage (its subtree fits the request within its own quota) may be
  reclaimed regardless of priority thresholds; otherwise it may be reclaimed only while the
  preemptor does not borrow, unless ``borrowWithinCohort`` allows it for candidates of lower
  priority, at most ``maxPriorityThreshold``.
* **Order**: workloads already being evicted first, then hierarchical candidates, other
  ClusterQueues' candidates, own candidates; within each, lower preemption priority first, then by
  admission time (most recent first for ``preemptionOrder: Newest``, earliest for ``Oldest``).
* **Minimal set** (Kueue's ``classicalPreemptions``): remove candidates in order until the
  preemptor fits, then add back, in reverse order, every one that is not needed
  (``search.fill_back``). Kueue's attempts with and without borrowing are kept.
* **Classes first, then the lowest highest victim priority**: the search runs with the workloads
  already being evicted only, then adds the classes one by one (hierarchical candidates, other
  ClusterQueues' candidates, the preemptor's own), so a set that needs a later class is used only
  when the earlier classes cannot make room (Kueue's order). Of the class being added, only
  candidates of preemption priority at most ``p`` are used, for increasing ``p``; the first ``p``
  that works wins (KEP-5710 within Kueue's order). Workloads already being evicted cost nothing
  and are always allowed.

Every simulation works on the snapshot and puts it back exactly as it found it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from ..assignment import Assignment
from ..hierarchy import ClusterQueueNode, CohortNode, Node
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..types import (
    BorrowWithinCohortPolicy,
    FlavorResource,
    Mode,
    Preemptibility,
    PreemptionOrder,
    PreemptionPolicy,
    PreemptionReason,
    Usage,
    WorkloadKey,
)
from ..workload import AdmittedWorkload, WorkloadInfo
from .preemptibility import PreemptibilitySource, resolve_preemptibility
from .protection import Protected, protected
from .report import CandidateNote
from .search import (
    SearchInput,
    candidate_order,
    fill_back,
    fits,
    policy_allows,
    uses_resources,
    within_nominal,
)


class Variant(IntEnum):
    """How a candidate may be preempted (Kueue's preemptionVariant)."""

    # In the preemptor's own ClusterQueue.
    WITHIN_CQ = 1
    # The preemptor's subtree has first claim on the quota the candidate uses.
    HIERARCHICAL_RECLAIM = 2
    # Only if the preemptor does not borrow once it is admitted.
    RECLAIM_WITHOUT_BORROWING = 3
    # Even if the preemptor borrows (``borrowWithinCohort``).
    RECLAIM_WHILE_BORROWING = 4

    @property
    def reason(self) -> PreemptionReason:
        if self is Variant.WITHIN_CQ:
            return PreemptionReason.IN_CLUSTER_QUEUE
        if self is Variant.RECLAIM_WHILE_BORROWING:
            return PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
        return PreemptionReason.IN_COHORT_RECLAMATION


class Rejection(StrEnum):
    """Why an admitted workload is not a preemption candidate."""

    NOT_USING_CONTESTED = "NotUsingContestedResources"
    NON_PREEMPTIBLE = "NonPreemptible"
    POLICY_NEVER = "PolicyNever"
    PRIORITY = "Priority"
    # Its part of the cohort tree uses no more than its nominal quota: nothing to reclaim.
    NOT_BORROWING = "NotBorrowing"
    # Admitted for less than the minimum admitted time of that path (protection.py).
    PROTECTED = "Protected"


# -- the search -------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class Candidate:
    workload: AdmittedWorkload
    variant: Variant
    evicting: bool
    # For other ClusterQueues: the lowest common ancestor with the preemptor's ClusterQueue.
    lca: CohortNode | None = None

    @property
    def priority(self) -> int:
        return self.workload.info.preemption_priority


@dataclass(slots=True)
class Found:
    targets: list[Candidate]
    borrowing: bool
    # Highest preemption priority among the victims not already being evicted.
    threshold: int | None


def contested_resources(assignment: Assignment) -> frozenset[FlavorResource]:
    """Flavor/resources the assignment gets only by preempting (Kueue's frsNeedPreemption)."""
    out: set[FlavorResource] = set()
    for ps in assignment.pod_sets:
        for res, choice in ps.flavors.items():
            if choice.mode == Mode.PREEMPT:
                out.add((choice.flavor, res))
    return frozenset(out)


def _fits_in_quota(node: Node, requests: Mapping[FlavorResource, int]) -> tuple[bool, Usage]:
    """Kueue's QuantitiesFitInQuota: whether ``requests`` fit in ``node``'s own subtree quota,
    and what is left to find higher up once its local quota is used."""
    r = node.resources
    fits = True
    remaining: Usage = {}
    for fr, v in requests.items():
        if r.usage.get(fr, 0) + v > r.subtree_quota.get(fr, 0):
            fits = False
        remaining[fr] = max(0, v - r.local_available(fr))
    return fits, remaining


class _Classifier:
    """Sorts admitted workloads into candidate variants; with ``record``, notes why for each.

    Messages are built only when recording: the oracle searches many times per cycle and
    needs none of them.
    """

    def __init__(self, ctx: SearchInput, snapshot: Snapshot, record: bool) -> None:
        self.ctx = ctx
        self.snapshot = snapshot
        self.policy = ctx.cq.spec.preemption
        self.record = record
        self.notes: dict[WorkloadKey, CandidateNote] = {}
        # Workloads passed over because their protection on the path runs.
        self.protected: list[Protected] = []

    def note(
        self, wl: AdmittedWorkload, usable: bool, why: str, message: Callable[[], str]
    ) -> None:
        if not self.record:
            return
        key = wl.key
        self.notes[key] = CandidateNote(
            workload=key,
            cluster_queue=wl.cluster_queue,
            priority=wl.info.priority,
            preemption_priority=wl.info.preemption_priority,
            usable=usable,
            why=why,
            message=message(),
            evicting=key in self.snapshot.evicting,
        )

    def classify(self, wl: AdmittedWorkload, *, advantage: bool) -> Variant | None:
        """The variant ``wl`` may be preempted with, or None; a workload that would be a
        candidate but is protected on that path (protection.py) is recorded and is not one."""
        variant = self._variant(wl, advantage=advantage)
        if variant is None:
            return None
        guard = protected(self.snapshot, wl, variant.reason)
        if guard is None:
            return variant
        self.protected.append(guard)
        now = self.snapshot.protection.now if self.snapshot.protection is not None else None
        self.note(wl, False, Rejection.PROTECTED, lambda: (
            f"{guard.describe(now)}; not a candidate for {variant.reason} until then"
        ))
        return None

    def _variant(self, wl: AdmittedWorkload, *, advantage: bool) -> Variant | None:
        ctx = self.ctx
        if not uses_resources(wl, ctx.contested):
            self.note(wl, False, Rejection.NOT_USING_CONTESTED, lambda: (
                "does not use the contested resources ("
                + ", ".join(f"{f}/{r}" for f, r in sorted(ctx.contested)) + ")"
            ))
            return None
        victim_cq = self.snapshot.cluster_queues.get(wl.cluster_queue)
        threshold = (
            victim_cq.spec.preemption.preemptible_priority_threshold if victim_cq else None
        )
        resolution = resolve_preemptibility(
            spec=wl.info.obj.preemptibility,
            owner_label=wl.info.obj.owner_preemptibility_label,
            pod_label=wl.info.obj.pod_preemptibility_label,
            preemption_priority=wl.info.preemption_priority,
            priority_threshold=threshold,
        )
        if resolution.value == Preemptibility.NON_PREEMPTIBLE:
            self.note(wl, False, Rejection.NON_PREEMPTIBLE, lambda: _non_preemptible_message(
                resolution.source, wl, threshold
            ))
            return None
        same_cq = wl.cluster_queue == ctx.cq.name
        policy = self.policy.within_cluster_queue if same_cq else self.policy.reclaim_within_cohort
        field_name = "withinClusterQueue" if same_cq else "reclaimWithinCohort"
        if policy == PreemptionPolicy.NEVER:
            self.note(wl, False, Rejection.POLICY_NEVER, lambda: (
                f"ClusterQueue {ctx.cq.name} has {field_name}: Never"
            ))
            return None
        mine, theirs = ctx.preemptor.priority, wl.info.preemption_priority

        def why() -> str:
            return _why(policy, ctx.preemptor, wl)

        if not policy_allows(policy, ctx.preemptor, wl):
            self.note(wl, False, Rejection.PRIORITY, lambda: f"{why()} ({field_name}: {policy})")
            return None
        if same_cq:
            self.note(
                wl, True, Variant.WITHIN_CQ.name, lambda: f"{why()} ({field_name}: {policy})"
            )
            return Variant.WITHIN_CQ
        if advantage:
            self.note(wl, True, Variant.HIERARCHICAL_RECLAIM.name, lambda: (
                f"{why()}; reclaims quota of the preemptor's part of the cohort tree"
            ))
            return Variant.HIERARCHICAL_RECLAIM
        bwc = self.policy.borrow_within_cohort
        limit = self.policy.borrow_within_cohort_max_priority_threshold
        if bwc == BorrowWithinCohortPolicy.NEVER:
            self.note(wl, True, Variant.RECLAIM_WITHOUT_BORROWING.name, lambda: (
                f"{why()}; only while the preemptor does not borrow (borrowWithinCohort: Never)"
            ))
            return Variant.RECLAIM_WITHOUT_BORROWING
        if theirs >= mine or (limit is not None and theirs > limit):
            bound = (
                f"not below the preemptor's priority {mine}"
                if theirs >= mine
                else f"above maxPriorityThreshold {limit}"
            )
            self.note(wl, True, Variant.RECLAIM_WITHOUT_BORROWING.name, lambda: (
                f"{why()}; only while the preemptor does not borrow: preemption priority "
                f"{theirs} is {bound}"
            ))
            return Variant.RECLAIM_WITHOUT_BORROWING
        self.note(wl, True, Variant.RECLAIM_WHILE_BORROWING.name, lambda: (
            f"{why()}; also while the preemptor borrows (borrowWithinCohort: {bwc}"
            + (f", maxPriorityThreshold {limit})" if limit is not None else ")")
        ))
        return Variant.RECLAIM_WHILE_BORROWING


def _non_preemptible_message(
    source: PreemptibilitySource, wl: AdmittedWorkload, threshold: int | None
) -> str:
    if source == PreemptibilitySource.PRIORITY_THRESHOLD:
        return (
            f"non-preemptible: preemption priority {wl.info.preemption_priority} is above the "
            f"preemptiblePriorityThreshold {threshold} of ClusterQueue {wl.cluster_queue}"
        )
    where = {
        PreemptibilitySource.SPEC: "spec.preemptibility",
        PreemptibilitySource.OWNER_LABEL: "the kqueue.io/preemptibility label of its owner",
        PreemptibilitySource.POD_LABEL: "the kqueue.io/preemptibility label of its pods",
    }.get(source, "its settings")
    return f"non-preemptible ({where})"


def _why(policy: PreemptionPolicy, preemptor: WorkloadInfo, wl: AdmittedWorkload) -> str:
    """The priority comparison behind ``policy_allows``, in words."""
    mine, theirs = preemptor.priority, wl.info.preemption_priority
    if policy == PreemptionPolicy.ANY:
        return f"preemption priority {theirs}, any priority may be reclaimed"
    if theirs < mine:
        return f"preemption priority {theirs} < preemptor priority {mine}"
    if policy == PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY and theirs == mine:
        if preemptor.order_time() < wl.info.order_time():
            return f"preemption priority {theirs} equals preemptor priority {mine} and it is newer"
        return (
            f"preemption priority {theirs} equals preemptor priority {mine} but it is not newer "
            f"than the preemptor"
        )
    return f"preemption priority {theirs} is not below preemptor priority {mine}"


def _not_borrowing(name: str) -> Callable[[], str]:
    return lambda: (
        f"ClusterQueue {name} (or its cohort) uses no more than its nominal quota of the "
        f"contested resources: nothing to reclaim"
    )


def _cq_snapshot(snapshot: Snapshot, node: ClusterQueueNode) -> ClusterQueueSnapshot | None:
    return snapshot.cluster_queues.get(node.cq_name)


class Search:
    """One victim search over a snapshot (construct, then ``run``)."""

    def __init__(
        self,
        ctx: SearchInput,
        snapshot: Snapshot,
        order: PreemptionOrder | None = None,
        *,
        record: bool = True,
    ) -> None:
        self.ctx = ctx
        self.snapshot = snapshot
        self.order = order if order is not None else ctx.cq.spec.preemption.preemption_order
        self.record = record
        self.classifier = _Classifier(ctx, snapshot, record)
        self.hierarchy: list[Candidate] = []
        self.priority: list[Candidate] = []
        self.same: list[Candidate] = []
        self._collect()

    # -- candidates --------------------------------------------------------------------------

    def _make(self, wl: AdmittedWorkload, lca: CohortNode | None, advantage: bool) -> None:
        variant = self.classifier.classify(wl, advantage=advantage)
        if variant is None:
            return
        cand = Candidate(wl, variant, wl.key in self.snapshot.evicting, lca)
        if variant is Variant.WITHIN_CQ:
            self.same.append(cand)
        elif variant is Variant.HIERARCHICAL_RECLAIM:
            self.hierarchy.append(cand)
        else:
            self.priority.append(cand)

    def _collect(self) -> None:
        ctx = self.ctx
        for key in sorted(ctx.cq.workloads):
            self._make(ctx.cq.workloads[key], None, False)
        if ctx.cq.parent is None:
            return
        if ctx.cq.spec.preemption.reclaim_within_cohort == PreemptionPolicy.NEVER:
            if self.record:
                for cq in self._other_cqs():
                    for key in sorted(cq.workloads):
                        self.classifier.classify(cq.workloads[key], advantage=False)
            return
        advantage, remaining = _fits_in_quota(ctx.cq, ctx.requests)
        previous: CohortNode | None = None
        for subtree_root in ctx.cq.path_to_root():
            self._collect_subtree(subtree_root, subtree_root, previous, advantage)
            fits, remaining = _fits_in_quota(subtree_root, remaining)
            # Once a subtree fits the request, the preemptor's claim covers every workload
            # using that subtree's quota, at this level and above.
            advantage = advantage or fits
            previous = subtree_root
        if not self.record:
            return
        # Workloads in parts of the tree that use no more than their quota: nothing to reclaim.
        for cq in self._other_cqs():
            for key in sorted(cq.workloads):
                if key in self.classifier.notes:
                    continue
                wl = cq.workloads[key]
                if not uses_resources(wl, ctx.contested):
                    self.classifier.classify(wl, advantage=False)
                    continue
                self.classifier.note(wl, False, Rejection.NOT_BORROWING, _not_borrowing(cq.name))

    def _other_cqs(self) -> list[ClusterQueueSnapshot]:
        root = self.ctx.cq.root()
        if not isinstance(root, CohortNode):
            return []
        out = []
        for node in root.subtree_cluster_queues():
            snap = _cq_snapshot(self.snapshot, node)
            if snap is not None and snap is not self.ctx.cq:
                out.append(snap)
        return sorted(out, key=lambda c: c.name)

    def _collect_subtree(
        self,
        cohort: CohortNode,
        lca: CohortNode,
        skip: CohortNode | None,
        advantage: bool,
    ) -> None:
        frs = self.ctx.contested
        for child in sorted(cohort.child_cohorts, key=lambda c: c.name):
            if child is skip or within_nominal(child, frs):
                continue
            self._collect_subtree(child, lca, skip, advantage)
        for node in sorted(cohort.child_cqs, key=lambda c: c.name):
            cq = _cq_snapshot(self.snapshot, node)
            if cq is None or cq is self.ctx.cq or within_nominal(cq, frs):
                continue
            for key in sorted(cq.workloads):
                self._make(cq.workloads[key], lca, advantage)

    def ordered(self, allowed: Iterable[Candidate] | None = None) -> list[Candidate]:
        """Kueue's candidate order (see the module docstring and search.candidate_order)."""
        groups = {id(c): 0 for c in self.hierarchy}
        groups.update({id(c): 1 for c in self.priority})
        groups.update({id(c): 2 for c in self.same})
        pool = list(allowed) if allowed is not None else [
            *self.hierarchy, *self.priority, *self.same
        ]
        return sorted(pool, key=lambda c: candidate_order(
            c.workload, evicting=c.evicting, group=groups[id(c)], order=self.order
        ))

    @property
    def protected(self) -> list[Protected]:
        """Workloads passed over because their protection runs (protection.py)."""
        return self.classifier.protected

    def all(self) -> list[Candidate]:
        return [*self.hierarchy, *self.priority, *self.same]

    # -- fitting -----------------------------------------------------------------------------

    def _fits(self, borrowing: bool) -> bool:
        return fits(self.ctx, borrowing=borrowing)

    def _valid(self, c: Candidate, borrowing: bool) -> bool:
        """Kueue's candidateIsValid: earlier removals may have made a candidate pointless."""
        if c.workload.cluster_queue == self.ctx.cq.name:
            return True
        if borrowing and c.variant is Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        cq = self.snapshot.cluster_queues.get(c.workload.cluster_queue)
        if cq is None or within_nominal(cq, self.ctx.contested):
            return False
        for node in cq.path_to_root():
            if node is c.lca:
                break
            if within_nominal(node, self.ctx.contested):
                return False
        return True

    def _attempt(self, candidates: Sequence[Candidate], borrowing: bool) -> list[Candidate] | None:
        removed: list[Candidate] = []
        try:
            for c in candidates:
                if not self._valid(c, borrowing):
                    continue
                self.snapshot.remove_workload(c.workload)
                removed.append(c)
                if self._fits(borrowing):
                    return self._fill_back(removed, borrowing)
            return None
        finally:
            for c in reversed(removed):
                self.snapshot.add_workload(c.workload)

    def _fill_back(self, removed: list[Candidate], borrowing: bool) -> list[Candidate]:
        """The minimal set (search.fill_back); ``removed`` is left holding exactly what is still
        removed from the snapshot, so that the caller's restore puts back the right workloads."""
        targets = fill_back(self.snapshot, removed, lambda: self._fits(borrowing))
        removed[:] = targets
        return targets

    def _attempt_options(self, allowed: Sequence[Candidate]) -> list[bool]:
        """Kueue's choice of attempts with and without borrowing."""
        ctx = self.ctx
        others = [c for c in allowed if c.variant is not Variant.WITHIN_CQ]
        hierarchical = [c for c in allowed if c.variant is Variant.HIERARCHICAL_RECLAIM]
        forbidden = ctx.cq.spec.preemption.borrow_within_cohort == BorrowWithinCohortPolicy.NEVER
        under_nominal = all(
            ctx.cq.usage_of(fr) < ctx.cq.nominal(fr) for fr in ctx.contested
        )
        if not others or (forbidden and not under_nominal):
            return [True]
        if forbidden and not hierarchical:
            return [False, True]
        return [True, False]

    def _kueue(self, allowed: Sequence[Candidate]) -> tuple[list[Candidate], bool] | None:
        ordered = self.ordered(allowed)
        for borrowing in self._attempt_options(ordered):
            found = self._attempt(ordered, borrowing)
            if found:
                return found, borrowing
        return None

    def run(self) -> Found | None:
        """The victims to evict, or None when no allowed set makes the preemptor fit.

        Kueue's candidate classes come first: a set that needs a later class (hierarchical
        reclaim, then other ClusterQueues' borrowers, then the preemptor's own ClusterQueue) is
        used only when the earlier classes cannot make room, because reclaiming borrowed quota
        before sacrificing the owner's own work is what quota guarantees mean. Once a class is
        needed, the earlier classes' candidates stay available (they come first in Kueue's
        order), and of the class needed only candidates of preemption priority at most ``p`` are
        used, for increasing ``p``: the highest victim priority it adds is kept as low as
        possible (KEP-5710), then the set minimal. Workloads already being evicted cost nothing
        and are always allowed.
        """
        classes = [self.hierarchy, self.priority, self.same]
        if self.ctx.only_evicting:
            classes = [[c for c in group if c.evicting] for group in classes]
        if not any(classes):
            return None
        evicting = [c for group in classes for c in group if c.evicting]
        if evicting and (found := self._found(evicting)) is not None:
            return found
        earlier: list[Candidate] = []
        for group in classes:
            fresh = [c for c in group if not c.evicting]
            for level in sorted({c.priority for c in fresh}):
                allowed = [c for c in fresh if c.priority <= level]
                found = self._found([*evicting, *earlier, *allowed])
                if found is not None:
                    return found
            earlier.extend(fresh)
        return None

    def _found(self, allowed: Sequence[Candidate]) -> Found | None:
        result = self._kueue(allowed)
        if result is None:
            return None
        targets, borrowing = result
        new = [c.priority for c in targets if not c.evicting]
        return Found(targets, borrowing, max(new) if new else None)

    def notes(self, chosen: Iterable[WorkloadKey] = ()) -> tuple[CandidateNote, ...]:
        picked = set(chosen)
        out = []
        for key in sorted(self.classifier.notes):
            note = self.classifier.notes[key]
            if key in picked:
                note = CandidateNote(
                    note.workload, note.cluster_queue, note.priority, note.preemption_priority,
                    note.usable, note.why, note.message, note.evicting, True,
                )
            out.append(note)
        return tuple(out)
