"""The per-cycle snapshot: a cheap copy of the cache that a cycle may change freely.

Immutable parts (specs, quotas, subtree quotas, flavors) are shared with the cache; the usage
of every node and the per-ClusterQueue workload maps are copied. Simulations (``simulate_*``)
change the snapshot and return a function that restores it exactly; ``state()`` gives a
comparable picture so tests can assert that nothing leaked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .hierarchy import ClusterQueueNode, CohortNode, ResourceNode
from .tas.topology import TopologySnapshot
from .types import (
    ClusterQueueName,
    CohortName,
    FairSharingConfig,
    FlavorName,
    FlavorResource,
    PendingReason,
    PreemptionPolicy,
    ResourceFlavor,
    Usage,
    WorkloadKey,
)
from .workload import AdmittedWorkload, WorkloadInfo

if TYPE_CHECKING:
    from .preemption.protection import Protection

Restore = Callable[[], None]


@dataclass(frozen=True, slots=True)
class Inactive:
    """Why a ClusterQueue admits nothing now."""

    reason: PendingReason
    message: str
    # Kueue's reason of the ClusterQueue's Active=False condition, when it has a specific one
    # (AdmissionCheckNotFound, AdmissionCheckInactive).
    cause: str = ""


class ClusterQueueSnapshot(ClusterQueueNode):
    """A ClusterQueue in the snapshot: its node in the tree plus its admitted workloads."""

    __slots__ = ("inactive", "workloads")

    def __init__(
        self,
        node: ClusterQueueNode,
        workloads: dict[WorkloadKey, AdmittedWorkload],
        inactive: Inactive | None,
    ) -> None:
        res = node.resources
        super().__init__(node.spec, ResourceNode(res.quotas, res.subtree_quota, dict(res.usage)))
        self.workloads = workloads
        self.inactive = inactive

    def fits(self, usage: Mapping[FlavorResource, int], *, within_nominal: bool = False) -> bool:
        """Whether ``usage`` can be added now (Kueue's ClusterQueueSnapshot.Fits).

        ``within_nominal`` is for non-preemptible workloads, which may not borrow.
        """
        for fr, q in usage.items():
            if max(0, self.available(fr)) < q:
                return False
            if within_nominal and self.usage_of(fr) + q > self.nominal(fr):
                return False
        return True

    def can_always_reclaim(self) -> bool:
        """Kueue's preemption.CanAlwaysReclaim: borrowed nominal quota is always reclaimable."""
        return self.spec.preemption.reclaim_within_cohort == PreemptionPolicy.ANY


class CohortSnapshot(CohortNode):
    __slots__ = ()


class Snapshot:
    """Everything one scheduling cycle reads, detached from the cache."""

    def __init__(
        self,
        cluster_queues: dict[ClusterQueueName, ClusterQueueSnapshot],
        cohorts: dict[CohortName, CohortSnapshot],
        flavors: Mapping[FlavorName, ResourceFlavor],
        evicting: frozenset[WorkloadKey],
        fair_sharing: FairSharingConfig | None = None,
        topology: TopologySnapshot | None = None,
    ) -> None:
        self.cluster_queues = cluster_queues
        self.cohorts = cohorts
        self.flavors = flavors
        # Victims already told to go: they still hold quota until the controller reports them
        # evicted, and must not be chosen (or counted) twice.
        self.evicting = evicting
        # Fair sharing on (the Configuration's fairSharing) or off (None).
        self.fair_sharing = fair_sharing
        # Topology-aware flavors' domains and what admitted placements take (None without any):
        # follows add_workload/remove_workload, so simulated removals free domains too.
        self.topology = topology
        # Preemption protection as of the cycle's time (preemption/protection.py); set by the
        # cycle, None (nothing protected) for a snapshot taken outside one.
        self.protection: Protection | None = None
        # The workloads pending in a ClusterQueue (preemption/undo.py's rivals); set by the
        # cycle, None outside one.
        self.pending: Callable[[ClusterQueueName], Iterable[WorkloadInfo]] | None = None
        # undo.py's memo of ``pending``, one workload per kind (priority and requests): the
        # pending set does not change during a cycle, and may be long.
        self.pending_kinds: dict[ClusterQueueName, list[WorkloadInfo]] = {}

    @staticmethod
    def build(
        cq_nodes: Mapping[ClusterQueueName, ClusterQueueNode],
        cohort_nodes: Mapping[CohortName, CohortNode],
        cq_workloads: Mapping[ClusterQueueName, Mapping[WorkloadKey, AdmittedWorkload]],
        inactive: Mapping[ClusterQueueName, Inactive],
        flavors: Mapping[FlavorName, ResourceFlavor],
        evicting: frozenset[WorkloadKey],
        *,
        fair_sharing: FairSharingConfig | None = None,
        topology: TopologySnapshot | None = None,
    ) -> Snapshot:
        cohorts: dict[CohortName, CohortSnapshot] = {}
        for cohort_name, node in cohort_nodes.items():
            res = node.resources
            cohorts[cohort_name] = CohortSnapshot(
                cohort_name, ResourceNode(res.quotas, res.subtree_quota, dict(res.usage)), node.spec
            )
        for cohort_name, node in cohort_nodes.items():
            snap = cohorts[cohort_name]
            if node.parent is not None:
                snap.parent = cohorts[CohortName(node.parent.name)]
            snap.child_cohorts = [cohorts[CohortName(c.name)] for c in node.child_cohorts]
        cqs: dict[ClusterQueueName, ClusterQueueSnapshot] = {}
        for cq_name, cq_node in cq_nodes.items():
            cq = ClusterQueueSnapshot(
                cq_node, dict(cq_workloads.get(cq_name, {})), inactive.get(cq_name)
            )
            if cq_node.parent is not None:
                parent = cohorts[CohortName(cq_node.parent.name)]
                cq.parent = parent
                parent.child_cqs.append(cq)
            cqs[cq_name] = cq
        return Snapshot(cqs, cohorts, flavors, evicting, fair_sharing, topology)

    def cluster_queue(self, name: ClusterQueueName) -> ClusterQueueSnapshot | None:
        return self.cluster_queues.get(name)

    def workload(self, key: WorkloadKey, cq: ClusterQueueName) -> AdmittedWorkload | None:
        snap = self.cluster_queues.get(cq)
        return None if snap is None else snap.workloads.get(key)

    # -- changes and simulations -------------------------------------------------------------

    def add_workload(self, wl: AdmittedWorkload) -> None:
        cq = self.cluster_queues.get(wl.cluster_queue)
        if cq is None:
            return
        cq.workloads[wl.key] = wl
        cq.add_usage(wl.usage)
        if self.topology is not None:
            self.topology.add_workload(wl)

    def remove_workload(self, wl: AdmittedWorkload) -> None:
        cq = self.cluster_queues.get(wl.cluster_queue)
        if cq is None or cq.workloads.pop(wl.key, None) is None:
            return
        cq.remove_usage(wl.usage)
        if self.topology is not None:
            self.topology.remove_workload(wl)

    def simulate_removal(self, workloads: Iterable[AdmittedWorkload]) -> Restore:
        """Remove ``workloads`` (e.g. preemption candidates); the result puts them back."""
        removed: list[AdmittedWorkload] = []
        for wl in workloads:
            cq = self.cluster_queues.get(wl.cluster_queue)
            if cq is None or wl.key not in cq.workloads:
                continue
            self.remove_workload(wl)
            removed.append(wl)

        def restore() -> None:
            for wl in reversed(removed):
                self.add_workload(wl)

        return restore

    def simulate_addition(self, workloads: Iterable[AdmittedWorkload]) -> Restore:
        added: list[AdmittedWorkload] = []
        for wl in workloads:
            cq = self.cluster_queues.get(wl.cluster_queue)
            if cq is None or wl.key in cq.workloads:
                continue
            self.add_workload(wl)
            added.append(wl)

        def restore() -> None:
            for wl in reversed(added):
                self.remove_workload(wl)

        return restore

    def simulate_usage(self, cq: ClusterQueueName, usage: Mapping[FlavorResource, int]) -> Restore:
        """Add bare usage (not tied to a workload) to ``cq``; the result takes it away."""
        node = self.cluster_queues[cq]
        node.add_usage(usage)
        return lambda: node.remove_usage(usage)

    # -- inspection --------------------------------------------------------------------------

    def state(self) -> tuple[object, ...]:
        """A comparable picture of everything a cycle may change (zero entries ignored)."""

        def clean(u: Usage) -> tuple[tuple[FlavorResource, int], ...]:
            return tuple(sorted((fr, v) for fr, v in u.items() if v))

        cqs = tuple(
            (name, clean(cq.resources.usage), tuple(sorted(cq.workloads)))
            for name, cq in sorted(self.cluster_queues.items())
        )
        cohorts = tuple(
            (name, clean(c.resources.usage)) for name, c in sorted(self.cohorts.items())
        )
        tas = () if self.topology is None else tuple(
            (flavor, leaf, tuple(sorted((r, v) for r, v in amounts.items() if v)))
            for flavor, per_leaf in sorted(self.topology.usage.usage.items())
            for leaf, amounts in sorted(per_leaf.items())
            if any(amounts.values())
        )
        return (cqs, cohorts, tas)
