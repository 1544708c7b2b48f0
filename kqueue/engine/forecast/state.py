"""The engine's inputs as immutable values: taken on the engine's own thread, rebuilt elsewhere.

Every object the engine holds (specs, workloads, admissions, nodes) is a frozen value, so a
capture is a handful of tuples of references: O(objects) pointer copies on the thread that owns
the engine, no deep copy. ``rebuild`` feeds them to a fresh engine the way the controller feeds
its own, on any thread, while the live engine goes on.

Not carried over (the forecast ignores them): admission fair sharing's usage history and
PodsReady bookkeeping; assumed admissions not yet confirmed count as admitted. Requeue backoffs
still running are kept (``requeue_at``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from kqueue.engine.engine import Engine
from kqueue.engine.fairness.usage_ledger import AdmissionFairSharingConfig
from kqueue.engine.tas.topology import BoundPod, Node, Topology
from kqueue.engine.types import (
    ClusterQueueSpec,
    CohortSpec,
    FairSharingConfig,
    LimitRangeItem,
    LocalQueueSpec,
    ResourceFlavor,
    Workload,
)


@dataclass(frozen=True, slots=True)
class EngineState:
    """What a fresh engine needs to decide as the captured one would."""

    flavors: tuple[ResourceFlavor, ...]
    topologies: tuple[Topology, ...]
    nodes: tuple[Node, ...]
    pods: tuple[BoundPod, ...]
    cohorts: tuple[CohortSpec, ...]
    cluster_queues: tuple[ClusterQueueSpec, ...]
    local_queues: tuple[LocalQueueSpec, ...]
    priority_classes: tuple[tuple[str, int], ...]
    namespaces: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    limit_ranges: tuple[tuple[str, str, tuple[LimitRangeItem, ...]], ...]
    fair_sharing: FairSharingConfig | None
    admission_fair_sharing: AdmissionFairSharingConfig | None
    # Workloads holding quota (their admission set) and pending ones, in key order.
    admitted: tuple[Workload, ...]
    pending: tuple[Workload, ...]

    @property
    def size(self) -> int:
        return len(self.admitted) + len(self.pending)


def capture(engine: Engine) -> EngineState:
    """The engine's inputs now (call it on the thread that drives ``engine``)."""
    cache, queues = engine.cache, engine.queues
    admitted = tuple(
        replace(aw.info.obj, admission=aw.admission, evicting=key in cache.evicting)
        for key, aw in sorted(cache.workloads.items())
    )
    return EngineState(
        flavors=tuple(cache.flavors.values()),
        topologies=tuple(cache.nodes.topologies.values()),
        nodes=tuple(cache.nodes.nodes.values()),
        pods=tuple(cache.nodes.pods.values()),
        cohorts=tuple(cache.cohorts.values()),
        cluster_queues=tuple(cache.cluster_queues.values()),
        local_queues=tuple(queues.local_queues.values()),
        priority_classes=tuple(engine.priority_classes.items()),
        namespaces=tuple((ns, tuple(labels.items())) for ns, labels in engine.namespaces.items()),
        limit_ranges=tuple(
            (ns, name, items)
            for ns, by_name in engine.limit_ranges.items()
            for name, items in by_name.items()
        ),
        fair_sharing=cache.fair_sharing,
        admission_fair_sharing=engine.admission_fair_sharing,
        admitted=admitted,
        pending=tuple(info.obj for _, info in sorted(queues.pending.items())),
    )


def rebuild(state: EngineState, now: datetime) -> Engine:
    """A fresh engine holding ``state`` (any thread; ``now`` seeds fair-sharing clocks)."""
    e = Engine(
        fair_sharing=state.fair_sharing, admission_fair_sharing=state.admission_fair_sharing
    )
    for topo in state.topologies:
        e.upsert_topology(topo)
    for node in state.nodes:
        e.upsert_node(node)
    for pod in state.pods:
        e.upsert_pod(pod)
    for flavor in state.flavors:
        e.upsert_flavor(flavor)
    for cohort in state.cohorts:
        e.upsert_cohort(cohort)
    for cq in state.cluster_queues:
        e.upsert_cluster_queue(cq)
    for lq in state.local_queues:
        e.upsert_local_queue(lq)
    for name, value in state.priority_classes:
        e.upsert_priority_class(name, value)
    for ns, labels in state.namespaces:
        e.set_namespace_labels(ns, dict(labels))
    for ns, name, items in state.limit_ranges:
        e.set_limit_range(ns, name, items)
    for wl in state.admitted:
        e.upsert_workload(wl)
    for wl in state.pending:
        # A backoff still running is kept; one already over must not hold it back.
        if wl.requeue_at is not None and wl.requeue_at <= now:
            wl = replace(wl, requeue_at=None)
        e.upsert_workload(wl)
    return e
