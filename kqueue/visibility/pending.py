"""Pending workloads of a ClusterQueue or LocalQueue, with positions, reason and message.

Kueue's counterpart is the visibility server's ``pendingworkloads`` endpoints
(``pkg/visibility``): the ClusterQueue's queue in order (heap and parked workloads alike), with
``positionInClusterQueue`` and ``positionInLocalQueue`` counted from 0, sliced by ``offset`` and
``limit``. kqueue adds the pending reason and message the engine gives for each item.

Steps:
1. the ClusterQueue's pending workloads in queue order (the order heads are taken in: priority,
   then queue-order time, then UID; a preemptor waiting for its victims first);
2. positions: the index in that order, and the index among those of the same LocalQueue;
3. keep those of the LocalQueue asked for, if any; slice by offset and limit;
4. for the items kept only, the engine's explanation (reason and message), and the predicted
   start time when one is given (``estimates``: the controller's latest forecast, or one
   computed by the caller; see estimates.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from kqueue.api.suggest import did_you_mean
from kqueue.api.v1alpha1 import format_time
from kqueue.engine.engine import Engine
from kqueue.engine.types import ClusterQueueName, LocalQueueKey, WorkloadKey, local_queue_key
from kqueue.engine.workload import WorkloadInfo

API_VERSION: Final = "visibility.kqueue.io/v1alpha1"
# Predicted start per workload (docs/contracts.md §6): absent when none can be made.
Estimates = Mapping[WorkloadKey, datetime]
# Kueue's default page size for pendingworkloads.
DEFAULT_LIMIT: Final = 1000


class UnknownQueue(LookupError):
    """The ClusterQueue or LocalQueue asked about does not exist; the message names it."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        # The closest existing name, for the person who typed it ("" when none is close).
        self.hint = did_you_mean(name.rpartition("/")[2], self.known)
        super().__init__(f'{kind} "{name}" not found' + (f"; {self.hint}" if self.hint else ""))


@dataclass(frozen=True, slots=True)
class PendingWorkload:
    """One item of a pendingworkloads answer."""

    namespace: str
    name: str
    local_queue: str
    cluster_queue: str
    priority: int
    created: datetime
    # 0-based: 0 is the next workload the ClusterQueue (LocalQueue) would admit.
    position_in_cluster_queue: int
    position_in_local_queue: int
    reason: str
    message: str
    estimated_start: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        """The item as the visibility API serves it (Kueue's PendingWorkload plus reason)."""
        out: dict[str, Any] = {
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "creationTimestamp": format_time(self.created),
            },
            "priority": self.priority,
            "localQueueName": self.local_queue,
            "positionInClusterQueue": self.position_in_cluster_queue,
            "positionInLocalQueue": self.position_in_local_queue,
            "reason": self.reason,
            "message": self.message,
        }
        if self.estimated_start is not None:
            out["estimatedStartTime"] = format_time(self.estimated_start)
        return out


def summary(items: Iterable[PendingWorkload]) -> dict[str, Any]:
    """A ``PendingWorkloadsSummary`` object, as the visibility API answers."""
    return {
        "apiVersion": API_VERSION,
        "kind": "PendingWorkloadsSummary",
        "metadata": {},
        "items": [i.to_dict() for i in items],
    }


def _ordered(engine: Engine, cq: ClusterQueueName) -> list[WorkloadInfo]:
    # The queue of one ClusterQueue in admission order, through the engine's public reader.
    return engine.queued_in_order(cq)


def _item(
    engine: Engine,
    cq: ClusterQueueName,
    info: WorkloadInfo,
    in_cq: int,
    in_lq: int,
    estimates: Estimates | None = None,
) -> PendingWorkload:
    details = engine.explain(info.key)
    wl = info.obj
    return PendingWorkload(
        namespace=wl.namespace,
        name=wl.name,
        local_queue=wl.queue_name,
        cluster_queue=str(cq),
        priority=info.priority,
        created=wl.creation_time,
        position_in_cluster_queue=in_cq,
        position_in_local_queue=in_lq,
        reason=str(details.reason) if details is not None else "",
        message=details.message if details is not None else "",
        estimated_start=estimates.get(info.key) if estimates is not None else None,
    )


def _positioned(engine: Engine, cq: ClusterQueueName) -> Iterator[tuple[WorkloadInfo, int, int]]:
    """Steps 1 and 2: each queued workload with its positions in the ClusterQueue and in its
    LocalQueue."""
    per_lq: dict[LocalQueueKey, int] = {}
    for in_cq, info in enumerate(_ordered(engine, cq)):
        lq = info.local_queue
        in_lq = per_lq.get(lq, 0)
        per_lq[lq] = in_lq + 1
        yield info, in_cq, in_lq


def _page(
    engine: Engine,
    cq: ClusterQueueName,
    only_lq: LocalQueueKey | None,
    offset: int,
    limit: int | None,
    estimates: Estimates | None = None,
) -> list[PendingWorkload]:
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    kept = [p for p in _positioned(engine, cq) if only_lq is None or p[0].local_queue == only_lq]
    end = None if limit is None else offset + limit
    # Step 4 for the page only: an explanation costs a pass over the queue.
    return [_item(engine, cq, *p, estimates) for p in kept[offset:end]]


def in_cluster_queue(
    engine: Engine,
    name: str,
    *,
    offset: int = 0,
    limit: int | None = DEFAULT_LIMIT,
    estimates: Estimates | None = None,
) -> list[PendingWorkload]:
    """The pending workloads of ClusterQueue ``name`` in order; UnknownQueue if it is missing."""
    cq = ClusterQueueName(name)
    known = engine.cluster_queue_names()
    if cq not in known:
        raise UnknownQueue("ClusterQueue", name, known)
    return _page(engine, cq, None, offset, limit, estimates)


def in_local_queue(
    engine: Engine,
    namespace: str,
    name: str,
    *,
    offset: int = 0,
    limit: int | None = DEFAULT_LIMIT,
    estimates: Estimates | None = None,
) -> list[PendingWorkload]:
    """The pending workloads of LocalQueue ``namespace/name`` in its ClusterQueue's order.

    A LocalQueue whose ClusterQueue does not exist has nothing queued (its workloads wait
    aside with reason Misconfigured), as in Kueue.
    """
    key = local_queue_key(namespace, name)
    spec = engine.local_queue(key)
    if spec is None:
        known = [lq.name for lq in engine.local_queue_specs() if lq.namespace == namespace]
        raise UnknownQueue("LocalQueue", f"{namespace}/{name}", known)
    return _page(engine, spec.cluster_queue, key, offset, limit, estimates)


def positions(
    engine: Engine, keys: Collection[str], estimates: Estimates | None = None
) -> dict[str, PendingWorkload]:
    """The queued workloads among ``keys`` (``namespace/name``), wherever they are queued (for
    listings: every ClusterQueue is ordered once, only the workloads asked for are explained)."""
    wanted = set(keys)
    out: dict[str, PendingWorkload] = {}
    for cq in sorted(engine.cluster_queue_names()):
        for info, in_cq, in_lq in _positioned(engine, cq):
            if info.key in wanted:
                out[info.key] = _item(engine, cq, info, in_cq, in_lq, estimates)
    return out
