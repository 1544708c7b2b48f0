"""MultiKueue at scale: a manager with N workers and M Jobs (issue: 10 workers, 1,000 workloads).

    nice python bench/multikueue_scale.py --workers 10 --workloads 1000 --out FILE

The manager is a whole local control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok nodes) with its kqueue, configured as `make run-multikueue` configures it
(kqueue/localcluster/multikueue.py): the workers' kubeconfigs as Secrets, one MultiKueueCluster
each, one MultiKueueConfig naming them all (the AllAtOnce dispatcher: every workload is copied to
every worker, the first to admit it keeps it), one ClusterQueue behind the check. To fit N workers
on a small machine each worker is lighter: a kube-apiserver (``LocalCluster(apiserver_only=True)``)
and its own kqueue, every worker's API server storing in one etcd (the first worker's) under its
own ``--etcd-prefix``; no controller manager, scheduler or kwok, so the Jobs created on the
workers are admitted there but their pods are never made. Every ClusterQueue can hold all M
workloads at once: the figures are MultiKueue's, not a quota's.

The runner creates M Jobs (one pod, 1 cpu, ``spec.managedBy: kqueue.io/multikueue``) on the
manager, watches Workloads on the manager and on every worker, and stops when every manager
Workload has ``status.clusterName`` (and then waits ``--settle`` seconds for the losers' copies
to be deleted). Figures:

- dispatch latency per workload: from the runner seeing the manager's Workload QuotaReserved to
  it seeing the first worker's copy Admitted (both by watch, one clock), and to the manager's
  Workload getting ``status.clusterName``; percentiles;
- API requests per workload on each API server (``apiserver_request_total`` delta, by verb and
  resource): those on what a workload touches (WORKLOAD_RESOURCES) less the runner's own Job
  creates; and all of them less an idle rate measured before the Jobs (leases and the
  manager's re-reads of the kubeconfig Secrets go on per second, and dwarf a small run);
- the manager kqueue's CPU seconds over the run and its peak RSS (VmHWM), from /proc; the
  workers' kqueues' CPU seconds together; the RSS of every process started, by kind.

Not a test: the figures depend on the machine (its load average is recorded).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import json
import os
import re
import signal
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

from bench.e2e_workloads import (  # noqa: E402
    apiserver_requests,
    delta,
    proc_cpu_seconds,
    proc_memory,
    run_info,
    watch_round,
)
from kqueue.api.v1alpha1 import constants as c  # noqa: E402
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME  # noqa: E402
from kqueue.controller.kube import Conflict, Kube, KubeError  # noqa: E402
from kqueue.controller.resources import (  # noqa: E402
    ADMISSION_CHECKS,
    JOBS,
    MULTIKUEUE_CLUSTERS,
    WORKLOADS,
    Resource,
)
from kqueue.localcluster import build  # noqa: E402
from kqueue.localcluster import multikueue as mk  # noqa: E402
from kqueue.localcluster.cluster import LocalCluster  # noqa: E402
from tests.controller_e2e.harness import KQUEUE_NAMESPACE, KqueueProcess, free_port  # noqa: E402

Obj = dict[str, Any]
NAMESPACE = "default"
FLAVOR, CQ, QUEUE = "default-flavor", "cluster-queue", "user-queue"
CONFIG = CHECK = "multikueue-bench"


@dataclass
class BenchKqueue(KqueueProcess):
    """The harness's ``kqueue run`` with one replica (no lease renewals in the request counts)
    and, on the manager, the multiKueue section."""

    multi_kueue: dict[str, Any] | None = None
    qps: int | None = None
    burst: int | None = None

    def config_yaml(self) -> str:
        doc = yaml.safe_load(super().config_yaml())
        doc["leaderElection"] = {"leaderElect": False}
        if self.multi_kueue is not None:
            doc["multiKueue"] = self.multi_kueue
        if self.qps is not None:
            doc["clientConnection"] = {"qps": self.qps, "burst": self.burst or self.qps * 2}
        return str(yaml.safe_dump(doc))


@dataclass
class Record:
    quota_reserved: float | None = None
    cluster_name: str | None = None
    cluster_named: float | None = None
    # worker -> when its copy was first seen Admitted
    remote_admitted: dict[str, float] = field(default_factory=dict)


def is_true(obj: Obj, kind: str) -> bool:
    return any(cd.get("type") == kind and cd.get("status") == "True"
               for cd in (obj.get("status") or {}).get("conditions") or [])


class Runner:
    def __init__(self, manager: Kube, workers: dict[str, Kube], count: int) -> None:
        self.manager = manager
        self.workers = workers
        self.count = count
        self.records: dict[str, Record] = {}
        self.done = asyncio.Event()
        self.placed = 0

    def record(self, name: str) -> Record:
        return self.records.setdefault(name, Record())

    def on_manager(self, wl: Obj, now: float) -> None:
        r = self.record(wl["metadata"]["name"])
        if r.quota_reserved is None and is_true(wl, c.QUOTA_RESERVED):
            r.quota_reserved = now
        cluster = (wl.get("status") or {}).get("clusterName")
        if cluster and r.cluster_named is None:
            r.cluster_name, r.cluster_named = cluster, now
            self.placed += 1
            if self.placed >= self.count:
                self.done.set()

    def on_worker(self, worker: str, wl: Obj, now: float) -> None:
        if is_true(wl, c.ADMITTED):
            self.record(wl["metadata"]["name"]).remote_admitted.setdefault(worker, now)

    async def watch(self, kube: Kube, resource: Resource, on: Any, stop: asyncio.Event) -> None:
        """Follow ``resource`` in NAMESPACE from now on, calling ``on(obj, monotonic time)``."""
        rv = (await kube.request("GET", resource.collection_path(NAMESPACE)))[1]["metadata"][
            "resourceVersion"]
        while not stop.is_set():
            async for obj, seen in watch_round(kube, resource.collection_path(NAMESPACE), rv):
                rv = seen
                on(obj, time.monotonic())


def job(i: int) -> Obj:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"mk-{i:05d}", "namespace": NAMESPACE,
                     "labels": {c.QUEUE_NAME_LABEL: QUEUE}},
        "spec": {
            "managedBy": CONTROLLER_NAME,
            "parallelism": 1, "completions": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
            }]}},
        },
    }


# What one workload's life touches on either side; the rest (leases, the manager's re-reads of
# the kubeconfig Secrets, the control plane's own) goes on per second whatever the workloads.
WORKLOAD_RESOURCES = ("jobs", "workloads", "events", "clusterqueues", "localqueues")


def workload_requests(by_verb_resource: dict[str, int], own: int) -> int:
    """Requests on WORKLOAD_RESOURCES (watches excepted), less the runner's ``own``."""
    return sum(v for k, v in by_verb_resource.items()
               if not k.startswith("WATCH ") and k.split(" ", 1)[1].split("/")[0]
               in WORKLOAD_RESOURCES) - own


