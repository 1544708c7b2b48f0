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

* **by a workload pending in another ClusterQueue** (``reclaiming_it``), when every victim is in
  the preemptor's own ClusterQueue (a preemption by priority) and the preemption raises what that
  ClusterQueue borrows: the workload's ClusterQueue reclaims (``reclaimWithinCohort`` allows the
  two priorities), it fits once the preemptor is gone, and it stays within its nominal quota or
  passes one of the strategies against the preemptor's side. A preemption by priority passes no
  share check in Kueue; the quota it borrows beyond what its victims free was free, and another
  ClusterQueue waiting for it would take it back at once, by fair sharing. Four workloads
  preempted one another in a circle this way (docs/fair-sharing.md, "A circle of four").

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
from ..hierarchy import CohortNode
from ..snapshot import ClusterQueueSnapshot
from ..types import (
    ClusterQueueName,
    FairSharingStrategy,
    FlavorResource,
    Preemptibility,
    PreemptionPolicy,
    ResourceName,
)
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
        return (
            undoing_victim(search, found)
            or taking_its_place(search, found)
            or reclaiming_it(search, found)
        )
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
        rule = _rule_to_preempt_it(search, theirs, victim.usage)
        if rule is None:
            continue
        strategy, detail = rule
        if strategy is None:
            return f"{victim.key}, requeued, would reclaim it back: {detail}"
        return f"{victim.key}, requeued, would preempt it back under {strategy.value}: {detail}"
    return None


def taking_its_place(search: FairSearch, found: FairFound) -> str | None:
    """The first workload pending in the preemptor's ClusterQueue that would preempt it by
    priority once admitted, when some victim is in another ClusterQueue; the snapshot as
    ``undone_by`` leaves it."""
    ctx = search.ctx
    own = ctx.cq
    policy = own.spec.preemption.within_cluster_queue
    if search.snapshot.pending is None or policy == PreemptionPolicy.NEVER:
        return None
    if all(t.workload.cluster_queue == own.cq_name for t in found.targets):
        return None  # priority preemptions within one queue only go up in priority
    own.remove_usage(ctx.requests)
    try:
        for rival in _kinds(search, own.cq_name):
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


def reclaiming_it(search: FairSearch, found: FairFound) -> str | None:
    """The first workload pending in another ClusterQueue of the cohort that would preempt the
    preemptor at once to reclaim what it borrows, when every victim is in the preemptor's own
    ClusterQueue and the preemption raises its borrowing; the snapshot as ``undone_by`` leaves
    it."""
    ctx = search.ctx
    own = ctx.cq
    root = own.root()
    if search.snapshot.pending is None or not isinstance(root, CohortNode):
        return None
    if any(t.workload.cluster_queue != own.cq_name for t in found.targets):
        return None  # the strategies weighed the preemptor against the other ClusterQueues
    raised = _raised_borrowing(own, ctx.requests, found)
    if not raised:
        return None
    for node in sorted(root.subtree_cluster_queues(), key=lambda n: n.name):
        theirs = search.snapshot.cluster_queues.get(node.cq_name)
        if theirs is None or theirs is own:
            continue
        policy = theirs.spec.preemption.reclaim_within_cohort
        if policy == PreemptionPolicy.NEVER:
            continue
        room = _room_once_gone(search, theirs)
        for rival in _kinds(search, theirs.cq_name):
            if not info_policy_allows(policy, rival, ctx.preemptor):
                continue
            usage = _placed_as(rival, ctx.requests)
            if raised.isdisjoint(usage) or not all(fr in theirs.resources.quotas for fr in usage):
                continue  # it needs nothing the preemptor borrows, or not in these flavors
            if any(q > room.get(fr, 0) for fr, q in usage.items()):
                continue  # it would not fit even once the preemptor is gone
            rule = _rule_to_preempt_it(search, theirs, usage)
            if rule is not None:
                strategy, detail = rule
                return (
                    f"{rival.key} (priority {rival.priority}), pending in ClusterQueue "
                    f"{theirs.name}, would preempt it at once to reclaim what it borrows "
                    f"beyond what its victims free: "
                    + (detail if strategy is None else f"{strategy.value}, {detail}")
                )
    return None


