"""Parity with Kueue's delayed topology requests (pkg/scheduler/scheduler_tas_test.go).

A topology-aware pod set whose flavor has a ProvisioningRequest check reserves quota only
(``delayedTopologyRequest: Pending``, no placement) and is placed by a second pass once every
check is Ready (``Engine.place_delayed``, kqueue/engine/tas/delayed.py). Each case keeps the
name of Kueue's case: the ``TestScheduleForTAS`` cases with a ProvisioningRequest check and
``TestSecondPassSkipsWaitForPodsReadyBlock``'s "delayed topology assignment". The MultiKueue
cases (a ClusterQueue with a MultiKueue check: the worker places, the manager never does) keep
the names of test/integration/multikueue/tas/tas_test.go and of
pkg/cache/scheduler/clusterqueue_test.go's "TAS supports MultiKueue AdmissionCheck".

``first`` cases run one cycle on a pending workload (Kueue's workload without a reservation);
``second`` cases start from Kueue's ``ReserveQuotaAt`` with the check Ready and run the second
pass. ``want`` is Kueue's ``wantNewAssignments`` as (domain values, pods) per pod set, or None
for a pod set left without a placement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

import pytest

from kqueue.engine.checks import CheckRule
from kqueue.engine.engine import Engine
from kqueue.engine.readiness import PodsReadyConfig
from kqueue.engine.tas.delayed import DELAYED_PENDING, DELAYED_READY, PodSetUpdate, retry_delay
from kqueue.engine.types import (
    Admission,
    ClusterQueueName,
    FlavorName,
    PodSet,
    PodSetAssignment,
    PodSetName,
    ResourceName,
    Taint,
    Toleration,
    TopologyAssignment,
    Workload,
    WorkloadKey,
)

from .builders import make_cq, t
from .tas_support import (
    BLOCK,
    HOST,
    RACK,
    SINGLE,
    THREE,
    Cluster,
    Node,
    node,
    pset,
    tas_flavor,
    wl,
)

PROV = "prov-check"
TAS = tas_flavor()
SECOND = tas_flavor("tas-second")
SECOND = replace(SECOND, node_labels={"tas-node-second": "true"})
SINGLE_NODE = [node("x1", cpu="1", memory="1Gi")]
TWO_NODES = [node("x1", cpu="1"), node("y1", cpu="1", labels={"tas-node-second": "true"},
                                           tas=False)]
MAIN_PROV = replace(
    make_cq("tas-main").quota("tas-default", cpu="50", memory="50Gi").obj(),
    admission_checks=(CheckRule(PROV),),
)


def _two_flavors(on_flavors: frozenset[str] = frozenset()) -> object:
    cq = make_cq("tas-main").quota("tas-default", cpu="50").quota("tas-second", cpu="50").obj()
    return replace(cq, admission_checks=(CheckRule(PROV, on_flavors),))


@dataclass(frozen=True)
class Reserved:
    """A pod set's first-pass assignment: its flavor, and its placement (None: delayed)."""

    pod_set: str
    flavor: str
    domains: Sequence[tuple[Sequence[str], int]] | None = None


def reserved(w: Workload, *held: Reserved) -> Workload:
    """``w`` holding quota as Kueue's ``ReserveQuotaAt`` with the delayed pod sets Pending."""
    by_name = {ps.name: ps for ps in w.pod_sets}
    pod_sets = []
    for h in held:
        ps = by_name[PodSetName(h.pod_set)]
        pod_sets.append(PodSetAssignment(
            ps.name,
            {r: FlavorName(h.flavor) for r in ps.requests},
            {r: v * ps.count for r, v in ps.requests.items()},
            ps.count,
            None if h.domains is None else TopologyAssignment(
                (HOST,), tuple((tuple(v), n) for v, n in h.domains)
            ),
            DELAYED_PENDING if h.domains is None else None,
        ))
    admission = Admission(ClusterQueueName("tas-main"), tuple(pod_sets), t(0),
                          awaiting_checks=True)
    return replace(w, admission=admission)


Want = dict[str, tuple[list[tuple[tuple[str, ...], int]] | None, str | None]]


@dataclass
class Case:
    cluster: Cluster
    # pod set -> (placement or None, delayedTopologyRequest)
    want: Want = field(default_factory=dict)


def _cluster(nodes, flavors, cq, workload) -> Cluster:  # type: ignore[no-untyped-def]
    return Cluster(list(nodes), [SINGLE], list(flavors), [cq], [workload],
                   checks=[PROV], provisioning=[PROV])


