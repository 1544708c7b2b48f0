"""Topology-aware scheduling in the controller: slimmed Node and Pod copies, released pods
pinned to their assigned domains (counted per domain), the kqueue.io/tas label."""

from __future__ import annotations

from typing import Any

from kqueue.api.integrations.declaration import Ranks
from kqueue.api.integrations.job import COMPLETION_INDEX_LABEL
from kqueue.api.v1alpha1 import ResourceFlavor, Workload, encode_assignment, parse_object
from kqueue.controller.gate import PodSetRelease, release_ops, ungate
from kqueue.controller.informer import Store
from kqueue.controller.integrations.release import pinned, pod_set_releases
from kqueue.controller.topology import pin, slim_node, slim_pod
from kqueue.engine import from_api

HOST = "kubernetes.io/hostname"


def _pod(name: str, selector: dict[str, str] | None = None, gated: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if gated:
        spec["schedulingGates"] = [{"name": "kqueue.io/admission"}]
    if selector:
        spec["nodeSelector"] = dict(selector)
    return {"metadata": {"name": name, "namespace": "ns", "labels": {"app": "x"}}, "spec": spec}


def test_slim_node_keeps_what_the_engine_reads() -> None:
    node = {
        "metadata": {"name": "n1", "labels": {HOST: "n1", "rack": "r1"}, "annotations": {"a": "b"}},
        "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"},
        "status": {
            "allocatable": {"cpu": "4", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "message": "kubelet ready"},
                           {"type": "MemoryPressure", "status": "False"}],
            "images": [{"names": ["big"], "sizeBytes": 1}],
        },
    }
    slim = slim_node(node)
    assert "images" not in slim["status"] and "annotations" not in slim["metadata"]
    assert from_api.node(slim) == from_api.node(node)


def test_slim_pod_keeps_requests_node_and_tas_label() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "labels": {"kqueue.io/tas": "true", "a": "b"}},
        "spec": {"nodeName": "n1", "volumes": [{"name": "v"}],
                 "containers": [{"name": "c", "image": "i", "env": [{"name": "X"}],
                                 "resources": {"requests": {"cpu": "500m"}}}]},
        "status": {"phase": "Running", "podIP": "1.2.3.4"},
    }
    slim = slim_pod(pod)
    assert slim["metadata"]["labels"] == {"kqueue.io/tas": "true"}
    assert "volumes" not in slim["spec"] and "podIP" not in slim["status"]
    assert from_api.bound_pod(slim) is None  # counted through its topology assignment
    del pod["metadata"]["labels"]["kqueue.io/tas"]
    bound = from_api.bound_pod(slim_pod(pod))
    assert bound is not None and bound.node == "n1" and bound.requests == {"cpu": 500}


def test_released_pods_are_pinned_per_domain_counting_running_ones() -> None:
    release = PodSetRelease(
        "main", 4, {"pool": "tas"}, domains=(({HOST: "a"}, 2), ({HOST: "b"}, 2)),
        labels={"kqueue.io/tas": "true"},
    )
    running = [_pod("r1", {"pool": "tas", HOST: "a"}, gated=False)]
    gated = [_pod(f"g{i}") for i in range(3)]
    got = [(p["metadata"]["name"], r.node_selector[HOST]) for p, r in pinned(release, running, gated)]
    assert got == [("g0", "a"), ("g1", "b"), ("g2", "b")]


def test_a_pod_whose_release_is_in_flight_counts_in_its_domain() -> None:
    """The informer still shows the released pod gated and without its selector: the domain it
    was pinned to must not be handed out again (two pods on one host, none on another)."""
    release = PodSetRelease("main", 2, {}, domains=(({HOST: "a"}, 1), ({HOST: "b"}, 1)))
    in_flight = _pod("g0")
    recorded = {HOST: "a"}
    got = pinned(release, [in_flight], [_pod("g1")], lambda p: recorded if p is in_flight else {})
    assert [(p["metadata"]["name"], r.node_selector) for p, r in got] == [("g1", {HOST: "b"})]


def test_ungate_adds_the_domain_selector_and_tas_label_in_one_patch() -> None:
    release = PodSetRelease("main", 1, {HOST: "a"}, labels={"kqueue.io/tas": "true"})
    pod = _pod("g")
    new = ungate(pod, release)
    assert new is not None
    ops = release_ops(pod, new)
    assert {"op": "add", "path": "/spec/nodeSelector", "value": {HOST: "a"}} in ops
    assert {"op": "add", "path": "/metadata/labels/kqueue.io~1tas", "value": "true"} in ops


