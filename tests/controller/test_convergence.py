"""The engine converges to the API server's state whatever the Workload informer missed.

On the shared fake API server, with the real Manager (informers, engine, scheduler, decision
writer): a workload is admitted, preempted and released while the informer sees none of it (its
watch events are withheld, as when a watch is cut and the informer relists). After the relist,
the engine holds it as pending, and it is admitted again once quota frees.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kqueue.api.config import Configuration
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.manager import Manager
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from kqueue.engine.types import WorkloadKey
from kqueue.engine.workload import WorkloadState
from tests.controller.fake_apiserver import FakeCluster, eventually
from tests.controller_e2e.harness import cluster_queue, flavor, local_queue

Obj = dict[str, Any]
NS = "team-a"


def _workload(name: str, queue: str, cpu: str) -> Obj:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": {
            "queueName": queue,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}],
        },
    }


def _admission(cluster: FakeCluster, name: str) -> Obj | None:
    obj = cluster.server.get(WORKLOADS, name, NS)
    return None if obj is None else (obj.get("status") or {}).get("admission")


def _has(cluster: FakeCluster, name: str, cond: str) -> bool:
    obj = cluster.server.get(WORKLOADS, name, NS) or {}
    return any(
        x["type"] == cond and x["status"] == "True"
        for x in (obj.get("status") or {}).get("conditions") or []
    )


@asynccontextmanager
async def leading(cluster: FakeCluster) -> AsyncIterator[Manager]:
    """A Manager whose informers have synced, leading (scheduling) until the block ends."""
    config = Configuration.model_validate({"leaderElection": {"leaderElect": False}})
    m = Manager(cluster.api, config, metrics=Metrics())
    tasks = [asyncio.create_task(i.run()) for i in m.informers().values()]
    try:
        for informer in m.informers().values():
            await asyncio.wait_for(informer.wait_synced(), 5)
        yield m
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _setup(cluster: FakeCluster) -> None:
    """A borrower with no quota of its own and a lender that reclaims, in one cohort."""
    server = cluster.server
    server.add(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    server.add(RESOURCE_FLAVORS, flavor("default", "x"))
    server.add(CLUSTER_QUEUES, cluster_queue("borrower", [("default", "0")], cohort="co"))
    server.add(
        CLUSTER_QUEUES,
        cluster_queue(
            "lender", [("default", "2")], cohort="co", preemption={"reclaimWithinCohort": "Any"}
        ),
    )
    server.add(LOCAL_QUEUES, local_queue("b", NS, "borrower"))
    server.add(LOCAL_QUEUES, local_queue("l", NS, "lender"))


async def test_an_admission_and_its_eviction_both_missed_between_two_lists(
    cluster: FakeCluster,
) -> None:
    _setup(cluster)
    cluster.server.add(WORKLOADS, _workload("w", "b", "2"))
    w = WorkloadKey(f"{NS}/w")
    async with leading(cluster) as m:
        # From here on the informer sees nothing of w: its admission, its eviction and its
        # release all happen between two lists.
        cluster.server.lag(WORKLOADS, w)
        lead = asyncio.create_task(m.lead())
        try:
            await eventually(lambda: _admission(cluster, "w") is not None, what="w admitted")
            assert m.workloads.store.get(w) is not None
            assert m.workloads.store.get(w).status.admission is None  # type: ignore[union-attr]
            # The lender's own workload reclaims the quota w borrowed: w is preempted, and (a
            # Workload no integration runs) released in the same write.
            cluster.server.add(WORKLOADS, _workload("x", "l", "2"))
            await eventually(
                lambda: _has(cluster, "w", c.EVICTED) and _admission(cluster, "w") is None,
                what="w evicted and released",
            )
            # The relist: the store goes from w pending (before its admission) to w pending
            # (after its release) in one update.
            await m.workloads.relist()
            assert m.engine.state(w) == WorkloadState.PENDING
            await eventually(lambda: _admission(cluster, "x") is not None, what="x admitted")
            assert _admission(cluster, "w") is None

            # x finishes: w is admitted again, with no other event needed.
            cluster.server.catch_up(WORKLOADS, w)
            await cluster.kube.patch(
                WORKLOADS, "x", {"status": {"conditions": [{
                    "type": c.FINISHED, "status": "True", "reason": "Succeeded",
                    "message": "done", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
                namespace=NS, subresource="status",
            )
            await eventually(lambda: _admission(cluster, "w") is not None, what="w again")
            assert await m.resync_workloads() == 0  # nothing left to repair
        finally:
            lead.cancel()
            await asyncio.gather(lead, return_exceptions=True)