def _room_once_gone(search: FairSearch, theirs: ClusterQueueSnapshot) -> dict[FlavorResource, int]:
    """What ``theirs`` could take of each flavor/resource the preemptor uses, once the
    preemptor is gone (ClusterQueueSnapshot.fits, computed once for all the kinds weighed)."""
    requests = search.ctx.requests
    search.ctx.cq.remove_usage(requests)
    try:
        return {fr: max(0, theirs.available(fr)) for fr in requests}
    finally:
        search.ctx.cq.add_usage(requests)


def _raised_borrowing(
    own: ClusterQueueSnapshot, requests: Mapping[FlavorResource, int], found: FairFound
) -> set[FlavorResource]:
    """The flavor/resources ``own`` borrows more of with the preemptor in and the victims out
    (the snapshot as ``undone_by`` leaves it) than before."""
    freed: dict[FlavorResource, int] = {}
    for t in found.targets:
        for fr, v in t.workload.usage.items():
            freed[fr] = freed.get(fr, 0) + v
    r = own.resources
    out: set[FlavorResource] = set()
    for fr, q in requests.items():
        quota = r.subtree_quota.get(fr, 0)
        after = r.usage.get(fr, 0)
        before = after - q + freed.get(fr, 0)
        if max(0, after - quota) > max(0, before - quota):
            out.add(fr)
    return out


def _rule_to_preempt_it(
    search: FairSearch, theirs: ClusterQueueSnapshot, usage: Mapping[FlavorResource, int]
) -> tuple[FairSharingStrategy | None, str] | None:
    """Whether a workload of ``theirs`` using ``usage``, admitted with the preemptor in, could
    preempt it (the snapshot as ``undone_by`` leaves it): (None, why) when ``theirs`` stays
    within its nominal quota with it, (the strategy, the shares) when a strategy lets it, or
    None."""
    own_requests = search.ctx.requests
    t_res = theirs.resources
    if all(t_res.usage.get(fr, 0) + v <= t_res.subtree_quota.get(fr, 0) for fr, v in usage.items()):
        return None, f"ClusterQueue {theirs.name} stays within its nominal quota with it"
    mine_node, their_node = search.almost_lcas(theirs)
    back = share_of(their_node, usage)
    mine = share_of(mine_node)
    mine_gone = share_of(mine_node, {fr: -v for fr, v in own_requests.items()})
    for strategy in search.strategies:
        if passes(strategy, back, mine, mine_gone):
            return strategy, (
                f"share of {their_node.name}'s side with it {back.describe()} against "
                f"{mine.describe()} for {mine_node.name}'s side with the preemptor"
            )
    return None


def _kinds(search: FairSearch, cq: ClusterQueueName) -> list[WorkloadInfo]:
    """The workloads pending in ``cq``, one per kind (priority and requests): the earliest in
    queue order, which any rule here lets preempt whenever it lets another of its kind.
    Pending workloads often come in many copies of a few kinds; memoized for the cycle."""
    snapshot = search.snapshot
    memo = snapshot.pending_kinds.get(cq)
    if memo is not None:
        return memo
    first: dict[tuple[int, tuple[tuple[tuple[ResourceName, int], ...], ...]], WorkloadInfo] = {}
    for info in snapshot.pending(cq) if snapshot.pending is not None else ():
        kind = (
            info.priority,
            tuple(tuple(sorted(r.items())) for r in info.total_requests()),
        )
        seen = first.get(kind)
        if seen is None or info.queue_key() < seen.queue_key():
            first[kind] = info
    memo = snapshot.pending_kinds[cq] = sorted(first.values(), key=lambda i: i.queue_key())
    return memo


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
