"""Fixtures for the node-fit guard's tests: an engine holding one admitted workload (no topology
assignment) in ClusterQueue ``cq`` with flavor ``default``, and the nodes and pods around it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from kqueue.engine.engine import Engine
from kqueue.engine.tas.node_fit import ReleasedPod, Verdict
from kqueue.engine.tas.topology import BoundPod, Node
from kqueue.engine.types import (
    EPOCH,
    Admission,
    ClusterQueueName,
    FlavorName,
    PodSet,
    PodSetAssignment,
    PodSetName,
    ResourceFlavor,
    Workload,
    WorkloadKey,
)

from .builders import make_cq, make_lq

CQ = "cq"
FLAVOR = "default"


def admitted(name: str, *pod_sets: PodSet, flavor: str = FLAVOR) -> Workload:
    """A workload holding quota in ``cq``, every resource of every pod set in ``flavor``."""
    admission = Admission(
        ClusterQueueName(CQ),
        tuple(
            PodSetAssignment(
                ps.name,
                {r: FlavorName(flavor) for r in ps.requests},
                {r: v * ps.count for r, v in ps.requests.items()},
                ps.count,
            )
            for ps in pod_sets
        ),
        EPOCH,
    )
    return Workload(
        namespace="default", name=name, queue_name="lq", pod_sets=tuple(pod_sets), uid=name,
        creation_time=EPOCH, admission=admission,
    )


def engine_with(
    nodes: Iterable[Node],
    *,
    flavor: ResourceFlavor | None = None,
    bound: Iterable[BoundPod] = (),
    released: Iterable[ReleasedPod] = (),
    workloads: Iterable[Workload] = (),
    cq_guard: bool | None = None,
    default_guard: bool = True,
) -> Engine:
    engine = Engine(node_fit_guard=default_guard)
    engine.upsert_flavor(flavor or ResourceFlavor(FlavorName(FLAVOR)))
    cq = make_cq(CQ).quota(flavor.name if flavor else FLAVOR, cpu="1000", memory="1Ti").obj()
    engine.upsert_cluster_queue(replace(cq, node_fit_guard=cq_guard))
    engine.upsert_local_queue(make_lq("lq", CQ))
    for n in nodes:
        engine.upsert_node(n)
    for p in bound:
        engine.upsert_pod(p)
    for r in released:
        engine.upsert_released_pod(r)
    for w in workloads:
        engine.upsert_workload(w)
    return engine


def check(
    engine: Engine, workload: Workload, pending: Mapping[str, int] | None = None
) -> Verdict | None:
    counts = (
        {ps.name: ps.count for ps in workload.pod_sets}
        if pending is None
        else {PodSetName(k): v for k, v in pending.items()}
    )
    return engine.node_fit(WorkloadKey(f"default/{workload.name}"), counts)


def placed_total(verdict: Verdict) -> int:
    return sum(sum(nodes.values()) for nodes in verdict.nodes.values())


def node_names(nodes: Sequence[Node]) -> list[str]:
    return [n.name for n in nodes]
