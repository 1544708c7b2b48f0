"""What the classical and the fair-sharing victim searches share.

Kueue keeps these in ``pkg/scheduler/preemption/common``; here they are written once and both
``classical.py`` and ``fair.py`` call them:

* ``SearchInput``: what one search needs (Kueue's preemptionCtx).
* ``candidate_order``: Kueue's CandidatesOrdering: workloads already being evicted first, then a
  class the caller chooses (classical: hierarchical, other ClusterQueues, own; fair: other
  ClusterQueues before the preemptor's own), lower preemption priority, then admission time
  (most recent first for ``preemptionOrder: Newest``; for ``LeastWorkLost`` the latest of
  admission and last checkpoint first, ``work_since_key``), then uid and key for determinism.
* ``fits``: Kueue's workloadFits: the preemptor's requests fit the ClusterQueue as the snapshot
  stands, borrowing only where allowed, and its topology placement (if any) fits too.
* ``fill_back``: once the preemptor fits, add back, newest removal first, every victim that is
  not needed, so the set is minimal.
* The candidate filters both use: ``uses_resources``, ``policy_allows``, ``within_nominal``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeVar

from ..hierarchy import Node
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..types import EPOCH, FlavorResource, PreemptionOrder, PreemptionPolicy
from ..workload import AdmittedWorkload, WorkloadInfo


@dataclass(frozen=True, slots=True)
class SearchInput:
    """What one victim search needs (Kueue's preemptionCtx)."""

    preemptor: WorkloadInfo
    cq: ClusterQueueSnapshot
    # Everything the preemptor's assignment would use, by flavor and resource.
    requests: Mapping[FlavorResource, int]
    contested: frozenset[FlavorResource]
    # A non-preemptible preemptor may not borrow (docs/contracts.md §3).
    within_nominal: bool = False
    # Delayed preemption: only workloads already being evicted may be used.
    only_evicting: bool = False
    # Topology-aware pod sets: whether their placement fits the snapshot as it is now (the
    # victims' domains freed), checked with the quota (tas/fit.py placer).
    placement: Callable[[], bool] | None = None


def uses_resources(wl: AdmittedWorkload, frs: frozenset[FlavorResource]) -> bool:
    for ps in wl.admission.pod_sets:
        for res, flavor in ps.flavors.items():
            if (flavor, res) in frs:
                return True
    return False


def within_nominal(node: Node, frs: Iterable[FlavorResource]) -> bool:
    """Whether ``node`` uses no more than its (subtree) quota of every resource in ``frs``."""
    r = node.resources
    return all(r.usage.get(fr, 0) <= r.subtree_quota.get(fr, 0) for fr in frs)


def admission_time_key(wl: AdmittedWorkload) -> int:
    return (wl.reserved_at - EPOCH) // timedelta(microseconds=1)


def work_since_key(wl: AdmittedWorkload) -> int:
    """Since when a preemption would lose ``wl``'s work: the latest of its admission and its
    last checkpoint (a checkpoint older than the admission belongs to an earlier run)."""
    since = wl.admission.admitted_at or wl.reserved_at
    checkpoint = wl.info.obj.last_checkpoint
    if checkpoint is not None and checkpoint > since:
        since = checkpoint
    return (since - EPOCH) // timedelta(microseconds=1)


def policy_allows(
    policy: PreemptionPolicy, preemptor: WorkloadInfo, wl: AdmittedWorkload
) -> bool:
    """Kueue's satisfiesPreemptionPolicy, with the priorities of docs/contracts.md §3: the victim's
    preemption priority against the preemptor's scheduling priority."""
    return info_policy_allows(policy, preemptor, wl.info)


def info_policy_allows(
    policy: PreemptionPolicy, preemptor: WorkloadInfo, victim: WorkloadInfo
) -> bool:
    """``policy_allows`` for a victim that is not admitted yet (preemption/undo.py asks it of
    a preemptor about to be)."""
    mine, theirs = preemptor.priority, victim.preemption_priority
    if policy == PreemptionPolicy.ANY or theirs < mine:
        return True
    return (
        policy == PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        and theirs == mine
        and preemptor.order_time() < victim.order_time()
    )


OrderKey = tuple[bool, int, int, int, str, str]


def candidate_order(
    wl: AdmittedWorkload, *, evicting: bool, group: int, order: PreemptionOrder
) -> OrderKey:
    """The sort key of Kueue's CandidatesOrdering (see the module docstring); ``group`` is the
    caller's candidate class, lower first."""
    if order == PreemptionOrder.LEAST_WORK_LOST:
        # Least work lost first: the latest admission or checkpoint, as Newest is without any.
        tk = -work_since_key(wl)
    else:
        tk = admission_time_key(wl)
        tk = -tk if order == PreemptionOrder.NEWEST else tk
    return (
        not evicting,
        group,
        wl.info.preemption_priority,
        tk,
        wl.info.uid,
        wl.key,
    )


def fits(ctx: SearchInput, *, borrowing: bool) -> bool:
    """Kueue's workloadFits on the snapshot as it stands (victims removed): every request is
    available, none borrows unless ``borrowing`` allows it (never for a non-preemptible
    preemptor), and the topology placement, if any, fits."""
    cq = ctx.cq
    allow = borrowing and not ctx.within_nominal
    for fr, v in ctx.requests.items():
        if not allow and cq.borrowing_with(fr, v):
            return False
        if v > cq.available(fr):
            return False
    return ctx.placement is None or ctx.placement()


class _Victim(Protocol):
    @property
    def workload(self) -> AdmittedWorkload: ...


V = TypeVar("V", bound=_Victim)


def fill_back(snapshot: Snapshot, removed: list[V], fits_now: Callable[[], bool]) -> list[V]:
    """Add back, newest removal first (the last one is needed), every victim the preemptor
    still fits without; returns the victims kept, in removal order.

    ``removed`` must be removed from ``snapshot`` and ``fits_now()`` true; on return exactly the
    victims kept are still removed.
    """
    kept = [True] * len(removed)
    for i in range(len(removed) - 2, -1, -1):
        snapshot.add_workload(removed[i].workload)
        if fits_now():
            kept[i] = False
        else:
            snapshot.remove_workload(removed[i].workload)
    return [c for c, k in zip(removed, kept, strict=True) if k]