# What the manager's kqueue logs when a write on a worker fails (controller.py), by kind.
REMOTE_WRITE_LOG = {
    "copyNotMade": "not copied to",
    "copyNotDeleted": "not deleted:",
    "jobNotMade": "not created on",
    "copyNotSeenInTime": "not seen within",
    "noAnswer": "TimeoutError: no answer",
}


def remote_write_failures(log: Path) -> dict[str, int]:
    """How often the manager's log says each of REMOTE_WRITE_LOG (its last start only)."""
    try:
        text = log.read_text(errors="replace").rsplit("==== start #", 1)[-1]
    except OSError:
        return {}
    return {key: text.count(needle) for key, needle in REMOTE_WRITE_LOG.items()}


def remote_write_causes(log: Path, top: int = 6) -> dict[str, dict[str, int]]:
    """For the failed creates (copies and jobs), how often each cause was logged: the error after
    the worker's name, digits and quoted names folded so that equal causes count together."""
    try:
        text = log.read_text(errors="replace").rsplit("==== start #", 1)[-1]
    except OSError:
        return {}
    out: dict[str, dict[str, int]] = {}
    for key in ("copyNotMade", "jobNotMade"):
        needle = REMOTE_WRITE_LOG[key]
        causes: collections.Counter[str] = collections.Counter()
        for line in text.splitlines():
            if needle in line:
                cause = line.split(needle, 1)[1].split(": ", 1)[-1]
                cause = re.sub(r'"[^"]*"', '"…"', re.sub(r"\d+", "N", cause))
                causes[cause[:300]] += 1
        out[key] = dict(causes.most_common(top))
    return out


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    v = sorted(values)

    def at(q: float) -> float:
        return round(v[min(len(v) - 1, int(q * len(v)))], 3)

    return {"n": len(v), "p50": at(0.50), "p90": at(0.90), "p99": at(0.99),
            "max": round(v[-1], 3), "min": round(v[0], 3)}


