"""Leader election: two replicas, the leader SIGKILLed again and again while Jobs flow.

Checked from the API: the Lease holder history (polled every 100 ms) never hands the lease to a
new holder before the old holder's lease expired; every admission event was reported by the
replica holding the Lease at that moment (Events carry the writer's instance, which contains
its pid, as does the Lease holder identity); no admission lands while no replica leads; the
quota invariants hold throughout and every Job finishes. Takeover time is measured from the
kill to the Lease changing hands.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from kqueue.controller.resources import EVENTS
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import KQUEUE_NAMESPACE, Api, free_port
from tests.reliability.cut_proxy import CutProxy
from tests.reliability.faults import (
    SOAK,
    InvariantWatcher,
    Replica,
    Scenario,
    admin_ssl,
    api,
    converged,
    final_checks,
    kubeconfig_for,
    percentiles,
    record,
    running,
    wait_until,
)

# timing-bound: run on one worker with the machine to itself (hack/test-phases.sh)
pytestmark = [pytest.mark.cluster, pytest.mark.serial]
__all__ = ["api"]  # fixture

KILLS = 10
LEASE = "kqueue-leader-test"
LEASE_DURATION = 4.0
# Behind the cutting proxies: connections live 3 s on average (as in test_dropped_connections.py),
# and the leader's own proxy goes dark for longer than the lease, twice the lease and more.
CUT_JOBS = 30
MEAN_LIFETIME_S = 3.0
BLACKOUT_S = 2.5 * LEASE_DURATION


def pid_of_holder(identity: str) -> int | None:
    # default_identity(): <hostname>_<pid>_<random>
    parts = identity.rsplit("_", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def pid_of_instance(instance: str) -> int | None:
    # EventRecorder's instance: <hostname>-<pid>
    tail = instance.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


@dataclass
class LeaseHistory:
    """Every Lease holder seen, polled every 100 ms: (wall time, monotonic time, holder pid)."""

    cluster: LocalCluster
    changes: list[tuple[float, float, int | None]] = field(default_factory=list)
    last_renew_seen: dict[int, float] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def holder(self) -> int | None:
        return self.changes[-1][2] if self.changes else None

    def holders_between(self, start: float, end: float) -> set[int | None]:
        """Holders at any moment of [start, end] (wall-clock seconds)."""
        out: set[int | None] = set()
        for i, (t, _, pid) in enumerate(self.changes):
            t_next = self.changes[i + 1][0] if i + 1 < len(self.changes) else float("inf")
            if t <= end and t_next >= start:
                out.add(pid)
        return out

    async def _run(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{KQUEUE_NAMESPACE}/leases/{LEASE}"
        ctx = admin_ssl(self.cluster)
        last_renew: str | None = None
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while True:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with session.get(self.cluster.server_url + path, ssl=ctx) as resp:
                        if resp.status == 200:
                            spec = (await resp.json()).get("spec") or {}
                            pid = pid_of_holder(spec.get("holderIdentity") or "")
                            if not self.changes or self.changes[-1][2] != pid:
                                self.changes.append((time.time(), time.monotonic(), pid))
                            if pid is not None and spec.get("renewTime") != last_renew:
                                last_renew = spec.get("renewTime")
                                self.last_renew_seen[pid] = time.monotonic()
                await asyncio.sleep(0.1)


@dataclass
class Forwarder:
    """TCP forwarder for the webhook: the API server reaches whichever replica is up."""

    backends: list[int]
    port: int = field(default_factory=free_port)
    _server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._conn, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for port in self.backends:
            try:
                up_r, up_w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue

            async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                with contextlib.suppress(OSError):
                    while data := await r.read(65536):
                        w.write(data)
                        await w.drain()
                with contextlib.suppress(OSError):
                    w.close()

            await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))
            return
        writer.close()


@pytest.fixture
def replicas(cluster: LocalCluster, tmp_path: Path) -> Any:
    # Both replicas serve the webhook with the certificates replica a's setup() generates and
    # installs as the caBundle, so the forwarder may send the API server to either.
    certs = tmp_path / "a" / "certs"
    pair = []
    for name in ("a", "b"):
        r = Replica(
            cluster=cluster, work_dir=tmp_path / name, cert_dir=certs, lease_name=LEASE
        )
        r.work_dir.mkdir()
        pair.append(r)
    try:
        yield pair
    finally:
        for r in pair:
            r.stop(kill=True)
        pair[0].teardown()


def _point_webhooks(replica: Replica, port: int) -> None:
    """Install CRDs and webhooks (through ``replica.setup``), then aim them at the forwarder."""
    replica.setup()
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        name = f"kqueue-{kind.removesuffix('webhookconfiguration')}-webhook-configuration"
        obj = yaml.safe_load(replica.cluster.kubectl("get", kind, name, "-o", "yaml").stdout)
        for hook in obj["webhooks"]:
            url = hook["clientConfig"]["url"]
            hook["clientConfig"]["url"] = url.replace(
                f":{replica.webhook_port}/", f":{port}/"
            )
        replica.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))


@pytest.mark.timeout(600 if SOAK else 300)
async def test_leader_killed_repeatedly_never_two_leaders(
    api: Api, replicas: list[Replica], namespace: str
) -> None:
    a, b = replicas
    cluster = a.cluster
    forwarder = Forwarder([a.webhook_port, b.webhook_port])
    rng = random.Random(3)
    await forwarder.start()
    try:
        await asyncio.to_thread(_point_webhooks, a, forwarder.port)
        for r in replicas:
            r.write_config()
        history = LeaseHistory(cluster)
        async with running(history):
            scenario, watcher = await _start_pair(api, replicas, history, namespace)
            takeovers: list[float] = []
            kill_windows: list[tuple[float, float]] = []  # wall clock: (killed, successor leads)
            expiry_margins: list[float] = []
            async with running(watcher):
                submitting = asyncio.create_task(
                    scenario.submit(60 if not SOAK else 200, rng, rate=1.5)
                )
                for _ in range(KILLS):
                    leader = next(r for r in replicas if r.pid == history.holder)
                    other = b if leader is a else a
                    old_pid = leader.pid
                    # Kill at a random point of the leader's work.
                    await asyncio.sleep(rng.uniform(0.5, 2.5))
                    t_kill, w_kill = time.monotonic(), time.time()
                    await asyncio.to_thread(leader.stop, kill=True)
                    def took_over(successor: int | None = other.pid) -> str | None:
                        return _none_if(history.holder == successor)

                    await wait_until(
                        took_over, within=30, what="the standby taking over", every=0.05
                    )
                    t_new = history.changes[-1][1]
                    takeovers.append(t_new - t_kill)
                    kill_windows.append((w_kill, history.changes[-1][0]))
                    assert old_pid is not None
                    # The lease changed hands only after the old holder's lease ran out.
                    expiry_margins.append(t_new - history.last_renew_seen[old_pid])
                    # The killed replica comes back as the standby (warm caches, campaigning).
                    await asyncio.to_thread(leader.start)
                await submitting
                await wait_until(
                    lambda: converged(api, namespace, scenario.jobs),
                    within=180, what="every Job Complete after the leader kills",
                )
            watcher.assert_clean()
            await final_checks(api, namespace, scenario.jobs)
        events = await api.kube.list(EVENTS, namespace=namespace)
    finally:
        await forwarder.stop()

    writers = _one_writer_at_a_time(events, history, watcher, kill_windows, expiry_margins)
    assert len(writers) > 2, "admissions should come from several successive leaders"
    record(
        "leader",
        {
            "kills": len(takeovers),
            "takeover": percentiles(takeovers),
            "lease_changes": len(history.changes),
            "renew_to_takeover": percentiles(expiry_margins),
            "admission_writers": len(writers),
            "admissions": watcher.admissions,
            "evictions": watcher.evictions,
            "jobs": len(scenario.jobs),
        },
    )


@pytest.mark.timeout(600)
async def test_leader_cut_off_longer_than_its_lease_hands_over_without_overlap(
    api: Api, replicas: list[Replica], namespace: str, tmp_path: Path
) -> None:
    """Each replica reaches the API server through its own :class:`CutProxy`: connections cut
    at random all along (watches, renewals and writes lose their answers), and once the
    leader's proxy goes dark for longer than the lease. The leader cut off stops writing, its
    successor takes over, nobody writes as leader while not holding the Lease, and every Job
    finishes; neither process exits (a lost leadership is campaigned for again)."""
    a, b = replicas
    cluster = a.cluster
    proxies = {
        r.work_dir.name: CutProxy(cluster.server_url, mean_lifetime=MEAN_LIFETIME_S, seed=seed)
        for r, seed in ((a, 31), (b, 32))
    }
    forwarder = Forwarder([a.webhook_port, b.webhook_port])
    rng = random.Random(4)
    await forwarder.start()
    for proxy in proxies.values():
        await proxy.start()
    try:
        await asyncio.to_thread(_point_webhooks, a, forwarder.port)
        for r in replicas:
            name = r.work_dir.name
            r.kubeconfig = kubeconfig_for(cluster, proxies[name].url, tmp_path / f"{name}.kubeconfig")
            r.write_config()
        history = LeaseHistory(cluster)
        async with running(history):
            scenario, watcher = await _start_pair(api, replicas, history, namespace)
            async with running(watcher):
                submitting = asyncio.create_task(scenario.submit(CUT_JOBS, rng, rate=1.5))
                await asyncio.sleep(6)  # the first leader admits some
                leader = next(r for r in replicas if r.pid == history.holder)
                other = b if leader is a else a
                old_pid = leader.pid
                assert old_pid is not None
                t_dark, w_dark = time.monotonic(), time.time()
                dark = asyncio.create_task(proxies[leader.work_dir.name].blackout(BLACKOUT_S))

                def took_over(successor: int | None = other.pid) -> str | None:
                    return _none_if(history.holder == successor)

                await wait_until(took_over, within=BLACKOUT_S, what="the successor", every=0.05)
                t_new, w_new = history.changes[-1][1], history.changes[-1][0]
                takeover_s = t_new - t_dark
                expiry_margin = t_new - history.last_renew_seen[old_pid]
                await dark
                await submitting
                await wait_until(
                    lambda: converged(api, namespace, scenario.jobs),
                    within=180, what="every Job Complete behind the cutting proxies",
                )
            watcher.assert_clean()
            await final_checks(api, namespace, scenario.jobs)
            # The replica cut off gave its leadership up, and came back as a standby; neither
            # process exited.
            assert "leadership lost" in leader.log_path.read_text(errors="replace")
            assert all(r.proc is not None and r.proc.poll() is None for r in replicas)
            assert all(r.starts == 1 for r in replicas)
        events = await api.kube.list(EVENTS, namespace=namespace)
    finally:
        for proxy in proxies.values():
            await proxy.stop()
        await forwarder.stop()

    writers = _one_writer_at_a_time(
        events, history, watcher, [(w_dark, w_new)], [expiry_margin]
    )
    assert {old_pid, other.pid} <= writers, "both the cut-off leader and its successor admitted"
    assert takeover_s <= BLACKOUT_S
    cuts = sum(p.cuts for p in proxies.values())
    assert cuts > 10, f"only {cuts} connections were cut"
    record(
        "leader-cut-off",
        {
            "jobs": CUT_JOBS,
            "mean_connection_lifetime_s": MEAN_LIFETIME_S,
            "connections": sum(p.connections for p in proxies.values()),
            "cuts": cuts,
            "blackouts": sum(p.blackouts for p in proxies.values()),
            "dark_s": sum(p.dark_seconds for p in proxies.values()),
            "refused_while_dark": sum(p.refused for p in proxies.values()),
            "takeover_after_blackout_s": round(takeover_s, 2),
            "renew_to_takeover_s": round(expiry_margin, 2),
            "takeovers": sum(
                1 for (_, _, p), (_, _, q) in itertools.pairwise(history.changes) if q != p and q
            ),
            "admission_writers": len(writers),
            "admissions": watcher.admissions,
            "evictions": watcher.evictions,
        },
    )


async def _start_pair(
    api: Api, replicas: list[Replica], history: LeaseHistory, namespace: str
) -> tuple[Scenario, InvariantWatcher]:
    """Start both replicas, wait until one leads, and set the Jobs' queues up."""
    await asyncio.gather(*(asyncio.to_thread(r.start) for r in replicas))
    pids = {r.pid for r in replicas}
    await wait_until(
        lambda: _none_if(history.holder in pids), within=30, what="a leader", every=0.1
    )
    scenario = Scenario(api, namespace)
    await scenario.setup()
    return scenario, InvariantWatcher(replicas[0].cluster, namespace, scenario.queues)


