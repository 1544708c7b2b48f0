"""Restarting (and crashing) the controller mid-run never admits a workload twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kqueue.api.quantity import parse_quantity
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import JOBS, PODS, WORKLOADS
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    stays,
    unique,
)

pytestmark = pytest.mark.cluster

QUOTA_CPU = 4


async def _admitted(api: Api, namespace: str) -> list[dict[str, Any]]:
    return [
        w for w in await api.kube.list(WORKLOADS, namespace=namespace)
        if w.get("status", {}).get("admission") is not None
    ]


def _cpu(wls: list[dict[str, Any]]) -> int:
    total = 0
    for w in wls:
        for psa in w["status"]["admission"]["podSetAssignments"]:
            total += parse_quantity(psa["resourceUsage"]["cpu"], "cpu")
    return total


async def _check_invariants(api: Api, namespace: str) -> list[dict[str, Any]]:
    admitted = await _admitted(api, namespace)
    assert _cpu(admitted) <= QUOTA_CPU * 1000, "admitted usage exceeds the quota"
    # Each workload admitted once: at most one Admitted event each.
    for w in admitted:
        events = await api.events_for(namespace, w["metadata"]["name"])
        admitted_events = sum(e.get("count", 1) for e in events if e["reason"] == c.ADMITTED_REASON)
        assert admitted_events <= 1, f"{w['metadata']['name']} admitted {admitted_events} times"
    # No pods beyond the admitted workloads run.
    pods = await api.kube.list(PODS, namespace=namespace)
    running = [p for p in pods if not p["spec"].get("schedulingGates")
               and p["status"].get("phase") in ("Running", "Pending")]
    assert len(running) <= QUOTA_CPU
    return admitted


async def test_restart_mid_run_never_admits_twice(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, str(QUOTA_CPU))]))
    await api.apply(local_queue("q", namespace, cq))
    names = [f"job-{i}" for i in range(8)]
    for name in names[:4]:
        await api.apply(job(name, namespace, "q", cpu="1"))
    # Crash while the first admissions are being written.
    await eventually(lambda: _admitted(api, namespace), what="a first admission")
    await asyncio.to_thread(kqueue.restart, kill=True)
    for name in names[4:]:
        await api.apply(job(name, namespace, "q", cpu="1"))

    async def full() -> bool:
        return _cpu(await _admitted(api, namespace)) == QUOTA_CPU * 1000

    await eventually(full, what="the quota fully used after the crash")

    async def within_quota() -> bool:
        admitted = await _check_invariants(api, namespace)
        return len(admitted) == QUOTA_CPU

    await stays(within_quota, for_s=3, what="exactly 4 admitted within quota")

    # A graceful restart changes nothing either.
    before = {w["metadata"]["name"] for w in await _admitted(api, namespace)}
    await asyncio.to_thread(kqueue.restart)
    await stays(within_quota, for_s=3, what="the same admissions after a graceful restart")
    assert {w["metadata"]["name"] for w in await _admitted(api, namespace)} == before

    # Finishing two admitted jobs lets exactly two more in.
    done = sorted(before)[:2]
    owners = {
        w["metadata"]["name"]: w["metadata"]["ownerReferences"][0]["name"]
        for w in await _admitted(api, namespace)
    }
    for wl_name in done:
        await api.kube.delete(JOBS, owners[wl_name], namespace=namespace)

    async def replaced() -> bool:
        admitted = await _admitted(api, namespace)
        names_now = {w["metadata"]["name"] for w in admitted}
        return len(admitted) == QUOTA_CPU and not (names_now & set(done))

    await eventually(replaced, what="two new admissions replacing the finished ones")
    await _check_invariants(api, namespace)
    for w in await api.kube.list(WORKLOADS, namespace=namespace):
        if w.get("status", {}).get("admission") is not None:
            assert is_true(w, c.ADMITTED)
