"""Kueue and kqueue side by side: memory and CPU with many pending workloads, same API server build.

    python bench/pending_memory.py --kueue-src /tmp/kueue-src --count 50000 \\
        --out bench/results/pending_memory_50k.json

For each system, on a fresh kube-apiserver + etcd (kqueue's local cluster with everything else
stopped, as ``bench/e2e_workloads.py --apiserver-only``; the same binaries for both):

1. the system's own CRDs (Kueue's from the checkout's ``config/components/crd/bases``, at the
   version its Workload CRD stores; kqueue's from this repository, its webhooks removed);
2. one ResourceFlavor, one ClusterQueue whose only quota is 0 cpu (nothing can be admitted), one
   namespace and LocalQueue;
3. ``--count`` Workloads (one pod asking for 1 cpu, priority ``i % 3``, the same objects for
   both but for the API group), created 48 at a time through kqueue's client **before the
   controller starts**, so each figure is a cold start over the whole backlog;
4. the controller starts: ``minimalkueue`` built with ``go build`` from the checkout, at its
   built-in client settings, or ``kqueue run`` at ``--kqueue-qps``/``--kqueue-burst`` (default:
   kqueue's defaults, 300/500 per resource type, Kueue v0.19's);
5. the ClusterQueue's ``status.pendingWorkloads`` (both systems count active plus inadmissible
   workloads there) is read once a second until it shows them all; then ``--hold`` seconds more;
6. from /proc: peak RSS (VmHWM), current RSS (VmRSS) and CPU seconds of the controller since it
   started; the API server's request counts by verb and resource over steps 4 and 5.

Runs alternate Kueue, kqueue (``--runs`` times). The result has every run, the medians' ratios
(kqueue / Kueue) and the load average around each run. Not a test: the figures depend on the
machine; nothing here runs in ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes_asyncio import config as kube_config  # noqa: E402

from bench.e2e_workloads import (  # noqa: E402
    apiserver_only,
    apiserver_requests,
    delta,
    proc_cpu_seconds,
    proc_memory,
    profile,
    run_info,
)
from bench.memory import create_range, webhookless_kqueue  # noqa: E402
from bench.memory import workload as kqueue_workload  # noqa: E402
from bench.side_by_side import find_binary, go_build, source_commit  # noqa: E402
from kqueue.controller.kube import Kube, KubeError  # noqa: E402
from kqueue.controller.resources import (  # noqa: E402
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Resource,
)
from kqueue.localcluster.cluster import LocalCluster  # noqa: E402

NS = "mem"  # namespace, LocalQueue and ClusterQueue (as bench/memory.py)
FLAVOR = "rf"
KUEUE_GROUP = "kueue.x-k8s.io"
Obj = dict[str, Any]


@dataclass(frozen=True)
class Api:
    """Where one system's kinds live and how its Workloads look."""

    flavors: Resource
    cluster_queues: Resource
    local_queues: Resource
    workloads: Resource
    workload: Callable[[int], Obj]

    @property
    def api_version(self) -> str:
        return self.workloads.api_version


KQUEUE_API = Api(RESOURCE_FLAVORS, CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS, kqueue_workload)


def kueue_storage_version(src: Path) -> str:
    """The version Kueue's Workload CRD stores (v1beta2 at the time of writing)."""
    crd = yaml.safe_load((kueue_crd_dir(src) / f"{KUEUE_GROUP}_workloads.yaml").read_text())
    return str(next(v["name"] for v in crd["spec"]["versions"] if v.get("storage")))


def kueue_crd_dir(src: Path) -> Path:
    return src / "config" / "components" / "crd" / "bases"


def kueue_api(version: str) -> Api:
    def res(plural: str, namespaced: bool) -> Resource:
        return Resource(KUEUE_GROUP, version, plural, namespaced=namespaced)

    def workload(i: int) -> Obj:
        # What Kueue's runner's generator builds (utiltesting MakeWorkload + Request): one pod
        # set "main", one container "c", restartPolicy Never; the same request and priority as
        # kqueue's Workloads here.
        doc = kqueue_workload(i)
        doc["apiVersion"] = f"{KUEUE_GROUP}/{version}"
        doc["spec"]["podSets"][0]["template"]["spec"]["restartPolicy"] = "Never"
        return doc

    return Api(
        res("resourceflavors", False), res("clusterqueues", False), res("localqueues", True),
        res("workloads", True), workload,
    )