def rss_by_kind(clusters: dict[str, LocalCluster], kqs: dict[str, BenchKqueue]) -> dict[str, Any]:
    """Current RSS (MiB) of every process this benchmark started, summed by kind."""
    out: dict[str, int] = {}
    for lc in clusters.values():
        for name, comp in lc._components.items():
            if comp.proc is not None and comp.proc.poll() is None:
                out[name] = out.get(name, 0) + proc_memory(comp.proc.pid)[0]
    for name, kq in kqs.items():
        if kq.proc is not None and kq.proc.poll() is None:
            key = "kqueue (manager)" if name == "manager" else "kqueue (workers)"
            out[key] = out.get(key, 0) + proc_memory(kq.proc.pid)[0]
    return {k: v // 2**20 for k, v in sorted(out.items())}


def start_clusters(n: int, bin_dir: Path) -> dict[str, LocalCluster]:
    manager = LocalCluster(bin_dir=bin_dir)
    first = LocalCluster(bin_dir=bin_dir, apiserver_only=True, etcd_prefix="/worker1")
    clusters = {"manager": manager, "worker1": first}
    # The first worker's etcd must be up before the others' API servers point at it.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(LocalCluster.start, [manager, first]))
    rest = {f"worker{i}": LocalCluster(bin_dir=bin_dir, apiserver_only=True,
                                       etcd_servers=first.etcd_url, etcd_prefix=f"/worker{i}")
            for i in range(2, n + 1)}
    clusters.update(rest)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(LocalCluster.start, rest.values()))
    return clusters


def start_kqueues(clusters: dict[str, LocalCluster], work: Path, args: argparse.Namespace,
                  kqs: dict[str, BenchKqueue]) -> None:
    """Into ``kqs`` (so the caller stops them, even those started before one fails)."""
    kqs |= {
        name: BenchKqueue(
            cluster=lc, work_dir=work / name,
            multi_kueue={} if name == "manager" else None,
            qps=args.qps or None, burst=args.burst or None,
        )
        for name, lc in clusters.items()
    }
    for kq in kqs.values():
        kq.work_dir.mkdir(parents=True, exist_ok=True)

    # One at a time, and a second try: each start waits at most 60 s to be ready, and eleven
    # starting together on a loaded 2-core machine missed that.
    # Ports are picked just before each start, and again for the second try: picked minutes
    # earlier, one was taken meanwhile by an outgoing connection (EADDRINUSE on 127.0.0.1:50103).
    for kq in kqs.values():
        try:
            _fresh_ports(kq)
            kq.setup()
            kq.start()
        except RuntimeError as exc:
            print(f"kqueue on {kq.cluster.server_url}: {str(exc).splitlines()[0]}; again",
                  file=sys.stderr, flush=True)
            kq.stop(kill=True)
            _fresh_ports(kq)
            kq.setup()
            kq.start()


def _fresh_ports(kq: BenchKqueue) -> None:
    kq.webhook_port, kq.metrics_port, kq.health_port = free_port(), free_port(), free_port()


def lower_workers(clusters: dict[str, LocalCluster], kqs: dict[str, BenchKqueue],
                  by: int) -> int:
    """Raise the nice value of every worker process (all their threads) by ``by``.

    On 2 shared cores the ten workers' API servers and kqueues outweigh the manager's kqueue,
    whose pace is what the benchmark measures; a process may lower itself but not raise itself
    back, so the workers go down instead of the manager up. Linux keeps a nice value per thread,
    hence every task of each process. Returns how many threads were changed.
    """
    pids = [kq.proc.pid for name, kq in kqs.items() if name != "manager" and kq.proc is not None]
    for name, lc in clusters.items():
        if name != "manager":
            pids += [comp.proc.pid for comp in lc._components.values() if comp.proc is not None]
    changed = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            tid = int(task.name)
            try:
                os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + by))
                changed += 1
            except (ProcessLookupError, PermissionError):
                pass
    return changed


