"""Topology-aware scheduling in the admission cycle (Kueue's tas_flavorassigner and the TAS
steps of its flavor assigner, preemptor and scheduler).

1. Flavors: a pod set that asks for a topology may only take topology-aware flavors whose
   Topology has the levels it names; a pod set that does not may not take a topology-aware
   flavor, unless every flavor of its ClusterQueue is topology-aware (then topology is implied:
   unconstrained). ``flavor_mismatch`` says why a flavor is skipped.
2. After quota: ``fit`` places the pod sets of topology-aware flavors (``placement.place``),
   taking admitted workloads' assignments into account. A placement that fails where quota
   fits turns the assignment into ``Preempt`` (victims may free a domain); it is ``NoFit`` if it
   fails even on empty nodes. ``placer`` gives the check the victim search runs after each
   simulated removal, so victims are chosen until the preemptor's domain is free.
3. In the cycle: ``place_now`` recomputes the placement just before admission (an earlier entry
   of the same cycle may have taken the domain) and ``reserve`` records what an entry placed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from ..assignment import Assignment, FlavorChoice, PodSetResult
from ..snapshot import ClusterQueueSnapshot
from ..types import (
    ClusterQueueSpec,
    FlavorName,
    Mode,
    PendingReason,
    PodSet,
    PodSetName,
    ResourceFlavor,
    ResourceName,
    TopologyAssignment,
)
from ..workload import WorkloadInfo
from .placement import (
    Placement,
    PlacementRequest,
    describe,
    fits_as_is,
    missing_level,
    place,
)
from .topology import (
    DomainId,
    FlavorTopology,
    Requests,
    TopologySnapshot,
    add,
    per_pod_requests,
)


def is_tas_only(cq: ClusterQueueSnapshot, topology: TopologySnapshot) -> bool:
    """Every flavor of the ClusterQueue is topology-aware (Kueue's IsTASOnly)."""
    names = cq.spec.flavor_names()
    return bool(names) and all(topology.is_tas(f) for f in names)


def requests_topology(pod_set: PodSet) -> bool:
    return pod_set.topology is not None


def flavor_mismatch(
    pod_set: PodSet,
    flavor: ResourceFlavor | None,
    name: FlavorName,
    cq: ClusterQueueSnapshot,
    topology: TopologySnapshot,
    covered: Collection[ResourceName] | None = None,
) -> str | None:
    """Why ``pod_set`` may not take ``flavor`` for topology reasons (Kueue's
    checkPodSetAndFlavorMatchForTAS), or None. ``covered``: the resources of the flavor's
    resource group."""
    if flavor is None:
        return None
    tas_flavor = flavor.topology_name is not None
    if requests_topology(pod_set):
        if not tas_flavor:
            if covered is not None and not any(
                r in covered for r in pod_set.per_pod_node_requests
            ):
                # Quota-only resources (a resource transformation's outputs): nothing the
                # pods place on nodes, so a plain flavor may hold them (Kueue's
                # hasOverlapWithPodRequestedResources).
                return None
            return f'Flavor "{name}" does not support TopologyAwareScheduling'
        tree = topology.trees.get(name)
        if tree is None and delegates_placement(cq.spec, topology.multikueue_checks):
            # A MultiKueue manager needs no Topology: the worker checks the level and places.
            return None
        if tree is None:
            return f'Flavor "{name}" information missing in TAS cache'
        level = missing_level(tree, pod_set.topology)
        if level is not None:
            return (
                f'Flavor "{name}" does not contain the requested level: Topology '
                f'"{tree.topology.name}" has no level "{level}" (levels: '
                f"{', '.join(tree.levels)}; set by the pod set's topologyRequest)"
            )
        return None
    if tas_flavor and not is_tas_only(cq, topology):
        return f'Flavor "{name}" supports only TopologyAwareScheduling'
    return None


@dataclass(frozen=True, slots=True)
class _Request:
    index: int
    flavor: FlavorName
    placement: PlacementRequest


@dataclass(frozen=True, slots=True)
class Outcome:
    """Placements per pod set, or the first pod set that did not fit and why."""

    assignments: Mapping[PodSetName, TopologyAssignment]
    failed: PodSetName | None = None
    reason: str = ""
    placement: Placement | None = None


def delegates_placement(spec: ClusterQueueSpec, multikueue: Collection[str]) -> bool:
    """Whether ``spec`` has a MultiKueue check: its topology-aware pod sets are placed by the
    worker that runs the workload, never here (Kueue's ``HasMultiKueueAdmissionCheck``; a
    manager has no nodes of its own). Kueue refuses such a check per flavor, so it applies to
    every flavor."""
    return bool(multikueue) and any(r.name in multikueue for r in spec.admission_checks)


def delays_placement(
    cq: ClusterQueueSnapshot, topology: TopologySnapshot, flavor: FlavorName
) -> bool:
    """Whether a pod set of ``cq`` assigned the topology-aware ``flavor`` is not placed at
    quota reservation (Kueue's ``podSetTopologyRequest``): a MultiKueue check
    (:func:`delegates_placement`), or a ProvisioningRequest check that applies to the flavor
    (Kueue's ``HasProvRequestAdmissionCheck``; the nodes it asks for do not exist yet)."""
    if delegates_placement(cq.spec, topology.multikueue_checks):
        return True
    provisioning = topology.provisioning_checks
    return bool(provisioning) and any(
        r.name in provisioning and (not r.on_flavors or flavor in r.on_flavors)
        for r in cq.spec.admission_checks
    )


def _candidates(
    info: WorkloadInfo, a: Assignment, cq: ClusterQueueSnapshot, topology: TopologySnapshot
) -> list[_Request]:
    """Every pod set of ``a`` that takes a topology-aware flavor and is placed by topology."""
    implied_ok = is_tas_only(cq, topology)
    out: list[_Request] = []
    for i, (ps, res) in enumerate(zip(info.pod_sets, a.pod_sets, strict=False)):
        if res.count == 0:
            continue
        flavors = sorted({c.flavor for c in res.flavors.values() if topology.is_tas(c.flavor)})
        if not flavors:
            continue
        implied = not requests_topology(ps) and implied_ok
        if not requests_topology(ps) and not implied:
            continue
        out.append(_Request(i, flavors[0], PlacementRequest(ps, res.count, implied)))
    return out


def _requests(
    info: WorkloadInfo, a: Assignment, cq: ClusterQueueSnapshot, topology: TopologySnapshot
) -> list[_Request]:
    """The pod sets placed at quota reservation: those whose placement is not delayed."""
    return [
        r for r in _candidates(info, a, cq, topology)
        if not delays_placement(cq, topology, r.flavor)
    ]


def delayed_pod_sets(
    info: WorkloadInfo,
    a: Assignment,
    cq: ClusterQueueSnapshot,
    topology: TopologySnapshot | None,
) -> frozenset[PodSetName]:
    """The pod sets of ``a`` that reserve quota now and are placed in the second pass
    (Kueue's ``delayedTopologyRequest: Pending``)."""
    if topology is None or not (topology.provisioning_checks or topology.multikueue_checks):
        return frozenset()
    return frozenset(
        r.placement.pod_set.name for r in _candidates(info, a, cq, topology)
        if delays_placement(cq, topology, r.flavor)
    )


def _groups(reqs: Sequence[_Request]) -> list[list[_Request]]:
    """Pod sets of one podSetGroupName and flavor go together (Kueue's grouping by name): a
    leader and its workers. A larger group has no leader; its pod sets are placed one by one."""
    groups: dict[tuple[str, FlavorName] | int, list[_Request]] = {}
    for r in reqs:
        name = r.placement.request.pod_set_group_name
        key: tuple[str, FlavorName] | int = (name, r.flavor) if name is not None else r.index
        groups.setdefault(key, []).append(r)
    out: list[list[_Request]] = []
    for group in groups.values():
        out.extend([group] if len(group) <= 2 else [[r] for r in group])
    return out


def _place_all(
    reqs: Sequence[_Request],
    topology: TopologySnapshot,
    *,
    simulate_empty: bool,
) -> Outcome:
    assumed: dict[FlavorName, dict[DomainId, Requests]] = {}
    out: dict[PodSetName, TopologyAssignment] = {}
    for group in _groups(reqs):
        workers, leader = group[0], None
        if len(group) == 2:
            # Kueue's findLeaderAndWorkers: the second is the leader unless it has more pods.
            workers, leader = group[0], group[1]
            if leader.placement.count > workers.placement.count:
                workers, leader = leader, workers
        tree = topology.trees[workers.flavor]
        result = place(
            tree,
            topology.usage,
            workers.placement,
            leader.placement if leader is not None else None,
            assumed=assumed.setdefault(workers.flavor, {}),
            simulate_empty=simulate_empty,
        )
        if result.reason:
            return Outcome(out, workers.placement.pod_set.name, result.reason, result)
        members = [workers] if leader is None else [workers, leader]
        for r in members:
            ta = result.assignments[r.placement.pod_set.name]
            out[r.placement.pod_set.name] = ta
            _take(topology, workers.flavor, tree, ta, per_pod_requests(r.placement.pod_set),
                  assumed)
    return Outcome(out)


def place_for_rebooking(
    requests: Sequence[tuple[int, FlavorName, PlacementRequest]], topology: TopologySnapshot
) -> Outcome:
    """Place pod sets (index in the admission, flavor, request) as an admission does, leaders
    with their workers; for re-booking an admitted workload (follow.py)."""
    return _place_all([_Request(*r) for r in requests], topology, simulate_empty=False)


def _with_mode(
    res: PodSetResult, mode: Mode, reason: str | None, placement: Placement | None = None
) -> PodSetResult:
    flavors = {r: FlavorChoice(c.flavor, min(c.mode, mode), c.borrow, c.tried_index)
               for r, c in res.flavors.items()}
    reasons = (*res.reasons, reason) if reason and reason not in res.reasons else res.reasons
    return replace(
        res, flavors=flavors, reasons=reasons, placement=placement or res.placement
    )


def fit(
    info: WorkloadInfo,
    a: Assignment,
    cq: ClusterQueueSnapshot,
    topology: TopologySnapshot | None,
) -> Assignment:
    """``a`` with the topology placement of its pod sets, or downgraded when they do not fit."""
    if topology is None or a.mode() == Mode.NO_FIT:
        return a
    reqs = _requests(info, a, cq, topology)
    if not reqs:
        return a
    pod_sets = list(a.pod_sets)
    if a.mode() == Mode.FIT:
        outcome = _place_all(reqs, topology, simulate_empty=False)
        if outcome.failed is None:
            for r in reqs:
                name = r.placement.pod_set.name
                pod_sets[r.index] = replace(pod_sets[r.index], topology=outcome.assignments[name])
            return replace(a, pod_sets=tuple(pod_sets))
        idx = next(r.index for r in reqs if r.placement.pod_set.name == outcome.failed)
        why = describe(outcome.placement) if outcome.placement is not None else outcome.reason
        pod_sets[idx] = _with_mode(pod_sets[idx], Mode.PREEMPT, why, outcome.placement)
    # Preempt: would the placement fit on empty nodes? Otherwise no preemption can help.
    empty = _place_all(reqs, topology, simulate_empty=True)
    if empty.failed is not None:
        idx = next(r.index for r in reqs if r.placement.pod_set.name == empty.failed)
        why = describe(empty.placement) if empty.placement is not None else empty.reason
        pod_sets[idx] = replace(
            _with_mode(pod_sets[idx], Mode.NO_FIT, why, empty.placement),
            no_fit_reason=PendingReason.TOPOLOGY_PLACEMENT_FAILED,
        )
        # Quota fits (the mode was not NoFit), so the topology is the only blocker.
        return replace(
            a, pod_sets=tuple(pod_sets), no_fit_reason=PendingReason.TOPOLOGY_PLACEMENT_FAILED
        )
    for r in reqs:
        # Fragmented capacity: victims may be needed even where quota is unused (Kueue's
        # updateModeForTASRequests).
        pod_sets[r.index] = _with_mode(pod_sets[r.index], Mode.PREEMPT, None)
    return replace(a, pod_sets=tuple(pod_sets))


def placer(
    info: WorkloadInfo,
    a: Assignment,
    cq: ClusterQueueSnapshot,
    topology: TopologySnapshot | None,
) -> Callable[[], bool] | None:
    """For the victim search: does the placement fit with the snapshot as it is now?"""
    if topology is None:
        return None
    reqs = _requests(info, a, cq, topology)
    if not reqs:
        return None
    return lambda: _place_all(reqs, topology, simulate_empty=False).failed is None


def place_now(
    info: WorkloadInfo,
    a: Assignment,
    cq: ClusterQueueSnapshot,
    topology: TopologySnapshot | None,
    *,
    simulate_empty: bool = False,
) -> tuple[Assignment, str | None]:
    """Recompute the placement on the snapshot as the cycle left it; the reason on failure."""
    if topology is None:
        return a, None
    reqs = _requests(info, a, cq, topology)
    if not reqs:
        return a, None
    if not simulate_empty and _unchanged(reqs, a, topology):
        # As Kueue: the placement chosen at nomination stands while it still fits; it is only
        # recomputed when an earlier head of the cycle took some of its room.
        return a, None
    outcome = _place_all(reqs, topology, simulate_empty=simulate_empty)
    if outcome.failed is not None:
        why = describe(outcome.placement) if outcome.placement is not None else outcome.reason
        return a, why
    pod_sets = list(a.pod_sets)
    for r in reqs:
        name = r.placement.pod_set.name
        pod_sets[r.index] = replace(pod_sets[r.index], topology=outcome.assignments[name])
    return replace(a, pod_sets=tuple(pod_sets)), None


def _unchanged(reqs: Sequence[_Request], a: Assignment, topology: TopologySnapshot) -> bool:
    assumed: dict[FlavorName, dict[DomainId, Requests]] = {}
    for r in reqs:
        ta = a.pod_sets[r.index].topology
        if ta is None:
            return False
        tree = topology.trees[r.flavor]
        if not fits_as_is(tree, topology.usage, r.placement, ta, assumed.get(r.flavor, {})):
            return False
        _take(topology, r.flavor, tree, ta, per_pod_requests(r.placement.pod_set), assumed)
    return True


def _take(
    topology: TopologySnapshot,
    flavor: FlavorName,
    tree: FlavorTopology,
    ta: TopologyAssignment,
    per_pod: Requests,
    assumed: dict[FlavorName, dict[DomainId, Requests]],
) -> None:
    """Count ``ta`` as taken by the workload being placed, on nodes shared with other flavors
    too (Kueue's assumed usage aggregated across a workload's flavors)."""
    for values, n in ta.domains:
        leaf = tree.leaf_of(values, ta.levels)
        if leaf is not None:
            for f, leaf_id in topology.usage.sharing(flavor, leaf):
                add(assumed.setdefault(f, {}).setdefault(leaf_id, {}), per_pod, n)


def reserve(info: WorkloadInfo, a: Assignment, topology: TopologySnapshot | None) -> None:
    """Count ``a``'s placements as taken for the rest of the cycle."""
    if topology is None:
        return
    for ps, res in zip(info.pod_sets, a.pod_sets, strict=False):
        if res.topology is None:
            continue
        flavors = sorted({c.flavor for c in res.flavors.values() if topology.is_tas(c.flavor)})
        if flavors:
            topology.usage.add_assignment(flavors[0], res.topology, per_pod_requests(ps))


def place_pod_sets(
    reqs: Sequence[tuple[int, FlavorName, PlacementRequest]], topology: TopologySnapshot
) -> tuple[dict[PodSetName, TopologyAssignment], str | None]:
    """Place ``reqs`` (pod set index, topology-aware flavor, request) on ``topology`` as it is:
    the placements per pod set, or the reason of the first that does not fit."""
    outcome = _place_all(
        [_Request(i, f, p) for i, f, p in reqs], topology, simulate_empty=False
    )
    if outcome.failed is None:
        return dict(outcome.assignments), None
    why = describe(outcome.placement) if outcome.placement is not None else outcome.reason
    return {}, f"couldn't assign flavors to pod set {outcome.failed}: {why}"
