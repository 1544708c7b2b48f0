"""Whether a fair-sharing preemption would be undone by its own victims (kqueue; Kueue has no
such check).

Victims are requeued at once. A victim *undoes* the preemption when, with the preemptor admitted
and the victims gone, it may itself preempt the preemptor: the preemptor's ClusterQueue borrows a flavor/resource the victim uses, the victim's
``reclaimWithinCohort`` allows the two priorities, the preemptor is preemptible, and the victim's
ClusterQueue either stays within its nominal quota with it (FairSharingPreemptWithinNominal) or
passes one of the strategies with the roles swapped. Under ``LessThanInitialShare`` this happens
when a small victim's side, with the victim back, stays below the preemptor's side: the victims
would evict the preemptor they were evicted for, and the quota would go round for nothing
(docs/fair-sharing.md, "Preemption that its victims would undo"). Such a preemption is not made;
the preemptor waits for quota to be freed otherwise.

This is conservative: a victim that would fit in the quota left free, or would prefer another
candidate, counts too (victims readmitted one after another change what is free). It never lets
a preemption through that one of its victims could take back at once.
"""

from __future__ import annotations

from ..fairness.dominant_share import share_of
from ..types import Preemptibility, PreemptionPolicy
from .fair import FairFound, FairSearch, passes
from .search import info_policy_allows


def undoing_victim(search: FairSearch, found: FairFound) -> str | None:
    """Why ``found`` would be undone (the first victim that could preempt the preemptor back,
    and the rule it would use), or None. The snapshot is put back as it was found."""
    ctx = search.ctx
    snapshot = search.snapshot
    own = ctx.cq
    threshold = own.spec.preemption.preemptible_priority_threshold
    if ctx.preemptor.preemptibility(threshold) == Preemptibility.NON_PREEMPTIBLE:
        return None
    restore = snapshot.simulate_removal([t.workload for t in found.targets])
    own.add_usage(ctx.requests)
    try:
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
    finally:
        own.remove_usage(ctx.requests)
        restore()
