"""Topology-aware scheduling on the real control plane: a Job requiring a rack has all its pods
bound in one rack, a second such Job goes to another rack, and a pod kqueue does not manage
occupying a node keeps a third out of that node's rack, a rack Job preempts a lower-priority one
when no rack has room, and a Job preferring a block but too big for one spreads (the local
cluster's kwok-tas nodes: 2 blocks x 2 racks x 4 hosts of 4 cpu), and a Job with two slice layers
is bound in whole slices of each layer; a deleted node under a rack Job is replaced by a node of
the same rack, or, with none free, the Job's Workload is evicted (NodeFailures)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kqueue.api.v1alpha1 import TopologyAssignment
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gang import mutable_min_count
from kqueue.controller.kube import Conflict
from kqueue.controller.resources import NODES, PODS
from kqueue.controller.topology import TOPOLOGIES
from kqueue.localcluster.nodes import (
    TAS_BLOCK_LABEL,
    TAS_NODE_GROUP,
    TAS_NODE_GROUP_LABEL,
    TAS_RACK_LABEL,
    TOPOLOGY_NODES,
)
from tests.controller_e2e.harness import (
    E2E_LABEL,
    Api,
    KqueueProcess,
    cluster_queue,
    eventually,
    is_true,
    job,
    local_queue,
    priority_class,
    unique,
)
from tests.fixtures.cluster import PODGROUPS

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


async def _tas_queue(api: Api, namespace: str, *, preemption: Obj | None = None) -> str:
    topo, rf, cq = unique("topology"), unique("tas"), unique("cq")
    await api.kube.create(
        TOPOLOGIES,
        {
            "apiVersion": c.API_VERSION,
            "kind": "Topology",
            "metadata": {"name": topo, "labels": {E2E_LABEL: "true"}},
            "spec": {"levels": [{"nodeLabel": TAS_BLOCK_LABEL}, {"nodeLabel": TAS_RACK_LABEL},
                                {"nodeLabel": "kubernetes.io/hostname"}]},
        },
    )
    api.created.append((TOPOLOGIES, topo, None))
    await api.apply({
        "apiVersion": c.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": rf, "labels": {E2E_LABEL: "true"}},
        "spec": {
            "nodeLabels": {TAS_NODE_GROUP_LABEL: TAS_NODE_GROUP},
            "topologyName": topo,
            "tolerations": [{"key": TAS_NODE_GROUP_LABEL, "operator": "Equal",
                             "value": TAS_NODE_GROUP, "effect": "NoSchedule"}],
        },
    })
    await api.apply(cluster_queue(cq, [(rf, "64")], preemption=preemption))
    await api.apply(local_queue("lq", namespace, cq))
    return cq


async def _wait_idle(api: Api, racks: dict[str, str | None]) -> None:
    """Until no pod runs on the kwok-tas nodes (an earlier test's go with its namespace)."""

    async def idle() -> bool:
        pods = await api.kube.list(PODS)
        return not any(
            racks.get((p.get("spec") or {}).get("nodeName") or "")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            for p in pods
        )

    await eventually(idle, within=90, what="no pod left on the kwok-tas nodes")


async def _outsider(api: Api, namespace: str, name: str, node: str, *, cpu: str) -> None:
    """A pod kqueue does not manage, bound to ``node``: it takes ``cpu`` of the node."""
    await api.kube.create(PODS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": TAS_NODE_GROUP_LABEL, "operator": "Equal",
                             "value": TAS_NODE_GROUP, "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        },
    }, namespace=namespace)


def _rack_job(name: str, namespace: str, labels: dict[str, str] | None = None) -> Obj:
    # 4 pods of 3 cpu: one per 4-cpu host, a whole rack.
    spec = job(name, namespace, "lq", count=4, cpu="3", labels=labels)
    spec["spec"]["template"]["metadata"]["annotations"][
        "kqueue.io/podset-required-topology"
    ] = TAS_RACK_LABEL
    return spec


