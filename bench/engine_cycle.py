"""How long one scheduling cycle takes, and what its cost grows with.

    python bench/engine_cycle.py [--quick]

Builds 1,000 ClusterQueues in 10 cohorts with 50,000 pending workloads and times a cycle; then
varies the number of pending workloads at a fixed number of ClusterQueues (heads), and the number
of ClusterQueues at a fixed number of pending workloads. A cycle considers one head per
ClusterQueue, taken from a heap, so its cost should follow the heads, not the pending workloads.
Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
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
    """Median seconds per cycle over ``cycles`` cycles, and heads considered per cycle."""
    times: list[float] = []
    heads = 0
    for c in range(cycles):
        t0 = time.perf_counter()
        result = engine.schedule(START + timedelta(days=1, seconds=c))
        times.append(time.perf_counter() - t0)
        heads = max(heads, result.heads)
    return statistics.median(times), heads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    cqs, pending = 1_000 // scale, 50_000 // scale

    t0 = time.perf_counter()
    engine = build(cqs, 10, pending)
    print(f"built {cqs} ClusterQueues in 10 cohorts, {pending} pending: "
          f"{time.perf_counter() - t0:.2f}s")
    t0 = time.perf_counter()
    first = engine.schedule(START + timedelta(days=1))
    print(
        f"one cycle: {1000 * (time.perf_counter() - t0):.1f} ms "
        f"({first.heads} heads, {len(first.admitted)} admitted, {len(first.pending)} pending)"
    )

    print("\npending workloads vary, heads fixed:")
    print(f"{'ClusterQueues':>14} {'pending':>9} {'heads':>6} {'ms/cycle':>9} {'µs/head':>8}")
    for p in (cqs * 5, cqs * 10, cqs * 25, cqs * 50):
        ms, heads = time_cycles(build(cqs, 10, p), 5)
        print(f"{cqs:>14} {p:>9} {heads:>6} {1000 * ms:>9.1f} {1e6 * ms / max(heads, 1):>8.0f}")

    print("\nheads vary, pending workloads fixed:")
    print(f"{'ClusterQueues':>14} {'pending':>9} {'heads':>6} {'ms/cycle':>9} {'µs/head':>8}")
    for n in (cqs // 10, cqs // 4, cqs // 2, cqs):
        ms, heads = time_cycles(build(n, 10, pending), 5)
        print(f"{n:>14} {pending:>9} {heads:>6} {1000 * ms:>9.1f} {1e6 * ms / max(heads, 1):>8.0f}")


if __name__ == "__main__":
    main()
