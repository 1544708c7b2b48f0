"""Quota and usage in the cohort tree, with Kueue's resource-node semantics.

A node is a ClusterQueue (a leaf) or a Cohort (flat ``cohortName`` or a Cohort object with its own
quota and ``parentName``). Each node has:

* ``quotas``: its own nominal quota, borrowing and lending limits per (flavor, resource);
* ``subtree_quota``: its nominal quota plus what its children lend upwards (their subtree quota
  minus the part their lending limit keeps local);
* ``usage``: for a ClusterQueue, what its workloads use; for a Cohort, the part of its children's
  usage that exceeds what they keep locally.

``available`` walks up the tree: what is free locally, plus what the parent can give, capped by
the borrowing limit. The formulas follow kueue/pkg/cache/scheduler/resource_node.go exactly, so
that borrowing and lending at every level behave as in Kueue. ``quotas`` and ``subtree_quota`` are
replaced, never mutated, when the tree changes, so snapshots share them; only ``usage`` is copied.
"""

from __future__ import annotations

from collections.abc import Mapping

from .types import (
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    FlavorResource,
    ResourceQuota,
    Usage,
)

_NO_QUOTA = ResourceQuota()


class ResourceNode:
    __slots__ = ("quotas", "subtree_quota", "usage")

    def __init__(
        self,
        quotas: Mapping[FlavorResource, ResourceQuota],
        subtree_quota: dict[FlavorResource, int] | None = None,
        usage: Usage | None = None,
    ) -> None:
        self.quotas = quotas
        self.subtree_quota: dict[FlavorResource, int] = (
            subtree_quota if subtree_quota is not None else {}
        )
        self.usage: Usage = usage if usage is not None else {}

    def quota(self, fr: FlavorResource) -> ResourceQuota:
        return self.quotas.get(fr, _NO_QUOTA)

    def local_quota(self, fr: FlavorResource) -> int:
        """Capacity only this subtree sees: what the lending limit keeps from the parent."""
        q = self.quotas.get(fr)
        if q is None or q.lending_limit is None:
            return 0
        return max(0, self.subtree_quota.get(fr, 0) - q.lending_limit)

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))


class Node:
    """Common part of ClusterQueue and Cohort nodes: a resource node and a parent."""

    __slots__ = ("name", "parent", "resources")

    def __init__(self, name: str, resources: ResourceNode) -> None:
        self.name = name
        self.resources = resources
        self.parent: CohortNode | None = None

    # -- Kueue's available()/potentialAvailable() -------------------------------------------

    def available(self, fr: FlavorResource) -> int:
        """Capacity left for this node, counting what its ancestors can give (may be negative)."""
        r = self.resources
        if self.parent is None:
            return r.subtree_quota.get(fr, 0) - r.usage.get(fr, 0)
        parent_available = self.parent.available(fr)
        borrowing_limit = r.quota(fr).borrowing_limit
        if borrowing_limit is not None:
            local = r.local_quota(fr)
            stored_in_parent = r.subtree_quota.get(fr, 0) - local
            used_in_parent = max(0, r.usage.get(fr, 0) - local)
            with_max_from_parent = stored_in_parent - used_in_parent + borrowing_limit
            parent_available = min(with_max_from_parent, parent_available)
        return r.local_available(fr) + parent_available

    def potential_available(self, fr: FlavorResource) -> int:
        """The most this node could ever get, with no usage anywhere, within borrowing limits."""
        r = self.resources
        if self.parent is None:
            return r.subtree_quota.get(fr, 0)
        avail = r.local_quota(fr) + self.parent.potential_available(fr)
        borrowing_limit = r.quota(fr).borrowing_limit
        if borrowing_limit is not None:
            avail = min(r.subtree_quota.get(fr, 0) + borrowing_limit, avail)
        return avail

    def borrowing_with(self, fr: FlavorResource, val: int) -> bool:
        """Whether adding ``val`` takes this node past its own (subtree) quota."""
        r = self.resources
        return r.subtree_quota.get(fr, 0) < r.usage.get(fr, 0) + val

    # -- usage bubbling ---------------------------------------------------------------------

    def add_usage_fr(self, fr: FlavorResource, val: int) -> None:
        r = self.resources
        local_available = r.local_available(fr)
        r.usage[fr] = r.usage.get(fr, 0) + val
        if self.parent is not None and val > local_available:
            self.parent.add_usage_fr(fr, val - local_available)

    def remove_usage_fr(self, fr: FlavorResource, val: int) -> None:
        r = self.resources
        stored_in_parent = r.usage.get(fr, 0) - r.local_quota(fr)
        left = r.usage.get(fr, 0) - val
        if left:
            r.usage[fr] = left
        else:
            r.usage.pop(fr, None)
        if stored_in_parent <= 0 or self.parent is None:
            return
        self.parent.remove_usage_fr(fr, min(val, stored_in_parent))

    def add_usage(self, usage: Mapping[FlavorResource, int]) -> None:
        for fr, val in usage.items():
            self.add_usage_fr(fr, val)

    def remove_usage(self, usage: Mapping[FlavorResource, int]) -> None:
        for fr, val in usage.items():
            self.remove_usage_fr(fr, val)

    def path_to_root(self) -> list[CohortNode]:
        out: list[CohortNode] = []
        cohort = self.parent
        while cohort is not None:
            out.append(cohort)
            cohort = cohort.parent
        return out

    def root(self) -> Node:
        node: Node = self
        while node.parent is not None:
            node = node.parent
        return node


