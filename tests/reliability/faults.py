"""Fault injection on the real local control plane, and the invariants checked from the API.

The checks never ask kqueue: :class:`InvariantWatcher` watches Workloads through the API
server (its own connection, as cluster admin) and checks every state the watch delivers.
Watch events arrive in resourceVersion order, so the state after each event is one the cluster
really was in; a quota violation that lasts a single write is seen.

:class:`FaultProxy` is a reverse proxy in front of the API server that answers a fraction of
requests itself with 429/500/503 and counts every (verb, resource) it forwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import inspect
import json
import os
import random
import ssl
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from kubernetes_asyncio import client

from kqueue.api.quantity import parse_quantity
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import Kube
from kqueue.controller.resources import JOBS, PODS, WORKLOADS
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    ROOT,
    Api,
    KqueueProcess,
    cluster_queue,
    flavor,
    is_true,
    job,
    kqueue_running,
    local_queue,
    priority_class,
    unique,
)

Obj = dict[str, Any]

# The full-size variants of the fault tests (hundreds of Jobs); CI runs the short defaults.
SOAK = os.environ.get("KQUEUE_SOAK", "") not in ("", "0")


def admin_ssl(cluster: LocalCluster) -> ssl.SSLContext:
    """TLS to the API server as cluster admin (the LocalCluster's admin client certificate)."""
    ctx = ssl.create_default_context(cafile=str(cluster.ca_path))
    assert cluster.work_dir is not None
    pki = cluster.work_dir / "pki"
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return ctx


# -- the quota model the invariants are checked against ------------------------------------------


@dataclass(frozen=True)
class QueueQuota:
    """One ClusterQueue with one flavor: nominal cpu/memory (milli-cpu, bytes)."""

    name: str
    flavor: str
    nominal: dict[str, int]
    borrowing_limit: dict[str, int] | None = None
    cohort: str | None = None


@dataclass
class Violation:
    at: float
    what: str


@dataclass
class InvariantWatcher:
    """Watches the Workloads of one namespace and checks every state it sees.

    * per ClusterQueue and flavor, the usage of workloads holding quota never exceeds the
      nominal quota plus what it may borrow (its borrowing limit, and what the rest of its
      cohort leaves unused), and a cohort never uses more than its members' nominal quota;
    * a workload never gets a new admission while it still holds one (an admission must be
      released, by an eviction, before another appears), and no two Workloads of one Job hold
      quota at once.
    """

    cluster: LocalCluster
    namespace: str
    queues: list[QueueQuota]
    violations: list[Violation] = field(default_factory=list)
    state: dict[str, Obj] = field(default_factory=dict)
    admissions: int = 0
    releases: int = 0
    events_seen: int = 0
    evictions: int = 0
    relists: int = 0
    reconnects: int = 0
    # (monotonic time, workload name): each new admission, for attributing it to a leader.
    admission_log: list[tuple[float, str]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _synced: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def _path(self) -> str:
        return f"/apis/{c.GROUP}/{c.VERSION}/namespaces/{self.namespace}/workloads"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="invariant-watcher")
        await asyncio.wait_for(self._synced.wait(), 30)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def assert_clean(self) -> None:
        assert not self.violations, "invariant violations seen from the API:\n" + "\n".join(
            v.what for v in self.violations[:20]
        )

    async def _run(self) -> None:
        ctx = admin_ssl(self.cluster)
        base = self.cluster.server_url
        rv: str | None = None
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=120)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                try:
                    if rv is None:
                        rv = await self._relist(session, base, ctx)
                    rv = await self._watch(session, base, ctx, rv)
                except (TimeoutError, aiohttp.ClientError, ConnectionError):
                    # The API server is being restarted: resume from the last version seen.
                    self.reconnects += 1
                    await asyncio.sleep(0.5)

    async def _relist(self, session: aiohttp.ClientSession, base: str, ctx: ssl.SSLContext) -> str:
        async with session.get(base + self._path, ssl=ctx) as resp:
            resp.raise_for_status()
            body = await resp.json()
        self.relists += 1
        fresh = {o["metadata"]["name"]: o for o in body["items"]}
        # A relist after a gap cannot tell which transitions were missed; compare holdings only.
        for name, obj in fresh.items():
            self._transition(self.state.get(name), obj)
        self.state = fresh
        self._check_usage()
        self._synced.set()
        return str(body["metadata"]["resourceVersion"])

    async def _watch(
        self, session: aiohttp.ClientSession, base: str, ctx: ssl.SSLContext, rv: str
    ) -> str | None:
        params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        async with session.get(base + self._path, params=params, ssl=ctx) as resp:
            if resp.status == 410:
                return None
            resp.raise_for_status()
            async for line in resp.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    # 410 Gone after a compaction: relist, as an informer does.
                    return None
                rv = str(obj["metadata"]["resourceVersion"])
                if event["type"] == "BOOKMARK":
                    continue
                self.events_seen += 1
                name = obj["metadata"]["name"]
                if event["type"] == "DELETED":
                    self.state.pop(name, None)
                    continue
                self._transition(self.state.get(name), obj)
                self.state[name] = obj
                self._check_usage()
        return rv

    def _fail(self, what: str) -> None:
        self.violations.append(Violation(time.monotonic(), what))

    def _transition(self, old: Obj | None, new: Obj) -> None:
        was, now = admission_key(old), admission_key(new)
        name = new["metadata"]["name"]
        if now is not None and now != was:
            if was is not None:
                self._fail(
                    f"{name} admitted again ({now}) while still holding quota from {was} "
                    "without an eviction in between"
                )
            self.admissions += 1
            self.admission_log.append((time.monotonic(), name))
        if was is not None and now is None:
            self.releases += 1
        evicted = next(
            (x for x in (new.get("status") or {}).get("conditions") or []
             if x.get("type") == c.EVICTED and x.get("status") == "True"),
            None,
        )
        before = next(
            (x for x in ((old or {}).get("status") or {}).get("conditions") or []
             if x.get("type") == c.EVICTED and x.get("status") == "True"),
            None,
        )
        if evicted is not None and (before is None or before != evicted):
            self.evictions += 1

    def _check_usage(self) -> None:
        usage: dict[tuple[str, str, str], int] = defaultdict(int)
        holders: dict[str, list[str]] = defaultdict(list)
        for wl in self.state.values():
            if admission_key(wl) is None:
                continue
            adm = wl["status"]["admission"]
            for ref in wl["metadata"].get("ownerReferences") or []:
                holders[ref["uid"]].append(wl["metadata"]["name"])
            for psa in adm.get("podSetAssignments") or []:
                for res, qty in (psa.get("resourceUsage") or {}).items():
                    fl = (psa.get("flavors") or {}).get(res, "")
                    usage[(adm["clusterQueue"], fl, res)] += parse_quantity(qty, res)
        for owner, names in holders.items():
            if len(names) > 1:
                self._fail(f"Workloads {sorted(names)} of one owner {owner} hold quota at once")
        cohorts: dict[str, list[QueueQuota]] = defaultdict(list)
        for q in self.queues:
            if q.cohort:
                cohorts[q.cohort].append(q)
        for q in self.queues:
            peers = [p for p in cohorts.get(q.cohort or "", []) if p.name != q.name]
            for res, nominal in q.nominal.items():
                used = usage.get((q.name, q.flavor, res), 0)
                unused_by_peers = sum(
                    max(0, p.nominal[res] - usage.get((p.name, p.flavor, res), 0)) for p in peers
                )
                limit = nominal + unused_by_peers
                if q.borrowing_limit is not None and res in q.borrowing_limit:
                    limit = min(limit, nominal + q.borrowing_limit[res])
                if used > limit:
                    self._fail(f"{q.name}/{q.flavor} {res}: {used} in use > allowed {limit}")
        for cohort, members in cohorts.items():
            for res in members[0].nominal:
                used = sum(usage.get((m.name, m.flavor, res), 0) for m in members)
                cap = sum(m.nominal[res] for m in members)
                if used > cap:
                    self._fail(f"cohort {cohort} {res}: {used} in use > {cap}")
        for (cq, fl, res), used in usage.items():
            if not any(q.name == cq and q.flavor == fl for q in self.queues) and used:
                self._fail(f"{used} {res} admitted to unknown queue/flavor {cq}/{fl}")