async def wait_active(kube: Kube, n: int, within: float) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            mkcs = (await kube.request("GET", MULTIKUEUE_CLUSTERS.collection_path(None)))[1]["items"]
            ac = await kube.get(ADMISSION_CHECKS, CHECK)
            if sum(is_true(x, "Active") for x in mkcs) == n and is_true(ac, "Active"):
                return
        except KubeError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"MultiKueue clusters not all Active within {within:.0f}s")
        await asyncio.sleep(1)


# A create refused past the manager's webhook deadline is sent again after 1, 2, 4 ... 10 s: the
# manager's kqueue answers its webhooks while it dispatches the Jobs before (5 attempts 1 s apart
# ended a 10 x 1,000 run at Job 324).
_CREATE_ATTEMPTS = 20


async def create_jobs(kube: Kube, count: int, concurrency: int) -> int:
    it = iter(range(count))

    retried = 0

    async def worker() -> None:
        nonlocal retried
        for i in it:
            # On a loaded machine the manager's webhook can miss the API server's 10 s deadline
            # (HTTP 500, "context deadline exceeded"): such a create is sent again, as a user
            # would; one that got through behind a lost answer is there already (409).
            for attempt in range(_CREATE_ATTEMPTS):
                try:
                    await kube.create(JOBS, job(i), namespace=NAMESPACE)
                    break
                except Conflict:
                    break
                except KubeError as exc:
                    if not exc.transient or attempt == _CREATE_ATTEMPTS - 1:
                        raise
                    retried += 1
                    await asyncio.sleep(min(2.0**attempt, 10.0))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return retried