FIRST_PASS: dict[str, Case] = {
    "workload in CQ with ProvisioningRequest gets QuotaReserved only": Case(
        _cluster([], [TAS], MAIN_PROV, wl("foo", pset("one", 1, required=HOST, cpu="1"))),
        want={"one": (None, DELAYED_PENDING)},
    ),
    # No topology request: implied by the TAS-only ClusterQueue, and delayed as well.
    "workload in CQ with ProvisioningRequest gets QuotaReserved only; implicit defaulting": Case(
        _cluster([], [TAS], MAIN_PROV, wl("foo", pset("one", 1, cpu="1"))),
        want={"one": (None, DELAYED_PENDING)},
    ),
}

SECOND_PASS: dict[str, Case] = {
    "workload in CQ with ProvisioningRequest; second pass; baseline scenario": Case(
        _cluster(SINGLE_NODE, [TAS], MAIN_PROV, reserved(
            wl("foo", pset("one", 1, required=HOST, cpu="1")), Reserved("one", "tas-default"))),
        want={"one": ([(("x1",), 1)], DELAYED_READY)},
    ),
    # The second pass does not fit the quota again: the reservation already holds all of it.
    "workload in CQ with ProvisioningRequest; second pass; multi-resource workload fully "
    "consumes quota": Case(
        _cluster(SINGLE_NODE, [TAS], replace(
            make_cq("tas-main").quota("tas-default", cpu="1", memory="1Gi").obj(),
            admission_checks=(CheckRule(PROV),),
        ), reserved(wl("foo", pset("one", 1, required=HOST, cpu="1", memory="1Gi")),
                    Reserved("one", "tas-default"))),
        want={"one": ([(("x1",), 1)], DELAYED_READY)},
    ),
    # 26 of 50 units of quota: not counted twice.
    "large workload in CQ with ProvisioningRequest; second pass": Case(
        _cluster([node("x1", cpu="50", memory="50Gi", pods=50)], [TAS], MAIN_PROV, reserved(
            wl("foo", pset("one", 26, preferred=HOST, cpu="1")), Reserved("one", "tas-default"))),
        want={"one": ([(("x1",), 26)], DELAYED_READY)},
    ),
    "workload in CQ with ProvisioningRequest when two TAS flavors; second pass": Case(
        _cluster(TWO_NODES, [TAS, SECOND], _two_flavors(), reserved(
            wl("foo", pset("one", 1, required=HOST, cpu="1")), Reserved("one", "tas-second"))),
        want={"one": ([(("y1",), 1)], DELAYED_READY)},
    ),
    "workload in CQ with two TAS flavors - one with ProvisioningRequest, one regular; second "
    "pass": Case(
        _cluster(TWO_NODES, [TAS, SECOND], _two_flavors(frozenset({"tas-second"})), reserved(
            wl("foo", pset("one", 1, required=HOST, cpu="1"),
               pset("two", 1, required=HOST, cpu="1")),
            Reserved("one", "tas-default", [(["x1"], 1)]), Reserved("two", "tas-second"))),
        want={"one": ([(("x1",), 1)], None), "two": ([(("y1",), 1)], DELAYED_READY)},
    ),
    "workload in CQ with ProvisioningRequest when two TAS flavors; second pass; implicit "
    "defaulting": Case(
        _cluster(TWO_NODES, [TAS, SECOND], _two_flavors(), reserved(
            wl("foo", pset("one", 1, cpu="1")), Reserved("one", "tas-second"))),
        want={"one": ([(("y1",), 1)], DELAYED_READY)},
    ),
}


def _got(admission: Admission) -> Want:
    return {
        ps.name: (
            [(tuple(v), n) for v, n in ps.topology.domains] if ps.topology else None,
            ps.delayed_topology,
        )
        for ps in admission.pod_sets
    }


@pytest.mark.parametrize("name", list(FIRST_PASS))
def test_schedule_for_tas_delayed_first_pass(name: str) -> None:
    case = FIRST_PASS[name]
    engine = case.cluster.engine()
    result = engine.schedule(t(1))
    assert [a.workload for a in result.admitted] == ["default/foo"], result.pending
    admission = result.admitted[0].admission
    assert _got(admission) == case.want
    # QuotaReserved only: the quota is held, the workload waits for its check.
    assert admission.awaiting_checks
    assert engine.holds_quota(WorkloadKey("default/foo"))