def admission_key(wl: Obj | None) -> str | None:
    """Identifies one admission of a workload; None when it holds no quota."""
    if wl is None:
        return None
    status = wl.get("status") or {}
    if status.get("admission") is None or is_true(wl, c.FINISHED):
        return None
    reserved: Obj = next(
        (x for x in status.get("conditions") or [] if x.get("type") == c.QUOTA_RESERVED), {}
    )
    return f"{status['admission'].get('clusterQueue')}@{reserved.get('lastTransitionTime')}"


# -- a scenario: two ClusterQueues in a cohort, two priorities, Jobs that preempt ------------------

CPU_A, CPU_B, BORROW_B = 4, 3, 2


@dataclass
class Scenario:
    api: Api
    namespace: str
    low: str = ""
    high: str = ""
    queues: list[QueueQuota] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    # A prefix for the LocalQueues' and Jobs' names: two scenarios can share a namespace.
    tag: str = ""

    async def setup(self) -> None:
        od, cohort = unique("od"), unique("cohort")
        cq_a, cq_b = unique("cq-a"), unique("cq-b")
        self.low, self.high = unique("low"), unique("high")
        await self.api.apply(flavor(od, "on-demand"))
        await self.api.apply(priority_class(self.low, 100))
        await self.api.apply(priority_class(self.high, 1000))
        preemption = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
        await self.api.apply(
            cluster_queue(cq_a, [(od, str(CPU_A))], cohort=cohort, preemption=preemption)
        )
        await self.api.apply(
            cluster_queue(
                cq_b,
                [(od, str(CPU_B))],
                cohort=cohort,
                preemption=preemption,
                borrowing_limit=str(BORROW_B),
            )
        )
        await self.api.apply(local_queue(f"{self.tag}qa", self.namespace, cq_a))
        await self.api.apply(local_queue(f"{self.tag}qb", self.namespace, cq_b))
        mem = parse_quantity("64Gi", "memory")
        self.queues = [
            QueueQuota(cq_a, od, {"cpu": CPU_A * 1000, "memory": mem}, cohort=cohort),
            QueueQuota(
                cq_b,
                od,
                {"cpu": CPU_B * 1000, "memory": mem},
                borrowing_limit={"cpu": BORROW_B * 1000, "memory": 0},
                cohort=cohort,
            ),
        ]

    async def submit(self, count: int, rng: random.Random, *, rate: float = 4.0) -> None:
        """``count`` Jobs, about ``rate`` per second; a fifth are high priority and preempt."""
        for _ in range(count):
            name = f"{self.tag}j{len(self.jobs):04d}"
            queue = self.tag + rng.choice(["qa", "qa", "qb"])
            prio = self.high if rng.random() < 0.2 else self.low
            obj = job(
                name,
                self.namespace,
                queue,
                cpu=rng.choice(["1", "1", "2"]),
                complete_after=f"{rng.uniform(0.5, 2.0):.1f}s",
                labels={c.PRIORITY_CLASS_LABEL: prio},
            )
            await create_retrying(self.api, obj)
            self.jobs.append(name)
            await asyncio.sleep(rng.expovariate(rate))


