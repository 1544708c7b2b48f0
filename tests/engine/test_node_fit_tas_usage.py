"""The node-fit guard counts what topology assignments hold on shared nodes.

Pods TAS placed (label ``kqueue.io/tas``) are not among the cluster's bound pods: they count
through their workload's topology assignment. A non-TAS flavor whose nodes are also a TAS
flavor's must not see that room as free: the guard subtracts, per host, what admitted
assignments hold there (``host_usage``, kqueue/engine/tas/node_fit.py). Named cases, then a
property against an exhaustive search (the same reference as test_node_fit_properties.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.engine.engine import Engine
from kqueue.engine.tas.topology import Node
from kqueue.engine.types import (
    FlavorName,
    PodSetName,
    ResourceFlavor,
    ResourceName,
    Workload,
    WorkloadKey,
)

from .builders import make_cq, make_lq
from .node_fit_support import CQ, FLAVOR, admitted, check
from .tas_support import HOST, SINGLE, Held, node, pset, tas_flavor, wl

CPU = ResourceName("cpu")


def _engine(nodes: Sequence[Node]) -> Engine:
    """Flavor ``default`` (every node) and ``tas-default`` (the same nodes, a Topology) in one
    ClusterQueue ``cq``."""
    engine = Engine(node_fit_guard=True)
    engine.upsert_flavor(ResourceFlavor(FlavorName(FLAVOR)))
    engine.upsert_flavor(tas_flavor(topo=SINGLE.name))
    engine.upsert_topology(SINGLE)
    engine.upsert_cluster_queue(
        make_cq(CQ).quota(FLAVOR, cpu="1000").quota("tas-default", cpu="1000").obj()
    )
    engine.upsert_local_queue(make_lq("lq", CQ))
    for n in nodes:
        engine.upsert_node(n)
    return engine


def _tas_holding(name: str, per_host: dict[str, int], cpu: str = "1") -> Workload:
    count = sum(per_host.values())
    return wl(
        name, pset("main", count, required=HOST if len(per_host) == 1 else None,
                   unconstrained=len(per_host) != 1, cpu=cpu),
        queue="lq", held_in=CQ,
        held=[Held("main", "tas-default", [((h,), n) for h, n in sorted(per_host.items())])],
    )


CASES = [
    # (name, TAS pods held per host (1 cpu each), non-TAS gang of 1-cpu pods, pods that fit)
    ("no TAS usage: both 1-cpu nodes take the gang", {}, 2, 2),
    ("a TAS pod holds kwok-1: 1 of 2 fit", {"kwok-1": 1}, 2, 1),
    ("TAS pods hold both nodes: none fits", {"kwok-1": 1, "kwok-2": 1}, 2, 0),
]


@pytest.mark.parametrize(
    ("held", "gang", "fit"), [pytest.param(*case[1:], id=case[0]) for case in CASES]
)
def test_non_tas_gang_does_not_count_room_tas_assignments_hold(
    held: dict[str, int], gang: int, fit: int
) -> None:
    engine = _engine([node("kwok-1"), node("kwok-2")])
    if held:
        engine.upsert_workload(_tas_holding("tas", held))
    w = admitted("gang", pset("main", gang, cpu="1"))
    engine.upsert_workload(w)
    verdict = check(engine, w)
    assert verdict is not None
    assert (verdict.fits, verdict.fit) == (fit == gang, fit)
    if not verdict.fits:
        assert f"{fit} of {gang} fit" in verdict.message


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], dict[str, int], int, int]:
    """Nodes of 0-3 cpu; TAS pods of 1 cpu held within each node's capacity; a gang."""
    nodes = [node(f"n{i}", cpu=str(draw(st.integers(0, 3)))) for i in range(draw(st.integers(1, 4)))]
    held = {
        n.name: k
        for n in nodes
        if (k := draw(st.integers(0, n.allocatable[CPU] // 1000))) > 0
    }
    return nodes, held, draw(st.integers(2, 5)), draw(st.sampled_from([500, 1000, 2000]))


@settings(max_examples=300, deadline=None)
@given(case=clusters())
def test_guard_fits_exactly_when_the_gang_fits_beside_tas_pods(
    case: tuple[list[Node], dict[str, int], int, int],
) -> None:
    """Sound and complete for one pod set: fits iff every pod finds a node with room after the
    TAS pods the assignments hold there (never a release into room TAS holds, never a hold
    of a gang that fits)."""
    nodes, held, gang, millis = case
    engine = _engine(nodes)
    if held:
        engine.upsert_workload(_tas_holding("tas", held))
    w = admitted("gang", pset("main", gang, cpu=f"{millis}m"))
    engine.upsert_workload(w)
    verdict = check(engine, w)
    assert verdict is not None
    room = sum(
        max(0, n.allocatable[CPU] - 1000 * held.get(n.name, 0)) // millis for n in nodes
    )
    slots = sum(min(n.allocatable[ResourceName("pods")] - held.get(n.name, 0),
                    max(0, n.allocatable[CPU] - 1000 * held.get(n.name, 0)) // millis)
                for n in nodes)
    assert verdict.fits is (min(room, slots) >= gang), (nodes, held, gang, millis, verdict)
    if verdict.fits:
        for name, k in verdict.nodes[PodSetName("main")].items():
            free = next(n for n in nodes if n.name == name).allocatable[CPU]
            assert k * millis <= free - 1000 * held.get(name, 0)


def test_a_gang_held_by_tas_pods_is_checked_again_when_they_leave() -> None:
    """The held gang's generation moves when the TAS workload gives its assignment back (its
    pods were never among the bound pods, so no node or pod event would say so), and it fits."""
    engine = _engine([node("kwok-1"), node("kwok-2")])
    engine.upsert_workload(_tas_holding("tas", {"kwok-1": 1, "kwok-2": 1}))
    w = admitted("gang", pset("main", 2, cpu="1"))
    engine.upsert_workload(w)
    held = check(engine, w)
    assert held is not None and not held.fits
    seen = engine.node_fit_generation()
    engine.delete_workload(WorkloadKey("default/tas"))
    assert engine.node_fit_generation() != seen
    verdict = check(engine, w)
    assert verdict is not None and verdict.fits