def test_pod_set_releases_read_the_topology_assignment() -> None:
    wl = parse_object({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": [{"name": "main", "count": 3,
                              "template": {"spec": {"containers": [{"name": "c"}]}}}]},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": "tas"}, "count": 3,
            "topologyAssignment": encode_assignment(
                ["rack", HOST], [(["r1", "n1"], 2), (["r1", "n2"], 1)]).to_dict(),
        }]}},
    })
    assert isinstance(wl, Workload)
    flavors: Store[ResourceFlavor] = Store()
    (release,) = pod_set_releases(wl, flavors).values()
    assert release.domains == (({"rack": "r1", HOST: "n1"}, 2), ({"rack": "r1", HOST: "n2"}, 1))
    assert release.labels == {"kqueue.io/tas": "true"}
    assert pin(None) == ()


class _FakeInformer:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def add_handler(self, **kw: Any) -> None:
        self.handlers = kw


def _node_obj(name: str, ready: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {HOST: name}},
        "status": {"allocatable": {"cpu": "4", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_a_node_lost_under_admitted_workloads_is_reported() -> None:
    from kqueue.controller.topology import TopologyFeed, placed_on
    from kqueue.engine.engine import Engine

    informers: list[_FakeInformer] = []

    def factory(*_: Any, **__: Any) -> _FakeInformer:
        informers.append(_FakeInformer())
        return informers[-1]

    lost: list[tuple[str, str]] = []
    back: list[str] = []
    engine = Engine()
    feed = TopologyFeed(factory, lambda: engine, lambda: None,  # type: ignore[arg-type]
                        lambda n, w: lost.append((n, w)), back.append)
    feed.wire()
    nodes = informers[1].handlers
    cordoned = _node_obj("n1", True) | {"spec": {"unschedulable": True}}
    nodes["on_add"]("n1", _node_obj("n1", True))
    nodes["on_update"]("n1", _node_obj("n1", True), _node_obj("n1", True))  # nothing changed
    nodes["on_update"]("n1", _node_obj("n1", True), _node_obj("n1", False))
    nodes["on_update"]("n1", _node_obj("n1", False), _node_obj("n1", True))
    nodes["on_update"]("n1", _node_obj("n1", True), cordoned)
    nodes["on_update"]("n1", cordoned, _node_obj("n1", True))
    nodes["on_delete"]("n1", _node_obj("n1", False))
    assert lost == [("n1", "is no longer Ready"), ("n1", "was cordoned"), ("n1", "was deleted")]
    assert back == ["n1", "n1", "n1"]  # added, Ready again, uncordoned
    assert engine.topology_nodes() == (0, 0, 0)
    ta = encode_assignment([HOST], [(["n1"], 2), (["n2"], 1)])
    assert placed_on(ta, "n1") == 2 and placed_on(ta, "n3") == 0


def test_a_node_whose_blocking_taints_change_is_looked_at_again() -> None:
    """Kueue's node controller reconciles on a taint change (TASReplaceNodeOnNodeTaints);
    a PreferNoSchedule taint keeps no pod off and is left alone."""
    from kqueue.controller.topology import TopologyFeed
    from kqueue.engine.engine import Engine

    informers: list[_FakeInformer] = []

    def factory(*_: Any, **__: Any) -> _FakeInformer:
        informers.append(_FakeInformer())
        return informers[-1]

    lost: list[tuple[str, str]] = []
    engine = Engine()
    feed = TopologyFeed(factory, lambda: engine, lambda: None,  # type: ignore[arg-type]
                        lambda n, w: lost.append((n, w)), lambda _: None)
    feed.wire()
    nodes = informers[1].handlers
    plain = _node_obj("n1", True)
    prefer = plain | {"spec": {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}}
    evicting = plain | {"spec": {"taints": [{"key": "k", "effect": "NoExecute"}]}}
    nodes["on_add"]("n1", plain)
    nodes["on_update"]("n1", plain, prefer)
    nodes["on_update"]("n1", prefer, evicting)
    nodes["on_update"]("n1", evicting, plain)
    assert lost == [("n1", "changed its NoSchedule/NoExecute taints")] * 2


# Kueue's rank-based ungating (topology_ungater_test.go "ranks: ..." cases for batch/Job).
B1R1, B1R2, B2R1 = {"block": "b1", "rack": "r1"}, {"block": "b1", "rack": "r2"}, {
    "block": "b2", "rack": "r1"}
RANKED = PodSetRelease(
    "main", 5, {}, domains=((B1R1, 2), (B1R2, 1), (B2R1, 2)), ranks=Ranks(COMPLETION_INDEX_LABEL)
)


def _ranked(name: str, rank: int | str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    pod = _pod(name, selector, gated=selector is None)
    pod["metadata"]["labels"][COMPLETION_INDEX_LABEL] = str(rank)
    return pod


def _where(got: list[tuple[dict[str, Any], PodSetRelease]]) -> dict[str, tuple[str, str]]:
    return {p["metadata"]["name"]: (r.node_selector["block"], r.node_selector["rack"])
            for p, r in got}


def test_ranks_ungate_pods_according_to_their_ranks_for_batch_job_for_all_pods() -> None:
    """Kueue's "ranks: ungate pods according to their ranks for batch/Job - for all Pods":
    the oldest pods are not the lowest ranks; each goes to its rank's domain."""
    gated = [_ranked(f"p{r}", r) for r in (4, 2, 0, 3, 1)]
    assert _where(pinned(RANKED, [], gated)) == {
        "p0": ("b1", "r1"), "p1": ("b1", "r1"), "p2": ("b1", "r2"),
        "p3": ("b2", "r1"), "p4": ("b2", "r1"),
    }


def test_ranks_ungate_pods_according_to_their_ranks_for_batch_job_some_pods_already_scheduled(
) -> None:
    """Kueue's "ranks: ungate pods according to their ranks for batch/Job - some Pods already
    scheduled": p0 and p3 run in their ranks' domains; p1, p2 and p4 follow their ranks."""
    running = [_ranked("p0", 0, B1R1), _ranked("p3", 3, B2R1)]
    gated = [_ranked("p4", 4), _ranked("p2", 2), _ranked("p1", 1)]
    assert _where(pinned(RANKED, running, gated)) == {
        "p1": ("b1", "r1"), "p2": ("b1", "r2"), "p4": ("b2", "r1"),
    }


GREEDY = {"p0": ("b1", "r1"), "p1": ("b1", "r1"), "p2": ("b1", "r2")}


def test_ranks_gracefully_handle_situation_with_repeated_ranks() -> None:
    """Kueue's "ranks: gracefully handle situation with repeated ranks": oldest first."""
    gated = [_ranked("p0", 2), _ranked("p1", 2), _ranked("p2", 0)]
    assert _where(pinned(RANKED, [], gated)) == GREEDY


def test_ranks_out_of_range_pod_index_falls_back_to_greedy_assignment() -> None:
    """Kueue's "ranks: out-of-range pod index falls back to greedy assignment"."""
    gated = [_ranked("p0", 7), _ranked("p1", 1), _ranked("p2", 0)]
    assert _where(pinned(RANKED, [], gated)) == GREEDY


def test_ranks_topology_assignment_shorter_than_the_pod_set_count_falls_back_to_greedy() -> None:
    """Kueue's "ranks: TopologyAssignment shorter than the PodSet count falls back to greedy
    assignment": rank 3 has no domain when the assignment holds 3 pods."""
    short = PodSetRelease(
        "main", 4, {}, domains=((B1R1, 2), (B1R2, 1)), ranks=Ranks(COMPLETION_INDEX_LABEL)
    )
    gated = [_ranked("p0", 3), _ranked("p1", 1), _ranked("p2", 0)]
    assert _where(pinned(short, [], gated)) == GREEDY


def test_ranks_a_running_pod_outside_its_ranks_domain_falls_back_to_greedy() -> None:
    """Kueue's readRanksIfAvailable: a running pod must sit in its rank's domain (after a node
    replacement the domains are renumbered); else oldest first, around the running pods."""
    running = [_ranked("p3", 3, B1R1)]
    gated = [_ranked("p0", 0), _ranked("p1", 1)]
    assert _where(pinned(RANKED, running, gated)) == {"p0": ("b1", "r1"), "p1": ("b1", "r2")}


def test_pods_without_ranks_are_pinned_oldest_first() -> None:
    gated = [_pod(f"p{i}") for i in range(3)]
    assert _where(pinned(RANKED, [], gated)) == GREEDY