async def create_retrying(api: Api, obj: Obj, *, within: float = 60) -> None:
    """Create, retrying while the API server (or kqueue's webhook) is briefly unavailable."""
    from kqueue.controller.kube import KubeError

    deadline = time.monotonic() + within
    while True:
        try:
            await api.apply(obj)
            return
        except KubeError as exc:
            if exc.status == 409:
                return
            if time.monotonic() > deadline:
                raise
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.5)


async def converged(api: Api, namespace: str, jobs: list[str]) -> str | None:
    """None when every Job finished and nothing is left over; else what is still missing."""
    listed = {j["metadata"]["name"]: j for j in await api.kube.list(JOBS, namespace=namespace)}
    missing = [n for n in jobs if n not in listed]
    if missing:
        return f"Jobs missing: {missing[:5]}"
    unfinished = [n for n in jobs if not is_true(listed[n], "Complete")]
    if unfinished:
        return f"{len(unfinished)} Jobs not Complete, e.g. {unfinished[:5]}"
    return None


async def final_checks(api: Api, namespace: str, jobs: list[str]) -> None:
    """Every Job finished; no admitted workload's pod still gated; no Workload orphaned."""
    assert await converged(api, namespace, jobs) is None
    job_objs = {j["metadata"]["uid"]: j for j in await api.kube.list(JOBS, namespace=namespace)}
    wls = await api.kube.list(WORKLOADS, namespace=namespace)
    owned: Counter[str] = Counter()
    for wl in wls:
        owners = [r["uid"] for r in wl["metadata"].get("ownerReferences") or []]
        assert any(u in job_objs for u in owners), f"orphaned Workload {wl['metadata']['name']}"
        owned.update(owners)
    for uid, j in job_objs.items():
        assert owned[uid] == 1, f"Job {j['metadata']['name']} has {owned[uid]} Workloads"
    admitted_jobs = {
        r["name"]
        for wl in wls
        if (wl.get("status") or {}).get("admission") is not None
        for r in wl["metadata"].get("ownerReferences") or []
    }
    for pod in await api.kube.list(PODS, namespace=namespace):
        owner = (pod["metadata"].get("labels") or {}).get("job-name")
        gates = [g["name"] for g in pod["spec"].get("schedulingGates") or []]
        if owner in admitted_jobs and not pod["metadata"].get("deletionTimestamp"):
            assert c.ADMISSION_GATE not in gates, f"pod {pod['metadata']['name']} still gated"


