"""The cache: the engine's truth about quota, the cohort tree and who holds quota.

It keeps ClusterQueue and Cohort specs, flavors, and every workload that holds quota (admitted,
assumed by this engine, or rebuilt from ``status.admission`` after a restart), with each
ClusterQueue's usage maintained incrementally. The cohort tree (nodes with subtree quotas) is
rebuilt lazily after a ClusterQueue or Cohort change, then kept up to date as workloads come and
go; ``snapshot()`` copies what a cycle may change. No I/O: the controller feeds it events.
"""

from __future__ import annotations

from collections.abc import Iterable

from .checks import checks_for, inactive_message
from .hierarchy import ClusterQueueNode, CohortNode, ResourceNode, accumulate_subtree_quota
from .resources import add_into, sub_into
from .snapshot import Inactive, Snapshot
from .tas.fit import delegates_placement
from .tas.topology import (
    ClusterNodes,
    DomainId,
    FlavorTopology,
    TopologySnapshot,
    TopologyUsage,
    build_trees,
)
from .types import (
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    FairSharingConfig,
    FlavorName,
    PendingReason,
    PodSetAssignment,
    ProtectionConfig,
    ResourceFlavor,
    StopPolicy,
    Usage,
    WorkloadKey,
)
from .workload import AdmittedWorkload