@pytest.mark.parametrize("name", list(SECOND_PASS))
def test_schedule_for_tas_delayed_second_pass(name: str) -> None:
    case = SECOND_PASS[name]
    engine = case.cluster.engine()
    key = WorkloadKey("default/foo")
    usage_before = dict(engine.usage(ClusterQueueName("tas-main")))
    got = engine.place_delayed(key)
    assert isinstance(got, Admission), got
    assert _got(got) == case.want
    # The quota is not counted twice, and the placement is held at once.
    assert dict(engine.usage(ClusterQueueName("tas-main"))) == usage_before
    held = engine.admitted_workload(key)
    assert held is not None and held.admission == got
    # Nothing waits any more: a second call has nothing to place.
    assert engine.place_delayed(key) is None


def test_delayed_topology_assignment() -> None:
    """Kueue's TestSecondPassSkipsWaitForPodsReadyBlock "delayed topology assignment": the
    workload placed is itself not ready yet; waitForPodsReady's admission block must not stop
    its second pass nor take its reservation."""
    cq = replace(make_cq("tas-main").quota("tas-default", cpu="50").obj(),
                 admission_checks=(CheckRule(PROV),))
    cluster = Cluster(
        [node("x1", cpu="1"), node("x2", cpu="1")], [SINGLE], [TAS], [cq],
        [reserved(wl("wl", pset("one", 1, required=HOST, cpu="1")),
                  Reserved("one", "tas-default"))],
        checks=[PROV], provisioning=[PROV],
    )
    engine = cluster.engine(pods_ready=PodsReadyConfig(timeout=timedelta(minutes=5)))
    key = WorkloadKey("default/wl")
    got = engine.place_delayed(key)
    assert isinstance(got, Admission), got
    (psa,) = got.pod_sets
    assert psa.topology is not None and psa.delayed_topology == DELAYED_READY
    assert psa.topology.pod_count() == 1
    assert engine.holds_quota(key)


def test_second_pass_without_room_says_why() -> None:
    """No node fits the delayed pod set: the second pass returns the reason (the caller evicts)
    and the workload keeps its first-pass admission meanwhile."""
    cluster = _cluster([node("x1", cpu="1")], [TAS], MAIN_PROV, reserved(
        wl("foo", pset("one", 2, required=HOST, cpu="1")), Reserved("one", "tas-default")))
    engine = cluster.engine()
    key = WorkloadKey("default/foo")
    got = engine.place_delayed(key)
    assert isinstance(got, str)
    assert got.startswith("couldn't assign flavors to pod set one: ")
    held = engine.admitted_workload(key)
    assert held is not None and held.admission.pod_sets[0].delayed_topology == DELAYED_PENDING


def test_custom_check_is_not_delayed() -> None:
    """A check that does not provision leaves the placement to the first pass."""
    cluster = Cluster(SINGLE_NODE, [SINGLE], [TAS], [MAIN_PROV],
                      [wl("foo", pset("one", 1, required=HOST, cpu="1"))], checks=[PROV])
    result = cluster.engine().schedule(t(1))
    assert _got(result.admitted[0].admission) == {"one": ([(("x1",), 1)], None)}


def test_second_pass_retry_backoff() -> None:
    """Kueue's secondPassQueue backoff: 1 s, doubling, at most 30 s."""
    assert [retry_delay(i).total_seconds() for i in (1, 2, 3, 5, 6, 40)] == [
        1, 2, 4, 16, 30, 30
    ]


MK = "mk-check"
MAIN_MK = replace(
    make_cq("tas-main").quota("tas-default", cpu="5").obj(), admission_checks=(CheckRule(MK),)
)


def _manager(nodes: Sequence[Node], workload: Workload) -> Cluster:
    """A MultiKueue manager: a topology-aware flavor, a MultiKueue check on the ClusterQueue."""
    return Cluster(list(nodes), [SINGLE], [TAS], [MAIN_MK], [workload],
                   checks=[MK], multikueue=[MK])


def test_tas_supports_multikueue_admission_check() -> None:
    """Kueue's clusterqueue_test.go "TAS supports MultiKueue AdmissionCheck": a topology-aware
    ClusterQueue with a MultiKueue check is active."""
    engine = _manager([], wl("foo", pset("one", 1, required=HOST, cpu="1"))).engine()
    assert engine.inactive(ClusterQueueName("tas-main")) is None