async def test_jobs_requiring_a_rack_land_each_in_one_rack(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    await _tas_queue(api, namespace)
    racks = {
        n["metadata"]["name"]: n["metadata"]["labels"].get(TAS_RACK_LABEL)
        for n in await api.kube.list(NODES)
    }

    async def bound_racks(name: str) -> set[str] | None:
        pods = await api.pods_of(namespace, name)
        nodes = [(p.get("spec") or {}).get("nodeName") for p in pods]
        if len(nodes) != 4 or not all(nodes):
            return None
        assert all(p["metadata"]["labels"].get(c.TAS_LABEL) == "true" for p in pods)
        return {racks[n] for n in nodes if n}

    await api.apply(_rack_job("rack-a", namespace))
    wl = await api.wait_workload(namespace, "rack-a", lambda w: is_true(w, c.ADMITTED),
                                 what="admitted")
    ta = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert ta["levels"] == ["kubernetes.io/hostname"]
    first = await eventually(lambda: bound_racks("rack-a"), within=60,
                             what="rack-a's 4 pods bound")
    assert len(first) == 1

    await api.apply(_rack_job("rack-b", namespace))
    await api.wait_workload(namespace, "rack-b", lambda w: is_true(w, c.ADMITTED),
                            what="admitted")
    second = await eventually(lambda: bound_racks("rack-b"), within=60,
                              what="rack-b's 4 pods bound")
    assert len(second) == 1 and second != first

    # A pod outside kqueue takes 2 of the 4 cpus of a node in the first free rack (by name,
    # the one best fit would pick on a tie): a rack Job of 3-cpu pods must go to the other.
    free = sorted({r for r in racks.values() if r} - first - second)
    assert len(free) == 2
    occupied = next(n for n, r in sorted(racks.items()) if r == free[0])
    await _outsider(api, namespace, "outsider", occupied, cpu="2")

    async def outsider_running() -> bool:
        pod = await api.kube.get(PODS, "outsider", namespace)
        return (pod.get("status") or {}).get("phase") == "Running"

    await eventually(outsider_running, within=30, what="the outsider pod running")
    await api.apply(_rack_job("rack-c", namespace))
    third = await eventually(lambda: bound_racks("rack-c"), within=60,
                             what="rack-c's 4 pods bound")
    assert third == {free[1]}



async def test_a_rack_job_preempts_a_lower_priority_one_to_free_a_rack(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """Every rack holds a low-priority rack Job; quota is left (48 of 64 cpu used) but no rack
    has room: a high-priority rack Job preempts one low-priority Job, and only one, and runs in
    the rack it frees."""
    racks = {
        n["metadata"]["name"]: n["metadata"]["labels"].get(TAS_RACK_LABEL)
        for n in await api.kube.list(NODES)
    }

    await _wait_idle(api, racks)
    low, high = unique("low"), unique("high")
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await _tas_queue(api, namespace, preemption={"withinClusterQueue": "LowerPriority"})
    for i in range(4):
        await api.apply(_rack_job(f"low-{i}", namespace, {c.PRIORITY_CLASS_LABEL: low}))
        await api.wait_workload(namespace, f"low-{i}", lambda w: is_true(w, c.ADMITTED),
                                what="admitted")

    await api.apply(_rack_job("high", namespace, {c.PRIORITY_CLASS_LABEL: high}))
    wl = await api.wait_workload(namespace, "high", lambda w: is_true(w, c.ADMITTED),
                                 what="admitted after a preemption", within=90)
    ta = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert ta["slices"][0]["domainCount"] == 4
    evicted = []
    for i in range(4):
        w = await api.workload_of(namespace, f"low-{i}")
        assert w is not None
        if is_true(w, c.EVICTED) or not is_true(w, c.ADMITTED):
            evicted.append(i)
    assert len(evicted) == 1

    async def high_bound() -> set[str] | None:
        pods = [p for p in await api.pods_of(namespace, "high")
                if (p.get("status") or {}).get("phase") == "Running"]
        nodes = [(p.get("spec") or {}).get("nodeName") for p in pods]
        return {racks[n] for n in nodes if n} if len(nodes) == 4 else None

    bound = await eventually(high_bound, within=90, what="high's 4 pods running")
    assert len(bound) == 1


async def test_a_preferred_block_job_too_big_for_one_block_spreads(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """40 pods of 1 cpu preferring one block (a block holds 32): admitted over both blocks."""
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in await api.kube.list(NODES)}
    await _wait_idle(api, {k: v.get(TAS_RACK_LABEL) for k, v in labels.items()})
    await _tas_queue(api, namespace)
    spec = job("wide", namespace, "lq", count=40, cpu="1")
    spec["spec"]["template"]["metadata"]["annotations"][
        "kqueue.io/podset-preferred-topology"
    ] = TAS_BLOCK_LABEL
    await api.apply(spec)
    await api.wait_workload(namespace, "wide", lambda w: is_true(w, c.ADMITTED), what="admitted")

    async def blocks() -> set[str] | None:
        pods = await api.pods_of(namespace, "wide")
        nodes = [(p.get("spec") or {}).get("nodeName") for p in pods]
        if len(nodes) != 40 or not all(nodes):
            return None
        return {labels[n][TAS_BLOCK_LABEL] for n in nodes if n}

    assert await eventually(blocks, within=90, what="wide's 40 pods bound") == {"b1", "b2"}


async def test_a_cordoned_node_under_an_admitted_rack_job_is_reported(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """A node of an admitted rack Job's assignment is cordoned: the Workload lists it in
    status.unhealthyNodes with TopologyNodesReady=False; uncordoned, the list empties and the
    condition turns True."""
    racks = await _idle_tas_queue(api, namespace)
    await api.apply(_rack_job("rack-a", namespace))
    wl = await api.wait_workload(namespace, "rack-a", lambda w: is_true(w, c.ADMITTED),
                                 what="admitted")
    assert "unhealthyNodes" not in wl["status"]
    ta = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert ta["levels"] == ["kubernetes.io/hostname"]
    placed = [values[-1] for values, _ in TopologyAssignment.model_validate(ta).domains()]
    assert len(placed) == 4 and {racks[n] for n in placed} != {None}
    node = sorted(placed)[0]

    def condition(w: Obj) -> Obj | None:
        return next((x for x in w["status"].get("conditions") or []
                     if x["type"] == c.TOPOLOGY_NODES_READY), None)

    await api.kube.patch(NODES, node, {"spec": {"unschedulable": True}})
    try:
        wl = await api.wait_workload(
            namespace, "rack-a", lambda w: w["status"].get("unhealthyNodes") == [{"name": node}],
            what=f"{node} in status.unhealthyNodes",
        )
        cond = condition(wl)
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", c.NODE_UNAVAILABLE)
        assert f"Node {node} is cordoned" in cond["message"]
        assert "1 pod(s) of pod set main" in cond["message"]
    finally:
        await api.kube.patch(NODES, node, {"spec": {"unschedulable": None}})

    def back(w: Obj) -> bool:
        cond = condition(w)
        return not w["status"].get("unhealthyNodes") and cond is not None and (
            cond["status"], cond["reason"]) == ("True", c.NODES_READY)

    await api.wait_workload(namespace, "rack-a", back, what="TopologyNodesReady=True again")


async def test_a_two_layer_slice_job_is_bound_in_whole_slices(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """Kueue's TASMultiLayerTopology: 8 pods of 1 cpu in one block, in rack slices of 4 made of
    host slices of 2. A pod outside kqueue takes 1 of the 4 cpus of every kwok-tas host, so a
    host has room for 3: without the host layer a host would get 3 pods, with it 2 (one whole
    host slice), and every rack 4 or 8."""
    await _tas_queue(api, namespace)
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in await api.kube.list(NODES)}
    racks = {n: labels.get(TAS_RACK_LABEL) for n, labels in nodes.items()}
    await _wait_idle(api, racks)
    tas_hosts = sorted(n for n, r in racks.items() if r)
    for i, host in enumerate(tas_hosts):
        await _outsider(api, namespace, f"outsider-{i}", host, cpu="1")

    async def outsiders_running() -> bool:
        pods = [await api.kube.get(PODS, f"outsider-{i}", namespace)
                for i in range(len(tas_hosts))]
        return all((p.get("status") or {}).get("phase") == "Running" for p in pods)

    await eventually(outsiders_running, within=60, what="the outsider pods running")
    spec = job("layered", namespace, "lq", count=8, cpu="1")
    spec["spec"]["template"]["metadata"]["annotations"].update({
        "kqueue.io/podset-required-topology": TAS_BLOCK_LABEL,
        "kqueue.io/podset-slice-required-topology-constraints": (
            f'[{{"topology": "{TAS_RACK_LABEL}", "size": 4}}, '
            '{"topology": "kubernetes.io/hostname", "size": 2}]'
        ),
    })
    await api.apply(spec)
    await api.wait_workload(namespace, "layered", lambda w: is_true(w, c.ADMITTED),
                            what="admitted")

    async def bound() -> list[str] | None:
        pods = await api.pods_of(namespace, "layered")
        names = [(p.get("spec") or {}).get("nodeName") for p in pods]
        return [n for n in names if n] if len(names) == 8 and all(names) else None

    hosts = await eventually(bound, within=60, what="layered's 8 pods bound")
    per_host: dict[str, int] = {}
    for h in hosts:
        per_host[h] = per_host.get(h, 0) + 1
    per_rack: dict[str, int] = {}
    for h, n in per_host.items():
        per_rack[str(racks[h])] = per_rack.get(str(racks[h]), 0) + n
    assert all(n == 2 for n in per_host.values()), per_host
    assert all(n % 4 == 0 for n in per_rack.values()), per_rack
    assert len({nodes[h].get(TAS_BLOCK_LABEL) for h in per_host}) == 1, per_host


async def _idle_tas_queue(api: Api, namespace: str) -> dict[str, str | None]:
    """The rack of every node, once no pod runs on the kwok-tas nodes; and a TAS queue "lq"."""
    racks = {
        n["metadata"]["name"]: n["metadata"]["labels"].get(TAS_RACK_LABEL)
        for n in await api.kube.list(NODES)
    }
    await _wait_idle(api, racks)
    await _tas_queue(api, namespace)
    return racks


async def _delete_pods_of(api: Api, node: str) -> None:
    """Delete the pods bound to ``node`` at once (no grace period)."""
    for p in await api.kube.list(PODS):
        if (p.get("spec") or {}).get("nodeName") == node:
            meta = p["metadata"]
            await api.kube.request(
                "DELETE", PODS.object_path(meta["name"], meta["namespace"]),
                {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
            )


async def _fail_node(api: Api, node: str) -> None:
    """Delete ``node`` and, at once, its pods (what kube-controller-manager's pod GC does to
    the pods of a deleted node after its 40 s quarantine)."""
    await api.kube.delete(NODES, node)
    await _delete_pods_of(api, node)


async def _restore_node(api: Api, node: str) -> None:
    """Create the kwok-tas node again as the local cluster made it (other tests use it)."""
    fake = next(n for n in TOPOLOGY_NODES if n.name == node)
    with contextlib.suppress(Conflict):  # already back
        await api.kube.create(NODES, fake.manifest())


def _assigned(wl: Obj) -> set[str] | None:
    """The hosts the Workload's first pod set is assigned (None: not admitted)."""
    adm = (wl.get("status") or {}).get("admission")
    if adm is None:
        return None
    ta = adm["podSetAssignments"][0]["topologyAssignment"]
    return {v[-1] for v, _ in TopologyAssignment.model_validate(ta).domains()}


async def _admitted_nodes(api: Api, namespace: str, name: str) -> list[str]:
    wl = await api.wait_workload(namespace, name, lambda w: is_true(w, c.ADMITTED),
                                 what="admitted")
    ta = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    return sorted(v[-1] for v, _ in TopologyAssignment.model_validate(ta).domains())


async def _taint_node(api: Api, node: str) -> None:
    """Taint ``node`` NoExecute and, at once, delete its pods (what kube-controller-manager's
    taint-eviction controller, not run by the local cluster, does to pods not tolerating it)."""
    await api.kube.request(
        "PATCH", NODES.object_path(node),
        {"spec": {"taints": [{"key": "maintenance", "value": "true", "effect": "NoExecute"}]}},
        content_type="application/merge-patch+json",
    )
    await _delete_pods_of(api, node)


async def _untaint_node(api: Api, node: str) -> None:
    await api.kube.request(
        "PATCH", NODES.object_path(node), {"spec": {"taints": None}},
        content_type="application/merge-patch+json",
    )


# How a node of the rack is lost: (fail it, restore it, what TopologyNodesReady says).
NODE_LOSSES = {
    "deleted": (_fail_node, _restore_node, "was deleted"),
    # Kueue's TASReplaceNodeOnNodeTaints.
    "tainted NoExecute": (
        _taint_node, _untaint_node,
        "has the taint maintenance=true:NoExecute, which its pods do not tolerate",
    ),
}


@pytest.mark.parametrize("loss", NODE_LOSSES.values(), ids=NODE_LOSSES.keys())
async def test_a_lost_node_under_a_rack_job_is_replaced_in_the_same_rack(
    api: Api, kqueue: KqueueProcess, namespace: str, loss: tuple[Any, Any, str]
) -> None:
    """Kueue's TASFailedNodeReplacement: a Job of 3 pods requiring a rack (one 3-cpu pod per
    4-cpu host) loses a node; the topology assignment names the rack's fourth node instead,
    and the pod the Job controller creates again is bound there.

    The hosts are read where the pods run, not from the assignment at admission: with
    ``topologyHandOff: Constraint`` the pods are not pinned, kube-scheduler binds them anywhere
    in the rack and the assignment then follows the binding (docs/topology.md); pinned, the
    two are the same hosts."""
    fail, restore, what = loss
    racks = await _idle_tas_queue(api, namespace)
    spec = job("three", namespace, "lq", count=3, cpu="3")
    spec["spec"]["backoffLimit"] = 3  # the lost pod counts as failed: the Job creates another
    spec["spec"]["template"]["metadata"]["annotations"][
        "kqueue.io/podset-required-topology"
    ] = TAS_RACK_LABEL
    await api.apply(spec)
    await _admitted_nodes(api, namespace, "three")

    async def running() -> list[str]:
        return sorted(
            (p.get("spec") or {}).get("nodeName") or ""
            for p in await api.pods_of(namespace, "three")
            if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        )

    def bound(want: list[str]) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            return await running() == want

        return probe

    async def three_running() -> list[str] | None:
        nodes = await running()
        return nodes if len(nodes) == 3 else None

    placed = await eventually(three_running, within=60, what="three's 3 pods running")
    rack = racks[placed[0]]
    assert {racks[n] for n in placed} == {rack}, placed
    await api.wait_workload(
        namespace, "three", lambda w: _assigned(w) == set(placed), within=60,
        what=f"the topology assignment naming the hosts the pods run on, {placed}",
    )
    spare = [n for n, r in sorted(racks.items()) if r == rack and n not in placed]
    assert len(spare) == 1
    victim = placed[0]
    await fail(api, victim)
    try:
        def replaced(w: Obj) -> bool:
            return _assigned(w) == (set(placed) - {victim}) | set(spare)

        wl = await api.wait_workload(namespace, "three", replaced, within=60,
                                     what=f"{victim} replaced by {spare[0]}")
        assert is_true(wl, c.ADMITTED) and not wl["status"].get("unhealthyNodes")
        cond = next(x for x in wl["status"]["conditions"]
                    if x["type"] == c.TOPOLOGY_NODES_READY)
        assert cond["status"] == "True" and f"Node {victim} {what}" in cond["message"]
        want = sorted((set(placed) - {victim}) | set(spare))
        await eventually(bound(want), within=90, what=f"the new pod running on {spare[0]}")
    finally:
        await restore(api, victim)


async def test_a_deleted_node_under_a_whole_rack_job_evicts_it_with_node_failures(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """The rack Job takes the whole rack: no node of the rack can take the lost pod, so the
    Workload is evicted with Kueue's reason NodeFailures."""
    racks = await _idle_tas_queue(api, namespace)
    await api.apply(_rack_job("whole", namespace))
    placed = await _admitted_nodes(api, namespace, "whole")
    assert len(placed) == 4
    victim = placed[0]
    await _fail_node(api, victim)
    try:
        def evicted(w: Obj) -> bool:
            return any(x["type"] == c.EVICTED and x["status"] == "True"
                       and x["reason"] == "NodeFailures"
                       for x in w["status"].get("conditions") or [])

        wl = await api.wait_workload(namespace, "whole", evicted, within=60,
                                     what="evicted with reason NodeFailures")
        cond = next(x for x in wl["status"]["conditions"] if x["type"] == c.EVICTED)
        assert (f"no replacement for unhealthy node(s): {victim}" in cond["message"]
                and racks[victim] in cond["message"])
    finally:
        await _restore_node(api, victim)


# Nodes of a rack of their own that kwok does not manage (no kwok annotation): the test sets
# their Ready condition, and kwok does not turn it back. Pods of the Job there name a scheduler
# that does not exist, so kube-scheduler never binds them: released, they wait pinned.
PINNED_NODES = ("e2e-pin-n1", "e2e-pin-n2", "e2e-pin-n3")
NO_SCHEDULER = "e2e-no-scheduler"


async def _set_ready(api: Api, node: str, ready: bool) -> None:
    cond = {"type": "Ready", "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "set by the test"}
    await api.kube.request(
        "PATCH", NODES.object_path(node) + "/status", {"status": {"conditions": [cond]}},
        content_type="application/merge-patch+json",
    )


async def _unmanaged_rack(api: Api) -> None:
    template = TOPOLOGY_NODES[0].manifest()
    for name in PINNED_NODES:
        node = {
            **template,
            "metadata": {
                "name": name,
                "labels": {**template["metadata"]["labels"], "kubernetes.io/hostname": name,
                           TAS_BLOCK_LABEL: "e2e-pin-b", TAS_RACK_LABEL: "e2e-pin-r"},
            },
        }
        with contextlib.suppress(Conflict):  # left by an interrupted run
            await api.kube.create(NODES, node)
        await api.kube.request(
            "PATCH", NODES.object_path(name) + "/status",
            {"status": {"allocatable": template["status"]["allocatable"],
                        "capacity": template["status"]["capacity"]}},
            content_type="application/merge-patch+json",
        )
        await _set_ready(api, name, True)


def unpinned_by_constraint(kqueue: KqueueProcess) -> bool:
    """Whether this kqueue hands the domain to kube-scheduler and leaves the pods unpinned:
    ``topologyHandOff: Constraint`` on a cluster serving the PodGroup constraint (v1beta1);
    the harness's default kqueue pins them (tests/gang_e2e/test_gang_topology_constraint.py
    runs these tests with Constraint)."""
    overrides = getattr(kqueue, "overrides", None) or {}
    return overrides.get("topologyHandOff") == "Constraint" and mutable_min_count(PODGROUPS)


def _pinned_to(pod: Obj) -> str | None:
    spec = pod.get("spec") or {}
    if spec.get("nodeName") or spec.get("schedulingGates"):
        return None
    if (pod.get("status") or {}).get("phase") != "Pending" or pod["metadata"].get(
        "deletionTimestamp"
    ):
        return None
    return (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")


async def test_a_pod_pinned_to_a_node_that_turns_not_ready_is_failed_and_replaced(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """Kueue's node controller (TASFailedNodeReplacement, TASReplaceNodeOnPodTermination): a
    released pod waiting, unbound, for a node that turns NotReady is marked Failed at once
    (condition TerminatedByKqueue, reason UnschedulableOnAssignedNode); no pod runs there, so
    the node has failed and the rack's spare node replaces it; the pod the Job controller
    creates again is released pinned to the spare.

    With ``topologyHandOff: Constraint`` (a gang cluster serving the PodGroup constraint) the
    pods are released without a host: none waits for the NotReady node, so none is failed; the
    node has failed all the same (no pod runs there) and the spare replaces it in the
    assignment, while the pods keep waiting unpinned for kube-scheduler to bind them."""
    unpinned = unpinned_by_constraint(kqueue)
    await _idle_tas_queue(api, namespace)
    await _unmanaged_rack(api)
    try:
        spec = job("pinned", namespace, "lq", count=2, cpu="3")
        spec["spec"]["backoffLimit"] = 3  # the failed pod counts: the Job creates another
        spec["spec"]["template"]["spec"]["schedulerName"] = NO_SCHEDULER
        spec["spec"]["template"]["metadata"]["annotations"][
            "kqueue.io/podset-required-topology"
        ] = TAS_RACK_LABEL
        await api.apply(spec)
        # Best fit: the 3-node rack fits 3 such pods, a kwok-tas rack 4.
        placed = await _admitted_nodes(api, namespace, "pinned")
        assert len(placed) == 2 and set(placed) <= set(PINNED_NODES), placed
        spare = next(n for n in PINNED_NODES if n not in placed)

        async def pinned() -> dict[str, list[Obj]]:
            out: dict[str, list[Obj]] = {}
            for p in await api.pods_of(namespace, "pinned"):
                node = _pinned_to(p)
                if node is not None:
                    out.setdefault(node, []).append(p)
            return out

        async def both_pinned() -> dict[str, list[Obj]] | None:
            got = await pinned()
            return got if sorted(got) == placed else None

        async def released_unpinned() -> bool:
            pods = [
                p for p in await api.pods_of(namespace, "pinned")
                if (p.get("status") or {}).get("phase") == "Pending"
                and not p["metadata"].get("deletionTimestamp")
            ]
            return len(pods) == 2 and all(
                not p["spec"].get("schedulingGates")
                and "kubernetes.io/hostname" not in (p["spec"].get("nodeSelector") or {})
                for p in pods
            )

        def replaced(w: Obj) -> bool:
            return _assigned(w) == {placed[1], spare}

        victim = placed[0]
        if unpinned:
            await eventually(released_unpinned, within=60, what="2 pods released, unpinned")
            await _set_ready(api, victim, False)
            wl = await api.wait_workload(namespace, "pinned", replaced, within=60,
                                         what=f"{victim} replaced by {spare}")
            ready = next(
                x for x in wl["status"]["conditions"] if x["type"] == c.TOPOLOGY_NODES_READY
            )
            assert ready["status"] == "True" and f"Node {victim} is not Ready" in ready["message"]
            pods = await api.pods_of(namespace, "pinned")
            assert not [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
            assert await released_unpinned()
            return
        before = await eventually(both_pinned, within=60, what=f"pods pinned to {placed}")
        victim_pod = before[victim][0]["metadata"]["name"]
        await _set_ready(api, victim, False)

        async def failed_pod() -> Obj | None:
            pod = await api.kube.get(PODS, victim_pod, namespace)
            return pod if (pod.get("status") or {}).get("phase") == "Failed" else None

        pod = await eventually(failed_pod, within=30, what=f"{victim_pod} marked Failed")
        cond = next(x for x in pod["status"]["conditions"] if x["type"] == "TerminatedByKqueue")
        assert (cond["status"], cond["reason"]) == ("True", "UnschedulableOnAssignedNode")
        assert f"node {victim}" in cond["message"] and "is not Ready" in cond["message"]

        wl = await api.wait_workload(namespace, "pinned", replaced, within=60,
                                     what=f"{victim} replaced by {spare}")
        ready = next(x for x in wl["status"]["conditions"] if x["type"] == c.TOPOLOGY_NODES_READY)
        assert ready["status"] == "True" and f"Node {victim} is not Ready" in ready["message"]

        async def repinned() -> dict[str, list[Obj]] | None:
            got = await pinned()
            return got if sorted(got) == sorted([placed[1], spare]) else None

        await eventually(repinned, within=60, what=f"the new pod pinned to {spare}")
    finally:
        for name in PINNED_NODES:
            with contextlib.suppress(Exception):
                await api.kube.delete(NODES, name)