class Cache:
    def __init__(self) -> None:
        self.flavors: dict[FlavorName, ResourceFlavor] = {}
        # AdmissionChecks by name, with why each is inactive (None: active).
        self.admission_checks: dict[str, str | None] = {}
        # The AdmissionChecks that provision nodes (ProvisioningRequest): a topology-aware pod
        # set behind one is placed after it is Ready (tas/delayed.py).
        self.provisioning_checks: set[str] = set()
        # The MultiKueue checks: a topology-aware pod set of a ClusterQueue with one is placed
        # by the worker that runs it, never here (tas/delayed.py).
        self.multikueue_checks: set[str] = set()
        self.cluster_queues: dict[ClusterQueueName, ClusterQueueSpec] = {}
        self.cohorts: dict[CohortName, CohortSpec] = {}
        self.workloads: dict[WorkloadKey, AdmittedWorkload] = {}
        # Victims told to go that still hold quota (see Snapshot.evicting).
        self.evicting: set[WorkloadKey] = set()
        self._by_cq: dict[ClusterQueueName, dict[WorkloadKey, AdmittedWorkload]] = {}
        self._cq_usage: dict[ClusterQueueName, Usage] = {}
        self._dirty = True
        self._cq_nodes: dict[ClusterQueueName, ClusterQueueNode] = {}
        self._cohort_nodes: dict[CohortName, CohortNode] = {}
        self._in_cycle: set[CohortName] = set()
        # Generations of what a ClusterQueue can allocate (Kueue's AllocatableResourceGeneration):
        # bumped by any change of quota, tree or flavors, and per root cohort when quota is freed.
        self._structure_generation = 0
        self._freed_generation: dict[str, int] = {}
        # The Configuration's fairSharing; None keeps the classical order and preemption.
        self.fair_sharing: FairSharingConfig | None = None
        # The Configuration's preemptionProtection (preemption/protection.py).
        self.protection: ProtectionConfig | None = None
        # Topologies, nodes and bound pods (topology-aware flavors), and their trees, rebuilt
        # when any of them or the flavors change.
        self.nodes = ClusterNodes()
        self._trees: dict[FlavorName, FlavorTopology] = {}
        self._trees_key: tuple[int, int] | None = None
        # What the workloads holding quota take from the leaves of ``_trees``, kept up to date as
        # workloads come and go so a cycle's snapshot copies it instead of summing every
        # admitted workload's assignment again. Rebuilt when the trees are.
        self._topology_usage: TopologyUsage | None = None
        # Bumped whenever a workload holding a topology assignment comes or goes: the node-fit
        # guard reads what assignments hold on each host.
        self.topology_usage_generation = 0

    # -- objects -----------------------------------------------------------------------------

    def upsert_flavor(self, flavor: ResourceFlavor) -> None:
        self.flavors[flavor.name] = flavor
        self._structure_generation += 1

    def delete_flavor(self, name: FlavorName) -> None:
        self.flavors.pop(name, None)
        self._structure_generation += 1

    def upsert_cluster_queue(self, spec: ClusterQueueSpec) -> None:
        self.cluster_queues[spec.name] = spec
        self._changed()

    def delete_cluster_queue(self, name: ClusterQueueName) -> None:
        if self.cluster_queues.pop(name, None) is not None:
            self._changed()

    def upsert_cohort(self, spec: CohortSpec) -> None:
        self.cohorts[spec.name] = spec
        self._changed()

    def delete_cohort(self, name: CohortName) -> None:
        if self.cohorts.pop(name, None) is not None:
            self._changed()

    def _changed(self) -> None:
        self._dirty = True
        self._structure_generation += 1

    def generation(self, cq: ClusterQueueName) -> tuple[int, int]:
        """Changes whenever what ``cq`` can allocate may have grown or changed.

        A flavor search resumed from where the last one stopped is only valid while this stays
        the same.
        """
        node = self.cluster_queue_node(cq)
        root = node.root().name if node is not None else cq
        return (
            self._structure_generation + self.nodes.generation,
            self._freed_generation.get(root, 0),
        )

    # -- workloads holding quota -------------------------------------------------------------

    def add_workload(self, wl: AdmittedWorkload) -> None:
        """Record that ``wl`` holds quota (replacing any previous record of it).

        A workload being evicted stays marked as such: an update of a victim that still holds
        its quota must not make it a candidate again.
        """
        evicting = wl.key in self.evicting
        self.remove_workload(wl.key, freed=False)
        if evicting:
            self.evicting.add(wl.key)
        self.workloads[wl.key] = wl
        if self._topology_usage is not None:
            self._topology_usage.add_workload(wl)
        if any(psa.topology is not None for psa in wl.admission.pod_sets):
            self.topology_usage_generation += 1
        self._by_cq.setdefault(wl.cluster_queue, {})[wl.key] = wl
        add_into(self._cq_usage.setdefault(wl.cluster_queue, {}), wl.usage)
        node = None if self._dirty else self._cq_nodes.get(wl.cluster_queue)
        if node is not None:
            node.add_usage(wl.usage)

    def remove_workload(self, key: WorkloadKey, *, freed: bool = True) -> AdmittedWorkload | None:
        wl = self.workloads.pop(key, None)
        self.evicting.discard(key)
        if wl is None:
            return None
        if self._topology_usage is not None:
            self._topology_usage.add_workload(wl, -1)
        if any(psa.topology is not None for psa in wl.admission.pod_sets):
            self.topology_usage_generation += 1
        if freed:
            node = self.cluster_queue_node(wl.cluster_queue)
            root = node.root().name if node is not None else wl.cluster_queue
            self._freed_generation[root] = self._freed_generation.get(root, 0) + 1
        per_cq = self._by_cq.get(wl.cluster_queue)
        if per_cq is not None:
            per_cq.pop(key, None)
            if not per_cq:
                del self._by_cq[wl.cluster_queue]
        sub_into(self._cq_usage.setdefault(wl.cluster_queue, {}), wl.usage)
        node = None if self._dirty else self._cq_nodes.get(wl.cluster_queue)
        if node is not None:
            node.remove_usage(wl.usage)
        return wl

    def get(self, key: WorkloadKey) -> AdmittedWorkload | None:
        return self.workloads.get(key)

    def count_in(self, cq: ClusterQueueName) -> int:
        """How many workloads hold quota in ``cq`` (without listing them)."""
        return len(self._by_cq.get(cq, {}))

    def workloads_in(self, cq: ClusterQueueName) -> list[AdmittedWorkload]:
        return [self._by_cq[cq][k] for k in sorted(self._by_cq.get(cq, {}))]

    def usage(self, cq: ClusterQueueName) -> Usage:
        """What the workloads holding quota in ``cq`` use (a copy)."""
        return {fr: v for fr, v in self._cq_usage.get(cq, {}).items() if v}

    # -- the tree ----------------------------------------------------------------------------

    def _rebuild(self) -> None:
        if not self._dirty:
            return
        cohorts: dict[CohortName, CohortNode] = {}

        def cohort(name: CohortName) -> CohortNode:
            node = cohorts.get(name)
            if node is None:
                spec = self.cohorts.get(name)
                node = CohortNode(name, ResourceNode(spec.quotas() if spec else {}), spec)
                cohorts[name] = node
            return node

        for cohort_name in sorted(self.cohorts):
            cohort(cohort_name)
        for cq_spec in self.cluster_queues.values():
            if cq_spec.cohort is not None:
                cohort(cq_spec.cohort)
        # Parents may name cohorts that exist only by reference: create them as we go.
        pending = sorted(cohorts)
        while pending:
            cspec = cohorts[pending.pop()].spec
            if cspec is not None and cspec.parent is not None and cspec.parent not in cohorts:
                cohort(cspec.parent)
                pending.append(cspec.parent)
        self._in_cycle = _cohorts_in_cycles(cohorts)
        for cohort_name in sorted(cohorts):
            node = cohorts[cohort_name]
            # A cohort on a cycle is cut loose (its ClusterQueues are inactive, see below), so
            # that walking up the tree always ends.
            if node.spec is None or node.spec.parent is None or cohort_name in self._in_cycle:
                continue
            parent = cohorts[node.spec.parent]
            node.parent = parent
            parent.child_cohorts.append(node)
        cq_nodes: dict[ClusterQueueName, ClusterQueueNode] = {}
        for cq_name in sorted(self.cluster_queues):
            spec = self.cluster_queues[cq_name]
            quotas = spec.quotas()
            node_res = ResourceNode(quotas, {fr: q.nominal for fr, q in quotas.items()})
            cq = ClusterQueueNode(spec, node_res)
            if spec.cohort is not None:
                cq_parent = cohorts[spec.cohort]
                cq.parent = cq_parent
                cq_parent.child_cqs.append(cq)
            cq_nodes[cq_name] = cq
        for node in cohorts.values():
            if node.parent is None:
                accumulate_subtree_quota(node)
        for cq_name, cq in cq_nodes.items():
            cq.add_usage(self._cq_usage.get(cq_name, {}))
        self._cq_nodes = cq_nodes
        self._cohort_nodes = cohorts
        self._dirty = False

    def cluster_queue_node(self, name: ClusterQueueName) -> ClusterQueueNode | None:
        self._rebuild()
        return self._cq_nodes.get(name)

    def cohort_node(self, name: CohortName) -> CohortNode | None:
        self._rebuild()
        return self._cohort_nodes.get(name)

    def tree_members(self, cq: ClusterQueueName) -> list[ClusterQueueName]:
        """All ClusterQueues sharing ``cq``'s root cohort (just ``cq`` without a cohort).

        Quota freed anywhere in a tree can make any of them admit, which is why inadmissible
        workloads are requeued per tree.
        """
        self._rebuild()
        node = self._cq_nodes.get(cq)
        if node is None:
            return [cq]
        root = node.root()
        if isinstance(root, CohortNode):
            return sorted(ClusterQueueName(c.name) for c in root.subtree_cluster_queues())
        return [cq]

    def cohort_members(self, name: CohortName) -> list[ClusterQueueName]:
        """All ClusterQueues in the tree that contains cohort ``name``."""
        node = self.cohort_node(name)
        if node is None:
            return []
        root = node.root()
        assert isinstance(root, CohortNode)
        return sorted(ClusterQueueName(c.name) for c in root.subtree_cluster_queues())

    def inactive(self, name: ClusterQueueName) -> Inactive | None:
        """Why ``name`` cannot admit now, if it cannot (Kueue's ClusterQueue Active=False)."""
        spec = self.cluster_queues.get(name)
        if spec is None:
            return Inactive(PendingReason.MISCONFIGURED, f"ClusterQueue {name} doesn't exist")
        missing = [f for f in spec.flavor_names() if f not in self.flavors]
        if missing:
            return Inactive(
                PendingReason.MISCONFIGURED,
                f"ClusterQueue {name} is inactive: references missing ResourceFlavor(s): "
                + ", ".join(missing),
            )
        self._rebuild()
        node = self._cq_nodes.get(name)
        if node is not None:
            for ancestor in node.path_to_root():
                if ancestor.name in self._in_cycle:
                    return Inactive(
                        PendingReason.MISCONFIGURED,
                        f"ClusterQueue {name} is inactive: cohort {ancestor.name} is part of a cycle",
                    )
        # A MultiKueue manager delegates placement to the workers, which hold the Topology and
        # its nodes: it needs neither (Kueue's isTASViolated skips the check then).
        delegated = delegates_placement(spec, self.multikueue_checks)
        for f in spec.flavor_names():
            topo = self.flavors[f].topology_name
            if topo is not None and topo not in self.nodes.topologies and not delegated:
                return Inactive(
                    PendingReason.MISCONFIGURED,
                    f"ClusterQueue {name} is inactive: ResourceFlavor {f} references missing "
                    f"Topology {topo} (spec.topologyName)",
                )
        checks = inactive_message(
            name, spec.admission_checks, self.admission_checks,
            multikueue=self.multikueue_checks, provisioning=self.provisioning_checks,
        )
        if checks is not None:
            return Inactive(PendingReason.MISCONFIGURED, checks[1], checks[0])
        if spec.stop_policy != StopPolicy.NONE:
            return Inactive(PendingReason.SUSPENDED, f"ClusterQueue {name} is stopped")
        return None

    def admission_checks_for(
        self, cq: ClusterQueueName, pod_sets: Iterable[PodSetAssignment]
    ) -> list[str]:
        """The AdmissionChecks a workload assigned ``pod_sets`` in ``cq`` must pass."""
        spec = self.cluster_queues.get(cq)
        if spec is None or not spec.admission_checks:
            return []
        return checks_for(
            spec.admission_checks, (f for ps in pod_sets for f in ps.flavors.values())
        )

    def topology_trees(self) -> dict[FlavorName, FlavorTopology]:
        """The domain tree of every topology-aware flavor, rebuilt after a change."""
        key = (self._structure_generation, self.nodes.generation)
        if key != self._trees_key:
            self._trees = build_trees(self.nodes, self.flavors)
            self._trees_key = key
        return self._trees

    def snapshot(self) -> Snapshot:
        self._rebuild()
        inactive: dict[ClusterQueueName, Inactive] = {}
        for name in self._cq_nodes:
            why = self.inactive(name)
            if why is not None:
                inactive[name] = why
        return Snapshot.build(
            self._cq_nodes,
            self._cohort_nodes,
            self._by_cq,
            inactive,
            self.flavors,
            frozenset(self.evicting),
            fair_sharing=self.fair_sharing,
            topology=self._topology_snapshot(),
        )

    def _topology_snapshot(self) -> TopologySnapshot | None:
        if not any(f.topology_name for f in self.flavors.values()):
            return None
        trees = self.topology_trees()
        return TopologySnapshot(
            trees, (), self.topology_usage(),
            provisioning_checks=frozenset(self.provisioning_checks),
            multikueue_checks=frozenset(self.multikueue_checks),
            without_topology=frozenset(
                f for f, rf in self.flavors.items() if rf.topology_name and f not in trees
            ),
        )

    def topology_usage(self) -> TopologyUsage:
        """A copy of what the held workloads' topology assignments take on the current trees."""
        trees = self.topology_trees()
        if self._topology_usage is None or self._topology_usage.trees is not trees:
            self._topology_usage = TopologyUsage(trees)
            for wl in self.workloads.values():
                self._topology_usage.add_workload(wl)
        return self._topology_usage.copy()

    def check_consistency(self, workloads: Iterable[AdmittedWorkload] | None = None) -> None:
        """Recompute usage from scratch and compare (tests use it after random operations)."""
        held = list(self.workloads.values() if workloads is None else workloads)
        expected: dict[ClusterQueueName, Usage] = {}
        for wl in held:
            add_into(expected.setdefault(wl.cluster_queue, {}), wl.usage)
        for cq in set(expected) | set(self._cq_usage):
            got = {k: v for k, v in self._cq_usage.get(cq, {}).items() if v}
            want = {k: v for k, v in expected.get(cq, {}).items() if v}
            assert got == want, f"usage of {cq} drifted: {got} != {want}"
        kept = self._topology_usage
        if kept is not None and kept.trees is self._trees:
            fresh = TopologySnapshot(kept.trees, held).usage
            assert _nonzero(kept) == _nonzero(fresh), (
                f"topology usage drifted: {_nonzero(kept)} != {_nonzero(fresh)}"
            )


def _nonzero(usage: TopologyUsage) -> dict[tuple[FlavorName, DomainId], dict[str, int]]:
    return {
        (f, leaf): {r: v for r, v in amounts.items() if v}
        for f, per_leaf in usage.usage.items()
        for leaf, amounts in per_leaf.items()
        if any(amounts.values())
    }


def _cohorts_in_cycles(cohorts: dict[CohortName, CohortNode]) -> set[CohortName]:
    in_cycle: set[CohortName] = set()
    for start in sorted(cohorts):
        seen: list[CohortName] = []
        name: CohortName | None = start
        while name is not None and name not in seen:
            seen.append(name)
            spec = cohorts[name].spec if name in cohorts else None
            name = spec.parent if spec is not None else None
        if name is not None:
            in_cycle.update(seen[seen.index(name) :])
    return in_cycle
