"""The node-fit guard on a stock cluster (kube-scheduler's gang gates off): the guard
alone keeps a gang whole (tests/gang_e2e/node_fit_case.py)."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import is_gated
from kqueue.controller.kube import NotFound
from kqueue.controller.resources import PODS, WORKLOADS
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, KqueueProcess, condition, eventually, is_true, stays
from tests.controller_e2e.support_extra import pod
from tests.gang_e2e.fragment import add_node, assert_bound_together, bound, fragmented
from tests.gang_e2e.node_fit_case import held_then_released

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


@pytest.mark.parametrize("room_from", ["node", "pod"])
async def test_gang_held_until_it_fits_then_bound_together(
    api: Api,
    kqueue: KqueueProcess,
    cluster: LocalCluster,
    namespace: str,
    room_from: Literal["node", "pod"],
) -> None:
    await held_then_released(api, cluster, namespace, room_from=room_from, gang_gates=False)


async def test_pod_group_held_until_it_fits_then_bound_together(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    """A plain pod group (the composable path of the job reconciler) is held the same way."""
    group = "trainers"
    async with fragmented(
        cluster, api, namespace, nodes=2, node_cpu="1", blocker=False, quota=3,
        node_fit_guard=None,
    ) as frag:
        for i in range(3):
            await api.kube.create(
                PODS, pod(f"p{i}", namespace, "lq", group=group, total=3), namespace=namespace
            )

        async def group_pods() -> list[Obj]:
            return await api.kube.list(
                PODS, namespace=namespace, label_selector=f"{c.POD_GROUP_NAME_LABEL}={group}"
            )

        async def held() -> Obj | None:
            try:
                wl = await api.kube.get(WORKLOADS, group, namespace)
            except NotFound:
                return None
            cond = condition(wl, c.NODES_FIT)
            return wl if cond is not None and cond["status"] == "False" else None

        wl = await eventually(held, what=f"{c.NODES_FIT}=False on Workload {group}")
        assert is_true(wl, c.QUOTA_RESERVED)
        assert "3 pods need 1 cpu each" in condition(wl, c.NODES_FIT)["message"]  # type: ignore[index]

        async def none_released() -> bool:
            pods = await group_pods()
            return not bound(pods) and all(is_gated(p) for p in pods)

        await stays(none_released, for_s=3, what="no pod of the group released or bound")
        await add_node(cluster, frag.instance_type, f"{frag.instance_type}-z", "1")

        async def all_bound() -> list[Obj] | None:
            pods = bound(await group_pods())
            return pods if len(pods) == 3 else None

        assert_bound_together(await eventually(all_bound, what="all 3 pods bound"))
        for p in await group_pods():
            await api.kube.delete(PODS, p["metadata"]["name"], namespace=namespace)
