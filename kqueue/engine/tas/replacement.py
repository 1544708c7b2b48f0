"""Failed-node replacement: Kueue v0.19's TASFailedNodeReplacement, on by default there with
TASFailedNodeReplacementFailFast and TASReplaceNodeOnPodTermination.

When a node of an admitted workload's topology assignment (hostname level) has failed, its
pods are placed again on other nodes of the same domain of the pod set's required level (any
node for a preferred or unconstrained request, as Kueue's second scheduling pass), on what is
free there; the rest of the assignment stays. A pod set in slices has its broken slice
re-formed in the slice's domain, and whole lost slices placed again as slices (Kueue's
findReplacementAssignment, :func:`_replace_slices`). With no room, the workload is evicted with
Kueue's reason ``NodeFailures`` (FailFast). A second failed node evicts it too (Kueue's node
controller keeps one node to replace at a time).

When a node counts as failed (Kueue's node controller, ``pkg/controller/tas/node_controller.go``):
deleted, or its Ready condition missing: at once; NotReady: once none of the workload's pods
on it is still running (TASReplaceNodeOnPodTermination), the fixed 30 seconds being Kueue
v0.19's deprecated, off-by-default alternative.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import replace as dataclass_replace

from kqueue.engine.tas.placement import PlacementRequest, place
from kqueue.engine.tas.topology import (
    HOSTNAME,
    DomainId,
    FlavorTopology,
    TopologyUsage,
    add,
    count_in,
    node_mismatch,
    per_pod_requests,
)
from kqueue.engine.types import FlavorName, PodSet, TopologyAssignment
from kqueue.engine.workload import AdmittedWorkload

# Kueue's WorkloadEvictedDueToNodeFailures.
EVICTED_BY_NODE_FAILURES = "NodeFailures"
# More than any node holds: a leaf given this much assumed usage fits no pod.
_FULL = 10**30


def node_failed(*, exists: bool, ready: bool | None, pods_running_on_node: int) -> bool:
    """Whether a node under a workload counts as failed for its replacement.

    ``ready`` is the node's Ready condition (None: the condition is missing). Kueue's
    TASReplaceNodeOnPodTermination: a NotReady node is failed once the workload's pods on it
    are no longer running (terminated, failed or never started), so that a replacement pod
    never runs next to the one it replaces.
    """
    if not exists or ready is None:
        return True
    if ready:
        return False
    return pods_running_on_node == 0


def multiple_failures_message(nodes: list[str]) -> str:
    """Kueue's nodeMultipleFailuresEvictionMessageFormat."""
    return (
        "Workload eviction triggered due to multiple TAS assigned node failures, including: "
        + ", ".join(sorted(nodes))
    )


def no_replacement_message(nodes: list[str]) -> str:
    """Kueue's scheduler message when FailFast evicts."""
    return (
        "Workload was evicted as there was no replacement for unhealthy node(s): "
        + ", ".join(sorted(nodes))
    )


@dataclass(frozen=True, slots=True)
class Replaced:
    """The pod set's new assignment and, per new node, the pods moved there."""

    assignment: TopologyAssignment
    moved: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class NotReplaced:
    reason: str


def _required_domain(
    tree: FlavorTopology, pod_set: PodSet, kept: list[tuple[tuple[str, ...], int]]
) -> DomainId | None:
    """The domain the replacement must stay in: the required level's domain of the pods kept
    (Kueue's requiredReplacementDomain); None when nothing is required or nothing is kept."""
    req = pod_set.topology
    if req is None or req.required is None or not kept:
        return None
    idx = tree.level_index(req.required)
    leaf = tree.by_host.get(kept[0][0][-1])
    if idx is None or leaf is None:
        return None
    return leaf.id[: idx + 1]


