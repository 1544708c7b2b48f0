"""API server faults: restarts, etcd compaction (410 Gone), conflicts, 429/5xx, webhook down.

Each test runs Jobs with preemptions through kqueue while the fault is injected, and checks
from the API that nothing was lost (every Job finished, no orphan, nothing left gated) and the
invariants held all along (quota and cohort limits, no workload holding quota twice).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import random
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import JOBS, WORKLOADS
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, eventually, is_true, job, unique
from tests.reliability.faults import (
    SOAK,
    FaultProxy,
    InvariantWatcher,
    Replica,
    Scenario,
    admin_ssl,
    api,
    converged,
    final_checks,
    kq,
    kqueue_through,
    record,
    running,
    wait_until,
)

# timing-bound: run on one worker with the machine to itself (hack/test-phases.sh)
pytestmark = [pytest.mark.cluster, pytest.mark.serial]
__all__ = ["api", "kq"]  # fixtures

JOBS_PER_RUN = 150 if SOAK else 30
RESTARTS = 3 if SOAK else 2


async def _etcd_revision(session: aiohttp.ClientSession, etcd: str) -> int:
    # The v3 gRPC gateway: a range read answers with the store's current revision.
    async with session.post(
        f"{etcd}/v3/kv/range", json={"key": base64.b64encode(b"/").decode()}
    ) as resp:
        resp.raise_for_status()
        return int((await resp.json())["header"]["revision"])


async def compact_etcd(cluster: LocalCluster) -> int:
    """Compact etcd to its current revision (what etcdctl compact does); returns the revision."""
    async with aiohttp.ClientSession() as session:
        rev = await _etcd_revision(session, cluster.etcd_url)
        async with session.post(
            f"{cluster.etcd_url}/v3/kv/compaction", json={"revision": str(rev), "physical": True}
        ) as resp:
            resp.raise_for_status()
    return rev


async def _watch_status(cluster: LocalCluster, namespace: str, rv: str) -> int:
    """The HTTP status of a Workload watch started at ``rv`` (or the code of its first ERROR)."""
    path = f"/apis/{c.GROUP}/{c.VERSION}/namespaces/{namespace}/workloads"
    ctx: ssl.SSLContext = admin_ssl(cluster)
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(
        cluster.server_url + path, params={"watch": "1", "resourceVersion": rv}, ssl=ctx
    ) as resp:
        if resp.status != 200:
            return resp.status
        with contextlib.suppress(TimeoutError):
            line = await asyncio.wait_for(resp.content.readline(), 2)
            if b'"ERROR"' in line and b"410" in line:
                return 410
        return 200


@contextlib.asynccontextmanager
async def label_writer(api: Api, namespace: str) -> AsyncIterator[list[int]]:
    """A concurrent writer patching labels on the Workloads kqueue is writing: every patch bumps
    the resourceVersion, so kqueue's preconditioned status writes meet 409 Conflict."""
    count = [0]

    async def loop() -> None:
        rng = random.Random(7)
        while True:
            with contextlib.suppress(KubeError, aiohttp.ClientError, ConnectionError):
                wls = await api.kube.list(WORKLOADS, namespace=namespace)
                for wl in rng.sample(wls, min(5, len(wls))):
                    await api.kube.patch(
                        WORKLOADS,
                        wl["metadata"]["name"],
                        {"metadata": {"labels": {"chaos.kqueue.io/touch": str(count[0])}}},
                        namespace=namespace,
                    )
                    count[0] += 1
            await asyncio.sleep(0.05)

    task = asyncio.create_task(loop())
    try:
        yield count
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.timeout(900 if SOAK else 240)
async def test_restarts_and_compaction_force_relists_and_nothing_is_lost(
    api: Api, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """kqueue reaches the API server through a proxy that, like a load balancer draining to a
    restarting backend, ends watch streams cleanly and holds new requests while the API server
    is down. So kqueue resumes its watches at the resourceVersion it last saw, which the
    compaction and the restart (an empty watch cache) have made too old: 410 Gone, relist."""
    rng = random.Random(11)
    proxy = FaultProxy(cluster, tmp_path, hold_while_down=60)
    async with running(proxy), kqueue_through(cluster, proxy.url, tmp_path) as kq:
        scenario = Scenario(api, namespace)
        await scenario.setup()
        watcher = InvariantWatcher(cluster, namespace, scenario.queues)
        downtimes: list[float] = []
        gone_seen = 0
        async with running(watcher):
            submitting = asyncio.create_task(scenario.submit(JOBS_PER_RUN, rng, rate=4.0))
            for _ in range(RESTARTS):
                await asyncio.sleep(2.5)
                # Revisions below the compacted one are gone from etcd.
                old_rv = str(await compact_etcd(cluster) - 1)
                t0 = time.monotonic()
                await asyncio.to_thread(cluster.restart_apiserver)
                downtimes.append(time.monotonic() - t0)
                if await _watch_status(cluster, namespace, old_rv) == 410:
                    gone_seen += 1
            await submitting
            t_last = time.monotonic()
            await wait_until(
                lambda: converged(api, namespace, scenario.jobs),
                within=600 if SOAK else 150,
                what="every Job Complete after API server restarts and compactions",
            )
            convergence = time.monotonic() - t_last
        watcher.assert_clean()
        await final_checks(api, namespace, scenario.jobs)
        relists = kq.log_path.read_text(errors="replace").count("410 Gone")
        assert gone_seen >= 1, "the compactions never made an old resourceVersion 410 Gone"
        assert relists >= 1, "kqueue's watches never met 410 Gone"
        record(
            "apiserver-restart-compaction",
            {
                "jobs": JOBS_PER_RUN,
                "apiserver_restarts": len(downtimes),
                "compactions": len(downtimes),
                "restart_s": [round(d, 1) for d in downtimes],
                "old_rv_410": gone_seen,
                "kqueue_410_relists_logged": relists,
                "watch_streams_cut": proxy.streams_cut,
                "requests_held_while_down": proxy.held,
                "watcher_relists": watcher.relists,
                "admissions": watcher.admissions,
                "evictions": watcher.evictions,
                "converged_after_last_fault_s": round(convergence, 1),
            },
        )


@pytest.mark.timeout(900 if SOAK else 240)
async def test_429_5xx_and_conflicts_are_retried_until_converged(
    api: Api, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    work = tmp_path
    rng = random.Random(13)
    proxy = FaultProxy(cluster, work, fault_rate=0.1, seed=5)
    async with running(proxy), kqueue_through(cluster, proxy.url, work):
        scenario = Scenario(api, namespace)
        await scenario.setup()
        watcher = InvariantWatcher(cluster, namespace, scenario.queues)
        async with running(watcher), label_writer(api, namespace) as patches:
            await scenario.submit(JOBS_PER_RUN, rng, rate=4.0)
            t_last = time.monotonic()
            await wait_until(
                lambda: converged(api, namespace, scenario.jobs),
                within=600 if SOAK else 150,
                what="every Job Complete through the faulty proxy",
            )
            convergence = time.monotonic() - t_last
        watcher.assert_clean()
        await final_checks(api, namespace, scenario.jobs)
        conflicts = sum(n for (_, _, s), n in proxy.statuses.items() if s == 409)
        injected = dict(proxy.injected)
        assert sum(injected.values()) > 0
        assert not [
            (v, r, s) for (v, r, s) in proxy.statuses if s == 403
        ], "kqueue was refused something"
        record(
            "429-5xx-conflicts",
            {
                "jobs": JOBS_PER_RUN,
                "fault_rate": proxy.fault_rate,
                "injected": {str(k): v for k, v in injected.items()},
                "requests_forwarded": proxy.forwarded,
                "conflicting_label_patches": patches[0],
                "kqueue_409s": conflicts,
                "admissions": watcher.admissions,
                "evictions": watcher.evictions,
                "converged_after_last_submit_s": round(convergence, 1),
            },
        )


@pytest.mark.timeout(180)
async def test_webhook_down_refuses_managed_jobs_as_documented(
    api: Api, kq: Replica, namespace: str
) -> None:
    """failurePolicy Fail (docs/install.md): while no replica serves the webhook, a Job with a
    queue label is refused (it would otherwise run ungated, outside quota); Jobs without the
    label never reach the webhook and are created as usual. Once kqueue is back, the same Job is
    accepted, admitted and finished."""
    scenario = Scenario(api, namespace)
    await scenario.setup()
    await asyncio.to_thread(kq.stop, kill=True)
    managed = job("managed", namespace, "qa", complete_after="1s")
    with pytest.raises(KubeError) as refused:
        await api.apply(managed)
    assert "failed calling webhook" in str(refused.value) or "webhook" in str(refused.value)
    plain = job(unique("plain"), namespace, "qa")
    plain["metadata"]["labels"] = {}
    await api.apply(plain)
    created = await api.job(namespace, plain["metadata"]["name"])
    assert not created["spec"].get("suspend"), "an unmanaged Job was touched by kqueue"
    with contextlib.suppress(KubeError):
        await api.kube.delete(JOBS, plain["metadata"]["name"], namespace=namespace)

    await asyncio.to_thread(kq.start)
    await api.apply(managed)

    async def complete() -> bool:
        return is_true(await api.job(namespace, "managed"), "Complete")

    await eventually(complete, within=60, what="the managed Job Complete after kqueue is back")
    await final_checks(api, namespace, ["managed"])
