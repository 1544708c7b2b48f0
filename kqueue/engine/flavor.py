"""Flavor assignment: which flavor each pod set gets for each resource, and in which mode.

A port of Kueue's flavorassigner: pod sets are taken in order and their usage accumulates, so a
later pod set sees what earlier ones took; for each resource group the flavors are tried in the
order the ClusterQueue lists them, and all resources of a pod set in one group get the same
flavor. A flavor is skipped when the pod set does not tolerate its taints or its node labels
conflict with the pod set's nodeSelector or required node affinity. Otherwise each resource is
checked against the quota reachable in the cohort tree:

* ``Fit``: fits in unused quota (possibly borrowed; the borrowing height is recorded);
* ``Preempt``: fits in quota only once other workloads are preempted (the oracle says whether
  candidates exist: without any, the flavor ranks below every viable one);
* ``NoFit``: more than the quota ever reachable, or only reachable by borrowing while the
  ClusterQueue may not preempt while borrowing.

``flavorFungibility`` decides whether to stop at the first flavor that can borrow
(``whenCanBorrow``) or preempt (``whenCanPreempt``) or to look for a better one, and, when the
search walks on, which of the flavors tried is best (``preference``, see ``is_preferred``).

Non-preemptible workloads (docs/contracts.md §3) may not borrow: their reachable capacity is capped
at the ClusterQueue's nominal quota.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from .assignment import Assignment, FlavorAttempt, FlavorChoice, PodSetResult, Shortfall
from .hierarchy import find_height_of_lowest_subtree_that_fits
from .preemption.seam import PreemptionOracle, PreemptionPossibility
from .resources import fmt
from .slice import sticky_message
from .snapshot import ClusterQueueSnapshot
from .tas.fit import flavor_mismatch as topology_mismatch
from .tas.topology import TopologySnapshot
from .types import (
    PODS,
    BorrowWithinCohortPolicy,
    FlavorFungibility,
    FlavorName,
    FlavorResource,
    FungibilityPolicy,
    FungibilityPreference,
    Mode,
    PendingReason,
    PodSet,
    PreemptionPolicy,
    ResourceFlavor,
    ResourceName,
    SelectorRequirement,
    Usage,
)
from .workload import WorkloadInfo


class PreemptionMode(IntEnum):
    """Kueue's preemptionMode, finer than Mode: ordered from worst to best."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4

    def mode(self) -> Mode:
        if self is PreemptionMode.NO_FIT:
            return Mode.NO_FIT
        if self is PreemptionMode.FIT:
            return Mode.FIT
        return Mode.PREEMPT


_FROM_POSSIBILITY = {
    PreemptionPossibility.NO_CANDIDATES: PreemptionMode.NO_CANDIDATES,
    PreemptionPossibility.PREEMPT: PreemptionMode.PREEMPT,
    PreemptionPossibility.RECLAIM: PreemptionMode.RECLAIM,
}

_BIG = 1 << 62


@dataclass(frozen=True, slots=True)
class GranularMode:
    pmode: PreemptionMode
    borrow: int


_WORST = GranularMode(PreemptionMode.NO_FIT, _BIG)
_BEST = GranularMode(PreemptionMode.FIT, 0)


def is_preferred(a: GranularMode, b: GranularMode, fungibility: FlavorFungibility) -> bool:
    """Whether ``a`` is better than ``b`` (Kueue's isPreferred).

    NoFit is the worst; a flavor whose preemption found no candidates ranks below every viable
    one whatever the preference, since it cannot be admitted this cycle. Then
    BorrowingOverPreemption (also when unset) compares the preemption mode first and the
    borrowing height second, PreemptionOverBorrowing the other way round.
    """
    if a.pmode is PreemptionMode.NO_FIT:
        return False
    if b.pmode is PreemptionMode.NO_FIT:
        return True
    a_nc = a.pmode is PreemptionMode.NO_CANDIDATES
    b_nc = b.pmode is PreemptionMode.NO_CANDIDATES
    if a_nc != b_nc:
        return not a_nc
    if fungibility.preference is FungibilityPreference.PREEMPTION_OVER_BORROWING:
        if a.borrow != b.borrow:
            return a.borrow < b.borrow
        return a.pmode > b.pmode
    if a.pmode != b.pmode:
        return a.pmode > b.pmode
    return a.borrow < b.borrow


