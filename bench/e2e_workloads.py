"""Kueue's scheduler performance test on the real API server: Workload objects, kqueue as controller.

    python bench/e2e_workloads.py --qps 50 --burst 100 [--scale 0.2] [--out FILE]
    python bench/e2e_workloads.py --qps 0 ...          # unthrottled client

As Kueue's runner (test/performance/scheduler) does: a fresh local control plane, the
``baseline`` generator's ResourceFlavor, Cohorts, ClusterQueues, namespaces and LocalQueues; then
the generator's Workloads (one pod, the class's cpu and priority) created at their arrival
times. The runner watches Workloads; when one is admitted it marks it finished after the class's
run time (a Finished condition added through the status subresource) and records the time to
admission. ``kqueue run`` is the controller (a subprocess, webhooks included), with the given
client QPS/burst.

Figures: wall time (start to the last finish), average time to admission per class (from the
runner's create response to the watch event showing Admitted), minimum ClusterQueue usage
(cpu-seconds held over nominal quota x wall, per ClusterQueue), API requests per admitted
workload (kube-apiserver's ``apiserver_request_total`` delta over the run, minus the runner's own
requests and the idle control plane's rate measured before kqueue starts), and the controller's
CPU seconds and peak RSS from /proc.

``--scale`` multiplies every class's count, rounded half up, at least 1 (the ClusterQueues stay):
arrivals keep their rate but the run is shorter. ``--shape large-scale`` is Kueue's
configs/large-scale (10 cohorts x 100 ClusterQueues, 50 workloads each: 50,000; x0.1 makes 4, 1
and 1 per ClusterQueue, 6,000). ``--shape tas`` runs Kueue's configs/tas instead: a Topology, a
topology-aware ResourceFlavor and 640 Nodes (API objects only; nothing runs them) before the
Workloads (2, 4 or 8 pods asking for a rack). Not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes_asyncio import config as kube_config  # noqa: E402

from bench.watch import watch_round  # noqa: E402
from kqueue.api.quantity import parse_quantity  # noqa: E402
from kqueue.api.v1alpha1 import constants as c  # noqa: E402
from kqueue.controller.kube import JSON_PATCH, Kube  # noqa: E402
from kqueue.controller.resources import (  # noqa: E402
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Resource,
)
from kqueue.controller.topology import TOPOLOGIES  # noqa: E402
from kqueue.localcluster.cluster import LocalCluster  # noqa: E402
from kqueue.sim import generate as gen  # noqa: E402
from kqueue.sim.annotations import CLASS_LABEL  # noqa: E402
from tests.controller_e2e.harness import KqueueProcess, install_crds  # noqa: E402

Obj = dict[str, Any]

RESOURCES: dict[str, Resource] = {
    "ResourceFlavor": RESOURCE_FLAVORS,
    "Cohort": COHORTS,
    "ClusterQueue": CLUSTER_QUEUES,
    "Namespace": NAMESPACES,
    "LocalQueue": LOCAL_QUEUES,
    "Workload": WORKLOADS,
    # The tas shape's Topology and its API-only Nodes (nothing runs them; the engine reads their
    # labels and allocatable).
    "Topology": TOPOLOGIES,
    "Node": NODES,
}

# Kueue's published baseline (site/content/en/docs/overview/performance, v0.x) and thresholds.
KUEUE_BASELINE = {
    "wallSeconds": 351,
    "wallThresholdSeconds": 425,
    "averageTimeToAdmissionSeconds": {"small": 215, "medium": 77, "large": 16.5},
    "minClusterQueueUsagePercent": 55.9,
    "minClusterQueueUsageThresholdPercent": 50,
}


@dataclass
class BenchKqueue(KqueueProcess):
    """The harness's ``kqueue run`` subprocess with the benchmark's client settings."""

    qps: int = 50
    burst: int = 100

    def config_yaml(self) -> str:
        doc = yaml.safe_load(super().config_yaml())
        doc["clientConnection"] = {"qps": self.qps, "burst": self.burst}
        # One replica: no lease renewals in the request count.
        doc["leaderElection"] = {"leaderElect": False}
        return yaml.safe_dump(doc)


WEBHOOK_CONFIGURATIONS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")


def apiserver_only(cluster: LocalCluster) -> None:
    """Leave etcd and kube-apiserver running, as Kueue's runner's envtest: nothing else talking
    to the API server."""
    for name in ("kwok", "kube-scheduler", "kube-controller-manager"):
        cluster.stop_component(name)


def run_info() -> dict[str, Any]:
    """Which code ran, when, and how busy the (shared) machine was: for a result's header."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
        check=False,
    ).stdout.strip()
    # Uncommitted changes to the controller's code in this tree (it runs from the tree).
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "kqueue"], cwd=ROOT, capture_output=True,
        text=True, check=False,
    ).stdout.split("\n")
    return {
        "commit": commit,
        "uncommitted": [line[3:] for line in dirty if line.strip()],
        "utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "loadAverage": [round(x, 2) for x in os.getloadavg()],
    }


