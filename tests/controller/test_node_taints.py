"""A tainted node under an admitted topology-aware workload (Kueue's TASReplaceNodeOnNodeTaints,
kqueue/controller/node_health.py), and failed-node replacement switched off.

Ported from Kueue's ``TestNodeFailureReconciler`` and ``TestGetWorkloadStatus``
(``pkg/controller/tas/node_controller_test.go``) by name: Kueue's "Unhealthy" is a node kqueue
replaces (``node_failed``), "Healthy (wait)" one it waits on. Every lost node is listed in
``status.unhealthyNodes`` at once in kqueue (docs/topology.md), except one whose taint the pods
tolerate for their ``tolerationSeconds``: as in Kueue it is healthy until the taint has evicted
them. Not ported: the cases with ReplaceNodeOnPodTermination off (always on in kqueue). Those
marking pending pods Failed are in tests/controller/test_pinned_pods.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kqueue.api.v1alpha1 import ResourceFlavor
from kqueue.controller.manager import Manager
from kqueue.controller.node_health import node_failed, node_problem
from kqueue.controller.resources import PODS, RESOURCE_FLAVORS
from kqueue.controller.workqueue import Requeue
from kqueue.engine.types import Toleration
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import model
from tests.controller.test_manager import manager
from tests.controller.test_node_health import (
    MOVED_TO_N3,
    _domains,
    _Engine,
    _node,
    _Setup,
    _tas_pod,
    _tas_workload,
    replaced_once_its_pods_stopped,
)
from tests.controller.test_node_health import _setup as _health_setup

__all__ = ["manager"]  # fixture

Obj = dict[str, Any]
NO_EXECUTE = {"key": "maintenance", "value": "true", "effect": "NoExecute"}
NO_SCHEDULE = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
TOLERATES = Toleration("maintenance", "Equal", "true", "")
# Kueue's TolerationSeconds cases: the NoExecute taint tolerated for 300 s.
FOR_300_S = {"key": "maintenance", "operator": "Equal", "value": "true", "effect": "NoExecute",
             "tolerationSeconds": 300}
TOLERATES_300_S = Toleration("maintenance", "Equal", "true", "NoExecute", 300)


def tainted(name: str, *taints: Obj) -> Obj:
    node = _node(name)
    node["spec"]["taints"] = list(taints)
    return node


@pytest.mark.parametrize(
    ("node", "running", "tolerations", "failed"),
    [
        pytest.param(tainted("n", NO_EXECUTE), 0, [()], True,
                     id="Node has untolerated NoExecute taint -> Unhealthy"),
        pytest.param(tainted("n", NO_EXECUTE), 1, [()], False,
                     id="Node has untolerated NoExecute taint, ReplaceNodeOnPodTermination on, "
                     "pod running -> Healthy (wait)"),
        pytest.param(tainted("n", NO_EXECUTE), 0, [()], True,
                     id="Node has untolerated NoExecute taint, ReplaceNodeOnPodTermination on, "
                     "pod terminating -> Unhealthy"),
        pytest.param(tainted("n", NO_EXECUTE), 0, [()], True,
                     id="Node has untolerated NoExecute taint, ReplaceNodeOnPodTermination on, "
                     "no pods -> Unhealthy (immediate)"),
        pytest.param(tainted("n", NO_SCHEDULE), 1, [()], False,
                     id="Node has NoSchedule taint, ReplaceNodeOnPodTermination on, pod running "
                     "-> Healthy"),
        pytest.param(tainted("n", NO_SCHEDULE), 0, [()], True,
                     id="Node has untolerated NoSchedule taint, workload has no pods at all -> "
                     "Unhealthy"),
        pytest.param(tainted("n", NO_SCHEDULE), 0, [(TOLERATES,)], None,
                     id="Node has NoSchedule taint, tolerated -> Healthy"),
        pytest.param(tainted("n", NO_SCHEDULE), 0, None, None,
                     id="Node Ready, TASReplaceNodeOnNodeTaints disabled -> Healthy"),
        pytest.param(tainted("n", {"key": "k", "effect": "PreferNoSchedule"}), 0, [()], None,
                     id="kqueue: a PreferNoSchedule taint keeps no pod off"),
    ],
)
def test_tainted_node(
    node: Obj, running: int, tolerations: list[tuple[Toleration, ...]] | None,
    failed: bool | None,
) -> None:
    problem = node_problem(node, tolerations)
    if failed is None:
        assert problem is None
        return
    assert problem == "has the taint maintenance=true:" + node["spec"]["taints"][0]["effect"] + (
        ", which its pods do not tolerate"
    )
    assert node_failed(node, running, tainted=True) is failed


async def _setup(
    cluster: FakeCluster, nodes: list[Obj], workloads: list[Obj], engine: Any, **kw: Any
) -> _Setup:
    """test_node_health's, with the ResourceFlavors whose tolerations count."""
    flavors = await cluster.informer(RESOURCE_FLAVORS, model(ResourceFlavor))
    return await _health_setup(cluster, nodes, workloads, engine, flavors=flavors.store, **kw)


def _flavor_of(wl: Obj) -> str:
    return str(next(iter(wl["status"]["admission"]["podSetAssignments"][0]["flavors"].values())))


async def test_a_node_tainted_noexecute_is_replaced_once_its_pods_stopped(
    cluster: FakeCluster,
) -> None:
    async def setup(*args: Any) -> _Setup:
        return await _setup(*args, taints=True)

    await replaced_once_its_pods_stopped(cluster, tainted("n1", NO_EXECUTE), setup)


