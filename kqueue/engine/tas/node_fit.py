"""The node-fit guard: do an admitted gang's pods fit on the nodes' free capacity right now?

Quota is not nodes: a 3-pod gang whose quota fits may find room for 2 pods, and kube-scheduler
binds those 2 and leaves the third pending, holding quota and nodes. Before kqueue releases a
workload's pods (removes the ``kqueue.io/admission`` gate), it asks :meth:`NodeFitGuard.check`;
a workload whose pods do not all fit keeps its quota but stays held, with the numbers.

It is the topology placement (``placement.place``) on an implicit Topology of one level,
``kubernetes.io/hostname``, as Kueue's TAS places an unconstrained pod set: every node that
carries the admitted flavors' node labels is a domain of its own, its free capacity its
allocatable less the bound pods the cluster reports (``ClusterNodes``), less what the topology
assignments of admitted workloads hold on it (:func:`host_usage`: TAS-placed pods are not among
the bound pods), less what is placed first on it here:

1. the pods kqueue released that kube-scheduler has not bound yet (:class:`ReleasedPods`, fed by
   the controller): each with its own node selector, affinity and tolerations, placed where
   they can go (those that fit nowhere take nothing);
2. then the workload's pod sets in order, each on the nodes its pods may run on
   (``node_mismatch``: readiness, cordoning, taints against the pod set's and the flavors'
   tolerations, node selector, required node affinity).

What it guarantees (tests/engine/test_node_fit_properties.py checks both):

* Sound: when it says the pods fit, its placement (``Verdict.nodes``) puts every pod on a node
  it may run on, within that node's free capacity, counting everything above.
* Complete for one pod set: the pods of a pod set are identical, so how many fit on a node does
  not depend on the other nodes, and the least-free-first spread fills every node to the brim;
  the pods fit iff the guard says so. With several pod sets it is a greedy (bin packing is
  NP-hard): pod sets in the workload's order, then largest pods first if that fails; it may hold
  a workload an exhaustive search could place.

A node whose ``kubernetes.io/hostname`` label is missing is a domain named after the node; two
nodes with the same hostname label would share one domain (never the case on a real cluster,
where the kubelet sets it to the node's name).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kqueue.api.quantity import format_quantity

from ..types import (
    PODS,
    FlavorName,
    PodSet,
    PodSetName,
    ResourceFlavor,
    ResourceName,
    Toleration,
)
from .placement import PlacementRequest, place
from .topology import (
    HOSTNAME,
    ClusterNodes,
    DomainId,
    FlavorTopology,
    Node,
    Requests,
    Topology,
    TopologyUsage,
    add,
    count_in,
    eligibility_key,
    node_mismatch,
    per_pod_requests,
)

# The implicit Topology every node is a domain of.
HOST_TOPOLOGY = Topology("node-fit", (HOSTNAME,))
# The flavor of released pods: their own spec already carries their flavors' labels.
_ANY = ResourceFlavor(FlavorName(""))
# How many nodes a message lists.
_SHOWN = 8
# A tree per flavor node labels and tolerations (what of a flavor the placement reads).
_FlavorKey = tuple[tuple[tuple[str, str], ...], tuple[Toleration, ...]]


@dataclass(frozen=True, slots=True)
class ReleasedPod:
    """A pod kqueue released that kube-scheduler has not bound yet: its requests and node
    constraints as a pod set of one (``count`` is ignored)."""

    key: str
    pod_set: PodSet


@dataclass(frozen=True, slots=True)
class Demand:
    """``count`` pods of ``pod_set`` to release, admitted with ``flavor`` (the node labels and
    tolerations of every flavor the pod set was assigned, merged)."""

    pod_set: PodSet
    count: int
    flavor: ResourceFlavor = _ANY


@dataclass(frozen=True, slots=True)
class Verdict:
    fits: bool
    # Pods to release, and how many of them fit (all of them when ``fits``).
    needed: int
    fit: int
    # Why not, with the numbers; empty when they fit.
    message: str = ""
    # Where they fit: per pod set, pods per node (a witness, not a binding).
    nodes: Mapping[PodSetName, Mapping[str, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Failure:
    """The first pod set that did not fit: pods placed before it, how many of it fit, what was
    taken before it, and per node how many of its pods fit."""

    demand: Demand
    placed: int
    fit: int
    taken: Mapping[DomainId, Requests]
    counts: Mapping[DomainId, int]


def merged_flavor(flavors: Iterable[ResourceFlavor]) -> ResourceFlavor:
    """One flavor with the node labels and tolerations of all of ``flavors`` (a pod set whose
    resources come from several flavors runs where all of their labels are)."""
    labels: dict[str, str] = {}
    tolerations: list[Toleration] = []
    names: list[str] = []
    for f in flavors:
        names.append(f.name)
        labels.update(f.node_labels)
        tolerations.extend(t for t in f.tolerations if t not in tolerations)
    return ResourceFlavor(
        FlavorName("+".join(names)), node_labels=labels, tolerations=tuple(tolerations)
    )


class _HostView(ClusterNodes):
    """``cluster``'s nodes, each with a hostname label (its name when it has none), so every node
    is a domain of the implicit level; free capacity is read from ``cluster``."""

    def __init__(self, cluster: ClusterNodes) -> None:
        super().__init__()
        self._base = cluster
        self.nodes = {
            name: node if HOSTNAME in node.labels
            else replace(node, labels={**node.labels, HOSTNAME: name})
            for name, node in cluster.nodes.items()
        }

    def free(self, node: Node) -> Requests:
        return self._base.free(self._base.nodes[node.name])


class ReleasedPods:
    """Released pods not bound yet, by key, as last reported."""

    def __init__(self) -> None:
        self.pods: dict[str, ReleasedPod] = {}
        # Bumped by every change: where they are placed is reused while it stays the same.
        self.generation = 0

    def upsert(self, pod: ReleasedPod) -> bool:
        if self.pods.get(pod.key) == pod:
            return False
        self.pods[pod.key] = pod
        self.generation += 1
        return True

    def delete(self, key: str) -> bool:
        if self.pods.pop(key, None) is None:
            return False
        self.generation += 1
        return True


class NodeFitGuard:
    """The guard's state: released pods, and the per-flavor trees of one node generation."""

    def __init__(self) -> None:
        self.released = ReleasedPods()
        self._generation = -1
        self._view: _HostView | None = None
        self._trees: dict[_FlavorKey, FlavorTopology] = {}
        # The nodes a pod template may not run on, by reason, per tree (for messages).
        self._excluded_cache: dict[tuple[int, object], str] = {}
        # Where the released pods go, for (node generation, released generation): every held
        # gang checked after one event starts from the same placement.
        self._released_key: tuple[int, int] | None = None
        self._released_taken: dict[DomainId, Requests] = {}
        self._released_placed = 0

    def _tree(self, cluster: ClusterNodes, flavor: ResourceFlavor) -> FlavorTopology:
        # Rebuilt when the cluster changes (a node, a bound pod); in between, the trees and their
        # per-pod-template free capacity serve every check.
        if cluster.generation != self._generation or self._view is None:
            self._generation = cluster.generation
            self._view = _HostView(cluster)
            self._trees = {}
            self._excluded_cache = {}
        key = (tuple(sorted(flavor.node_labels.items())), flavor.tolerations)
        tree = self._trees.get(key)
        if tree is None:
            tree = FlavorTopology(flavor, HOST_TOPOLOGY, self._view)
            self._trees[key] = tree
        return tree

    def check(
        self,
        cluster: ClusterNodes,
        demands: Sequence[Demand],
        assigned: Mapping[str, Requests] | None = None,
    ) -> Verdict:
        """Whether ``demands`` fit on ``cluster``'s free capacity after the released pods and
        ``assigned`` (per host, what topology assignments hold there: see :func:`host_usage`)."""
        needed = sum(d.count for d in demands)
        key = (cluster.generation, self.released.generation)
        if key != self._released_key:
            self._released_taken = {}
            self._released_placed = self._place_released(cluster, self._released_taken)
            self._released_key = key
        taken = self._released_taken
        if assigned:
            taken = _copy(taken)
            for host, amounts in assigned.items():
                add(taken.setdefault((host,), {}), amounts)
        others = self._released_placed
        first = self._place(cluster, demands, _copy(taken))
        if isinstance(first, dict):
            return Verdict(True, needed, needed, nodes=first)
        if len(demands) > 1:
            # First-fit decreasing: the largest pods first often packs where the order did not.
            ordered = sorted(demands, key=lambda d: _size(d.pod_set), reverse=True)
            second = self._place(cluster, ordered, _copy(taken))
            if isinstance(second, dict):
                return Verdict(True, needed, needed, nodes=second)
        message = self._describe(cluster, first, others, len(demands) > 1)
        return Verdict(False, needed, first.placed + first.fit, message)

    def _place_released(self, cluster: ClusterNodes, taken: dict[DomainId, Requests]) -> int:
        # Identical pods (same requests and constraints) are placed together, as one pod set.
        groups: dict[tuple[object, ...], tuple[PodSet, int]] = {}
        for key in sorted(self.released.pods):
            ps = self.released.pods[key].pod_set
            group = (eligibility_key(ps), tuple(sorted(ps.per_pod_node_requests.items())))
            template, n = groups.get(group, (_template(ps, "released"), 0))
            groups[group] = (template, n + 1)
        tree = self._tree(cluster, _ANY)
        return sum(_placed(tree, template, n, taken) for template, n in groups.values())

    def _place(
        self, cluster: ClusterNodes, demands: Sequence[Demand], taken: dict[DomainId, Requests]
    ) -> dict[PodSetName, dict[str, int]] | _Failure:
        """Pods per node of each pod set, or where the first that did not fit failed."""
        out: dict[PodSetName, dict[str, int]] = {}
        placed = 0
        for d in demands:
            if d.count <= 0:
                continue
            tree = self._tree(cluster, d.flavor)
            ps = _template(d.pod_set, d.pod_set.name)
            # On one level the pods fit iff the nodes' counts add up to them: checked first, as
            # a held gang is checked again on every node and pod event.
            counts = _leaf_counts(tree, ps, taken)
            room = sum(counts.values())
            result = (
                place(tree, None, PlacementRequest(ps, d.count, True), assumed=taken)
                if room >= d.count
                else None
            )
            if result is None or result.reason:
                # ``taken`` is as it was before this pod set: place() only reads it.
                return _Failure(d, placed, min(d.count, room), taken, counts)
            ta = result.assignments[ps.name]
            per_pod = per_pod_requests(ps)
            nodes: dict[str, int] = {}
            for values, n in ta.domains:
                leaf = tree.leaf_of(values, ta.levels)
                if leaf is None:
                    continue
                add(taken.setdefault(leaf.id, {}), per_pod, n)
                nodes[leaf.nodes[0].name] = n
            out[d.pod_set.name] = nodes
            placed += d.count
        return out

    def _describe(self, cluster: ClusterNodes, failure: _Failure, others: int, named: bool) -> str:
        """``3 pods need 1 cpu each; free: kwok-1 1, kwok-2 1; 2 of 3 fit``."""
        d, fit, free_before = failure.demand, failure.fit, failure.taken
        tree = self._tree(cluster, d.flavor)
        shown = _short(tree, d, free_before)
        # Every node's count, but only the shown ones formatted (a held gang's message is
        # written again on every event that wakes it).
        counts = [(-n, tree.leaves[lid].nodes[0].name, lid) for lid, n in failure.counts.items()]
        rows: list[tuple[int, str, str]] = []
        for neg, name, lid in heapq.nsmallest(_SHOWN, counts):
            left = dict(tree.leaf_free(d.pod_set)[lid])
            add(left, free_before.get(lid, {}), -1)
            amounts = [format_quantity(max(0, left.get(r, 0)), r) for r in shown]
            text = amounts[0] if len(shown) == 1 else "(" + ", ".join(
                f"{r} {a}" for r, a in zip(shown, amounts, strict=True)
            ) + ")"
            rows.append((-neg, name, text))
        need = ", ".join(
            "1 pod slot" if r == PODS else f"{format_quantity(d.pod_set.per_pod_node_requests[r], r)} {r}"
            for r in shown
        )
        prefix = f"pod set {d.pod_set.name}: " if named else ""
        listed = ", ".join(f"{name} {text}" for _, name, text in rows)
        if len(counts) > _SHOWN:
            listed += f" (+{len(counts) - _SHOWN} more)"
        parts = [
            f"{prefix}{d.count} pods need {need} each",
            f"free: {listed or 'no node'}",
            f"{fit} of {d.count} fit",
        ]
        key = (id(tree), eligibility_key(d.pod_set))
        excluded = self._excluded_cache.get(key)
        if excluded is None:
            excluded = self._excluded(cluster, tree, d)
            self._excluded_cache[key] = excluded
        if excluded:
            parts.append(excluded)
        if others:
            parts.append(
                f"counting {others} pods of other workloads released but not bound yet"
            )
        return "; ".join(parts)

    @staticmethod
    def _excluded(cluster: ClusterNodes, tree: FlavorTopology, d: Demand) -> str:
        """The nodes the pods may not run on, by reason (``2 nodes not eligible: ...``)."""
        in_tree = {n.name for leaf in tree.leaves.values() for n in leaf.nodes}
        reasons: dict[str, int] = {}
        # Nodes without the flavors' labels are not the flavors' nodes: not listed.
        for name, node in cluster.nodes.items():
            why = node_mismatch(node, d.pod_set, d.flavor) if name in in_tree else None
            if why is not None:
                if why.startswith("untolerated taint"):
                    why = "untolerated taint"
                reasons[why] = reasons.get(why, 0) + 1
        if not reasons:
            return ""
        total = sum(reasons.values())
        detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
        return f"{total} nodes not eligible ({detail})"