@pytest.mark.parametrize("nodes", [[], SINGLE_NODE], ids=["no nodes", "a node of its own"])
def test_multikueue_should_admit_workload_which_fits_in_a_required_topology_domain(
    nodes: Sequence[Node],
) -> None:
    """Kueue's multikueue/tas "Topology has a single level" "should admit workload which fits
    in a required topology domain", on the manager: the pod set reserves quota with
    ``delayedTopologyRequest: Pending`` and no placement, whether or not the manager has nodes;
    once the MultiKueue check is Ready (the worker admitted and placed it) it is marked Ready,
    still without a placement, and the quota is not counted twice."""
    engine = _manager(nodes, wl("foo", pset("one", 1, required=HOST, cpu="1"))).engine()
    result = engine.schedule(t(1))
    assert [a.workload for a in result.admitted] == ["default/foo"], result.pending
    first = result.admitted[0].admission
    assert _got(first) == {"one": (None, DELAYED_PENDING)}
    assert first.awaiting_checks
    key = WorkloadKey("default/foo")
    usage = dict(engine.usage(ClusterQueueName("tas-main")))
    got = engine.place_delayed(key)
    assert isinstance(got, Admission), got
    assert _got(got) == {"one": (None, DELAYED_READY)}
    assert dict(engine.usage(ClusterQueueName("tas-main"))) == usage
    held = engine.admitted_workload(key)
    assert held is not None and held.admission == got
    assert engine.place_delayed(key) is None


def test_multikueue_manager_places_nothing_on_its_nodes() -> None:
    """The manager's own nodes take no pods of a MultiKueue workload: a second workload that
    asks for the whole node still reserves quota (its placement is the worker's as well)."""
    cluster = _manager(SINGLE_NODE, wl("foo", pset("one", 1, required=HOST, cpu="1")))
    cluster.workloads = [*cluster.workloads,
                         wl("bar", pset("one", 1, required=HOST, cpu="1"), created=1)]
    engine = cluster.engine()
    # One head of the ClusterQueue per cycle.
    admitted = [a for cycle in (2, 3) for a in engine.schedule(t(cycle)).admitted]
    assert sorted(a.workload for a in admitted) == ["default/bar", "default/foo"]
    assert all(_got(a.admission) == {"one": (None, DELAYED_PENDING)} for a in admitted)


def _manager_without_topology(workload: Workload) -> Cluster:
    """A MultiKueue manager with no Topology object and no nodes: the workers have them."""
    return Cluster([], [], [TAS], [MAIN_MK], [workload], checks=[MK], multikueue=[MK])


def test_a_multikueue_manager_needs_no_topology() -> None:
    """Kueue's isTASViolated skips the Topology check when the ClusterQueue has a MultiKueue
    check (topology runs on the workers): the ClusterQueue is active without the Topology its
    flavor names, its topology-aware pod sets reserve quota with the placement Pending and are
    marked Ready once the check is. Without the MultiKueue check it is inactive."""
    engine = _manager_without_topology(wl("foo", pset("one", 1, required=HOST, cpu="1"))).engine()
    assert engine.inactive(ClusterQueueName("tas-main")) is None
    result = engine.schedule(t(1))
    assert [a.workload for a in result.admitted] == ["default/foo"], result.pending
    assert _got(result.admitted[0].admission) == {"one": (None, DELAYED_PENDING)}
    got = engine.place_delayed(WorkloadKey("default/foo"))
    assert isinstance(got, Admission), got
    assert _got(got) == {"one": (None, DELAYED_READY)}

    plain = Cluster([], [], [TAS], [replace(MAIN_MK, admission_checks=())],
                    [wl("foo", pset("one", 1, required=HOST, cpu="1"))]).engine()
    inactive = plain.inactive(ClusterQueueName("tas-main"))
    assert inactive is not None and "references missing Topology" in inactive.message


POOL = {"pool": "provisioned"}
# x1 is the tightest fit, but only y1 is the node the ProvisioningRequest made (its label).
PROVISIONED = [node("x1", cpu="1"), node("y1", cpu="2", labels=POOL,
                                         taints=[Taint("pool", "provisioned", "NoSchedule")])]


def _prov_second_pass(*pod_sets: PodSet) -> Engine:
    return _cluster(PROVISIONED, [TAS], MAIN_PROV, reserved(
        wl("foo", *pod_sets), *(Reserved(ps.name, "tas-default") for ps in pod_sets)
    )).engine()


