"""Topology-aware scheduling, the cluster side: Topologies, nodes, bound pods, and the tree of
domains a topology-aware flavor places pods in (Kueue's TAS cache and TASFlavorSnapshot).

1. ``ClusterNodes`` (in the cache) keeps what the controller or the simulator reports: each
   Topology's levels, each node's labels, allocatable, taints and readiness, and each bound pod
   whose requests are not already counted through a topology assignment (pods of workloads
   admitted without topology, pods kqueue does not manage at all).
2. ``FlavorTopology`` (per cycle) is one flavor's tree: the nodes that carry the flavor's node
   labels and every level label of its Topology, grouped by level values from the top; the
   leaves are the domains of the lowest level (single nodes when that level is
   ``kubernetes.io/hostname``). A node's free capacity is its allocatable minus the requests of
   the bound pods on it.
3. ``TopologyUsage`` (per cycle, in the snapshot) is what admitted workloads' topology
   assignments take from each leaf; it follows the snapshot's workloads, so preemption
   simulations free the victims' domains.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ..selectors import requirement_matches as label_requirement_matches
from ..types import (
    PODS,
    FlavorName,
    PodSet,
    ResourceFlavor,
    ResourceName,
    SelectorRequirement,
    Taint,
    Toleration,
    TopologyAssignment,
)
from ..workload import AdmittedWorkload

HOSTNAME = "kubernetes.io/hostname"

Requests = dict[ResourceName, int]
DomainId = tuple[str, ...]
# What of a pod set decides which nodes its pods may run on (``node_mismatch``).
EligibilityKey = tuple[
    tuple[Toleration, ...],
    tuple[tuple[str, str], ...],
    tuple[tuple[SelectorRequirement, ...], ...] | None,
]


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    # Node labels from the top level (largest domains) down.
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[ResourceName, int] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class BoundPod:
    """A pod bound to ``node`` whose requests use the node's capacity."""

    key: str
    node: str
    requests: Mapping[ResourceName, int] = field(default_factory=dict)


def add(into: dict[ResourceName, int], amounts: Mapping[ResourceName, int], k: int = 1) -> None:
    for r, v in amounts.items():
        into[r] = into.get(r, 0) + k * v


def count_in(per_pod: Mapping[ResourceName, int], capacity: Mapping[ResourceName, int]) -> int:
    """How many pods of ``per_pod`` fit in ``capacity`` (Kueue's Requests.CountIn)."""
    best: int | None = None
    for r, v in per_pod.items():
        if v <= 0:
            continue
        n = max(0, capacity.get(r, 0)) // v
        best = n if best is None else min(best, n)
    return best if best is not None else 1 << 31


class ClusterNodes:
    """Topologies, nodes and the bound pods counted against them, as last reported."""

    def __init__(self) -> None:
        self.topologies: dict[str, Topology] = {}
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, BoundPod] = {}
        self._node_usage: dict[str, Requests] = {}
        # Bumped by every change: a flavor search resumed across cycles and the per-cycle trees
        # are only valid while it stays the same.
        self.generation = 0

    def upsert_topology(self, topo: Topology) -> bool:
        if self.topologies.get(topo.name) == topo:
            return False
        self.topologies[topo.name] = topo
        self.generation += 1
        return True

    def delete_topology(self, name: str) -> bool:
        if self.topologies.pop(name, None) is None:
            return False
        self.generation += 1
        return True

    def upsert_node(self, node: Node) -> bool:
        if self.nodes.get(node.name) == node:
            return False
        self.nodes[node.name] = node
        self.generation += 1
        return True

    def delete_node(self, name: str) -> bool:
        if self.nodes.pop(name, None) is None:
            return False
        self.generation += 1
        return True

    def upsert_pod(self, pod: BoundPod) -> bool:
        old = self.pods.get(pod.key)
        if old == pod:
            return False
        if old is not None:
            add(self._node_usage.setdefault(old.node, {}), old.requests, -1)
        self.pods[pod.key] = pod
        add(self._node_usage.setdefault(pod.node, {}), pod.requests)
        add(self._node_usage[pod.node], {PODS: 1})
        if old is not None:
            add(self._node_usage[old.node], {PODS: 1}, -1)
        self.generation += 1
        return True

    def delete_pod(self, key: str) -> bool:
        old = self.pods.pop(key, None)
        if old is None:
            return False
        add(self._node_usage.setdefault(old.node, {}), old.requests, -1)
        add(self._node_usage[old.node], {PODS: 1}, -1)
        self.generation += 1
        return True

    def free(self, node: Node) -> Requests:
        """Allocatable minus the requests of the bound pods counted on the node."""
        out = dict(node.allocatable)
        add(out, self._node_usage.get(node.name, {}), -1)
        return out


