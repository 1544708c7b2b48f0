"""Fixtures for topology-aware scheduling tests: nodes, Topologies, TAS flavors, pod sets with
topology requests, and workloads holding topology assignments (Kueue's testing builders)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.gates import FeatureGates
from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.tas.topology import BoundPod, Node, Topology
from kqueue.engine.types import (
    EPOCH,
    Admission,
    ClusterQueueName,
    ClusterQueueSpec,
    CohortSpec,
    FlavorName,
    LocalQueueSpec,
    PodSet,
    PodSetAssignment,
    PodSetName,
    ResourceFlavor,
    ResourceName,
    SelectorRequirement,
    Taint,
    Toleration,
    TopologyAssignment,
    TopologyRequest,
    Workload,
)

from .builders import make_engine, q, t

HOST = "kubernetes.io/hostname"
BLOCK = "cloud.com/topology-block"
RACK = "cloud.provider.com/rack"

Domains = Sequence[tuple[Sequence[str], int]]


def node(
    name: str,
    *,
    cpu: str = "1",
    memory: str | None = None,
    pods: int = 10,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    ready: bool = True,
    unschedulable: bool = False,
    tas: bool = True,
) -> Node:
    alloc = {ResourceName("cpu"): q("cpu", cpu), ResourceName("pods"): pods}
    if memory is not None:
        alloc[ResourceName("memory")] = q("memory", memory)
    lbl = {HOST: name, **(labels or {})}
    if tas:
        lbl["tas-node"] = "true"
    return Node(name, lbl, alloc, tuple(taints), ready, unschedulable)


def pod(key: str, node_name: str, **requests: str) -> BoundPod:
    return BoundPod(key, node_name, {ResourceName(r): q(r, v) for r, v in requests.items()})


def topology(name: str, *levels: str) -> Topology:
    return Topology(name, tuple(levels))


SINGLE = topology("tas-single-level", HOST)
TWO = topology("tas-two-level", RACK, HOST)
THREE = topology("tas-three-level", BLOCK, RACK, HOST)


def tas_flavor(
    name: str = "tas-default",
    topo: str = "tas-single-level",
    tolerations: Iterable[Toleration] = (),
) -> ResourceFlavor:
    return ResourceFlavor(
        FlavorName(name), {"tas-node": "true"}, (), tuple(tolerations), topology_name=topo
    )


def pset(
    name: str,
    count: int,
    *,
    required: str | None = None,
    preferred: str | None = None,
    unconstrained: bool = False,
    slice_level: str | None = None,
    slice_size: int | None = None,
    group: str | None = None,
    affinity: Sequence[SelectorRequirement] | None = None,
    selector: Mapping[str, str] | None = None,
    tolerations: Iterable[Toleration] = (),
    min_count: int | None = None,
    layers: Sequence[tuple[str, int]] = (),
    **requests: str,
) -> PodSet:
    wants = (
        required or preferred or unconstrained or slice_level or group or layers
    )
    tr = (
        TopologyRequest(required, preferred, unconstrained, slice_level, slice_size, group,
                        tuple(layers))
        if wants
        else None
    )
    return PodSet(
        PodSetName(name),
        count,
        {ResourceName(r): q(r, v) for r, v in requests.items()},
        min_count,
        dict(selector or {}),
        None if affinity is None else (tuple(affinity),),
        tuple(tolerations),
        topology=tr,
    )


@dataclass(frozen=True)
class Held:
    """A pod set's admission: its flavor, and per domain (values) the pods placed there."""

    pod_set: str
    flavor: str
    domains: Domains
    levels: Sequence[str] = (HOST,)


def wl(
    name: str,
    *pod_sets: PodSet,
    queue: str = "tas-main",
    priority: int | None = None,
    created: float = 0,
    held_in: str | None = None,
    held: Sequence[Held] = (),
) -> Workload:
    admission = None
    if held_in is not None:
        by_name = {ps.name: ps for ps in pod_sets}
        admission = Admission(
            ClusterQueueName(held_in),
            tuple(
                PodSetAssignment(
                    PodSetName(h.pod_set),
                    {r: FlavorName(h.flavor) for r in by_name[PodSetName(h.pod_set)].requests},
                    {
                        r: v * by_name[PodSetName(h.pod_set)].count
                        for r, v in by_name[PodSetName(h.pod_set)].requests.items()
                    },
                    by_name[PodSetName(h.pod_set)].count,
                    TopologyAssignment(
                        tuple(h.levels),
                        tuple((tuple(v), n) for v, n in h.domains),
                    ),
                )
                for h in held
            ),
            t(created),
        )
    return Workload(
        namespace="default",
        name=name,
        queue_name=queue,
        pod_sets=tuple(pod_sets),
        uid=name,
        creation_time=EPOCH + (t(created) - EPOCH),
        priority=priority,
        admission=admission,
    )


@dataclass
class Cluster:
    nodes: Sequence[Node]
    topologies: Sequence[Topology]
    flavors: Sequence[ResourceFlavor]
    cqs: Sequence[ClusterQueueSpec]
    workloads: Sequence[Workload] = ()
    pods: Sequence[BoundPod] = ()
    cohorts: Sequence[CohortSpec] = ()
    lqs: Sequence[LocalQueueSpec] = field(default_factory=list)
    gates: FeatureGates | None = None
    # AdmissionChecks known to the engine, all active (a ClusterQueue naming an unknown one is
    # inactive).
    checks: Sequence[str] = ()
    # Those of ``checks`` that are ProvisioningRequest checks (delayed topology requests).
    provisioning: Sequence[str] = ()
    # Those of ``checks`` that are MultiKueue checks (placed by the worker, never here).
    multikueue: Sequence[str] = ()

    def engine(self, **options: Any) -> Engine:
        e = make_engine(
            *self.flavors, *self.cohorts, *self.cqs, *self.lqs,
            preemptor=ClassicalPreemptor(), gates=self.gates, **options,
        )
        for check in self.checks:
            e.upsert_admission_check(check, None, provisions=check in self.provisioning,
                                     delegates=check in self.multikueue)
        for topo in self.topologies:
            e.upsert_topology(topo)
        for n in self.nodes:
            e.upsert_node(n)
        for p in self.pods:
            e.upsert_pod(p)
        for w in self.workloads:
            e.upsert_workload(w)
        return e


def placements(result: CycleResult) -> dict[str, dict[str, list[tuple[tuple[str, ...], int]]]]:
    """workload name -> pod set -> [(values, pods)] of this cycle's admissions."""
    out: dict[str, dict[str, list[tuple[tuple[str, ...], int]]]] = {}
    for a in result.admitted:
        name = a.workload.split("/", 1)[1]
        out[name] = {
            ps.name: [(tuple(v), n) for v, n in ps.topology.domains] if ps.topology else []
            for ps in a.pod_sets
        }
    return out


def run(cluster: Cluster, at: float = 1) -> CycleResult:
    return cluster.engine().schedule(t(at))
