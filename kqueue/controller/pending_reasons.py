"""The low-priority lane that writes why a Workload waits (``QuotaReserved=False``).

A pending reason is a hint for users, never worth delaying an admission for:

1. Heads a cycle considered are queued first (:meth:`PendingReasons.queue` with
   ``head=True``); workloads no cycle considers (a stopped, missing or misconfigured queue, or
   no reason at all yet) are found by a periodic sweep (:meth:`PendingReasons.sweep`), at
   most once per tick, skipping workloads found fine before until they or the queues change.
2. The lane (:meth:`PendingReasons.run`) takes them in that order and writes at a small fixed
   rate, only while no admission or eviction is being written, only when reason or message
   changed, and at most once per workload every few seconds (a new reason at once).
3. A reason whose write fails is dropped: the next cycle or sweep that finds the workload
   pending queues it again. One Pending event is recorded per reason, not per message.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.clock import Now
from kqueue.controller.decision_writer import DecisionWriter
from kqueue.controller.events import EventRecorder, workload_ref
from kqueue.controller.informer import Store
from kqueue.controller.kube import KubeError
from kqueue.controller.ratelimit import TokenBucket, background
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey

logger = logging.getLogger(__name__)

# The sweep looks at every pending workload again at least this often.
_FULL_SWEEP_S = 30.0
# Pending-reason writes in flight at once; the lane only gets the budget decisions leave.
_REASON_CONCURRENCY = 2


@dataclass
class ReasonSettings:
    sweep_every_s: float = 0.5
    """The sweep runs at most this often (a quarter of the scheduler's tick)."""
    qps: float = 5.0
    """Pending-reason writes per second at most (a small share of the client's QPS)."""
    burst: int = 5
    """Pending-reason writes allowed back to back after a quiet spell."""
    interval_s: float = 10.0
    """At most one pending-reason write per workload this often (messages carry numbers)."""


class PendingReasons:
    """Queues and writes the pending reasons of Workloads, through the decision writer."""

    def __init__(
        self,
        *,
        engine: Callable[[], Engine],
        workloads: Store[Workload],
        writer: DecisionWriter,
        events: EventRecorder,
        now: Now,
        settings: ReasonSettings,
    ) -> None:
        self._engine = engine
        self._workloads = workloads
        self._writer = writer
        self._events = events
        self._now = now
        self._settings = settings
        self.written = 0
        self._last_sweep = float("-inf")
        # Pending workloads the sweep found fine, by the object it saw; see sweep().
        self._settled: dict[WorkloadKey, Workload] = {}
        self._settled_shape: tuple[object, ...] = ()
        self._full_sweep_at = float("-inf")
        # Heads a cycle considered first, then the sweep's finds.
        self._heads: dict[WorkloadKey, None] = {}
        self._rest: dict[WorkloadKey, None] = {}
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(_REASON_CONCURRENCY)
        self._bucket: TokenBucket | None = None
        # When each workload's reason was last written, and whether a cycle had considered it.
        self._last_written: dict[WorkloadKey, tuple[float, bool]] = {}

    # -- what to write -----------------------------------------------------------------------

    def queue(self, key: WorkloadKey, *, head: bool) -> None:
        """Write the workload's reason soon; ``head``: a cycle considered it (goes first)."""
        if head:
            self._rest.pop(key, None)
            self._heads[key] = None
        elif key not in self._heads:
            self._rest[key] = None
        self._wake.set()

    def sweep(self, engine: Engine, result: CycleResult) -> None:
        """Queue the cycle's heads, and reasons for workloads no cycle looks at.

        Heads are taken from active ClusterQueues only, so a workload whose ClusterQueue is
        stopped or misconfigured, or whose LocalQueue is missing, gets no decision from the
        cycle; its reason comes from ``engine.explain``. A workload merely queued behind others
        gets one only if it has no QuotaReserved condition at all, through the low-priority lane.
        """
        for pending in result.pending:
            self.queue(pending.workload, head=True)
        # The sweep reads every pending workload: at most once per tick, not once per cycle,
        # so a burst of cycles stays linear in the number of pending workloads.
        loop_now = asyncio.get_running_loop().time()
        if loop_now - self._last_sweep < self._settings.sweep_every_s:
            return
        self._last_sweep = loop_now
        # A workload found fine (it has a reason, its queue can admit) stays fine until the
        # Workload changes (the informer stores a new object) or the queues do: only those are
        # looked at again, so a sweep over 50,000 settled workloads costs a few milliseconds.
        # A full sweep now and then catches what the queues' shape does not show (namespace
        # labels, for instance).
        shape = self._queues_shape(engine)
        if shape != self._settled_shape or loop_now - self._full_sweep_at >= _FULL_SWEEP_S:
            self._settled.clear()
            self._settled_shape = shape
            self._full_sweep_at = loop_now
        settled = self._settled
        decided = {p.workload for p in result.pending}
        for key in engine.pending_keys():
            wl = self._workloads.get(key)
            if wl is None or settled.get(key) is wl:
                continue
            if key in decided or key in self._rest or key in self._heads:
                continue
            cond = wl.condition(c.QUOTA_RESERVED)
            if cond is not None:
                cq = engine.cluster_queue_of(key)
                if cq is not None and engine.inactive(cq) is None:
                    settled[key] = wl
                    continue
            self.queue(key, head=False)

    @staticmethod
    def _queues_shape(engine: Engine) -> tuple[object, ...]:
        """What decides whether a queued workload is blocked: where each LocalQueue points
        and which ClusterQueues cannot admit (a new engine starts over)."""
        return (id(engine), engine.local_queue_specs(), engine.inactive_cluster_queues())

    def _next(self) -> tuple[WorkloadKey, bool] | None:
        """The next workload to write a reason for, and whether a cycle considered it."""
        for queued, head in ((self._heads, True), (self._rest, False)):
            if queued:
                key = next(iter(queued))
                del queued[key]
                return key, head
        return None

    def _update(self, key: WorkloadKey, head: bool) -> tuple[Workload, Workload, str] | None:
        """(the Workload as read, as it should be written, the reason) or None: no write due."""
        if self._writer.writing(key):
            return None  # a decision (or reason) is being written: it speaks for the workload
        engine = self._engine()
        details = engine.explain(key)
        if details is None:
            return None  # admitted or gone since it was queued
        wl = self._writer.get(key)
        if wl is None:
            return None
        reason = str(details.reason)
        last = self._last_written.get(key)
        cond = wl.condition(c.QUOTA_RESERVED)
        if last is not None and cond is not None and cond.reason == reason:
            at, was_head = last
            # The same reason with another message: once per interval. A new reason (its
            # queue was stopped, say), or a cycle's first verdict replacing a placeholder
            # ("waiting to be considered"), is written at once.
            if time.monotonic() - at < self._settings.interval_s and (was_head or not head):
                return None
        updated = workload_status.pending(wl, reason, details.message, self._now())
        return None if updated is None else (wl, updated, reason)

    # -- the lane ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Write queued pending reasons with what admissions and evictions leave of the budget."""
        with background():  # the client's background lane: never ahead of a decision
            await self._run()

    async def _run(self) -> None:
        while True:
            try:
                await self._loop()
            except Exception:
                # A bug here must not end pending reasons for the rest of the term.
                logger.exception("pending-reason writer failed; restarting it in 1s")
                await asyncio.sleep(1.0)

    async def _loop(self) -> None:
        if self._bucket is None:
            settings = self._settings
            self._bucket = TokenBucket(settings.qps, settings.burst)
        skipped = 0
        while True:
            nxt = self._next()
            if nxt is None:
                self._wake.clear()
                self._prune()
                await self._wake.wait()
                continue
            key, head = nxt
            if self._update(key, head) is None:
                skipped += 1
                if skipped % 256 == 0:
                    await asyncio.sleep(0)  # a long run of skips must not hold the loop
                continue
            await self._slots.acquire()
            try:
                # Only while no admission or eviction is being written: a reason never queues
                # in front of a decision for the client's request budget.
                await self._writer.no_decisions()
                await self._bucket.acquire()
                # Read again: the workload may have been admitted while the lane waited.
                change = self._update(key, head)
                if change is None:
                    self._slots.release()
                    continue
                self._last_written[key] = (time.monotonic(), head)
                task = self._writer.spawn_write(
                    key, functools.partial(self._write, key, *change), "pending reason",
                    decision=False,
                )
            except BaseException:
                # Cancelled or crashed before the write took the slot over: give it back, or
                # each restart of the lane would leave one slot fewer.
                self._slots.release()
                raise
            task.add_done_callback(lambda _: self._slots.release())

    def _prune(self) -> None:
        horizon = time.monotonic() - self._settings.interval_s
        for key in [k for k, (at, _) in self._last_written.items() if at < horizon]:
            del self._last_written[key]

    async def _write(self, key: WorkloadKey, wl: Workload, updated: Workload, reason: str) -> None:
        try:
            await self._writer.put(key, updated)
        except KubeError as exc:
            # The next cycle (or sweep) that finds it pending queues it again.
            logger.debug("pending status of Workload %s not written: %s", key, exc)
            return
        self.written += 1
        before = wl.condition(c.QUOTA_RESERVED)
        if before is None or before.status != "False" or before.reason != reason:
            # One Pending event per reason, not per message (numbers in it change often).
            cond = updated.condition(c.QUOTA_RESERVED)
            message = cond.message if cond is not None else ""
            self._events.record(workload_ref(wl), "Normal", "Pending", f"{reason}: {message}")