# -- the tree of one flavor ------------------------------------------------------------------


class Domain:
    """A domain of one level; leaves (the lowest level) hold their nodes."""

    __slots__ = (
        "children",
        "id",
        "leader",
        "level",
        "nodes",
        "parent",
        "pod",
        "pod_wl",
        "slice",
        "slice_wl",
    )

    def __init__(self, id_: DomainId, parent: Domain | None) -> None:
        self.id = id_
        self.level = len(id_) - 1
        self.parent = parent
        self.children: list[Domain] = []
        self.nodes: list[Node] = []
        # Per-placement state (Kueue's domainState): pods (and slices) that fit, with and
        # without a leader placed in the domain, and leaders that fit.
        self.pod = 0
        self.pod_wl = 0
        self.leader = 0
        self.slice = 0
        self.slice_wl = 0

    @property
    def name(self) -> str:
        return self.id[-1]

    def reset(self) -> None:
        self.pod = self.pod_wl = self.leader = self.slice = self.slice_wl = 0


def requirement_matches(req: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    """A node-selector requirement: label-selector operators plus Gt and Lt on integers."""
    if req.operator not in ("Gt", "Lt"):
        return label_requirement_matches(req, labels)
    value = labels.get(req.key)
    if value is None or len(req.values) != 1:
        return False
    try:
        have, want = int(value), int(req.values[0])
    except ValueError:
        return False
    return have > want if req.operator == "Gt" else have < want


def tolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint none of ``tolerations`` tolerates, or None."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in tols):
            return taint
    return None


def tolerated_for_now(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """Of taints ``tolerations`` all tolerate (:func:`tolerated` is None), the first they
    tolerate only through ones with ``tolerationSeconds`` (Kueue's toleratedTemporarily: the
    pods are evicted once the seconds pass), or None."""
    return tolerated(taints, (t for t in tolerations if t.seconds is None))


def node_mismatch(node: Node, pod_set: PodSet, flavor: ResourceFlavor) -> str | None:
    """Why pods of ``pod_set`` admitted with ``flavor`` cannot run on ``node``, or None.

    What kube-scheduler would check that kqueue can know: readiness, cordoning, taints against
    the pod set's and the flavor's tolerations, the template's nodeSelector and required node
    affinity.
    """
    if not node.ready:
        return "not ready"
    if node.unschedulable:
        return "unschedulable"
    taint = tolerated(node.taints, (*pod_set.tolerations, *flavor.tolerations))
    if taint is not None:
        return f"untolerated taint {taint}"
    for key, value in pod_set.node_selector.items():
        if node.labels.get(key) != value:
            return "node selector mismatch"
    if pod_set.required_affinity is not None and not any(
        all(requirement_matches(r, node.labels) for r in term) for term in pod_set.required_affinity
    ):
        return "node affinity mismatch"
    return None


def eligibility_key(pod_set: PodSet) -> EligibilityKey:
    """The fields of ``pod_set`` that ``node_mismatch`` reads (the flavor is the tree's)."""
    return (
        tuple(pod_set.tolerations),
        tuple(sorted(pod_set.node_selector.items())),
        pod_set.required_affinity,
    )


class FlavorTopology:
    """The domains of one topology-aware flavor (Kueue's TASFlavorSnapshot, without state)."""

    def __init__(self, flavor: ResourceFlavor, topology: Topology, cluster: ClusterNodes) -> None:
        self.flavor = flavor
        self.topology = topology
        self.levels = topology.levels
        self.per_level: list[dict[DomainId, Domain]] = [{} for _ in self.levels]
        self.roots: list[Domain] = []
        self.free: dict[str, Requests] = {}
        for name in sorted(cluster.nodes):
            node = cluster.nodes[name]
            if any(node.labels.get(k) != v for k, v in flavor.node_labels.items()):
                continue
            values = tuple(node.labels.get(k) for k in self.levels)
            if any(v is None for v in values):
                continue  # a node without every level label is outside the topology (Kueue)
            self._leaf(tuple(v for v in values if v is not None)).nodes.append(node)
            self.free[name] = cluster.free(node)
        self.leaves = self.per_level[-1]
        self.lowest_is_node = self.levels[-1] == HOSTNAME
        self.by_host = (
            {d.id[-1]: d for d in self.leaves.values()} if self.lowest_is_node else {}
        )
        # Per eligibility of a pod set (see ``eligibility_key``), each leaf's free capacity on
        # the nodes those pods may run on. The tree is rebuilt whenever the cluster's generation
        # changes, so this holds for one (flavor, node generation): placement tries the same
        # pod template against every leaf many times a cycle and across cycles.
        self._leaf_free: dict[EligibilityKey, dict[DomainId, Requests]] = {}

    def leaf_free(self, pod_set: PodSet) -> Mapping[DomainId, Requests]:
        """Per leaf, the summed free capacity of its nodes ``pod_set``'s pods may run on
        (``node_mismatch`` is None). Leaves without such a node are left out. Read-only."""
        key = eligibility_key(pod_set)
        cached = self._leaf_free.get(key)
        if cached is None:
            cached = {}
            for leaf in self.leaves.values():
                cap: Requests | None = None
                for node in leaf.nodes:
                    if node_mismatch(node, pod_set, self.flavor) is None:
                        if cap is None:
                            cap = {}
                        add(cap, self.free[node.name])
                if cap is not None:
                    cached[leaf.id] = cap
            self._leaf_free[key] = cached
        return cached

    def _leaf(self, values: DomainId) -> Domain:
        parent: Domain | None = None
        for i in range(len(values)):
            key = values[: i + 1]
            dom = self.per_level[i].get(key)
            if dom is None:
                dom = Domain(key, parent)
                self.per_level[i][key] = dom
                if parent is None:
                    self.roots.append(dom)
                else:
                    parent.children.append(dom)
            parent = dom
        assert parent is not None
        return parent

    def assignment_levels(self) -> tuple[str, ...]:
        """Kueue assigns only the hostname when the Topology ends with it, else every level."""
        return (self.levels[-1],) if self.lowest_is_node else self.levels

    def leaf_of(self, values: tuple[str, ...], levels: tuple[str, ...]) -> Domain | None:
        if self.lowest_is_node and len(values) >= 1 and levels[-1] == HOSTNAME:
            return self.by_host.get(values[-1])
        if tuple(levels) == self.levels:
            return self.leaves.get(values)
        return None

    def level_index(self, key: str) -> int | None:
        try:
            return self.levels.index(key)
        except ValueError:
            return None

    def domains(self) -> Iterator[Domain]:
        for level in self.per_level:
            yield from level.values()


# -- what admitted assignments take --------------------------------------------------------


def per_pod_requests(pod_set: PodSet) -> Requests:
    """One pod's requests plus the pod itself (Kueue adds one ``pods`` to every TAS request).

    DRA devices (``pod_set.devices``, dra.py) take quota but no node capacity: drivers publish
    them in ResourceSlices, not in a node's allocatable, and kube-scheduler allocates them."""
    out = dict(pod_set.per_pod_node_requests)
    for r, n in pod_set.devices.items():
        left = out.get(r, 0) - n
        if left > 0:
            out[r] = left
        else:
            out.pop(r, None)
    out[PODS] = out.get(PODS, 0) + 1
    return out


class TopologyUsage:
    """Per flavor and leaf, what the topology assignments of workloads holding quota take."""

    def __init__(self, trees: Mapping[FlavorName, FlavorTopology]) -> None:
        self.trees = trees
        self.usage: dict[FlavorName, dict[DomainId, Requests]] = {}
        # Per host, the leaves of every hostname-ended flavor tree that hold it (built lazily).
        self._hosts: dict[str, list[tuple[FlavorName, DomainId]]] | None = None

    def sharing(self, flavor: FlavorName, leaf: Domain) -> list[tuple[FlavorName, DomainId]]:
        """The leaves, in every flavor, that ``leaf`` of ``flavor`` takes capacity from.

        Kueue's TASHandleOverlappingFlavors: when a Topology ends with the hostname level, a
        node may belong to several flavors (their node labels overlap), and what one flavor's
        assignment takes on it is gone for the others too. Without the hostname level a leaf
        (a rack) cannot say which of its nodes is used, so only its own flavor counts it.
        """
        tree = self.trees.get(flavor)
        if tree is None or not tree.lowest_is_node:
            return [(flavor, leaf.id)]
        if self._hosts is None:
            self._hosts = {}
            for name in sorted(self.trees):
                t = self.trees[name]
                if t.lowest_is_node:
                    for host, dom in t.by_host.items():
                        self._hosts.setdefault(host, []).append((name, dom.id))
        return self._hosts.get(leaf.id[-1], [(flavor, leaf.id)])

    def add_workload(self, wl: AdmittedWorkload, k: int = 1) -> None:
        pod_sets = {ps.name: ps for ps in wl.info.pod_sets}
        for psa in wl.admission.pod_sets:
            if psa.topology is None:
                continue
            ps = pod_sets.get(psa.name)
            if ps is None:
                continue
            for flavor in sorted(set(psa.flavors.values())):
                tree = self.trees.get(flavor)
                if tree is None:
                    continue
                self.add_assignment(flavor, psa.topology, per_pod_requests(ps), k)
                break

    def add_assignment(
        self,
        flavor: FlavorName,
        ta: TopologyAssignment,
        per_pod: Mapping[ResourceName, int],
        k: int = 1,
    ) -> None:
        tree = self.trees.get(flavor)
        if tree is None:
            return
        for values, n in ta.domains:
            leaf = tree.leaf_of(values, ta.levels)
            if leaf is None:
                continue  # the domain is gone (node deleted): nothing left to take from
            for f, leaf_id in self.sharing(flavor, leaf):
                add(self.usage.setdefault(f, {}).setdefault(leaf_id, {}), per_pod, k * n)

    def of(self, flavor: FlavorName, leaf: DomainId) -> Mapping[ResourceName, int]:
        return self.usage.get(flavor, {}).get(leaf, {})

    def copy(self) -> TopologyUsage:
        """An independent copy (a cycle's snapshot changes its own)."""
        out = TopologyUsage(self.trees)
        out._hosts = self._hosts
        out.usage = {
            f: {leaf: dict(amounts) for leaf, amounts in per_leaf.items()}
            for f, per_leaf in self.usage.items()
        }
        return out


class TopologySnapshot:
    """A cycle's view: the tree of every topology-aware flavor and the assignments' usage."""

    def __init__(
        self,
        trees: Mapping[FlavorName, FlavorTopology],
        workloads: Iterable[AdmittedWorkload],
        usage: TopologyUsage | None = None,
        provisioning_checks: frozenset[str] = frozenset(),
        multikueue_checks: frozenset[str] = frozenset(),
        without_topology: frozenset[FlavorName] = frozenset(),
    ) -> None:
        """``usage``, when given, is what ``workloads`` take on ``trees`` already summed (the
        cache keeps it up to date); the snapshot takes it as its own. ``provisioning_checks``:
        the AdmissionChecks that provision nodes, whose flavors are placed only after them;
        ``multikueue_checks``: the MultiKueue ones, whose ClusterQueues' pod sets the workers
        place (tas/delayed.py); ``without_topology``: topology-aware flavors whose Topology this
        cluster lacks, which only a MultiKueue ClusterQueue may use (its workers place them)."""
        self.trees = trees
        self.without_topology = without_topology
        self.provisioning_checks = provisioning_checks
        self.multikueue_checks = multikueue_checks
        if usage is not None:
            self.usage = usage
        else:
            self.usage = TopologyUsage(trees)
            for wl in workloads:
                self.usage.add_workload(wl)

    def add_workload(self, wl: AdmittedWorkload) -> None:
        self.usage.add_workload(wl)

    def remove_workload(self, wl: AdmittedWorkload) -> None:
        self.usage.add_workload(wl, -1)

    def is_tas(self, flavor: FlavorName) -> bool:
        return flavor in self.trees or flavor in self.without_topology


def build_trees(
    cluster: ClusterNodes, flavors: Mapping[FlavorName, ResourceFlavor]
) -> dict[FlavorName, FlavorTopology]:
    """The tree of every flavor whose Topology is known (the others are Misconfigured)."""
    out: dict[FlavorName, FlavorTopology] = {}
    for name in sorted(flavors):
        flavor = flavors[name]
        topo = cluster.topologies.get(flavor.topology_name) if flavor.topology_name else None
        if topo is not None:
            out[name] = FlavorTopology(flavor, topo, cluster)
    return out