# -- /proc and /metrics ------------------------------------------------------------------------


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_memory(pid: int) -> tuple[int, int]:
    """(current RSS, peak RSS) in bytes."""
    rss = hwm = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
        elif line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) * 1024
    return rss, hwm


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metric_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = _SAMPLE.match(line)
        if m is None or m.group(1) != name:
            continue
        out.append((dict(_LABEL.findall(m.group(3) or "")), float(m.group(4))))
    return out


def apiserver_requests(cluster: LocalCluster) -> dict[str, float]:
    """``apiserver_request_total`` of resource requests by "VERB resource[/sub]"."""
    status, text = cluster.request("GET", "/metrics", timeout=30)
    assert status == 200, status
    out: dict[str, float] = {}
    for labels, value in metric_samples(str(text), "apiserver_request_total"):
        resource = labels.get("resource", "")
        if not resource:
            continue  # /metrics, /healthz, discovery: not the controller's traffic
        sub = labels.get("subresource", "")
        key = f"{labels.get('verb')} {resource}{'/' + sub if sub else ''}"
        out[key] = out.get(key, 0.0) + value
    return out


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    keys = set(after) | set(before)
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in keys}
    return {k: v for k, v in sorted(d.items()) if v}


# -- the runner ---------------------------------------------------------------------------------


@dataclass
class Record:
    name: str
    namespace: str
    klass: str
    cpu: float
    run_time: float
    arrival: float
    created: float | None = None
    admitted_first: float | None = None
    admitted_at: float | None = None
    finished: float | None = None
    evictions: int = 0
    finish_task: asyncio.Task[None] | None = None
    # Kueue's runner's definition: creationTimestamp to the Admitted condition's
    # lastTransitionTime (epoch seconds), at the first admission seen.
    kueue_time_to_admission: float | None = None
    # Whether its first admission gave every pod set a topologyAssignment (the tas shape).
    topology_assigned: bool = False


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def cpu_milli(value: str | int | float | None) -> int:
    """A cpu quantity ("20", "500m", 1.5) in millicores."""
    if value is None:
        return 0
    text = str(value)
    if text.endswith("m"):
        return int(text[:-1])
    return round(float(text) * 1000)


@dataclass
class CQEvent:
    t: float  # monotonic seconds, when the runner saw it
    usage: int  # status.flavorsUsage[0].resources[0].total, millicores
    nominal: int  # spec.resourceGroups[0].flavors[0].resources[0].nominalQuota, millicores
    pending: int
    reserving: int


