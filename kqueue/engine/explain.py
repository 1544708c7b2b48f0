"""Why a workload is pending: reason, a Kueue-style message with numbers, structured details.

The message is what goes on the ``QuotaReserved=False`` condition; the details are for
``kqueue explain`` and the simulator: per pod set, the flavors considered, which were skipped and
why, and for each resource that did not fit how much was requested, available and borrowable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .assignment import Assignment, FlavorAttempt, Shortfall
from .tas.placement import Placement
from .types import (
    ClusterQueueName,
    FlavorName,
    Mode,
    PendingReason,
    PodSetName,
    ResourceName,
    WorkloadKey,
)


@dataclass(frozen=True, slots=True)
class SkippedFlavor:
    flavor: FlavorName
    # e.g. "untolerated taint gpu=true:NoSchedule in flavor a100"
    why: str


@dataclass(frozen=True, slots=True)
class ResourceDetail:
    """One resource of one flavor that did not fit."""

    flavor: FlavorName
    resource: ResourceName
    requested: int
    available: int
    max_capacity: int
    nominal: int
    borrowable: int
    missing: int
    exceeds_max: bool


@dataclass(frozen=True, slots=True)
class TopologyDetail:
    """A failed placement: the domains of the requested level and how many pods (or slices)
    each fits, against how many are needed in one domain."""

    level: str
    needed: int
    unit: str
    domains: tuple[tuple[str, int], ...]
    reason: str


@dataclass(frozen=True, slots=True)
class PodSetDetails:
    name: PodSetName
    count: int
    mode: Mode
    flavors: Mapping[ResourceName, FlavorName]
    skipped: tuple[SkippedFlavor, ...]
    resources: tuple[ResourceDetail, ...]
    message: str
    topology: TopologyDetail | None = None


@dataclass(frozen=True, slots=True)
class PendingDetails:
    reason: PendingReason
    message: str
    cluster_queue: ClusterQueueName | None = None
    pod_sets: tuple[PodSetDetails, ...] = ()
    preemption_targets: tuple[WorkloadKey, ...] = ()
    # 0-based positions in queue order; None when not queued (or not computed).
    position_in_cluster_queue: int | None = None
    position_in_local_queue: int | None = None
    # Where fair sharing decided another head of the cohort went first (tournament.Match).
    fair_sharing: str | None = None
    # Admission fair sharing: the usage of each LocalQueue of the ClusterQueue with workloads
    # waiting, lowest (next) first, as ``(LocalQueue, usage)``.
    local_queue_usages: tuple[tuple[str, str], ...] = ()


def _resource_detail(flavor: FlavorName, s: Shortfall) -> ResourceDetail:
    return ResourceDetail(
        flavor=flavor,
        resource=s.resource,
        requested=s.requested,
        available=s.available,
        max_capacity=s.max_capacity,
        nominal=s.nominal,
        borrowable=s.borrowable,
        missing=s.missing,
        exceeds_max=s.exceeds_max,
    )


def _skipped(attempts: tuple[FlavorAttempt, ...]) -> tuple[SkippedFlavor, ...]:
    return tuple(SkippedFlavor(a.flavor, a.skipped) for a in attempts if a.skipped is not None)


def _topology_detail(p: Placement | None) -> TopologyDetail | None:
    if p is None:
        return None
    return TopologyDetail(
        p.level, p.needed, p.unit, tuple((d.name, d.fits) for d in p.considered), p.reason
    )


def details_of(
    reason: PendingReason,
    message: str,
    cluster_queue: ClusterQueueName | None,
    assignment: Assignment | None,
    targets: tuple[WorkloadKey, ...] = (),
    fair_sharing: str | None = None,
) -> PendingDetails:
    pod_sets: list[PodSetDetails] = []
    if assignment is not None:
        for ps in assignment.pod_sets:
            resources = tuple(
                _resource_detail(a.flavor, s) for a in ps.attempts for s in a.shortfalls
            )
            pod_sets.append(
                PodSetDetails(
                    name=ps.name,
                    count=ps.count,
                    mode=ps.mode(),
                    flavors={r: c.flavor for r, c in sorted(ps.flavors.items())},
                    skipped=_skipped(ps.attempts),
                    resources=resources,
                    message=ps.message(),
                    topology=_topology_detail(ps.placement),
                )
            )
    return PendingDetails(
        reason=reason,
        message=message,
        cluster_queue=cluster_queue,
        pod_sets=tuple(pod_sets),
        preemption_targets=targets,
        fair_sharing=fair_sharing,
    )
