"""The node-fit guard (kqueue/engine/tas/node_fit.py), through Engine.node_fit: named cases.

Each case: nodes (kwok-like: 1 cpu, 10 pod slots unless said), what else takes room, one
admitted workload; the verdict (fits, how many of how many) and, where the numbers matter, the
message's fragments. Kueue has no node-fit guard outside TAS; the cases named "Kueue: ..." port
its TAS test of that name (pkg/scheduler/scheduler_tas_test.go) to the implicit hostname level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kqueue.engine import from_api
from kqueue.engine.tas.node_fit import ReleasedPod
from kqueue.engine.tas.topology import BoundPod, Node
from kqueue.engine.types import (
    FlavorName,
    PodSetName,
    ResourceFlavor,
    SelectorRequirement,
    Taint,
    Toleration,
    Workload,
)

from .node_fit_support import admitted, check, engine_with, placed_total
from .tas_support import node, pod, pset


def released(key: str, **kw: Any) -> ReleasedPod:
    return ReleasedPod(key, pset("released", 1, **kw))


def three(**kw: Any) -> Workload:
    return admitted("gang", pset("main", 3, cpu="1", **kw))


@dataclass
class Case:
    nodes: list[Node]
    workload: Workload = field(default_factory=three)
    fits: bool = True
    fit: int = 3
    needed: int = 3
    bound: list[BoundPod] = field(default_factory=list)
    released: list[ReleasedPod] = field(default_factory=list)
    flavor: ResourceFlavor | None = None
    pending: dict[str, int] | None = None
    message: tuple[str, ...] = ()


KWOK3 = [node("kwok-1", tas=False), node("kwok-2", tas=False), node("kwok-3", tas=False)]
KWOK2 = KWOK3[:2]

CASES: dict[str, Case] = {
    "three pods on three nodes fit": Case(KWOK3),
    "fragmentation: three pods, room for two": Case(
        KWOK2, fits=False, fit=2,
        message=("3 pods need 1 cpu each; free: kwok-1 1, kwok-2 1; 2 of 3 fit",),
    ),
    "one big node takes all three": Case([node("big", cpu="3", tas=False)]),
    "Kueue: workload does not get scheduled as the node capacity (.status.allocatable['pods']) is already used by non-TAS workloads": Case(
        [node("kwok-1", cpu="3", pods=2, tas=False), node("kwok-2", tas=False)],
        bound=[pod("other/web", "kwok-1")], fits=False, fit=2,
    ),
    # Kueue: TestFindTopologyAssignment "no annotation; implied default to unconstrained"
    # with a node selector (tas_flavor_snapshot_test.go, node selectors).
    "node selector leaves two nodes": Case(
        [node("kwok-1", labels={"zone": "a"}, tas=False),
         node("kwok-2", labels={"zone": "a"}, tas=False),
         node("kwok-3", labels={"zone": "b"}, tas=False)],
        workload=three(selector={"zone": "a"}), fits=False, fit=2,
        message=("1 node selector mismatch",),
    ),
    "flavor node labels leave two nodes": Case(
        [node("kwok-1", labels={"pool": "x"}, tas=False),
         node("kwok-2", labels={"pool": "x"}, tas=False),
         node("kwok-3", labels={"pool": "y"}, tas=False)],
        flavor=ResourceFlavor(FlavorName("default"), {"pool": "x"}),
        fits=False, fit=2, message=("free: kwok-1 1, kwok-2 1; 2 of 3 fit",),
    ),
    # Kueue: scheduler_tas_test "workload with a toleration for a tainted node" / "... without".
    "untolerated taint leaves two nodes": Case(
        [*KWOK2, node("kwok-3", taints=[Taint("gpu", "true", "NoSchedule")], tas=False)],
        fits=False, fit=2, message=("1 untolerated taint",),
    ),
    "taint tolerated by the pod set": Case(
        [*KWOK2, node("kwok-3", taints=[Taint("gpu", "true", "NoSchedule")], tas=False)],
        workload=three(tolerations=[Toleration("gpu", "Equal", "true", "NoSchedule")]),
    ),
    "Kueue: scheduling workload on a tainted node when the toleration is on ResourceFlavor": Case(
        [*KWOK2, node("kwok-3", taints=[Taint("gpu", "true", "NoSchedule")], tas=False)],
        flavor=ResourceFlavor(
            FlavorName("default"), tolerations=(Toleration("gpu", "Exists"),)
        ),
    ),
    "PreferNoSchedule taint does not keep pods off": Case(
        [*KWOK2, node("kwok-3", taints=[Taint("x", "", "PreferNoSchedule")], tas=False)],
    ),
    "Kueue: does not admit workload when node does not match required affinity": Case(
        [node("kwok-1", labels={"gen": "a"}, tas=False), node("kwok-2", labels={"gen": "a"},
         tas=False), node("kwok-3", labels={"gen": "b"}, tas=False)],
        workload=three(affinity=[SelectorRequirement("gen", "In", ("a",))]),
        fits=False, fit=2, message=("1 node affinity mismatch",),
    ),
    "Kueue: admits workload when node matches required affinity": Case(
        [node("kwok-1", labels={"mem": "8"}, tas=False), node("kwok-2", labels={"mem": "16"},
         tas=False), node("kwok-3", labels={"mem": "32"}, tas=False)],
        workload=three(affinity=[SelectorRequirement("mem", "Gt", ("4",))]),
    ),
    "Kueue: hostname lowest-level TAS filters unschedulable node (and not ready)": Case(
        [node("kwok-1", tas=False), node("kwok-2", ready=False, tas=False),
         node("kwok-3", unschedulable=True, tas=False)],
        fits=False, fit=1, message=("1 not ready", "1 unschedulable"),
    ),
    "Kueue: workload does not get scheduled as the node capacity is already used by a non-TAS pod": Case(
        KWOK3, bound=[pod("other/web", "kwok-3", cpu="1")], fits=False, fit=2,
        message=("free: kwok-1 1, kwok-2 1, kwok-3 0",),
    ),
    "a foreign bound pod of half a cpu leaves room for none on its node": Case(
        KWOK3, bound=[pod("other/web", "kwok-3", cpu="500m")], fits=False, fit=2,
        message=("kwok-3 500m",),
    ),
    "released pods of another workload take room": Case(
        KWOK3, released=[released("default/other-0", cpu="1")], fits=False, fit=2,
        message=("counting 1 pods of other workloads released but not bound yet",),
    ),
    "a released pod that fits nowhere takes nothing": Case(
        KWOK3, released=[released("default/huge-0", cpu="8")],
    ),
    "a released pod pinned to a node takes that node": Case(
        [*KWOK3, node("kwok-4", cpu="500m", tas=False)],
        released=[released("default/p-0", cpu="1", selector={"kubernetes.io/hostname": "kwok-1"})],
        fits=False, fit=2, message=("kwok-4 500m",),
    ),
    "only the pods still to release are checked": Case(
        KWOK2, pending={"main": 2}, needed=2, fit=2,
    ),
    "two resources: only the one short is shown": Case(
        [node("kwok-1", memory="1Gi", tas=False), node("kwok-2", memory="512Mi", tas=False)],
        workload=admitted("gang", pset("main", 2, cpu="1", memory="1Gi")),
        fits=False, needed=2, fit=1,
        message=("2 pods need 1Gi memory each; free: kwok-1 1Gi, kwok-2 512Mi; 1 of 2 fit",),
    ),
    "two resources, each enough alone: both are shown": Case(
        [node("kwok-1", cpu="2", memory="1Gi", tas=False),
         node("kwok-2", cpu="0", memory="2Gi", tas=False),
         node("kwok-3", cpu="1", memory="0", tas=False)],
        workload=admitted("gang", pset("main", 3, cpu="1", memory="1Gi")),
        fits=False, fit=1,
        message=("3 pods need 1 cpu, 1Gi memory each", "kwok-1 (cpu 2, memory 1Gi)"),
    ),
    "pod slots short: they are what is shown": Case(
        [node("kwok-1", cpu="3", pods=1, tas=False)],
        fits=False, fit=1, message=("3 pods need 1 pod slot each; free: kwok-1 1; 1 of 3 fit",),
    ),
    "pod sets in order: the second does not fit": Case(
        KWOK3,
        workload=admitted("lw", pset("leader", 1, cpu="1"), pset("workers", 3, cpu="1")),
        fits=False, needed=4, fit=3,
        message=("pod set workers: 3 pods need 1 cpu each", "2 of 3 fit"),
    ),
    "first-fit decreasing places what the workload's order does not": Case(
        [node("a", cpu="3", tas=False), node("b", cpu="2", tas=False)],
        workload=admitted("mixed", pset("small", 1, cpu="1"), pset("big", 2, cpu="2")),
        needed=3, fit=3,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_node_fit(name: str) -> None:
    case = CASES[name]
    engine = engine_with(
        case.nodes, flavor=case.flavor, bound=case.bound, released=case.released,
        workloads=[case.workload],
    )
    verdict = check(engine, case.workload, case.pending)
    assert verdict is not None
    assert (verdict.fits, verdict.needed, verdict.fit) == (case.fits, case.needed, case.fit), (
        verdict.message
    )
    for fragment in case.message:
        assert fragment in verdict.message
    if case.fits:
        assert verdict.message == ""
        assert placed_total(verdict) == case.needed
    else:
        assert verdict.nodes == {}


@dataclass
class Off:
    workload: Workload = field(default_factory=three)
    cq_guard: bool | None = None
    default_guard: bool = True
    pending: dict[str, int] | None = None


NOT_GUARDED: dict[str, Off] = {
    # One pod is bound whole or not at all: nothing to guard against.
    "a single pod": Off(admitted("one", pset("main", 1, cpu="1"))),
    "one pod left to release of a running gang": Off(pending={"main": 1}),
    "the ClusterQueue turns it off": Off(cq_guard=False),
    "the Configuration turns it off": Off(default_guard=False),
}


@pytest.mark.parametrize("name", list(NOT_GUARDED))
def test_not_guarded(name: str) -> None:
    case = NOT_GUARDED[name]
    engine = engine_with(
        KWOK2, workloads=[case.workload], cq_guard=case.cq_guard,
        default_guard=case.default_guard,
    )
    assert check(engine, case.workload, case.pending) is None


def test_cluster_queue_turns_it_on_over_the_configuration() -> None:
    engine = engine_with(KWOK2, workloads=[three()], cq_guard=True, default_guard=False)
    verdict = check(engine, three())
    assert verdict is not None and (verdict.fits, verdict.fit) == (False, 2)


def test_not_admitted_is_not_guarded() -> None:
    engine = engine_with(KWOK3)
    assert check(engine, three()) is None


def test_released_when_capacity_frees() -> None:
    """Held on two nodes; a third node, then a deleted pod, each make room."""
    engine = engine_with(KWOK2, workloads=[three()])
    assert not check(engine, three()).fits  # type: ignore[union-attr]
    engine.upsert_node(KWOK3[2])
    verdict = check(engine, three())
    assert verdict is not None and verdict.fits
    assert verdict.nodes == {PodSetName("main"): {"kwok-1": 1, "kwok-2": 1, "kwok-3": 1}}
    engine.upsert_pod(pod("other/web", "kwok-3", cpu="1"))
    assert not check(engine, three()).fits  # type: ignore[union-attr]
    engine.delete_pod("other/web")
    assert check(engine, three()).fits  # type: ignore[union-attr]
    engine.upsert_released_pod(released("default/x-0", cpu="1"))
    assert not check(engine, three()).fits  # type: ignore[union-attr]
    engine.delete_released_pod("default/x-0")
    assert check(engine, three()).fits  # type: ignore[union-attr]


def _pod(**spec: Any) -> dict[str, Any]:
    meta = spec.pop("meta", {})
    status = spec.pop("status", {})
    return {
        "metadata": {"name": "p", "namespace": "ns", **meta},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **spec},
        "status": status,
    }


GATE = {"schedulingGates": [{"name": "kqueue.io/admission"}]}
RELEASED_PODS: dict[str, tuple[dict[str, Any], bool, bool]] = {
    # name: (pod, ungated, counted)
    "released, not bound": (_pod(nodeSelector={"zone": "a"}), False, True),
    "still gated": (_pod(**GATE), False, False),
    "gated, being released now": (_pod(**GATE), True, True),
    "another gate only": (_pod(schedulingGates=[{"name": "other"}]), False, True),
    "bound": (_pod(nodeName="kwok-1"), False, False),
    "ended": (_pod(status={"phase": "Succeeded"}), False, False),
    "being deleted": (_pod(meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}), False, False),
    "counted through a topology assignment": (
        _pod(meta={"labels": {"kqueue.io/tas": "true"}}), False, False,
    ),
}


@pytest.mark.parametrize("name", list(RELEASED_PODS))
def test_released_pod_from_api(name: str) -> None:
    pod, ungated, counted = RELEASED_PODS[name]
    got = from_api.released_pod(pod, ungated=ungated)
    assert (got is not None) == counted
    if got is not None:
        assert got.key == "ns/p"
        assert got.pod_set.requests == {"cpu": 1000}
        assert got.pod_set.node_selector == pod["spec"].get("nodeSelector", {})