def find_replacement(
    tree: FlavorTopology,
    usage: TopologyUsage,
    flavor: FlavorName,
    pod_set: PodSet,
    assignment: TopologyAssignment,
    lost: str,
) -> Replaced | NotReplaced:
    """Place the pods ``assignment`` had on node ``lost`` on other nodes of ``tree``.

    ``usage`` holds what admitted assignments take, this workload's included (its pods on the
    other nodes stay).
    """
    if not tree.lowest_is_node or assignment.levels[-1:] != (HOSTNAME,):
        return NotReplaced(f"pod set {pod_set.name} is not placed on nodes")
    missing = sum(n for values, n in assignment.domains if values[-1] == lost)
    kept = [(values, n) for values, n in assignment.domains if values[-1] != lost]
    if missing == 0:
        return Replaced(assignment, ())
    if pod_set.topology is not None and pod_set.topology.layers():
        return _replace_slices(tree, usage, pod_set, kept, missing, lost)
    within = _required_domain(tree, pod_set, kept)
    per_pod = per_pod_requests(pod_set)
    fits: list[tuple[int, str]] = []
    for leaf in tree.leaves.values():
        if leaf.id[-1] == lost or (within is not None and leaf.id[: len(within)] != within):
            continue
        for node in leaf.nodes:
            if node_mismatch(node, pod_set, tree.flavor) is not None:
                continue
            free = dict(tree.free[node.name])
            add(free, usage.of(flavor, leaf.id), -1)
            n = count_in(per_pod, free)
            if n > 0:
                fits.append((n, node.name))
    moved: list[tuple[str, int]] = []
    left = missing
    while left > 0 and fits:
        # Kueue's BestFit at the lowest level: the tightest node that takes every pod left,
        # else the roomiest one and go on.
        whole = [f for f in fits if f[0] >= left]
        pick = min(whole) if whole else min(fits, key=lambda f: (-f[0], f[1]))
        fits.remove(pick)
        take = min(pick[0], left)
        moved.append((pick[1], take))
        left -= take
    if left > 0:
        where = f" in {'/'.join(within)}" if within is not None else ""
        return NotReplaced(
            f"no node{where} has room for {missing} pod(s) of pod set {pod_set.name} "
            f"(room for {missing - left})"
        )
    counts: dict[str, int] = {values[-1]: n for values, n in kept}
    for name, n in moved:
        counts[name] = counts.get(name, 0) + n
    domains = tuple(((name,), counts[name]) for name in sorted(counts))
    return Replaced(TopologyAssignment(levels=(HOSTNAME,), domains=domains), tuple(moved))


def _incomplete_slice_domain(
    tree: FlavorTopology, kept: list[tuple[tuple[str, ...], int]], missing: int, level: str,
    size: int,
) -> DomainId | None:
    """The domain of ``level`` whose kept pods, with the ``missing`` ones, make whole slices of
    ``size`` again: where the broken slice was (Kueue's findIncompleteSliceDomain; first by
    name where Kueue takes any)."""
    idx = tree.level_index(level)
    if idx is None:
        return None
    counts: dict[DomainId, int] = {}
    for values, n in kept:
        leaf = tree.by_host.get(values[-1])
        if leaf is not None:
            counts[leaf.id[: idx + 1]] = counts.get(leaf.id[: idx + 1], 0) + n
    return next((d for d in sorted(counts) if (counts[d] + missing) % size == 0), None)


