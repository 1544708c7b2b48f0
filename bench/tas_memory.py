"""The controller's memory with many Nodes and bound Pods (topology-aware scheduling's informers).

    python bench/tas_memory.py [--steps 0:0,5000:0,5000:50000] [--out bench/results/tas_memory.json]

A fresh local control plane. For each step ``nodes:pods`` the Node and Pod objects are topped
up to that many, then ``kqueue run`` starts cold and the time until ``/readyz`` answers 200 (every
informer has listed and synced, the Nodes and bound Pods included) is the initial list; the
resident set size (VmRSS) 10 s later is the steady figure and VmHWM the peak.

The Nodes are API objects only: labels ``block``/``rack``/``hostname`` (64 nodes a rack, 10
racks a block) and allocatable of 96 cpu / 1 TiB memory / 110 pods, a Ready condition in their
status; nothing runs them (kwok only manages the local cluster's own annotated nodes). The Pods
are created with ``spec.nodeName`` set (bound, so the bound-pod informer keeps them), one
container asking for 1 cpu and 1 GiB, not managed by kqueue; nothing runs them either. Webhooks
are removed so that the creates do not wait on the controller being measured.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from bench.e2e_workloads import (  # noqa: E402
    BenchKqueue,
    proc_cpu_seconds,
    proc_memory,
    run_info,
)
from bench.memory import webhookless_kqueue  # noqa: E402
from kqueue.controller.kube import Kube  # noqa: E402
from kqueue.controller.resources import NAMESPACES, NODES, PODS  # noqa: E402
from kqueue.localcluster.cluster import LocalCluster  # noqa: E402

NS = "tasmem"
NODES_PER_RACK = 64
RACKS_PER_BLOCK = 10


def node(i: int) -> dict[str, Any]:
    rack = i // NODES_PER_RACK
    name = f"tas-node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "cloud.example.com/block": f"b{rack // RACKS_PER_BLOCK}",
                "cloud.example.com/rack": f"r{rack}",
                "kubernetes.io/hostname": name,
            },
        },
        "status": {
            "allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110"},
            "capacity": {"cpu": "96", "memory": "1Ti", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(i: int, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{i:06d}", "namespace": NS, "labels": {"app": "filler"}},
        "spec": {
            "nodeName": f"tas-node-{i % nodes:05d}",
            "containers": [{
                "name": "c", "image": "registry.example/filler",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            }],
        },
    }


async def create_all(kube: Kube, make: Any, start: int, stop: int, workers: int) -> float:
    t0 = time.monotonic()
    it = iter(range(start, stop))

    async def worker() -> None:
        for i in it:
            obj = make(i)
            ns = obj["metadata"].get("namespace")
            await kube.create(PODS if obj["kind"] == "Pod" else NODES, obj, namespace=ns)

    await asyncio.gather(*(worker() for _ in range(workers)))
    return time.monotonic() - t0


async def measure(kq: BenchKqueue, within: float) -> dict[str, Any]:
    info = run_info()
    t0 = time.monotonic()
    try:
        await asyncio.to_thread(kq.start)  # returns once /readyz is 200, or raises after 60 s
    except RuntimeError:
        if kq.proc is None or kq.proc.poll() is not None:
            raise
    assert kq.proc is not None
    pid = kq.proc.pid
    progress: list[dict[str, float]] = []
    ready = True
    while not await asyncio.to_thread(kq._ready):
        now = time.monotonic() - t0
        if not progress or now - progress[-1]["t"] >= 5:
            progress.append({"t": round(now, 1), "rssBytes": proc_memory(pid)[0],
                             "cpuSeconds": round(proc_cpu_seconds(pid), 1)})
        if now > within:
            ready = False
            break
        await asyncio.sleep(0.2)
    synced = time.monotonic() - t0
    cpu_at_sync = proc_cpu_seconds(pid)
    _, peak_at_sync = proc_memory(pid)
    await asyncio.sleep(10)  # first cycles and status writes
    rss, peak = proc_memory(pid)
    cpu = proc_cpu_seconds(pid)
    result: dict[str, Any] = {"run": info, "ready": ready}
    if not ready:
        result["logTail"] = kq.log_tail()
    await asyncio.to_thread(kq.stop)
    result.update({
        "secondsToReady": round(synced, 1),
        "cpuSecondsToReady": round(cpu_at_sync, 1),
        "peakRssAtReadyBytes": peak_at_sync,
        "rssBytes": rss,
        "peakRssBytes": peak,
        "cpuSecondsSinceStart": round(cpu, 1),
        "progress": progress,
    })
    return result


async def run(steps: list[tuple[int, int]], cluster: LocalCluster, within: float, out: Path,
              workers: int) -> list[dict[str, Any]]:
    kq, kube, api = await webhookless_kqueue(cluster)
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": NS}})
    # Pods need the namespace's default service account (the controller manager makes it).
    for _ in range(60):
        if cluster.request("GET", f"/api/v1/namespaces/{NS}/serviceaccounts/default")[0] == 200:
            break
        await asyncio.sleep(0.5)
    results = []
    have_nodes = have_pods = 0
    for nodes, pods in steps:
        node_s = await create_all(kube, node, have_nodes, nodes, workers)
        have_nodes = max(have_nodes, nodes)
        pod_s = await create_all(kube, functools.partial(pod, nodes=have_nodes), have_pods, pods, workers)
        have_pods = max(have_pods, pods)
        if nodes:
            # Whether the API server kept the status given on create (the engine reads it).
            stored = await kube.get(NODES, "tas-node-00000")
            status_kept = bool((stored.get("status") or {}).get("allocatable"))
        else:
            status_kept = None
        print(f"{nodes} nodes, {pods} pods: created in {node_s:.1f}s + {pod_s:.1f}s", flush=True)
        r = await measure(kq, within)
        r.update({"nodes": nodes, "pods": pods, "nodeCreateSeconds": round(node_s, 1),
                  "podCreateSeconds": round(pod_s, 1),
                  "nodeStatusKeptOnCreate": status_kept})
        print(json.dumps({k: v for k, v in r.items() if k not in ("logTail", "progress")}),
              flush=True)
        results.append(r)
        write(out, results)
    await api.close()
    return results


def write(out: Path, results: list[dict[str, Any]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="0:0,5000:0,5000:50000",
                        help="comma-separated nodes:pods, each a cold start of kqueue")
    parser.add_argument("--within", type=float, default=600,
                        help="give up waiting for /readyz after this long (s)")
    parser.add_argument("--workers", type=int, default=64, help="concurrent creates")
    parser.add_argument("--out", type=Path, default=Path("bench/results/tas_memory.json"))
    args = parser.parse_args()
    steps = [tuple(int(x) for x in s.split(":")) for s in args.steps.split(",")]

    async def go() -> list[dict[str, Any]]:
        with LocalCluster() as cluster:
            return await run(steps, cluster, args.within, args.out, args.workers)  # type: ignore[arg-type]

    results = asyncio.run(go())
    write(args.out, results)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
