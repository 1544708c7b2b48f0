"""Failed-node replacement (kqueue/engine/tas/replacement.py): Kueue's scheduler_tas_test.go
second-pass cases ("workload with unhealthyNode annotation; second pass; ...") and the node
failure timing of node_controller_test.go, ported by name."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from kqueue.engine.engine import Engine
from kqueue.engine.readiness import PodsReadyConfig, Readiness
from kqueue.engine.tas.replacement import (
    NotReplaced,
    Replaced,
    node_failed,
    replace_all,
)
from kqueue.engine.tas.topology import ClusterNodes, TopologyUsage, build_trees, per_pod_requests
from kqueue.engine.types import FlavorName, PodSet, TopologyAssignment, WorkloadKey

from .builders import make_cq, t
from .tas_support import (
    BLOCK,
    HOST,
    RACK,
    SINGLE,
    THREE,
    Cluster,
    Held,
    node,
    placements,
    pset,
    tas_flavor,
    wl,
)

FLAVOR = FlavorName("tas-default")


def default_nodes() -> ClusterNodes:
    """Kueue's defaultNodes of scheduler_tas_test.go (x0, the failed node, is gone)."""
    cluster = ClusterNodes()
    cluster.upsert_topology(THREE)
    for name, block, rack, cpu, mem in (
        ("x1", "b1", "r1", "1", "1Gi"),
        ("x2", "b1", "r2", "1", "1Gi"),
        ("x3", "b1", "r2", "1", "1Gi"),
        ("x4", "b1", "r2", "1", "1Gi"),
        ("x5", "b2", "r1", "1", "1Gi"),
        ("x6", "b2", "r2", "2", "4Gi"),
    ):
        cluster.upsert_node(node(name, cpu=cpu, memory=mem, labels={BLOCK: block, RACK: rack}))
    return cluster


@dataclass(frozen=True)
class Case:
    pod_sets: tuple[tuple[PodSet, tuple[tuple[str, int], ...]], ...]
    want: dict[str, tuple[tuple[str, int], ...]] | None  # None: evicted
    want_reason: str = ""
    lost: tuple[str, ...] = ("x0",)


