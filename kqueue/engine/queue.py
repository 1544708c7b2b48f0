"""Pending workloads: one queue per ClusterQueue, fed through LocalQueues.

Each ClusterQueue queue is a heap ordered as Kueue orders it (higher priority, then earlier
queue-order timestamp, then UID), so taking the heads of all ClusterQueues costs
O(#ClusterQueues log n), independent of how many workloads wait behind them. Removals are lazy
(a version per entry), so updates are O(log n) too.

Kueue's two strategies differ only in what happens to a head that could not be admitted:

* ``StrictFIFO`` puts it straight back: it stays the head and blocks the queue;
* ``BestEffortFIFO`` parks it as *inadmissible* until an event that can change the outcome moves
  it back (``queue_inadmissible``), so the workloads behind it get their turn. Heads that were
  only skipped in the cycle, or that wait for their preemptions, go back at once; a preemptor
  waiting for its victims stays at the head.

Under admission fair sharing (fairness/usage_ledger.py) a ClusterQueue's next head comes from the
LocalQueue with the lowest weighted usage, read when the head is taken (usage changes with every
admission and sample, so it is never frozen into the heap): each LocalQueue then has its own
heap, and a pop compares their tops, O(#LocalQueues).

Equivalent workloads are evaluated once (Kueue's SchedulingEquivalenceHashing): when a
``BestEffortFIFO`` head is parked because it does not fit (``NoFit``, or ``Preempt`` without
candidates), every queued workload of its equivalence class (``WorkloadInfo.equivalence``) is
parked with it, and new ones of that class are parked as they arrive, until the next event that
moves the parked workloads back. Each class then costs one evaluation per change of state, not
one per workload. ``StrictFIFO`` never does this: its head blocks the queue anyway.

Workloads that cannot be queued at all (deactivated, LocalQueue missing or stopped, ClusterQueue
missing, requeue backoff running) are kept aside with the reason, and placed when that changes.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from datetime import datetime

from .fairness.usage_ledger import FairUsage
from .types import (
    ClusterQueueName,
    LocalQueueKey,
    LocalQueueSpec,
    PendingReason,
    QueueingStrategy,
    RequeueReason,
    StopPolicy,
    WorkloadKey,
)
from .workload import WorkloadInfo

_SortKey = tuple[int, datetime, str, str]
_Entry = tuple[_SortKey, int, WorkloadKey]
# Admission fair sharing (fairness/usage_ledger.py): the weighted usage of a LocalQueue.
FairOrder = Callable[[LocalQueueKey], FairUsage]


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why a pending workload is not in any ClusterQueue queue."""

    reason: PendingReason
    message: str


