"""The fragmentation case both clusters run: quota fits a 4-pod Job, free node capacity fits 3.

Two kwok nodes of 2 cpu each, labelled with an instance type of their own (so only this case's
flavor lands there), and a 1-cpu pod outside kqueue pinned to the second: 3 cpu free in all, in
pieces of 2 and 1, for four 1-cpu pods. Deleting the blocker frees the fourth cpu.

Its ClusterQueue turns the node-fit guard off unless asked (``node_fit_guard``): the cases
built on it test what kube-scheduler's gang placement (or its absence) does on its own. The
guard's own case (node_fit_case.py) sizes it otherwise: 3-pod gang, 1-cpu nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kqueue.controller import gang
from kqueue.controller.kube import NotFound
from kqueue.controller.resources import PODS
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL, FakeNode
from tests.controller_e2e.harness import (
    Api,
    cluster_queue,
    condition,
    eventually,
    flavor,
    job,
    local_queue,
    pause_container,
    unique,
)
from tests.fixtures.cluster import PODGROUPS

Obj = dict[str, Any]

GANG_SIZE = 4
NODE_CPU = "2"
BLOCKER = "blocker"


@dataclass
class Fragmented:
    instance_type: str
    nodes: tuple[str, ...]
    namespace: str

    @property
    def job_name(self) -> str:
        return "gang"


def bound(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName")]


async def _nodes_ready(cluster: LocalCluster, names: tuple[str, ...]) -> bool:
    ready = 0
    for name in names:
        status, body = await asyncio.to_thread(cluster.request, "GET", f"/api/v1/nodes/{name}")
        if status == 200 and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (body.get("status") or {}).get("conditions") or []
        ):
            ready += 1
    return ready == len(names)


async def add_node(
    cluster: LocalCluster, instance_type: str, name: str, cpu: str = NODE_CPU
) -> None:
    """A kwok node of ``instance_type`` with ``cpu``, Ready."""
    node = FakeNode(
        name=name,
        labels={INSTANCE_TYPE_LABEL: instance_type},
        allocatable={"cpu": cpu, "memory": "8Gi", "pods": "110"},
    )
    status, body = await asyncio.to_thread(
        cluster.request, "POST", "/api/v1/nodes", node.manifest()
    )
    assert status == 201, f"creating node {name}: {status} {body}"
    await eventually(lambda: _nodes_ready(cluster, (name,)), what=f"node {name} Ready")


@asynccontextmanager
async def fragmented(
    cluster: LocalCluster,
    api: Api,
    namespace: str,
    *,
    nodes: int = 2,
    node_cpu: str = NODE_CPU,
    blocker: bool = True,
    quota: int = GANG_SIZE,
    node_fit_guard: str | None = "Disabled",
) -> AsyncIterator[Fragmented]:
    """Nodes, blocker (on the last node), flavor, ClusterQueue (cpu quota ``quota``, node-fit
    guard ``node_fit_guard``; None: the Configuration's) and LocalQueue ``lq``; nodes named
    ``<instance type>-a``, ``-b``, ... (and any added with that prefix) removed afterwards."""
    itype = unique("frag")
    names = tuple(f"{itype}-{chr(ord('a') + i)}" for i in range(nodes))
    try:
        for name in names:
            await add_node(cluster, itype, name, node_cpu)
        if blocker:
            await api.kube.create(
                PODS,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": BLOCKER, "namespace": namespace},
                    "spec": {
                        "nodeName": names[-1],
                        "terminationGracePeriodSeconds": 0,
                        "containers": [pause_container("1")],
                    },
                },
                namespace=namespace,
            )
        fl, cq = unique("frag-flavor"), unique("frag-cq")
        await api.apply(flavor(fl, itype))
        queue = cluster_queue(cq, [(fl, str(quota))])
        if node_fit_guard is not None:
            queue["spec"]["nodeFitGuard"] = node_fit_guard
        await api.apply(queue)
        await api.apply(local_queue("lq", namespace, cq))
        yield Fragmented(instance_type=itype, nodes=names, namespace=namespace)
    finally:
        status, body = await asyncio.to_thread(cluster.request, "GET", "/api/v1/nodes")
        listed = [i["metadata"]["name"] for i in body.get("items") or []] if status == 200 else []
        for name in sorted({*names, *(n for n in listed if n.startswith(f"{itype}-"))}):
            await asyncio.to_thread(cluster.request, "DELETE", f"/api/v1/nodes/{name}")


async def submit_gang(api: Api, frag: Fragmented) -> None:
    await api.apply(job(frag.job_name, frag.namespace, "lq", count=GANG_SIZE, cpu="1"))


async def free_blocker(api: Api, frag: Fragmented) -> None:
    await api.kube.delete(PODS, BLOCKER, namespace=frag.namespace)

    async def gone() -> bool:
        pods = await api.kube.list(PODS, namespace=frag.namespace)
        return not any(p["metadata"]["name"] == BLOCKER for p in pods)

    await eventually(gone, what="the blocker pod gone")


def scheduled_at(pod: Obj) -> datetime | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            return datetime.fromisoformat(str(cond["lastTransitionTime"]).replace("Z", "+00:00"))
    return None


def assert_bound_together(pods: list[Obj]) -> None:
    """kube-scheduler bound the pods in one go: their ``PodScheduled`` went True at most 2 s
    apart (the API's resolution is a second; the binds run in parallel on a loaded machine), so
    a listing may catch some pods bound a moment before the rest. Placed one by one as room
    appears they would be further apart: here the room appears only after the test has watched
    none of them bound for 3 s (the gates-off case binds 3 at once and the 4th only then)."""
    times = [t for p in pods if (t := scheduled_at(p)) is not None]
    assert len(times) == len(pods), f"{len(pods) - len(times)} pod(s) not scheduled"
    spread = (max(times) - min(times)).total_seconds()
    assert spread <= 2, f"pods bound piecemeal: PodScheduled {spread}s apart"


async def assert_gang_unschedulable(
    api: Api,
    namespace: str,
    group: str,
    wl: Obj,
    workload: Callable[[], Awaitable[Obj | None]],
) -> None:
    """The admitted ``wl``'s PodGroup ``group`` exists, sized to the gang and owned by ``wl``,
    and the Workload (``workload`` reads it again) says the gang cannot be scheduled, naming
    the group: the quota fits the gang, the fragmented nodes do not."""

    async def pod_group() -> Obj | None:
        try:
            return await api.kube.get(PODGROUPS, group, namespace)
        except NotFound:
            return None

    pg = await eventually(pod_group, what=f"PodGroup {group}")
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == GANG_SIZE
    assert [r["uid"] for r in pg["metadata"]["ownerReferences"]] == [wl["metadata"]["uid"]]

    async def unschedulable() -> Obj | None:
        got = await workload()
        cond = condition(got, gang.POD_GROUP_SCHEDULED) if got else None
        # The first verdict may carry only the gang's waiting message.
        if cond is None or cond["status"] != "False" or "Insufficient cpu" not in cond["message"]:
            return None
        return cond

    cond = await eventually(unschedulable, what=f"{gang.POD_GROUP_SCHEDULED}=False")
    assert "Insufficient cpu" in cond["message"] and group in cond["message"]
