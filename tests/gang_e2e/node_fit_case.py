"""The node-fit guard's case on a real control plane, shared by both clusters.

Quota fits a 3-pod gang of 1-cpu pods; the kwok nodes of its flavor have room for 2. No pod is
bound, every pod keeps the ``kqueue.io/admission`` gate, and the Workload's ``NodesFit``
condition (and a ``NodesDoNotFit`` event) gives the numbers. Then room for the third appears (a
node is added, or a pod outside kqueue is deleted) and all 3 are bound together.

The caller's ``cluster`` fixture decides the Kubernetes version and whether kube-scheduler's
gang gates are on: with them (tests/gang_e2e/test_node_fit_gang.py) the guard holds the gang
before kqueue creates its PodGroup; without (tests/stock_e2e/test_node_fit.py) it is the
only thing that keeps the gang whole.
"""

from __future__ import annotations

from typing import Any, Literal

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import is_gated
from kqueue.controller.node_fit import FITS_EVENT, HELD_EVENT
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, condition, eventually, is_true, job, stays
from tests.fixtures.cluster import PODGROUPS
from tests.gang_e2e.fragment import (
    add_node,
    assert_bound_together,
    bound,
    fragmented,
    free_blocker,
)

Obj = dict[str, Any]

SIZE = 3


async def held_then_released(
    api: Api,
    cluster: LocalCluster,
    namespace: str,
    *,
    room_from: Literal["node", "pod"],
    gang_gates: bool,
) -> None:
    # Two 1-cpu nodes; or three, a pod outside kqueue holding the third.
    nodes = 2 if room_from == "node" else 3
    async with fragmented(
        cluster, api, namespace, nodes=nodes, node_cpu="1", blocker=room_from == "pod",
        quota=SIZE, node_fit_guard=None,
    ) as frag:
        await api.apply(job("gang", namespace, "lq", count=SIZE, cpu="1"))
        wl = await api.wait_workload(
            namespace, "gang", lambda w: is_true(w, c.ADMITTED), what="Admitted"
        )
        held = await api.wait_workload(
            namespace, "gang",
            lambda w: (condition(w, c.NODES_FIT) or {}).get("status") == "False",
            what=f"{c.NODES_FIT}=False",
        )
        cond = condition(held, c.NODES_FIT)
        assert cond is not None and cond["reason"] == c.NODES_FIT_INSUFFICIENT
        a, b = frag.nodes[0], frag.nodes[1]
        free = f"free: {a} 1, {b} 1" + (f", {frag.nodes[2]} 0" if nodes == 3 else "")
        assert f"{SIZE} pods need 1 cpu each; {free}; 2 of {SIZE} fit" in cond["message"], cond
        # It keeps its quota while held.
        assert is_true(held, c.QUOTA_RESERVED) and held["status"].get("admission")

        async def warned() -> bool:
            events = await api.events_for(namespace, wl["metadata"]["name"])
            return any(
                e["reason"] == HELD_EVENT and "2 of 3 fit" in e["message"] for e in events
            )

        await eventually(warned, what=f"a {HELD_EVENT} event with the numbers")

        async def none_released() -> bool:
            pods = await api.pods_of(namespace, "gang")
            return not bound(pods) and all(is_gated(p) for p in pods)

        await stays(none_released, for_s=3, what="no pod of the gang released or bound")
        if gang_gates:
            # Not handed to kube-scheduler either: no PodGroup before the pods fit.
            assert await api.kube.list(PODGROUPS, namespace=namespace) == []

        if room_from == "node":
            await add_node(cluster, frag.instance_type, f"{frag.instance_type}-z", "1")
        else:
            await free_blocker(api, frag)

        async def all_bound() -> list[Obj] | None:
            pods = bound(await api.pods_of(namespace, "gang"))
            return pods if len(pods) == SIZE else None

        pods = await eventually(all_bound, what=f"all {SIZE} pods bound")
        assert_bound_together(pods)
        fits = await api.wait_workload(
            namespace, "gang", lambda w: is_true(w, c.NODES_FIT), what=f"{c.NODES_FIT}=True"
        )
        assert condition(fits, c.NODES_FIT)["reason"] == c.NODES_FIT_FITS  # type: ignore[index]
        events = await api.events_for(namespace, wl["metadata"]["name"])
        assert any(e["reason"] == FITS_EVENT for e in events)
        if gang_gates:
            groups = await api.kube.list(PODGROUPS, namespace=namespace)
            assert [g["spec"]["schedulingPolicy"]["gang"]["minCount"] for g in groups] == [SIZE]