def queue_objects(api: Api) -> list[tuple[Resource, Obj]]:
    """ResourceFlavor, ClusterQueue (0 cpu: nothing fits), Namespace, LocalQueue; the same
    spec fields in both APIs."""
    v = api.api_version
    return [
        (api.flavors, {"apiVersion": v, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}),
        (api.cluster_queues, {
            "apiVersion": v, "kind": "ClusterQueue", "metadata": {"name": NS},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": "0"}]}],
            }]},
        }),
        (NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        (api.local_queues, {
            "apiVersion": v, "kind": "LocalQueue", "metadata": {"name": NS, "namespace": NS},
            "spec": {"clusterQueue": NS},
        }),
    ]


def install_kueue_crds(cluster: LocalCluster, src: Path) -> None:
    files = sorted(kueue_crd_dir(src).glob("*.yaml"))
    names = [f"crd/{yaml.safe_load(p.read_text())['metadata']['name']}" for p in files]
    # Server-side: Kueue's CRDs are too large for the last-applied annotation.
    cluster.kubectl("apply", "--server-side", "--force-conflicts", *(f"--filename={p}" for p in files))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)


# -- the controllers ------------------------------------------------------------------------------


@dataclass
class Controller:
    """A controller process to start after the creates: ``start`` returns its pid once it runs
    (not necessarily ready), ``stop`` ends it, ``log_tail`` for a run that did not complete."""

    name: str
    client: str
    start: Callable[[], Awaitable[int]]
    stop: Callable[[], Awaitable[None]]
    log_tail: Callable[[], str]
    info: dict[str, Any] = field(default_factory=dict)


def minimalkueue(binary: Path, cluster: LocalCluster, work: Path) -> Controller:
    state: dict[str, subprocess.Popen[bytes]] = {}
    log_path = work / "minimalkueue.log"

    def spawn() -> int:
        with log_path.open("wb") as log:
            # Its own defaults (logs at error level, no metrics server), as the runner starts it
            # but for --zap-log-level: the runner's --withLogs raises the level to 2.
            state["proc"] = subprocess.Popen(
                [str(binary), f"--kubeconfig={cluster.kubeconfig_path}"],
                stdout=log, stderr=subprocess.STDOUT, cwd=work,
            )
        return state["proc"].pid

    async def start() -> int:
        return await asyncio.to_thread(spawn)

    async def stop() -> None:
        proc = state.get("proc")
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)  # as the runner stops it
        try:
            await asyncio.to_thread(proc.wait, 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait, 10)

    def log_tail() -> str:
        with contextlib.suppress(OSError):
            return "\n".join(log_path.read_text(errors="replace").splitlines()[-80:])
        return "(no log)"

    return Controller(
        "kueue", "minimalkueue built-in: QPS 50 / burst 100 per resource type",
        start, stop, log_tail,
    )


async def kqueue_controller(
    cluster: LocalCluster, qps: int, burst: int
) -> tuple[Controller, Kube, Callable[[], Awaitable[None]]]:
    kq, kube, api = await webhookless_kqueue(cluster, qps=qps, burst=burst)
    starting: list[asyncio.Task[None]] = []

    async def start() -> int:
        # kq.start() returns once kqueue is ready, which over a large backlog comes after the
        # initial list: it runs aside so that memory is sampled during the list as for Kueue.
        starting.append(asyncio.create_task(asyncio.to_thread(kq.start)))
        while kq.proc is None:
            if starting[0].done():
                starting[0].result()  # raises why it did not start
            await asyncio.sleep(0.05)
        return kq.proc.pid

    async def stop() -> None:
        await asyncio.to_thread(kq.stop)
        for task in starting:
            # Not ready within the harness's 60 s (possible over 50,000 Workloads on shared
            # cores), or stopped before it was: fine, the ClusterQueue's status is what the run
            # waits for.
            with contextlib.suppress(RuntimeError):
                await task
        starting.clear()

    ctl = Controller(
        "kqueue", f"QPS {qps} / burst {burst} per resource type", start, stop, kq.log_tail,
    )
    return ctl, kube, api.close


