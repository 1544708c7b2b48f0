"""Cycle cost of topology-aware placement against the number of nodes.

    python bench/tas_cycle.py [--nodes 100,1000,5000] [--workloads 200]

Nodes of 8 cpu in racks of 16 and blocks of 8 racks, one topology-aware flavor with quota for
all of them, and pending Jobs of 8 pods of 4 cpu each requiring one rack. Cycles run until one
admits nothing; the CPU time per cycle is printed. Placement visits every node of the flavor for
each pod set it places, so the cost should grow linearly with the nodes. Not a test: numbers
depend on the machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kqueue.engine.engine import Engine
from kqueue.engine.tas.topology import Node, Topology
from kqueue.engine.types import (
    ClusterQueueName,
    ClusterQueueSpec,
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
    TopologyRequest,
    Workload,
)

START = datetime(2025, 1, 1, tzinfo=UTC)
CPU, PODS = ResourceName("cpu"), ResourceName("pods")
BLOCK, RACK, HOST = "block", "rack", "kubernetes.io/hostname"
FLAVOR = FlavorName("tas")


def build(nodes: int, workloads: int) -> Engine:
    e = Engine()
    e.upsert_topology(Topology("default", (BLOCK, RACK, HOST)))
    for i in range(nodes):
        name = f"n{i}"
        labels = {"pool": "tas", BLOCK: f"b{i // 128}", RACK: f"r{i // 16}", HOST: name}
        e.upsert_node(Node(name, labels, {CPU: 8_000, PODS: 110}))
    e.upsert_flavor(ResourceFlavor(FLAVOR, {"pool": "tas"}, topology_name="default"))
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
    for k in range(workloads):
        ps = PodSet(PodSetName("main"), 8, {CPU: 4_000}, topology=TopologyRequest(required=RACK))
        e.upsert_workload(
            Workload("default", f"w{k}", "lq", (ps,), uid=f"w{k}",
                     creation_time=START + timedelta(seconds=k))
        )
    return e


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="100,1000,5000")
    parser.add_argument("--workloads", type=int, default=200)
    args = parser.parse_args()
    print("nodes  cycles  admitted  ms/cycle (CPU)")
    for n in (int(x) for x in args.nodes.split(",")):
        e = build(n, args.workloads)
        t0 = time.process_time()
        cycles = admitted = 0
        for i in range(1, args.workloads + 2):
            r = e.schedule(START + timedelta(seconds=i))
            cycles += 1
            admitted += len(r.admitted)
            if not r.admitted:
                break
        per = (time.process_time() - t0) / cycles * 1000
        print(f"{n:5d}  {cycles:6d}  {admitted:8d}  {per:8.1f}")


if __name__ == "__main__":
    main()
