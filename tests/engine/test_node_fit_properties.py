"""Properties of the node-fit guard (kqueue/engine/tas/node_fit.py) against an exhaustive search.

"Would fit" means: there is an assignment of every pod to a node it may run on (Ready, not
cordoned, its zone selector matched, the node's NoSchedule taint tolerated) such that on every
node the pods' cpu plus the bound pods' stays within allocatable, and so does the pod count. The
reference below searches every assignment (tiny instances: at most 4 nodes, 7 pods).

* No release beyond capacity: gangs arrive one by one; each the guard lets through becomes
  released (not bound) pods; all pods released at any point can be placed together.
* Sound: when the guard says a workload fits, its witness placement is such an assignment.
* Complete for one pod set without released-but-unbound pods: the guard says fit exactly when
  the reference finds an assignment (the pods are identical, so the least-free-first spread
  fills every node to what it can hold). With several pod sets, or released pods placed first,
  the guard is greedy (bin packing is NP-hard) and only soundness is claimed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.engine.tas.node_fit import ReleasedPod
from kqueue.engine.tas.topology import BoundPod, Node
from kqueue.engine.types import PodSet, PodSetName, ResourceName, Taint, Toleration

from .node_fit_support import admitted, check, engine_with

CPU = ResourceName("cpu")
PODS = ResourceName("pods")
TAINT = Taint("dedicated", "x", "NoSchedule")
TOLERATION = Toleration("dedicated", "Equal", "x", "NoSchedule")


@dataclass(frozen=True)
class Shape:
    """A pod: cpu (millis), zone selector (or None), whether it tolerates the taint."""

    cpu: int
    zone: str | None
    tolerates: bool

    def pod_set(self, name: str, count: int) -> PodSet:
        return PodSet(
            PodSetName(name), count, {CPU: self.cpu},
            node_selector={"zone": self.zone} if self.zone else {},
            tolerations=(TOLERATION,) if self.tolerates else (),
        )


def may_run(shape: Shape, node: Node) -> bool:
    if not node.ready or node.unschedulable:
        return False
    if shape.zone is not None and node.labels.get("zone") != shape.zone:
        return False
    return not (node.taints and not shape.tolerates)


def assignable(nodes: Sequence[Node], used: Mapping[str, tuple[int, int]], pods: Sequence[Shape]) -> bool:
    """Exhaustive search: can ``pods`` all be placed, given what ``used`` (cpu, pod count) takes?"""
    free = {
        n.name: [n.allocatable.get(CPU, 0) - used.get(n.name, (0, 0))[0],
                 n.allocatable.get(PODS, 0) - used.get(n.name, (0, 0))[1]]
        for n in nodes
    }
    order = sorted(pods, key=lambda s: -s.cpu)

    def go(i: int) -> bool:
        if i == len(order):
            return True
        s = order[i]
        for n in nodes:
            f = free[n.name]
            if may_run(s, n) and f[0] >= s.cpu and f[1] >= 1:
                f[0] -= s.cpu
                f[1] -= 1
                ok = go(i + 1)
                f[0] += s.cpu
                f[1] += 1
                if ok:
                    return True
        return False

    return go(0)


shapes = st.builds(
    Shape,
    cpu=st.sampled_from([500, 1000, 1500, 2000]),
    zone=st.sampled_from([None, None, "a", "b"]),
    tolerates=st.booleans(),
)


@st.composite
def node_sets(draw: st.DrawFn) -> list[Node]:
    n = draw(st.integers(1, 4))
    out = []
    for i in range(n):
        out.append(Node(
            f"n{i}",
            {"kubernetes.io/hostname": f"n{i}", "zone": draw(st.sampled_from(["a", "b"]))},
            {CPU: draw(st.sampled_from([0, 500, 1000, 2000, 3000])),
             PODS: draw(st.integers(0, 4))},
            (TAINT,) if draw(st.integers(0, 3)) == 0 else (),
            ready=draw(st.integers(0, 7)) != 0,
            unschedulable=draw(st.integers(0, 7)) == 0,
        ))
    return out


@st.composite
def bound_pods(draw: st.DrawFn, nodes: Sequence[Node]) -> list[BoundPod]:
    pods = []
    for i in range(draw(st.integers(0, 3))):
        node = draw(st.sampled_from(list(nodes)))
        pods.append(BoundPod(f"other/b{i}", node.name, {CPU: draw(st.sampled_from([500, 1000]))}))
    return pods


def used_by(bound: Sequence[BoundPod]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for p in bound:
        cpu, n = out.get(p.node, (0, 0))
        out[p.node] = (cpu + p.requests.get(CPU, 0), n + 1)
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_released_gangs_never_exceed_node_capacity(data: st.DataObject) -> None:
    nodes = data.draw(node_sets())
    bound = data.draw(bound_pods(nodes))
    engine = engine_with(nodes, bound=bound)
    released: list[Shape] = []
    for g in range(data.draw(st.integers(1, 4))):
        shape = data.draw(shapes)
        count = data.draw(st.integers(2, 3))
        if len(released) + count > 7:
            break
        wl = admitted(f"g{g}", shape.pod_set("main", count))
        engine.upsert_workload(wl)
        verdict = check(engine, wl)
        assert verdict is not None
        if verdict.fits:
            for i in range(count):
                engine.upsert_released_pod(
                    ReleasedPod(f"default/g{g}-{i}", shape.pod_set("released", 1))
                )
            released += [shape] * count
        assert assignable(nodes, used_by(bound), released), (
            f"released {released} cannot all be placed on {nodes} with {bound}"
        )


@st.composite
def workloads(draw: st.DrawFn) -> list[tuple[Shape, int]]:
    return draw(st.lists(st.tuples(shapes, st.integers(1, 3)), min_size=1, max_size=3).filter(
        lambda sets: sum(n for _, n in sets) >= 2
    ))


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_sound_and_complete_for_one_pod_set(data: st.DataObject) -> None:
    nodes = data.draw(node_sets())
    bound = data.draw(bound_pods(nodes))
    sets = data.draw(workloads())
    wl = admitted("w", *(s.pod_set(f"ps{i}", n) for i, (s, n) in enumerate(sets)))
    verdict = check(engine_with(nodes, bound=bound, workloads=[wl]), wl)
    assert verdict is not None
    pods = [s for s, n in sets for _ in range(n)]
    exists = assignable(nodes, used_by(bound), pods)
    if verdict.fits:
        # Sound: the witness is an assignment within capacity, on nodes the pods may run on.
        assert exists
        cpu = dict(used_by(bound))
        by_name = {n.name: n for n in nodes}
        used: set[str] = set()
        for i, (s, n) in enumerate(sets):
            placed = verdict.nodes[PodSetName(f"ps{i}")]
            assert sum(placed.values()) == n
            for name, k in placed.items():
                assert may_run(s, by_name[name])
                c, m = cpu.get(name, (0, 0))
                cpu[name] = (c + k * s.cpu, m + k)
                used.add(name)
        for name in used:
            c, m = cpu[name]
            assert c <= by_name[name].allocatable[CPU] and m <= by_name[name].allocatable[PODS]
    elif len(sets) == 1:
        assert not exists, f"held, but {pods} fit on {nodes} with {bound}: {verdict.message}"
    assert verdict.fit <= verdict.needed == len(pods)
