"""Markdown tables of the results under bench/results/, as docs/benchmarks.md shows them.

    python bench/tables.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
BEFORE = RESULTS / "before"  # the same runs on the controller before its performance changes
KUEUE = {"wall": 351, "small": 215, "medium": 77, "large": 16.5, "min_usage": 55.9}


def _load(name: str, where: Path = RESULTS) -> Any:
    p = where / name
    return json.loads(p.read_text()) if p.exists() else None


def _commit(r: dict[str, Any]) -> str:
    """The commit a result ran on ("before" for the first results, which did not record it)."""
    run = r.get("run") or {}
    return str(run.get("before", run).get("commit", "before"))


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
    rows = [(r, n) for n in names for r in (_load(n, BEFORE), _load(n)) if r is not None]
    for r, _ in rows:
        qps = f"QPS {r['qps']}/burst {r['burst']}" if r["qps"] > 0 else "unthrottled"
        k = r["classes"]
        timed = " (timed out)" if r["timedOut"] else ""
        a = r["apiserverRequests"]
        ctl = r["controller"]
        print(f"| x{r['scale']:g}, {qps}, {_commit(r)} | {r['workloads']:,} | "
              f"{r['wallSeconds']}{timed} | "
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
            if key.startswith("WATCH") and "workloads" not in key:
                continue  # the control plane's own watches, re-established now and then
            print(f"| {key} | {v:,.0f} |")


def jobs() -> None:
    print("| client | code | pods/Job | Jobs | released p50 / p95 / p99 (s) | "
          "bound p50 / p95 / p99 (s) | phase (s) |")
    print("|---|---|---:|---:|---|---|---:|")
    notes = []
    for n in ("e2e_jobs.json", "e2e_jobs_unthrottled.json"):
        for r in (_load(n, BEFORE), _load(n)):
            if r is None:
                continue
            client = f"QPS {r['qps']} / burst {r['burst']}" if r["qps"] > 0 else "unthrottled"
            for ph in r["phases"]:
                rel, bnd = ph["releasedSeconds"], ph["boundSeconds"]
                print(f"| {client} | {_commit(r)} | {ph['podsPerJob']} | {ph['jobs']} "
                      f"({ph['allBound']} all bound) | {rel['p50']} / {rel['p95']} / {rel['p99']} "
                      f"| {bnd['p50']} / {bnd['p95']} / {bnd['p99']} | "
                      f"{ph['end'] - ph['start']:.1f} |")
            notes.append(f"{client}, {_commit(r)}: controller CPU {r['controllerCpuSeconds']} s, "
                         f"peak RSS {r['controllerPeakRssBytes'] / 2**20:.0f} MiB")
    print("\n" + "\n".join(notes))


def memory() -> None:
    print("| code | pending workloads | RSS (MiB) | peak RSS (MiB) | s until all seen pending |")
    print("|---|---:|---:|---:|---:|")
    for where in (BEFORE, RESULTS):
        for r in _load("memory.json", where) or []:
            seen = r["secondsToSeePending"]
            if r.get("completed") is False:
                seen = f"not reached in {seen} ({r['pendingSeen']:,.0f} seen)"
            print(f"| {_commit(r)} | {r['pending']:,} | {r['rssBytes'] / 2**20:.0f} | "
                  f"{r['peakRssBytes'] / 2**20:.0f} | {seen} |")


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