# -- one run ----------------------------------------------------------------------------------------


async def wait_for_kinds(kube: Kube, api: Api) -> None:
    """Right after CRDs are established a kind can still answer 404 for a moment."""
    for _ in range(30):
        with contextlib.suppress(KubeError):
            await kube.list(api.local_queues, namespace=NS)
            await kube.list(api.workloads, namespace=NS)
            return
        await asyncio.sleep(1)


async def pending(kube: Kube, api: Api) -> int:
    cq = await kube.get(api.cluster_queues, NS)
    return int((cq.get("status") or {}).get("pendingWorkloads") or 0)


def sample(t0: float, pid: int, seen: int) -> dict[str, float]:
    rss, peak = proc_memory(pid)
    return {
        "t": round(time.monotonic() - t0, 1), "pending": seen, "rssBytes": rss,
        "peakRssBytes": peak, "cpuSeconds": round(proc_cpu_seconds(pid), 1),
    }


async def measure(
    cluster: LocalCluster, kube: Kube, api: Api, ctl: Controller, count: int, hold: float,
    within: float, profile_out: Path | None = None,
) -> dict[str, Any]:
    """Start the controller over the backlog and wait until its ClusterQueue shows ``count``
    pending; hold; read /proc. Gives up after ``within`` s with what it reached. With
    ``profile_out``, py-spy records the controller from its start until all are seen."""
    load_before = os.getloadavg()
    requests_before = await asyncio.to_thread(apiserver_requests, cluster)
    t0 = time.monotonic()
    pid = await ctl.start()
    profiling = (
        asyncio.create_task(profile(pid, within, 0, profile_out)) if profile_out else None
    )
    progress: list[dict[str, float]] = []
    polls = 0
    seen = 0
    completed = False
    while time.monotonic() - t0 < within:
        polls += 1
        with contextlib.suppress(KubeError):
            seen = await pending(kube, api)
        if seen >= count:
            completed = True
            break
        if not progress or time.monotonic() - t0 - progress[-1]["t"] >= 5:
            progress.append(sample(t0, pid, seen))
        await asyncio.sleep(1)
    seconds_to_see = time.monotonic() - t0
    if profiling is not None:
        profiling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await profiling
    if completed:
        # Let the first cycles and status writes go on over the backlog, sampling as before.
        until = time.monotonic() + hold
        while time.monotonic() < until:
            progress.append(sample(t0, pid, seen))
            await asyncio.sleep(min(5.0, max(0.0, until - time.monotonic())))
    rss, peak = proc_memory(pid)
    cpu = proc_cpu_seconds(pid)
    requests = delta(await asyncio.to_thread(apiserver_requests, cluster), requests_before)
    result: dict[str, Any] = {
        "system": ctl.name,
        "client": ctl.client,
        "completed": completed,
        "pendingSeen": seen,
        "secondsToSeePending": round(seconds_to_see, 1) if completed else None,
        "holdSeconds": hold if completed else 0,
        "peakRssBytes": peak,
        "rssBytes": rss,
        "peakRssMiB": round(peak / 2**20),
        "rssMiB": round(rss / 2**20),
        "cpuSeconds": round(cpu, 1),
        "apiserverRequests": {
            "total": sum(requests.values()),
            "benchmarkPolls": polls,  # GET clusterqueues, included in the total
            "byVerbResource": requests,
        },
        "progress": progress,
    }
    if not completed:
        result["logTail"] = ctl.log_tail()
    await ctl.stop()
    result["loadAverage"] = {"before": _load(load_before), "after": _load(os.getloadavg())}
    return result


