"""Victim search under fair sharing (Kueue's ``fairPreemptions`` and ``preemption/fairsharing``).

* **Candidates**: workloads of the preemptor's ClusterQueue allowed by ``withinClusterQueue``,
  and workloads of other ClusterQueues of the tree that borrow a contested flavor/resource,
  allowed by ``reclaimWithinCohort``; both must use a contested flavor/resource. Non-preemptible
  workloads never are (kqueue's preemptibility). They are ordered as Kueue's CandidatesOrdering:
  workloads already being evicted, other ClusterQueues before the preemptor's own, lower
  preemption priority, then by admission time (``preemptionOrder``).
* **Which ClusterQueue next**: from the root, the child with the highest share among those
  still borrowing and holding candidates (the preemptor's own ClusterQueue and its ancestors stay
  in the race while they have candidates), recursively; the same ClusterQueue may come again.
* **Shares compared** are those of the *almost lowest common ancestors*: the two children of the
  lowest Cohort that holds both the preemptor's and the target's ClusterQueue, one on each side.
  The preemptor's share counts the incoming workload.
* **Strategies** (Configuration ``fairSharing.preemptionStrategies``): the first one decides per
  candidate, ``LessThanOrEqualToFinalShare`` (preemptor's share with the workload at most the
  target's share without the candidate) or ``LessThanInitialShare`` (preemptor's share with the
  workload below the target's share now). Candidates the first strategy refused are retried with
  ``LessThanInitialShare`` when it is the second strategy, at most one per ClusterQueue.
* **Within nominal** (Kueue 0.19's default FairSharingPreemptWithinNominal): when the preemptor's
  ClusterQueue, with the incoming workload, does not borrow any contested flavor/resource, other
  ClusterQueues' borrowing workloads are reclaimed without comparing shares, with reason
  ``InCohortReclamation``.
* Once the preemptor fits (borrowing allowed, as Kueue), the set is made minimal by adding back,
  newest choice first, every victim that is not needed (``search.fill_back``; the candidate order
  and the fit check are ``search.py``'s too).

Every simulation works on the snapshot and puts it back exactly as it found it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction

from ..fairness.dominant_share import Share, compare, share_of
from ..hierarchy import CohortNode, Node
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..types import (
    FairSharingStrategy,
    Preemptibility,
    PreemptionPolicy,
    PreemptionReason,
    WorkloadKey,
)
from ..workload import AdmittedWorkload
from .protection import Protected, protected
from .search import SearchInput, candidate_order, fill_back, fits, policy_allows, uses_resources

LE_FINAL = FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
LT_INITIAL = FairSharingStrategy.LESS_THAN_INITIAL_SHARE


@dataclass(slots=True)
class FairTarget:
    workload: AdmittedWorkload
    reason: PreemptionReason
    evicting: bool
    # Why it was allowed: the strategy and the shares compared, in words.
    why: str = ""

    @property
    def priority(self) -> int:
        return self.workload.info.preemption_priority


@dataclass(slots=True)
class FairFound:
    targets: list[FairTarget]
    # One line per candidate the strategies looked at (explain).
    notes: list[str] = field(default_factory=list)


def passes(strategy: FairSharingStrategy, preemptor: Share, old: Share, new: Share) -> bool:
    """Kueue's rules S2-a (``LessThanOrEqualToFinalShare``) and S2-b (``LessThanInitialShare``)."""
    if strategy == LE_FINAL:
        return compare(preemptor, new) <= 0
    return compare(preemptor, old) < 0