CASES = {
    "workload with unhealthyNode annotation; second pass; baseline scenario": Case(
        ((pset("one", 1, preferred=HOST, cpu="1"), (("x0", 1),)),),
        {"one": (("x1", 1),)},
    ),
    "workload with unhealthyNode annotation; second pass; preferred; fit in different rack": Case(
        ((pset("one", 2, preferred=RACK, cpu="500m"), (("x0", 1), ("x1", 1))),),
        {"one": (("x1", 2),)},
    ),
    "workload with unhealthyNode annotation; second pass; preferred; no fit; FailFast": Case(
        ((pset("one", 1, preferred=RACK, cpu="3"), (("x0", 1),)),),
        None,
        "Workload was evicted as there was no replacement for unhealthy node(s): x0",
    ),
    "workload with unhealthyNode annotation; second pass; podspec constraints apply": Case(
        ((pset("one", 1, preferred=RACK, cpu="1", memory="2Gi"), (("x0", 1),)),),
        {"one": (("x6", 1),)},
    ),
    "workload with unhealthyNode annotation; second pass; required rack; fit": Case(
        ((pset("one", 2, required=RACK, cpu="1"), (("x0", 1), ("x2", 1))),),
        {"one": (("x2", 1), ("x3", 1))},
    ),
    "workload with unhealthyNode annotation; second pass; required rack for a single node; fit":
        Case(
            ((pset("one", 1, required=RACK, cpu="1"), (("x0", 1),)),),
            {"one": (("x1", 1),)},
        ),
    "workload with unhealthyNode annotation; second pass; required rack; no fit": Case(
        ((pset("one", 2, required=RACK, cpu="1"), (("x0", 1), ("x1", 1))),),
        None,
        "no node in b1/r1 has room for 1 pod(s) of pod set one (room for 0)",
    ),
    "workload with unhealthyNode annotation; second pass; two podsets": Case(
        (
            (pset("one", 1, preferred=HOST, cpu="1"), (("x0", 1),)),
            (pset("two", 1, preferred=HOST, cpu="1"), (("x1", 1),)),
        ),
        {"one": (("x2", 1),), "two": (("x1", 1),)},
    ),
    # kqueue: two pods lost on one node go to two nodes of the rack when none takes both.
    "required rack; two lost pods spread over the rack (kqueue)": Case(
        ((pset("one", 3, required=RACK, cpu="1"), (("x0", 2), ("x2", 1))),),
        {"one": (("x2", 1), ("x3", 1), ("x4", 1))},
    ),
    # node_controller_test.go: a second failed node evicts (one replacement at a time).
    "Two Nodes Unhealthy (NotReady), delay passed - workload evicted": Case(
        ((pset("one", 2, preferred=HOST, cpu="1"), (("x0", 1), ("x1", 1))),),
        None,
        "Workload eviction triggered due to multiple TAS assigned node failures, including: "
        "x0, x1",
        lost=("x1", "x0"),
    ),
    "workload with unhealthyNode annotation; second pass; preferred; no fit when using slices; "
    "FailFast": Case(
        ((pset("one", 2, preferred=BLOCK, slice_level=RACK, slice_size=2, cpu="1"),
          (("x0", 1), ("x1", 1))),),
        None,
        "Workload was evicted as there was no replacement for unhealthy node(s): x0",
    ),
    # Slices re-formed (Kueue's findReplacementAssignment): the unhealthy node is still in
    # the snapshot, its pods counted, except x7, which is gone.
    "workload with unhealthyNode; second pass; slices; baseline": Case(
        ((pset("one", 2, preferred=BLOCK, slice_level=RACK, slice_size=2, cpu="1"),
          (("x2", 1), ("x3", 1))),),
        {"one": (("x3", 1), ("x4", 1))}, lost=("x2",),
    ),
    "workload with unhealthyNode; second pass; slices; unhealthy node hosts incomplete slice":
    Case(
        ((pset("one", 8, preferred=BLOCK, slice_level=RACK, slice_size=8, cpu="250m"),
          (("x2", 4), ("x3", 4))),),
        {"one": (("x3", 4), ("x4", 4))}, lost=("x2",),
    ),
    "workload with unhealthyNode; second pass; slices; unhealthy node hosts whole slices": Case(
        ((pset("one", 12, required=BLOCK, slice_level=RACK, slice_size=4, cpu="250m"),
          (("x2", 4), ("x3", 4), ("x4", 4))),),
        {"one": (("x1", 4), ("x2", 4), ("x4", 4))}, lost=("x3",),
    ),
    "workload with unhealthyNode; second pass; slices; unhealthy node hosts whole slice and "
    "incomplete slice": Case(
        ((pset("one", 8, required=BLOCK, slice_level=RACK, slice_size=2, cpu="200m"),
          (("x1", 3), ("x2", 5))),),
        {"one": (("x2", 5), ("x3", 3))}, lost=("x1",),
    ),
    "workload with unhealthyNode; second pass; slices; unhealthy node hosts the whole workload":
    Case(
        ((pset("one", 4, required=RACK, slice_level=HOST, slice_size=2, cpu="250m"),
          (("x1", 4),)),),
        {"one": (("x5", 4),)}, lost=("x1",),
    ),
    "workload with unhealthyNode; second pass; slices; finds correct slice domain": Case(
        ((pset("one", 8, preferred=BLOCK, slice_level=BLOCK, slice_size=4, cpu="500m"),
          (("x1", 2), ("x3", 2), ("x5", 2), ("x7", 2))),),
        {"one": (("x1", 2), ("x3", 2), ("x5", 2), ("x6", 2))}, lost=("x7",),
    ),
    # kqueue's own: a broken slice whose domain has no room evicts, naming the domain.
    "slices: no room in the broken slice's rack (kqueue)": Case(
        ((pset("one", 2, required=BLOCK, slice_level=RACK, slice_size=2, cpu="1"),
          (("x1", 1), ("x2", 1))),),
        None, "no room in b1/r1 for 1 pod(s) of pod set one", lost=("x2",),
    ),
    # Two slice layers: the broken rack slice is completed in its rack, by a whole host slice
    # of 2 (the innermost layer dividing the 2 missing pods), on the tightest host (x2).
    "multi-layer slices: the broken rack slice is completed in its rack (kqueue)": Case(
        ((pset("one", 4, required=BLOCK, layers=[(RACK, 4), (HOST, 2)], cpu="250m"),
          (("x2", 2), ("x3", 2))),),
        {"one": (("x2", 4),)}, lost=("x3",),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_second_pass_replacement(name: str) -> None:
    case = CASES[name]
    cluster = default_nodes()
    flavor = tas_flavor(topo=THREE.name)
    trees = build_trees(cluster, {FLAVOR: flavor})
    usage = TopologyUsage(trees)
    placed = []
    for ps, domains in case.pod_sets:
        ta = TopologyAssignment((HOST,), tuple(((h,), n) for h, n in domains))
        usage.add_assignment(FLAVOR, ta, per_pod_requests(ps))
        placed.append((FLAVOR, ps, ta))
    before = {f: {d: dict(v) for d, v in per.items()} for f, per in usage.usage.items()}
    got = replace_all(trees, usage, placed, list(case.lost))
    assert usage.usage == before  # the caller's usage is not changed
    if case.want is None:
        assert isinstance(got, NotReplaced)
        assert case.want_reason in got.reason
        return
    assert isinstance(got, dict)
    assert {ps: r.assignment.domains for ps, r in got.items()} == {
        ps: tuple(((h,), n) for h, n in d) for ps, d in case.want.items()
    }
    for r in got.values():
        assert isinstance(r, Replaced)
        assert all(h != "x0" for h, _ in r.moved)


# node_controller_test.go, with Kueue v0.19's defaults (TASReplaceNodeOnPodTermination on,
# TASReplaceNodeDueToNotReadyOverFixedTime off).
TIMING = {
    "Node Found and Healthy - not marked as unavailable": (True, True, 1, False),
    "Node Deleted - marked as unavailable": (False, None, 1, True),
    "NodeReady missing - marked as unavailable": (True, None, 1, True),
    "Node NotReady, pod running, not marked as unavailable, requeued": (True, False, 1, False),
    "Node NotReady, pod terminating, marked as unavailable": (True, False, 0, True),
    "Node NotReady, pod failed, marked as unavailable": (True, False, 0, True),
    "Node NotReady, 2 succeeded pods, 1 running pod -> waits": (True, False, 1, False),
}


@pytest.mark.parametrize("name", list(TIMING))
def test_node_failure_timing(name: str) -> None:
    exists, ready, running, want = TIMING[name]
    assert node_failed(exists=exists, ready=ready, pods_running_on_node=running) is want



def _replacement_race() -> tuple[Engine, WorkloadKey, dict[str, Replaced]]:
    """``replaced`` on x1, which failed (NotReady: kqueue replaces only a failed node), and
    ``contender`` pending; the replacement of x1 computed."""
    engine = Cluster(
        [node("x1", cpu="1", ready=False), node("x2", cpu="1"), node("x3", cpu="1")],
        [SINGLE], [tas_flavor()], [make_cq("tas-main").quota("tas-default", cpu="50").obj()],
        [
            wl("replaced", pset("one", 1, required=HOST, cpu="1"), held_in="tas-main",
               held=[Held("one", "tas-default", [(["x1"], 1)])]),
            wl("contender", pset("one", 1, required=HOST, cpu="1"), created=1),
        ],
    ).engine()
    key = WorkloadKey("default/replaced")
    got = engine.replace_failed_nodes(key, ["x1"])
    assert isinstance(got, dict)
    assert got["one"].assignment.domains == ((("x2",), 1),)
    return engine, key, got


def test_second_pass_replacement_must_not_take_a_domain_claimed_by_another_workload_in_the_same_cycle() -> None:
    """Kueue's "second pass replacement must not take a domain claimed by another workload in
    the same cycle": the replacement of ``replaced``'s failed node takes x2, and ``contender``
    then lands on x3. kqueue replaces outside the cycle (node_health.py): the claim is held in
    the engine (``claim_replacement``) before the new assignment is written, so a cycle that
    runs before it comes back sees x2 taken."""
    engine, key, got = _replacement_race()
    engine.claim_replacement(key, got)
    assert placements(engine.schedule(t(1))) == {"contender": {"one": [(("x3",), 1)]}}


def test_without_the_claim_the_contender_would_take_the_replacement_s_node() -> None:
    # What the claim prevents: both pinned to x2, which holds one pod.
    engine, _, _ = _replacement_race()
    assert placements(engine.schedule(t(1))) == {"contender": {"one": [(("x2",), 1)]}}


def test_second_pass_skips_wait_for_pods_ready_block_failed_node_replacement() -> None:
    """Kueue's TestSecondPassSkipsWaitForPodsReadyBlock, "failed node replacement": with
    waitForPodsReady blocking admissions and the workload itself not ready (its pod on the
    failed node never ran), the replacement is still made, off the failed node, and the
    workload keeps its admission. kqueue replaces outside the cycle, so the block, which holds
    the cycle's new admissions, never applies to it."""
    engine = Cluster(
        [node("x1", cpu="1", ready=False), node("x2", cpu="1")],
        [SINGLE], [tas_flavor()], [make_cq("tas-main").quota("tas-default", cpu="50").obj()],
        [wl("wl", pset("one", 1, required=HOST, cpu="1"), held_in="tas-main",
            held=[Held("one", "tas-default", [(["x1"], 1)])]),
         wl("blocked", pset("one", 1, required=HOST, cpu="1"), created=1)],
    ).engine()
    engine.readiness = Readiness(PodsReadyConfig(timeout=timedelta(minutes=5),
                                                 block_admission=True))
    key = WorkloadKey("default/wl")
    engine.pods_ready(key, False, t(1))
    # The block holds: the other pending workload is not admitted while wl is not ready.
    assert placements(engine.schedule(t(2))) == {}
    got = engine.replace_failed_nodes(key, ["x1"])
    assert isinstance(got, dict)
    assert got["one"].assignment.domains == ((("x2",), 1),)
    engine.claim_replacement(key, got)
    assert engine.holds_quota(key)
