"""waitForPodsReady for StatefulSets on the real control plane: PodsReady once its pods are
ready; a StatefulSet whose pods never get ready is evicted at the timeout, its pods deleted and
recreated behind the gate, its Workload requeued."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    Api,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    local_queue,
    unique,
)
from tests.controller_e2e.support_extra import PodsKqueue, gated, pods_kqueue
from tests.controller_e2e.test_apps import (
    STATEFULSETS,
    _admitted_slice,
    _owned,
    _queues,
    _sts_pods,
    statefulset,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
TIMEOUT_S = 3


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodsKqueue]:
    yield from pods_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-apps-ready")),
        {
            "integrations": {"frameworks": ["batch/job", "pod", "statefulset"]},
            "waitForPodsReady": {
                "enable": True,
                "timeout": f"{TIMEOUT_S}s",
                "blockAdmission": False,
                "requeuingStrategy": {"backoffBaseSeconds": 60, "backoffLimitCount": 3},
            },
        },
    )


async def test_ready_statefulset_gets_pods_ready(api: Api, namespace: str) -> None:
    await _queues(api, namespace, "4")
    await api.kube.create(STATEFULSETS, statefulset("ok", namespace, "lq", 2), namespace=namespace)

    async def ready() -> Obj | None:
        for wl in await _owned(api, namespace, "StatefulSet", "ok"):
            if is_true(wl, c.PODS_READY):
                return wl
        return None

    wl = await eventually(ready, within=60, what="PodsReady=True on the StatefulSet's Workload")
    assert is_true(wl, c.ADMITTED)
    await api.kube.delete(STATEFULSETS, "ok", namespace=namespace)


async def test_never_ready_statefulset_is_evicted_and_its_pods_held_again(
    api: Api, namespace: str
) -> None:
    # Pods released that never become ready (an image that never pulls, a crash loop), made
    # here by a nodeSelector no node has. The node-fit guard would hold such pods instead of
    # releasing them (docs/concepts.md, "Node-fit guard"), so it is off on this ClusterQueue.
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    unguarded = cluster_queue(cq, [(od, "4")])
    unguarded["spec"]["nodeFitGuard"] = "Disabled"
    await api.apply(unguarded)
    await api.apply(local_queue("lq", namespace, cq))
    obj = statefulset("stuck", namespace, "lq", 2)
    # No node has this label: the pod is released but stays Pending (never ready).
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"kqueue.test/nowhere": "true"}
    obj["spec"]["podManagementPolicy"] = "Parallel"
    await api.kube.create(STATEFULSETS, obj, namespace=namespace)
    first = await _admitted_slice(api, namespace, "stuck", 2)

    async def released() -> list[Obj] | None:
        pods = await _sts_pods(api, namespace, "stuck")
        return pods if len(pods) == 2 and not any(gated(p) for p in pods) else None

    before = {p["metadata"]["uid"] for p in await eventually(released, what="both pods released")}

    async def evicted() -> Obj | None:
        for wl in await _owned(api, namespace, "StatefulSet", "stuck"):
            if wl["metadata"]["name"] != first["metadata"]["name"]:
                continue
            cond = next((x for x in wl["status"].get("conditions") or [] if x["type"] == c.EVICTED), None)
            if cond and cond["reason"] == c.EVICTED_BY_PODS_READY_TIMEOUT and not wl["status"].get("admission"):
                return wl
        return None

    await eventually(evicted, within=60, what="evicted for the PodsReady timeout, quota released")

    async def held() -> list[Obj] | None:
        pods = await _sts_pods(api, namespace, "stuck")
        fresh = [p for p in pods if p["metadata"]["uid"] not in before]
        return fresh if len(fresh) == 2 and all(gated(p) for p in fresh) and len(pods) == 2 else None

    await eventually(held, within=60, what="the pods deleted and recreated behind the gate")
    await api.kube.delete(STATEFULSETS, "stuck", namespace=namespace)