class FairSearch:
    """One fair-sharing victim search over a snapshot (construct, then ``run``)."""

    def __init__(
        self,
        ctx: SearchInput,
        snapshot: Snapshot,
        strategies: tuple[FairSharingStrategy, ...],
        *,
        record: bool = True,
    ) -> None:
        self.ctx = ctx
        self.snapshot = snapshot
        self.strategies = strategies or (LE_FINAL, LT_INITIAL)
        self.record = record
        self.notes: list[str] = []
        self.ancestors = {id(c) for c in ctx.cq.path_to_root()}
        # Position of each candidate in the candidate order (ties between ClusterQueues).
        self.rank: dict[WorkloadKey, int] = {}
        # Candidates passed over because their protection runs (protection.py).
        self.protected: list[Protected] = []

    # -- candidates --------------------------------------------------------------------------

    def _eligible(self, wl: AdmittedWorkload, policy: PreemptionPolicy) -> bool:
        if policy == PreemptionPolicy.NEVER or not uses_resources(wl, self.ctx.contested):
            return False
        if not policy_allows(policy, self.ctx.preemptor, wl):
            return False
        if self.ctx.only_evicting and wl.key not in self.snapshot.evicting:
            return False
        threshold = self.snapshot.cluster_queues[wl.cluster_queue].spec.preemption
        return (
            wl.info.preemptibility(threshold.preemptible_priority_threshold)
            != Preemptibility.NON_PREEMPTIBLE
        )

    def candidates(self) -> list[AdmittedWorkload]:
        cq = self.ctx.cq
        policy = cq.spec.preemption
        out = [
            wl for _, wl in sorted(cq.workloads.items())
            if self._eligible(wl, policy.within_cluster_queue)
        ]
        root = cq.root()
        if isinstance(root, CohortNode) and policy.reclaim_within_cohort != PreemptionPolicy.NEVER:
            for node in sorted(root.subtree_cluster_queues(), key=lambda n: n.name):
                other = self.snapshot.cluster_queues.get(node.cq_name)
                if other is None or other is cq or not self._borrowing(other):
                    continue
                out.extend(
                    wl for _, wl in sorted(other.workloads.items())
                    if self._eligible(wl, policy.reclaim_within_cohort)
                )
        order = cq.spec.preemption.preemption_order
        return sorted(out, key=lambda wl: candidate_order(
            wl,
            evicting=wl.key in self.snapshot.evicting,
            # Other ClusterQueues' candidates before the preemptor's own.
            group=int(wl.cluster_queue == cq.name),
            order=order,
        ))

    def _borrowing(self, cq: ClusterQueueSnapshot) -> bool:
        r = cq.resources
        return any(
            r.usage.get(fr, 0) > r.subtree_quota.get(fr, 0) for fr in self.ctx.contested
        )

    # -- fitting -----------------------------------------------------------------------------

    def _fits(self) -> bool:
        """Kueue's workloadFits with borrowing allowed, on a snapshot without the preemptor."""
        return fits(self.ctx, borrowing=True)

    def _fits_for_fair_sharing(self) -> bool:
        """Kueue's workloadFitsForFairSharing: the shares count the incoming workload, the fit
        must not."""
        self.ctx.cq.remove_usage(self.ctx.requests)
        try:
            return self._fits()
        finally:
            self.ctx.cq.add_usage(self.ctx.requests)

    # -- the search --------------------------------------------------------------------------

    def run(self) -> FairFound | None:
        cands = self.candidates()
        if not cands:
            return None
        targets: list[FairTarget] = []
        cq = self.ctx.cq
        cq.add_usage(self.ctx.requests)
        try:
            cands = self._unprotected(cands)
            self.rank = {wl.key: i for i, wl in enumerate(cands)}
            fits, retry = self._first(cands, targets) if cands else (False, [])
            if not fits and len(self.strategies) > 1:
                fits = self._second(retry, targets)
        finally:
            cq.remove_usage(self.ctx.requests)
        if not fits:
            for t in reversed(targets):
                self.snapshot.add_workload(t.workload)
            return None
        targets = fill_back(self.snapshot, targets, self._fits)
        for t in reversed(targets):
            self.snapshot.add_workload(t.workload)
        return FairFound(targets, self.notes)

    def _unprotected(self, cands: list[AdmittedWorkload]) -> list[AdmittedWorkload]:
        """``cands`` without the workloads protected on the path each would be preempted on
        (protection.py), which are recorded: the preemptor's own ClusterQueue
        (``InClusterQueue``), borrowed quota reclaimed while the preemptor stays within its
        nominal quota (``InCohortReclamation``), else ``InCohortFairSharing``; as ``_first``
        decides, with the incoming workload counted."""
        within_nominal = not self._borrowing(self.ctx.cq)
        out = []
        for wl in cands:
            if wl.cluster_queue == self.ctx.cq.name:
                reason = PreemptionReason.IN_CLUSTER_QUEUE
            elif within_nominal:
                reason = PreemptionReason.IN_COHORT_RECLAMATION
            else:
                reason = PreemptionReason.IN_COHORT_FAIR_SHARING
            guard = protected(self.snapshot, wl, reason)
            if guard is None:
                out.append(wl)
                continue
            self.protected.append(guard)
            if self.record:
                now = self.snapshot.protection.now if self.snapshot.protection else None
                self.notes.append(f"{wl.key}: {guard.describe(now)}; not a candidate until then")
        return out

    def _take(self, wl: AdmittedWorkload, reason: PreemptionReason, why: str,
              targets: list[FairTarget]) -> bool:
        self.snapshot.remove_workload(wl)
        targets.append(FairTarget(wl, reason, wl.key in self.snapshot.evicting, why))
        return self._fits_for_fair_sharing()

    def _first(
        self, cands: list[AdmittedWorkload], targets: list[FairTarget]
    ) -> tuple[bool, list[AdmittedWorkload]]:
        strategy = self.strategies[0]
        retry: list[AdmittedWorkload] = []
        ordering = _Ordering(self, cands)
        within_nominal = not self._borrowing(self.ctx.cq)
        for target in ordering:
            if target is self.ctx.cq:
                wl = ordering.pop(target)
                if self._take(wl, PreemptionReason.IN_CLUSTER_QUEUE, "in the preemptor's own "
                              "ClusterQueue", targets):
                    return True, []
                continue
            if within_nominal:
                wl = ordering.pop(target)
                why = (
                    f"ClusterQueue {self.ctx.cq.name} stays within its nominal quota with the "
                    f"preemptor: borrowed quota is reclaimed without comparing shares"
                )
                if self._take(wl, PreemptionReason.IN_COHORT_RECLAMATION, why, targets):
                    return True, []
                continue
            mine, theirs_old = self._shares(target)
            if mine.infinite and not theirs_old.infinite:
                # Neither strategy can pass (Kueue's fsStrategyUnsatisfiable).
                while ordering.has(target):
                    retry.append(ordering.pop(target))
                continue
            while ordering.has(target):
                wl = ordering.pop(target)
                theirs_new = self._share_after_removal(target, wl)
                ok = passes(strategy, mine, theirs_old, theirs_new)
                # Words only where they are read: the oracle searches many times per cycle.
                why = (
                    _why(strategy, self.ctx.cq, target, mine, theirs_old, theirs_new, ok)
                    if self.record
                    else ""
                )
                if self.record:
                    self.notes.append(f"{wl.key}: {why}")
                if ok:
                    if self._take(wl, PreemptionReason.IN_COHORT_FAIR_SHARING, why, targets):
                        return True, []
                    # Shares changed: the next ClusterQueue may be another one.
                    break
                retry.append(wl)
        return False, retry

    def _second(self, retry: list[AdmittedWorkload], targets: list[FairTarget]) -> bool:
        ordering = _Ordering(self, retry)
        for target in ordering:
            mine, theirs_old = self._shares(target)
            ok = passes(LT_INITIAL, mine, theirs_old, theirs_old)
            wl = ordering.pop(target)
            why = (
                _why(LT_INITIAL, self.ctx.cq, target, mine, theirs_old, theirs_old, ok)
                if self.record
                else ""
            )
            if self.record:
                self.notes.append(f"{wl.key}: {why}")
            if ok and self._take(wl, PreemptionReason.IN_COHORT_FAIR_SHARING, why, targets):
                return True
            # Kueue: rule S2-b applies at most once per ClusterQueue.
            ordering.drop(target)
        return False

    # -- shares ------------------------------------------------------------------------------

    def almost_lcas(self, target: ClusterQueueSnapshot) -> tuple[Node, Node]:
        lca: CohortNode | None = None
        for ancestor in target.path_to_root():
            if id(ancestor) in self.ancestors:
                lca = ancestor
                break
        assert lca is not None, "a candidate ClusterQueue outside the preemptor's tree"
        return _below(self.ctx.cq, lca), _below(target, lca)

    def _shares(self, target: ClusterQueueSnapshot) -> tuple[Share, Share]:
        mine, theirs = self.almost_lcas(target)
        return share_of(mine), share_of(theirs)

    def _share_after_removal(self, target: ClusterQueueSnapshot, wl: AdmittedWorkload) -> Share:
        target.remove_usage(wl.usage)
        try:
            return share_of(self.almost_lcas(target)[1])
        finally:
            target.add_usage(wl.usage)


