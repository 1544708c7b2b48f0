"""Priority preemption end to end: the victim Job is suspended, requeued and re-admitted."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import JOBS
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
    pending_reason,
    priority_class,
    stays,
    unique,
)

pytestmark = pytest.mark.cluster

PREEMPT_LOWER = {"withinClusterQueue": "LowerPriority"}


async def _setup(api: Api, namespace: str) -> tuple[str, str, str]:
    od, cq, low, high = unique("od"), unique("cq"), unique("low"), unique("high")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await api.apply(cluster_queue(cq, [(od, "2")], preemption=PREEMPT_LOWER))
    await api.apply(local_queue("q", namespace, cq))
    return cq, low, high


async def _running(api: Api, namespace: str, name: str, count: int) -> list[Any]:
    async def probe() -> list[Any] | None:
        pods = await api.pods_of(namespace, name)
        live = [p for p in pods if p["status"].get("phase") == "Running"]
        return live if len(live) == count else None

    return await eventually(probe, what=f"{count} pods of {name} Running")


async def test_priority_preemption(api: Api, kqueue: KqueueProcess, namespace: str) -> None:
    cq, low, high = await _setup(api, namespace)
    await api.apply(
        job("victim", namespace, "q", count=2, cpu="1", labels={c.PRIORITY_CLASS_LABEL: low})
    )
    await _running(api, namespace, "victim", 2)

    await api.apply(
        job(
            "urgent", namespace, "q", cpu="2", complete_after="4s",
            labels={c.PRIORITY_CLASS_LABEL: high},
        )
    )
    victim = await api.wait_workload(
        namespace, "victim", lambda w: is_true(w, c.PREEMPTED), what="Preempted=True"
    )
    preempted = condition(victim, c.PREEMPTED)
    evicted = condition(victim, c.EVICTED)
    assert preempted is not None and preempted["reason"] == c.IN_CLUSTER_QUEUE
    assert evicted is not None and evicted["reason"] == c.EVICTED_BY_PREEMPTION
    urgent = await api.workload_of(namespace, "urgent")
    assert urgent is not None
    assert f"{namespace}/{urgent['metadata']['name']}" in preempted["message"]

    # The victim Job is suspended; its pods go without being counted as failures.
    async def suspended() -> bool:
        j = await api.job(namespace, "victim")
        pods = await api.pods_of(namespace, "victim")
        live = [p for p in pods if p["status"].get("phase") not in ("Succeeded", "Failed")]
        return bool(j["spec"].get("suspend")) and not live

    await eventually(suspended, what="victim Job suspended and its pods gone")
    victim = await api.wait_workload(
        namespace, "victim", lambda w: is_true(w, c.REQUEUED), what="Requeued=True"
    )
    assert victim["status"].get("admission") is None
    assert not (await api.job(namespace, "victim"))["status"].get("failed")

    # The preemptor runs and finishes; the victim is admitted again and resumed.
    await api.wait_workload(namespace, "urgent", lambda w: is_true(w, c.ADMITTED), what="admitted")
    await api.wait_workload(
        namespace, "urgent", lambda w: is_true(w, c.FINISHED), what="finished", within=90
    )
    victim = await api.wait_workload(
        namespace, "victim", lambda w: is_true(w, c.ADMITTED), what="re-admitted", within=60
    )
    assert not is_true(victim, c.EVICTED)

    async def resumed() -> bool:
        return (await api.job(namespace, "victim"))["spec"].get("suspend") is False

    await eventually(resumed, what="the victim Job resumed by kqueue after re-admission")
    await _running(api, namespace, "victim", 2)

    assert kqueue.metric(
        "kqueue_preempted_workloads_total", preempting_cluster_queue=cq, reason=c.IN_CLUSTER_QUEUE
    ) == 1
    assert kqueue.metric(
        "kqueue_evicted_workloads_total", cluster_queue=cq, reason=c.EVICTED_BY_PREEMPTION
    ) == 1
    reasons = {e["reason"] for e in await api.events_for(namespace, victim["metadata"]["name"])}
    assert {c.PREEMPTED, c.EVICTED, c.REQUEUED} <= reasons


async def test_non_preemptible_job_is_protected(api: Api, namespace: str) -> None:
    _, low, high = await _setup(api, namespace)
    await api.apply(
        job(
            "protected", namespace, "q", count=2, cpu="1",
            labels={
                c.PRIORITY_CLASS_LABEL: low,
                c.PREEMPTIBILITY_LABEL: c.NON_PREEMPTIBLE_LABEL_VALUE,
            },
        )
    )
    await _running(api, namespace, "protected", 2)
    await api.apply(job("urgent", namespace, "q", cpu="2", labels={c.PRIORITY_CLASS_LABEL: high}))
    await api.wait_workload(
        namespace, "urgent", lambda w: pending_reason(w) is not None, what="urgent pending"
    )

    async def untouched() -> bool:
        wl = await api.workload_of(namespace, "protected")
        urgent = await api.workload_of(namespace, "urgent")
        return (
            wl is not None
            and is_true(wl, c.ADMITTED)
            and not is_true(wl, c.EVICTED)
            and urgent is not None
            and not is_true(urgent, c.QUOTA_RESERVED)
        )

    await stays(untouched, for_s=4, what="the non-preemptible Job keeps running")


async def test_preemption_priority_follows_the_job_label(api: Api, namespace: str) -> None:
    _, low, high = await _setup(api, namespace)
    await api.apply(job("runner", namespace, "q", cpu="1", labels={c.PRIORITY_CLASS_LABEL: low}))
    await api.wait_workload(namespace, "runner", lambda w: is_true(w, c.ADMITTED), what="admitted")
    # Raising the preemption priority of a running Job protects it from lower preemptors.
    await api.kube.patch(
        JOBS,
        "runner",
        {"metadata": {"labels": {c.PREEMPTION_PRIORITY_CLASS_LABEL: high}}},
        namespace=namespace,
    )
    wl = await api.wait_workload(
        namespace,
        "runner",
        lambda w: w["spec"].get("preemptionPriority") == 1000,
        what="preemptionPriority 1000",
    )
    assert wl["spec"]["preemptionPriorityClassRef"]["name"] == high
    assert wl["spec"]["priority"] == 100
    assert is_true(wl, c.ADMITTED)