def _replace_slices(
    tree: FlavorTopology,
    usage: TopologyUsage,
    pod_set: PodSet,
    kept: list[tuple[tuple[str, ...], int]],
    missing: int,
    lost: str,
) -> Replaced | NotReplaced:
    """Re-form the slices the lost node broke (Kueue's findReplacementAssignment): when the
    missing pods are not whole outer slices, they complete the incomplete slice in its domain
    (the innermost broken layer's), placed in the innermost layer whose size divides their
    count, else pod by pod; whole slices go, as slices, anywhere in the pod set's required
    domain; with nothing kept, the pod set is placed anew. The placement is Kueue's, on what
    is free now; the lost node takes nothing."""
    req = pod_set.topology
    assert req is not None  # the caller checked its layers
    layers = req.layers()
    within: DomainId | None = None
    if kept and missing % layers[0][1] != 0:
        level, size = next((lv, sz) for lv, sz in reversed(layers) if missing % sz != 0)
        within = _incomplete_slice_domain(tree, kept, missing, level, size)
        whole = next(((lv, sz) for lv, sz in reversed(layers) if missing % sz == 0), None)
        req = dataclass_replace(
            req, slice_layers=(),
            pod_set_slice_required_topology=whole[0] if whole else None,
            pod_set_slice_size=whole[1] if whole else None,
        )
    elif kept:
        within = _required_domain(tree, pod_set, kept)
    per_pod = per_pod_requests(pod_set)
    # Leaves outside the domain, and the lost node, fit nothing.
    blocked = {
        leaf.id: dict.fromkeys(per_pod, _FULL)
        for leaf in tree.leaves.values()
        if leaf.id[-1] == lost or (within is not None and leaf.id[: len(within)] != within)
    }
    got = place(tree, usage, PlacementRequest(dataclass_replace(pod_set, topology=req), missing),
                assumed=blocked)
    ta = got.assignments.get(pod_set.name)
    if got.reason or ta is None:
        where = f" in {'/'.join(within)}" if within is not None else ""
        return NotReplaced(
            f"no room{where} for {missing} pod(s) of pod set {pod_set.name}: {got.reason}"
        )
    moved = tuple((values[-1], n) for values, n in ta.domains)
    counts: dict[str, int] = {values[-1]: n for values, n in kept}
    for name, n in moved:
        counts[name] = counts.get(name, 0) + n
    domains = tuple(((name,), counts[name]) for name in sorted(counts))
    return Replaced(TopologyAssignment(levels=(HOSTNAME,), domains=domains), moved)


def placed_on_nodes(
    trees: Mapping[FlavorName, FlavorTopology], wl: AdmittedWorkload, nodes: set[str]
) -> list[tuple[FlavorName, PodSet, TopologyAssignment]]:
    """The pod sets of ``wl`` with pods on one of ``nodes``: (TAS flavor, pod set, assignment)."""
    pod_sets = {ps.name: ps for ps in wl.info.pod_sets}
    out: list[tuple[FlavorName, PodSet, TopologyAssignment]] = []
    for psa in wl.admission.pod_sets:
        ps = pod_sets.get(psa.name)
        ta = psa.topology
        if ps is None or ta is None or not any(v[-1:] and v[-1] in nodes for v, _ in ta.domains):
            continue
        flavor = next((f for f in sorted(set(psa.flavors.values())) if f in trees), None)
        if flavor is not None:
            out.append((flavor, ps, ta))
    return out


def replace_all(
    trees: Mapping[FlavorName, FlavorTopology],
    usage: TopologyUsage,
    placed: list[tuple[FlavorName, PodSet, TopologyAssignment]],
    lost: list[str],
) -> dict[str, Replaced] | NotReplaced:
    """Per pod set (by name), its replacement for the one node in ``lost``; or why the
    workload is evicted (Kueue's messages: several failed nodes, or no room)."""
    if len(lost) > 1:
        return NotReplaced(multiple_failures_message(lost))
    out: dict[str, Replaced] = {}
    usage = usage.copy()  # a pod set's replacement takes room from the next one's
    for flavor, pod_set, ta in placed:
        tree = trees.get(flavor)
        if tree is None:
            return NotReplaced(f"{no_replacement_message(lost)}: flavor {flavor} has no topology")
        got = find_replacement(tree, usage, flavor, pod_set, ta, lost[0])
        if isinstance(got, NotReplaced):
            return NotReplaced(f"{no_replacement_message(lost)}: {got.reason}")
        moved = TopologyAssignment(
            levels=(HOSTNAME,), domains=tuple(((name,), n) for name, n in got.moved)
        )
        usage.add_assignment(flavor, moved, per_pod_requests(pod_set))
        out[pod_set.name] = got
    return out
