"""Placement reads each leaf's free capacity from a per-tree cache keyed by what decides node
eligibility, counts pods without building per-leaf capacity dicts and sums counts upwards a
level at a time; the cache keeps the topology usage of admitted workloads across cycles. These
properties check that it places exactly as the direct computation does: every leaf's capacity
recomputed from ``node_mismatch`` and node free capacity minus usage and what earlier pod sets
took, counts summed by recursion from the roots, usage summed afresh from the workloads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqueue.engine.cache import _nonzero
from kqueue.engine.tas import placement as placement_mod
from kqueue.engine.tas.placement import PlacementRequest, _Placer, fits_as_is, place
from kqueue.engine.tas.topology import (
    ClusterNodes,
    Domain,
    DomainId,
    FlavorTopology,
    Requests,
    TopologySnapshot,
    TopologyUsage,
    add,
    count_in,
    node_mismatch,
    per_pod_requests,
)
from kqueue.engine.types import (
    PODS,
    PodSet,
    ResourceName,
    SelectorRequirement,
    Taint,
    Toleration,
    TopologyAssignment,
)

from .builders import make_cq, t
from .tas_support import BLOCK, HOST, RACK, THREE, Cluster, node, pod, pset, tas_flavor, wl

_MAX = 1 << 31
CPU = ResourceName("cpu")
FLAVOR = tas_flavor(topo=THREE.name, tolerations=())
LEVELS = (BLOCK, RACK, HOST)
TAINT = Taint("gpu", "true", "NoSchedule")
TOLERATE = Toleration("gpu", "Equal", "true", "NoSchedule")


# -- the direct computation (what placement did before the cache) ----------------------------


def _direct_capacity(p: _Placer, leaf: Domain, pod_set: PodSet) -> Requests:
    cap: Requests = {}
    for n in leaf.nodes:
        if node_mismatch(n, pod_set, p.tree.flavor) is None:
            add(cap, p.tree.free[n.name])
    if not p.simulate_empty and p.usage is not None:
        add(cap, p.usage.of(p.tree.flavor.name, leaf.id), -1)
    add(cap, p.assumed.get(leaf.id, {}), -1)
    return cap


def _direct_fill(
    self: _Placer,
    workers: PlacementRequest,
    leader: PlacementRequest | None,
    slice_size: int,
    slice_level: int,
    inner: object = None,  # slice layers: the drawn requests have none
) -> None:
    for d in self.tree.domains():
        d.reset()
    per_pod = per_pod_requests(workers.pod_set)
    leader_pod = per_pod_requests(leader.pod_set) if leader is not None else None
    for leaf in self.tree.leaves.values():
        cap = _direct_capacity(self, leaf, workers.pod_set)
        leaf.pod = count_in(per_pod, cap)
        if leader_pod is not None and leader is not None:
            lcap = _direct_capacity(self, leaf, leader.pod_set)
            if count_in(leader_pod, lcap) > 0:
                leaf.leader = 1
                add(cap, leader_pod, -1)
        leaf.pod_wl = count_in(per_pod, cap)
    for root in self.tree.roots:
        _direct_fill_up(root, slice_size, slice_level, leader is not None)


def _direct_fill_up(d: Domain, size: int, slice_level: int, leader_required: bool) -> None:
    if not d.children:
        if d.level == slice_level:
            d.slice, d.slice_wl = d.pod // size, d.pod_wl // size
        return
    pods = slices = leader = 0
    contrib = False
    min_pod_diff = min_slice_diff = _MAX
    for c in d.children:
        _direct_fill_up(c, size, slice_level, leader_required)
        pods += c.pod
        slices += c.slice
        if not leader_required or c.leader > 0:
            contrib = True
            min_pod_diff = min(min_pod_diff, c.pod - c.pod_wl)
            min_slice_diff = min(min_slice_diff, c.slice - c.slice_wl)
        leader = max(leader, c.leader)
    d.pod = pods
    d.pod_wl = pods - min_pod_diff if contrib else 0
    d.slice_wl = slices - min_slice_diff if contrib else 0
    d.leader = leader
    d.slice = slices
    if d.level == slice_level:
        d.slice, d.slice_wl = d.pod // size, d.pod_wl // size


# -- random clusters ---------------------------------------------------------------------------


@st.composite
def _cluster(draw: st.DrawFn) -> ClusterNodes:
    cluster = ClusterNodes()
    cluster.upsert_topology(THREE)
    count = draw(st.integers(1, 12))
    for i in range(count):
        name = f"n{i}"
        cluster.upsert_node(
            node(
                name,
                cpu=draw(st.sampled_from(["0", "1", "2", "3", "4"])),
                pods=draw(st.integers(0, 6)),
                labels={
                    BLOCK: f"b{i // 6}",
                    RACK: f"r{i // 3}",
                    "zone": draw(st.sampled_from(["a", "b"])),
                    "gen": draw(st.sampled_from(["1", "2", "3"])),
                },
                taints=(TAINT,) if draw(st.booleans()) else (),
                ready=draw(st.integers(0, 9)) > 0,
                unschedulable=draw(st.integers(0, 9)) == 0,
                tas=draw(st.integers(0, 9)) > 0,
            )
        )
    for j, i in enumerate(draw(st.lists(st.integers(0, count - 1), max_size=6))):
        cluster.upsert_pod(pod(f"ns/p{j}", f"n{i}", cpu=draw(st.sampled_from(["500m", "1"]))))
    return cluster


@st.composite
def _pod_set(draw: st.DrawFn, name: str, count: int | None = None) -> PodSet:
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained", "slices"]))
    level = draw(st.sampled_from(LEVELS))
    kw: dict[str, object] = {}
    if mode == "unconstrained":
        kw["unconstrained"] = True
    elif mode == "slices":
        kw["required"] = draw(st.sampled_from((BLOCK, RACK)))
        kw["slice_level"] = draw(st.sampled_from((RACK, HOST)))
        kw["slice_size"] = draw(st.integers(1, 3))
    else:
        kw[mode] = level
    if draw(st.booleans()):
        kw["selector"] = {"zone": draw(st.sampled_from(["a", "b"]))}
    if draw(st.booleans()):
        kw["affinity"] = [SelectorRequirement("gen", draw(st.sampled_from(["Gt", "Lt", "In"])),
                                              (draw(st.sampled_from(["1", "2"])),))]
    if draw(st.booleans()):
        kw["tolerations"] = (TOLERATE,)
    return pset(
        name,
        count if count is not None else draw(st.integers(1, 8)),
        cpu=draw(st.sampled_from(["0", "500m", "1", "2"])),
        **kw,  # type: ignore[arg-type]
    )


def _random_usage(
    draw: Callable[[st.SearchStrategy[Any]], Any], tree: FlavorTopology
) -> tuple[TopologyUsage, dict[DomainId, Requests]]:
    usage = TopologyUsage({FLAVOR.name: tree})
    assumed: dict[DomainId, Requests] = {}
    leaves = sorted(tree.leaves)
    if not leaves:
        return usage, assumed
    for _ in range(draw(st.integers(0, 4))):
        leaf = draw(st.sampled_from(leaves))
        ta = TopologyAssignment(LEVELS, ((leaf, draw(st.integers(1, 2))),))
        usage.add_assignment(FLAVOR.name, ta, {CPU: 500, PODS: 1})
    for _ in range(draw(st.integers(0, 3))):
        add(assumed.setdefault(draw(st.sampled_from(leaves)), {}), {CPU: 1000, PODS: 1})
    return usage, assumed


def _place_both(
    tree: FlavorTopology,
    usage: TopologyUsage,
    workers: PlacementRequest,
    leader: PlacementRequest | None,
    assumed: Mapping[DomainId, Requests],
    simulate_empty: bool,
) -> None:
    kw = {"assumed": assumed, "simulate_empty": simulate_empty}
    with mock.patch.object(placement_mod._Placer, "fill", _direct_fill):
        want = place(tree, usage, workers, leader, **kw)  # type: ignore[arg-type]
    got = place(tree, usage, workers, leader, **kw)  # type: ignore[arg-type]
    assert got == want
    # The first cached call filled the cache for this eligibility (unless an earlier pod set
    # did); again on the warm cache.
    assert place(tree, usage, workers, leader, **kw) == want  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_cached_capacity_places_as_the_direct_computation(data: st.DataObject) -> None:
    cluster = data.draw(_cluster())
    tree = FlavorTopology(FLAVOR, THREE, cluster)
    usage, assumed = _random_usage(data.draw, tree)
    workers = data.draw(_pod_set("workers"))
    leader = None
    if data.draw(st.booleans()):
        leader = data.draw(_pod_set("leader", 1))
    simulate_empty = data.draw(st.booleans())
    # Several pod sets on one tree: the cache holds one entry per eligibility.
    for _ in range(2):
        _place_both(
            tree,
            usage,
            PlacementRequest(workers, workers.count),
            None if leader is None else PlacementRequest(leader, 1),
            assumed,
            simulate_empty,
        )
        workers = data.draw(_pod_set("workers"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_cached_leaf_free_is_the_sum_over_eligible_nodes(data: st.DataObject) -> None:
    cluster = data.draw(_cluster())
    tree = FlavorTopology(FLAVOR, THREE, cluster)
    usage, assumed = _random_usage(data.draw, tree)
    ps = data.draw(_pod_set("main"))
    p = _Placer(tree, usage, assumed, False)
    for leaf in tree.leaves.values():
        want = {r: v for r, v in _direct_capacity(p, leaf, ps).items() if v}
        got = {r: v for r, v in p._leaf_capacity(leaf, ps).items() if v}
        assert got == want, leaf.id
    # fits_as_is agrees with the direct count on every leaf.
    per_pod = per_pod_requests(ps)
    for lid, leaf in tree.leaves.items():
        n = count_in(per_pod, _direct_capacity(p, leaf, ps))
        for k in (n, n + 1):
            if k <= 0:
                continue
            ta = TopologyAssignment(LEVELS, ((lid, k),))
            want_fit = k <= n
            got_fit = fits_as_is(tree, usage, PlacementRequest(ps, k), ta, assumed)
            assert got_fit == want_fit, (lid, k)


def test_leaf_free_is_cached_per_eligibility() -> None:
    cluster = ClusterNodes()
    cluster.upsert_topology(THREE)
    labels = {BLOCK: "b1", RACK: "r1"}
    cluster.upsert_node(node("plain", cpu="2", labels=labels))
    cluster.upsert_node(node("tainted", cpu="4", labels=labels, taints=(TAINT,)))
    tree = FlavorTopology(FLAVOR, THREE, cluster)
    plain = pset("main", 1, required=RACK, cpu="1")
    tolerant = pset("main", 1, required=RACK, cpu="1", tolerations=(TOLERATE,))
    assert tree.leaf_free(plain)[("b1", "r1", "plain")][CPU] == 2000
    assert ("b1", "r1", "tainted") not in tree.leaf_free(plain)
    assert tree.leaf_free(tolerant)[("b1", "r1", "tainted")][CPU] == 4000
    # Same eligibility, same cached mapping; another count or request does not matter.
    assert tree.leaf_free(pset("other", 3, required=HOST, cpu="2")) is tree.leaf_free(plain)


# -- the topology usage the cache keeps across cycles ---------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_kept_topology_usage_matches_a_fresh_sum(data: st.DataObject) -> None:
    """Admissions, finished workloads, evictions and node changes: the per-leaf usage the cache
    keeps up to date is what summing every workload holding quota gives, and each cycle's
    snapshot starts from it."""
    nodes = [
        node(f"n{i}", cpu="2", pods=4, labels={BLOCK: f"b{i // 4}", RACK: f"r{i // 2}"})
        for i in range(8)
    ]
    workloads = [
        wl(f"w{k}", pset("main", data.draw(st.integers(1, 4)), cpu="1",
                         **{data.draw(st.sampled_from(["required", "preferred"])):
                            data.draw(st.sampled_from(LEVELS))}),  # type: ignore[arg-type]
           priority=data.draw(st.integers(0, 2)), created=k)
        for k in range(data.draw(st.integers(1, 8)))
    ]
    c = Cluster(nodes, [THREE], [FLAVOR],
                [make_cq("tas-main").quota("tas-default", cpu="100").preemption(
                    within="LowerPriority").obj()],
                workloads)
    engine = c.engine()
    for cycle in range(1, 12):
        result = engine.schedule(t(cycle))
        for p in result.preempted:
            engine.evicted(p.victim, now=t(cycle))
        engine.cache.check_consistency()
        held = sorted(engine.cache.workloads)
        op = data.draw(st.sampled_from(["finish", "node", "none"]))
        if op == "finish" and held:
            engine.finish(data.draw(st.sampled_from(held)))
        elif op == "node":
            i = data.draw(st.integers(0, 7))
            engine.upsert_node(node(f"n{i}", cpu=data.draw(st.sampled_from(["2", "3"])), pods=4,
                                    labels={BLOCK: f"b{i // 4}", RACK: f"r{i // 2}"}))
        engine.cache.check_consistency()
        snap = engine.cache.snapshot()
        assert snap.topology is not None
        fresh = TopologySnapshot(snap.topology.trees, engine.cache.workloads.values())
        assert _nonzero(snap.topology.usage) == _nonzero(fresh.usage)