async def bench(args: argparse.Namespace, clusters: dict[str, LocalCluster],
                kqs: dict[str, BenchKqueue]) -> dict[str, Any]:
    manager = clusters["manager"]
    workers = {n: lc for n, lc in clusters.items() if n != "manager"}
    quota = str(args.workloads)
    for lc in workers.values():
        lc.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
            [*mk.queue_objects(FLAVOR, CQ, quota, []), mk.local_queue(QUEUE, NAMESPACE, CQ)]))
    objs = mk.manager_objects({n: lc.kubeconfig_path for n, lc in workers.items()},
                              KQUEUE_NAMESPACE, config=CONFIG, check=CHECK)
    objs += [*mk.queue_objects(FLAVOR, CQ, quota, [CHECK]), mk.local_queue(QUEUE, NAMESPACE, CQ)]
    manager.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objs))

    apis = {n: await kube_config.new_client_from_config(config_file=str(lc.kubeconfig_path))
            for n, lc in clusters.items()}
    kubes = {n: Kube(api, timeout=120) for n, api in apis.items()}
    try:
        await wait_active(kubes["manager"], len(workers), within=300)

        # The idle control planes' own traffic (and the idle kqueues' polling), per second.
        idle_window = args.idle_window
        before_idle = {n: await asyncio.to_thread(apiserver_requests, lc) for n, lc in clusters.items()}
        await asyncio.sleep(idle_window)
        idle = {n: delta(await asyncio.to_thread(apiserver_requests, lc), before_idle[n])
                for n, lc in clusters.items()}

        runner = Runner(kubes["manager"], {n: kubes[n] for n in workers}, args.workloads)
        stop = asyncio.Event()
        watches = [asyncio.create_task(runner.watch(kubes["manager"], WORKLOADS, runner.on_manager,
                                                    stop))]
        for n in workers:
            watches.append(asyncio.create_task(runner.watch(
                kubes[n], WORKLOADS, lambda obj, now, n=n: runner.on_worker(n, obj, now), stop)))
        await asyncio.sleep(1)  # the watches are open

        assert kqs["manager"].proc is not None
        mpid = kqs["manager"].proc.pid
        wpids = [kq.proc.pid for n, kq in kqs.items() if n != "manager" and kq.proc is not None]
        info_before = run_info()
        api_before = {n: await asyncio.to_thread(apiserver_requests, lc) for n, lc in clusters.items()}
        cpu_before = proc_cpu_seconds(mpid)
        wcpu_before = sum(proc_cpu_seconds(p) for p in wpids)
        t0 = time.monotonic()
        create_retries = await create_jobs(kubes["manager"], args.workloads, args.create_concurrency)
        created = time.monotonic() - t0
        print(f"created {args.workloads} Jobs in {created:.1f}s ({create_retries} creates sent "
              "again)", file=sys.stderr, flush=True)

        load_samples: list[list[float]] = []

        async def progress() -> None:
            while True:
                await asyncio.sleep(30)
                load = [round(x, 2) for x in os.getloadavg()]
                admitted = sum(1 for r in runner.records.values() if r.remote_admitted)
                load_samples.append([round(time.monotonic() - t0), runner.placed, admitted, *load])
                print(f"{time.monotonic() - t0:.0f}s: {runner.placed} of {args.workloads} "
                      f"placed, {admitted} with a copy admitted; load {load}",
                      file=sys.stderr, flush=True)

        reporter = asyncio.create_task(progress())
        timed_out = False
        limit = args.timeout - created
        if args.stop_at is not None:
            # Placement ends by --stop-at less the settling and the stopping, whatever the start-up
            # took (a shared machine's deadline).
            left = (args.stop_at - datetime.now(UTC)).total_seconds() - args.settle - STOP_SECONDS
            limit = min(limit, max(0.0, left))
        try:
            await asyncio.wait_for(runner.done.wait(), timeout=limit)
        except TimeoutError:
            timed_out = True
        reporter.cancel()
        placed_at = time.monotonic() - t0
        print(f"{runner.placed} placed after {placed_at:.1f}s; settling {args.settle:.0f}s",
              file=sys.stderr, flush=True)
        await asyncio.sleep(args.settle)
        wall = time.monotonic() - t0
        cpu = proc_cpu_seconds(mpid) - cpu_before
        wcpu = sum(proc_cpu_seconds(p) for p in wpids) - wcpu_before
        _, peak = proc_memory(mpid)
        api_after = {n: await asyncio.to_thread(apiserver_requests, lc) for n, lc in clusters.items()}
        info_after = run_info()
        rss = rss_by_kind(clusters, kqs)
        stop.set()
        for t in watches:
            t.cancel()
        await asyncio.gather(*watches, return_exceptions=True)

        # Remaining copies on the workers (the losers' should all be gone by now).
        remaining = {}
        for n in workers:
            items = (await kubes[n].request("GET", WORKLOADS.collection_path(NAMESPACE)))[1]["items"]
            remaining[n] = len(items)
    finally:
        for api in apis.values():
            await api.close()

    n = args.workloads
    requests: dict[str, Any] = {}
    for name in clusters:
        d = delta(api_after[name], api_before[name])
        idle_total = sum(idle[name].values()) / idle_window * wall
        total = sum(d.values())
        # The runner's own: the Job creates on the manager (watches end after the count).
        own = n if name == "manager" else 0
        by = {k: int(v) for k, v in d.items()}
        requests[name] = {
            "total": int(total), "idleEstimate": round(idle_total), "runnerOwn": own,
            "perWorkload": round((total - idle_total - own) / n, 2),
            "workloadResourcesPerWorkload": round(workload_requests(by, own) / n, 2),
            "byVerbResource": by,
        }
    worker_per_wl = [requests[w]["workloadResourcesPerWorkload"] for w in workers]
    latencies = [min(r.remote_admitted.values()) - r.quota_reserved
                 for r in runner.records.values()
                 if r.quota_reserved is not None and r.remote_admitted]
    named = [r.cluster_named - r.quota_reserved for r in runner.records.values()
             if r.quota_reserved is not None and r.cluster_named is not None]
    winners: dict[str, int] = {}
    for r in runner.records.values():
        if r.cluster_name:
            winners[r.cluster_name] = winners.get(r.cluster_name, 0) + 1
    return {
        "command": " ".join(sys.argv),
        "workers": len(workers), "workloads": n,
        "workerComponents": "kube-apiserver on a shared etcd (own --etcd-prefix) + kqueue",
        "managerComponents": "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok + kqueue",
        "before": info_before, "after": info_after,
        "createSeconds": round(created, 1),
        "createRetries": create_retries,
        "placedSeconds": round(placed_at, 1), "timedOut": timed_out, "placed": runner.placed,
        "placementLimitSeconds": round(limit + created, 1),
        "wallSeconds": round(wall, 1),
        "dispatchLatencySeconds": percentiles(latencies),
        "quotaReservedToClusterNameSeconds": percentiles(named),
        "placedPerWorker": dict(sorted(winners.items())),
        "remainingWorkerCopies": remaining,
        "managerKqueue": {"cpuSeconds": round(cpu, 1), "peakRssMiB": peak // 2**20},
        # [seconds after the first create, placed, with a copy admitted, load 1/5/15 min]
        "progressSamples": load_samples,
        "managerRemoteWriteFailures": remote_write_failures(kqs["manager"].log_path),
        "managerRemoteWriteCauses": remote_write_causes(kqs["manager"].log_path),
        "workerKqueuesCpuSeconds": round(wcpu, 1),
        "rssMiBByKind": rss,
        # On WORKLOAD_RESOURCES; "requests" also has every count and the idle-rate estimate.
        "requestsPerWorkload": {
            "manager": requests["manager"]["workloadResourcesPerWorkload"],
            "workersSum": round(sum(worker_per_wl), 2),
            "workerMin": min(worker_per_wl), "workerMax": max(worker_per_wl),
        },
        "requests": requests,
    }


# What stopping eleven kqueues and control planes takes (allowed for by --stop-at).
STOP_SECONDS = 60.0


def _utc(text: str) -> datetime:
    """Today's ``HH:MM`` (UTC)."""
    try:
        hour, minute = (int(x) for x in text.split(":"))
        return datetime.now(UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--stop-at {text!r}: allowed: HH:MM (UTC)") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--qps", type=int, default=0,
                        help="kqueue's client QPS on every side (0: kqueue's default, 300)")
    parser.add_argument("--burst", type=int, default=0)
    parser.add_argument("--create-concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=3600, help="give up placing after (s)")
    parser.add_argument("--settle", type=float, default=30,
                        help="after the last placement, wait this long before counting (s)")
    parser.add_argument("--idle-window", type=float, default=20)
    parser.add_argument("--stop-at", type=_utc, default=None,
                        help="end by this UTC time (HH:MM): placing stops in time to settle, "
                        "count and stop everything by then")
    parser.add_argument("--workers-nice", type=int, default=0,
                        help="once everything is up, raise the workers' nice value by this much "
                        "(the manager's kqueue keeps the runner's)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.workers < 1 or args.workers > 20:
        parser.error(f"--workers: {args.workers}; allowed: 1 to 20 (a MultiKueueConfig's limit)")

    # SIGTERM (and SIGINT, ignored in a background job) stop it through the clean-up below:
    # the kqueues are not children that die with it.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    bin_dir = build.ensure_binaries()
    started = time.monotonic()
    clusters: dict[str, LocalCluster] = {}
    kqs: dict[str, BenchKqueue] = {}
    try:
        clusters = start_clusters(args.workers, bin_dir)
        print(f"{len(clusters)} control planes up in {time.monotonic() - started:.0f}s",
              file=sys.stderr, flush=True)
        manager = clusters["manager"]
        assert manager.work_dir is not None
        start_kqueues(clusters, manager.work_dir / "kqueue", args, kqs)
        print(f"{len(kqs)} kqueues up after {time.monotonic() - started:.0f}s",
              file=sys.stderr, flush=True)
        if args.workers_nice:
            n = lower_workers(clusters, kqs, args.workers_nice)
            print(f"workers' {n} threads at nice +{args.workers_nice}", file=sys.stderr, flush=True)
        result = asyncio.run(bench(args, clusters, kqs))
        result["workersNice"] = args.workers_nice
        result["startSeconds"] = round(time.monotonic() - started - result["wallSeconds"], 1)
    finally:
        for kq in kqs.values():
            kq.stop()
        # Workers first: their API servers use the first worker's etcd.
        for name in reversed(list(clusters)):
            clusters[name].stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    summary = {k: v for k, v in result.items() if k != "requests"}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
