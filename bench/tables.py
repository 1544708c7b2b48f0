"""Markdown tables of the results under bench/results/, as docs/benchmarks.md shows them.

    python bench/tables.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
KUEUE = {"wall": 351, "small": 215, "medium": 77, "large": 16.5, "min_usage": 55.9}


def _load(name: str) -> Any:
    p = RESULTS / name
    return json.loads(p.read_text()) if p.exists() else None


def sim() -> None:
    runs = _load("sim_shapes.json") or []
    print("| shape | CQs | workloads | simulated wall (s) | cycles | decisions | CPU s | "
          "decisions/CPU s | small (s) | medium (s) | large (s) | min CQ usage | evictions |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        k = r["workloadClasses"]
        ev = sum(v["evictions"] for v in k.values())
        print(f"| {r['shape']} | {r['clusterQueues']} | {r['workloads']:,} | "
              f"{r['wallSeconds']:.1f} | {r['cycles']:,} | {r['decisions']:,} | "
              f"{r['cpuSeconds']:.1f} | {r['decisionsPerSecond']:,} | "
              + " | ".join(f"{k[c]['averageTimeToAdmissionMs'] / 1000:.1f}"
                           for c in ("small", "medium", "large"))
              + f" | {r['minClusterQueueUsagePercent']:.1f}% | {ev:,} |")


def e2e() -> None:
    names = [
        "e2e_baseline_x0.2_qps50.json", "e2e_baseline_x0.2_unthrottled.json",
        "e2e_baseline_qps50.json", "e2e_baseline_unthrottled.json",
    ]
    print("| run | workloads | wall (s) | admitted / finished | small (s) | medium (s) | "
          "large (s) | min CQ usage | kqueue API req / admitted wl | controller CPU s "
          "(% of a core) | peak RSS (MiB) | runner create lag (s, small) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| Kueue published baseline | 15,000 | {KUEUE['wall']} (threshold 425) | | "
          f"{KUEUE['small']} | {KUEUE['medium']} | {KUEUE['large']} | "
          f"{KUEUE['min_usage']}% (threshold 50%) | | | | |")
    for n in names:
        r = _load(n)
        if r is None:
            continue
        qps = f"QPS {r['qps']}/burst {r['burst']}" if r["qps"] > 0 else "unthrottled"
        k = r["classes"]
        timed = " (timed out)" if r["timedOut"] else ""
        a = r["apiserverRequests"]
        ctl = r["controller"]
        print(f"| x{r['scale']:g}, {qps} | {r['workloads']:,} | {r['wallSeconds']}{timed} | "
              f"{r['admitted']:,} / {r['finished']:,} | "
              + " | ".join(str(k[c]["averageTimeToAdmissionSeconds"])
                           for c in ("small", "medium", "large"))
              + f" | {r['minClusterQueueUsagePercent']}% | {a['kqueuePerAdmittedWorkload']} | "
              f"{ctl['cpuSeconds']} ({ctl['cpuPercentOfOneCore']}%) | "
              f"{ctl['peakRssBytes'] / 2**20:.0f} | {k['small']['averageCreateLagSeconds']} |")


def requests() -> None:
    for n in sorted(RESULTS.glob("e2e_baseline*.json")):
        r = json.loads(n.read_text())
        a = r["apiserverRequests"]
        print(f"\n`{n.name}`: total {a['total']:,.0f}, runner {a['runner']:,}, idle control "
              f"plane {a['idleControlPlanePerSecond']}/s, kqueue ≈ {a['kqueueEstimate']:,}")
        print("| verb resource | requests |\n|---|---:|")
        for key, v in a["byVerbResource"].items():
            print(f"| {key} | {v:,.0f} |")


def jobs() -> None:
    r = _load("e2e_jobs.json")
    if r is None:
        return
    print("| pods/Job | Jobs | released p50 / p95 / p99 (s) | bound p50 / p95 / p99 (s) |")
    print("|---:|---:|---|---|")
    for ph in r["phases"]:
        rel, bnd = ph["releasedSeconds"], ph["boundSeconds"]
        print(f"| {ph['podsPerJob']} | {ph['jobs']} ({ph['allBound']} all bound) | "
              f"{rel['p50']} / {rel['p95']} / {rel['p99']} | "
              f"{bnd['p50']} / {bnd['p95']} / {bnd['p99']} |")
    print(f"\ncontroller CPU {r['controllerCpuSeconds']} s, "
          f"peak RSS {r['controllerPeakRssBytes'] / 2**20:.0f} MiB")


def memory() -> None:
    rs = _load("memory.json")
    if rs is None:
        return
    print("| pending workloads | RSS (MiB) | peak RSS (MiB) | s until all seen pending |")
    print("|---:|---:|---:|---:|")
    for r in rs:
        print(f"| {r['pending']:,} | {r['rssBytes'] / 2**20:.0f} | "
              f"{r['peakRssBytes'] / 2**20:.0f} | {r['secondsToSeePending']} |")


def engine() -> None:
    r = _load("engine_cycle.json")
    if r is None:
        return
    for key, title in (("clusterQueues", "ClusterQueues vary"), ("pending", "pending varies")):
        print(f"\n{title}:\n\n| ClusterQueues | pending | heads | ms/cycle (CPU) | µs/head |")
        print("|---:|---:|---:|---:|---:|")
        for x in r[key]:
            print(f"| {x['clusterQueues']:,} | {x['pending']:,} | {x['heads']:,} | "
                  f"{x['msPerCycle']:.1f} | {x['usPerHead']:.0f} |")


if __name__ == "__main__":
    for f in (sim, engine, e2e, requests, jobs, memory):
        print(f"\n## {f.__name__}\n")
        f()