async def one_run(
    system: str, args: argparse.Namespace, minimal: Path | None, kueue_version: str | None
) -> dict[str, Any]:
    with LocalCluster() as cluster:
        assert cluster.work_dir is not None
        await asyncio.to_thread(apiserver_only, cluster)
        close: Callable[[], Awaitable[None]]
        if system == "kqueue":
            api = KQUEUE_API
            ctl, kube, close = await kqueue_controller(cluster, args.kqueue_qps, args.kqueue_burst)
        else:
            assert minimal is not None and kueue_version is not None
            api = kueue_api(kueue_version)
            await asyncio.to_thread(install_kueue_crds, cluster, args.kueue_src)
            client = await kube_config.new_client_from_config(
                config_file=str(cluster.kubeconfig_path)
            )
            kube, close = Kube(client, timeout=120), client.close
            ctl = minimalkueue(minimal, cluster, cluster.work_dir)
        try:
            await wait_for_kinds(kube, api)
            for resource, doc in queue_objects(api):
                ns = doc["metadata"].get("namespace")
                await kube.create(resource, doc, namespace=ns)
            took = await create_range(
                kube, 0, args.count, args.workers, build=api.workload, resource=api.workloads,
            )
            print(f"{system}: created {args.count} workloads in {took:.1f}s", file=sys.stderr)
            prof = args.profile.with_suffix(f".{system}.txt") if args.profile else None
            r = await measure(
                cluster, kube, api, ctl, args.count, args.hold, args.within, prof
            )
        finally:
            await ctl.stop()
            await close()
        r["createSeconds"] = round(took, 1)
        r["workloadApiVersion"] = api.api_version
        return r


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("peakRssMiB", "rssMiB", "cpuSeconds", "secondsToSeePending", "createSeconds"):
        got: dict[str, float | None] = {}
        for system in ("kqueue", "kueue"):
            vals = [r[key] for r in runs if r["system"] == system and r[key] is not None]
            got[system] = statistics.median(vals) if vals else None
        a, b = got["kqueue"], got["kueue"]
        out[key] = {**got, "ratio": round(a / b, 2) if a is not None and b else None}
    return out


def _load(avg: tuple[float, float, float]) -> list[float]:
    return [round(x, 2) for x in avg]


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kueue-src", type=Path, required=True, help="a Kueue source checkout")
    parser.add_argument("--count", type=int, default=50_000, help="pending workloads")
    parser.add_argument("--runs", type=int, default=1, help="runs of each, alternating")
    parser.add_argument("--systems", default="kueue,kqueue", help="which, in this order")
    parser.add_argument("--hold", type=float, default=10, help="seconds after all are seen")
    parser.add_argument("--within", type=float, default=900,
                        help="give up if the ClusterQueue does not show them all by then (s)")
    parser.add_argument("--workers", type=int, default=48, help="concurrent creates")
    parser.add_argument("--kqueue-qps", type=int, default=300, help="kqueue's default: 300")
    parser.add_argument("--kqueue-burst", type=int, default=500, help="kqueue's default: 500")
    parser.add_argument("--minimalkueue", type=Path,
                        help="an already built minimalkueue (default: go build it from the checkout)")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/pending-memory"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", type=Path,
                        help="py-spy raw stacks from start until all are seen, to PROFILE.SYSTEM.txt")
    args = parser.parse_args()
    args.kueue_src = args.kueue_src.resolve()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - {"kueue", "kqueue"}
    if unknown:
        parser.error(f"--systems: {sorted(unknown)} unknown; allowed: kueue, kqueue")

    minimal = kueue_version = None
    if "kueue" in systems:
        minimal = args.minimalkueue or go_build(args.kueue_src, args.work_dir / "bin", "minimalkueue")
        kueue_version = kueue_storage_version(args.kueue_src)
    result: dict[str, Any] = {
        "count": args.count,
        "controllerStarted": "after the Workloads were created",
        "holdSeconds": args.hold,
        "kqueue": run_info(),
        "kueueCommit": source_commit(args.kueue_src) if "kueue" in systems else None,
        "apiserver": str(find_binary("kube-apiserver")),
        "etcd": str(find_binary("etcd")),
        "uptime": {"before": _uptime()},
        "runs": [],
    }

    def write() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")

    for i in range(args.runs):
        for system in systems:
            print(f"run {i + 1}/{args.runs}: {system} ({_uptime()})", file=sys.stderr)
            r = asyncio.run(one_run(system, args, minimal, kueue_version))
            result["runs"].append(r)
            print(json.dumps({k: v for k, v in r.items() if k not in ("progress", "logTail")}),
                  file=sys.stderr)
            write()  # what is measured so far, should a later run fail
    result["uptime"]["after"] = _uptime()
    result["medians"] = medians(result["runs"])
    write()
    print(json.dumps(result["medians"], indent=1))


if __name__ == "__main__":
    main()
