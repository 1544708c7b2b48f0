"""Kueue's scheduler performance shapes (test/performance/scheduler), in simulated time.

Each shape has cohorts of ClusterQueues; every ClusterQueue gets its own namespace and LocalQueue
(all three named alike, as Kueue's generator names them) and, per workload class, ``count``
single-pod workloads created one every ``interval``, the first after one interval. Once admitted a
workload runs for its class's run time and finishes. Names, priorities, quotas and policies are
Kueue's: flavor ``rf``, cohort ``cohort-<i>``, ClusterQueue ``cq-0-<j>-cohort-<i>``, workload
``<class>-<set>-<n>-0``.

The documents are plain manifests carrying ``simulate.kqueue.io/`` annotations, so
``--write-manifests`` output replays exactly the same simulation.

The ``tas`` shape (Kueue's configs/tas) adds a Topology of 1 block x 10 racks x 64 nodes of 96
cpu, a topology-aware flavor over them, and workloads of several pods asking for a rack
(required, preferred, and Kueue's alpha "balanced" placement, which kqueue places as preferred).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any, Final

from kqueue.api.durations import format_duration
from kqueue.api.loader import Location, load_object
from kqueue.api.v1alpha1 import constants as c

from .annotations import ARRIVAL, CLASS_LABEL, RUN_TIME
from .scenario import DEFAULT_START, Scenario, build_scenario

FLAVOR: Final = "rf"


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    name: str
    count: int
    interval: timedelta
    run_time: timedelta
    priority: int
    cpu: str
    pods: int = 1
    # Topology-aware: the pod template annotation (required/preferred) and its level.
    constraint: str | None = None
    level: str | None = None


@dataclass(frozen=True, slots=True)
class TasLayout:
    """Nodes of the ``tas`` shape: ``racks`` racks of ``nodes_per_rack`` in one block."""

    racks: int
    nodes_per_rack: int
    cpu: str
    memory: str


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    cohorts: int
    queues_per_cohort: int
    nominal_quota: str
    borrowing_limit: str
    reclaim_within_cohort: str
    within_cluster_queue: str
    classes: tuple[WorkloadClass, ...]
    tas: TasLayout | None = None

    @property
    def cluster_queues(self) -> int:
        return self.cohorts * self.queues_per_cohort

    @property
    def workloads(self) -> int:
        return self.cluster_queues * sum(k.count for k in self.classes)


def _ms(n: int) -> timedelta:
    return timedelta(milliseconds=n)


BASELINE: Final = Shape(
    name="baseline",
    cohorts=5,
    queues_per_cohort=6,
    nominal_quota="20",
    borrowing_limit="100",
    reclaim_within_cohort="Any",
    within_cluster_queue="LowerPriority",
    classes=(
        WorkloadClass("small", 350, _ms(100), _ms(200), 50, "1"),
        WorkloadClass("medium", 100, _ms(500), _ms(500), 100, "5"),
        WorkloadClass("large", 50, _ms(1200), _ms(1000), 200, "20"),
    ),
)

LARGE_SCALE: Final = Shape(
    name="large-scale",
    cohorts=10,
    queues_per_cohort=100,
    nominal_quota="20",
    borrowing_limit="100",
    reclaim_within_cohort="Any",
    within_cluster_queue="LowerPriority",
    classes=(
        WorkloadClass("small", 35, _ms(60), _ms(150), 50, "1"),
        WorkloadClass("medium", 11, _ms(300), _ms(350), 100, "5"),
        WorkloadClass("large", 4, _ms(700), _ms(700), 200, "20"),
    ),
)

TAS_BLOCK: Final = "cloud.provider.com/topology-block"
TAS_RACK: Final = "cloud.provider.com/topology-rack"
TAS_NODE_GROUP: Final = "tas-node-group"
TAS_TOPOLOGY: Final = "default-topology"


def _rack(name: str, count: int, interval: int, run: int, prio: int, cpu: str, pods: int,
          constraint: str) -> WorkloadClass:
    return WorkloadClass(name, count, _ms(interval), _ms(run), prio, cpu, pods, constraint,
                         TAS_RACK)


# The baseline's cohorts and queues, with rack-constrained classes. Kueue's "balanced" classes
# (TASBalancedPlacement, alpha) are placed as preferred.
TAS: Final = replace(
    BASELINE,
    name="tas",
    classes=(
        _rack("small-required-rack", 120, 100, 200, 50, "500m", 2, "required"),
        _rack("small-preferred-rack", 120, 100, 200, 50, "500m", 2, "preferred"),
        _rack("small-balanced-rack", 110, 100, 200, 50, "500m", 2, "preferred"),
        _rack("medium-required-rack", 34, 500, 500, 100, "1250m", 4, "required"),
        _rack("medium-preferred-rack", 33, 500, 500, 100, "1250m", 4, "preferred"),
        _rack("medium-balanced-rack", 33, 500, 500, 100, "1250m", 4, "preferred"),
        _rack("large-required-rack", 17, 1200, 1000, 200, "2500m", 8, "required"),
        _rack("large-preferred-rack", 17, 1200, 1000, 200, "2500m", 8, "preferred"),
        _rack("large-balanced-rack", 16, 1200, 1000, 200, "2500m", 8, "preferred"),
    ),
    tas=TasLayout(racks=10, nodes_per_rack=64, cpu="96", memory="256Gi"),
)

SHAPES: Final[dict[str, Shape]] = {s.name: s for s in (BASELINE, LARGE_SCALE, TAS)}


def scaled_count(count: int, factor: Fraction | int | str) -> int:
    """``count`` times ``factor``, rounded half up, at least 1: how a benchmark scales a class.

    The same rule scales Kueue's generator config for its runner (bench/side_by_side.py), so
    both runners build the same shape; exact (``factor`` as a Fraction or a decimal string such
    as ``"0.1"``), so 35 x 0.1 is 3.5 and rounds to 4 on every machine."""
    product = Fraction(factor) * count
    return max(1, math.floor(product + Fraction(1, 2)))


def scaled(shape: Shape, factor: Fraction | int | str) -> Shape:
    """``shape`` with every class's count scaled (:func:`scaled_count`); the cohorts and
    ClusterQueues stay, so large-scale x0.1 still has 1,000 ClusterQueues."""
    return replace(
        shape, classes=tuple(replace(k, count=scaled_count(k.count, factor)) for k in shape.classes)
    )


class KueueConfigError(ValueError):
    pass


# Kueue's generator ``tasConstraint`` values and how kqueue's tas shape places them: Kueue's
# "balanced" (TASBalancedPlacement, alpha: a slice-required request with a slice size) is placed
# as preferred (docs/benchmarks.md, section 8).
_TAS_CONSTRAINTS: Final[Mapping[str, str]] = {
    "required": "required", "preferred": "preferred", "balanced": "preferred",
}
_TAS_LEVELS: Final = (TAS_BLOCK, TAS_RACK, "kubernetes.io/hostname")


def _tas_layout(name: str, topology: Any) -> TasLayout:
    """The node layout of a Kueue generator ``topology``: one block of racks of nodes, labelled
    as kqueue's tas shape labels them; any other layout is refused by name."""
    where = f"Kueue generator config {name!r}: topology"
    levels = topology.get("levels") if isinstance(topology, Mapping) else None
    labels = tuple(lv.get("nodeLabel") for lv in levels or [] if isinstance(lv, Mapping))
    if not isinstance(levels, list) or labels != _TAS_LEVELS:
        raise KueueConfigError(
            f"{where}.levels: node labels {list(labels)}; kqueue's tas shape has {list(_TAS_LEVELS)}"
        )
    block, rack, node = levels
    if int(block.get("count") or 1) != 1:
        raise KueueConfigError(f"{where}.levels[0].count: {block.get('count')}; only 1 block is expressed")
    capacity = node.get("capacity") or {}
    if set(capacity) != {"cpu", "memory"}:
        raise KueueConfigError(
            f"{where}.levels[2].capacity: {sorted(capacity)}; expressed are cpu and memory"
        )
    return TasLayout(
        racks=int(rack["count"]),
        nodes_per_rack=int(node["count"]),
        cpu=str(capacity["cpu"]),
        memory=str(capacity["memory"]),
    )


