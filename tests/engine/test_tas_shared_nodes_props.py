"""Property: flavors over the same nodes (Kueue's TASHandleOverlappingFlavors) never place
more pods, or more cpu, on a node than it holds, whichever flavor each placement used."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqueue.engine.types import ResourceName

from .builders import make_cq, make_lq, t
from .tas_support import HOST, SINGLE, Cluster, node, pset, tas_flavor, wl

FLAVORS = [tas_flavor("flavor-a"), tas_flavor("flavor-b")]
CQS = [make_cq("cq-a").quota("flavor-a", cpu="1000").obj(),
       make_cq("cq-b").quota("flavor-b", cpu="1000").obj()]
LQS = [make_lq("lq-a", "cq-a"), make_lq("lq-b", "cq-b")]

nodes_st = st.lists(
    st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=1, max_size=4
)
workloads_st = st.lists(
    st.tuples(
        st.sampled_from(["lq-a", "lq-b"]),
        st.integers(1, 4),  # pods
        st.integers(1, 2),  # cpu per pod
        st.sampled_from(["required", "preferred", "unconstrained"]),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_st, workloads_st)
def test_shared_nodes_are_never_overfilled(
    shapes: list[tuple[int, int]], specs: list[tuple[str, int, int, str]]
) -> None:
    nodes = [node(f"n{i}", cpu=str(cpu), pods=pods) for i, (cpu, pods) in enumerate(shapes)]
    workloads = []
    for i, (lq, count, cpu, mode) in enumerate(specs):
        kind = {"required": {"required": HOST}, "preferred": {"preferred": HOST},
                "unconstrained": {"unconstrained": True}}[mode]
        workloads.append(wl(f"w{i}", pset("main", count, cpu=str(cpu), **kind),  # type: ignore[arg-type]
                            queue=lq, created=i))
    engine = Cluster(nodes, [SINGLE], FLAVORS, CQS, workloads, lqs=LQS).engine()
    pods_on: dict[str, int] = {}
    cpu_on: dict[str, int] = {}
    for cycle in range(len(specs) + 1):
        for a in engine.schedule(t(cycle + 1)).admitted:
            (ps,) = a.pod_sets
            assert ps.topology is not None
            per_pod = next(w for w in workloads if w.key == a.workload).pod_sets[0].requests
            for (host,), n in ps.topology.domains:
                pods_on[host] = pods_on.get(host, 0) + n
                cpu_on[host] = cpu_on.get(host, 0) + n * per_pod[ResourceName("cpu")]
    for n in nodes:
        assert pods_on.get(n.name, 0) <= n.allocatable[ResourceName("pods")], (n, pods_on)
        assert cpu_on.get(n.name, 0) <= n.allocatable[ResourceName("cpu")], (n, cpu_on)