def _should_try_next_flavor(rep: GranularMode, fungibility: FlavorFungibility) -> bool:
    if rep.pmode in (PreemptionMode.NO_FIT, PreemptionMode.NO_CANDIDATES):
        return True
    if (
        rep.pmode in (PreemptionMode.PREEMPT, PreemptionMode.RECLAIM)
        and fungibility.when_can_preempt == FungibilityPolicy.TRY_NEXT_FLAVOR
    ):
        return True
    return rep.borrow > 0 and fungibility.when_can_borrow == FungibilityPolicy.TRY_NEXT_FLAVOR


# -- flavor vs pod set: taints and node labels ------------------------------------------------


def _requirement_matches(req: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def flavor_mismatch(pod_set: PodSet, flavor: ResourceFlavor | None, name: FlavorName) -> str | None:
    """Why ``pod_set`` cannot use ``flavor`` regardless of quota, or None.

    Only the flavor's own label keys are considered (Kueue: a nodeSelector or affinity term on
    another key is for kube-scheduler, not for choosing the flavor).
    """
    if flavor is None:
        return f"flavor {name} not found"
    tolerations = (*pod_set.tolerations, *flavor.tolerations)
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return f"untolerated taint {taint} in flavor {name}"
    labels = flavor.node_labels
    for key, value in sorted(pod_set.node_selector.items()):
        if key in labels and labels[key] != value:
            return f"flavor {name} doesn't match node affinity"
    if pod_set.required_affinity is not None:
        terms: list[tuple[SelectorRequirement, ...]] = []
        for term in pod_set.required_affinity:
            kept = tuple(r for r in term if r.key in labels)
            if not kept:
                # An emptied term matches everything, and terms are ORed.
                terms = []
                break
            terms.append(kept)
        if terms and not any(all(_requirement_matches(r, labels) for r in t) for t in terms):
            return f"flavor {name} doesn't match node affinity"
    return None


# -- the assigner ----------------------------------------------------------------------------


@dataclass(slots=True)
class _FlavorOutcome:
    flavors: dict[ResourceName, FlavorChoice]
    reasons: list[str]
    attempts: list[FlavorAttempt]
    no_fit_reason: PendingReason | None


class FlavorAssigner:
    def __init__(
        self,
        wl: WorkloadInfo,
        cq: ClusterQueueSnapshot,
        flavors: Mapping[FlavorName, ResourceFlavor],
        oracle: PreemptionOracle,
        *,
        non_preemptible: bool = False,
        last_tried: Sequence[Mapping[ResourceName, int]] | None = None,
        sticky: Sequence[Mapping[ResourceName, FlavorName]] | None = None,
        fair_sharing: bool = False,
        topology: TopologySnapshot | None = None,
    ) -> None:
        self.wl = wl
        # Topology-aware flavors (tas/fit.py): which pod sets may take them.
        self.topology = topology
        self.fair_sharing = fair_sharing
        self.cq = cq
        self.flavors = flavors
        self.oracle = oracle
        self.non_preemptible = non_preemptible
        self.last_tried = last_tried
        # Per pod set, the only flavor allowed per resource (a WorkloadSlice keeps the flavors
        # of the slice it replaces, see slice.py).
        self.sticky = sticky

    def assign(self, counts: Sequence[int] | None = None) -> Assignment:
        """Assign flavors to every pod set, at ``counts`` pods (full counts by default)."""
        pod_sets = self.wl.pod_sets
        counts_t = tuple(counts) if counts is not None else tuple(ps.count for ps in pod_sets)
        requests = self.wl.total_requests(counts_t)
        covers_pods = self.cq.spec.group_for(PODS) is not None
        usage: Usage = {}
        borrowing = 0
        results: list[PodSetResult] = []
        for idx, (ps, count, req) in enumerate(zip(pod_sets, counts_t, requests, strict=True)):
            if covers_pods:
                req[PODS] = count
            flavors: dict[ResourceName, FlavorChoice] = {}
            reasons: list[str] = []
            attempts: list[FlavorAttempt] = []
            failed = False
            no_fit: PendingReason | None = None
            for res in sorted(req):
                if self.cq.spec.group_for(res) is None and req[res] == 0:
                    continue  # zero requests of uncovered resources are irrelevant (Kueue #8079)
                if res in flavors:
                    continue  # same group as a resource already assigned
                outcome = self._find_flavor(idx, ps, req, res, usage)
                attempts.extend(outcome.attempts)
                if not outcome.flavors:
                    flavors = {}
                    reasons = outcome.reasons
                    no_fit = outcome.no_fit_reason
                    failed = True
                    break
                flavors.update(outcome.flavors)
                reasons.extend(outcome.reasons)
            result = PodSetResult(
                name=ps.name,
                count=count,
                requests=dict(req),
                flavors=flavors,
                reasons=tuple(reasons),
                attempts=tuple(attempts),
                no_fit_reason=no_fit,
            )
            results.append(result)
            for res, choice in flavors.items():
                borrowing = max(borrowing, choice.borrow)
                if req[res]:
                    fr = (choice.flavor, res)
                    usage[fr] = usage.get(fr, 0) + req[res]
            if failed:
                break
        assignment = Assignment(
            self.cq.cq_name, pod_sets=tuple(results), borrowing=borrowing, usage=usage
        )
        if assignment.mode() == Mode.NO_FIT:
            return Assignment(
                self.cq.cq_name,
                pod_sets=assignment.pod_sets,
                borrowing=borrowing,
                usage=usage,
                no_fit_reason=_resolve_no_fit_reason(assignment),
            )
        return assignment

    def _find_flavor(
        self,
        ps_idx: int,
        pod_set: PodSet,
        requests: Mapping[ResourceName, int],
        res: ResourceName,
        usage: Usage,
    ) -> _FlavorOutcome:
        rg = self.cq.spec.group_for(res)
        if rg is None:
            return _FlavorOutcome(
                {}, [f"resource {res} unavailable in ClusterQueue"], [],
                PendingReason.NO_MATCHING_FLAVOR,
            )
        rg_requests = {r: q for r, q in sorted(requests.items()) if r in rg.covered_resources}
        reasons: list[str] = []
        attempts: list[FlavorAttempt] = []
        best: dict[ResourceName, FlavorChoice] = {}
        best_mode = _WORST
        start = 0
        if self.last_tried is not None and ps_idx < len(self.last_tried):
            start = self.last_tried[ps_idx].get(res, -1) + 1
        attempted = -1
        fungibility = self.cq.spec.flavor_fungibility
        kept = None
        if self.sticky is not None and ps_idx < len(self.sticky):
            kept = next(
                (f for r, f in sorted(self.sticky[ps_idx].items()) if r in rg.covered_resources),
                None,
            )
        for idx in range(start, len(rg.flavors)):
            attempted = idx
            fname = rg.flavors[idx].name
            skipped = flavor_mismatch(pod_set, self.flavors.get(fname), fname)
            if skipped is None and self.topology is not None:
                skipped = topology_mismatch(
                    pod_set, self.flavors.get(fname), fname, self.cq, self.topology,
                    rg.covered_resources,
                )
            if kept is not None and fname != kept:
                skipped = sticky_message(kept, fname)
            if skipped is not None:
                reasons.append(skipped)
                attempts.append(
                    FlavorAttempt(
                        fname, Mode.NO_FIT, reason=PendingReason.NO_MATCHING_FLAVOR,
                        skipped=skipped, messages=(skipped,),
                    )
                )
                continue
            choices: dict[ResourceName, FlavorChoice] = {}
            rep = _BEST
            max_borrow = 0
            flavor_reasons: list[str] = []
            flavor_no_fit: PendingReason | None = None
            shortfalls: list[Shortfall] = []
            for r, val in rg_requests.items():
                fr = (fname, r)
                pmode, borrow, msg, no_fit, shortfall = self._fits_resource_quota(
                    fr, usage.get(fr, 0), val
                )
                if msg is not None:
                    flavor_reasons.append(msg)
                    reasons.append(msg)
                if shortfall is not None:
                    shortfalls.append(shortfall)
                if no_fit is not None:
                    flavor_no_fit = _most_severe(flavor_no_fit, no_fit)
                max_borrow = max(max_borrow, borrow)
                mode = GranularMode(pmode, borrow)
                if is_preferred(rep, mode, fungibility):
                    rep = mode
                if rep.pmode is PreemptionMode.NO_FIT:
                    continue  # keep checking the other resources only for their messages
                choices[r] = FlavorChoice(fname, pmode.mode(), borrow)
            attempts.append(
                FlavorAttempt(
                    fname,
                    rep.pmode.mode(),
                    borrow=max_borrow,
                    reason=flavor_no_fit if rep.pmode is PreemptionMode.NO_FIT else None,
                    messages=tuple(flavor_reasons),
                    shortfalls=tuple(shortfalls),
                )
            )
            if not _should_try_next_flavor(rep, fungibility):
                best, best_mode = choices, rep
                break
            if is_preferred(rep, best_mode, fungibility):
                best, best_mode = choices, rep
        tried = -1 if attempted == len(rg.flavors) - 1 else attempted
        best = {
            r: FlavorChoice(c.flavor, c.mode, c.borrow, tried) for r, c in best.items()
        }
        if best_mode.pmode is PreemptionMode.FIT:
            return _FlavorOutcome(best, [], attempts, None)
        no_fit_reason = None if best else _group_no_fit_reason(attempts)
        return _FlavorOutcome(best, reasons, attempts, no_fit_reason)

    def _fits_resource_quota(
        self, fr: FlavorResource, assumed: int, request: int
    ) -> tuple[PreemptionMode, int, str | None, PendingReason | None, Shortfall | None]:
        cq = self.cq
        flavor, res = fr
        available = max(0, cq.available(fr))
        max_capacity = cq.potential_available(fr)
        nominal = cq.nominal(fr)
        if self.non_preemptible:
            available = min(available, max(0, nominal - cq.usage_of(fr)))
            max_capacity = min(max_capacity, nominal)
        val = assumed + request
        shortfall = Shortfall(
            resource=res,
            requested=val,
            previously_assigned=assumed,
            available=available,
            max_capacity=max_capacity,
            nominal=nominal,
            borrowable=max(0, max_capacity - nominal),
        )
        if val > max_capacity:
            if assumed:
                msg = (
                    f"insufficient quota for {res} in flavor {flavor}, previously considered "
                    f"podsets requests ({fmt(assumed, res)}) + current podset request "
                    f"({fmt(request, res)}) > maximum capacity ({fmt(max_capacity, res)})"
                )
            else:
                msg = (
                    f"insufficient quota for {res} in flavor {flavor}, request > maximum "
                    f"capacity ({fmt(val, res)} > {fmt(max_capacity, res)})"
                )
            if self.non_preemptible:
                msg += " (a non-preemptible workload may not borrow)"
            return PreemptionMode.NO_FIT, 0, msg, PendingReason.EXCEEDS_MAX_QUOTA, shortfall
        borrow, may_reclaim_in_hierarchy = find_height_of_lowest_subtree_that_fits(cq, fr, val)
        if val <= available:
            return PreemptionMode.FIT, borrow, None, None, None
        msg = (
            f"insufficient unused quota for {res} in flavor {flavor}, "
            f"{fmt(val - available, res)} more needed"
        )
        if nominal >= val or may_reclaim_in_hierarchy or self._can_preempt_while_borrowing():
            possibility, borrow_after = self.oracle.simulate_preemption(cq, self.wl, fr, val)
            return _FROM_POSSIBILITY[possibility], borrow_after, msg, None, shortfall
        return PreemptionMode.NO_FIT, borrow, msg, PendingReason.WAITING_FOR_QUOTA, shortfall

    def _can_preempt_while_borrowing(self) -> bool:
        # Under fair sharing a borrowing preemptor may take from ClusterQueues with a higher
        # share whenever reclaimWithinCohort allows reclaiming at all (as Kueue).
        p = self.cq.spec.preemption
        return p.borrow_within_cohort != BorrowWithinCohortPolicy.NEVER or (
            self.fair_sharing and p.reclaim_within_cohort != PreemptionPolicy.NEVER
        )


# -- reasons ---------------------------------------------------------------------------------

# Kueue's reasonSeverity: a topology that does not fit is the mildest blocker (quota fits).
_SEVERITY = {
    None: 0,
    PendingReason.TOPOLOGY_PLACEMENT_FAILED: 1,
    PendingReason.WAITING_FOR_QUOTA: 2,
    PendingReason.EXCEEDS_MAX_QUOTA: 3,
    PendingReason.NO_MATCHING_FLAVOR: 4,
}


def _most_severe(a: PendingReason | None, b: PendingReason | None) -> PendingReason | None:
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


def _group_no_fit_reason(attempts: Sequence[FlavorAttempt]) -> PendingReason | None:
    """Within one resource group the least severe blocker wins: another flavor was an option."""
    best: PendingReason | None = None
    for att in attempts:
        if att.mode != Mode.NO_FIT or att.reason is None:
            continue
        if best is None or _SEVERITY[att.reason] < _SEVERITY[best]:
            best = att.reason
    return best


def _resolve_no_fit_reason(assignment: Assignment) -> PendingReason:
    """The reason of a NoFit assignment (Kueue's resolveNoFitReason).

    A pod set fails on one resource group; within that group another flavor was an option, so
    the least severe blocker among its flavors is the reason (``_group_no_fit_reason``); across
    pod sets the most severe wins. A group with no usable flavor at all is NoMatchingFlavor.
    """
    overall: PendingReason | None = None
    for ps in assignment.pod_sets:
        if ps.mode() == Mode.NO_FIT:
            overall = _most_severe(overall, ps.no_fit_reason or PendingReason.NO_MATCHING_FLAVOR)
    return overall or PendingReason.WAITING_FOR_QUOTA