def test_second_pass_considers_only_the_nodes_the_pod_set_updates_select() -> None:
    """Kueue merges the Ready checks' podSetUpdates into the pod set before the second pass
    places it (tas_flavor_snapshot.go, FindTopologyAssignmentsForFlavor; the updates a
    ProvisioningRequestConfig's ``podSetUpdates.nodeSelector`` asks for, as in Kueue's
    singlecluster tas_test.go "ProvisioningRequest is used" setup): the pod set goes to the
    provisioned node, tolerating its taint, not to the tightest one."""
    engine = _prov_second_pass(pset("one", 1, required=HOST, cpu="1"))
    update = PodSetUpdate(PodSetName("one"), POOL,
                          (Toleration("pool", "Equal", "provisioned", "NoSchedule"),))
    got = engine.place_delayed(WorkloadKey("default/foo"), [update])
    assert isinstance(got, Admission), got
    assert _got(got) == {"one": ([(("y1",), 1)], DELAYED_READY)}


def test_second_pass_without_pod_set_updates_takes_the_tightest_node() -> None:
    engine = _prov_second_pass(pset("one", 1, required=HOST, cpu="1"))
    got = engine.place_delayed(WorkloadKey("default/foo"))
    assert isinstance(got, Admission), got
    assert _got(got) == {"one": ([(("x1",), 1)], DELAYED_READY)}


def test_second_pass_pod_set_updates_of_another_pod_set_do_not_narrow() -> None:
    engine = _prov_second_pass(pset("one", 1, required=HOST, cpu="1"))
    got = engine.place_delayed(WorkloadKey("default/foo"), [PodSetUpdate(PodSetName("two"), POOL)])
    assert isinstance(got, Admission) and _got(got) == {"one": ([(("x1",), 1)], DELAYED_READY)}


def test_second_pass_with_no_matching_node_keeps_the_reservation() -> None:
    """The update selects nodes none of which has room: the pass fails with why, and the
    workload keeps its reservation (retried after the backoff)."""
    engine = _prov_second_pass(pset("one", 3, required=HOST, cpu="1"))
    update = PodSetUpdate(PodSetName("one"), POOL,
                          (Toleration("pool", "Equal", "provisioned", "NoSchedule"),))
    key = WorkloadKey("default/foo")
    got = engine.place_delayed(key, [update])
    # Only y1 counts (2 pods); x1, outside the selector, takes none though it has room for one.
    assert isinstance(got, str) and "allows to fit only 2 out of 3" in got, got
    assert "x1 fits 0" in got
    assert engine.holds_quota(key)


def test_second_pass_refuses_a_pod_set_update_conflicting_with_the_pod_set() -> None:
    """Kueue's podset Merge refuses a nodeSelector key given another value: the placement
    fails with Kueue's "invalid podSetUpdate" message."""
    engine = _prov_second_pass(
        pset("one", 1, required=HOST, cpu="1", selector={"pool": "other"}))
    got = engine.place_delayed(WorkloadKey("default/foo"), [PodSetUpdate(PodSetName("one"), POOL)])
    assert got == (
        "invalid podSetUpdate for PodSet one, error: invalid admission check PodSetUpdate: "
        "conflict for nodeSelector: conflict for key=pool, value1=other, value2=provisioned"
    )


def test_should_admit_workload_targeting_the_dedicated_newly_provisioned_nodes() -> None:
    """Kueue's singlecluster tas_test.go "ProvisioningRequest is used" "should admit workload
    targeting the dedicated newly provisioned nodes": of the two nodes provisioned, only x1
    carries the value the ProvisioningRequest's class details give the podSetUpdates'
    nodeSelector; x2 is the tighter fit, yet the pod set (preferring a rack) goes to x1."""
    key_label = "dedicated-selector-key"
    nodes = [
        node("x2", cpu="2", memory="1Gi",
             labels={key_label: "dedicated-selector-value-abc", BLOCK: "b1", RACK: "r1"}),
        node("x1", cpu="2", memory="2Gi",
             labels={key_label: "dedicated-selector-value-xyz", BLOCK: "b1", RACK: "r2"}),
    ]
    nodes[0] = replace(nodes[0], allocatable={**nodes[0].allocatable, ResourceName("cpu"): 1000})
    flavor = tas_flavor(topo="tas-three-level")
    cq = replace(make_cq("tas-main").quota("tas-default", cpu="5").obj(),
                 admission_checks=(CheckRule(PROV),))
    engine = Cluster(nodes, [THREE], [flavor], [cq], [reserved(
        wl("wl1", pset("main", 1, preferred=RACK, cpu="1")), Reserved("main", "tas-default"))],
        checks=[PROV], provisioning=[PROV]).engine()
    update = PodSetUpdate(PodSetName("main"), {key_label: "dedicated-selector-value-xyz"})
    got = engine.place_delayed(WorkloadKey("default/wl1"), [update])
    assert isinstance(got, Admission), got
    assert _got(got) == {"main": ([(("x1",), 1)], DELAYED_READY)}