class CohortNode(Node):
    __slots__ = ("child_cohorts", "child_cqs", "lendable", "spec")

    def __init__(self, name: CohortName, resources: ResourceNode, spec: CohortSpec | None) -> None:
        super().__init__(name, resources)
        # None for an implicit cohort (named by a cohortName or parentName, no Cohort object).
        self.spec = spec
        self.child_cohorts: list[CohortNode] = []
        self.child_cqs: list[ClusterQueueNode] = []
        # What this cohort could lend per resource (fairness/dominant_share.py). It depends on quotas only,
        # which never change on a node (the tree is rebuilt), so it is computed once.
        self.lendable: dict[str, int] | None = None

    def height(self) -> int:
        """Distance to the furthest leaf (Kueue's getNodeHeight)."""
        h = min(len(self.child_cohorts) + len(self.child_cqs), 1)
        for child in self.child_cohorts:
            h = max(h, child.height() + 1)
        return h

    def subtree_cluster_queues(self) -> list[ClusterQueueNode]:
        out = list(self.child_cqs)
        for child in self.child_cohorts:
            out.extend(child.subtree_cluster_queues())
        return out


class ClusterQueueNode(Node):
    __slots__ = ("spec",)

    def __init__(self, spec: ClusterQueueSpec, resources: ResourceNode) -> None:
        super().__init__(spec.name, resources)
        self.spec = spec

    @property
    def cq_name(self) -> ClusterQueueName:
        return self.spec.name

    def nominal(self, fr: FlavorResource) -> int:
        return self.resources.quota(fr).nominal

    def usage_of(self, fr: FlavorResource) -> int:
        return self.resources.usage.get(fr, 0)


def find_height_of_lowest_subtree_that_fits(
    cq: ClusterQueueNode, fr: FlavorResource, val: int
) -> tuple[int, bool]:
    """How far up the tree ``val`` more of ``fr`` must be borrowed (0: not at all).

    Also says whether the subtree that fits is smaller than the whole tree, i.e. whether the
    ClusterQueue may reclaim within a sub-cohort (Kueue's FindHeightOfLowestSubtreeThatFits).
    """
    if not cq.borrowing_with(fr, val) or cq.parent is None:
        return 0, cq.parent is not None
    remaining = val - cq.resources.local_available(fr)
    for node in cq.path_to_root():
        if not node.borrowing_with(fr, remaining):
            return node.height(), node.parent is not None
        remaining -= node.resources.local_available(fr)
    root = cq.root()
    assert isinstance(root, CohortNode)
    return root.height(), False


def accumulate_subtree_quota(cohort: CohortNode) -> None:
    """Recompute subtree quotas below ``cohort`` (Kueue's updateCohortResourceNode, no usage)."""
    subtree: dict[FlavorResource, int] = {fr: q.nominal for fr, q in cohort.resources.quotas.items()}
    children: list[Node] = []
    for child in cohort.child_cohorts:
        accumulate_subtree_quota(child)
        children.append(child)
    children.extend(cohort.child_cqs)
    for node in children:
        for fr, q in node.resources.subtree_quota.items():
            subtree[fr] = subtree.get(fr, 0) + q - node.resources.local_quota(fr)
    cohort.resources.subtree_quota = subtree
