"""Topology placement beyond Kueue's scheduler cases: slices, pod-set groups, preferred levels
spreading upwards, the numbers in pending messages, misconfiguration, and two properties over
random clusters (no node over its allocatable; a required pod set within one domain)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqueue.engine.tas.topology import per_pod_requests
from kqueue.engine.types import PendingReason

from .builders import key, make_cq, t
from .tas_support import (
    BLOCK,
    HOST,
    RACK,
    THREE,
    Cluster,
    node,
    placements,
    pod,
    pset,
    run,
    tas_flavor,
    wl,
)

TAS3 = tas_flavor(topo="tas-three-level")


def _grid(cpu: str = "1", blocks: int = 2, racks: int = 2, hosts: int = 4) -> list:
    """blocks x racks x hosts nodes named b<i>-r<j>-n<k>."""
    return [
        node(f"b{b}-r{r}-n{n}", cpu=cpu, labels={BLOCK: f"b{b}", RACK: f"b{b}-r{r}"})
        for b in range(1, blocks + 1)
        for r in range(1, racks + 1)
        for n in range(1, hosts + 1)
    ]


def _cluster(*workloads, nodes=None, pods=(), cpu_quota: str = "100") -> Cluster:
    return Cluster(
        nodes if nodes is not None else _grid(),
        [THREE],
        [TAS3],
        [make_cq("tas-main").quota("tas-default", cpu=cpu_quota).preemption(
            within="LowerPriority").obj()],
        list(workloads),
        list(pods),
    )


def _rack_of(host: str) -> str:
    return host.rsplit("-", 1)[0]


def test_required_rack_keeps_all_pods_in_one_rack_and_the_next_job_takes_the_other() -> None:
    c = _cluster(
        wl("a", pset("main", 4, required=RACK, cpu="1"), created=1),
        wl("b", pset("main", 4, required=RACK, cpu="1"), created=2),
        nodes=_grid(blocks=1),
    )
    engine = c.engine()
    first = placements(engine.schedule(t(1)))
    second = placements(engine.schedule(t(2)))
    racks_a = {_rack_of(v[0]) for v, _ in first["a"]["main"]}
    racks_b = {_rack_of(v[0]) for v, _ in second["b"]["main"]}
    assert len(racks_a) == 1 and len(racks_b) == 1 and racks_a != racks_b


def test_required_rack_pending_message_gives_the_numbers() -> None:
    busy = [pod(f"ns/p{i}", "b1-r1-n1", cpu="1") for i in range(1)] + [
        pod("ns/q1", "b1-r2-n1", cpu="1"), pod("ns/q2", "b1-r2-n2", cpu="1")
    ]
    r = run(_cluster(wl("a", pset("main", 4, required=RACK, cpu="1")),
                     nodes=_grid(blocks=1), pods=busy))
    (p,) = r.pending
    assert p.reason == PendingReason.TOPOLOGY_PLACEMENT_FAILED
    assert "allows to fit only 3 out of 4 pod(s)" in p.message
    assert f"{RACK} b1-r1 fits 3 of 4 pods, b1-r2 fits 2; no {RACK} fits 4" in p.message


def test_preferred_block_too_big_for_one_block_spreads() -> None:
    r = run(_cluster(wl("a", pset("main", 12, preferred=BLOCK, cpu="1"))))
    (placed,) = placements(r).values()
    blocks = {v[0].split("-")[0] for v, _ in placed["main"]}
    assert blocks == {"b1", "b2"}
    assert sum(n for _, n in placed["main"]) == 12


def test_preferred_rack_uses_the_lowest_level_that_fits() -> None:
    r = run(_cluster(wl("a", pset("main", 3, preferred=RACK, cpu="1"))))
    (placed,) = placements(r).values()
    assert len({_rack_of(v[0]) for v, _ in placed["main"]}) == 1


def test_slices_each_within_one_rack() -> None:
    """8 pods in slices of 2 per host, required block: every host holds a multiple of 2."""
    nodes = _grid(cpu="3")
    r = run(_cluster(wl("a", pset("main", 8, required=BLOCK, slice_level=HOST, slice_size=2,
                                  cpu="1")), nodes=nodes))
    (placed,) = placements(r).values()
    assert all(n % 2 == 0 for _, n in placed["main"])
    assert len({v[0].split("-")[0] for v, _ in placed["main"]}) == 1


def test_slices_that_cannot_be_formed_do_not_fit() -> None:
    """Hosts of one cpu cannot hold a slice of two pods: nothing fits."""
    r = run(_cluster(wl("a", pset("main", 4, required=BLOCK, slice_level=HOST, slice_size=2,
                                  cpu="1"))))
    (p,) = r.pending
    assert "doesn't allow to fit any of 2 slice(s)" in p.message


def test_pod_set_group_places_the_leader_with_its_workers() -> None:
    r = run(_cluster(wl("lws", pset("leader", 1, required=RACK, group="g", cpu="1"),
                        pset("workers", 3, required=RACK, group="g", cpu="1"))))
    (placed,) = placements(r).values()
    racks = {_rack_of(v[0]) for ps in placed.values() for v, _ in ps}
    assert len(racks) == 1
    assert sum(n for _, n in placed["leader"]) == 1 and sum(n for _, n in placed["workers"]) == 3


def test_topology_name_naming_no_topology_is_misconfigured() -> None:
    c = _cluster(wl("a", pset("main", 1, required=RACK, cpu="1")))
    c.topologies = []
    engine = c.engine()
    assert not engine.schedule(t(1)).admitted
    why = engine.explain(key("a"))
    assert why is not None and why.reason == PendingReason.MISCONFIGURED
    assert "references missing Topology tas-three-level (spec.topologyName)" in why.message


def test_cordoned_and_not_ready_nodes_are_not_used() -> None:
    nodes = [node("a", cpu="1", unschedulable=True, labels={BLOCK: "b", RACK: "r"}),
             node("b", cpu="1", ready=False, labels={BLOCK: "b", RACK: "r"}),
             node("c", cpu="1", labels={BLOCK: "b", RACK: "r"})]
    r = run(_cluster(wl("w", pset("main", 1, required=RACK, cpu="1")), nodes=nodes))
    assert placements(r) == {"w": {"main": [(("c",), 1)]}}


def test_node_selector_limits_the_nodes() -> None:
    nodes = _grid(blocks=1, racks=2, hosts=1)
    r = run(_cluster(wl("w", pset("main", 1, required=RACK, cpu="1",
                                  selector={RACK: "b1-r2"})), nodes=nodes))
    assert placements(r) == {"w": {"main": [(("b1-r2-n1",), 1)]}}


# -- properties -------------------------------------------------------------------------------

LEVELS = (BLOCK, RACK, HOST)


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[list, list, list]:
    cpus = draw(st.lists(st.sampled_from(["1", "2", "3"]), min_size=8, max_size=8))
    nodes = [
        node(f"b{i // 4}-r{i // 2}-n{i}", cpu=cpus[i], pods=draw(st.integers(2, 6)),
             labels={BLOCK: f"b{i // 4}", RACK: f"b{i // 4}-r{i // 2}"})
        for i in range(8)
    ]
    pods = [
        pod(f"ns/p{j}", f"b{i // 4}-r{i // 2}-n{i}", cpu="1")
        for j, i in enumerate(draw(st.lists(st.integers(0, 7), max_size=4, unique=True)))
    ]
    workloads = []
    for k in range(draw(st.integers(1, 8))):
        mode = draw(st.sampled_from(["required", "preferred", "unconstrained"]))
        level = draw(st.sampled_from(LEVELS))
        count = draw(st.integers(1, 6))
        kw = {mode: level} if mode != "unconstrained" else {"unconstrained": True}
        workloads.append(
            wl(f"w{k}", pset("main", count, cpu=draw(st.sampled_from(["1", "2"])), **kw),
               priority=draw(st.integers(0, 3)), created=k)
        )
    return nodes, pods, workloads


def _check_invariants(c: Cluster, engine) -> None:
    labels = {n.name: n.labels for n in c.nodes}
    alloc = {n.name: dict(n.allocatable) for n in c.nodes}
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for p in c.pods:
        for r, v in p.requests.items():
            used[p.node][r] += v
        used[p.node]["pods"] += 1
    for aw in engine.cache.workloads.values():
        pod_sets = {ps.name: ps for ps in aw.info.pod_sets}
        for psa in aw.admission.pod_sets:
            ta = psa.topology
            assert ta is not None
            ps = pod_sets[psa.name]
            for values, n in ta.domains:
                for r, v in per_pod_requests(ps).items():
                    used[values[-1]][r] += v * n
            if ps.topology is not None and ps.topology.required is not None:
                level = ps.topology.required
                domains = {labels[values[-1]][level] for values, _ in ta.domains}
                assert len(domains) <= 1, f"{aw.key} spans {domains} of {level}"
            assert ta.pod_count() == psa.count
    for name, res in used.items():
        for r, v in res.items():
            assert v <= alloc[name].get(r, 0), f"node {name} over {r}: {v} > {alloc[name]}"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_properties_capacity_and_required_domain(scenario: tuple[list, list, list]) -> None:
    nodes, pods, workloads = scenario
    c = _cluster(*workloads, nodes=nodes, pods=pods)
    engine = c.engine()
    for cycle in range(1, 30):
        result = engine.schedule(t(cycle))
        _check_invariants(c, engine)
        # Includes the topology usage the cache keeps up to date across cycles.
        engine.cache.check_consistency()
        for p in result.preempted:
            engine.evicted(p.victim, now=t(cycle))
        if not result.admitted and not result.preempted and not any(
            r.active for r in result.requeued
        ):
            break


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_property_victim_search_leaves_the_snapshot_as_it_found_it(
    scenario: tuple[list, list, list],
) -> None:
    """The preemptor removes and puts back candidates, domains included: after nominating every
    pending head (placements, victim searches) the snapshot's usage, per ClusterQueue and per
    topology domain, is what it was."""
    from kqueue.engine.nominate import nominate

    nodes, pods, workloads = scenario
    # Half of the workloads hold their placement from a first cycle, the rest pend.
    c = _cluster(*workloads[: len(workloads) // 2 + 1], nodes=nodes, pods=pods)
    engine = c.engine()
    engine.schedule(t(1))
    for w in workloads[len(workloads) // 2 + 1 :]:
        engine.upsert_workload(w)
    snapshot = engine.cache.snapshot()
    before = snapshot.state()
    heads = engine.queues.heads(set(engine.queues.queues))
    nominate(heads, snapshot, engine.preemptor, lambda _: {})
    assert snapshot.state() == before