async def test_node_has_noschedule_taint_tolerated_by_assigned_resourceflavor_healthy(
    cluster: FakeCluster,
) -> None:
    """Kueue's "Node has NoSchedule taint tolerated by assigned ResourceFlavor -> Healthy"."""
    wl = _tas_workload("train", [("n1", 2), ("n2", 1)])
    cluster.server.add(RESOURCE_FLAVORS, {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor",
        "metadata": {"name": _flavor_of(wl)},
        "spec": {"tolerations": [
            {"key": "maintenance", "operator": "Equal", "value": "true"}]},
    })
    engine = _Engine(MOVED_TO_N3)
    s = await _setup(cluster, [tainted("n1", NO_SCHEDULE), _node("n2"), _node("n3")], [wl],
                     engine, taints=True)
    await s.reconcile("train")
    assert engine.asked == []
    assert not s.status("train").get("unhealthyNodes")


async def test_taints_are_not_looked_at_with_the_gate_off(cluster: FakeCluster) -> None:
    engine = _Engine(MOVED_TO_N3)
    s = await _setup(cluster, [tainted("n1", NO_EXECUTE), _node("n2"), _node("n3")],
                     [_tas_workload("train", [("n1", 2), ("n2", 1)])], engine, taints=False)
    await s.reconcile("train")
    assert engine.asked == []
    assert not s.status("train").get("unhealthyNodes")


async def test_with_tas_failed_node_replacement_off_a_lost_node_is_only_reported(
    cluster: FakeCluster,
) -> None:
    """The Configuration's featureGates TASFailedNodeReplacement: false."""
    engine = _Engine(MOVED_TO_N3)
    s = await _setup(cluster, [_node("n2"), _node("n3")],
                     [_tas_workload("train", [("n1", 2), ("n2", 1)])], engine, replace=False)
    await s.reconcile("train")
    assert engine.asked == []
    assert s.status("train")["unhealthyNodes"] == [{"name": "n1"}]
    assert _domains(s, "train") == [(["n1"], 2), (["n2"], 1)]


def test_the_configuration_s_gates_switch_replacement_and_taints(
    manager: Callable[..., Manager],
) -> None:
    on = manager(["batch/job"])
    assert on.node_health._replacing and on.node_health._taints
    off = manager(["batch/job"], featureGates={
        "TASFailedNodeReplacement": False, "TASReplaceNodeOnNodeTaints": False})
    assert not off.node_health._replacing and not off.node_health._taints


FOR_NOW = (
    "has the NoExecute taint maintenance=true:NoExecute, which its pods tolerate only for their "
    "tolerationSeconds, and they were evicted"
)


@pytest.mark.parametrize(
    ("tolerations", "want"),
    [
        pytest.param([(TOLERATES_300_S,)], FOR_NOW, id="tolerated for 300 s: watched"),
        pytest.param([(TOLERATES_300_S, TOLERATES)], None,
                     id="kqueue: also tolerated for good (no seconds) -> Healthy"),
        pytest.param([(TOLERATES,), (TOLERATES_300_S,)], FOR_NOW,
                     id="kqueue: one pod set of two tolerates it for a while only"),
        pytest.param([(TOLERATES_300_S,), ()], "has the taint maintenance=true:NoExecute, which "
                     "its pods do not tolerate", id="kqueue: untolerated by one pod set wins"),
    ],
)
def test_a_taint_tolerated_for_a_while(
    tolerations: list[tuple[Toleration, ...]], want: str | None
) -> None:
    assert node_problem(tainted("n", NO_EXECUTE), tolerations) == want


def _tolerating_workload(name: str) -> Obj:
    wl = _tas_workload(name, [("n1", 2), ("n2", 1)])
    wl["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = [dict(FOR_300_S)]
    return wl


async def test_node_has_noexecute_taint_with_toleration_seconds_healthy_wait_for_eviction(
    cluster: FakeCluster,
) -> None:
    """Kueue's "Node has NoExecute taint with TolerationSeconds -> Healthy (wait for
    eviction)", then "Node has NoExecute taint with TolerationSeconds, pod terminating ->
    Unhealthy": the node is not reported while the pod runs, and is replaced once the taint
    has evicted it."""
    engine = _Engine(MOVED_TO_N3)
    cluster.server.add(PODS, _tas_pod("train-0", "n1"))
    s = await _setup(cluster, [tainted("n1", NO_EXECUTE), _node("n2"), _node("n3")],
                     [_tolerating_workload("train")], engine, taints=True)
    await cluster.synced()
    got = await s.health("team-a/train")
    assert isinstance(got, Requeue), "the pod still runs on n1 within its 300 s: look again"
    await cluster.synced()
    assert engine.asked == []
    assert not s.status("train").get("unhealthyNodes")
    assert s.condition("train") is None
    cluster.server.remove(PODS, "train-0", "team-a")  # evicted by the taint after 300 s
    await s.reconcile("train")
    assert engine.asked == [("team-a/train", ["n1"])]
    assert _domains(s, "train") == [(["n2"], 1), (["n3"], 2)]


async def test_node_has_noexecute_taint_with_toleration_seconds_pod_terminating_unhealthy(
    cluster: FakeCluster,
) -> None:
    """Kueue's "Node has NoExecute taint with TolerationSeconds, pod terminating -> Unhealthy",
    with replacement off: the node is reported once its pods are gone."""
    engine = _Engine(MOVED_TO_N3)
    s = await _setup(cluster, [tainted("n1", NO_EXECUTE), _node("n2"), _node("n3")],
                     [_tolerating_workload("train")], engine, taints=True, replace=False)
    await s.reconcile("train")
    assert engine.asked == []
    assert s.status("train")["unhealthyNodes"] == [{"name": "n1"}]
    cond = s.condition("train")
    assert cond is not None and "tolerationSeconds" in cond["message"]
