"""Kueue's scheduler performance shapes (test/performance/scheduler), in simulated time.

Each shape has cohorts of ClusterQueues; every ClusterQueue gets its own namespace and LocalQueue
(all three named alike, as Kueue's generator names them) and, per workload class, ``count``
single-pod workloads created one every ``interval``, the first after one interval. Once admitted a
workload runs for its class's run time and finishes. Names, priorities, quotas and policies are
Kueue's: flavor ``rf``, cohort ``cohort-<i>``, ClusterQueue ``cq-0-<j>-cohort-<i>``, workload
``<class>-<set>-<n>-0``.

The documents are plain manifests carrying ``simulate.kqueue.io/`` annotations, so
``--write-manifests`` output replays exactly the same simulation.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kqueue.api.loader import Location, load_object
from kqueue.api.v1alpha1 import constants as c

from .annotations import ARRIVAL, CLASS_LABEL, RUN_TIME
from .durations import format_duration
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

SHAPES: Final[dict[str, Shape]] = {s.name: s for s in (BASELINE, LARGE_SCALE)}


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
                {
                    "name": c.DEFAULT_POD_SET_NAME,
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": k.cpu}}}]
                        }
                    },
                }
            ],
        },
    }


def documents(shape: Shape) -> Iterator[dict[str, Any]]:
    """Every object of the shape: the flavor, then per ClusterQueue its queue objects, then the
    workloads in creation order (so that simultaneous ones keep a stable order)."""
    yield {"apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}
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


def generate(shape: Shape, *, start: datetime = DEFAULT_START) -> Scenario:
    """The shape as a Scenario, read through the same loader as manifest files."""
    source = f"<generate {shape.name}>"
    objects = []
    for index, doc in enumerate(documents(shape), start=1):
        obj = load_object(doc, Location(source, index))
        assert obj is not None
        objects.append(obj)
    return build_scenario(objects, start=start)
