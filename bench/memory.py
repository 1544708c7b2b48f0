"""The controller's memory with many pending workloads.

    python bench/memory.py [--counts 0,10000,50000] [--out bench/results/memory.json]

A fresh local control plane with one ClusterQueue whose cpu quota is 0, so that every Workload
stays pending (inadmissible). Workloads are created directly (without kqueue's webhooks, so the
creates are not held up by the controller being measured); then ``kqueue run`` starts, and once
its ``kqueue_pending_workloads`` gauge shows all of them the resident set size (VmRSS) and its
peak (VmHWM, which includes the initial list) are read from /proc. kqueue is restarted for each
count, so each figure is a cold start over that backlog.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes_asyncio import config as kube_config  # noqa: E402
from kubernetes_asyncio.client import ApiClient  # noqa: E402

from bench.e2e_workloads import (  # noqa: E402
    BenchKqueue,
    metric_samples,
    proc_cpu_seconds,
    proc_memory,
    run_info,
)
from kqueue.api.v1alpha1 import constants as c  # noqa: E402
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
from tests.controller_e2e.harness import install_crds  # noqa: E402

NS = "mem"


def workload(i: int) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": f"wl-{i:06d}", "namespace": NS},
        "spec": {
            "queueName": NS,
            "priority": i % 3,
            "podSets": [
                {
                    "name": c.DEFAULT_POD_SET_NAME,
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
                        }
                    },
                }
            ],
        },
    }


async def create_range(
    kube: Kube,
    start: int,
    stop: int,
    workers: int = 48,
    *,
    build: Callable[[int], dict[str, Any]] = workload,
    resource: Resource = WORKLOADS,
    namespace: str = NS,
) -> float:
    """Create objects ``build(start)`` .. ``build(stop - 1)``, ``workers`` at a time; seconds taken.

    ``build`` and ``resource`` let another system's Workloads (bench/pending_memory.py: Kueue's)
    be created the same way."""
    t0 = time.monotonic()
    it = iter(range(start, stop))

    async def worker() -> None:
        for i in it:
            await kube.create(resource, build(i), namespace=namespace)

    await asyncio.gather(*(worker() for _ in range(workers)))
    return time.monotonic() - t0


def pending_total(kq: BenchKqueue) -> float:
    try:
        return sum(v for _, v in metric_samples(kq.metrics(), "kqueue_pending_workloads"))
    except OSError:
        return -1


def py_spy_dump(pid: int) -> str:
    """The controller's Python stacks right now (py-spy, from the dev extra)."""
    out = subprocess.run(
        [str(Path(sys.executable).parent / "py-spy"), "dump", "--pid", str(pid)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    return out.stdout + out.stderr


async def measure(kq: BenchKqueue, expected: int, within: float) -> dict[str, Any]:
    """Start kqueue cold and wait until it reports ``expected`` pending (at most ``within`` s).

    If it does not get there, the result says so (``completed`` false) with what it did reach,
    the progress over time, a py-spy dump of the controller and the tail of its log.
    """
    info = run_info()
    t0 = time.monotonic()
    try:
        await asyncio.to_thread(kq.start)
    except RuntimeError:
        # The harness gives readiness 60 s; listing 50,000 Workloads on shared cores takes
        # longer. Still running is fine: the pending gauge below is what is waited for.
        if kq.proc is None or kq.proc.poll() is not None:
            raise
    assert kq.proc is not None
    pid = kq.proc.pid
    progress: list[dict[str, float]] = []
    completed = True
    while (seen := await asyncio.to_thread(pending_total, kq)) < expected:
        now = time.monotonic() - t0
        if not progress or now - progress[-1]["t"] >= 5:
            progress.append({"t": round(now, 1), "pending": seen,
                             "rssBytes": proc_memory(pid)[0],
                             "cpuSeconds": round(proc_cpu_seconds(pid), 1)})
        if now > within:
            completed = False
            break
        await asyncio.sleep(1)
    synced = time.monotonic() - t0
    result: dict[str, Any] = {"pending": expected, "completed": completed, "run": info}
    if completed:
        await asyncio.sleep(10)  # let the first cycles and status writes settle
    else:
        result["pendingSeen"] = seen
        result["pySpyDump"] = await asyncio.to_thread(py_spy_dump, pid)
        result["logTail"] = kq.log_tail()
    rss, peak = proc_memory(pid)
    cpu = proc_cpu_seconds(pid)
    await asyncio.to_thread(kq.stop)
    result.update({
        "secondsToSeePending": round(synced, 1),
        "rssBytes": rss,
        "peakRssBytes": peak,
        "cpuSecondsSinceStart": round(cpu, 1),
        "progress": progress,
    })
    return result


async def webhookless_kqueue(
    cluster: LocalCluster, *, qps: int = 50, burst: int = 100
) -> tuple[BenchKqueue, Kube, ApiClient]:
    """kqueue's CRDs and configuration on ``cluster``, its webhooks removed (the creates must not
    wait for a controller that is not running yet), and a client for the benchmark's creates.
    ``qps``/``burst``: kqueue's ``clientConnection``."""
    assert cluster.work_dir is not None
    work = cluster.work_dir / "kqueue"
    work.mkdir(parents=True, exist_ok=True)
    install_crds(cluster)
    kq = BenchKqueue(cluster, work, qps=qps, burst=burst)
    kq.setup()
    for kind, name in (
        ("mutatingwebhookconfiguration", "kqueue-mutating-webhook-configuration"),
        ("validatingwebhookconfiguration", "kqueue-validating-webhook-configuration"),
    ):
        cluster.kubectl("delete", kind, name, "--ignore-not-found", check=False)
    api = await kube_config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    kube = Kube(api, timeout=120)
    return kq, kube, api


async def run(
    counts: list[int], cluster: LocalCluster, within: float, out: Path
) -> list[dict[str, Any]]:
    kq, kube, api = await webhookless_kqueue(cluster)
    await kube.create(RESOURCE_FLAVORS, {
        "apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "rf"}})
    await kube.create(CLUSTER_QUEUES, {
        "apiVersion": c.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": NS},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "0"}]}],
        }]},
    })
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": NS}})
    # Right after the CRDs are established a kind can still answer 404 or 429 for a moment.
    for _ in range(30):
        with contextlib.suppress(KubeError):
            await kube.list(LOCAL_QUEUES, namespace=NS)
            await kube.list(WORKLOADS, namespace=NS)
            break
        await asyncio.sleep(1)
    await kube.create(LOCAL_QUEUES, {
        "apiVersion": c.API_VERSION, "kind": "LocalQueue",
        "metadata": {"name": NS, "namespace": NS}, "spec": {"clusterQueue": NS}},
        namespace=NS)
    results = []
    have = 0
    for n in counts:
        took = await create_range(kube, have, n)
        print(f"created {n - have} workloads in {took:.1f}s", flush=True)
        have = n
        r = await measure(kq, n, within)
        r["createSeconds"] = round(took, 1)
        print(json.dumps({k: v for k, v in r.items() if k not in ("pySpyDump", "logTail")}),
              flush=True)
        results.append(r)
        write(out, results)  # what is measured so far, should a later count fail
    await api.close()
    return results


def write(out: Path, results: list[dict[str, Any]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="0,10000,50000")
    parser.add_argument("--within", type=float, default=900,
                        help="give up on a count if kqueue does not see it all pending by then (s)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/memory.json"))
    args = parser.parse_args()
    counts = [int(x) for x in args.counts.split(",")]

    async def go() -> list[dict[str, Any]]:
        with LocalCluster() as cluster:
            return await run(counts, cluster, args.within, args.out)

    results = asyncio.run(go())
    write(args.out, results)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