def _one_writer_at_a_time(
    events: list[Any],
    history: LeaseHistory,
    watcher: InvariantWatcher,
    leaderless: list[tuple[float, float]],
    expiry_margins: list[float],
) -> set[int | None]:
    """The checks that no two replicas wrote as leader at once; returns the writers' pids.

    ``leaderless``: wall-clock windows (the leader killed or cut off, the successor leading) in
    which no replica may admit anything; ``expiry_margins``: for each takeover, seconds from the
    old holder's last renewal seen to the successor holding the Lease."""
    # Every admission was reported by the replica holding the Lease at that time (event
    # timestamps have one-second resolution, so allow the surrounding second).
    admission_events = [
        e for e in events if e.get("reason") in ("QuotaReserved", "Admitted", "Preempted")
    ]
    assert admission_events
    writers = set()
    for e in admission_events:
        pid = pid_of_instance(e.get("reportingInstance") or "")
        writers.add(pid)
        t = datetime.strptime(e["firstTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        holders = history.holders_between(t.timestamp() - 1.0, t.timestamp() + 2.0)
        assert pid in holders, (
            f"{e['reason']} of {e['involvedObject']['name']} written by pid {pid} at "
            f"{e['firstTimestamp']} while the Lease was held by {holders}"
        )
    # No Workload gained an admission while nobody led (from just after a kill until the
    # successor held the Lease): nothing acted as a scheduler without the Lease.
    adm_wall = [
        (time.time() - (time.monotonic() - t), name) for t, name in watcher.admission_log
    ]
    for killed, led in leaderless:
        orphans = [n for t, n in adm_wall if killed + 1.0 < t < led - 0.2]
        assert not orphans, f"admissions while no replica led: {orphans}"
    assert min(expiry_margins) >= LEASE_DURATION - 0.5, expiry_margins
    return writers


def _none_if(ok: bool) -> str | None:
    """Adapter for wait_until: None (done) when ``ok``."""
    return None if ok else "not yet"