def kueue_usage(events: dict[str, list[CQEvent]], nominal_total: int | None = None) -> dict[str, Any]:
    """Kueue's runner's ClusterQueue usage (recorder.go): per ClusterQueue, the usage of each
    status seen integrated until the next one; summed over the class, over the class's nominal
    quota times (last - first status event of the class).

    ``nominal_total``: the nominal quota of every ClusterQueue of the class. Kueue's recorder
    sees every ClusterQueue from its creation; this runner's watch starts after they exist, so a
    ClusterQueue without a status change during the run would otherwise be left out of the
    denominator (on large-scale x0.1 about half of the 1,000)."""
    used = 0.0
    nominal = 0
    first = min((e[0].t for e in events.values() if e), default=0.0)
    last = max((e[-1].t for e in events.values() if e), default=0.0)
    for evs in events.values():
        if not evs:
            continue
        nominal += evs[-1].nominal
        for a, b in itertools.pairwise(evs):
            used += a.usage * (b.t - a.t)
    if nominal_total is not None:
        nominal = nominal_total
    span = last - first
    average = used / span if span > 0 else 0.0
    return {
        "usagePercent": round(100 * average / nominal, 2) if nominal else None,
        "averageCpuMilli": round(average),
        "nominalQuotaMilli": nominal,
        "monitoringSeconds": round(span, 2),
    }


