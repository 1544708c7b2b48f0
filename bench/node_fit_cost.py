"""Cost of the node-fit guard (``Engine.node_fit``) against the number of nodes.

    python bench/node_fit_cost.py [--nodes 500,5000] [--gangs 20] [--released 200] [--repeat 5]

Nodes of 8 cpu and 110 pod slots, ``--released`` released-but-unbound pods of 1 cpu (other
workloads kube-scheduler has not bound yet), and ``--gangs`` admitted gangs of 8 pods of 4 cpu
each (one pod set), half of them selecting one of 4 zones. Two clusters:

* ``fits``: a bound pod of 1 cpu on every tenth node; every gang fits (the check that precedes
  a release: placement with a witness);
* ``held``: a bound pod of 5 cpu on every node; no 4-cpu pod fits anywhere (the check of held
  gangs, repeated on every node and pod event until room appears).

A guard cycle is what one node or pod event causes: every held gang is checked again. It is
measured two ways:

* cold: a bound pod changed just before (the cluster's generation moved), so the guard rebuilds
  its per-flavor tree of nodes (the implicit hostname level) and each pod template's free
  capacity per node before the first check;
* warm: nothing changed since the last check (trees and capacities reused).

Printed: CPU time (``time.process_time``) per cycle and per check, the best of ``--repeat``.
Not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kqueue.engine.engine import Engine
from kqueue.engine.tas.node_fit import ReleasedPod
from kqueue.engine.tas.topology import BoundPod, Node
from kqueue.engine.types import (
    Admission,
    ClusterQueueName,
    ClusterQueueSpec,
    FlavorName,
    FlavorQuotas,
    LabelSelector,
    LocalQueueSpec,
    PodSet,
    PodSetAssignment,
    PodSetName,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    Workload,
    WorkloadKey,
)

START = datetime(2025, 1, 1, tzinfo=UTC)
CPU, PODS = ResourceName("cpu"), ResourceName("pods")
FLAVOR = FlavorName("default")
MAIN = PodSetName("main")
GANG = 8


def build(nodes: int, gangs: int, released: int, held: bool) -> tuple[Engine, list[WorkloadKey]]:
    e = Engine()
    for i in range(nodes):
        name = f"n{i}"
        labels = {"pool": "default", "zone": f"z{i % 4}", "kubernetes.io/hostname": name}
        e.upsert_node(Node(name, labels, {CPU: 8_000, PODS: 110}))
        if held:
            e.upsert_pod(BoundPod(f"other/p{i}", name, {CPU: 5_000}))
        elif i % 10 == 0:
            e.upsert_pod(BoundPod(f"other/p{i}", name, {CPU: 1_000}))
    e.upsert_flavor(ResourceFlavor(FLAVOR, {"pool": "default"}))
    e.upsert_cluster_queue(
        ClusterQueueSpec(
            ClusterQueueName("cq"),
            resource_groups=(
                ResourceGroup((CPU,), (FlavorQuotas(FLAVOR, {CPU: ResourceQuota(8_000 * nodes)}),)),
            ),
            namespace_selector=LabelSelector(),
        )
    )
    e.upsert_local_queue(LocalQueueSpec("default", "lq", ClusterQueueName("cq")))
    for i in range(released):
        ps = PodSet(PodSetName("main"), 1, {CPU: 1_000})
        e.upsert_released_pod(ReleasedPod(f"default/r{i}", ps))
    keys: list[WorkloadKey] = []
    for g in range(gangs):
        selector = {"zone": f"z{g % 4}"} if g % 2 else {}
        ps = PodSet(MAIN, GANG, {CPU: 4_000}, node_selector=selector)
        admission = Admission(
            ClusterQueueName("cq"),
            (PodSetAssignment(MAIN, {CPU: FLAVOR}, {CPU: 4_000 * GANG}, GANG),),
            START,
        )
        e.upsert_workload(
            Workload("default", f"g{g}", "lq", (ps,), uid=f"g{g}", creation_time=START,
                     admission=admission)
        )
        keys.append(WorkloadKey(f"default/g{g}"))
    return e, keys


def cycle(e: Engine, keys: list[WorkloadKey]) -> int:
    fits = 0
    for key in keys:
        verdict = e.node_fit(key, {MAIN: GANG})
        assert verdict is not None
        fits += verdict.fits
    return fits


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", default="500,5000")
    p.add_argument("--gangs", type=int, default=20)
    p.add_argument("--released", type=int, default=200)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| nodes | cluster | gangs checked | fit | cold cycle ms | cold ms/check "
          "| warm cycle ms | warm ms/check |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, held in ((int(x), h) for x in args.nodes.split(",") for h in (False, True)):
        e, keys = build(n, args.gangs, args.released, held)
        cold, warm = float("inf"), float("inf")
        fits = 0
        for r in range(args.repeat):
            # A bound pod came and went: the generation moved, the trees are rebuilt.
            e.upsert_pod(BoundPod(f"other/tick{r}", "n1", {CPU: 1}))
            t0 = time.process_time()
            fits = cycle(e, keys)
            cold = min(cold, time.process_time() - t0)
            t0 = time.process_time()
            cycle(e, keys)
            warm = min(warm, time.process_time() - t0)
        k = len(keys)
        print(f"| {n:,} | {'held' if held else 'fits'} | {k} | {fits} | {cold * 1e3:.1f} | {cold * 1e3 / k:.2f} | "
              f"{warm * 1e3:.1f} | {warm * 1e3 / k:.2f} |")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
