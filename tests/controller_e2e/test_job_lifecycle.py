"""A batch/v1 Job's whole life under kqueue, on the real control plane."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.integrations import workload_name_for_job
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import CLUSTER_QUEUES, LOCAL_QUEUES
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
    unique,
)

pytestmark = pytest.mark.cluster


async def test_job_full_life(api: Api, kqueue: KqueueProcess, namespace: str) -> None:
    od, spot, cq = unique("on-demand"), unique("spot"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(flavor(spot, "spot", spot=True))
    # Stopped first, so the Job is seen queued (suspended) and its Workload pending.
    await api.apply(cluster_queue(cq, [(od, "2"), (spot, "4")], stop_policy="Hold"))
    await api.apply(local_queue("user-queue", namespace, cq))
    created = await api.apply(
        job("sample", namespace, "user-queue", count=2, cpu="1", complete_after="4s")
    )

    # The Job webhook gated the template and marked its pods managed.
    template = created["spec"]["template"]
    assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]
    assert template["metadata"]["labels"][c.MANAGED_LABEL] == "true"

    # A Workload owned by the Job, with Kueue's deterministic name; pending while stopped.
    wl = await api.wait_workload(
        namespace,
        "sample",
        lambda w: (condition(w, c.QUOTA_RESERVED) or {}).get("status") == "False"
        and cq in (condition(w, c.QUOTA_RESERVED) or {}).get("message", ""),
        what=f"QuotaReserved=False naming ClusterQueue {cq}",
    )
    assert wl["metadata"]["name"] == workload_name_for_job(created)
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", created["metadata"]["uid"], True)
    pending = condition(wl, c.QUOTA_RESERVED)
    assert pending is not None and pending["reason"] in (c.SUSPENDED, c.MISCONFIGURED)

    # Queued, the Job is suspended (as kqueue's): no pods, nothing active.
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    assert await api.pods_of(namespace, "sample") == []
    assert not ((await api.job(namespace, "sample")).get("status") or {}).get("active")

    # Resume the queue: the whole workload is admitted on the first flavor that fits.
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": "None"}})
    wl = await api.wait_workload(
        namespace, "sample", lambda w: is_true(w, c.ADMITTED), what="Admitted=True"
    )
    assert is_true(wl, c.QUOTA_RESERVED)
    assert condition(wl, c.QUOTA_RESERVED)["reason"] == c.QUOTA_RESERVED_REASON  # type: ignore[index]
    admission = wl["status"]["admission"]
    assert admission["clusterQueue"] == cq
    [psa] = admission["podSetAssignments"]
    assert psa["name"] == "main" and psa["count"] == 2
    assert psa["flavors"] == {"cpu": od, "memory": od}
    assert psa["resourceUsage"]["cpu"] == "2"

    # Released pods: gate gone, the flavor's node labels as nodeSelector, bound to a kwok node.
    async def running_pods() -> list[Any] | None:
        pods = await api.pods_of(namespace, "sample")
        ok = len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else None

    pods = await eventually(running_pods, what="2 released pods Running")
    for p in pods:
        assert not p["spec"].get("schedulingGates")
        assert p["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert p["spec"]["nodeName"].startswith("kwok-on-demand-")

    # The ClusterQueue and LocalQueue report the usage.
    async def cq_usage() -> Any:
        obj = await api.kube.get(CLUSTER_QUEUES, cq)
        st = obj.get("status") or {}
        return st if st.get("admittedWorkloads") == 1 else None

    st = await eventually(cq_usage, what="ClusterQueue status admittedWorkloads=1")
    assert kqueue.metric(
        "kqueue_cluster_queue_resource_usage", cluster_queue=cq, flavor=od, resource="cpu"
    ) == 2
    assert kqueue.metric(
        "kqueue_cluster_queue_nominal_quota", cluster_queue=cq, flavor=spot, resource="cpu"
    ) == 4
    usage = {f["name"]: {r["name"]: r["total"] for r in f["resources"]} for f in st["flavorsUsage"]}
    assert usage[od]["cpu"] == "2"
    active = next(x for x in st["conditions"] if x["type"] == c.ACTIVE)
    assert (active["status"], active["reason"]) == ("True", c.CLUSTER_QUEUE_ACTIVE_READY)

    async def lq_usage() -> Any:
        obj = await api.kube.get(LOCAL_QUEUES, "user-queue", namespace)
        st = obj.get("status") or {}
        return st if st.get("admittedWorkloads") == 1 else None

    await eventually(lq_usage, what="LocalQueue status admittedWorkloads=1")

    # Job completes; the Workload finishes and the quota is free again.
    wl = await api.wait_workload(
        namespace, "sample", lambda w: is_true(w, c.FINISHED), what="Finished=True", within=90
    )
    assert condition(wl, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]
    finished_job = await api.job(namespace, "sample")
    assert finished_job["status"]["succeeded"] == 2

    async def cq_free() -> Any:
        obj = await api.kube.get(CLUSTER_QUEUES, cq)
        st = obj.get("status") or {}
        return st if st.get("admittedWorkloads", 0) == 0 and st.get("flavorsUsage") else None

    st = await eventually(cq_free, what="ClusterQueue usage back to zero")
    usage = {f["name"]: {r["name"]: r["total"] for r in f["resources"]} for f in st["flavorsUsage"]}
    assert usage[od]["cpu"] == "0"

    # Metrics.
    assert kqueue.metric("kqueue_admitted_workloads_total", cluster_queue=cq) == 1
    assert kqueue.metric("kqueue_quota_reserved_workloads_total", cluster_queue=cq) == 1
    assert kqueue.metric("kqueue_admission_attempts_total", result="success") >= 1
    assert kqueue.metric("kqueue_pod_scheduling_gate_removal_seconds_count") >= 2
    assert kqueue.metric("kqueue_cluster_queue_status", cluster_queue=cq, status="active") == 1

    # Events on the Workload and on the Job.
    async def events() -> set[str] | None:
        wl_reasons = {e["reason"] for e in await api.events_for(namespace, wl["metadata"]["name"])}
        job_reasons = {e["reason"] for e in await api.events_for(namespace, "sample")}
        want_wl = {c.QUOTA_RESERVED_REASON, c.ADMITTED_REASON, "Pending", c.FINISHED}
        want_job = {"CreatedWorkload", "Started"}
        return wl_reasons | job_reasons if want_wl <= wl_reasons and want_job <= job_reasons else None

    await eventually(events, what="Workload and Job events")