def _short(
    tree: FlavorTopology, d: Demand, taken: Mapping[DomainId, Requests]
) -> list[ResourceName]:
    """The resources the message shows: those the pods' nodes do not have enough of for all of
    them (each taken alone), or every resource requested when each alone would do (the pods
    are short of a combination), pod slots last."""
    per_pod = per_pod_requests(d.pod_set)
    requested = sorted(r for r, v in per_pod.items() if v > 0 and r != PODS)
    if per_pod.get(PODS, 0) > 0:
        requested.append(PODS)
    totals = dict.fromkeys(requested, 0)
    for lid, cap in tree.leaf_free(d.pod_set).items():
        used = taken.get(lid, {})
        for r in requested:
            have = cap.get(r, 0) - used.get(r, 0)
            totals[r] += have // per_pod[r] if have > 0 else 0
    short = [r for r in requested if totals[r] < d.count]
    return short or [r for r in requested if r != PODS] or [PODS]


def host_usage(usage: TopologyUsage) -> dict[str, Requests]:
    """Per host, what the topology assignments of workloads holding quota take there: the pods
    TAS placed (label ``kqueue.io/tas``) are not among the cluster's bound pods, so without
    this a non-TAS gang would be counted into room they hold. Only Topologies ending with the
    hostname level name hosts; with overlapping flavors every flavor holding a host already
    counts all of its usage (``TopologyUsage.sharing``), so the largest is taken, not the sum.
    A Topology whose lowest level is above the host (a rack) cannot say which node is used:
    not counted here."""
    out: dict[str, Requests] = {}
    for flavor, per_leaf in usage.usage.items():
        tree = usage.trees.get(flavor)
        if tree is None or not tree.lowest_is_node:
            continue
        for leaf_id, amounts in per_leaf.items():
            have = out.setdefault(leaf_id[-1], {})
            for r, v in amounts.items():
                if v > have.get(r, 0):
                    have[r] = v
    return {h: a for h, a in out.items() if any(a.values())}


