"""Kueue's metrics from a running kqueue: the LocalQueue family while a Job runs, after it
finished and after an eviction, scraped from /metrics with its labels, on the real control
plane (waitForPodsReady on, for the time-to-ready histograms)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import CLUSTER_QUEUES
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    priority_class,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    # A long timeout: PodsReady is recorded (and timed), nothing is evicted for it.
    yield from configured_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-metrics")),
        {"waitForPodsReady": {"enable": True, "timeout": "300s", "blockAdmission": False}},
    )


def series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of ``name`` in an exposition, with all its labels."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if m is not None and m.group(1) == name:
            out.append((dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or "")), float(m.group(4))))
    return out


def one(text: str, metric: str, /, **labels: str) -> tuple[dict[str, str], float]:
    """The one sample of ``metric`` carrying ``labels``: its full label set and value."""
    found = [(got, v) for got, v in series(text, metric) if all(got.get(k) == x for k, x in labels.items())]
    assert len(found) == 1, (metric, labels, series(text, metric))
    return found[0]


async def test_local_queue_metrics_of_a_job_admitted_and_finished(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    fl, cq, wpc = unique("metrics-f"), unique("metrics-cq"), unique("metrics-prio")
    await api.apply(flavor(fl, "on-demand"))
    await api.apply(cluster_queue(cq, [(fl, "2")]))
    await api.apply(local_queue("team-queue", namespace, cq))
    await api.apply(priority_class(wpc, 50))
    lq = {"name": "team-queue", "namespace": namespace}
    # "train" holds the 2 cpus for a few seconds; "later" (1 cpu) waits meanwhile.
    await api.apply(
        job("train", namespace, "team-queue", count=2, cpu="1", complete_after="6s",
            labels={c.PRIORITY_CLASS_LABEL: wpc})
    )
    await api.wait_workload(namespace, "train", lambda w: is_true(w, c.ADMITTED), what="Admitted")
    await api.apply(job("later", namespace, "team-queue", count=1, cpu="1", complete_after="1s"))

    async def running() -> str | None:
        text = kqueue.metrics()
        busy = series(text, "kqueue_local_queue_admitted_active_workloads")
        pending = series(text, "kqueue_local_queue_pending_workloads")
        waiting = sum(v for got, v in pending if got.get("name") == "team-queue")
        if any(got == lq and v == 1 for got, v in busy) and waiting == 1:
            return text
        return None

    text = await eventually(running, what="LocalQueue metrics: 1 admitted, 1 pending")
    assert one(text, "kqueue_local_queue_reserving_active_workloads", **lq) == (lq, 1)
    usage = {**lq, "flavor": fl, "resource": "cpu"}
    assert one(text, "kqueue_local_queue_resource_usage", **usage) == (usage, 2)
    assert one(text, "kqueue_local_queue_resource_reservation", **usage) == (usage, 2)
    assert one(text, "kqueue_local_queue_status", **lq, active="True") == ({**lq, "active": "True"}, 1)
    assert one(text, "kqueue_local_queue_status", **lq, active="False")[1] == 0
    admitted = {**lq, "priority_class": wpc}
    assert one(text, "kqueue_local_queue_admitted_workloads_total", **admitted) == (admitted, 1)
    assert one(text, "kqueue_local_queue_quota_reserved_workloads_total", **admitted) == (admitted, 1)
    assert one(text, "kqueue_local_queue_admission_wait_time_seconds_count", **admitted)[1] == 1
    assert one(text, "kqueue_admitted_workloads_total", cluster_queue=cq, priority_class=wpc) == (
        {"cluster_queue": cq, "priority_class": wpc}, 1
    )

    # Both Jobs finish: the queue is empty, two finished Workloads exist.
    for name in ("train", "later"):
        await api.wait_workload(
            namespace, name, lambda w: is_true(w, c.FINISHED), what=f"{name} Finished", within=90
        )

    async def settled() -> str | None:
        text = kqueue.metrics()
        done = series(text, "kqueue_local_queue_finished_workloads")
        return text if any(got == lq and v == 2 for got, v in done) else None

    text = await eventually(settled, what="LocalQueue metrics: 2 finished Workloads")
    assert one(text, "kqueue_local_queue_admitted_active_workloads", **lq) == (lq, 0)
    assert one(text, "kqueue_local_queue_resource_usage", **usage)[1] == 0
    for status in ("active", "inadmissible"):
        assert one(text, "kqueue_local_queue_pending_workloads", **lq, status=status)[1] == 0
    assert one(text, "kqueue_local_queue_finished_workloads_total", **admitted) == (admitted, 1)
    unclassed = {**lq, "priority_class": ""}
    assert one(text, "kqueue_local_queue_finished_workloads_total", **unclassed) == (unclassed, 1)
    assert one(text, "kqueue_local_queue_admitted_workloads_total", **unclassed)[1] == 1
    assert one(text, "kqueue_local_queue_execution_time_seconds_count", **admitted)[1] == 1
    assert one(text, "kqueue_finished_workloads_total", cluster_queue=cq, priority_class=wpc)[1] == 1
    assert one(text, "kqueue_finished_workloads", cluster_queue=cq)[1] == 2
    assert one(text, "kqueue_cluster_queue_info", cluster_queue=cq) == (
        {"cluster_queue": cq, "parent_cohort": "", "root_cohort": ""}, 1
    )
    # Its pods were ready once: time to ready, from the queue and from the admission.
    cq_train = {"cluster_queue": cq, "priority_class": wpc}
    assert one(text, "kqueue_ready_wait_time_seconds_count", **cq_train)[1] == 1
    assert one(text, "kqueue_admitted_until_ready_wait_time_seconds_count", **cq_train)[1] == 1
    assert one(text, "kqueue_local_queue_ready_wait_time_seconds_count", **admitted)[1] == 1
    assert one(
        text, "kqueue_local_queue_admitted_until_ready_wait_time_seconds_count", **admitted
    )[1] == 1

    # A running Job evicted by draining its ClusterQueue.
    await api.apply(job("long", namespace, "team-queue", count=1, cpu="1"))
    await api.wait_workload(
        namespace, "long", lambda w: is_true(w, c.PODS_READY), what="long PodsReady", within=60
    )
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": "HoldAndDrain"}})
    await api.wait_workload(
        namespace, "long", lambda w: not (w.get("status") or {}).get("admission"),
        what="long evicted and released", within=60,
    )

    async def released() -> str | None:
        text = kqueue.metrics()
        seen = series(text, "kqueue_workload_eviction_latency_seconds_count")
        return text if any(got.get("cluster_queue") == cq for got, _ in seen) else None

    text = await eventually(released, what="eviction latency observed")
    stopped = {"reason": "ClusterQueueStopped", "underlying_cause": "", "priority_class": ""}
    assert one(text, "kqueue_evicted_workloads_total", cluster_queue=cq, **stopped)[1] == 1
    assert one(text, "kqueue_evicted_workloads_once_total", cluster_queue=cq, **stopped)[1] == 1
    lq_evicted = {**lq, **stopped}
    assert one(text, "kqueue_local_queue_evicted_workloads_total", **lq_evicted) == (lq_evicted, 1)
    assert one(
        text, "kqueue_pods_ready_to_evicted_time_seconds_count", cluster_queue=cq,
        reason="ClusterQueueStopped", underlying_cause="",
    )[1] == 1
    assert one(
        text, "kqueue_workload_eviction_latency_seconds_count", cluster_queue=cq,
        reason="ClusterQueueStopped",
    )[1] == 1
    assert one(text, "kqueue_cluster_queue_status", cluster_queue=cq, status="pending")[1] == 1
    assert one(text, "kqueue_local_queue_status", **lq, active="False")[1] == 1
