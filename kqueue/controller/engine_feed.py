"""What each watched kind means to the engine, written once for events and rebuilds alike.

A :class:`Feed` turns one kind's objects (as its informer converted them) into engine calls:
``upsert`` for an add or an update, ``delete`` for a delete. The manager's informer handlers
call them for each event (and then do their own bookkeeping: queue status, requeues), and
:func:`rebuild` calls every ``upsert`` over the stores to build a new leadership term's engine,
so an event and a rebuild can never read an object differently. Workloads have their own feed
(``workload_feed.py``: floors, confirmations, the resync), and so do topology objects
(``topology.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from kqueue.api.v1alpha1 import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    WorkloadPriorityClass,
)
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.types import (
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    FlavorName,
    LimitRangeItem,
    StopPolicy,
)

__all__ = [
    "CLUSTER_QUEUES",
    "COHORTS",
    "FLAVORS",
    "LIMIT_RANGES",
    "LOCAL_QUEUES",
    "NAMESPACES",
    "PRIORITY_CLASSES",
    "Feed",
    "LimitRangeDoc",
    "engine_cluster_queue",
    "rebuild",
]

T = TypeVar("T")
Obj = dict[str, Any]
# A LimitRange as the informer keeps it (from_api.limit_range): namespace, name, items.
LimitRangeDoc = tuple[str, str, tuple[LimitRangeItem, ...]]


@dataclass(frozen=True)
class Feed(Generic[T]):
    """One kind's objects into the engine."""

    upsert: Callable[[Engine, T], None]
    delete: Callable[[Engine, T], None]


def engine_cluster_queue(cq: ClusterQueue) -> ClusterQueueSpec:
    """The engine's ClusterQueue; one being deleted admits nothing new (Kueue's Terminating),
    while the workloads it holds keep their quota until they finish."""
    spec = from_api.cluster_queue(cq)
    if cq.metadata.deletion_timestamp is not None and spec.stop_policy == StopPolicy.NONE:
        spec = replace(spec, stop_policy=StopPolicy.HOLD)
    return spec


def _upsert_local_queue(engine: Engine, lq: LocalQueue) -> None:
    """A LocalQueue for the engine, with its persisted admission fair sharing usage (folded
    in once: after a restart the decayed usage carries on from the status)."""
    spec = from_api.local_queue(lq)
    # Most LocalQueue events are kqueue's own status writes: with the engine's view unchanged
    # there is nothing to re-place (Kueue moves a LocalQueue's workloads only when it changes
    # ClusterQueue). HoldAndDrain is applied again each time, as before: it also drains what
    # was admitted since.
    if engine.local_queue(spec.key) != spec or spec.stop_policy == StopPolicy.HOLD_AND_DRAIN:
        engine.upsert_local_queue(spec)
    usage = from_api.local_queue_usage(lq)
    if usage is not None:
        engine.seed_local_queue_usage(spec.key, *usage)


def _namespace_name(ns: Obj) -> str:
    return str((ns.get("metadata") or {}).get("name"))


FLAVORS: Feed[ResourceFlavor] = Feed(
    lambda e, rf: e.upsert_flavor(from_api.flavor(rf)),
    lambda e, rf: e.delete_flavor(FlavorName(rf.name)),
)
COHORTS: Feed[Cohort] = Feed(
    lambda e, co: e.upsert_cohort(from_api.cohort(co)),
    lambda e, co: e.delete_cohort(CohortName(co.name)),
)
CLUSTER_QUEUES: Feed[ClusterQueue] = Feed(
    lambda e, cq: e.upsert_cluster_queue(engine_cluster_queue(cq)),
    lambda e, cq: e.delete_cluster_queue(ClusterQueueName(cq.name)),
)
LOCAL_QUEUES: Feed[LocalQueue] = Feed(
    _upsert_local_queue,
    lambda e, lq: e.delete_local_queue(lq.namespace or "default", lq.name),
)
PRIORITY_CLASSES: Feed[WorkloadPriorityClass] = Feed(
    lambda e, wpc: e.upsert_priority_class(*from_api.priority_class(wpc)),
    lambda e, wpc: e.delete_priority_class(wpc.name),
)
NAMESPACES: Feed[Obj] = Feed(
    lambda e, ns: e.set_namespace_labels(
        _namespace_name(ns), (ns.get("metadata") or {}).get("labels") or {}
    ),
    lambda e, ns: e.delete_namespace(_namespace_name(ns)),
)
LIMIT_RANGES: Feed[LimitRangeDoc] = Feed(
    lambda e, lr: e.set_limit_range(*lr),
    lambda e, lr: e.delete_limit_range(lr[0], lr[1]),
)


def rebuild(engine: Engine, sources: Iterable[tuple[Feed[Any], Iterable[Any]]]) -> Engine:
    """Feed every object of ``sources`` (a feed and its store's objects, in the order the
    engine needs them: flavors and cohorts before the queues that name them) to ``engine``."""
    for feed, objects in sources:
        for obj in objects:
            feed.upsert(engine, obj)
    return engine
