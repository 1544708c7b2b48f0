"""Two ``kqueue run`` replicas on one cluster: one leader schedules, both serve webhooks, and the
standby takes over within the lease duration when the leader is killed."""

from __future__ import annotations

import re
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kqueue.api.quantity import parse_quantity
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.job import webhook as job_webhook
from kqueue.controller.resources import WORKLOADS, Resource
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    KQUEUE_NAMESPACE,
    Api,
    KqueueProcess,
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

# timing-bound: run on one worker with the machine to itself (hack/test-phases.sh)
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

Obj = dict[str, Any]

LEASES = Resource("coordination.k8s.io", "v1", "leases")
LEASE_NAME = "kqueue-e2e"  # the harness's leaderElection.resourceName
LEASE_DURATION_S = 4.0  # the harness's leaderElection.leaseDuration
QUOTA_CPU = 2


class Replicas:
    def __init__(self, cluster: LocalCluster, root: Path) -> None:
        self.a = KqueueProcess(cluster=cluster, work_dir=root / "a")
        self.b = KqueueProcess(cluster=cluster, work_dir=root / "b")

    def pid(self, proc: KqueueProcess) -> int:
        assert proc.proc is not None
        return proc.proc.pid


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    root = Path(tmp_path_factory.mktemp("kqueue-ha"))
    (root / "a").mkdir()
    (root / "b").mkdir()
    replicas = Replicas(cluster, root)
    # A starts first and leads. B's setup points the webhook configurations at B, so the API
    # server keeps calling a live replica once A is killed.
    replicas.a.setup()
    replicas.a.start()
    try:
        replicas.b.setup()
        replicas.b.start()
        yield replicas
    finally:
        replicas.a.stop()
        replicas.b.teardown()


async def _holder(api: Api) -> str:
    lease = await api.kube.get(LEASES, LEASE_NAME, KQUEUE_NAMESPACE)
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _holder_pid(holder: str) -> int | None:
    m = re.match(r"^.+_(\d+)_[0-9a-f]+$", holder)
    return int(m.group(1)) if m else None


async def _mutate_job(proc: KqueueProcess) -> Obj:
    """An AdmissionReview for a Job sent straight to one replica's webhook server."""
    ctx = ssl.create_default_context(cafile=str(proc.work_dir / "certs" / "ca.crt"))
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "operation": "CREATE",
            "namespace": "default",
            "name": "probe",
            "object": job("probe", "default", "lq"),
        },
    }
    url = f"https://127.0.0.1:{proc.webhook_port}{job_webhook.MUTATE_PATH}"
    async with aiohttp.ClientSession() as session, session.post(url, json=review, ssl=ctx) as resp:
        assert resp.status == 200
        body: Obj = await resp.json()
    return dict(body["response"])


async def _admitted_cpu(api: Api, namespace: str) -> int:
    total = 0
    for w in await api.kube.list(WORKLOADS, namespace=namespace):
        adm = (w.get("status") or {}).get("admission")
        if adm is None or is_true(w, c.FINISHED):
            continue
        for psa in adm["podSetAssignments"]:
            total += parse_quantity(psa["resourceUsage"]["cpu"], "cpu")
    return total


async def test_leader_failover(api: Api, kqueue: Replicas, namespace: str) -> None:
    a, b = kqueue.a, kqueue.b
    pid_a, pid_b = kqueue.pid(a), kqueue.pid(b)

    async def a_leads() -> bool:
        return _holder_pid(await _holder(api)) == pid_a

    await eventually(a_leads, within=20, what="replica A holding the Lease")

    # Both replicas serve the webhooks (the standby too: it answers admission requests).
    for proc in (a, b):
        response = await _mutate_job(proc)
        assert response["allowed"] is True and response.get("patch"), proc.webhook_port

    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, str(QUOTA_CPU))]))
    await api.apply(local_queue("lq", namespace, cq))
    await api.apply(job("before", namespace, "lq", count=1))
    await api.wait_workload(namespace, "before", lambda w: is_true(w, c.ADMITTED), what="Admitted")
    # The standby never led so far: only the leader schedules.
    assert "leading: engine rebuilt" not in b.log_path.read_text()
    assert _holder_pid(await _holder(api)) == pid_a

    # Kill the leader: no graceful release, the standby waits for the lease to expire.
    killed_at = time.monotonic()
    a.stop(kill=True)

    async def b_leads() -> bool:
        return _holder_pid(await _holder(api)) == pid_b

    await eventually(b_leads, within=LEASE_DURATION_S + 6, what="replica B taking the Lease")
    took = time.monotonic() - killed_at
    assert took <= LEASE_DURATION_S + 6

    # Admissions continue under the new leader, within quota, each workload admitted once.
    await api.apply(job("after", namespace, "lq", count=1))
    await api.wait_workload(namespace, "after", lambda w: is_true(w, c.ADMITTED), what="Admitted")
    await api.apply(job("over", namespace, "lq", count=1))
    await api.wait_workload(
        namespace,
        "over",
        lambda w: pending_reason(w) == c.WAITING_FOR_QUOTA,
        what="QuotaReserved=False (WaitingForQuota) for the Job beyond the quota",
    )

    async def within_quota() -> bool:
        return await _admitted_cpu(api, namespace) <= QUOTA_CPU * 1000

    await stays(within_quota, for_s=2, what="admitted cpu within the quota")
    for w in await api.kube.list(WORKLOADS, namespace=namespace):
        events = await api.events_for(namespace, w["metadata"]["name"])
        admitted = sum(e.get("count", 1) for e in events if e["reason"] == c.ADMITTED_REASON)
        assert admitted <= 1, f"{w['metadata']['name']} admitted {admitted} times"
    assert "leading: engine rebuilt" in b.log_path.read_text()
