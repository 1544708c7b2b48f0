"""Queueing strategies and borrowing, end to end."""

from __future__ import annotations

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import NotFound
from kqueue.controller.resources import CLUSTER_QUEUES, JOBS, RESOURCE_FLAVORS
from tests.controller_e2e.harness import (
    Api,
    after_second_of,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    pending_reason,
    stays,
    unique,
)

pytestmark = pytest.mark.cluster


async def _three_jobs(api: Api, namespace: str, strategy: str) -> str:
    """A (2 cpu, running), B (2 cpu, does not fit), C (1 cpu, would fit) in a 3-cpu queue."""
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "3")], strategy=strategy))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("a", namespace, "q", cpu="2"))
    await api.wait_workload(namespace, "a", lambda w: is_true(w, c.ADMITTED), what="A admitted")
    await api.apply(job("b", namespace, "q", cpu="2"))
    b = await api.wait_workload(
        namespace, "b", lambda w: pending_reason(w) is not None, what="B pending"
    )
    assert pending_reason(b) == c.WAITING_FOR_QUOTA
    # The message gives numbers: requested, available.
    message = (b["status"]["conditions"][0]["message"])
    assert "cpu" in message
    await after_second_of(b["metadata"]["creationTimestamp"])
    await api.apply(job("c", namespace, "q", cpu="1"))
    return cq


async def test_strict_fifo_blocks_behind_the_head(api: Api, namespace: str) -> None:
    await _three_jobs(api, namespace, "StrictFIFO")
    await api.wait_workload(
        namespace, "c", lambda w: pending_reason(w) is not None, what="C pending"
    )

    async def c_pending() -> bool:
        wl = await api.workload_of(namespace, "c")
        return wl is not None and not is_true(wl, c.QUOTA_RESERVED)

    await stays(c_pending, for_s=3, what="C pending behind B (StrictFIFO)")
    # A goes away: B, then C, are admitted (3 cpu = 2 + 1).
    await api.kube.delete(JOBS, "a", namespace=namespace)
    for name in ("b", "c"):
        await api.wait_workload(
            namespace, name, lambda w: is_true(w, c.ADMITTED), what=f"{name} admitted"
        )


async def test_best_effort_fifo_admits_what_fits(api: Api, namespace: str) -> None:
    await _three_jobs(api, namespace, "BestEffortFIFO")
    await api.wait_workload(namespace, "c", lambda w: is_true(w, c.ADMITTED), what="C admitted")
    b = await api.workload_of(namespace, "b")
    assert b is not None and not is_true(b, c.QUOTA_RESERVED)


async def test_borrowing_in_a_cohort(api: Api, namespace: str) -> None:
    od, cohort = unique("od"), unique("cohort")
    team_a, team_b = unique("team-a"), unique("team-b")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(team_a, [(od, "2")], cohort=cohort))
    await api.apply(cluster_queue(team_b, [(od, "4")], cohort=cohort))
    await api.apply(local_queue("a", namespace, team_a))
    # 4 cpu in a 2-cpu queue: admitted by borrowing 2 from team-b's unused quota.
    await api.apply(job("big", namespace, "a", count=4, cpu="1"))
    wl = await api.wait_workload(
        namespace, "big", lambda w: is_true(w, c.ADMITTED), what="admitted by borrowing"
    )
    assert wl["status"]["admission"]["clusterQueue"] == team_a

    async def borrowed() -> dict[str, str] | None:
        obj = await api.kube.get(CLUSTER_QUEUES, team_a)
        for f in (obj.get("status") or {}).get("flavorsUsage") or []:
            for r in f["resources"]:
                if r["name"] == "cpu" and r.get("total") == "4":
                    return dict(r)
        return None

    usage = await eventually(borrowed, what=f"{team_a} usage 4 cpu")
    assert usage["borrowed"] == "2"
    # What is left in the cohort (2 cpu) is not enough for another 3-cpu job of team-a.
    await api.apply(job("more", namespace, "a", count=3, cpu="1"))
    more = await api.wait_workload(
        namespace, "more", lambda w: pending_reason(w) is not None, what="pending"
    )
    assert pending_reason(more) in (c.WAITING_FOR_QUOTA, c.EXCEEDS_MAX_QUOTA)


async def test_resources_in_use_are_not_deleted_under_workloads(api: Api, namespace: str) -> None:
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("running", namespace, "q", cpu="1"))
    await api.wait_workload(namespace, "running", lambda w: is_true(w, c.ADMITTED), what="admitted")

    async def has_finalizers() -> bool:
        objs = [await api.kube.get(CLUSTER_QUEUES, cq), await api.kube.get(RESOURCE_FLAVORS, od)]
        return all(c.RESOURCE_IN_USE_FINALIZER in o["metadata"].get("finalizers", []) for o in objs)

    await eventually(has_finalizers, what="resource-in-use finalizers")
    await api.kube.delete(CLUSTER_QUEUES, cq)
    await api.kube.delete(RESOURCE_FLAVORS, od)

    async def terminating() -> dict[str, str] | None:
        obj = await api.kube.get(CLUSTER_QUEUES, cq)
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond["type"] == c.ACTIVE and cond["reason"] == c.CLUSTER_QUEUE_ACTIVE_TERMINATING:
                return dict(cond)
        return None

    cond = await eventually(terminating, what="ClusterQueue Active=False Terminating")
    assert cond["status"] == "False"
    # A new workload is not admitted into a terminating ClusterQueue.
    await api.apply(job("late", namespace, "q", cpu="1"))
    await api.wait_workload(
        namespace, "late", lambda w: pending_reason(w) is not None, what="late job pending"
    )
    assert (await api.kube.get(RESOURCE_FLAVORS, od))["metadata"].get("deletionTimestamp")

    # Once the last admitted workload is gone, both go.
    await api.kube.delete(JOBS, "running", namespace=namespace)

    async def gone() -> bool:
        for resource, name in ((CLUSTER_QUEUES, cq), (RESOURCE_FLAVORS, od)):
            try:
                await api.kube.get(resource, name)
                return False
            except NotFound:
                pass
        return True

    await eventually(gone, what="ClusterQueue and ResourceFlavor deleted")