class ClusterQueueQueue:
    """The pending workloads of one ClusterQueue."""

    def __init__(self, name: ClusterQueueName, strategy: QueueingStrategy) -> None:
        self.name = name
        self.strategy = strategy
        self._heap: list[tuple[_SortKey, int, WorkloadKey]] = []
        self._active: dict[WorkloadKey, tuple[int, WorkloadInfo]] = {}
        self.inadmissible: dict[WorkloadKey, WorkloadInfo] = {}
        # A BestEffortFIFO preemptor waiting for its victims stays at the head (Kueue #6929).
        self.sticky: WorkloadKey | None = None
        # The workload that issued preemptions and waits to be admitted in their place, in any
        # queueing strategy (Kueue's preemptorWorkload): the cycle orders it before the other
        # heads, so that its victims, requeued, do not take back the quota they freed for it.
        self.preemptor: WorkloadKey | None = None
        self._version = 0
        # Admission fair sharing: heads come from the LocalQueue with the lowest usage, so the
        # workloads are also kept in one heap per LocalQueue (same lazy removal); only then.
        self.fair: FairOrder | None = None
        self._lq_heaps: dict[LocalQueueKey, list[_Entry]] = {}
        # Queued (active) workloads per equivalence class, and the classes parked since the
        # last event, each with the head whose verdict parked it.
        self._classes: dict[Hashable, set[WorkloadKey]] = {}
        self.parked_classes: dict[Hashable, WorkloadKey] = {}

    def __len__(self) -> int:
        return len(self._active) + len(self.inadmissible)

    def __contains__(self, key: WorkloadKey) -> bool:
        return key in self._active or key in self.inadmissible

    def active_count(self) -> int:
        return len(self._active)

    def _push_active(self, info: WorkloadInfo) -> None:
        self._version += 1
        self._drop_active(info.key)
        self._active[info.key] = (self._version, info)
        if info.equivalence is not None:
            self._classes.setdefault(info.equivalence, set()).add(info.key)
        entry = (info.queue_key(), self._version, info.key)
        heapq.heappush(self._heap, entry)
        if self.fair is not None:
            heapq.heappush(self._lq_heaps.setdefault(info.local_queue, []), entry)
        if len(self._heap) > 2 * len(self._active) + 64:
            self._compact()

    def _drop_active(self, key: WorkloadKey) -> tuple[int, WorkloadInfo] | None:
        entry = self._active.pop(key, None)
        if entry is not None and entry[1].equivalence is not None:
            members = self._classes.get(entry[1].equivalence)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._classes[entry[1].equivalence]
        return entry

    def _compact(self) -> None:
        self._heap = [
            (info.queue_key(), version, key) for key, (version, info) in self._active.items()
        ]
        heapq.heapify(self._heap)
        self._lq_heaps = {}
        if self.fair is None:
            return
        for key, (version, info) in self._active.items():
            self._lq_heaps.setdefault(info.local_queue, []).append(
                (info.queue_key(), version, key)
            )
        for heap in self._lq_heaps.values():
            heapq.heapify(heap)

    def set_fair(self, fair: FairOrder | None) -> None:
        """Order heads by admission fair sharing (None: the usual order)."""
        if self.fair == fair:
            return
        self.fair = fair
        # The per-LocalQueue heaps exist only under admission fair sharing.
        self._compact()

    def _live(self, entry: _Entry) -> bool:
        current = self._active.get(entry[2])
        return current is not None and current[0] == entry[1]

    def _pop_fair(self, fair: FairOrder) -> WorkloadInfo | None:
        """The head of the LocalQueue with the lowest usage (then the usual order)."""
        best: tuple[FairUsage, _SortKey, LocalQueueKey] | None = None
        for lq in list(self._lq_heaps):
            heap = self._lq_heaps[lq]
            while heap and not self._live(heap[0]):
                heapq.heappop(heap)
            if not heap:
                del self._lq_heaps[lq]
                continue
            candidate = (fair(lq), heap[0][0], lq)
            if best is None or candidate < best:
                best = candidate
        if best is None:
            return None
        _, _, key = heapq.heappop(self._lq_heaps[best[2]])
        entry = self._drop_active(key)
        assert entry is not None
        return entry[1]

    def push_or_update(self, info: WorkloadInfo) -> None:
        """Add or update a workload; a parked one stays parked unless it changed."""
        old = self.inadmissible.get(info.key)
        if old is not None:
            if old == info:
                return
            del self.inadmissible[info.key]
        elif (
            info.key not in self._active
            and info.equivalence in self.parked_classes
            and self.strategy == QueueingStrategy.BEST_EFFORT_FIFO
        ):
            # Its class was found not to fit since the last event: it would be too.
            self.inadmissible[info.key] = info
            return
        self._push_active(info)

    def delete(self, key: WorkloadKey) -> None:
        self._drop_active(key)
        self.inadmissible.pop(key, None)
        if self.sticky == key:
            self.sticky = None
        if self.preemptor == key:
            self.preemptor = None

    def pop(self) -> WorkloadInfo | None:
        if self.sticky is not None and self.sticky in self._active:
            entry = self._drop_active(self.sticky)
            assert entry is not None
            return entry[1]
        if self.fair is not None:
            return self._pop_fair(self.fair)
        while self._heap:
            _, version, key = heapq.heappop(self._heap)
            current = self._active.get(key)
            if current is not None and current[0] == version:
                self._drop_active(key)
                return current[1]
        return None

    def requeue(
        self, info: WorkloadInfo, reason: RequeueReason, *, equivalents: bool = True
    ) -> bool:
        """Put back a head that was not admitted; returns whether it is active (not parked).

        A head parked for not fitting parks its queued equivalents too, unless ``equivalents``
        is False (it has flavors left to try, so its verdict is not final)."""
        if reason == RequeueReason.PENDING_PREEMPTION:
            self.sticky = info.key if self.strategy == QueueingStrategy.BEST_EFFORT_FIFO else None
            self.preemptor = info.key
        else:
            # A preemptor that no longer preempts gives up its precedence (unlike Kueue, which
            # keeps it until admission): it holds nothing back for good.
            if self.sticky == info.key:
                self.sticky = None
            if self.preemptor == info.key:
                self.preemptor = None
        if self.strategy == QueueingStrategy.STRICT_FIFO:
            immediate = reason != RequeueReason.NAMESPACE_MISMATCH
        else:
            immediate = reason in (
                RequeueReason.FAILED_AFTER_NOMINATION,
                RequeueReason.PENDING_PREEMPTION,
            )
        if info.key in self:
            return info.key in self._active
        if immediate:
            self._push_active(info)
            return True
        self.inadmissible[info.key] = info
        if (
            equivalents
            and info.equivalence is not None
            and self.strategy == QueueingStrategy.BEST_EFFORT_FIFO
            and reason in (RequeueReason.NO_FIT, RequeueReason.PREEMPTION_NO_CANDIDATES)
        ):
            self.parked_classes[info.equivalence] = info.key
            for key in sorted(self._classes.get(info.equivalence, ())):
                entry = self._drop_active(key)
                assert entry is not None
                self.inadmissible[key] = entry[1]
        return False

    def parked_by(self, key: WorkloadKey) -> WorkloadKey | None:
        """The head whose verdict parked ``key`` with its class (None: not parked that way)."""
        info = self.inadmissible.get(key)
        if info is None or info.equivalence is None:
            return None
        head = self.parked_classes.get(info.equivalence)
        return head if head != key else None

    def queue_inadmissible(self, keys: set[WorkloadKey] | None = None) -> int:
        """Move parked workloads (all, or those in ``keys``) back to the heap."""
        if keys is None:
            self.parked_classes.clear()
        moved = 0
        for key in sorted(self.inadmissible):
            if keys is not None and key not in keys:
                continue
            self._push_active(self.inadmissible.pop(key))
            moved += 1
        return moved

    def infos(self) -> Iterator[WorkloadInfo]:
        for _, info in self._active.values():
            yield info
        yield from self.inadmissible.values()

    def ordered(self) -> list[WorkloadInfo]:
        """All pending workloads in queue order (sticky first). O(n log n): for explanations."""
        fair = self.fair
        if fair is not None:
            usages = {i.local_queue: fair(i.local_queue) for i in self.infos()}
            infos = sorted(self.infos(), key=lambda i: (usages[i.local_queue], i.queue_key()))
        else:
            infos = sorted(self.infos(), key=lambda i: i.queue_key())
        if self.sticky is not None:
            infos.sort(key=lambda i: i.key != self.sticky)
        return infos