def from_kueue_generator(name: str, doc: Mapping[str, Any]) -> Shape:
    """The Shape that Kueue's scheduler performance runner builds from its generator config
    (test/performance/scheduler/configs/*/generator.yaml: ``cohorts`` > ``queuesSets`` >
    ``workloadsSets``, and for configs/tas a ``topology``), for checking that both runners build
    the same thing.

    Only what a Shape expresses: one cohort class with one queue set, one class per workload
    set, and a topology of one block of racks of nodes; anything else is refused by name."""

    def one(items: Any, what: str) -> Mapping[str, Any]:
        if not isinstance(items, list) or len(items) != 1 or not isinstance(items[0], Mapping):
            n = len(items) if isinstance(items, list) else "no"
            raise KueueConfigError(
                f"Kueue generator config {name!r}: {what}: {n} entries; a Shape has exactly one"
            )
        return items[0]

    tas = _tas_layout(name, doc["topology"]) if doc.get("topology") is not None else None
    cohort = one(doc.get("cohorts"), "cohorts")
    queues = one(cohort.get("queuesSets"), "cohorts[0].queuesSets")
    classes = []
    for i, ws in enumerate(queues.get("workloadsSets") or []):
        wl = one(ws.get("workloads"), f"cohorts[0].queuesSets[0].workloadsSets[{i}].workloads")
        constraint = wl.get("tasConstraint")
        if constraint is not None and (tas is None or constraint not in _TAS_CONSTRAINTS):
            raise KueueConfigError(
                f"Kueue generator config {name!r}: workloadsSets[{i}]: tasConstraint "
                f"{constraint!r}; expressed are {sorted(_TAS_CONSTRAINTS)}, with a topology"
            )
        classes.append(
            WorkloadClass(
                name=str(wl["className"]),
                count=int(ws["count"]),
                interval=_ms(int(ws["creationIntervalMs"])),
                run_time=_ms(int(wl["runtimeMs"])),
                priority=int(wl["priority"]),
                cpu=str(wl["request"]),
                pods=int(wl.get("podCount") or 1),
                constraint=_TAS_CONSTRAINTS[constraint] if constraint is not None else None,
                level=str(wl["tasLevel"]) if constraint is not None else None,
            )
        )
    return Shape(
        name=name,
        cohorts=int(cohort["count"]),
        queues_per_cohort=int(queues["count"]),
        nominal_quota=str(queues["nominalQuota"]),
        borrowing_limit=str(queues["borrowingLimit"]),
        reclaim_within_cohort=str(queues["reclaimWithinCohort"]),
        within_cluster_queue=str(queues["withinClusterQueue"]),
        classes=tuple(classes),
        tas=tas,
    )


