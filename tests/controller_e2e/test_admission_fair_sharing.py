"""Admission fair sharing on the real control plane: two LocalQueues feed one ClusterQueue with
``admissionScope.admissionMode: UsageBasedAdmissionFairSharing``; team-a floods first, and once
its usage has accrued team-b's Jobs are admitted ahead of the rest of the flood when the
first flood Jobs end. The LocalQueues'
status shows their decayed ``consumedResources``, the ClusterQueue says admission fair sharing
is on, and the usage is exported as a metric."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import CLUSTER_QUEUES, JOBS, LOCAL_QUEUES
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    Api,
    Obj,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-afs"))
    # A short sampling interval, so that the status follows within the test's patience.
    yield from configured_kqueue(
        cluster,
        work_dir,
        {"admissionFairSharing": {"usageHalfLifeTime": "1m", "usageSamplingInterval": "2s"}},
    )


def _reserved(wl: Obj | None) -> bool:
    return wl is not None and is_true(wl, c.QUOTA_RESERVED)


async def test_the_quiet_team_is_admitted_ahead_of_the_flood(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    od, cq = unique("od"), unique("shared")
    await api.apply(flavor(od, "on-demand"))
    spec = cluster_queue(cq, [(od, "2")])
    spec["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    await api.apply(spec)
    await api.apply(local_queue("team-a", namespace, cq))
    await api.apply(local_queue("team-b", namespace, cq))

    # team-a floods: six 1-cpu Jobs; two fit at once and run until the test deletes them, so the
    # quota stays full until team-b's Jobs are queued, however slow a busy machine is (a timed
    # completion raced team-b's arrival on a loaded CI machine).
    flood = [f"a{i}" for i in range(6)]
    for name in flood:
        await api.apply(job(name, namespace, "team-a", cpu="1"))
    # Which two go first among Jobs created in the same second is the queue's tie-break: read it.
    async def running() -> list[str] | None:
        held = [n for n in flood if _reserved(await api.workload_of(namespace, n))]
        return held if len(held) == 2 else None

    first = await eventually(running, what="two flood Jobs holding the quota")
    rest = [n for n in flood if n not in first]

    # team-a's usage accrues in its LocalQueue's status.
    async def consumed(lq: str) -> str | None:
        obj = await api.kube.get(LOCAL_QUEUES, lq, namespace)
        fs = ((obj.get("status") or {}).get("fairSharing") or {})
        afs = fs.get("admissionFairSharingStatus") or {}
        cpu = (afs.get("consumedResources") or {}).get("cpu")
        return cpu if cpu not in (None, "0") else None

    used = await eventually(lambda: consumed("team-a"), what="team-a's consumedResources")
    assert used is not None

    # team-b sends two Jobs after the flood: they go first when quota frees up.
    for name in ("b0", "b1"):
        await api.apply(job(name, namespace, "team-b", cpu="1"))
    # The premise: team-b's Jobs are queued while team-a's first two still hold all the quota.
    for name in ("b0", "b1"):
        await api.wait_workload(namespace, name, lambda wl: wl is not None, what="queued")
    for name in rest:
        wl = await api.workload_of(namespace, name)
        assert wl is not None and not _reserved(wl), f"{name} admitted before team-b arrived"
    # The two running flood Jobs end: their quota frees, one cpu at a time.
    for name in first:
        await api.kube.delete(JOBS, name, namespace=namespace)
    for name in ("b0", "b1"):
        await api.wait_workload(namespace, name, _reserved, what="admitted ahead of the flood", within=90)
    # The freed quota went to team-b: the rest of the flood still waits.
    for name in rest:
        wl = await api.workload_of(namespace, name)
        assert wl is not None and not _reserved(wl), f"{name} was admitted before team-b's Jobs"

    # The ClusterQueue says admission fair sharing orders it; the usage is a metric.
    cq_obj = await api.kube.get(CLUSTER_QUEUES, cq)
    [cond] = [x for x in cq_obj["status"]["conditions"] if x["type"] == "AdmissionFairSharing"]
    assert (cond["status"], cond["reason"]) == ("True", "Enabled")
    assert await eventually(lambda: consumed("team-b"), what="team-b's consumedResources")

    async def metric() -> float | None:
        # (KqueueProcess.metric takes the metric's name as ``name``: read the text instead.)
        for line in kqueue.metrics().splitlines():
            if line.startswith("kqueue_local_queue_admission_fair_sharing_usage{") and (
                'name="team-a"' in line and f'namespace="{namespace}"' in line
            ):
                value = float(line.rsplit(" ", 1)[1])
                return value if value > 0 else None
        return None

    assert await eventually(metric, what="kqueue_local_queue_admission_fair_sharing_usage") > 0