class QueueManager:
    """LocalQueues, ClusterQueue queues and where each pending workload waits."""

    def __init__(self) -> None:
        self.local_queues: dict[LocalQueueKey, LocalQueueSpec] = {}
        self.queues: dict[ClusterQueueName, ClusterQueueQueue] = {}
        self.pending: dict[WorkloadKey, WorkloadInfo] = {}
        self._placed: dict[WorkloadKey, ClusterQueueName] = {}
        self._blocked: dict[WorkloadKey, Blocked] = {}
        self._by_lq: dict[LocalQueueKey, set[WorkloadKey]] = {}
        self._backoff: list[tuple[datetime, WorkloadKey]] = []
        self._now: datetime | None = None
        # Extra reasons to keep a workload out of its queue (e.g. the pod-group barrier).
        self.gates: list[Callable[[WorkloadInfo], Blocked | None]] = []

    # -- queues ------------------------------------------------------------------------------

    def upsert_cluster_queue(self, name: ClusterQueueName, strategy: QueueingStrategy) -> None:
        q = self.queues.get(name)
        if q is None:
            self.queues[name] = ClusterQueueQueue(name, strategy)
            self._replace_all()
        elif q.strategy != strategy:
            q.strategy = strategy
            q.sticky = None

    def delete_cluster_queue(self, name: ClusterQueueName) -> None:
        if self.queues.pop(name, None) is not None:
            self._replace_all()

    def set_fair_order(self, name: ClusterQueueName, fair: FairOrder | None) -> None:
        """Order ``name``'s heads by admission fair sharing (None: the usual order)."""
        q = self.queues.get(name)
        if q is not None:
            q.set_fair(fair)

    def upsert_local_queue(self, spec: LocalQueueSpec) -> None:
        self.local_queues[spec.key] = spec
        self._replace_lq(spec.key)

    def delete_local_queue(self, key: LocalQueueKey) -> None:
        if self.local_queues.pop(key, None) is not None:
            self._replace_lq(key)

    def _replace_lq(self, key: LocalQueueKey) -> None:
        for wl_key in sorted(self._by_lq.get(key, ())):
            self._place(wl_key)

    def _replace_all(self) -> None:
        for key in sorted(self.pending):
            self._place(key)

    # -- workloads ---------------------------------------------------------------------------

    def upsert(self, info: WorkloadInfo) -> None:
        old = self.pending.get(info.key)
        if old is not None and old.local_queue != info.local_queue:
            self._by_lq.get(old.local_queue, set()).discard(info.key)
        self.pending[info.key] = info
        self._by_lq.setdefault(info.local_queue, set()).add(info.key)
        self._place(info.key)

    def delete(self, key: WorkloadKey) -> WorkloadInfo | None:
        info = self.pending.pop(key, None)
        if info is None:
            return None
        self._unplace(key)
        self._blocked.pop(key, None)
        members = self._by_lq.get(info.local_queue)
        if members is not None:
            members.discard(key)
            if not members:
                del self._by_lq[info.local_queue]
        return info

    def _unplace(self, key: WorkloadKey) -> None:
        cq = self._placed.pop(key, None)
        if cq is not None and cq in self.queues:
            self.queues[cq].delete(key)

    def _place(self, key: WorkloadKey) -> None:
        info = self.pending[key]
        blocked, target = self._where(info)
        current = self._placed.get(key)
        if blocked is not None:
            self._unplace(key)
            self._blocked[key] = blocked
            return
        self._blocked.pop(key, None)
        assert target is not None
        if current is not None and current != target:
            self._unplace(key)
        self._placed[key] = target
        self.queues[target].push_or_update(info)

    def _where(self, info: WorkloadInfo) -> tuple[Blocked | None, ClusterQueueName | None]:
        wl = info.obj
        if not wl.active:
            return Blocked(PendingReason.SUSPENDED, "The workload is deactivated"), None
        for gate in self.gates:
            gated = gate(info)
            if gated is not None:
                return gated, None
        lq = self.local_queues.get(info.local_queue)
        if lq is None:
            if not wl.queue_name:
                # A Workload made for an object without a queue label (manageJobsWithoutQueueName
                # and no LocalQueue "default" in its namespace): say what would let it in.
                message = (
                    "The workload has no queue: spec.queueName is empty; set it (or the "
                    "kqueue.io/queue-name label of its job), or create a LocalQueue named "
                    "\"default\" in its namespace"
                )
            else:
                message = f"LocalQueue {wl.queue_name} doesn't exist"
            return Blocked(PendingReason.MISCONFIGURED, message), None
        if lq.stop_policy != StopPolicy.NONE:
            return Blocked(PendingReason.SUSPENDED, f"LocalQueue {lq.name} is stopped"), None
        if lq.cluster_queue not in self.queues:
            return (
                Blocked(
                    PendingReason.MISCONFIGURED, f"ClusterQueue {lq.cluster_queue} doesn't exist"
                ),
                None,
            )
        if wl.requeue_at is not None and (self._now is None or self._now < wl.requeue_at):
            heapq.heappush(self._backoff, (wl.requeue_at, info.key))
            return (
                Blocked(
                    PendingReason.WAITING_FOR_QUOTA,
                    f"Waiting for the requeue backoff to expire at {wl.requeue_at.isoformat()}",
                ),
                None,
            )
        return None, lq.cluster_queue

    def advance(self, now: datetime) -> None:
        """Move workloads whose requeue backoff expired by ``now`` into their queues."""
        self._now = now
        while self._backoff and self._backoff[0][0] <= now:
            _, key = heapq.heappop(self._backoff)
            if key in self.pending and key in self._blocked:
                self._place(key)

    def next_backoff(self) -> datetime | None:
        """When the earliest requeue backoff expires (None: none running)."""
        while self._backoff and self._backoff[0][1] not in self._blocked:
            heapq.heappop(self._backoff)
        return self._backoff[0][0] if self._backoff else None

    def replace(self, key: WorkloadKey) -> None:
        """Place a pending workload again after a gate changed its mind."""
        if key in self.pending:
            self._place(key)

    def blocked(self, key: WorkloadKey) -> Blocked | None:
        return self._blocked.get(key)

    def is_preemptor(self, key: WorkloadKey, cq: ClusterQueueName) -> bool:
        """Whether ``key`` issued preemptions in ``cq`` and waits to be admitted in their place."""
        q = self.queues.get(cq)
        return q is not None and q.preemptor == key

    def pending_in(self, cq: ClusterQueueName) -> Iterator[WorkloadInfo]:
        """The workloads waiting in ``cq`` (heads popped for the cycle excepted), in no order."""
        q = self.queues.get(cq)
        return q.infos() if q is not None else iter(())

    def cluster_queue_of(self, key: WorkloadKey) -> ClusterQueueName | None:
        """The ClusterQueue the workload is queued in (None when blocked)."""
        return self._placed.get(key)

    # -- the cycle ---------------------------------------------------------------------------

    def heads(self, active: set[ClusterQueueName]) -> list[tuple[WorkloadInfo, ClusterQueueName]]:
        """Pop at most one head per active ClusterQueue, in name order."""
        out: list[tuple[WorkloadInfo, ClusterQueueName]] = []
        for name in sorted(self.queues):
            if name not in active:
                continue
            info = self.queues[name].pop()
            if info is not None:
                out.append((info, name))
        return out

    def requeue(
        self,
        info: WorkloadInfo,
        cq: ClusterQueueName,
        reason: RequeueReason,
        *,
        equivalents: bool = True,
    ) -> bool:
        """Put back a popped head; returns whether it is active again (False: parked/gone)."""
        current = self.pending.get(info.key)
        if current is None or self._placed.get(info.key) != cq or cq not in self.queues:
            return False  # deleted, moved or blocked meanwhile
        return self.queues[cq].requeue(current, reason, equivalents=equivalents)

    def queue_inadmissible(self, cqs: list[ClusterQueueName]) -> int:
        moved = 0
        for name in cqs:
            q = self.queues.get(name)
            if q is not None:
                moved += q.queue_inadmissible()
        return moved

    def queue_inadmissible_in_namespace(self, namespace: str) -> int:
        moved = 0
        for q in self.queues.values():
            keys = {k for k in q.inadmissible if self.pending[k].obj.namespace == namespace}
            if keys:
                moved += q.queue_inadmissible(keys)
        return moved

    # -- inspection --------------------------------------------------------------------------

    def positions(self, key: WorkloadKey) -> tuple[int | None, int | None]:
        """0-based positions in the ClusterQueue and in the LocalQueue (None when not queued)."""
        cq = self._placed.get(key)
        if cq is None or cq not in self.queues:
            return None, None
        ordered = self.queues[cq].ordered()
        lq = self.pending[key].local_queue
        in_cq = in_lq = None
        lq_index = 0
        for i, info in enumerate(ordered):
            if info.key == key:
                in_cq, in_lq = i, lq_index
                break
            if info.local_queue == lq:
                lq_index += 1
        return in_cq, in_lq

    def counts(self, cq: ClusterQueueName) -> tuple[int, int]:
        """(active, parked) pending workloads of ``cq``."""
        q = self.queues.get(cq)
        if q is None:
            return 0, 0
        return q.active_count(), len(q.inadmissible)

    def local_queue_counts(self, key: LocalQueueKey) -> tuple[int, int]:
        """(active, parked) pending workloads of LocalQueue ``key`` that wait in a ClusterQueue
        queue; workloads waiting aside (blocked: LocalQueue stopped, backoff...) are in neither."""
        active = parked = 0
        for wl_key in self._by_lq.get(key, ()):
            cq = self._placed.get(wl_key)
            q = self.queues.get(cq) if cq is not None else None
            if q is None or wl_key not in q:
                continue
            if wl_key in q.inadmissible:
                parked += 1
            else:
                active += 1
        return active, parked
