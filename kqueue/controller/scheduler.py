"""The scheduler loop: runs engine cycles when something changed and writes their decisions.

1. Wait until something changed (an informer event calls :meth:`Scheduler.trigger`), then a
   short debounce so a burst of events makes one cycle, not one per event.
2. Run one engine cycle. Admissions are already *assumed* in the engine when it returns, so the
   next cycle counts their quota even before the API has them.
3. Start writing the cycle's decisions and go on to the next cycle without waiting for them
   (pipelining: the API round trips of one cycle overlap the next cycles). Each admission is
   written to its Workload's status with the resourceVersion that was read (optimistic
   concurrency). A refused or failed write rolls the assumption back (``engine.forget``) and the
   workload is tried again: an admission exists only once it is in the API, and never twice.
   Writes for one workload run one after the other, never side by side; a bounded number of
   decision writes may be queued before the loop waits for them.
4. Evictions (``Evicted=True``, plus ``Preempted=True`` for victims) are written the same way.
   The ``after_cycle`` hooks run once a cycle's writes are done, cycle after cycle, in order;
   the result they get lists only the evictions that are in the API (an eviction given up is
   decided again by a later cycle, and a PodsReady timeout it carried is taken back).
5. Pending reasons (``QuotaReserved=False``) go through a low-priority lane: a small fixed rate,
   only while no admission or eviction is being written, only when reason or message changed,
   and at most once per workload every few seconds, so they never hold back an admission. Heads a
   cycle considered come first; workloads no cycle considers (a stopped, missing or
   misconfigured queue, or no reason at all yet) are found by a periodic sweep.
6. Run again at once while cycles make progress; otherwise wait for the next change, or for the
   periodic tick that lets requeue backoffs expire.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.clock import Now, utc_now
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import WORKLOADS, Conflict, Kube, KubeError, NotFound
from kqueue.controller.metrics import Metrics
from kqueue.controller.ratelimit import TokenBucket
from kqueue.engine.cycle import Admit, CycleResult, Evict, Preempt
from kqueue.engine.engine import Engine
from kqueue.engine.types import ClusterQueueName, WorkloadKey

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

# Concurrent status writes: enough to admit a burst quickly, bounded so a cycle with thousands
# of decisions does not open thousands of connections.
_WRITE_CONCURRENCY = 16
# Decision writes (admissions, evictions) that may be started but unfinished before the loop
# waits for some to finish: cycles run ahead of the API only this far.
_MAX_QUEUED_DECISIONS = 4 * _WRITE_CONCURRENCY
_EVICTION_ATTEMPTS = 5
# The pending-reason sweep looks at every pending workload again at least this often.
_FULL_SWEEP_S = 30.0
# Pending-reason writes in flight at once; the lane only gets the budget decisions leave.
_REASON_CONCURRENCY = 2
# Responses of our own writes are kept this long, to start a workload's next write from when
# the informer's copy lags behind (it catches up within a second or so); older ones are dropped,
# so the cache holds a few seconds of writes, not one response per workload ever written.
_WRITTEN_TTL_S = 5.0


@dataclass
class SchedulerSettings:
    debounce_s: float = 0.02
    """Wait this long after the first change before a cycle, to batch a burst of events."""
    tick_s: float = 2.0
    """Run a cycle at least this often while anything is pending (requeue backoffs expire)."""
    reason_qps: float = 5.0
    """Pending-reason writes per second at most (a small share of the client's QPS)."""
    reason_burst: int = 5
    """Pending-reason writes allowed back to back after a quiet spell."""
    reason_interval_s: float = 10.0
    """At most one pending-reason write per workload this often (messages carry numbers)."""


def _ref(wl: Workload) -> Obj:
    """What an Event needs of its object, without serializing the whole Workload."""
    meta: Obj = {"name": wl.name, "namespace": wl.namespace, "uid": wl.metadata.uid}
    return {"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": "Workload", "metadata": meta}


class Scheduler:
    def __init__(
        self,
        *,
        engine: Callable[[], Engine],
        workloads: Store[Workload],
        kube: Kube,
        events: EventRecorder,
        metrics: Metrics,
        releases_itself: Callable[[Workload], bool],
        on_changed: Callable[[Iterable[ClusterQueueName]], None] = lambda cqs: None,
        now: Now = utc_now,
        settings: SchedulerSettings | None = None,
    ) -> None:
        self._engine = engine
        self._workloads = workloads
        self._kube = kube
        self._events = events
        self._metrics = metrics
        # Workloads with no integration to stop them (plain Workload objects) are released at
        # once on eviction; a Job's Workload is released once the Job has stopped.
        self._releases_itself = releases_itself
        self._on_changed = on_changed
        self._now = now
        self.settings = settings or SchedulerSettings()
        self._wake = asyncio.Event()
        self._write_slots = asyncio.Semaphore(_WRITE_CONCURRENCY)
        self.cycles = 0
        self.admitted = 0
        self.reasons_written = 0
        self._last_sweep = float("-inf")
        # Pending workloads the sweep found fine, by the object it saw; see _explain_unconsidered.
        self._settled: dict[WorkloadKey, Workload] = {}
        self._settled_shape: tuple[object, ...] = ()
        self._full_sweep_at = float("-inf")
        # Extension point: called after each cycle's decisions are written (workload slices to
        # finish, requeue state of PodsReady timeouts...), in registration order, cycle after
        # cycle.
        self.after_cycle: list[Callable[[Engine, CycleResult], Awaitable[None]]] = []
        # The last write started per workload: a workload's next write waits for it.
        self._inflight: dict[WorkloadKey, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._decisions: set[asyncio.Task[None]] = set()
        self._no_decisions = asyncio.Event()
        self._no_decisions.set()
        self._hooks: asyncio.Task[None] | None = None
        # The hooks of the last cycle that finished replaced slices, until they are done.
        self._finishing: asyncio.Task[None] | None = None
        # Admissions assumed in an engine whose write has not ended: forgotten on shutdown.
        self._assumed: dict[WorkloadKey, tuple[Engine, Admit]] = {}
        # Our last write per workload: (resourceVersion it was based on, the API's answer).
        self._written: dict[WorkloadKey, tuple[float, str | None, Obj]] = {}
        # The pending-reason lane: heads a cycle considered first, then the sweep's finds.
        self._reasons_heads: dict[WorkloadKey, None] = {}
        self._reasons_rest: dict[WorkloadKey, None] = {}
        self._reasons_wake = asyncio.Event()
        self._reason_slots = asyncio.Semaphore(_REASON_CONCURRENCY)
        self._reason_bucket: TokenBucket | None = None
        # When each workload's reason was last written, and whether a cycle had considered it.
        self._last_reason: dict[WorkloadKey, tuple[float, bool]] = {}

    def trigger(self) -> None:
        """Something changed that may let a workload in: run a cycle soon."""
        self._wake.set()

    async def run(self) -> None:
        lane = asyncio.get_running_loop().create_task(
            self._reason_lane(), name="scheduler: pending reasons"
        )
        lane.add_done_callback(_log_crash)
        try:
            while True:
                try:
                    async with asyncio.timeout(self._sleep_s()):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                await asyncio.sleep(self.settings.debounce_s)
                await self._room()
                self._wake.clear()
                progressed = await self.run_once()
                if progressed:
                    self._wake.set()
        finally:
            lane.cancel()
            try:
                await asyncio.gather(lane, return_exceptions=True)
            finally:
                # Even if cancelled again meanwhile: no write may outlive the loop.
                await self.stop_writes()

    def _sleep_s(self) -> float:
        """Until the next tick, or sooner when the engine has a deadline (a PodsReady timeout,
        the end of a requeue backoff) that lets it decide something without any event."""
        deadline = self._engine().next_deadline()
        if deadline is None:
            return self.settings.tick_s
        return min(self.settings.tick_s, max((deadline - self._now()).total_seconds(), 0.0))

    async def run_once(self) -> bool:
        """One cycle, its writes started; returns whether it admitted, preempted or evicted."""
        if self._finishing is not None and not self._finishing.done():
            # A cycle that admitted a replacement slice took the old slice's quota out of the
            # engine. If the replacement's write fails, only that cycle's hooks give it back
            # (the old slice's pods still run): no cycle may decide before then.
            await asyncio.wait([self._finishing])
        engine = self._engine()
        started = time.perf_counter()
        result = engine.schedule(self._now())
        self.cycles += 1
        if result.heads:
            self._metrics.admission_attempt(
                "success" if result.admitted else "inadmissible", time.perf_counter() - started
            )
        self._metrics.preemption_skips(result.preemption_skips)
        landed: set[WorkloadKey] = set()
        writes = self._apply(engine, result, landed)
        if self.after_cycle:
            self._hooks = self._spawn_task(
                self._run_hooks(engine, result, writes, landed, self._hooks), "after-cycle hooks"
            )
            if result.finished:
                self._finishing = self._hooks
        self._explain_unconsidered(engine, result)
        touched = {a.cluster_queue for a in result.admitted}
        touched |= {p.cluster_queue for p in result.preempted}
        touched |= {e.cluster_queue for e in result.evicted}
        touched |= {p.cluster_queue for p in result.pending if p.cluster_queue is not None}
        if touched or result.heads:
            self._on_changed(sorted(touched))
        return bool(result.admitted or result.preempted or result.evicted or result.finished)

    async def drain(self) -> None:
        """Wait until every decision write started so far and the hooks after it are done."""
        while self._decisions or (self._hooks is not None and not self._hooks.done()):
            await asyncio.wait([*self._decisions, *([self._hooks] if self._hooks else [])])

    async def stop_writes(self) -> None:
        """Cancel every write in flight; admissions not written are forgotten by the engine."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        try:
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            # A write cancelled before it began never reached its own rollback.
            for key, (engine, _) in list(self._assumed.items()):
                engine.forget(key)
            self._assumed.clear()
            self._written.clear()

    # -- write tasks -------------------------------------------------------------------------

    def _spawn_task(self, coro: Awaitable[None], what: str) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        task.set_name(f"scheduler: {what}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_crash)
        return task

    def _spawn_write(
        self, key: WorkloadKey, write: Callable[[], Awaitable[None]], what: str, *, decision: bool
    ) -> asyncio.Task[None]:
        task = self._spawn_task(self._write(key, self._inflight.get(key), write, what), what)
        self._inflight[key] = task
        task.add_done_callback(functools.partial(self._write_done, key))
        if decision:
            self._decisions.add(task)
            self._no_decisions.clear()
        return task

    def _write_done(self, key: WorkloadKey, task: asyncio.Task[None]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        self._decisions.discard(task)
        if not self._decisions:
            self._no_decisions.set()

    async def _write(
        self,
        key: WorkloadKey,
        before: asyncio.Task[None] | None,
        write: Callable[[], Awaitable[None]],
        what: str,
    ) -> None:
        if before is not None:
            # One write at a time per workload: this one starts from what the last one wrote.
            await asyncio.wait([before])
        try:
            await write()
        except Exception:
            # A bug, not an API answer (those are handled by each write): log it and decide
            # again, rather than lose the workload's decision silently.
            logger.exception("%s of Workload %s failed unexpectedly", what, key)
            self.trigger()

    async def _room(self) -> None:
        """Wait while too many decision writes are queued: cycles run ahead only so far."""
        while len(self._decisions) >= _MAX_QUEUED_DECISIONS:
            await asyncio.wait(list(self._decisions), return_when=asyncio.FIRST_COMPLETED)

    async def _run_hooks(
        self,
        engine: Engine,
        result: CycleResult,
        writes: list[asyncio.Task[None]],
        landed: set[WorkloadKey],
        before: asyncio.Task[None] | None,
    ) -> None:
        # The hooks read what the cycle's writes did (an admission written or rolled back) and
        # must see the cycles in order.
        if writes:
            await asyncio.wait(writes)
        if before is not None:
            await asyncio.wait([before])
        if any(e.workload not in landed for e in result.evicted):
            # An eviction given up did not happen: no hook may act on it (write the requeue
            # state of a PodsReady timeout that never evicted anything, for one).
            result = replace(
                result, evicted=tuple(e for e in result.evicted if e.workload in landed)
            )
        for hook in self.after_cycle:
            try:
                await hook(engine, result)
            except Exception:
                logger.exception("after-cycle hook %s failed (cycle %d)", hook, result.cycle)

    # -- writing decisions -------------------------------------------------------------------

    def _apply(
        self, engine: Engine, result: CycleResult, landed: set[WorkloadKey]
    ) -> list[asyncio.Task[None]]:
        tasks: list[asyncio.Task[None]] = []
        now = result.now
        for a in result.admitted:
            self._assumed[a.workload] = (engine, a)
            tasks.append(self._spawn_write(
                a.workload, functools.partial(self._write_admission, engine, a, now),
                "admission", decision=True,
            ))
        for p in result.preempted:
            tasks.append(self._spawn_write(
                p.victim, functools.partial(self._write_preemption, engine, p, now),
                "preemption", decision=True,
            ))
        for e in result.evicted:
            tasks.append(self._spawn_write(
                e.workload, functools.partial(self._write_eviction, engine, e, now, landed),
                "eviction", decision=True,
            ))
        for pending in result.pending:
            self._queue_reason(pending.workload, head=True)
        return tasks

    def _get(self, key: WorkloadKey) -> Workload | None:
        """The informer's Workload, or our own last write to it when the informer lags."""
        wl = self._workloads.get(key)
        written = self._written.get(key)
        if wl is None or written is None:
            return wl
        _, based_on, body = written
        if wl.metadata.resource_version != based_on:
            del self._written[key]
            return wl  # the informer has caught up (or someone else wrote since)
        try:
            return Workload.model_validate(body)
        except ValueError:
            return wl

    async def _put(self, key: WorkloadKey, wl: Workload) -> Obj:
        async with self._write_slots:
            body = await self._kube.replace_status(WORKLOADS, wl.to_dict(), namespace=wl.namespace)
        now = time.monotonic()
        # Oldest first (a rewritten key moves to the end): drop what the informer surely has.
        while self._written:
            oldest = next(iter(self._written))
            if now - self._written[oldest][0] < _WRITTEN_TTL_S:
                break
            del self._written[oldest]
        self._written.pop(key, None)
        self._written[key] = (now, wl.metadata.resource_version, body)
        return body

    async def _write_admission(self, engine: Engine, admit: Admit, now: datetime) -> None:
        try:
            await self._admit(engine, admit, now)
        finally:
            # Written or rolled back (also on a crash or cancellation): no longer ours to undo,
            # unless a later cycle admitted the workload again meanwhile.
            if self._assumed.get(admit.workload, (None, None))[1] is admit:
                del self._assumed[admit.workload]

    async def _admit(self, engine: Engine, admit: Admit, now: datetime) -> None:
        wl = self._get(admit.workload)
        if wl is None:
            engine.forget(admit.workload)
            return
        if wl.status.admission is not None or wl.is_finished:
            # Our informer is behind the API: this workload already holds quota (or finished).
            # Never write a second admission; the informer's next event corrects the engine.
            engine.forget(admit.workload)
            return
        try:
            # Inside: whatever fails before the write lands (building the status too) rolls
            # the assumption back.
            updated = workload_status.admit(wl, admit.admission, now)
            await self._put(admit.workload, updated)
        except BaseException as exc:
            # Conflict: the workload changed since our informer saw it. Either way the
            # assumption goes, and the workload is tried again with what the API says.
            engine.forget(admit.workload)
            if not isinstance(exc, KubeError | OSError | TimeoutError):
                raise
            level = logging.INFO if isinstance(exc, Conflict | NotFound) else logging.WARNING
            logger.log(level, "admission of Workload %s not written: %s", admit.workload, exc)
            self.trigger()
            return
        self.admitted += 1
        queued = workload_status.queued_since(wl) or now
        wait_s = max((now - queued).total_seconds(), 0.0)
        self._metrics.workload_admitted(wl, admit.cluster_queue, wait_s)
        obj = _ref(wl)
        self._events.record(
            obj,
            "Normal",
            c.QUOTA_RESERVED_REASON,
            f"Quota reserved in ClusterQueue {admit.cluster_queue}, wait time since queued was "
            f"{wait_s:.0f}s",
        )
        self._events.record(
            obj,
            "Normal",
            c.ADMITTED_REASON,
            f"Admitted by ClusterQueue {admit.cluster_queue}, wait time since reservation was 0s",
        )
        logger.info(
            "admitted Workload %s in ClusterQueue %s", admit.workload, admit.cluster_queue
        )

    async def _write_preemption(self, engine: Engine, p: Preempt, now: datetime) -> None:
        ok = await self._evict(
            engine,
            p.victim,
            c.EVICTED_BY_PREEMPTION,
            p.message,
            now,
            preempted_reason=str(p.reason),
        )
        if ok:
            self._metrics.workload_preempted(p.preemptor_cluster_queue or p.cluster_queue, str(p.reason))
            self._metrics.workload_evicted(self._get(p.victim), p.cluster_queue, c.EVICTED_BY_PREEMPTION)

    async def _write_eviction(
        self, engine: Engine, e: Evict, now: datetime, landed: set[WorkloadKey]
    ) -> None:
        """Write ``e``; once it is in the API, add its workload to ``landed`` (its cycle's)."""
        try:
            written = await self._evict(engine, e.workload, str(e.reason), e.message, now)
        except Exception:
            self._undo_timeout(engine, e)
            raise
        if written is False:
            self._undo_timeout(engine, e)
            return
        landed.add(e.workload)
        if written:
            self._metrics.workload_evicted(self._get(e.workload), e.cluster_queue, str(e.reason))

    @staticmethod
    def _undo_timeout(engine: Engine, e: Evict) -> None:
        # Given up: the engine no longer counts the workload as going, and the next cycle may
        # decide its PodsReady timeout again; that decision must be the same requeue, not the
        # next one (counted twice, a workload would be deactivated too early). Done before any
        # await, so no cycle runs in between.
        if e.requeue_count is not None:
            engine.readiness.undo_timeout(e.workload, e.requeue_count, e.deactivate)

    async def _evict(
        self,
        engine: Engine,
        key: WorkloadKey,
        reason: str,
        message: str,
        now: datetime,
        *,
        preempted_reason: str | None = None,
    ) -> bool | None:
        """Write the eviction, re-reading on conflicts: the engine already counts it as going.

        True once written; None when the API already has it (nothing to write); False when
        given up (the engine no longer counts the workload as going).
        """
        try:
            wl = self._get(key)
            for attempt in range(_EVICTION_ATTEMPTS):
                if wl is None or not workload_status.holds_quota(wl):
                    engine.cache.evicting.discard(key)
                    return False
                updated = workload_status.evict(
                    wl, reason, message, now, preempted_reason=preempted_reason
                )
                if updated is None:
                    return None
                if self._releases_itself(wl):
                    updated = workload_status.release(updated, now) or updated
                try:
                    await self._put(key, updated)
                except NotFound:
                    engine.cache.evicting.discard(key)
                    return False
                except (KubeError, OSError, TimeoutError) as exc:
                    logger.info("eviction of Workload %s (attempt %d): %s", key, attempt + 1, exc)
                    try:
                        wl = Workload.model_validate(
                            await self._kube.get(
                                WORKLOADS, key.split("/", 1)[1], key.split("/", 1)[0]
                            )
                        )
                    except NotFound:
                        wl = None
                    except (KubeError, OSError, TimeoutError):
                        await asyncio.sleep(0.1 * (attempt + 1))
                    continue
                obj = _ref(wl)
                if preempted_reason is not None:
                    self._events.record(obj, "Normal", c.PREEMPTED, message)
                self._events.record(obj, "Normal", c.EVICTED, f"{reason}: {message}")
                logger.info("evicting Workload %s: %s: %s", key, reason, message)
                return True
        except Exception:
            # A bug, not an API answer: the victim is no longer counted as going, so a later
            # cycle decides again (one left counted as going would never be evicted).
            engine.cache.evicting.discard(key)
            raise
        logger.error("could not write the eviction of Workload %s; will decide again", key)
        engine.cache.evicting.discard(key)
        self.trigger()
        return False

    # -- pending reasons ---------------------------------------------------------------------

    def _explain_unconsidered(self, engine: Engine, result: CycleResult) -> None:
        """Queue pending reasons for workloads no cycle looks at.

        Heads are taken from active ClusterQueues only, so a workload whose ClusterQueue is
        stopped or misconfigured, or whose LocalQueue is missing, gets no decision from the
        cycle; its reason comes from ``engine.explain``. A workload merely queued behind others
        gets one only if it has no QuotaReserved condition at all, through the low-priority lane.
        """
        # The sweep reads every pending workload: at most once per tick, not once per cycle,
        # so a burst of cycles stays linear in the number of pending workloads.
        loop_now = asyncio.get_running_loop().time()
        if loop_now - self._last_sweep < self.settings.tick_s / 4:
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
        for key in engine.queues.pending:
            wl = self._workloads.get(key)
            if wl is None or settled.get(key) is wl:
                continue
            if key in decided or key in self._reasons_rest or key in self._reasons_heads:
                continue
            cond = wl.condition(c.QUOTA_RESERVED)
            if cond is not None:
                cq = engine.queues.cluster_queue_of(key)
                if cq is not None and engine.cache.inactive(cq) is None:
                    settled[key] = wl
                    continue
            self._queue_reason(key, head=False)

    @staticmethod
    def _queues_shape(engine: Engine) -> tuple[object, ...]:
        """What decides whether a queued workload is blocked: where each LocalQueue points
        and which ClusterQueues cannot admit (a new engine starts over)."""
        lqs = frozenset(engine.queues.local_queues.values())
        inactive = frozenset(
            cq for cq in engine.cache.cluster_queues if engine.cache.inactive(cq) is not None
        )
        return (id(engine), lqs, inactive)

    def _queue_reason(self, key: WorkloadKey, *, head: bool) -> None:
        if head:
            self._reasons_rest.pop(key, None)
            self._reasons_heads[key] = None
        elif key not in self._reasons_heads:
            self._reasons_rest[key] = None
        self._reasons_wake.set()

    def _next_reason(self) -> tuple[WorkloadKey, bool] | None:
        """The next workload to write a reason for, and whether a cycle considered it."""
        for queued, head in ((self._reasons_heads, True), (self._reasons_rest, False)):
            if queued:
                key = next(iter(queued))
                del queued[key]
                return key, head
        return None

    def _reason_update(
        self, key: WorkloadKey, head: bool
    ) -> tuple[Workload, Workload, str] | None:
        """(the Workload as read, as it should be written, the reason) or None: no write due."""
        if key in self._inflight:
            return None  # a decision (or reason) is being written: it speaks for the workload
        engine = self._engine()
        details = engine.explain(key)
        if details is None:
            return None  # admitted or gone since it was queued
        wl = self._get(key)
        if wl is None:
            return None
        reason = str(details.reason)
        last = self._last_reason.get(key)
        cond = wl.condition(c.QUOTA_RESERVED)
        if last is not None and cond is not None and cond.reason == reason:
            at, was_head = last
            # The same reason with another message: once per interval. A new reason (its
            # queue was stopped, say), or a cycle's first verdict replacing a placeholder
            # ("waiting to be considered"), is written at once.
            if time.monotonic() - at < self.settings.reason_interval_s and (was_head or not head):
                return None
        updated = workload_status.pending(wl, reason, details.message, self._now())
        return None if updated is None else (wl, updated, reason)

    async def _reason_lane(self) -> None:
        """Write queued pending reasons with what admissions and evictions leave of the budget."""
        while True:
            try:
                await self._reason_lane_loop()
            except Exception:
                # A bug here must not end pending reasons for the rest of the term.
                logger.exception("pending-reason writer failed; restarting it in 1s")
                await asyncio.sleep(1.0)

    async def _reason_lane_loop(self) -> None:
        if self._reason_bucket is None:
            self._reason_bucket = TokenBucket(
                self.settings.reason_qps, self.settings.reason_burst
            )
        skipped = 0
        while True:
            nxt = self._next_reason()
            if nxt is None:
                self._reasons_wake.clear()
                self._prune_reason_times()
                await self._reasons_wake.wait()
                continue
            key, head = nxt
            if self._reason_update(key, head) is None:
                skipped += 1
                if skipped % 256 == 0:
                    await asyncio.sleep(0)  # a long run of skips must not hold the loop
                continue
            await self._reason_slots.acquire()
            try:
                # Only while no admission or eviction is being written: a reason never queues
                # in front of a decision for the client's request budget.
                await self._no_decisions.wait()
                await self._reason_bucket.acquire()
                # Read again: the workload may have been admitted while the lane waited.
                change = self._reason_update(key, head)
                if change is None:
                    self._reason_slots.release()
                    continue
                self._last_reason[key] = (time.monotonic(), head)
                task = self._spawn_write(
                    key, functools.partial(self._write_reason, key, *change), "pending reason",
                    decision=False,
                )
            except BaseException:
                # Cancelled or crashed before the write took the slot over: give it back, or
                # each restart of the lane would leave one slot fewer.
                self._reason_slots.release()
                raise
            task.add_done_callback(lambda _: self._reason_slots.release())

    def _prune_reason_times(self) -> None:
        horizon = time.monotonic() - self.settings.reason_interval_s
        for key in [k for k, (at, _) in self._last_reason.items() if at < horizon]:
            del self._last_reason[key]

    async def _write_reason(
        self, key: WorkloadKey, wl: Workload, updated: Workload, reason: str
    ) -> None:
        try:
            await self._put(key, updated)
        except (KubeError, OSError, TimeoutError) as exc:
            # The next cycle (or sweep) that finds it pending queues it again.
            logger.debug("pending status of Workload %s not written: %s", key, exc)
            return
        self.reasons_written += 1
        before = wl.condition(c.QUOTA_RESERVED)
        if before is None or before.status != "False" or before.reason != reason:
            # One Pending event per reason, not per message (numbers in it change often).
            cond = updated.condition(c.QUOTA_RESERVED)
            message = cond.message if cond is not None else ""
            self._events.record(_ref(wl), "Normal", "Pending", f"{reason}: {message}")


def _log_crash(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error(
            "scheduler task %r crashed", task.get_name(), exc_info=task.exception()
        )
