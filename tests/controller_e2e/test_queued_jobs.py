"""Queued work does not age, count or look as running (Kueue's behaviour), on the real control
plane: a queued Job is suspended, so its deadline does not run, it uses no namespace
ResourceQuota and shows no active pods; a Job its user created suspended stays the user's.
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import CLUSTER_QUEUES, JOBS, Resource
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    condition,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    stays,
    unique,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas")


async def _queue(api: Api, namespace: str, *, cpu: str = "4", stop_policy: str | None = None) -> str:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, cpu)], stop_policy=stop_policy))
    await api.apply(local_queue("lq", namespace, cq))
    return cq


def _pending_with(reason: str) -> Any:
    def pred(wl: Obj) -> bool:
        cond = condition(wl, c.QUOTA_RESERVED) or {}
        return cond.get("status") == "False" and cond.get("reason") == reason

    return pred


async def test_a_held_job_s_deadline_does_not_run_while_it_is_queued(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    cq = await _queue(api, namespace, stop_policy="Hold")
    spec = job("deadline", namespace, "lq", count=1, complete_after="2s")
    spec["spec"]["activeDeadlineSeconds"] = 10
    created = await api.apply(spec)
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    await api.wait_workload(namespace, "deadline", lambda w: True, what="created")

    async def not_failed() -> bool:
        j = await api.job(namespace, "deadline")
        return not is_true(j, "Failed") and not (j.get("status") or {}).get("active")

    # Twice its deadline in the queue: under gate-only holding it was Failed/DeadlineExceeded.
    await stays(not_failed, for_s=22, what="the queued Job neither failing nor active")
    assert await api.pods_of(namespace, "deadline") == []

    # Released: it runs, on the flavor's nodes, and completes within its deadline.
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": "None"}})
    await api.wait_workload(namespace, "deadline", lambda w: is_true(w, c.ADMITTED), what="admitted")

    async def complete() -> Obj | None:
        j = await api.job(namespace, "deadline")
        return j if is_true(j, "Complete") else None

    done = await eventually(complete, within=60, what="the Job Complete after admission")
    assert c.SUSPENDED_BY_KQUEUE_ANNOTATION not in (done["metadata"].get("annotations") or {})
    assert done["spec"]["template"]["spec"]["nodeSelector"] == {INSTANCE_TYPE_LABEL: "on-demand"}


async def test_queued_jobs_use_no_namespace_resource_quota(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    await _queue(api, namespace, stop_policy="Hold")
    await api.kube.create(
        RESOURCE_QUOTAS,
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "team", "namespace": namespace},
            "spec": {"hard": {"pods": "4", "requests.cpu": "4"}},
        },
        namespace=namespace,
    )
    await api.apply(job("first", namespace, "lq", count=4))
    await api.apply(job("second", namespace, "lq", count=4))
    for name in ("first", "second"):
        await api.wait_workload(namespace, name, lambda w: True, what="created")

    async def quota_used() -> Obj | None:
        rq = await api.kube.get(RESOURCE_QUOTAS, "team", namespace)
        used = (rq.get("status") or {}).get("used")
        return used if used is not None else None

    used = await eventually(quota_used, within=30, what="the ResourceQuota's usage")
    assert used.get("pods") == "0" and used.get("requests.cpu") == "0", used
    for name in ("first", "second"):
        assert await api.pods_of(namespace, name) == []
        events = [e["reason"] for e in await api.events_for(namespace, name)]
        assert "FailedCreate" not in events, events


async def test_a_job_that_can_never_fit_does_not_look_active(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    await _queue(api, namespace, cpu="4")
    await api.apply(job("huge", namespace, "lq", count=20))
    await api.wait_workload(
        namespace, "huge", _pending_with(c.EXCEEDS_MAX_QUOTA), what="pending ExceedsMaxQuota"
    )

    async def idle() -> bool:
        j = await api.job(namespace, "huge")
        return not (j.get("status") or {}).get("active") and j["spec"]["suspend"] is True

    await stays(idle, for_s=5, what="status.active 0 and suspended")
    assert await api.pods_of(namespace, "huge") == []


async def test_a_job_created_suspended_waits_for_its_user(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    await _queue(api, namespace, cpu="4")
    spec = job("mine", namespace, "lq", count=2, complete_after="2s")
    spec["spec"]["suspend"] = True
    created = await api.apply(spec)
    assert c.SUSPENDED_BY_KQUEUE_ANNOTATION not in (created["metadata"].get("annotations") or {})

    async def no_workload() -> bool:
        return await api.workload_of(namespace, "mine") is None

    # Quota is free, but the Job is its user's: no Workload, no resume.
    await stays(no_workload, for_s=5, what="no Workload for the user-suspended Job")
    assert (await api.job(namespace, "mine"))["spec"]["suspend"] is True
    events = {e["reason"]: e["message"] for e in await api.events_for(namespace, "mine")}
    assert "SuspendedByUser" in events and "spec.suspend to false" in events["SuspendedByUser"]

    # The user resumes it: the webhook queues it (still suspended, now kqueue's), it is
    # admitted, resumed by kqueue and completes.
    resumed = await api.kube.patch(JOBS, "mine", {"spec": {"suspend": False}}, namespace=namespace)
    assert resumed["spec"]["suspend"] is True
    assert resumed["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    await api.wait_workload(namespace, "mine", lambda w: is_true(w, c.ADMITTED), what="admitted")

    async def complete() -> bool:
        return is_true(await api.job(namespace, "mine"), "Complete")

    await eventually(complete, within=60, what="the user-resumed Job Complete")



def _cpu_of(wl: Obj) -> str:
    [main] = wl["spec"]["podSets"]
    return str(main["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])


async def test_a_queued_job_given_more_cpu_keeps_its_workload_updated_in_place(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """Kubernetes lets a suspended Job's container resources change; kqueue's Workload follows
    while it waits (Kueue's updateWorkloadToMatchJob), so the quota charged at admission is
    what the pods request."""
    cq = await _queue(api, namespace, cpu="4", stop_policy="Hold")
    await api.apply(job("resize", namespace, "lq", count=2, cpu="1"))
    before = await api.wait_workload(namespace, "resize", lambda w: True, what="created")
    assert _cpu_of(before) == "1"

    queued = await api.job(namespace, "resize")
    container = queued["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "2", "memory": "64Mi"}}
    await api.kube.patch(
        JOBS,
        "resize",
        {"spec": {"template": {"spec": {"containers": [container]}}}},
        namespace=namespace,
    )

    after = await api.wait_workload(
        namespace, "resize", lambda w: _cpu_of(w) == "2", what="the Workload asking for 2 cpu"
    )
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # the same, in place


    async def updated() -> list[str] | None:
        # Events are written in the background: wait for it.
        messages = [
            e["message"] for e in await api.events_for(namespace, "resize")
            if e["reason"] == "UpdatedWorkload"
        ]
        return messages or None

    messages = await eventually(updated, within=30, what="the UpdatedWorkload event")
    assert len(messages) == 1, messages
    assert "a pod's requests cpu 1, memory 64Mi are now cpu 2, memory 64Mi" in messages[0]

    # Released: admitted for what the pods request, 2 x 2 cpu, all of the queue's 4.
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": "None"}})
    admitted = await api.wait_workload(
        namespace, "resize", lambda w: is_true(w, c.ADMITTED), what="admitted"
    )
    [assignment] = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"]["cpu"] == "4"