@dataclass
class Runner:
    kube: Kube
    records: dict[str, Record]
    t0: float = 0.0
    requests: int = 0
    # (namespace, cpu-seconds) of held quota, accumulated when a hold ends.
    held: dict[str, float] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    finished: int = 0
    create_errors: int = 0
    finish_errors: int = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def create_all(self, workers: int) -> None:
        order = sorted(self.records.values(), key=lambda r: r.arrival)
        queue: asyncio.Queue[Record] = asyncio.Queue()
        for r in order:
            queue.put_nowait(r)

        async def worker() -> None:
            while not queue.empty():
                r = queue.get_nowait()
                wait = r.arrival - self.now()
                if wait > 0:
                    await asyncio.sleep(wait)
                body = self.docs.pop(f"{r.namespace}/{r.name}")
                self.requests += 1
                try:
                    await self.kube.create(WORKLOADS, body, namespace=r.namespace)
                except Exception as exc:
                    self.create_errors += 1
                    print(f"create {r.name}: {exc}", file=sys.stderr)
                    continue
                r.created = self.now()

        await asyncio.gather(*(worker() for _ in range(workers)))

    docs: dict[str, Obj] = field(default_factory=dict)

    def _release(self, r: Record, at: float) -> None:
        if r.admitted_at is not None:
            self.held[r.namespace] = self.held.get(r.namespace, 0.0) + r.cpu * (at - r.admitted_at)
            r.admitted_at = None

    async def _finish_after(self, r: Record, delay: float) -> None:
        await asyncio.sleep(delay)
        patch = [
            {
                "op": "add",
                "path": "/status/conditions/-",
                "value": {
                    "type": c.FINISHED,
                    "status": "True",
                    "reason": c.FINISHED_SUCCEEDED,
                    "message": "benchmark runner: run time over",
                    "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
            }
        ]
        self.requests += 1
        try:
            await self.kube.patch(
                WORKLOADS, r.name, patch, namespace=r.namespace, subresource="status",
                content_type=JSON_PATCH,
            )
        except Exception as exc:
            self.finish_errors += 1
            print(f"finish {r.name}: {exc}", file=sys.stderr)
            return
        self._mark_finished(r, self.now())

    def _mark_finished(self, r: Record, at: float) -> None:
        if r.finished is not None:
            return
        self._release(r, at)
        r.finished = at
        self.finished += 1
        if self.finished == len(self.records):
            self.done.set()

    def observe(self, wl: Obj) -> None:
        meta = wl["metadata"]
        r = self.records.get(f"{meta['namespace']}/{meta['name']}")
        if r is None or r.finished is not None:
            return
        conds = {x["type"]: x.get("status") for x in (wl.get("status") or {}).get("conditions") or []}
        if conds.get(c.FINISHED) == "True":
            # Our finish patch can land even though an eviction seen meanwhile cancelled its
            # task: count it when the watch shows it, or the run never ends.
            self._mark_finished(r, self.now())
            return
        admitted = conds.get(c.ADMITTED) == "True"
        now = self.now()
        if admitted and r.admitted_at is None and r.finish_task is None:
            if r.admitted_first is None:
                r.admitted_first = now
                created = parse_time(meta.get("creationTimestamp"))
                admitted_cond = next(
                    x for x in wl["status"]["conditions"] if x["type"] == c.ADMITTED
                )
                at = parse_time(admitted_cond.get("lastTransitionTime"))
                if created is not None and at is not None and at >= created:
                    r.kueue_time_to_admission = at - created
                psas = ((wl["status"].get("admission") or {}).get("podSetAssignments")) or []
                r.topology_assigned = bool(psas) and all(
                    x.get("topologyAssignment") for x in psas
                )
            r.admitted_at = now
            r.finish_task = asyncio.create_task(self._finish_after(r, r.run_time))
        elif not admitted and r.finish_task is not None:
            # Evicted (preempted) before its run time was over: it runs again when readmitted.
            r.finish_task.cancel()
            r.finish_task = None
            r.evictions += 1
            self._release(r, now)

    cq_events: dict[str, list[CQEvent]] = field(default_factory=dict)
    cqs_idle: asyncio.Event = field(default_factory=asyncio.Event)

    def observe_cq(self, cq: Obj) -> None:
        status = cq.get("status") or {}
        usage = status.get("flavorsUsage") or []
        groups = cq["spec"].get("resourceGroups") or []
        ev = CQEvent(
            t=time.monotonic(),
            usage=cpu_milli(usage[0]["resources"][0]["total"]) if usage and usage[0].get("resources") else 0,
            nominal=cpu_milli(groups[0]["flavors"][0]["resources"][0]["nominalQuota"]) if groups else 0,
            pending=int(status.get("pendingWorkloads") or 0),
            reserving=int(status.get("reservingWorkloads") or 0),
        )
        self.cq_events.setdefault(cq["metadata"]["name"], []).append(ev)
        if self.done.is_set() and all(
            e and not e[-1].pending and not e[-1].reserving and not e[-1].usage
            for e in self.cq_events.values()
        ):
            self.cqs_idle.set()

    async def watch(
        self, resource_version: str, resource: Resource = WORKLOADS, cq: bool = False
    ) -> None:
        rv = resource_version
        while not (self.cqs_idle.is_set() if cq else self.done.is_set()):
            self.requests += 1
            async for obj, seen in watch_round(self.kube, resource.collection_path(None), rv):
                rv = seen
                if cq:
                    self.observe_cq(obj)
                else:
                    self.observe(obj)


async def profile(pid: int, seconds: float, delay: float, out: Path) -> None:
    """py-spy the controller for ``seconds``, ``delay`` seconds into the run (raw stacks)."""
    await asyncio.sleep(delay)
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-r", "50",
        "-d", str(int(seconds)), "-f", "raw", "-o", str(out), "--nonblocking",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await proc.wait()
    except asyncio.CancelledError:
        # The run ended first: py-spy writes what it sampled so far when interrupted.
        proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        raise


async def sample_unfinished(kube: Kube, records: dict[str, Record], n: int = 10) -> list[Obj]:
    """Where some unfinished workloads stand (their conditions), when a run times out."""
    out: list[Obj] = []
    for r in [r for r in records.values() if r.finished is None][:n]:
        try:
            wl = await kube.get(WORKLOADS, r.name, namespace=r.namespace)
        except Exception as exc:
            out.append({"name": r.name, "error": str(exc)})
            continue
        out.append({
            "name": f"{r.namespace}/{r.name}", "class": r.klass, "created": r.created,
            "admittedFirst": r.admitted_first, "evictions": r.evictions,
            "conditions": [
                {k: x.get(k) for k in ("type", "status", "reason", "message")}
                for x in (wl.get("status") or {}).get("conditions") or []
            ],
        })
    return out


async def setup_objects(kube: Kube, docs: list[Obj]) -> None:
    for d in docs:
        ns = d["metadata"].get("namespace")
        await kube.create(RESOURCES[d["kind"]], d, namespace=ns)


async def wait_cluster_queues_active(kube: Kube, count: int, within: float = 120) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < within:
        cqs = await kube.list(CLUSTER_QUEUES)
        active = sum(
            1
            for cq in cqs
            for cond in (cq.get("status") or {}).get("conditions") or []
            if cond.get("type") == "Active" and cond.get("status") == "True"
        )
        if active >= count:
            return time.monotonic() - t0
        await asyncio.sleep(0.5)
    raise RuntimeError(f"ClusterQueues not active after {within}s")


def kqueue_admitted_total(kq: KqueueProcess) -> float:
    try:
        text = kq.metrics()
    except OSError:
        return float("nan")
    return sum(v for _, v in metric_samples(text, "kqueue_admitted_workloads_total"))


async def sample_loop(
    kq: KqueueProcess,
    runner: Runner,
    series: list[dict[str, float]],
    period: float = 1.0,
    scrape_metrics: bool = True,
) -> None:
    assert kq.proc is not None
    pid = kq.proc.pid
    while True:
        # Rendering /metrics costs the controller CPU (15% of its samples at one scrape a
        # second): a run compared with a controller nobody scrapes skips it.
        admitted = (
            await asyncio.to_thread(kqueue_admitted_total, kq) if scrape_metrics else float("nan")
        )
        rss, _ = proc_memory(pid)
        series.append(
            {
                "t": round(runner.now(), 2),
                "admittedTotal": admitted,
                "cpuSeconds": round(proc_cpu_seconds(pid), 2),
                "rssBytes": rss,
                "created": sum(1 for r in runner.records.values() if r.created is not None),
                "finished": runner.finished,
            }
        )
        await asyncio.sleep(period)


async def bench(args: argparse.Namespace, cluster: LocalCluster, work: Path) -> dict[str, Any]:
    # The rule bench/side_by_side.py scales Kueue's generator config with.
    shape = gen.scaled(gen.SHAPES[args.shape], str(args.scale))
    docs = list(gen.documents(shape))
    setup_docs = [d for d in docs if d["kind"] != "Workload"]
    wl_docs = [d for d in docs if d["kind"] == "Workload"]
    classes = {k.name: k for k in shape.classes}

    work.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (setup, before timing)
    if args.apiserver_only:
        await asyncio.to_thread(apiserver_only, cluster)
    install_crds(cluster)
    kq = BenchKqueue(cluster, work, qps=args.qps, burst=args.burst)
    kq.setup()
    if args.no_webhooks:
        # As minimalkueue (Kueue's benchmark controller), which serves no webhooks: the API
        # server then does not call kqueue on every Workload create, finish and admission.
        for kind in WEBHOOK_CONFIGURATIONS:
            cluster.kubectl("delete", kind, "--all", check=False)

    # The idle control plane's own traffic (controller-manager, scheduler, kwok), per second.
    idle_window = 10.0
    before_idle = await asyncio.to_thread(apiserver_requests, cluster)
    await asyncio.sleep(idle_window)
    idle = delta(await asyncio.to_thread(apiserver_requests, cluster), before_idle)
    idle_rate = sum(idle.values()) / idle_window

    await asyncio.to_thread(kq.start)
    assert kq.proc is not None
    pid = kq.proc.pid
    api = await kube_config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    kube = Kube(api, timeout=120)
    await setup_objects(kube, setup_docs)
    await wait_cluster_queues_active(kube, shape.cluster_queues)

    records: dict[str, Record] = {}
    runner = Runner(kube, records)
    for d in wl_docs:
        k = classes[d["metadata"]["labels"][CLASS_LABEL]]
        key = f"{d['metadata']['namespace']}/{d['metadata']['name']}"
        records[key] = Record(
            d["metadata"]["name"], d["metadata"]["namespace"], k.name,
            # cpu held while admitted: every pod's request (the tas shape's classes have 2-8 pods).
            parse_quantity(k.cpu, "cpu") * k.pods / 1000,
            k.run_time.total_seconds(),
            # Kueue's generator: the n-th of a class arrives after n+1 intervals.
            arrival=(int(d["metadata"]["name"].rsplit("-", 3)[2]) + 1) * k.interval.total_seconds(),
        )
        runner.docs[key] = d

    listed_rv = (await kube.request("GET", WORKLOADS.collection_path(None)))[1]["metadata"][
        "resourceVersion"
    ]
    api_before = await asyncio.to_thread(apiserver_requests, cluster)
    cpu_before = proc_cpu_seconds(pid)
    wall_before = time.monotonic()
    info_before = run_info()
    runner.t0 = time.monotonic()
    profiling = (
        asyncio.create_task(profile(pid, args.profile, args.profile_delay, args.profile_out))
        if args.profile
        else None
    )
    series: list[dict[str, float]] = []
    cq_rv = (await kube.request("GET", CLUSTER_QUEUES.collection_path(None)))[1]["metadata"][
        "resourceVersion"
    ]
    cq_watch = asyncio.create_task(runner.watch(cq_rv, CLUSTER_QUEUES, cq=True))
    watch = asyncio.create_task(runner.watch(listed_rv))
    sampler = asyncio.create_task(
        sample_loop(kq, runner, series, scrape_metrics=not args.no_metrics_scrape)
    )
    creating = asyncio.create_task(runner.create_all(args.workers))
    timed_out = False
    try:
        await asyncio.wait_for(runner.done.wait(), timeout=args.timeout)
    except TimeoutError:
        timed_out = True
    wall = runner.now()
    # Kueue's recorder ends once no ClusterQueue has pending or reserving workloads: the last
    # status events (usage back to 0) count in its monitoring time.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(runner.cqs_idle.wait(), timeout=30)
    cq_watch.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await cq_watch
    await creating if creating.done() else creating.cancel()
    for t in (watch, sampler):
        t.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
    for r in records.values():
        if r.finish_task is not None and not r.finish_task.done():
            r.finish_task.cancel()
        runner._release(r, wall)

    elapsed = time.monotonic() - wall_before
    cpu = proc_cpu_seconds(pid) - cpu_before
    rss, peak = proc_memory(pid)
    api_after = await asyncio.to_thread(apiserver_requests, cluster)
    info_after = run_info()
    if profiling is not None:
        if profiling.done():
            await profiling
        else:  # the run ended within the profile's window: keep what was sampled
            profiling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await profiling
    requests = delta(api_after, api_before)
    total_requests = sum(requests.values())
    kqueue_requests = total_requests - runner.requests - idle_rate * elapsed
    admitted = sum(1 for r in records.values() if r.admitted_first is not None)
    kq_admitted = kqueue_admitted_total(kq)
    unfinished = await sample_unfinished(kube, records) if timed_out else []
    await api.close()
    await asyncio.to_thread(kq.stop)

    per_class: dict[str, Any] = {}
    for name in classes:
        recs = [r for r in records.values() if r.klass == name]
        waits = [
            r.admitted_first - r.created
            for r in recs
            if r.admitted_first is not None and r.created is not None
        ]
        lag = [r.created - r.arrival for r in recs if r.created is not None]
        per_class[name] = {
            "count": len(recs),
            "created": sum(1 for r in recs if r.created is not None),
            "admitted": len(waits),
            "finished": sum(1 for r in recs if r.finished is not None),
            "evictions": sum(r.evictions for r in recs),
            "withTopologyAssignment": sum(1 for r in recs if r.topology_assigned),
            "averageTimeToAdmissionSeconds": round(sum(waits) / len(waits), 2) if waits else None,
            "averageCreateLagSeconds": round(sum(lag) / len(lag), 2) if lag else None,
        }
    kueue_classes: dict[str, Any] = {}
    for name in classes:
        recs = [r for r in records.values() if r.klass == name]
        times = [r.kueue_time_to_admission for r in recs if r.kueue_time_to_admission is not None]
        kueue_classes[name] = {
            "count": len(recs),
            "evictions": sum(r.evictions for r in recs),
            "averageTimeToAdmissionSeconds": round(sum(times) / len(times), 2) if times else None,
        }
    nominal = float(shape.nominal_quota)
    usage = {
        ns: 100 * held / (nominal * wall) for ns, held in runner.held.items()
    }
    return {
        "shape": shape.name,
        "scale": args.scale,
        "clusterQueues": shape.cluster_queues,
        "workloads": len(records),
        "qps": args.qps,
        "burst": args.burst,
        "timedOut": timed_out,
        "run": {"before": info_before, "after": info_after},
        "wallSeconds": round(wall, 1),
        "admitted": admitted,
        "finished": runner.finished,
        "createErrors": runner.create_errors,
        "finishErrors": runner.finish_errors,
        "classes": per_class,
        "kueueDefinitions": {
            "clusterQueueUsage": kueue_usage(
                runner.cq_events,
                nominal_total=shape.cluster_queues * cpu_milli(shape.nominal_quota),
            ),
            "classes": kueue_classes,
        },
        "apiserverOnly": args.apiserver_only,
        "webhooks": not args.no_webhooks,
        "minClusterQueueUsagePercent": round(min(usage.values(), default=0.0), 2),
        "clusterQueueUsagePercent": round(sum(usage.values()) / max(len(usage), 1), 2),
        "apiserverRequests": {
            "total": total_requests,
            "runner": runner.requests,
            "idleControlPlanePerSecond": round(idle_rate, 2),
            "kqueueEstimate": round(kqueue_requests),
            "kqueuePerAdmittedWorkload": round(kqueue_requests / max(kq_admitted, 1), 2),
            "byVerbResource": requests,
        },
        "kqueueAdmittedWorkloadsTotal": kq_admitted,
        "unfinishedSample": unfinished,
        "controller": {
            "cpuSeconds": round(cpu, 1),
            "cpuPercentOfOneCore": round(100 * cpu / elapsed, 1),
            "rssBytesAtEnd": rss,
            "peakRssBytes": peak,
        },
        "series": series,
        "kueueBaseline": KUEUE_BASELINE,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qps", type=int, default=50, help="kqueue's client QPS (0: unthrottled)")
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--shape", choices=sorted(gen.SHAPES), default="baseline",
                        help="the generator's shape (tas: Kueue's configs/tas, 640 nodes)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every class's count")
    parser.add_argument("--workers", type=int, default=64, help="concurrent creates")
    parser.add_argument("--timeout", type=float, default=1200, help="give up after (s)")
    parser.add_argument("--profile", type=float, default=0, help="py-spy the controller for (s)")
    parser.add_argument(
        "--profile-delay", type=float, default=0, help="start the profile this far in (s)"
    )
    parser.add_argument("--profile-out", type=Path, default=Path("bench/results/profile.txt"))
    parser.add_argument(
        "--apiserver-only", action="store_true",
        help="stop kube-controller-manager, kube-scheduler and kwok (as Kueue's envtest runner)",
    )
    parser.add_argument(
        "--no-metrics-scrape", action="store_true",
        help="do not read the controller's /metrics during the run (only once at the end)",
    )
    parser.add_argument(
        "--no-webhooks", action="store_true",
        help="remove kqueue's webhook configurations (minimalkueue serves none)",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    async def go() -> dict[str, Any]:
        with LocalCluster() as cluster:
            assert cluster.work_dir is not None
            return await bench(args, cluster, cluster.work_dir / "kqueue")

    result = asyncio.run(go())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    summary = {k: v for k, v in result.items() if k not in ("series", "kueueBaseline")}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