# -- kqueue replicas with their own kubeconfig and identity --------------------------------------


@dataclass
class Replica(KqueueProcess):
    """``kqueue run`` with a chosen kubeconfig (e.g. through the fault proxy) and cert dir."""

    kubeconfig: Path | None = None
    cert_dir: Path | None = None
    lease_name: str = "kqueue-e2e"

    def config_yaml(self) -> str:
        cfg = yaml.safe_load(super().config_yaml())
        if self.cert_dir is not None:
            cfg["webhook"]["certDir"] = str(self.cert_dir)
        cfg["leaderElection"]["resourceName"] = self.lease_name
        return str(yaml.safe_dump(cfg))

    def write_config(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "config.yaml").write_text(self.config_yaml())

    def start(self) -> None:
        self.start_nowait()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"kqueue exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self._ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"kqueue not ready after 60s:\n{self.log_tail()}")

    def start_nowait(self) -> None:
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n==== start #{self.starts} ====\n".encode())
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kqueue",
                    "run",
                    f"--kubeconfig={self.kubeconfig or self.cluster.kubeconfig_path}",
                    f"--config={self.work_dir / 'config.yaml'}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None


@contextlib.asynccontextmanager
async def kqueue_through(cluster: LocalCluster, server: str, work: Path) -> AsyncIterator[Replica]:
    """One kqueue replica that reaches the API server at ``server`` (a proxy), started, and torn
    down when the block ends."""
    kq = Replica(
        cluster=cluster,
        work_dir=work / "kqueue",
        kubeconfig=kubeconfig_for(cluster, server, work / "proxied.kubeconfig"),
    )
    kq.work_dir.mkdir()
    kq.setup()
    await asyncio.to_thread(kq.start)
    try:
        yield kq
    finally:
        await asyncio.to_thread(kq.teardown)


def kubeconfig_for(cluster: LocalCluster, server: str, path: Path) -> Path:
    """The admin kubeconfig, pointed at ``server`` (a proxy serving the cluster CA's cert)."""
    cfg = yaml.safe_load(cluster.kubeconfig_path.read_text())
    cfg["clusters"][0]["cluster"]["server"] = server
    path.write_text(yaml.safe_dump(cfg))
    return path


# -- a fault-injecting reverse proxy ---------------------------------------------------------------


