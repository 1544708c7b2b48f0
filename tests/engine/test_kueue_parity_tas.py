"""Parity with Kueue's topology-aware scheduling tests (pkg/scheduler/scheduler_tas_test.go).

Each case is a port of a Kueue case and keeps its name: ``TestScheduleForTAS``,
``TestScheduleForTASPreemption`` and ``TestScheduleForTASCohorts``. One cycle runs with the
classical preemptor; ``want`` is Kueue's ``wantNewAssignments`` as (domain values, pods) per pod
set, ``want_pending`` the start of the pending message (Kueue's event or condition message;
kqueue appends the per-domain numbers after it), ``want_preempted`` the victims, and
``KUEUE_REASONS`` the pending reasons of Kueue's events.

Not ported (docs/topology.md, "Kueue's TAS scheduler cases", says why per group): resource
transformations, the
scheduler-library integration, RecomputeAssignmentUponPreemptionTargetsOverlap, and the cases
whose only difference is the TASRecomputeAssignmentWithinSchedulingCycle gate being disabled
(kqueue always recomputes). The node-replacement second passes are in test_tas_replacement.py,
the ProvisioningRequest second passes (delayed topology requests) in
test_kueue_parity_tas_delayed.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from kqueue.engine.checks import CheckRule
from kqueue.engine.gates import FeatureGates
from kqueue.engine.types import (
    FlavorName,
    ResourceFlavor,
    SelectorRequirement,
    Taint,
    Toleration,
)

from .builders import make_cq, make_flavor, make_lq
from .tas_support import (
    BLOCK,
    HOST,
    RACK,
    SINGLE,
    THREE,
    TWO,
    Cluster,
    Held,
    node,
    placements,
    pod,
    pset,
    run,
    tas_flavor,
    topology,
    wl,
)

Want = dict[str, dict[str, list[tuple[tuple[str, ...], int]]]]


@dataclass
class Case:
    cluster: Cluster
    want: Want = field(default_factory=dict)
    want_pending: dict[str, str] = field(default_factory=dict)
    # Where kqueue's message starts differently (the cycle's own re-check) but says the same.
    want_pending_contains: dict[str, str] = field(default_factory=dict)
    want_preempted: set[str] = field(default_factory=set)
    # Per admitted workload and pod set, the flavor it got (where the case tells flavors apart).
    want_flavors: dict[str, dict[str, str]] = field(default_factory=dict)


def _cq(*flavors: str, cpu: str = "50", memory: str | None = "50Gi", name: str = "tas-main"):
    b = make_cq(name)
    for f in flavors:
        if memory is None:
            b.quota(f, cpu=cpu)
        else:
            b.quota(f, cpu=cpu, memory=memory)
    return b


SINGLE_NODE = [node("x1", cpu="1", memory="1Gi")]
ZERO_CAPACITY = [
    node("x1", cpu="0", labels={RACK: "r1"}),
    node("x2", cpu="1", labels={RACK: "r1"}),
    node("x3", cpu="1", labels={RACK: "r1"}),
]
DEFAULT = make_flavor("default").obj()
TAS = tas_flavor()
TAS_TWO = tas_flavor(topo="tas-two-level")
TAS_THREE = tas_flavor(topo="tas-three-level")
MAIN = _cq("tas-default").obj()


def _sibling(name: str, value: str) -> ResourceFlavor:
    """A flavor over the same ``tas-node`` nodes as its sibling, told apart by its taint."""
    return ResourceFlavor(FlavorName(name), {"tas-node": "true"},
                          (Taint("example.com/flavor", value, "NoSchedule"),),
                          topology_name="tas-single-level")


def _tolerates(value: str) -> list[Toleration]:
    return [Toleration("example.com/flavor", "Equal", value, "NoSchedule")]


SIBLINGS = [_sibling("flavor-a", "a"), _sibling("flavor-b", "b")]


def _grouped(name: str, group: str) -> ResourceFlavor:
    """A flavor over the nodes labelled ``tas-group: <group>`` (Kueue's case's NodeLabel)."""
    return ResourceFlavor(FlavorName(name), {"tas-group": group}, topology_name="tas-single-level")


def _simple(nodes, flavors, cq, *workloads, pods=(), topos=(SINGLE,)) -> Cluster:
    return Cluster(list(nodes), list(topos), list(flavors), [cq], list(workloads), list(pods))


SCHEDULE_FOR_TAS: dict[str, Case] = {
    "workload which does not specify TAS annotation uses the only TAS flavor": Case(
        _simple(SINGLE_NODE, [TAS, DEFAULT], _cq("tas-default", memory=None).obj(),
                wl("foo", pset("one", 1, cpu="1"))),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "workload requiring TAS skips the non-TAS flavor": Case(
        _simple(SINGLE_NODE, [TAS, DEFAULT],
                make_cq("tas-main").quota("default", cpu="50").quota("tas-default", cpu="50").obj(),
                wl("foo", pset("one", 1, required=HOST, cpu="1"))),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "workload which does not need TAS skips the TAS flavor": Case(
        _simple(SINGLE_NODE, [TAS, DEFAULT],
                make_cq("tas-main").quota("tas-default", cpu="50").quota("default", cpu="50").obj(),
                wl("foo", pset("one", 1, cpu="1"))),
        want={"foo": {"one": []}},
    ),
    "workload with mixed PodSets (requiring TAS and not)": Case(
        _simple(SINGLE_NODE, [TAS, DEFAULT],
                make_cq("tas-main").quota("tas-default", cpu="50").quota("default", cpu="50").obj(),
                wl("foo", pset("launcher", 1, cpu="500m"),
                   pset("worker", 1, required=HOST, cpu="500m"))),
        want={"foo": {"launcher": [], "worker": [(("x1",), 1)]}},
    ),
    "workload required TAS gets scheduled": Case(
        _simple(SINGLE_NODE, [TAS], MAIN, wl("foo", pset("one", 1, required=HOST, cpu="1"))),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "workload requests topology level which is not present in topology": Case(
        _simple(SINGLE_NODE, [TAS], MAIN,
                wl("foo", pset("one", 1, required="cloud.com/non-existing", cpu="1"))),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: Flavor "tas-default" does not '
            "contain the requested level"
        },
    ),
    "workload requests topology level which is only present in second flavor": Case(
        Cluster(
            [node("x1", cpu="1", labels={"cloud.com/custom-level": "x1"})],
            [SINGLE, topology("tas-custom-topology", "cloud.com/custom-level")],
            [TAS, tas_flavor("tas-custom-flavor", "tas-custom-topology")],
            [make_cq("tas-main").quota("tas-default", cpu="50")
             .quota("tas-custom-flavor", cpu="50").obj()],
            [wl("foo", pset("one", 1, required="cloud.com/custom-level", cpu="1"))],
        ),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "workload does not get scheduled as it does not fit within the node capacity": Case(
        _simple(SINGLE_NODE, [TAS], MAIN, wl("foo", pset("one", 2, required=HOST, cpu="1"))),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" allows '
            "to fit only 1 out of 2 pod(s)"
        },
    ),
    "workload does not get scheduled as the node capacity is already used by another TAS workload":
    Case(
        _simple(SINGLE_NODE, [TAS], MAIN,
                wl("foo", pset("one", 1, required=HOST, cpu="1")),
                wl("bar-admitted", pset("one", 1, required=HOST, cpu="1"), held_in="tas-main",
                   held=[Held("one", "tas-default", [(["x1"], 1)])])),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t '
            "allow to fit any of 1 pod(s)"
        },
    ),
    "workload does not get scheduled as the node capacity is already used by a non-TAS pod": Case(
        _simple(SINGLE_NODE, [TAS], MAIN, wl("foo", pset("one", 1, required=HOST, cpu="1")),
                pods=[pod("test-ns/test-pending", "x1", cpu="600m")]),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t '
            "allow to fit any of 1 pod(s)"
        },
    ),
    "workload does not get scheduled as node capacity is completely used by non-TAS pod": Case(
        _simple([node("x1", cpu="1", memory="1Gi", pods=1)], [TAS], MAIN,
                wl("foo", pset("one", 1, required=HOST, cpu="1")),
                pods=[pod("test-ns/test-pending", "x1", cpu="1", memory="1Gi")]),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t '
            "allow to fit any of 1 pod(s)"
        },
    ),
    "workload gets admitted next to already admitted workload, multiple resources used": Case(
        _simple(SINGLE_NODE, [TAS], MAIN,
                wl("foo", pset("one", 1, required=HOST, cpu="500m", memory="500Mi")),
                wl("bar-admitted", pset("one", 1, required=HOST, cpu="500m", memory="500Mi"),
                   held_in="tas-main", held=[Held("one", "tas-default", [(["x1"], 1)])])),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "workload with multiple PodSets requesting the same TAS flavor; multiple levels": Case(
        _simple([node("x1", cpu="3", labels={RACK: "r1"}), node("y1", cpu="3", labels={RACK: "r1"})],
                [TAS_TWO], _cq("tas-default", memory=None).obj(),
                wl("foo", pset("launcher", 1, preferred=HOST, cpu="1"),
                   pset("worker", 1, preferred=HOST, cpu="7")),
                topos=(TWO,)),
        want_pending={"foo": "couldn't assign flavors to pod set worker: topology"},
    ),
    "scheduling workload with multiple PodSets requesting TAS flavor and will succeed": Case(
        _simple([node("x1", cpu="8", labels={RACK: "r1"}), node("y1", cpu="8", labels={RACK: "r1"})],
                [TAS_TWO], _cq("tas-default", cpu="16", memory=None).obj(),
                wl("foo", pset("launcher", 1, required=HOST, cpu="1"),
                   pset("worker", 15, preferred=HOST, cpu="1")),
                topos=(TWO,)),
        want={"foo": {"launcher": [(("x1",), 1)], "worker": [(("x1",), 7), (("y1",), 8)]}},
    ),
    "scheduling workload with multiple PodSets requesting higher level topology": Case(
        _simple([node("x1", cpu="8", labels={RACK: "r1"}), node("y1", cpu="8", labels={RACK: "r1"})],
                [TAS_TWO], _cq("tas-default", cpu="16", memory=None).obj(),
                wl("foo", pset("launcher", 1, required=RACK, cpu="1"),
                   pset("worker", 15, required=RACK, cpu="1")),
                topos=(TWO,)),
        want={"foo": {"launcher": [(("x1",), 1)], "worker": [(("x1",), 7), (("y1",), 8)]}},
    ),
    "scheduling workload when the node for another admitted workload is deleted": Case(
        _simple([node("y1", cpu="1")], [TAS], _cq("tas-default", memory=None).obj(),
                wl("foo", pset("one", 1, preferred=HOST, cpu="1")),
                wl("bar-admitted", pset("one", 1, required=HOST, cpu="1"), held_in="tas-main",
                   held=[Held("one", "tas-default", [(["x1"], 1)])])),
        want={"foo": {"one": [(("y1",), 1)]}},
    ),
    "scheduling workload on a tainted node when the toleration is on ResourceFlavor": Case(
        _simple([node("x1", cpu="1", taints=[Taint("example.com/gpu", "present", "NoSchedule")])],
                [tas_flavor(tolerations=[Toleration("example.com/gpu", "Exists")])],
                _cq("tas-default", memory=None).obj(),
                wl("foo", pset("one", 1, preferred=HOST, cpu="1"))),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "does not admit workload when node does not match required affinity": Case(
        _simple(SINGLE_NODE, [TAS], MAIN,
                wl("foo", pset("one", 1, preferred=HOST, cpu="1",
                               affinity=[SelectorRequirement("unused-key", "In", ("value",))]))),
        want_pending={"foo": "couldn't assign flavors to pod set one: topology"},
    ),
    "admits workload when node matches required affinity": Case(
        _simple([node("x1", cpu="1", memory="1Gi", labels={"expected-label": "expected-value"})],
                [TAS], MAIN,
                wl("foo", pset("one", 1, preferred=HOST, cpu="1", affinity=[
                    SelectorRequirement("expected-label", "In", ("expected-value",))]))),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "admits workload when nodes are partially empty; unconstrained": Case(
        _simple(ZERO_CAPACITY, [TAS_TWO], MAIN,
                wl("foo", pset("one", 2, unconstrained=True, cpu="1")), topos=(TWO,)),
        want={"foo": {"one": [(("x2",), 1), (("x3",), 1)]}},
    ),
    "admits workload when nodes are partially empty; preferred": Case(
        _simple(ZERO_CAPACITY, [TAS_TWO], MAIN,
                wl("foo", pset("one", 2, preferred=RACK, cpu="1")), topos=(TWO,)),
        want={"foo": {"one": [(("x2",), 1), (("x3",), 1)]}},
    ),
    "admits workload when nodes are partially empty; required": Case(
        _simple(ZERO_CAPACITY, [TAS_TWO], MAIN,
                wl("foo", pset("one", 2, required=RACK, cpu="1")), topos=(TWO,)),
        want={"foo": {"one": [(("x2",), 1), (("x3",), 1)]}},
    ),
    "workload does not get scheduled as the node capacity (.status.allocatable['pods']) is "
    "already used by non-TAS and TAS workloads": Case(
        _simple([node("x1", cpu="1000m", pods=3)], [TAS], MAIN,
                wl("foo", pset("one", 1, required=HOST, cpu="300m")),
                wl("bar-admitted", pset("one", 2, required=HOST, cpu="150m"), held_in="tas-main",
                   held=[Held("one", "tas-default", [(["x1"], 2)])]),
                pods=[pod("test-ns/test-running", "x1", cpu="300m")]),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t '
            "allow to fit any of 1 pod(s)"
        },
    ),
    "multi-PodSet workload across sibling flavors must not self-overlap on shared node": Case(
        _simple([node("x1", cpu="400m", memory="400Mi"), node("x2", cpu="400m", memory="400Mi")],
                SIBLINGS,
                make_cq("tas-main").quota("flavor-a", cpu="400m", memory="400Mi")
                .quota("flavor-b", cpu="400m", memory="400Mi").obj(),
                wl("multi-podset-wl",
                   pset("ps-a", 1, preferred=HOST, cpu="300m", memory="300Mi",
                        tolerations=_tolerates("a")),
                   pset("ps-b", 1, preferred=HOST, cpu="300m", memory="300Mi",
                        tolerations=_tolerates("b")))),
        want={"multi-podset-wl": {"ps-a": [(("x1",), 1)], "ps-b": [(("x2",), 1)]}},
    ),
    "multi-layer topology: block required with rack and host slices; workload fits": Case(
        _simple([node("x1", cpu="1", labels={BLOCK: "b1", RACK: "r1"}),
                 node("x2", cpu="4", labels={BLOCK: "b1", RACK: "r1"}),
                 node("x3", cpu="3", labels={BLOCK: "b1", RACK: "r2"}),
                 node("x4", cpu="4", labels={BLOCK: "b1", RACK: "r2"})],
                [TAS_THREE], MAIN,
                wl("foo", pset("one", 8, required=BLOCK, layers=[(RACK, 4), (HOST, 2)], cpu="1")),
                topos=(THREE,)),
        want={"foo": {"one": [(("x2",), 4), (("x3",), 2), (("x4",), 2)]}},
    ),
    "multi-layer topology: host slice rounding makes rack slice impossible; NoFit": Case(
        _simple([node("x1", cpu="3", labels={BLOCK: "b1", RACK: "r1"}),
                 node("x2", cpu="3", labels={BLOCK: "b1", RACK: "r1"})],
                [TAS_THREE], MAIN,
                wl("foo", pset("one", 6, required=BLOCK, layers=[(RACK, 6), (HOST, 2)], cpu="1")),
                topos=(THREE,)),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: topology "tas-three-level" doesn\'t '
            f"allow to fit; 0/1 slice(s) fit on level {RACK}; 2/3 slice(s) fit on level {HOST}"
        },
    ),
    "two ResourceFlavors share nodes: pending workload lands on the fallback flavor when the "
    "primary flavor is full": Case(
        _simple([node("x1", cpu="400m", memory="400Mi"), node("x2", cpu="400m", memory="400Mi")],
                [tas_flavor("tas-flavor-a"),
                 ResourceFlavor(FlavorName("tas-flavor-b"), {"tas-node": "true"},
                                (Taint("tas-class", "b", "NoSchedule"),),
                                topology_name="tas-single-level")],
                make_cq("tas-main").quota("tas-flavor-a", cpu="400m", memory="400Mi")
                .quota("tas-flavor-b", cpu="100m", memory="100Mi").obj(),
                *[wl(f"primary-admitted-{i}", pset("one", 1, preferred=HOST, cpu="200m",
                                                   memory="200Mi"),
                     held_in="tas-main", held=[Held("one", "tas-flavor-a", [(["x1"], 1)])])
                  for i in (1, 2)],
                wl("pending-wl", pset("one", 1, preferred=HOST, cpu="100m", memory="100Mi",
                                      tolerations=[Toleration("tas-class", "Equal", "b",
                                                              "NoSchedule")]))),
        want={"pending-wl": {"one": [(("x2",), 1)]}},
    ),
    "TAS workload gets scheduled as trimmed by partial admission": Case(
        _simple(SINGLE_NODE, [TAS], MAIN,
                wl("foo", pset("one", 5, min_count=1, required=HOST, cpu="1"))),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "workload with a PodSet of size zero": Case(
        _simple([node("x1", cpu="3", labels={RACK: "r1"})], [TAS_TWO], MAIN,
                wl("foo", pset("launcher", 1, preferred=HOST, cpu="1"),
                   pset("worker", 0, preferred=HOST, cpu="1")),
                topos=(TWO,)),
        want={"foo": {"launcher": [(("x1",), 1)], "worker": []}},
    ),
    "workload with zero value request gets scheduled": Case(
        _simple(SINGLE_NODE, [TAS], MAIN,
                wl("foo", pset("one", 1, cpu="0", memory="10Mi"))),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "initial scheduling; one-byte memory request fits on a 2Gi node with vectorized requests "
    "disabled": Case(
        _simple([node("x1", cpu="0", memory="2Gi")], [TAS], MAIN,
                wl("tiny-memory", pset("one", 1, required=HOST, memory="1"))),
        want={"tiny-memory": {"one": [(("x1",), 1)]}},
    ),
    # Placement reads each pod's requests (1.5Gi), not the pod set's quota: one pod per node.
    "initial scheduling; TAS uses podspec memory for placement": Case(
        _simple([node("x1", cpu="4", memory="2Gi"), node("x2", cpu="4", memory="2Gi")], [TAS],
                MAIN, wl("foo", pset("one", 2, preferred=HOST, cpu="1", memory="1536Mi"))),
        want={"foo": {"one": [(("x1",), 1), (("x2",), 1)]}},
    ),
    # Admission checks: a check that does not provision (a custom one, or a ProvisioningRequest
    # check on another flavor) leaves the placement to the first pass.
    "workload with a custom AdmissionCheck gets TAS assigned": Case(
        Cluster(SINGLE_NODE, [SINGLE], [TAS],
                [replace(MAIN, admission_checks=(CheckRule("custom-check"),))],
                [wl("foo", pset("one", 1, required=HOST, cpu="1"))], checks=["custom-check"]),
        want={"foo": {"one": [(("x1",), 1)]}},
    ),
    "workload in CQ with two TAS flavors, only the second is using Provisioning Admission Check":
    Case(
        Cluster(
            [node("x1", cpu="1", labels={"tas-group": "reservation"}, tas=False)],
            [SINGLE],
            [_grouped("tas-reservation", "reservation"),
             _grouped("tas-provisioning", "provisioning")],
            [replace(
                make_cq("tas-main").quota("tas-reservation", cpu="1")
                .quota("tas-provisioning", cpu="1").obj(),
                admission_checks=(
                    CheckRule("prov-check", frozenset({"tas-provisioning"})),
                ),
            )],
            [wl("foo", pset("one", 1, required=HOST, cpu="1"))],
            checks=["prov-check"],
        ),
        want={"foo": {"one": [(("x1",), 1)]}},
        want_flavors={"foo": {"one": "tas-reservation"}},
    ),
}

TWO_NODES = [node("x1", cpu="5", memory="5Gi"), node("y1", cpu="5", memory="5Gi")]
MAIN_PREEMPT = make_cq("tas-main").quota("tas-default", cpu="50", memory="50Gi").preemption(
    within="LowerPriority"
).obj()

SCHEDULE_FOR_TAS_PREEMPTION: dict[str, Case] = {
    # A deliberate difference: the preemptor (4Gi) does not fit x1 (1Gi) even empty, so kqueue
    # preempts nothing and says TopologyPlacementFailed; Kueue evicts the lower-priority
    # workload anyway (WaitingForPreemptedWorkloads) and the preemptor still does not fit.
    "preemption; TAS uses podspec memory for fit": Case(
        _simple(SINGLE_NODE, [TAS], MAIN_PREEMPT,
                wl("foo", pset("one", 1, preferred=HOST, cpu="1", memory="4Gi"), priority=3),
                wl("low-priority-admitted", pset("one", 1, required=HOST, cpu="1", memory="2Gi"),
                   priority=1, held_in="tas-main",
                   held=[Held("one", "tas-default", [(["x1"], 1)])])),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t '
            "allow to fit any of 1 pod(s)"
        },
    ),
    "only low priority workload is preempted": Case(
        _simple([node("x1", cpu="5", memory="5Gi")], [TAS], MAIN_PREEMPT,
                wl("foo", pset("one", 1, preferred=HOST, cpu="2"), priority=3),
                wl("low-priority-admitted", pset("one", 1, required=HOST, cpu="5"), priority=1,
                   held_in="tas-main", held=[Held("one", "tas-default", [(["x1"], 1)])])),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t '
            "allow to fit any of 1 pod(s)"
        },
        want_preempted={"low-priority-admitted"},
    ),
    "With pods count usage pressure on nodes: only low priority workload is preempted": Case(
        _simple([node("x1", cpu="5", memory="5Gi", pods=1)], [TAS], MAIN_PREEMPT,
                wl("high-priority-waiting", pset("one", 1, preferred=HOST, cpu="2"), priority=3),
                wl("low-priority-admitted", pset("one", 1, required=HOST, cpu="5"), priority=1,
                   held_in="tas-main", held=[Held("one", "tas-default", [(["x1"], 1)])])),
        want_preempted={"low-priority-admitted"},
    ),
    "low priority workload is preempted, mid-priority workload survives": Case(
        _simple([node("x1", cpu="5", memory="5Gi")], [TAS], MAIN_PREEMPT,
                wl("foo", pset("one", 1, preferred=HOST, cpu="2"), priority=3),
                wl("low-priority-admitted", pset("one", 1, required=HOST, cpu="2"), priority=1,
                   held_in="tas-main", held=[Held("one", "tas-default", [(["x1"], 1)])]),
                wl("mid-priority-admitted", pset("one", 1, required=HOST, cpu="2"), priority=2,
                   held_in="tas-main", held=[Held("one", "tas-default", [(["x1"], 1)])])),
        want_preempted={"low-priority-admitted"},
    ),
    "low priority workload is preempted even though there is enough capacity, but fragmented":
    Case(
        _simple(TWO_NODES, [TAS], MAIN_PREEMPT,
                wl("foo", pset("one", 2, required=HOST, cpu="1"), priority=3),
                wl("mid-priority-admitted", pset("one", 1, required=HOST, cpu="4"), priority=2,
                   held_in="tas-main", held=[Held("one", "tas-default", [(["x1"], 1)])]),
                wl("low-priority-admitted", pset("one", 1, required=HOST, cpu="4"), priority=1,
                   held_in="tas-main", held=[Held("one", "tas-default", [(["y1"], 1)])])),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" allows '
            "to fit only 1 out of 2 pod(s)"
        },
        want_preempted={"low-priority-admitted"},
    ),
    "TAS disabled, preemption succeeds even with ResourceFlavor topologyName": Case(
        Cluster([node("x1", cpu="1", memory="1Gi")], [SINGLE], [TAS],
                [make_cq("tas-main").quota("tas-default", cpu="3", memory="3Gi")
                 .preemption(within="LowerPriority").obj()],
                [wl("high-priority", pset("main", 1, cpu="3"), priority=2),
                 wl("low-priority", pset("main", 1, cpu="3"), priority=1, held_in="tas-main",
                    held=[Held("main", "tas-default", [])])],
                gates=FeatureGates(topology_aware_scheduling=False)),
        want_pending={
            "high-priority": "couldn't assign flavors to pod set main: insufficient unused quota "
            "for cpu in flavor tas-default, 3 more needed"
        },
        want_preempted={"low-priority"},
    ),
    "sibling-flavor usage on the shared node forces same-flavor preemption": Case(
        _simple([node("x1", cpu="5", memory="5Gi")], SIBLINGS,
                make_cq("tas-main").quota("flavor-a", cpu="5", memory="5Gi")
                .quota("flavor-b", cpu="5", memory="5Gi").preemption(within="LowerPriority").obj(),
                wl("w3-pending", pset("one", 1, preferred=HOST, cpu="2", memory="2Gi",
                                      tolerations=_tolerates("a")), priority=5),
                wl("w1-low-prio-a", pset("one", 1, preferred=HOST, cpu="1", memory="1Gi",
                                         tolerations=_tolerates("a")), priority=1,
                   held_in="tas-main", held=[Held("one", "flavor-a", [(["x1"], 1)])]),
                wl("w2-sibling-b", pset("one", 1, preferred=HOST, cpu="3", memory="3Gi",
                                        tolerations=_tolerates("b")), priority=1,
                   held_in="tas-main", held=[Held("one", "flavor-b", [(["x1"], 1)])])),
        want_pending={
            "w3-pending": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" '
            "doesn't allow to fit any of 1 pod(s)"
        },
        want_preempted={"w1-low-prio-a"},
    ),
    "workload with equal priority awaits for other workloads to complete": Case(
        _simple([node("x1", cpu="5", memory="5Gi")], [TAS], MAIN_PREEMPT,
                wl("low-priority-which-would-fit", pset("one", 1, required=HOST, cpu="1"),
                   priority=1),
                wl("mid-priority-waiting", pset("one", 2, required=HOST, cpu="1"), priority=2),
                wl("mid-priority-admitted", pset("one", 1, required=HOST, cpu="4"), priority=2,
                   held_in="tas-main", held=[Held("one", "tas-default", [(["x1"], 1)])])),
        want_pending={"mid-priority-waiting": "couldn't assign flavors to pod set one: topology"},
    ),
}


def _cohort_cq(name: str, *, within: str = "Never") -> object:
    return make_cq(name).cohort("tas-cohort-main").quota(
        "tas-default", cpu="4", memory="4Gi"
    ).preemption(within=within, reclaim="Any").obj()


COHORT_NODES = [node("x1", cpu="3", memory="5Gi"), node("y1", cpu="5", memory="3Gi")]
CQ_A = _cohort_cq("tas-cq-a", within="LowerPriority")
CQ_B = _cohort_cq("tas-cq-b")
CQ_C = _cohort_cq("tas-cq-c")
LQS = [make_lq("tas-lq-a", "tas-cq-a"), make_lq("tas-lq-b", "tas-cq-b"),
       make_lq("tas-lq-c", "tas-cq-c")]


def _no_borrowing_cq(within: str, reclaim: str) -> object:
    return make_cq("tas-cq-a").cohort("tas-cohort-main").quota(
        "tas-default", cpu="8", memory="4Gi", borrowing_limit="0"
    ).preemption(within=within, reclaim=reclaim).obj()


def _cohort(cqs: list[object], *workloads: object) -> Cluster:
    return Cluster(COHORT_NODES, [SINGLE], [TAS], cqs, list(workloads), lqs=LQS)  # type: ignore[arg-type]


SCHEDULE_FOR_TAS_COHORTS: dict[str, Case] = {
    "workload which requires borrowing gets scheduled": Case(
        _cohort([CQ_A, CQ_B], wl("a1", pset("one", 6, preferred=HOST, cpu="1"), queue="tas-lq-a")),
        want={"a1": {"one": [(("x1",), 1), (("y1",), 5)]}},
    ),
    "reclaim within cohort; single borrowing workload gets preempted": Case(
        _cohort([CQ_A, CQ_B],
                wl("a1-admitted", pset("one", 5, required=HOST, cpu="1"), queue="tas-lq-a",
                   held_in="tas-cq-a", held=[Held("one", "tas-default", [(["x1"], 5)])]),
                wl("b1", pset("one", 4, preferred=HOST, cpu="1"), queue="tas-lq-b")),
        want_pending={
            "b1": "couldn't assign flavors to pod set one: insufficient unused quota for cpu in "
            "flavor tas-default, 1 more needed"
        },
        want_preempted={"a1-admitted"},
    ),
    "reclaim within cohort; single workload is preempted out three candidates": Case(
        _cohort([CQ_A, CQ_B],
                wl("a1-admitted", pset("one", 5, required=HOST, cpu="1"), queue="tas-lq-a",
                   priority=1, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["x1"], 5)])]),
                wl("a2-admitted", pset("one", 2, required=HOST, cpu="1"), queue="tas-lq-a",
                   priority=2, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["y1"], 2)])]),
                wl("a3-admitted", pset("one", 1, required=HOST, cpu="1"), queue="tas-lq-a",
                   priority=2, held_in="tas-cq-a",
                   held=[Held("one", "tas-default", [(["y1"], 1)])]),
                wl("b1", pset("one", 3, preferred=HOST, cpu="1"), queue="tas-lq-b", priority=3)),
        want_pending={
            "b1": "couldn't assign flavors to pod set one: insufficient unused quota for cpu in "
            "flavor tas-default, 3 more needed"
        },
        want_preempted={"a1-admitted"},
    ),
    "workload with two PodSets exceeds node pods capacity": Case(
        Cluster([node("x1", cpu="2", pods=1)], [SINGLE], [TAS], [CQ_A],
                [wl("foo", pset("one", 1, required=HOST, cpu="1"),
                    pset("two", 1, required=HOST, cpu="1"), queue="tas-lq-a")],
                lqs=LQS),
        want_pending={
            "foo": 'couldn\'t assign flavors to pod set two: topology "tas-single-level" doesn\'t '
            "allow to fit any of 1 pod(s)"
        },
    ),
    "two small workloads considered; both get scheduled on different nodes": Case(
        _cohort([CQ_A, CQ_B],
                wl("a1", pset("one", 1, preferred=HOST, cpu="5"), queue="tas-lq-a", priority=2),
                wl("b1", pset("one", 1, preferred=HOST, memory="5"), queue="tas-lq-b",
                   priority=1)),
        want={"a1": {"one": [(("y1",), 1)]}, "b1": {"one": [(("x1",), 1)]}},
    ),
    "two small workloads considered; both get scheduled on the same node": Case(
        _cohort([CQ_A, CQ_B],
                wl("a1", pset("one", 1, preferred=HOST, cpu="1"), queue="tas-lq-a", priority=2),
                wl("b1", pset("one", 2, preferred=HOST, cpu="1"), queue="tas-lq-b", priority=1)),
        want={"a1": {"one": [(("x1",), 1)]}, "b1": {"one": [(("x1",), 2)]}},
    ),
    "two small workloads considered; there is only space for one of them on the initial node; "
    "TASRecomputeAssignmentWithinSchedulingCycle enabled": Case(
        _cohort([CQ_A, CQ_B],
                wl("a1", pset("one", 1, preferred=HOST, cpu="1"), queue="tas-lq-a", priority=2),
                wl("b1", pset("one", 3, preferred=HOST, cpu="1"), queue="tas-lq-b", priority=1)),
        want={"a1": {"one": [(("x1",), 1)]}, "b1": {"one": [(("y1",), 3)]}},
    ),
    "preempting workload with targets reserves capacity so that lower priority workload cannot "
    "use it; TASRecomputeAssignmentWithinSchedulingCycle enabled": Case(
        Cluster([node("y1", cpu="5", memory="3Gi")], [SINGLE], [TAS],
                [_no_borrowing_cq("LowerPriority", "Any"), CQ_B],
                [wl("a1-admitted", pset("one", 2, required=HOST, cpu="1"), queue="tas-lq-a",
                    priority=1, held_in="tas-cq-a",
                    held=[Held("one", "tas-default", [(["y1"], 2)])]),
                 wl("a2", pset("one", 4, preferred=HOST, cpu="1"), queue="tas-lq-a", priority=2),
                 wl("b1", pset("one", 3, preferred=HOST, cpu="1"), queue="tas-lq-b", priority=1)],
                lqs=LQS),
        want_pending={
            "a2": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" allows '
            "to fit only 3 out of 4 pod(s)",
            # Recomputed on the cycle's snapshot (a2's reservation held), as Kueue does.
            "b1": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t '
            "allow to fit any of 3 pod(s)",
        },
        want_preempted={"a1-admitted"},
    ),
    "preempting workload without targets reserves capacity so that lower priority workload "
    "cannot use it; TASRecomputeAssignmentWithinSchedulingCycle enabled": Case(
        Cluster([node("y1", cpu="5", memory="3Gi")], [SINGLE], [TAS],
                [_no_borrowing_cq("LowerPriority", "LowerPriority"), CQ_B],
                [wl("a1-admitted", pset("one", 2, required=HOST, cpu="1"), queue="tas-lq-a",
                    priority=2, held_in="tas-cq-a",
                    held=[Held("one", "tas-default", [(["y1"], 2)])]),
                 wl("a2", pset("one", 4, preferred=HOST, cpu="1"), queue="tas-lq-a", priority=2),
                 wl("b1", pset("one", 3, preferred=HOST, cpu="1"), queue="tas-lq-b", priority=1)],
                lqs=LQS),
        want_pending={
            "a2": 'couldn\'t assign flavors to pod set one: topology "tas-single-level" allows '
            "to fit only 3 out of 4 pod(s)",
        },
        want_pending_contains={
            "b1": 'topology "tas-single-level" doesn\'t allow to fit any of 3 pod(s)',
        },
    ),
    "two workloads considered; both overlapping in the initial flavor assignment; "
    "TASRecomputeAssignmentWithinSchedulingCycle enabled": Case(
        _cohort([CQ_A, CQ_B],
                wl("a1", pset("one", 1, preferred=HOST, cpu="2"), queue="tas-lq-a", priority=2),
                wl("b1", pset("one", 1, preferred=HOST, cpu="2"), queue="tas-lq-b", priority=1)),
        want={"a1": {"one": [(("x1",), 1)]}, "b1": {"one": [(("y1",), 1)]}},
    ),
    "two workloads considered; there is enough space only for the first": Case(
        _cohort([CQ_A, CQ_B],
                wl("a1", pset("one", 5, preferred=HOST, cpu="1"), queue="tas-lq-a", priority=2),
                wl("b1", pset("one", 5, preferred=HOST, cpu="1"), queue="tas-lq-b", priority=1)),
        want={"a1": {"one": [(("y1",), 5)]}},
        want_pending={"b1": "Workload no longer fits after processing another workload"},
    ),
}


# Kueue's wantEvents reason per pending workload (the QuotaReserved=False reason), by case name.
KUEUE_REASONS: dict[str, dict[str, str]] = {
    # Kueue: WaitingForPreemptedWorkloads (the case's comment above).
    "preemption; TAS uses podspec memory for fit": {"foo": "TopologyPlacementFailed"},
    "workload requests topology level which is not present in topology": {
        "foo": "NoMatchingFlavor"},
    "workload does not get scheduled as it does not fit within the node capacity": {
        "foo": "TopologyPlacementFailed"},
    "workload does not get scheduled as the node capacity is already used by another TAS workload":
        {"foo": "WaitingForQuota"},
    "workload does not get scheduled as the node capacity is already used by a non-TAS pod": {
        "foo": "TopologyPlacementFailed"},
    "workload does not get scheduled as node capacity is completely used by non-TAS pod": {
        "foo": "TopologyPlacementFailed"},
    "workload with multiple PodSets requesting the same TAS flavor; multiple levels": {
        "foo": "TopologyPlacementFailed"},
    "workload does not get scheduled as the node capacity (.status.allocatable['pods']) is "
    "already used by non-TAS and TAS workloads": {"foo": "WaitingForQuota"},
    "does not admit workload when node does not match required affinity": {
        "foo": "TopologyPlacementFailed"},
    "multi-layer topology: host slice rounding makes rack slice impossible; NoFit": {
        "foo": "TopologyPlacementFailed"},
    "only low priority workload is preempted": {"foo": "WaitingForPreemptedWorkloads"},
    "With pods count usage pressure on nodes: only low priority workload is preempted": {
        "high-priority-waiting": "WaitingForPreemptedWorkloads"},
    "low priority workload is preempted, mid-priority workload survives": {
        "foo": "WaitingForPreemptedWorkloads"},
    "low priority workload is preempted even though there is enough capacity, but fragmented": {
        "foo": "WaitingForPreemptedWorkloads"},
    "TAS disabled, preemption succeeds even with ResourceFlavor topologyName": {
        "high-priority": "WaitingForPreemptedWorkloads"},
    "sibling-flavor usage on the shared node forces same-flavor preemption": {
        "w3-pending": "WaitingForPreemptedWorkloads"},
    "workload with equal priority awaits for other workloads to complete": {
        "mid-priority-waiting": "WaitingForQuota"},
    "reclaim within cohort; single workload is preempted out three candidates": {
        "b1": "WaitingForPreemptedWorkloads"},
    "workload with two PodSets exceeds node pods capacity": {"foo": "TopologyPlacementFailed"},
    "reclaim within cohort; single borrowing workload gets preempted": {
        "b1": "WaitingForPreemptedWorkloads"},
    "preempting workload with targets reserves capacity so that lower priority workload cannot "
    "use it; TASRecomputeAssignmentWithinSchedulingCycle enabled": {
        "a2": "WaitingForPreemptedWorkloads", "b1": "WaitingForQuota"},
    "preempting workload without targets reserves capacity so that lower priority workload "
    "cannot use it; TASRecomputeAssignmentWithinSchedulingCycle enabled": {
        "a2": "WaitingForQuota", "b1": "WaitingForQuota"},
    "two workloads considered; there is enough space only for the first": {
        "b1": "WaitingForQuota"},
}


def _check(case: Case, name: str = "", reasons: dict[str, str] | None = None) -> None:
    result = run(case.cluster)
    got = placements(result)
    assert got == case.want
    for a in result.admitted:
        wl_name = a.workload.split("/", 1)[1]
        for ps in a.pod_sets:
            want_flavor = case.want_flavors.get(wl_name, {}).get(ps.name)
            if want_flavor is not None:
                assert set(ps.flavors.values()) == {want_flavor}, (wl_name, ps.flavors)
    pending = {p.workload.split("/", 1)[1]: p.message for p in result.pending}
    for name, prefix in case.want_pending.items():
        assert name in pending, f"{name} not pending: {sorted(pending)}"
        assert pending[name].startswith(prefix), pending[name]
    for name, part in case.want_pending_contains.items():
        assert name in pending, f"{name} not pending: {sorted(pending)}"
        assert part in pending[name], pending[name]
    assert {p.victim.split("/", 1)[1] for p in result.preempted} == case.want_preempted
    reasons = {p.workload.split("/", 1)[1]: str(p.reason) for p in result.pending}
    want_reasons = reasons if reasons is not None else KUEUE_REASONS.get(name, {})
    for wl_name, reason in want_reasons.items():
        assert reasons.get(wl_name) == reason, (wl_name, reasons)


@pytest.mark.parametrize("name", sorted(SCHEDULE_FOR_TAS))
def test_schedule_for_tas(name: str) -> None:
    _check(SCHEDULE_FOR_TAS[name], name)


@pytest.mark.parametrize("name", sorted(SCHEDULE_FOR_TAS_PREEMPTION))
def test_schedule_for_tas_preemption(name: str) -> None:
    _check(SCHEDULE_FOR_TAS_PREEMPTION[name], name)


@pytest.mark.parametrize("name", sorted(SCHEDULE_FOR_TAS_COHORTS))
def test_schedule_for_tas_cohorts(name: str) -> None:
    _check(SCHEDULE_FOR_TAS_COHORTS[name], name)
