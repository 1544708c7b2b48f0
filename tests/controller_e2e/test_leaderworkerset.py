"""LeaderWorkerSets under kqueue, with the real LeaderWorkerSet operator on the real control
plane: one gang Workload per group; the pods born gated, a group admitted whole when its quota
is there (the other waiting, gated), released with the flavor's nodeSelector and bound on kwok
nodes; scaling down removes a group's Workload and frees its quota; deleting the
LeaderWorkerSet frees the rest; the sample runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError, NotFound
from kqueue.controller.resources import CLUSTER_QUEUES, PODS, WORKLOADS, Resource
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    KWOK_NODES,
    SAMPLES,
    Api,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    pause_container,
    priority_class,
    stays,
    unique,
)
from tests.controller_e2e.support_extra import PodsKqueue, pods_kqueue

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
LWS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
FRAMEWORKS = ["batch/job", "pod", "leaderworkerset.x-k8s.io/leaderworkerset"]


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, lws_operator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PodsKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-lws"))
    yield from pods_kqueue(cluster, work_dir, {"integrations": {"frameworks": FRAMEWORKS}})


def leaderworkerset(name: str, namespace: str, queue: str, *, replicas: int, size: int) -> Obj:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.QUEUE_NAME_LABEL: queue}},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "workerTemplate": {
                    "spec": {
                        "terminationGracePeriodSeconds": 0,
                        "containers": [
                            pause_container("1", name="server")
                        ],
                    }
                },
            },
        },
    }


async def _setup(api: Api, namespace: str, cpu: str, queue: str = "q") -> tuple[str, str]:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, cpu)]))
    await api.apply(local_queue(queue, namespace, cq))
    return od, cq


async def _workload(api: Api, namespace: str, name: str) -> Obj | None:
    try:
        return await api.kube.get(WORKLOADS, name, namespace)
    except NotFound:
        return None


async def _wait_admitted(api: Api, namespace: str, name: str) -> Obj:
    async def probe() -> Obj | None:
        wl = await _workload(api, namespace, name)
        return wl if wl is not None and is_true(wl, c.ADMITTED) else None

    return await eventually(probe, within=120, what=f"Workload {name} admitted")


def _gated(pod: Obj) -> bool:
    return {"name": c.ADMISSION_GATE} in (pod["spec"].get("schedulingGates") or [])


async def _group_pods(api: Api, namespace: str, group: str) -> list[Obj]:
    return [
        p
        for p in await api.kube.list(PODS, namespace=namespace, label_selector=f"{c.POD_GROUP_NAME_LABEL}={group}")
        if not p["metadata"].get("deletionTimestamp")
    ]


async def _bound(api: Api, namespace: str, group: str, n: int) -> list[Obj]:
    async def probe() -> list[Obj] | None:
        pods = await _group_pods(api, namespace, group)
        ok = len(pods) == n and all(p["spec"].get("nodeName") in KWOK_NODES for p in pods)
        return pods if ok else None

    return await eventually(probe, within=120, what=f"group {group}'s {n} pods bound to kwok nodes")


async def _usage(api: Api, cq: str, od: str) -> tuple[int, str | None]:
    st = (await api.kube.get(CLUSTER_QUEUES, cq)).get("status") or {}
    used = {r["name"]: r["total"] for f in st.get("flavorsUsage") or [] if f["name"] == od for r in f["resources"]}
    return int(st.get("admittedWorkloads") or 0), used.get("cpu")


async def _wait_usage(api: Api, cq: str, od: str, admitted: int, cpu: set[str | None]) -> None:
    async def probe() -> bool:
        n, used = await _usage(api, cq, od)
        return n == admitted and used in cpu

    await eventually(probe, within=120, what=f"ClusterQueue {cq}: {admitted} admitted, cpu in {cpu}")


async def test_leaderworkerset_full_life(api: Api, kqueue: PodsKqueue, namespace: str) -> None:
    # 3 CPUs for 2 groups of 2 pods of 1 CPU: one group is admitted whole, the other waits.
    od, cq = await _setup(api, namespace, "3")
    created = await api.kube.create(
        LWS, leaderworkerset("serve", namespace, "q", replicas=2, size=2), namespace=namespace
    )
    template = created["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]
    assert template["metadata"]["annotations"][c.POD_GROUP_TOTAL_COUNT_ANNOTATION] == "2"

    async def one_admitted() -> tuple[str, str] | None:
        wls = {g: await _workload(api, namespace, g) for g in ("serve-0", "serve-1")}
        if any(w is None for w in wls.values()):
            return None
        admitted = [g for g, w in wls.items() if w is not None and is_true(w, c.ADMITTED)]
        if len(admitted) != 1:
            return None
        waiting = "serve-1" if admitted[0] == "serve-0" else "serve-0"
        return admitted[0], waiting

    admitted, waiting = await eventually(one_admitted, within=120, what="one group admitted, one waiting")
    wl = await _workload(api, namespace, admitted)
    assert wl is not None and sum(ps["count"] for ps in wl["spec"]["podSets"]) == 2
    pods = await _bound(api, namespace, admitted, 2)
    for pod in pods:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert not _gated(pod)

    async def still_gated() -> bool:
        held = await _group_pods(api, namespace, waiting)
        return len(held) == 2 and all(_gated(p) and not p["spec"].get("nodeName") for p in held)

    await stays(still_gated, for_s=3, what=f"group {waiting}'s pods held by the gate")

    grown = cluster_queue(cq, [(od, "4")])
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"resourceGroups": grown["spec"]["resourceGroups"]}})
    await _wait_admitted(api, namespace, waiting)
    await _bound(api, namespace, waiting, 2)
    await _wait_usage(api, cq, od, 2, {"4"})

    # Scaled to 1 group: group 1 goes, with its Workload and its quota.
    await api.kube.patch(LWS, "serve", {"spec": {"replicas": 1}}, namespace=namespace)

    async def group_1_gone() -> bool:
        return await _workload(api, namespace, "serve-1") is None

    await eventually(group_1_gone, within=120, what="group serve-1's Workload gone")
    await _wait_usage(api, cq, od, 1, {"2"})

    await api.kube.delete(LWS, "serve", namespace=namespace)
    await _wait_usage(api, cq, od, 0, {"0", None})


async def test_a_size_change_of_a_queued_leaderworkerset_is_refused(
    api: Api, kqueue: PodsKqueue, namespace: str
) -> None:
    await _setup(api, namespace, "2")
    await api.kube.create(LWS, leaderworkerset("fixed", namespace, "q", replicas=1, size=2), namespace=namespace)
    with pytest.raises(KubeError) as info:
        await api.kube.patch(LWS, "fixed", {"spec": {"leaderWorkerTemplate": {"size": 3}}}, namespace=namespace)
    assert info.value.status == 422
    assert "spec.leaderWorkerTemplate.size" in info.value.message
    await api.kube.delete(LWS, "fixed", namespace=namespace)


async def test_the_leaderworkerset_sample_runs(api: Api, kqueue: PodsKqueue, namespace: str) -> None:
    od, cq = await _setup(api, namespace, "4", queue="user-queue")
    doc = yaml.safe_load((SAMPLES / "leaderworkerset.yaml").read_text())
    doc["metadata"]["namespace"] = namespace
    await api.kube.create(LWS, doc, namespace=namespace)
    for group in ("sample-lws-0", "sample-lws-1"):
        await _wait_admitted(api, namespace, group)
        await _bound(api, namespace, group, 2)
    await api.kube.delete(LWS, "sample-lws", namespace=namespace)
    await _wait_usage(api, cq, od, 0, {"0", None})


async def test_a_group_preempted_whole_then_resumed(api: Api, kqueue: PodsKqueue, namespace: str) -> None:
    """A higher-priority Job preempts a group: all of its pods go (the operator recreates them
    held by the gate) and the group is queued again; once the Job finished it runs again."""
    low, high = unique("low"), unique("high")
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")], preemption={"withinClusterQueue": "LowerPriority"}))
    await api.apply(local_queue("q", namespace, cq))
    obj = leaderworkerset("victim", namespace, "q", replicas=1, size=2)
    obj["metadata"]["labels"][c.PRIORITY_CLASS_LABEL] = low
    await api.kube.create(LWS, obj, namespace=namespace)
    await _wait_admitted(api, namespace, "victim-0")
    first = {p["metadata"]["uid"] for p in await _bound(api, namespace, "victim-0", 2)}

    await api.apply(
        job("urgent", namespace, "q", cpu="2", complete_after="5s", labels={c.PRIORITY_CLASS_LABEL: high})
    )

    async def replaced_and_held() -> bool:
        pods = await _group_pods(api, namespace, "victim-0")
        return (
            len(pods) == 2
            and not first & {p["metadata"]["uid"] for p in pods}
            and all(_gated(p) for p in pods)
        )

    await eventually(replaced_and_held, within=120, what="the group's pods replaced, held by the gate")
    await api.wait_workload(namespace, "urgent", lambda w: is_true(w, c.FINISHED), what="finished", within=120)
    await _wait_admitted(api, namespace, "victim-0")
    await _bound(api, namespace, "victim-0", 2)
    await api.kube.delete(LWS, "victim", namespace=namespace)


async def test_a_rolling_update_replaces_a_group_within_its_quota(
    api: Api, kqueue: PodsKqueue, namespace: str
) -> None:
    """A template change rolls the group: its pods are replaced, run again admitted, and the
    ClusterQueue never holds more than the one group's quota."""
    od, cq = await _setup(api, namespace, "2")
    await api.kube.create(LWS, leaderworkerset("roll", namespace, "q", replicas=1, size=2), namespace=namespace)
    await _wait_admitted(api, namespace, "roll-0")
    first = {p["metadata"]["uid"] for p in await _bound(api, namespace, "roll-0", 2)}
    change = {"metadata": {"annotations": {"example.com/revision": "2"}}}
    await api.kube.patch(
        LWS, "roll", {"spec": {"leaderWorkerTemplate": {"workerTemplate": change}}}, namespace=namespace
    )

    async def replaced() -> bool:
        pods = await _group_pods(api, namespace, "roll-0")
        return (
            len(pods) == 2
            and not first & {p["metadata"]["uid"] for p in pods}
            and all(p["spec"].get("nodeName") in KWOK_NODES and not _gated(p) for p in pods)
        )

    await eventually(replaced, within=120, what="the group's pods replaced and running")
    await _wait_admitted(api, namespace, "roll-0")
    await _wait_usage(api, cq, od, 1, {"2"})
    await api.kube.delete(LWS, "roll", namespace=namespace)