def _below(cq: ClusterQueueSnapshot, lca: CohortNode) -> Node:
    """The node on ``cq``'s path whose parent is ``lca``."""
    node: Node = cq
    while node.parent is not lca:
        assert node.parent is not None
        node = node.parent
    return node


def _why(
    strategy: FairSharingStrategy,
    preemptor_cq: ClusterQueueSnapshot,
    target: ClusterQueueSnapshot,
    mine: Share,
    old: Share,
    new: Share,
    ok: bool,
) -> str:
    if strategy == LE_FINAL:
        rel = "<=" if ok else ">"
        return (
            f"{strategy.value} {'allowed' if ok else 'refused'}: share of {preemptor_cq.name}'s "
            f"side with the preemptor {mine.describe()} {rel} share of {target.name}'s side "
            f"without this workload {new.describe()}"
        )
    rel = "<" if ok else ">="
    return (
        f"{strategy.value} {'allowed' if ok else 'refused'}: share of {preemptor_cq.name}'s side "
        f"with the preemptor {mine.describe()} {rel} share of {target.name}'s side now "
        f"{old.describe()}"
    )


class _Ordering:
    """Kueue's TargetClusterQueueOrdering: which ClusterQueue gives the next candidate."""

    def __init__(self, search: FairSearch, cands: list[AdmittedWorkload]) -> None:
        self.search = search
        self.by_cq: dict[str, list[AdmittedWorkload]] = {}
        for wl in cands:
            self.by_cq.setdefault(wl.cluster_queue, []).append(wl)
        self.pruned_cqs: set[int] = set()
        self.pruned_cohorts: set[int] = set()

    def has(self, cq: ClusterQueueSnapshot) -> bool:
        return bool(self.by_cq.get(cq.name))

    def pop(self, cq: ClusterQueueSnapshot) -> AdmittedWorkload:
        return self.by_cq[cq.name].pop(0)

    def drop(self, cq: ClusterQueueSnapshot) -> None:
        self.pruned_cqs.add(id(cq))

    def __iter__(self) -> Iterator[ClusterQueueSnapshot]:
        own = self.search.ctx.cq
        if own.parent is None:
            while id(own) not in self.pruned_cqs and self.has(own):
                yield own
            return
        root = own.root()
        assert isinstance(root, CohortNode)
        while id(root) not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: CohortNode) -> ClusterQueueSnapshot | None:
        own = self.search.ctx.cq
        snapshot = self.search.snapshot
        best_cq: ClusterQueueSnapshot | None = None
        best_cq_share = Share(ratio=Fraction(-1))
        for node in sorted(cohort.child_cqs, key=lambda c: c.name):
            cq = snapshot.cluster_queues.get(node.cq_name)
            if cq is None or id(cq) in self.pruned_cqs:
                continue
            share = share_of(cq)
            if (not share.borrowing and cq is not own) or not self.has(cq):
                self.pruned_cqs.add(id(cq))
                continue
            if best_cq is None:
                best_cq, best_cq_share = cq, share
                continue
            c = compare(share, best_cq_share)
            if c > 0 or (c == 0 and self._earlier(cq, best_cq)):
                best_cq, best_cq_share = cq, share
        best_cohort: CohortNode | None = None
        best_cohort_share = Share(ratio=Fraction(-1))
        for child in sorted(cohort.child_cohorts, key=lambda c: c.name):
            if id(child) in self.pruned_cohorts:
                continue
            share = share_of(child)
            if not share.borrowing and id(child) not in self.search.ancestors:
                self.pruned_cohorts.add(id(child))
            elif best_cohort is None or compare(share, best_cohort_share) >= 0:
                best_cohort, best_cohort_share = child, share
        if best_cohort is None and best_cq is None:
            self.pruned_cohorts.add(id(cohort))
            return None
        if best_cohort is not None and (
            best_cq is None or compare(best_cohort_share, best_cq_share) >= 0
        ):
            return self._next(best_cohort)
        return best_cq

    def _earlier(self, a: ClusterQueueSnapshot, b: ClusterQueueSnapshot) -> bool:
        """Kueue breaks equal shares by the candidate order of the two first candidates."""
        rank = self.search.rank
        return rank[self.by_cq[a.name][0].key] < rank[self.by_cq[b.name][0].key]
