"""A workload as the engine works with it: the object plus what is resolved from it.

``WorkloadInfo`` is built once per upsert (priorities resolved from the priority classes known
at that time) and shared by the queues, the cache and the snapshot; it is immutable. An
``AdmittedWorkload`` is a WorkloadInfo holding quota in a ClusterQueue.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from .preemption.preemptibility import resolve_preemptibility
from .resources import pod_set_requests
from .types import (
    Admission,
    ClusterQueueName,
    LocalQueueKey,
    PodSet,
    Preemptibility,
    ResourceName,
    Usage,
    Workload,
    WorkloadKey,
)


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    obj: Workload
    # Scheduling priority (queue order, preemptor side).
    priority: int
    # Preemption priority (victim side); never below ``priority``.
    preemption_priority: int
    # Scheduling equivalence class (Kueue's SchedulingHash): workloads with equal classes get
    # the same answer from the flavor assigner and preemption in the same state (None: never
    # treated as equivalent). Derived from ``obj`` and the priorities, so not compared.
    equivalence: Hashable | None = field(default=None, compare=False)
    # queue_key(), derived once: every push onto a queue's heap needs it.
    _queue_key: tuple[int, datetime, str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "_queue_key",
            (-self.priority, self.obj.order_time(), self.obj.uid, self.obj.key),
        )

    @property
    def key(self) -> WorkloadKey:
        return self.obj.key

    @property
    def local_queue(self) -> LocalQueueKey:
        return self.obj.local_queue

    @property
    def uid(self) -> str:
        return self.obj.uid

    @property
    def pod_sets(self) -> tuple[PodSet, ...]:
        return self.obj.pod_sets

    def order_time(self) -> datetime:
        return self.obj.order_time()

    def queue_key(self) -> tuple[int, datetime, str, str]:
        """Kueue's queue order: higher priority, then earlier timestamp, then UID (then key)."""
        return self._queue_key

    def total_requests(self, counts: tuple[int, ...] | None = None) -> list[dict[ResourceName, int]]:
        """Per pod set, the requests of all its pods (at ``counts`` when given)."""
        if counts is None:
            return [pod_set_requests(ps) for ps in self.obj.pod_sets]
        return [pod_set_requests(ps, n) for ps, n in zip(self.obj.pod_sets, counts, strict=True)]

    def preemptibility(self, cq_threshold: int | None) -> Preemptibility:
        return resolve_preemptibility(
            spec=self.obj.preemptibility,
            owner_label=self.obj.owner_preemptibility_label,
            pod_label=self.obj.pod_preemptibility_label,
            preemption_priority=self.preemption_priority,
            priority_threshold=cq_threshold,
        ).value


def resolve_priorities(wl: Workload, classes: Mapping[str, int]) -> tuple[int, int]:
    """Scheduling and preemption priority of ``wl`` given the known priority-class values.

    An explicit value wins over the class; an unknown class counts as 0 (Kueue's default when no
    priority class applies). The preemption priority defaults to the scheduling priority and is
    never lower than it (the API rejects that; clamping keeps the engine safe regardless).
    """
    if wl.priority is not None:
        priority = wl.priority
    elif wl.priority_class is not None:
        priority = classes.get(wl.priority_class, 0)
    else:
        priority = 0
    if wl.preemption_priority is not None:
        preemption = wl.preemption_priority
    elif wl.preemption_priority_class is not None and wl.preemption_priority_class in classes:
        preemption = classes[wl.preemption_priority_class]
    else:
        preemption = priority
    return priority, max(priority, preemption)


def make_info(wl: Workload, classes: Mapping[str, int]) -> WorkloadInfo:
    priority, preemption = resolve_priorities(wl, classes)
    return WorkloadInfo(
        obj=wl,
        priority=priority,
        preemption_priority=preemption,
        equivalence=equivalence_class(wl, priority, preemption),
    )


def equivalence_class(wl: Workload, priority: int, preemption: int) -> Hashable | None:
    """What decides a pending workload's admission besides the state of the queues (Kueue's
    computeSchedulingHash): its LocalQueue (so its ClusterQueue and namespace), priorities,
    preemptibility inputs (a non-preemptible workload fits only within nominal quota) and per
    pod set the name, count, minCount, per-pod requests and what makes flavors eligible (node
    selector, required affinity, tolerations). A workload slice replacing another is never
    equivalent to anything: what it may take depends on the slice it replaces."""
    if wl.replacement_for is not None:
        return None
    return (
        wl.local_queue,
        priority,
        preemption,
        wl.preemptibility,
        wl.owner_preemptibility_label,
        wl.pod_preemptibility_label,
        tuple(
            (
                ps.name,
                ps.count,
                ps.min_count,
                tuple(sorted(ps.requests.items())),
                tuple(sorted(ps.node_selector.items())),
                ps.required_affinity,
                ps.tolerations,
            )
            for ps in wl.pod_sets
        ),
    )


class WorkloadState(StrEnum):
    """Where a workload stands in the engine (``Engine.state``)."""

    ABSENT = "absent"  # not known, finished, or deleted
    PENDING = "pending"  # queued (or parked, inactive, waiting for its queue)
    RESERVING = "reserving"  # admitted by this engine, the write not answered yet
    ADMITTED = "admitted"  # holds quota, as the API says
    EVICTING = "evicting"  # holds quota, its eviction decided


@dataclass(frozen=True, slots=True)
class AdmittedWorkload:
    """A workload holding quota in ``cluster_queue``."""

    info: WorkloadInfo
    admission: Admission
    usage: Usage = field(compare=False)
    # Admitted by this engine but not yet confirmed by the API (see Engine.forget).
    assumed: bool = False

    @property
    def key(self) -> WorkloadKey:
        return self.info.key

    @property
    def cluster_queue(self) -> ClusterQueueName:
        return self.admission.cluster_queue

    @property
    def reserved_at(self) -> datetime:
        return self.admission.reserved_at

    @staticmethod
    def of(info: WorkloadInfo, admission: Admission, assumed: bool = False) -> AdmittedWorkload:
        return AdmittedWorkload(
            info=info, admission=admission, usage=admission.usage(), assumed=assumed
        )
