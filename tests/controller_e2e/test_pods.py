"""Plain Pods and pod groups under kqueue, on the real control plane."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.eviction import DISRUPTION_TARGET, EVICTED_BY_KQUEUE
from kqueue.controller.kube import NotFound
from kqueue.controller.resources import CLUSTER_QUEUES, PODS, WORKLOADS
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION, INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    Api,
    cluster_queue,
    condition,
    eventually,
    flavor,
    is_true,
    local_queue,
    stays,
    unique,
)
from tests.controller_e2e.support_extra import PodsKqueue, gated, pod, pods_kqueue

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
TERMINATE_AFTER_ANNOTATION = "kwok.kqueue.io/terminate-after"


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodsKqueue]:
    yield from pods_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-pods")),
        {"integrations": {"frameworks": ["batch/job", "pod"]}},
    )


async def _queues(api: Api, namespace: str, cpu: str = "4") -> tuple[str, str]:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, cpu)]))
    await api.apply(local_queue("lq", namespace, cq))
    return od, cq


async def _create(api: Api, obj: Obj) -> Obj:
    return await api.kube.create(PODS, obj, namespace=obj["metadata"]["namespace"])


async def _get_pod(api: Api, namespace: str, name: str) -> Obj | None:
    try:
        return await api.kube.get(PODS, name, namespace)
    except NotFound:
        return None


async def _workload(api: Api, namespace: str, name: str) -> Obj | None:
    try:
        return await api.kube.get(WORKLOADS, name, namespace)
    except NotFound:
        return None


async def _pod_workload(api: Api, namespace: str, pod_name: str) -> Obj | None:
    for wl in await api.kube.list(WORKLOADS, namespace=namespace):
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Pod" and ref.get("name") == pod_name:
                return wl
    return None


async def test_single_pod(api: Api, namespace: str) -> None:
    od, _ = await _queues(api, namespace)
    created = await _create(
        api, pod("solo", namespace, "lq", annotations={COMPLETE_AFTER_ANNOTATION: "3s"})
    )
    # Held at creation: gate, managed label, finalizer.
    assert gated(created)
    assert created["metadata"]["labels"][c.MANAGED_LABEL] == "true"
    assert c.MANAGED_FINALIZER in created["metadata"]["finalizers"]

    async def admitted() -> Obj | None:
        wl = await _pod_workload(api, namespace, "solo")
        return wl if wl is not None and is_true(wl, c.ADMITTED) else None

    wl = await eventually(admitted, within=20, what="the pod's Workload admitted")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == od

    async def running() -> Obj | None:
        p = await _get_pod(api, namespace, "solo")
        return p if p is not None and p["status"].get("phase") == "Running" else None

    p = await eventually(running, within=20, what="the pod released and Running")
    assert not gated(p)
    assert p["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"

    async def finished() -> Obj | None:
        got = await _workload(api, namespace, wl["metadata"]["name"])
        return got if got is not None and is_true(got, c.FINISHED) else None

    done = await eventually(finished, within=30, what="Finished after the pod succeeded")
    assert condition(done, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]

    async def finalizer_gone() -> bool:
        p = await _get_pod(api, namespace, "solo")
        return p is None or c.MANAGED_FINALIZER not in (p["metadata"].get("finalizers") or [])

    await eventually(finalizer_gone, within=20, what="kqueue's finalizer removed")


async def test_group_admitted_only_when_complete(api: Api, namespace: str) -> None:
    await _queues(api, namespace)
    for i in range(2):
        await _create(api, pod(f"member-{i}", namespace, "lq", group="gang", total=3))

    async def held() -> bool:
        wl = await _workload(api, namespace, "gang")
        pods = [await _get_pod(api, namespace, f"member-{i}") for i in range(2)]
        return (wl is None or not is_true(wl, c.ADMITTED)) and all(
            p is not None and gated(p) for p in pods
        )

    await stays(held, for_s=3, what="2 of 3 pods gated and the group not admitted")

    await _create(api, pod("member-2", namespace, "lq", group="gang", total=3))

    async def admitted() -> Obj | None:
        wl = await _workload(api, namespace, "gang")
        return wl if wl is not None and is_true(wl, c.ADMITTED) else None

    wl = await eventually(admitted, within=20, what="the complete group admitted")
    assert sum(ps["count"] for ps in wl["spec"]["podSets"]) == 3

    async def all_running() -> bool:
        pods = [await _get_pod(api, namespace, f"member-{i}") for i in range(3)]
        return all(p is not None and p["status"].get("phase") == "Running" for p in pods)

    await eventually(all_running, within=20, what="all 3 pods of the group released, Running")


async def test_group_eviction_deletes_pods_with_disruption_target(
    api: Api, namespace: str
) -> None:
    _, cq = await _queues(api, namespace)
    # Deleted pods linger a few seconds (kwok), so their DisruptionTarget can be read.
    slow = {TERMINATE_AFTER_ANNOTATION: "3s"}
    for i in range(2):
        await _create(
            api, pod(f"g-{i}", namespace, "lq", group="evictee", total=2, annotations=slow)
        )

    async def all_running() -> bool:
        pods = [await _get_pod(api, namespace, f"g-{i}") for i in range(2)]
        return all(p is not None and p["status"].get("phase") == "Running" for p in pods)

    await eventually(all_running, within=30, what="the group's 2 pods Running")

    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": "HoldAndDrain"}})

    async def disrupted() -> list[Obj] | None:
        pods = [await _get_pod(api, namespace, f"g-{i}") for i in range(2)]
        if any(p is None for p in pods):
            return None
        ok = all(
            p is not None
            and p["metadata"].get("deletionTimestamp")
            and condition(p, DISRUPTION_TARGET) is not None
            for p in pods
        )
        return [p for p in pods if p is not None] if ok else None

    pods = await eventually(disrupted, within=20, what="both pods deleted with DisruptionTarget")
    for p in pods:
        cond = condition(p, DISRUPTION_TARGET)
        assert cond is not None and cond["status"] == "True" and cond["reason"] == EVICTED_BY_KQUEUE
        assert "ClusterQueueStopped" in cond["message"]

    async def gone() -> bool:
        return all([await _get_pod(api, namespace, f"g-{i}") is None for i in range(2)])

    await eventually(gone, within=30, what="the evicted pods removed (finalizer released)")

    async def quota_free() -> bool:
        wl = await _workload(api, namespace, "evictee")
        return wl is None or (wl.get("status") or {}).get("admission") is None

    await eventually(quota_free, within=20, what="the group's quota released")
