"""Kueue's scheduler performance shapes through the simulator, in simulated time.

    python bench/sim_shapes.py [--shape baseline|large-scale ...] [--out bench/results/sim.json]

The same path as ``kqueue simulate --generate <shape>``: the generator's scenario, the simulator
driving the engine as the controller does (classical preemption, 1 ms of simulated time per head
considered), and Kueue's checker figures. CPU seconds are this process's (the engine plus the
simulator's bookkeeping), so decisions per CPU second is a lower bound on the engine alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kqueue.cli.simulate import GENERATED_DECISION_TIME, summary_dict
from kqueue.sim import generate as gen
from kqueue.sim.driver import Simulation
from kqueue.sim.report import figures


def run_shape(name: str) -> dict[str, Any]:
    shape = gen.SHAPES[name]
    t0 = time.process_time()
    scenario = gen.generate(shape)
    build_cpu = time.process_time() - t0
    sim = Simulation(scenario, decision_time=GENERATED_DECISION_TIME)
    t0, w0 = time.process_time(), time.perf_counter()
    sim.run()
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    out = summary_dict(figures(sim), cpu)
    out.update(
        shape=name,
        clusterQueues=shape.cluster_queues,
        workloads=shape.workloads,
        generateCpuSeconds=round(build_cpu, 3),
        realWallSeconds=round(wall, 3),
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", choices=sorted(gen.SHAPES))
    parser.add_argument("--out", type=Path, default=Path("bench/results/sim_shapes.json"))
    args = parser.parse_args()
    results = []
    for name in args.shape or ["baseline", "large-scale"]:
        r = run_shape(name)
        results.append(r)
        print(f"{name}: {r['clusterQueues']} ClusterQueues, {r['workloads']} workloads")
        print(
            f"  simulated wall {r['wallSeconds']:.1f}s, {r['cycles']} cycles, "
            f"{r['decisions']} decisions, {r['cpuSeconds']:.1f} CPU s "
            f"({r['decisionsPerSecond']} decisions/CPU s)"
        )
        print(
            f"  usage {r['clusterQueueUsagePercent']}%, "
            f"minimum ClusterQueue usage {r['minClusterQueueUsagePercent']}%"
        )
        for k, v in r["workloadClasses"].items():
            print(
                f"  {k:>7}: {v['admitted']}/{v['count']} admitted, "
                f"avg time to admission {v['averageTimeToAdmissionMs'] / 1000:.1f}s, "
                f"{v['evictions']} evictions"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
