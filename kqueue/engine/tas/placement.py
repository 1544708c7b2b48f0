"""Kueue's topology placement (TASFlavorSnapshot.findTopologyAssignment), on one flavor's tree.

1. Fill counts: per leaf, how many pods fit in what is free (node capacity minus bound pods,
   admitted assignments and what earlier pod sets of this workload took), how many with a leader
   placed there, and whether a leader fits; summed upwards, with slices of
   ``podSetSliceSize`` pods counted at the slice level.
2. Find the level: at the requested level, the domain that fits all slices, best fit (the
   fitting domain with the fewest free slices; domains sorted by free slices descending, then
   free pods ascending, then by their values). ``required`` fails when no domain fits;
   ``preferred`` tries the level above, and at the top spreads over as many domains as needed;
   ``unconstrained`` spreads at once, least free capacity first (Kueue's TASProfileMixed).
3. Descend level by level to the leaves, keeping the number of domains used small at each level.
4. Build the assignment: per leaf, its values at the assignment levels and its pod count.

A pod-set group (``podSetGroupName``: a leader pod set of one pod and its workers) is placed as
one: the leader's pod goes in one of the workers' domains.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..types import PodSet, PodSetName, ResourceName, TopologyAssignment, TopologyRequest
from .topology import (
    Domain,
    DomainId,
    FlavorTopology,
    Requests,
    TopologyUsage,
    add,
    count_in,
    per_pod_requests,
)

_MAX = 1 << 31
_EMPTY: Requests = {}
_EMPTY_USAGE: dict[DomainId, Requests] = {}


def _positive(per_pod: Mapping[ResourceName, int]) -> tuple[tuple[ResourceName, int], ...]:
    """The resources ``count_in`` divides by (a zero or negative request limits nothing)."""
    return tuple((r, v) for r, v in per_pod.items() if v > 0)


def _count(
    per_pod: tuple[tuple[ResourceName, int], ...],
    free: Mapping[ResourceName, int],
    used: Mapping[ResourceName, int],
    assumed: Mapping[ResourceName, int],
    leader: Mapping[ResourceName, int],
) -> int:
    """``count_in(per_pod, free - used - assumed - leader)`` without building the difference:
    this runs for every leaf on every placement attempt."""
    best = _MAX
    for r, v in per_pod:
        have = free.get(r, 0) - used.get(r, 0) - assumed.get(r, 0) - leader.get(r, 0)
        n = have // v if have > 0 else 0
        if n < best:
            best = n
    return best


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    """One pod set to place: ``count`` pods of ``pod_set`` (its template's constraints)."""

    pod_set: PodSet
    count: int
    # The pod set asks for nothing but its ClusterQueue's flavors are all topology-aware
    # (Kueue's implied TAS): unconstrained at the lowest level.
    implied: bool = False

    @property
    def request(self) -> TopologyRequest:
        return self.pod_set.topology or TopologyRequest()


@dataclass(frozen=True, slots=True)
class DomainFit:
    """How many pods (or slices) one domain of the requested level fits."""

    name: str
    fits: int


@dataclass(frozen=True, slots=True)
class Placement:
    assignments: Mapping[PodSetName, TopologyAssignment]
    # Empty when every pod set was placed.
    reason: str = ""
    # The domains of the requested level and what each fits (for messages and explain).
    level: str = ""
    considered: tuple[DomainFit, ...] = ()
    needed: int = 0
    unit: str = "pod"


def _level_key(tree: FlavorTopology, req: TopologyRequest, implied: bool) -> str | None:
    if req.required is not None:
        return req.required
    if req.preferred is not None:
        return req.preferred
    if req.pod_set_slice_required_topology is not None:
        return tree.levels[0]  # slices only: anywhere at the top
    if req.unconstrained or implied:
        return tree.levels[-1]
    return None


def missing_level(tree: FlavorTopology, req: TopologyRequest | None) -> str | None:
    """The first level ``req`` names that ``tree``'s Topology lacks (Kueue's HasLevel), or None."""
    if req is None:
        return None
    keys = (req.required, req.preferred, *(level for level, _ in req.layers()))
    for key in keys:
        if key is not None and tree.level_index(key) is None:
            return key
    return None


def _outermost(req: TopologyRequest) -> TopologyRequest:
    """Multi-layer slices: the outermost layer plays the single-layer fields' part."""
    if not req.slice_layers:
        return req
    (level, size), *_ = req.slice_layers
    return replace(req, pod_set_slice_required_topology=level, pod_set_slice_size=size)


def _inner_sizes(
    tree: FlavorTopology, req: TopologyRequest, size: int, slice_level: int
) -> tuple[dict[int, int], str]:
    """Kueue's buildSliceSizeAtLevel: per level below the outermost slice level, the size its
    domains' pods are grouped in (each inner layer's size, down to its level)."""
    out: dict[int, int] = {}
    prev_size, prev_level = size, slice_level
    for key, layer_size in req.slice_layers[1:]:
        level = tree.level_index(key)
        if level is None:
            return {}, f"no requested topology level for additional slice layer: {key}"
        if level <= prev_level:
            return {}, (
                f"additional slice layer topology {key} must be at a lower level than "
                f"{tree.levels[prev_level]}"
            )
        if prev_size % layer_size != 0:
            return {}, (
                f"additional slice layer size {layer_size} must evenly divide parent layer "
                f"size {prev_size}"
            )
        for lvl in range(prev_level + 1, level + 1):
            out[lvl] = layer_size
        prev_size, prev_level = layer_size, level
    return out, ""


def _slices_below(d: Domain, level: int, target: int, size: int) -> int:
    if level == target:
        return d.pod // size
    return sum(_slices_below(c, level + 1, target, size) for c in d.children)


def _multi_layer_not_fit(
    tree: FlavorTopology, level: int, count: int, layers: Sequence[tuple[str, int]]
) -> str:
    """Kueue's multiLayerNotFitMessage: per layer, how many of its slices the best domain of the
    requested level holds."""
    text = f'topology "{tree.topology.name}" doesn\'t allow to fit'
    domains = list(tree.per_level[level].values())
    if not domains:
        return text
    best = min(domains, key=lambda d: (-d.slice, d.id))
    for key, size in layers:
        target = tree.level_index(key)
        if target is None:
            continue
        text += (
            f"; {_slices_below(best, level, target, size)}/{count // size} slice(s) fit on "
            f"level {key}"
        )
    return text


class _Placer:
    def __init__(
        self,
        tree: FlavorTopology,
        usage: TopologyUsage | None,
        assumed: Mapping[DomainId, Requests],
        simulate_empty: bool,
    ) -> None:
        self.tree = tree
        self.usage = usage
        self.assumed = assumed
        self.simulate_empty = simulate_empty
        self.unconstrained = False
        self.required = False

    # -- phase 1 ---------------------------------------------------------------------------

    def _used(self) -> Mapping[DomainId, Requests]:
        if self.simulate_empty or self.usage is None:
            return _EMPTY_USAGE
        return self.usage.usage.get(self.tree.flavor.name, _EMPTY_USAGE)

    def _leaf_capacity(self, leaf: Domain, pod_set: PodSet) -> Requests:
        cap = dict(self.tree.leaf_free(pod_set).get(leaf.id, _EMPTY))
        add(cap, self._used().get(leaf.id, _EMPTY), -1)
        add(cap, self.assumed.get(leaf.id, _EMPTY), -1)
        return cap

    def fill(
        self, workers: PlacementRequest, leader: PlacementRequest | None, slice_size: int,
        slice_level: int, inner: Mapping[int, int] | None = None,
    ) -> None:
        # Every field of every domain is set below (leaves here, the others in _fill_up), so
        # no reset pass is needed.
        tree = self.tree
        per_pod = _positive(per_pod_requests(workers.pod_set))
        free = tree.leaf_free(workers.pod_set)
        used = self._used()
        assumed = self.assumed
        leader_pod: tuple[tuple[ResourceName, int], ...] = ()
        leader_free = free
        if leader is not None:
            leader_pod = tuple(per_pod_requests(leader.pod_set).items())
            if leader.pod_set != workers.pod_set:
                leader_free = tree.leaf_free(leader.pod_set)
        leader_map = dict(leader_pod)
        leader_positive = _positive(leader_map)
        leaf_slices = slice_level == len(tree.levels) - 1
        for lid, leaf in tree.leaves.items():
            base = free.get(lid, _EMPTY)
            u = used.get(lid, _EMPTY)
            a = assumed.get(lid, _EMPTY)
            # _count(per_pod, base, u, a, _EMPTY), inlined: it runs for every leaf.
            pods = _MAX
            for r, v in per_pod:
                have = base.get(r, 0) - u.get(r, 0) - a.get(r, 0)
                n = have // v if have > 0 else 0
                if n < pods:
                    pods = n
            pods_wl = pods
            has_leader = 0
            if leader is not None:
                lbase = leader_free.get(lid, _EMPTY) if leader_free is not free else base
                if _count(leader_positive, lbase, u, a, _EMPTY) > 0:
                    has_leader = 1
                    pods_wl = _count(per_pod, base, u, a, leader_map)
            leaf.pod = pods
            leaf.pod_wl = pods_wl
            leaf.leader = has_leader
            if leaf_slices:
                leaf.slice, leaf.slice_wl = pods // slice_size, pods_wl // slice_size
            else:
                leaf.slice = leaf.slice_wl = 0
        self._fill_up(slice_size, slice_level, leader is not None, inner or {})

    def _fill_up(
        self, size: int, slice_level: int, leader_required: bool, inner: Mapping[int, int]
    ) -> None:
        """Sum the leaves' counts upwards, a level at a time from the one above the leaves (no
        call per leaf: this runs on every placement attempt). Below an inner slice layer a
        child gives only whole inner slices (Kueue's multi-layer rounding)."""
        per_level = self.tree.per_level
        for level in range(len(per_level) - 2, -1, -1):
            at_slice_level = level == slice_level
            group = inner.get(level + 1, 1)
            for d in per_level[level].values():
                pods = slices = leader = 0
                contrib = False
                min_pod_diff = min_slice_diff = _MAX
                for c in d.children:
                    c_pod, c_pod_wl = c.pod, c.pod_wl
                    if group > 1:
                        c_pod, c_pod_wl = c_pod // group * group, c_pod_wl // group * group
                    pods += c_pod
                    slices += c.slice
                    if not leader_required or c.leader > 0:
                        contrib = True
                        if c_pod - c_pod_wl < min_pod_diff:
                            min_pod_diff = c_pod - c_pod_wl
                        if c.slice - c.slice_wl < min_slice_diff:
                            min_slice_diff = c.slice - c.slice_wl
                    if c.leader > leader:
                        leader = c.leader
                d.pod = pods
                d.pod_wl = pods - min_pod_diff if contrib else 0
                d.slice_wl = slices - min_slice_diff if contrib else 0
                d.leader = leader
                d.slice = slices
                if at_slice_level:
                    d.slice, d.slice_wl = d.pod // size, d.pod_wl // size

    # -- orderings (Kueue's sortedDomains, sortedDomainsWithLeader) --------------------------

    def _least_free(self) -> bool:
        return self.unconstrained

    def sorted(self, domains: Sequence[Domain]) -> list[Domain]:
        sign = 1 if self._least_free() else -1
        return sorted(domains, key=lambda d: (sign * d.slice, d.pod, d.id))

    def sorted_with_leader(self, domains: Sequence[Domain]) -> list[Domain]:
        sign = 1 if self._least_free() else -1
        return sorted(domains, key=lambda d: (-d.leader, sign * d.slice_wl, d.pod_wl, d.id))

    def _best_fit(
        self, domains: Sequence[Domain], needed: int, count: Callable[[Domain], int], leaders: int
    ) -> Domain:
        best, best_count = domains[0], _MAX
        found = False
        for d in domains:
            if d.leader < leaders:
                continue
            n = count(d)
            if needed <= n < best_count:
                best, best_count, found = d, n, True
        return best if found else domains[0]

    def best_fit_pods(self, domains: Sequence[Domain], needed: int, leaders: int) -> Domain:
        return self._best_fit(
            domains, needed, (lambda d: d.pod_wl) if leaders > 0 else (lambda d: d.pod), leaders
        )

    def best_fit_slices(self, domains: Sequence[Domain], needed: int, leaders: int) -> Domain:
        return self._best_fit(
            domains, needed, (lambda d: d.slice_wl) if leaders > 0 else (lambda d: d.slice),
            leaders,
        )

    # -- phase 2 ---------------------------------------------------------------------------

    def find_level(
        self, level: int, count: int, leaders: int, size: int
    ) -> tuple[int, list[Domain], tuple[int, int] | None]:
        """(level, fitting domains) or the (fitting, needed) numbers of the failure."""
        domains = list(self.tree.per_level[level].values())
        needed = count // size
        if not domains:
            return level, [], (0, needed)
        ordered = self.sorted_with_leader(domains)
        top = ordered[0]
        best_fit = not self._least_free()
        if best_fit and top.slice_wl >= needed and top.leader >= leaders:
            top = self.best_fit_slices(ordered, needed, leaders)
        if not best_fit:
            for d in ordered:
                cap = d.slice
                if leaders > 0:
                    if d.leader < leaders:
                        continue
                    cap = d.slice_wl
                if cap >= needed:
                    return level, [d], None
            if self.required:
                return level, [], (ordered[-1].pod, needed)
        if top.slice_wl < needed or top.leader < leaders:
            if self.required:
                return level, [], (top.slice, needed)
            if level > 0 and not self.unconstrained:
                return self.find_level(level - 1, count, leaders, size)
            chosen: list[Domain] = []
            remaining, remaining_leaders = needed, leaders
            ordered = self.prioritize_leader(ordered, count, leaders, size, True)
            i = 0
            while remaining_leaders > 0 and i < len(ordered) and ordered[i].leader > 0:
                d = ordered[i]
                if best_fit and d.slice_wl >= remaining:
                    d = self.best_fit_slices(ordered[i:], remaining, remaining_leaders)
                chosen.append(d)
                remaining_leaders -= d.leader
                remaining -= d.slice_wl
                i += 1
            if remaining_leaders > 0:
                return level, [], (leaders - remaining_leaders, needed)
            rest = self.sorted(ordered[i:])
            for j in range(len(rest)):
                if remaining <= 0:
                    break
                d = rest[j]
                if best_fit and d.slice >= remaining:
                    d = self.best_fit_slices(rest[j:], remaining, 0)
                chosen.append(d)
                remaining -= d.slice
            if remaining > 0:
                return level, [], (needed - remaining, needed)
            return level, chosen, None
        return level, [top], None

    def prioritize_leader(
        self, domains: list[Domain], count: int, leaders: int, size: int, slices: bool
    ) -> list[Domain]:
        if leaders == 0 or len(domains) < 2:
            return domains
        required = count // size if slices else count
        available = sum(d.slice if slices else d.pod for d in domains)
        for i, d in enumerate(domains):
            if d.leader < leaders:
                continue
            penalty = (d.slice - d.slice_wl) if slices else (d.pod - d.pod_wl)
            if available - penalty < required:
                continue
            if i == 0:
                return domains
            return [d, *domains[:i], *domains[i + 1 :]]
        return domains

    def to_minimum(
        self, domains: list[Domain], count: int, leaders: int, size: int, slices: bool
    ) -> list[Domain]:
        """Kueue's updateCountsToMinimumGeneric: take domains in order until ``count`` pods
        (``count // size`` slices) and ``leaders`` leaders are placed, best-fitting the last."""
        domains = self.prioritize_leader(domains, count, leaders, size, slices)
        out: list[Domain] = []
        remaining = count // size if slices else count
        remaining_leaders = leaders
        best_fit = not self._least_free()
        for i, d in enumerate(domains):
            if remaining_leaders > 0:
                with_leader = d.slice_wl if slices else d.pod_wl
                if best_fit and with_leader >= remaining and d.leader >= remaining_leaders:
                    d = (
                        self.best_fit_slices(domains[i:], remaining, remaining_leaders)
                        if slices
                        else self.best_fit_pods(domains[i:], remaining, remaining_leaders)
                    )
                    with_leader = d.slice_wl if slices else d.pod_wl
                factor = size if slices else 1
                if with_leader >= remaining and d.leader >= remaining_leaders:
                    if slices:
                        d.slice = remaining
                    d.leader = remaining_leaders
                    d.pod = remaining * factor
                    out.append(d)
                    return out
                with_leader = min(with_leader, remaining)
                d.leader = min(d.leader, remaining_leaders)
                if slices:
                    d.slice = with_leader
                d.pod = with_leader * factor
                remaining_leaders -= d.leader
                remaining -= with_leader
                out.append(d)
                continue
            if slices:
                if best_fit and d.slice >= remaining:
                    d = self.best_fit_slices(domains[i:], remaining, 0)
                d.leader = 0
                if d.slice >= remaining:
                    d.pod = remaining * size
                    d.slice = remaining
                    out.append(d)
                    return out
                d.pod = d.slice * size
                remaining -= d.slice
                out.append(d)
                continue
            if best_fit and d.pod >= remaining:
                d = self.best_fit_pods(domains[i:], remaining, 0)
            d.leader = 0
            if d.pod >= remaining:
                d.pod = remaining
                out.append(d)
                return out
            remaining -= d.pod
            out.append(d)
        return out

    def build(self, domains: Sequence[Domain], pods: Callable[[Domain], int]) -> TopologyAssignment:
        levels = self.tree.assignment_levels()
        start = len(self.tree.levels) - len(levels)
        entries = sorted((d.id[start:], pods(d)) for d in domains if pods(d) > 0)
        return TopologyAssignment(levels, tuple(entries))


def _not_fit(tree: FlavorTopology, fit: int, needed: int, size: int) -> str:
    unit = "pod" if size == 1 else "slice"
    if fit == 0:
        return f'topology "{tree.topology.name}" doesn\'t allow to fit any of {needed} {unit}(s)'
    return f'topology "{tree.topology.name}" allows to fit only {fit} out of {needed} {unit}(s)'


def place(
    tree: FlavorTopology,
    usage: TopologyUsage | None,
    workers: PlacementRequest,
    leader: PlacementRequest | None = None,
    *,
    assumed: Mapping[DomainId, Requests] | None = None,
    simulate_empty: bool = False,
) -> Placement:
    """Place ``workers`` (and their group's ``leader`` of one pod) in ``tree``."""
    layered = workers.request
    req = _outermost(layered)
    p = _Placer(tree, usage, assumed or {}, simulate_empty)
    size = req.pod_set_slice_size or 1 if req.pod_set_slice_required_topology else 1
    p.required = req.required is not None
    p.unconstrained = req.unconstrained or workers.implied or (
        req.required is None and req.preferred is None and req.pod_set_slice_required_topology
        is not None
    )
    key = _level_key(tree, req, workers.implied)
    if key is None:
        return Placement({}, "topology level not specified")
    level = tree.level_index(key)
    if level is None:
        return Placement({}, f"no requested topology level: {key}")
    slice_key = req.pod_set_slice_required_topology or tree.levels[-1]
    slice_level = tree.level_index(slice_key)
    if slice_level is None:
        return Placement({}, f"no requested topology level for slices: {slice_key}")
    if level > slice_level:
        return Placement(
            {}, f"podset slice topology {slice_key} is above the podset topology {key}"
        )
    inner, why = _inner_sizes(tree, layered, size, slice_level)
    if why:
        return Placement({}, why)
    count = workers.count
    leaders = 1 if leader is not None else 0
    p.fill(workers, leader, size, slice_level, inner)
    considered = tuple(
        DomainFit(d.name, d.slice if leaders == 0 else d.slice_wl)
        for d in sorted(tree.per_level[level].values(), key=lambda d: d.id)
    )
    unit = "pod" if size == 1 else "slice"
    fit_level, fit, failure = p.find_level(level, count, leaders, size)
    if failure is not None:
        reason = (
            _multi_layer_not_fit(tree, fit_level, count, layered.layers())
            if inner
            else _not_fit(tree, failure[0], failure[1], size)
        )
        return Placement({}, reason, key, considered, count // size, unit)
    # Phase 3: descend.
    fit = p.to_minimum(fit, count, leaders, size, True)
    cur = fit_level
    while cur < min(len(tree.levels) - 1, slice_level):
        lower = p.sorted([c for d in fit for c in d.children])
        fit = p.to_minimum(lower, count, leaders, size, True)
        cur += 1
    while cur < len(tree.levels) - 1:
        step = size if cur < slice_level else inner.get(cur + 1, 1)
        nxt: list[Domain] = []
        for d in fit:
            children = p.sorted(d.children)
            if step > 1 and cur >= slice_level:
                # An inner layer: the children's counts are in its slices (sorted before, as
                # Kueue does).
                for c in children:
                    c.slice, c.slice_wl = c.pod // step, c.pod_wl // step
            nxt.extend(p.to_minimum(children, d.pod, d.leader, step, step > 1))
        fit = nxt
        cur += 1
    # Phase 4: the assignments.
    out: dict[PodSetName, TopologyAssignment] = {}
    if leader is not None:
        out[leader.pod_set.name] = p.build([d for d in fit if d.leader > 0], lambda d: d.leader)
    out[workers.pod_set.name] = p.build(fit, lambda d: d.pod)
    return Placement(out, "", key, considered, count // size, unit)


def fits_as_is(
    tree: FlavorTopology,
    usage: TopologyUsage | None,
    request: PlacementRequest,
    ta: TopologyAssignment,
    assumed: Mapping[DomainId, Requests],
) -> bool:
    """Whether ``ta`` (chosen at nomination) still fits the snapshot as it is now: each of its
    lowest domains has room for the pods it places there."""
    p = _Placer(tree, usage, assumed, False)
    per_pod = per_pod_requests(request.pod_set)
    for values, n in ta.domains:
        leaf = tree.leaf_of(values, ta.levels)
        if leaf is None or count_in(per_pod, p._leaf_capacity(leaf, request.pod_set)) < n:
            return False
    return True


def describe(placement: Placement) -> str:
    """The numbers behind a failure: ``rack r1 fits 3 of 4 pods, r2 fits 2; no rack fits 4``."""
    if not placement.considered:
        return placement.reason
    best = sorted(placement.considered, key=lambda f: (-f.fits, f.name))[:8]
    parts = [f"{placement.level} {best[0].name} fits {best[0].fits} of {placement.needed} "
             f"{placement.unit}s"]
    parts.extend(f"{f.name} fits {f.fits}" for f in best[1:])
    more = len(placement.considered) - len(best)
    tail = f" (+{more} more)" if more > 0 else ""
    return (
        f"{placement.reason}: {', '.join(parts)}{tail}; no {placement.level} fits "
        f"{placement.needed}"
    )
