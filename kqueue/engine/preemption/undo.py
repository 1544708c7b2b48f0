"""Whether a fair-sharing preemption would be undone at once (kqueue; Kueue has no such check).

Victims are requeued at once, and so is everything else pending. A preemption is *undone* when,
with the preemptor admitted and the victims gone, a workload waiting at that moment would evict
the preemptor again:

* **by one of its victims** (``undoing_victim``): the preemptor's ClusterQueue borrows a
  flavor/resource the victim uses, the victim's ``reclaimWithinCohort`` allows the two
  priorities, the preemptor is preemptible, and the victim's ClusterQueue either stays within its
  nominal quota with it (FairSharingPreemptWithinNominal) or passes one of the strategies with the
  roles swapped. Under ``LessThanInitialShare`` this happens when a small victim's side, with the
  victim back, stays below the preemptor's side;
* **by a rival in its own ClusterQueue** (``taking_its_place``): a workload pending there that
  ``withinClusterQueue`` lets preempt the preemptor by priority and that fits once the preemptor
  is gone. The preemptor passed the strategies on its own share; the rival, bigger, had not (it
  was pending). Made, the preemption would hand the rival by priority what the strategies refused
  it, and the victims, requeued, could take it back under the strategies: three workloads
  preempting one another in a circle at one instant, for ever (docs/fair-sharing.md,
  "Preemption that would be undone at once", has the case).

Such a preemption is not made; the preemptor waits for quota to be freed otherwise.

This is conservative: a victim that would fit in the quota left free, or would prefer another
candidate, counts too (victims readmitted one after another change what is free), and a rival
is placed, resource by resource, in the flavor the preemptor would use (a resource the preemptor
does not request is taken to fit). It never lets a preemption through that one of its victims or
such a rival could take back at once.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..fairness.dominant_share import share_of
from ..types import FlavorResource, Preemptibility, PreemptionPolicy, ResourceName
from ..workload import WorkloadInfo
from .fair import FairFound, FairSearch, passes
from .search import info_policy_allows


def undone_by(search: FairSearch, found: FairFound) -> str | None:
    """Why ``found`` would be undone at once (by a victim or by a rival), or None. The snapshot
    is put back as it was found."""
    ctx = search.ctx
    own = ctx.cq
    threshold = own.spec.preemption.preemptible_priority_threshold
    if ctx.preemptor.preemptibility(threshold) == Preemptibility.NON_PREEMPTIBLE:
        return None
    restore = search.snapshot.simulate_removal([t.workload for t in found.targets])
    own.add_usage(ctx.requests)
    try:
        return undoing_victim(search, found) or taking_its_place(search, found)
    finally:
        own.remove_usage(ctx.requests)
        restore()


def undoing_victim(search: FairSearch, found: FairFound) -> str | None:
    """The first victim that could preempt the preemptor back, and the rule it would use; the
    snapshot as ``undone_by`` leaves it (victims gone, preemptor admitted)."""
    ctx = search.ctx
    own = ctx.cq
    snapshot = search.snapshot
    for t in found.targets:
        victim = t.workload
        theirs = snapshot.cluster_queues.get(victim.cluster_queue)
        if theirs is None or theirs is own:
            continue
        policy = theirs.spec.preemption.reclaim_within_cohort
        if policy == PreemptionPolicy.NEVER or not info_policy_allows(
            policy, victim.info, ctx.preemptor
        ):
            continue
        r = own.resources
        if not any(r.usage.get(fr, 0) > r.subtree_quota.get(fr, 0) for fr in victim.usage):
            continue  # the preemptor does not borrow what the victim needs
        t_res = theirs.resources
        if all(
            t_res.usage.get(fr, 0) + v <= t_res.subtree_quota.get(fr, 0)
            for fr, v in victim.usage.items()
        ):
            return (
                f"{victim.key}, requeued, would reclaim it back: ClusterQueue "
                f"{theirs.name} stays within its nominal quota with it"
            )
        mine_node, their_node = search.almost_lcas(theirs)
        back = share_of(their_node, victim.usage)
        mine = share_of(mine_node)
        mine_gone = share_of(mine_node, {fr: -v for fr, v in ctx.requests.items()})
        for strategy in search.strategies:
            if passes(strategy, back, mine, mine_gone):
                return (
                    f"{victim.key}, requeued, would preempt it back under "
                    f"{strategy.value}: share of {their_node.name}'s side with it "
                    f"{back.describe()} against {mine.describe()} for "
                    f"{mine_node.name}'s side with the preemptor"
                )
    return None


def taking_its_place(search: FairSearch, found: FairFound) -> str | None:
    """The first workload pending in the preemptor's ClusterQueue that would preempt it by
    priority once admitted, when some victim is in another ClusterQueue; the snapshot as
    ``undone_by`` leaves it."""
    ctx = search.ctx
    own = ctx.cq
    pending = search.snapshot.pending
    policy = own.spec.preemption.within_cluster_queue
    if pending is None or policy == PreemptionPolicy.NEVER:
        return None
    if all(t.workload.cluster_queue == own.cq_name for t in found.targets):
        return None  # priority preemptions within one queue only go up in priority
    own.remove_usage(ctx.requests)
    try:
        for rival in pending(own.cq_name):
            if rival.key == ctx.preemptor.key or not info_policy_allows(
                policy, rival, ctx.preemptor
            ):
                continue
            if own.fits(_placed_as(rival, ctx.requests)):
                return (
                    f"{rival.key} (priority {rival.priority}), pending in ClusterQueue "
                    f"{own.cq_name}, would preempt it at once by priority "
                    f"(withinClusterQueue: {policy.value}) and take what its victims free"
                )
        return None
    finally:
        own.add_usage(ctx.requests)


def _placed_as(
    rival: WorkloadInfo, requests: Mapping[FlavorResource, int]
) -> dict[FlavorResource, int]:
    """The rival's requests in the flavors the preemptor would use, resource by resource (the
    flavor with the most of it); resources the preemptor does not use are left out."""
    flavor_of: dict[ResourceName, FlavorResource] = {}
    for fr, q in sorted(requests.items()):
        best = flavor_of.get(fr[1])
        if best is None or q > requests[best]:
            flavor_of[fr[1]] = fr
    out: dict[FlavorResource, int] = {}
    for per_pod_set in rival.total_requests():
        for resource, q in per_pod_set.items():
            where = flavor_of.get(resource)
            if where is not None:
                out[where] = out.get(where, 0) + q
    return out
