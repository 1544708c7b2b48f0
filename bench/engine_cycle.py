"""How long one scheduling cycle takes, and what its cost grows with.

    python bench/engine_cycle.py [--quick] [--out FILE.json] [--plot FILE.png]

Builds 1,000 ClusterQueues in 10 cohorts with 50,000 pending workloads and times a cycle; then
varies the number of pending workloads at a fixed number of ClusterQueues (heads), and the number
of ClusterQueues at a fixed number of pending workloads. A cycle considers one head per
ClusterQueue, taken from a heap, so its cost should follow the heads, not the pending workloads.
Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kqueue.engine.engine import Engine
from kqueue.engine.types import (
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    FlavorName,
    FlavorQuotas,
    LabelSelector,
    LocalQueueSpec,
    PodSet,
    PodSetName,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    Workload,
)

START = datetime(2025, 1, 1, tzinfo=UTC)
CPU = ResourceName("cpu")
MEM = ResourceName("memory")
FLAVORS = (FlavorName("on-demand"), FlavorName("spot"))


def build(cluster_queues: int, cohorts: int, pending: int) -> Engine:
    engine = Engine()
    for f in FLAVORS:
        engine.upsert_flavor(ResourceFlavor(f))
    group = ResourceGroup(
        (CPU, MEM),
        tuple(
            FlavorQuotas(f, {CPU: ResourceQuota(8_000), MEM: ResourceQuota(32 * 2**30)})
            for f in FLAVORS
        ),
    )
    for i in range(cluster_queues):
        name = ClusterQueueName(f"cq-{i:04d}")
        engine.upsert_cluster_queue(
            ClusterQueueSpec(
                name,
                cohort=CohortName(f"cohort-{i % cohorts}"),
                resource_groups=(group,),
                namespace_selector=LabelSelector(),
            )
        )
        engine.upsert_local_queue(LocalQueueSpec(f"ns-{i:04d}", "lq", name))
    for j in range(pending):
        i = j % cluster_queues
        engine.upsert_workload(
            Workload(
                namespace=f"ns-{i:04d}",
                name=f"wl-{j:06d}",
                queue_name="lq",
                uid=f"{j:06d}",
                pod_sets=(
                    PodSet(
                        PodSetName("main"),
                        count=1 + j % 3,
                        requests={CPU: 1_000 * (1 + j % 4), MEM: 2**30 * (1 + j % 8)},
                    ),
                ),
                priority=j % 5,
                creation_time=START + timedelta(seconds=j),
            )
        )
    return engine


def time_cycles(engine: Engine, cycles: int) -> tuple[float, int]:
    """CPU seconds of the first cycle, the one that considers every ClusterQueue's head, and
    the heads it considered. Later cycles are not comparable across sizes: the first admits
    until quota runs out and parks what does not fit, so the next ones have few heads left.
    ``cycles`` > 1 repeats the measure on deep copies of the built engine (median).

    CPU time of this process, not wall time: the benchmarks share two cores with other work,
    and a single-threaded cycle's CPU time does not include the time it waited for a core.
    """
    import copy

    times: list[float] = []
    heads = 0
    for c in range(cycles):
        e = engine if c == cycles - 1 else copy.deepcopy(engine)
        t0 = time.process_time()
        result = e.schedule(START + timedelta(days=1))
        times.append(time.process_time() - t0)
        heads = max(heads, result.heads)
    return statistics.median(times), heads


# The scaling curves: ClusterQueues at a fixed backlog, and the backlog at fixed ClusterQueues.
CQ_SIZES = (10, 25, 50, 100, 250, 500, 1_000)
PENDING_SIZES = (1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000)


def _row(cqs: int, pending: int, cycles: int) -> dict[str, float]:
    ms, heads = time_cycles(build(cqs, min(10, cqs), pending), cycles)
    row = {
        "clusterQueues": cqs,
        "pending": pending,
        "heads": heads,
        "msPerCycle": round(1000 * ms, 3),
        "usPerHead": round(1e6 * ms / max(heads, 1), 1),
    }
    print(f"{cqs:>14} {pending:>9} {heads:>6} {1000 * ms:>9.1f} {row['usPerHead']:>8.0f}")
    return row


def plot(result: dict[str, list[dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    cq = result["clusterQueues"]
    a.plot([r["clusterQueues"] for r in cq], [r["msPerCycle"] for r in cq], "o-")
    a.set(xscale="log", yscale="log", xlabel="ClusterQueues (heads)", ylabel="ms per cycle (CPU)",
          title=f"{cq[0]['pending']:,} pending, ClusterQueues vary")
    pe = result["pending"]
    b.plot([r["pending"] for r in pe], [r["msPerCycle"] for r in pe], "o-", color="C1")
    b.set(xscale="log", yscale="log", xlabel="pending workloads", ylabel="ms per cycle (CPU)",
          title=f"{pe[0]['clusterQueues']:,} ClusterQueues, pending varies")
    lo = min(r["msPerCycle"] for r in cq + pe) / 2
    hi = max(r["msPerCycle"] for r in cq + pe) * 2
    for ax in (a, b):
        ax.set_ylim(lo, hi)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--cycles", type=int, default=1, help="first cycles timed per size (median)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    parser.add_argument("--plot", type=Path, help="write the scaling curves as PNG")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    cqs, pending = 1_000 // scale, 50_000 // scale

    t0 = time.perf_counter()
    engine = build(cqs, 10, pending)
    build_s = time.perf_counter() - t0
    print(f"built {cqs} ClusterQueues in 10 cohorts, {pending} pending: {build_s:.2f}s")
    t0 = time.process_time()
    first = engine.schedule(START + timedelta(days=1))
    first_ms = 1000 * (time.process_time() - t0)
    print(
        f"one cycle: {first_ms:.1f} ms CPU "
        f"({first.heads} heads, {len(first.admitted)} admitted, {len(first.pending)} pending)"
    )
    result: dict[str, object] = {
        "first": {
            "clusterQueues": cqs, "pending": pending, "buildSeconds": round(build_s, 2),
            "msPerCycle": round(first_ms, 2), "heads": first.heads,
            "admitted": len(first.admitted),
        }
    }
    del engine

    header = f"{'ClusterQueues':>14} {'pending':>9} {'heads':>6} {'ms/cycle':>9} {'µs/head':>8}"
    print("\npending workloads vary, ClusterQueues (heads) fixed:")
    print(header)
    result["pending"] = [
        _row(cqs, p // scale, args.cycles) for p in PENDING_SIZES if p // scale >= cqs
    ]
    print("\nClusterQueues (heads) vary, pending workloads fixed:")
    print(header)
    result["clusterQueues"] = [
        _row(n // scale, pending, args.cycles) for n in CQ_SIZES if n // scale >= 1
    ]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    if args.plot:
        plot(result, args.plot)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
