"""Cost of the node-fit guard (``Engine.node_fit``) against the number of nodes.

    python bench/node_fit_cost.py [--nodes 500,5000] [--gangs 20] [--released 200] [--repeat 5]
                                  [--tas-workloads 50]

Nodes of 8 cpu and 110 pod slots, ``--released`` released-but-unbound pods of 1 cpu (other
workloads kube-scheduler has not bound yet), and ``--gangs`` admitted gangs of 8 pods of 4 cpu
each (one pod set), half of them selecting one of 4 zones. Two clusters:

* ``fits``: a bound pod of 1 cpu on every tenth node; every gang fits (the check that precedes
  a release: placement with a witness);
* ``held``: a bound pod of 5 cpu on every node; no 4-cpu pod fits anywhere (the check of held
  gangs, repeated on every node and pod event until room appears).

Each cluster is measured twice: without TAS, and "with TAS", where the same nodes are also a
topology-aware flavor (a Topology of zone, rack of 16 nodes, hostname) and ``--tas-workloads``
rack-required workloads of 8 pods of 1 cpu hold topology assignments on them (admitted by the
engine's own cycles). Their pods are not among the bound pods, so every check adds what the
assignments take per host (``host_usage``); the difference between the two rows is the guard's
extra cost with TAS.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kqueue.engine.engine import Engine
from kqueue.engine.tas.node_fit import ReleasedPod
from kqueue.engine.tas.topology import BoundPod, Node, Topology
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
    TopologyRequest,
    Workload,
    WorkloadKey,
)

START = datetime(2025, 1, 1, tzinfo=UTC)
CPU, PODS = ResourceName("cpu"), ResourceName("pods")
FLAVOR = FlavorName("default")
TAS_FLAVOR = FlavorName("tas")
MAIN = PodSetName("main")
GANG = 8
ZONE, RACK, HOST = "zone", "rack", "kubernetes.io/hostname"


def _queue(e: Engine, name: str, flavor: FlavorName, nodes: int) -> None:
    e.upsert_cluster_queue(
        ClusterQueueSpec(
            ClusterQueueName(name),
            resource_groups=(
                ResourceGroup((CPU,), (FlavorQuotas(flavor, {CPU: ResourceQuota(8_000 * nodes)}),)),
            ),
            namespace_selector=LabelSelector(),
        )
    )
    e.upsert_local_queue(LocalQueueSpec("default", f"lq-{name}", ClusterQueueName(name)))


def place_tas_workloads(e: Engine, count: int) -> int:
    """``count`` rack-required workloads of 8 x 1 cpu on the TAS flavor, admitted (and so
    placed) by the engine's cycles; returns how many hold an assignment."""
    for k in range(count):
        ps = PodSet(MAIN, GANG, {CPU: 1_000}, topology=TopologyRequest(required=RACK))
        e.upsert_workload(
            Workload("default", f"t{k}", "lq-cq-tas", (ps,), uid=f"t{k}",
                     creation_time=START + timedelta(seconds=k))
        )
    admitted = 0
    for i in range(1, count + 2):
        got = len(e.schedule(START + timedelta(hours=1, seconds=i)).admitted)
        admitted += got
        if not got:
            break
    return admitted


def build(
    nodes: int, gangs: int, released: int, held: bool, tas_workloads: int = 0
) -> tuple[Engine, list[WorkloadKey]]:
    e = Engine()
    for i in range(nodes):
        name = f"n{i}"
        labels = {"pool": "default", ZONE: f"z{i % 4}", RACK: f"r{i // 16}", HOST: name}
        e.upsert_node(Node(name, labels, {CPU: 8_000, PODS: 110}))
        if held:
            e.upsert_pod(BoundPod(f"other/p{i}", name, {CPU: 5_000}))
        elif i % 10 == 0:
            e.upsert_pod(BoundPod(f"other/p{i}", name, {CPU: 1_000}))
    e.upsert_flavor(ResourceFlavor(FLAVOR, {"pool": "default"}))
    _queue(e, "cq", FLAVOR, nodes)
    if tas_workloads:
        e.upsert_topology(Topology("default", (ZONE, RACK, HOST)))
        e.upsert_flavor(ResourceFlavor(TAS_FLAVOR, {"pool": "default"}, topology_name="default"))
        _queue(e, "cq-tas", TAS_FLAVOR, nodes)
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
            Workload("default", f"g{g}", "lq-cq", (ps,), uid=f"g{g}", creation_time=START,
                     admission=admission)
        )
        keys.append(WorkloadKey(f"default/g{g}"))
    if tas_workloads:
        placed = place_tas_workloads(e, tas_workloads)
        assert placed == tas_workloads, f"only {placed} of {tas_workloads} TAS workloads placed"
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
    p.add_argument("--tas-workloads", type=int, default=50,
                   help="TAS-placed workloads in the 'with TAS' rows (0: none of those rows)")
    args = p.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| nodes | cluster | TAS-placed workloads | gangs checked | fit | cold cycle ms "
          "| cold ms/check | warm cycle ms | warm ms/check |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    tas_counts = (0, args.tas_workloads) if args.tas_workloads else (0,)
    cases = [(int(x), h, t) for x in args.nodes.split(",") for h in (False, True) for t in tas_counts]
    for n, held, tas in cases:
        e, keys = build(n, args.gangs, args.released, held, tas)
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
        print(f"| {n:,} | {'held' if held else 'fits'} | {tas} | {k} | {fits} | {cold * 1e3:.1f} "
              f"| {cold * 1e3 / k:.2f} | {warm * 1e3:.1f} | {warm * 1e3 / k:.2f} |")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