def _copy(taken: Mapping[DomainId, Requests]) -> dict[DomainId, Requests]:
    return {k: dict(v) for k, v in taken.items()}


def _template(pod_set: PodSet, name: str) -> PodSet:
    """``pod_set`` for the implicit level: its own topology request is TAS's business."""
    return replace(pod_set, name=PodSetName(name), count=1, topology=None)


def _size(pod_set: PodSet) -> tuple[int, ...]:
    return tuple(v for _, v in sorted(pod_set.per_pod_node_requests.items()))


def _leaf_counts(
    tree: FlavorTopology, pod_set: PodSet, taken: Mapping[DomainId, Requests]
) -> dict[DomainId, int]:
    """Per node ``pod_set``'s pods may run on, how many fit there after ``taken``."""
    per_pod = per_pod_requests(pod_set)
    out: dict[DomainId, int] = {}
    for lid, cap in tree.leaf_free(pod_set).items():
        used = taken.get(lid)
        if used:
            left = dict(cap)
            add(left, used, -1)
            out[lid] = count_in(per_pod, left)
        else:
            out[lid] = count_in(per_pod, cap)
    return out


def _placed(
    tree: FlavorTopology, pod_set: PodSet, count: int, taken: dict[DomainId, Requests]
) -> int:
    """Place up to ``count`` pods of ``pod_set`` (as many as fit), adding them to ``taken``."""
    n = min(count, sum(_leaf_counts(tree, pod_set, taken).values()))
    if n <= 0:
        return 0
    result = place(tree, None, PlacementRequest(pod_set, n, True), assumed=taken)
    if result.reason:
        return 0
    ta = result.assignments[pod_set.name]
    per_pod = per_pod_requests(pod_set)
    for values, k in ta.domains:
        leaf = tree.leaf_of(values, ta.levels)
        if leaf is not None:
            add(taken.setdefault(leaf.id, {}), per_pod, k)
    return n
