"""Fair sharing: the weighted dominant resource share of nodes of the cohort tree.

Kueue's ``pkg/cache/scheduler/fair_sharing.go``. A node (ClusterQueue or Cohort) with a parent
borrows a resource when its usage of some flavor/resource exceeds its subtree quota. Its share is
the highest, over resources, of what it borrows (summed over flavors) per 1000 of what its parent
could lend it of that resource (``potential_available`` summed over the flavors of the tree),
divided by its ``spec.fairSharing.weight``. A root, or a node within its quota, has share 0; a
node with weight 0 that borrows has an infinite share.

Kueue computes the ratio in floating point; kqueue keeps it as an exact fraction, so that equal
shares compare equal. The status value is Kueue's: the share rounded up, or 2^63-1 when infinite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from ..hierarchy import ClusterQueueNode, CohortNode, Node
from ..types import FlavorResource, ResourceName

# Kueue's status value for an infinite share (weight 0 and borrowing): math.MaxInt64.
MAX_SHARE = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Share:
    """Kueue's DRS: the dominant resource share of one node."""

    weight: Fraction = Fraction(1)
    # Borrowed per 1000 of what the parent can lend, for the dominant resource (unweighted).
    ratio: Fraction = Fraction(0)
    dominant: ResourceName | None = None
    # Flavor/resources on which the node uses more than its subtree quota.
    borrowed: frozenset[FlavorResource] = field(default_factory=frozenset)

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    def borrowing_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        """Whether the node borrows on a flavor/resource that ``requested`` asks for."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)

    @property
    def infinite(self) -> bool:
        """Weight 0 and borrowing something that can be lent: always last."""
        return self.weight == 0 and self.ratio != 0

    @property
    def weighted(self) -> Fraction | None:
        """The weighted share; None when infinite."""
        if self.ratio == 0:
            return Fraction(0)
        if self.weight == 0:
            return None
        return self.ratio / self.weight

    def rounded(self) -> int:
        """The status value (Kueue's WeightedShare): rounded up, MAX_SHARE when infinite."""
        w = self.weighted
        return MAX_SHARE if w is None else math.ceil(w)

    def precise(self) -> float:
        """For metrics only (Kueue's PreciseWeightedShare): +Inf when infinite."""
        w = self.weighted
        return math.inf if w is None else float(w)

    def describe(self) -> str:
        w = self.weighted
        if w is None:
            return "infinite (weight 0, borrowing)"
        text = f"{float(w):.4g}".rstrip("0").rstrip(".") if w != int(w) else str(int(w))
        return text if self.dominant is None else f"{text} ({self.dominant})"


def compare(a: Share, b: Share) -> int:
    """Kueue's CompareDRS: negative when ``a`` should be admitted before ``b`` (and preempted
    after it)."""
    if a.infinite and b.infinite:
        return _cmp(a.ratio, b.ratio)
    if a.infinite:
        return 1
    if b.infinite:
        return -1
    wa, wb = a.weighted, b.weighted
    assert wa is not None and wb is not None
    return _cmp(wa, wb)


def _cmp(x: Fraction, y: Fraction) -> int:
    return (x > y) - (x < y)


def weight_of(node: Node) -> Fraction:
    if isinstance(node, ClusterQueueNode):
        return node.spec.fair_weight
    if isinstance(node, CohortNode) and node.spec is not None:
        return node.spec.fair_weight
    return Fraction(1)


def share_of(node: Node, extra: Mapping[FlavorResource, int] | None = None) -> Share:
    """The node's share, as if ``extra`` were added to its usage (Kueue's dominantResourceShare)."""
    weight = weight_of(node)
    if node.parent is None:
        return Share(weight)
    r = node.resources
    extra = extra or {}
    per_resource: dict[ResourceName, int] = {}
    borrowed: set[FlavorResource] = set()
    for fr, quota in r.subtree_quota.items():
        amount = extra.get(fr, 0) + r.usage.get(fr, 0) - quota
        if amount > 0:
            per_resource[fr[1]] = per_resource.get(fr[1], 0) + amount
            borrowed.add(fr)
    if not per_resource:
        return Share(weight)
    lendable = _lendable(node.parent)
    best, dominant = Fraction(0), None
    for res in sorted(per_resource):
        can = lendable.get(res, 0)
        if can <= 0:
            continue
        ratio = Fraction(per_resource[res] * 1000, can)
        if ratio > best:
            best, dominant = ratio, res
    return Share(weight, best, dominant, frozenset(borrowed))


def _lendable(node: CohortNode) -> dict[str, int]:
    """What ``node`` could lend of each resource, summed over the flavors of its tree."""
    if node.lendable is None:
        out: dict[str, int] = {}
        for fr in sorted(node.root().resources.subtree_quota):
            out[fr[1]] = out.get(fr[1], 0) + node.potential_available(fr)
        node.lendable = out
    return node.lendable
