"""The order of a cycle's entries under fair sharing (Kueue's ``fair_sharing_iterator.go``).

Instead of "not borrowing first, then priority", each next entry is the winner of a tournament
over its cohort tree: every Cohort, from the leaves up, nominates the child (ClusterQueue or
Cohort) whose share *after admitting its candidate* is lowest; the root's winner goes next. Ties
are broken, as in Kueue with its default feature gates: a child that would not borrow on the
flavors its candidate requests first (FairSharingPrioritizeNonBorrowing), then the lower share,
then the higher priority (PrioritySortingWithinCohort), then the earlier queue-order timestamp;
then UID and key, so that the order is deterministic. The tournament is run again before every
entry, on the snapshot as the entries processed so far left it.

ClusterQueues without a cohort, and the roots of different trees, are taken in ClusterQueue name
order (Kueue leaves it to map order).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..hierarchy import CohortNode
from ..nominate import Entry
from ..snapshot import Snapshot
from ..types import ClusterQueueName, FlavorResource, WorkloadKey
from .dominant_share import Share, compare, share_of


@dataclass(frozen=True, slots=True)
class Match:
    """One comparison the tournament decided, for explanations."""

    cohort: str
    winner: WorkloadKey
    winner_share: Share
    loser: WorkloadKey
    loser_share: Share
    # The children of ``cohort`` the two came through (a ClusterQueue or a Cohort).
    winner_side: str = ""
    loser_side: str = ""

    def summary(self) -> str:
        """``cohort ai: team-a 300 (cpu) after admission vs team-b 100 (cpu), team-b first``:
        the loser's side first, as ``kqueue explain`` shows it for the loser."""
        return (
            f"cohort {self.cohort}: {self.loser_side} {self.loser_share.describe()} after "
            f"admission vs {self.winner_side} {self.winner_share.describe()}, "
            f"{self.winner_side} first"
        )

    def describe(self) -> str:
        """``fair sharing in cohort ai: team-b/x went first (share after admission 100 (cpu)
        against 300 (cpu) for this workload)``."""
        return (
            f"fair sharing in cohort {self.cohort}: {self.winner} went first (share after "
            f"admission {self.winner_share.describe()} against {self.loser_share.describe()} for "
            f"this workload)"
        )


class FairOrder:
    """Iterate ``entries`` in fair-sharing order; the caller processes each before the next.

    ``lost`` keeps, per entry, the last match it lost (for its pending message).
    """

    def __init__(self, entries: list[Entry], snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.remaining: dict[ClusterQueueName, Entry] = {e.cluster_queue: e for e in entries}
        self.lost: dict[WorkloadKey, Match] = {}

    def __iter__(self) -> Iterator[Entry]:
        remaining = self.remaining
        while remaining:
            first = remaining[min(remaining)]
            cq = self.snapshot.cluster_queues.get(first.cluster_queue)
            if cq is None or cq.parent is None:
                del remaining[first.cluster_queue]
                yield first
                continue
            root = cq.root()
            assert isinstance(root, CohortNode)
            shares = _shares(root, remaining, self.snapshot)
            winner = _tournament(root, remaining, shares, self.lost)
            assert winner is not None
            del remaining[winner.cluster_queue]
            yield winner


def _usage(e: Entry) -> Mapping[FlavorResource, int]:
    return e.assignment.usage if e.assignment is not None else {}


def _shares(
    root: CohortNode, remaining: Mapping[ClusterQueueName, Entry], snapshot: Snapshot
) -> dict[tuple[str, WorkloadKey], Share]:
    """Per (cohort, candidate): the share of the cohort's child on the candidate's path, with
    the candidate admitted (Kueue's computeDRS)."""
    out: dict[tuple[str, WorkloadKey], Share] = {}
    for node in root.subtree_cluster_queues():
        e = remaining.get(node.cq_name)
        cq = snapshot.cluster_queues.get(node.cq_name)
        if e is None or cq is None:
            continue
        usage = _usage(e)
        cq.add_usage(usage)
        try:
            share = share_of(cq)
            for ancestor in cq.path_to_root():
                out[(ancestor.name, e.info.key)] = share
                share = share_of(ancestor)
        finally:
            cq.remove_usage(usage)
    return out


def _tournament(
    cohort: CohortNode,
    remaining: Mapping[ClusterQueueName, Entry],
    shares: Mapping[tuple[str, WorkloadKey], Share],
    lost: dict[WorkloadKey, Match],
) -> Entry | None:
    candidates: list[Entry] = []
    side: dict[WorkloadKey, str] = {}
    for child in sorted(cohort.child_cohorts, key=lambda c: c.name):
        found = _tournament(child, remaining, shares, lost)
        if found is not None:
            candidates.append(found)
            side[found.info.key] = child.name
    for node in sorted(cohort.child_cqs, key=lambda c: c.name):
        e = remaining.get(node.cq_name)
        if e is not None:
            candidates.append(e)
            side[e.info.key] = node.cq_name
    if not candidates:
        return None
    best = candidates[0]
    for current in candidates[1:]:
        if less(current, best, cohort.name, shares):
            best = current
    for other in candidates:
        if other is not best:
            lost[other.info.key] = Match(
                cohort.name,
                best.info.key,
                shares[(cohort.name, best.info.key)],
                other.info.key,
                shares[(cohort.name, other.info.key)],
                side[best.info.key],
                side[other.info.key],
            )
    return best


def less(
    a: Entry, b: Entry, cohort: str, shares: Mapping[tuple[str, WorkloadKey], Share]
) -> bool:
    """Kueue's entryComparer.less at ``cohort``, a preemptor first (PrioritizePreemptorWorkloads)."""
    if a.preemptor != b.preemptor:
        return a.preemptor
    sa, sb = shares[(cohort, a.info.key)], shares[(cohort, b.info.key)]
    borrow_a, borrow_b = sa.borrowing_on(_usage(a)), sb.borrowing_on(_usage(b))
    if borrow_a != borrow_b:
        return not borrow_a
    c = compare(sa, sb)
    if c != 0:
        return c < 0
    if a.info.priority != b.info.priority:
        return a.info.priority > b.info.priority
    ka = (a.info.order_time(), a.info.uid, a.info.key)
    kb = (b.info.order_time(), b.info.uid, b.info.key)
    return ka < kb