def verb_and_resource(method: str, path: str, query: Any) -> tuple[str, str]:
    """The RBAC (verb, group/resource[/subresource]) of one request, as the API server sees it."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return method.lower(), path
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    watch = str(query.get("watch", "")).lower() in ("1", "true")
    verb = {
        "GET": "watch" if watch else ("get" if name else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }.get(method, method.lower())
    full = f"{group}/{resource}" if group else resource
    return verb, f"{full}/{sub}" if sub else full


@dataclass
class FaultProxy:
    """TLS reverse proxy on 127.0.0.1 in front of the API server.

    It serves a certificate signed by the cluster CA, so clients keep verifying the server, and
    forwards with the caller's bearer token, or as cluster admin when the caller has none (the
    proxy cannot forward a client certificate). A fraction ``fault_rate`` of requests (never a
    watch once it streams) is answered by the proxy: 429 with Retry-After, 500 or 503.
    """

    cluster: LocalCluster
    work_dir: Path
    fault_rate: float = 0.0
    seed: int = 1
    port: int = 0
    injected: Counter[int] = field(default_factory=Counter)
    forwarded: int = 0
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    statuses: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    namespace_terminating: int = 0
    # Seconds to hold requests while the API server is unreachable (0: answer 503 at once).
    hold_while_down: float = 0.0
    held: int = 0
    streams_cut: int = 0
    _runner: web.AppRunner | None = None
    _admin: aiohttp.ClientSession | None = None
    _bearer: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._rng = random.Random(self.seed)
        certs = self.cluster.ca.serving(self.work_dir, "fault-proxy")
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ctx.load_cert_chain(str(certs.cert_path), str(certs.key_path))
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5)
        self._admin = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=admin_ssl(self.cluster)), timeout=timeout,
            auto_decompress=False,
        )
        self._bearer = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                ssl=ssl.create_default_context(cafile=str(self.cluster.ca_path))
            ),
            timeout=timeout,
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=server_ctx)
        await site.start()
        if not self.port:
            # Bound to port 0: read back the port the OS chose.
            server: Any = site._server
            self.port = int(server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        for s in (self._admin, self._bearer):
            if s is not None:
                await s.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        verb, resource = verb_and_resource(request.method, request.path, request.query)
        self.calls[(verb, resource)] += 1
        if self.fault_rate and self._rng.random() < self.fault_rate:
            status = self._rng.choice([429, 500, 503])
            self.injected[status] += 1
            headers = {"Retry-After": "1"} if status == 429 else {}
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": "injected by the fault proxy",
                "reason": "TooManyRequests" if status == 429 else "InternalError",
                "code": status,
            }
            return web.json_response(body, status=status, headers=headers)
        self.forwarded += 1
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("host", "content-length", "transfer-encoding", "connection")
        }
        session = self._bearer if "authorization" in (k.lower() for k in headers) else self._admin
        assert session is not None
        data = await request.read()
        upstream = self.cluster.server_url + request.path_qs
        deadline = time.monotonic() + (self.hold_while_down if self.hold_while_down else 0)
        while True:
            try:
                up_cm = session.request(
                    request.method, upstream, headers=headers, data=data or None
                )
                up = await up_cm.__aenter__()
                break
            except (aiohttp.ClientError, ConnectionError) as exc:
                # The API server is down (being restarted). Hold the request until it is back,
                # as a load balancer draining to a restarting backend does, or answer 503.
                if time.monotonic() > deadline:
                    return web.json_response({"message": str(exc)}, status=503)
                self.held += 1
                await asyncio.sleep(0.2)
        resp = web.StreamResponse(status=up.status)
        try:
            refusal = await up.read() if up.status == 403 else None
            if refusal is not None and _namespace_terminating(refusal, up.headers):
                # Not a permission missing: a namespace being deleted refuses new content
                # (another test's namespace, whose objects kqueue still saw).
                self.namespace_terminating += 1
            else:
                self.statuses[(verb, resource, up.status)] += 1
            for k, v in up.headers.items():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    resp.headers[k] = v
            await resp.prepare(request)
            if refusal is not None:
                await resp.write(refusal)
                await resp.write_eof()
                return resp
            try:
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
            except (aiohttp.ClientError, ConnectionError):
                # The API server went away mid-stream (a watch during a restart): end the
                # stream cleanly, as a server-side watch timeout does, so the client resumes
                # its watch from the last resourceVersion it saw.
                self.streams_cut += 1
            with contextlib.suppress(ConnectionError, RuntimeError):
                await resp.write_eof()
            return resp
        finally:
            await up_cm.__aexit__(None, None, None)


def _namespace_terminating(body: bytes, headers: Any) -> bool:
    """A 403 whose Status carries the NamespaceTerminating cause."""
    if headers.get("Content-Encoding", "") == "gzip":
        body = gzip.decompress(body)
    return b"NamespaceTerminating" in body or b"being terminated" in body


@contextlib.asynccontextmanager
async def running(obj: Any) -> AsyncIterator[Any]:
    """``await obj.start()`` ... ``await obj.stop()``."""
    await obj.start()
    try:
        yield obj
    finally:
        await obj.stop()


def percentiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    s = sorted(values)
    return f"min {s[0]:.2f}s, median {s[len(s) // 2]:.2f}s, max {s[-1]:.2f}s (n={len(s)})"


async def wait_until(
    probe: Callable[[], Any], *, within: float, what: str, every: float = 0.5
) -> Any:
    """Poll an async probe until it returns a falsy "what is missing" answer."""
    deadline = time.monotonic() + within
    while True:
        missing = probe()
        if inspect.isawaitable(missing):
            missing = await missing
        if not missing:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what}: {missing}")
        await asyncio.sleep(every)


# -- fixtures (imported by the fault test modules) -----------------------------------------------


@pytest.fixture
async def api(api_client: client.ApiClient) -> AsyncIterator[Api]:
    a = Api(Kube(api_client))
    try:
        yield a
    finally:
        await a.cleanup()


@pytest.fixture
def kq(cluster: LocalCluster, tmp_path: Path) -> Iterator[Replica]:
    """One kqueue replica (leader election on, short lease) talking to the API server directly."""
    proc = Replica(cluster=cluster, work_dir=tmp_path / "kqueue")
    proc.work_dir.mkdir()
    yield from kqueue_running(proc)


def record(name: str, figures: dict[str, Any]) -> None:
    """Print the run's figures (``pytest -s`` shows them) and keep them for docs/reliability.md."""
    line = json.dumps({"test": name, "soak": SOAK, **figures}, sort_keys=True)
    print(f"\nFIGURES {line}")
    out = os.environ.get("KQUEUE_FIGURES")
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")
