"""Jobs end to end: from Job creation to all pods released and bound, on the local cluster.

    python bench/e2e_jobs.py [--sizes 5,20,100] [--jobs 30] [--rate 10] [--qps 50]

A fresh local control plane with kwok nodes large enough that nodes never limit (4 nodes of
1,000 pods and 1,000 cpu), one ClusterQueue with ample quota, and ``kqueue run`` (webhooks
included) as the controller. For each size, ``--jobs`` Jobs of that many pods are created at
``--rate`` per second; the runner watches the pods and records, per Job, when all its pods were
released (no scheduling gate left) and when all were bound to a node (``spec.nodeName``), both
from the Job's create response. Pods complete 5 s after they start. kqueue's
``kqueue_admitted_workloads_total`` is sampled every 0.5 s for the admission throughput curve.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes_asyncio import config as kube_config  # noqa: E402

from bench.e2e_workloads import (  # noqa: E402
    BenchKqueue,
    kqueue_admitted_total,
    proc_cpu_seconds,
    proc_memory,
    run_info,
)
from kqueue.api.v1alpha1 import constants as c  # noqa: E402
from kqueue.controller.kube import Kube  # noqa: E402
from kqueue.controller.resources import (  # noqa: E402
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_FLAVORS,
)
from kqueue.localcluster.cluster import LocalCluster  # noqa: E402
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL, FakeNode  # noqa: E402
from tests.controller_e2e.harness import install_crds, job  # noqa: E402

NS = "jobs"
NODES = tuple(
    FakeNode(
        name=f"kwok-bench-{i}",
        labels={INSTANCE_TYPE_LABEL: "on-demand"},
        allocatable={"cpu": "1000", "memory": "4Ti", "pods": "1000"},
    )
    for i in range(4)
)


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return round(s[k], 3)


class Tracker:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.created: dict[str, float] = {}
        self.size: dict[str, int] = {}
        self.released_pods: dict[str, set[str]] = {}
        self.bound_pods: dict[str, set[str]] = {}
        self.all_released: dict[str, float] = {}
        self.all_bound: dict[str, float] = {}
        self.changed = asyncio.Event()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def observe(self, pod: dict[str, Any]) -> None:
        job_name = (pod["metadata"].get("labels") or {}).get("job-name")
        if job_name is None or job_name not in self.size:
            return
        name = pod["metadata"]["name"]
        spec = pod.get("spec") or {}
        now = self.now()
        if not spec.get("schedulingGates"):
            s = self.released_pods.setdefault(job_name, set())
            s.add(name)
            if len(s) >= self.size[job_name] and job_name not in self.all_released:
                self.all_released[job_name] = now
        if spec.get("nodeName"):
            s = self.bound_pods.setdefault(job_name, set())
            s.add(name)
            if len(s) >= self.size[job_name] and job_name not in self.all_bound:
                self.all_bound[job_name] = now
                self.changed.set()

    async def watch(self, kube: Kube, rv: str) -> None:
        while True:
            response: aiohttp.ClientResponse = await kube.api.call_api(
                PODS.collection_path(NS), "GET",
                query_params=[("watch", "1"), ("resourceVersion", rv), ("timeoutSeconds", "3600")],
                header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            )
            async with response:
                async for line in response.content:
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self.observe(obj)


async def sampler(kq: BenchKqueue, tr: Tracker, series: list[dict[str, float]]) -> None:
    assert kq.proc is not None
    while True:
        admitted = await asyncio.to_thread(kqueue_admitted_total, kq)
        series.append({
            "t": round(tr.now(), 2), "admittedTotal": admitted,
            "cpuSeconds": round(proc_cpu_seconds(kq.proc.pid), 2),
            "rssBytes": proc_memory(kq.proc.pid)[0],
        })
        await asyncio.sleep(0.5)


async def run(args: argparse.Namespace, cluster: LocalCluster) -> dict[str, Any]:
    assert cluster.work_dir is not None
    work = cluster.work_dir / "kqueue"
    work.mkdir(parents=True, exist_ok=True)
    install_crds(cluster)
    kq = BenchKqueue(cluster, work, qps=args.qps, burst=args.burst)
    kq.setup()
    await asyncio.to_thread(kq.start)
    api = await kube_config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    kube = Kube(api, timeout=120)
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": NS}})
    await kube.create(RESOURCE_FLAVORS, {
        "apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    await kube.create(CLUSTER_QUEUES, {
        "apiVersion": c.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": NS},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "default", "resources": [
                {"name": "cpu", "nominalQuota": "100000"},
                {"name": "memory", "nominalQuota": "100Ti"}]}],
        }]},
    })
    await kube.create(LOCAL_QUEUES, {
        "apiVersion": c.API_VERSION, "kind": "LocalQueue",
        "metadata": {"name": NS, "namespace": NS}, "spec": {"clusterQueue": NS}},
        namespace=NS)
    await asyncio.sleep(3)  # the ClusterQueue becomes active

    tr = Tracker()
    rv = (await kube.request("GET", PODS.collection_path(NS)))[1]["metadata"]["resourceVersion"]
    watcher = asyncio.create_task(tr.watch(kube, rv))
    series: list[dict[str, float]] = []
    sampling = asyncio.create_task(sampler(kq, tr, series))
    assert kq.proc is not None
    cpu0 = proc_cpu_seconds(kq.proc.pid)
    info_before = run_info()
    phases: list[dict[str, Any]] = []
    for size in args.sizes:
        names = [f"job-{size}-{i:03d}" for i in range(args.jobs)]
        phase_start = tr.now()

        async def create(i: int, name: str, start: float, size: int = size) -> None:
            await asyncio.sleep(max(0.0, start + i / args.rate - tr.now()))
            tr.size[name] = size
            body = job(name, NS, NS, count=size, cpu="10m", complete_after="5s")
            sent = tr.now()
            await kube.create(JOBS, body, namespace=NS)
            tr.created[name] = sent

        await asyncio.gather(*(create(i, n, phase_start) for i, n in enumerate(names)))
        deadline = time.monotonic() + args.timeout
        while not all(n in tr.all_bound for n in names) and time.monotonic() < deadline:
            tr.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tr.changed.wait(), 2)
        released = [tr.all_released[n] - tr.created[n] for n in names if n in tr.all_released]
        bound = [tr.all_bound[n] - tr.created[n] for n in names if n in tr.all_bound]
        phase = {
            "podsPerJob": size,
            "jobs": len(names),
            "start": round(phase_start, 2),
            "end": round(tr.now(), 2),
            "allReleased": len(released),
            "allBound": len(bound),
            "releasedSeconds": {f"p{p}": percentile(released, p) for p in (50, 95, 99)},
            "boundSeconds": {f"p{p}": percentile(bound, p) for p in (50, 95, 99)},
            "releasedMeanSeconds": round(statistics.fmean(released), 3) if released else None,
        }
        print(json.dumps(phase), flush=True)
        phases.append(phase)
        await asyncio.sleep(8)  # pods complete, quota is released, before the next size
    cpu = proc_cpu_seconds(kq.proc.pid) - cpu0
    peak = proc_memory(kq.proc.pid)[1]
    for t in (watcher, sampling):
        t.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
    await api.close()
    await asyncio.to_thread(kq.stop)
    return {
        "qps": args.qps, "burst": args.burst, "rate": args.rate,
        "run": {"before": info_before, "after": run_info()}, "phases": phases,
        "controllerCpuSeconds": round(cpu, 1), "controllerPeakRssBytes": peak,
        "series": series,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result["series"]
    t = [x["t"] for x in s]
    total = [x["admittedTotal"] for x in s]
    rate = [0.0] + [
        (total[i] - total[i - 1]) / max(t[i] - t[i - 1], 1e-6) for i in range(1, len(s))
    ]
    # A 2 s moving window: the counter is sampled every 0.5 s.
    smooth = [statistics.fmean(rate[max(0, i - 3): i + 1]) for i in range(len(rate))]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    ax.plot(t, smooth, label="admitted workloads/s (2 s window)")
    ax2 = ax.twinx()
    ax2.plot(t, total, color="C2", alpha=0.6, label="kqueue_admitted_workloads_total")
    for ph in result["phases"]:
        ax.axvspan(ph["start"], ph["end"], alpha=0.08, color="C1")
        ax.text(ph["start"], max(smooth or [1]) * 0.95, f" {ph['podsPerJob']} pods/Job", fontsize=8)
    ax.set(xlabel="seconds", ylabel="workloads/s",
           title=f"Jobs at {result['rate']}/s, client QPS {result['qps'] or 'unthrottled'}")
    ax2.set_ylabel("admitted (cumulative)")
    fig.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5,20,100")
    parser.add_argument("--jobs", type=int, default=30, help="Jobs per size")
    parser.add_argument("--rate", type=float, default=10, help="Jobs created per second")
    parser.add_argument("--qps", type=int, default=50)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300, help="per size (s)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/e2e_jobs.json"))
    parser.add_argument("--plot", type=Path, default=Path("docs/img/e2e_jobs_admission.png"))
    args = parser.parse_args()
    args.sizes = [int(x) for x in args.sizes.split(",")]

    async def go() -> dict[str, Any]:
        with LocalCluster(nodes=NODES) as cluster:
            return await run(args, cluster)

    result = asyncio.run(go())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.plot)
    print(json.dumps({k: v for k, v in result.items() if k != "series"}, indent=1))


if __name__ == "__main__":
    main()