def cluster_queue_name(shape_queue_set: int, queue: int, cohort: int) -> str:
    return f"cq-{shape_queue_set}-{queue}-cohort-{cohort}"


def _queue_documents(shape: Shape, cohort: int, queue: int) -> list[dict[str, Any]]:
    name = cluster_queue_name(0, queue, cohort)
    return [
        {
            "apiVersion": c.API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": name, "labels": {CLASS_LABEL: "cq"}},
            "spec": {
                "cohortName": f"cohort-{cohort}",
                "namespaceSelector": {},
                "preemption": {
                    "reclaimWithinCohort": shape.reclaim_within_cohort,
                    "withinClusterQueue": shape.within_cluster_queue,
                },
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": FLAVOR,
                                "resources": [
                                    {
                                        "name": "cpu",
                                        "nominalQuota": shape.nominal_quota,
                                        "borrowingLimit": shape.borrowing_limit,
                                    }
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        {
            "apiVersion": c.API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": name},
            "spec": {"clusterQueue": name},
        },
    ]


def _workload(name: str, namespace: str, k: WorkloadClass, arrival: timedelta) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": k.cpu}}}]}
    }
    if k.constraint is not None and k.level is not None:
        template["metadata"] = {
            "annotations": {f"kqueue.io/podset-{k.constraint}-topology": k.level}
        }
    return {
        "apiVersion": c.API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {CLASS_LABEL: k.name},
            "annotations": {
                ARRIVAL: format_duration(arrival),
                RUN_TIME: format_duration(k.run_time),
            },
        },
        "spec": {
            "queueName": namespace,
            "priority": k.priority,
            "podSets": [
                {"name": c.DEFAULT_POD_SET_NAME, "count": k.pods, "template": template}
            ],
        },
    }


def documents(shape: Shape) -> Iterator[dict[str, Any]]:
    """Every object of the shape: the flavor, then per ClusterQueue its queue objects, then the
    workloads in creation order (so that simultaneous ones keep a stable order)."""
    if shape.tas is None:
        yield {"apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}
    else:
        yield from _tas_documents(shape.tas)
    for i in range(shape.cohorts):
        yield {"apiVersion": c.API_VERSION, "kind": "Cohort", "metadata": {"name": f"cohort-{i}"}}
    queues = [(i, j) for i in range(shape.cohorts) for j in range(shape.queues_per_cohort)]
    for i, j in queues:
        yield from _queue_documents(shape, i, j)
    arrivals: list[tuple[timedelta, int, int, int, int]] = []
    for q, _ in enumerate(queues):
        for set_index, k in enumerate(shape.classes):
            for n in range(k.count):
                arrivals.append((k.interval * (n + 1), q, set_index, n, 0))
    arrivals.sort()
    for at, q, set_index, n, _ in arrivals:
        i, j = queues[q]
        k = shape.classes[set_index]
        ns = cluster_queue_name(0, j, i)
        yield _workload(f"{k.name}-{set_index}-{n}-0", ns, k, at)


def _tas_documents(layout: TasLayout) -> Iterator[dict[str, Any]]:
    yield {
        "apiVersion": c.API_VERSION,
        "kind": "Topology",
        "metadata": {"name": TAS_TOPOLOGY},
        "spec": {"levels": [{"nodeLabel": TAS_BLOCK}, {"nodeLabel": TAS_RACK},
                            {"nodeLabel": "kubernetes.io/hostname"}]},
    }
    yield {
        "apiVersion": c.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {"nodeLabels": {TAS_NODE_GROUP: "tas"}, "topologyName": TAS_TOPOLOGY},
    }
    for r in range(layout.racks):
        for n in range(layout.nodes_per_rack):
            name = f"node-b0-r{r}-{n}"
            yield {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {TAS_NODE_GROUP: "tas", TAS_BLOCK: "b0", TAS_RACK: f"r{r}",
                               "kubernetes.io/hostname": name},
                },
                "status": {
                    "allocatable": {"cpu": layout.cpu, "memory": layout.memory, "pods": "1000"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }


def generate(shape: Shape, *, start: datetime = DEFAULT_START) -> Scenario:
    """The shape as a Scenario, read through the same loader as manifest files."""
    source = f"<generate {shape.name}>"
    objects = []
    for index, doc in enumerate(documents(shape), start=1):
        obj = load_object(doc, Location(source, index))
        assert obj is not None
        objects.append(obj)
    return build_scenario(objects, start=start)
