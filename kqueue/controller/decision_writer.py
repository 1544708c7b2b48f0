"""Writes a cycle's decisions (admissions, preemptions, evictions) to Workload status.

The scheduler loop hands each cycle's result to :meth:`DecisionWriter.apply` and goes on to the
next cycle without waiting (pipelining: the API round trips of one cycle overlap the next):

1. Each decision becomes a write task. Writes for one workload run one after the other, never
   side by side (each starts from what the last one wrote), and at most ``_WRITE_CONCURRENCY``
   status writes are on the wire at once.
2. An admission is already *assumed* in the engine when the cycle returns. It is written with
   the resourceVersion that was read (optimistic concurrency); a refused or failed write rolls
   the assumption back (``engine.forget``) and asks for another cycle: an admission exists only
   once it is in the API, and never twice.
3. An eviction (``Evicted=True``, plus ``Preempted=True`` for a victim) is re-read and retried
   on conflicts; one given up is undone in the engine (``engine.undo_eviction``, as
   ``engine.forget`` undoes an admission), which then no longer counts the workload as going,
   and a later cycle decides again.
4. Responses of our own writes are kept for a few seconds, so a workload's next write starts
   from them while the informer's copy lags behind.
5. :meth:`stop` cancels every write in flight and forgets the admissions not written, so no
   write outlives the leadership term it was issued under.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import re
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.events import EventRecorder, workload_ref
from kqueue.controller.kube import (
    MODIFY_ATTEMPTS,
    Conflict,
    Kube,
    KubeError,
    NotFound,
    Unreachable,
    loads,
    pause_after_lost_answer,
)
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import WORKLOADS
from kqueue.engine.cycle import Admit, CycleResult, Evict, Preempt
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

# Concurrent status writes: enough to admit a burst quickly, bounded so a cycle with thousands
# of decisions does not open thousands of connections.
_WRITE_CONCURRENCY = 16
# Decision writes (admissions, evictions) that may be started but unfinished before the loop
# waits for some to finish: cycles run ahead of the API only this far.
_MAX_QUEUED_DECISIONS = 4 * _WRITE_CONCURRENCY
# Responses of our own writes are kept this long, to start a workload's next write from when
# the informer's copy lags behind (it catches up within a second or so); older ones are dropped,
# so the cache holds a few seconds of writes, not one response per workload ever written.
_WRITTEN_TTL_S = 5.0


class DecisionWriter:
    """Status writes of Workloads for the scheduler: its decisions and its pending reasons."""

    def __init__(
        self,
        *,
        workloads: Callable[[WorkloadKey], Workload | None],
        kube: Kube,
        events: EventRecorder,
        metrics: Metrics,
        releases_itself: Callable[[Workload], bool],
        retry: Callable[[], None],
        on_written: Callable[[WorkloadKey, str | None], None] = lambda key, rv: None,
    ) -> None:
        self._workloads = workloads
        self._kube = kube
        self._events = events
        self._metrics = metrics
        # Workloads with no integration to stop them (plain Workload objects) are released at
        # once on eviction; a Job's Workload is released once the Job has stopped.
        self._releases_itself = releases_itself
        # Asks for another cycle: a decision not written is decided again.
        self._retry = retry
        # Told the resourceVersion of each answered write: the engine's feed then never applies
        # an older event of that workload (workload_feed.py).
        self._on_written = on_written
        self.admitted = 0
        self._write_slots = asyncio.Semaphore(_WRITE_CONCURRENCY)
        # The last write started per workload: a workload's next write waits for it.
        self._inflight: dict[WorkloadKey, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.decisions: set[asyncio.Task[None]] = set()
        """Decision writes started and not finished."""
        self._no_decisions = asyncio.Event()
        self._no_decisions.set()
        # Admissions assumed in an engine whose write has not ended: forgotten on stop.
        self._assumed: dict[WorkloadKey, tuple[Engine, Admit]] = {}
        # Our last write per workload: (when, resourceVersion it was based on, the API's answer
        # as JSON text: decoded only if a later write has to start from it).
        self._written: dict[WorkloadKey, tuple[float, str | None, bytes]] = {}

    # -- starting writes ---------------------------------------------------------------------

    def apply(
        self, engine: Engine, result: CycleResult, landed: set[WorkloadKey]
    ) -> list[asyncio.Task[None]]:
        """Start writing ``result``'s decisions; evictions that land are added to ``landed``."""
        tasks: list[asyncio.Task[None]] = []
        now = result.now
        for a in result.admitted:
            self._assumed[a.workload] = (engine, a)
            tasks.append(self.spawn_write(
                a.workload, functools.partial(self._write_admission, engine, a, now),
                "admission", decision=True,
            ))
        for p in result.preempted:
            tasks.append(self.spawn_write(
                p.victim, functools.partial(self._write_preemption, engine, p, now),
                "preemption", decision=True,
            ))
        for e in result.evicted:
            tasks.append(self.spawn_write(
                e.workload, functools.partial(self._write_eviction, engine, e, now, landed),
                "eviction", decision=True,
            ))
        return tasks

    def spawn_task(self, coro: Awaitable[None], what: str) -> asyncio.Task[None]:
        """A task :meth:`stop` cancels with the writes."""
        task = asyncio.ensure_future(coro)
        task.set_name(f"scheduler: {what}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(log_crash)
        return task

    def spawn_write(
        self, key: WorkloadKey, write: Callable[[], Awaitable[None]], what: str, *, decision: bool
    ) -> asyncio.Task[None]:
        """Run ``write`` once the workload's previous write is done."""
        task = self.spawn_task(self._write(key, self._inflight.get(key), write, what), what)
        self._inflight[key] = task
        task.add_done_callback(functools.partial(self._write_done, key))
        if decision:
            self.decisions.add(task)
            self._no_decisions.clear()
        return task

    def writing(self, key: WorkloadKey) -> bool:
        """Whether a write for the workload is in flight."""
        return key in self._inflight

    async def no_decisions(self) -> None:
        """Wait until no admission or eviction is being written."""
        await self._no_decisions.wait()

    def free_room(self) -> int:
        """How many more decision writes may be started before :meth:`room` would wait."""
        return max(0, _MAX_QUEUED_DECISIONS - len(self.decisions))

    async def room(self) -> None:
        """Wait while too many decision writes are queued: cycles run ahead only so far."""
        while len(self.decisions) >= _MAX_QUEUED_DECISIONS:
            await asyncio.wait(list(self.decisions), return_when=asyncio.FIRST_COMPLETED)

    async def stop(self) -> None:
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

    def _write_done(self, key: WorkloadKey, task: asyncio.Task[None]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        self.decisions.discard(task)
        if not self.decisions:
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
            self._retry()

    # -- reading and writing status -----------------------------------------------------------

    def get(self, key: WorkloadKey) -> Workload | None:
        """The informer's Workload, or our own last write to it when the informer lags."""
        wl = self._workloads(key)
        written = self._written.get(key)
        if wl is None or written is None:
            return wl
        _, based_on, body = written
        if wl.metadata.resource_version != based_on:
            del self._written[key]
            return wl  # the informer has caught up (or someone else wrote since)
        try:
            return Workload.model_validate(loads(body))
        except ValueError:
            return wl

    async def put(self, key: WorkloadKey, wl: Workload) -> None:
        """Write the status; the write carries the resourceVersion ``wl`` was read at."""
        async with self._write_slots:
            body = await self._kube.write_status(
                WORKLOADS, workload_status.status_body(wl), namespace=wl.namespace
            )
        now = time.monotonic()
        # Oldest first (a rewritten key moves to the end): drop what the informer surely has.
        while self._written:
            oldest = next(iter(self._written))
            if now - self._written[oldest][0] < _WRITTEN_TTL_S:
                break
            del self._written[oldest]
        self._written.pop(key, None)
        self._written[key] = (now, wl.metadata.resource_version, body)
        self._on_written(key, _resource_version(body))

    # -- admissions --------------------------------------------------------------------------

    async def _write_admission(self, engine: Engine, admit: Admit, now: datetime) -> None:
        try:
            await self._admit(engine, admit, now)
        finally:
            # Written or rolled back (also on a crash or cancellation): no longer ours to undo,
            # unless a later cycle admitted the workload again meanwhile.
            if self._assumed.get(admit.workload, (None, None))[1] is admit:
                del self._assumed[admit.workload]

    async def _admit(self, engine: Engine, admit: Admit, now: datetime) -> None:
        wl = self.get(admit.workload)
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
            updated = workload_status.admit(
                wl, admit.admission, now, checks=engine.admission_checks_for(admit.admission),
                past_execution_seconds=admit.past_execution_seconds,
            )
            try:
                await self.put(admit.workload, updated)
            except (Unreachable, Conflict) as lost:
                # Unreachable: the answer was lost, not the write: it may have landed. A
                # Conflict may be our own write too: aiohttp sends a PUT whose connection was cut
                # once more by itself, and that copy meets the first one in place. Find out.
                logger.info("admission of Workload %s: %s; reading it back", admit.workload, lost)
                if not await self._landed(
                    admit.workload, updated, pause=isinstance(lost, Unreachable)
                ):
                    raise
        except BaseException as exc:
            # Conflict: the workload changed since our informer saw it. Either way the
            # assumption goes, and the workload is tried again with what the API says.
            engine.forget(admit.workload)
            if not isinstance(exc, KubeError):
                raise
            level = logging.INFO if isinstance(exc, Conflict | NotFound) else logging.WARNING
            logger.log(level, "admission of Workload %s not written: %s", admit.workload, exc)
            self._retry()
            return
        # In the API: from now on the engine reads any later state of the workload as it is
        # (released, evicted), whether or not the informer ever shows this admission.
        engine.confirm(admit.workload)
        self.admitted += 1
        queued = workload_status.queued_since(wl) or now
        wait_s = max((now - queued).total_seconds(), 0.0)
        awaiting = admit.admission.awaiting_checks
        self._metrics.workload_admitted(wl, admit.cluster_queue, wait_s, admitted=not awaiting)
        obj = workload_ref(wl)
        self._events.record(
            obj,
            "Normal",
            c.QUOTA_RESERVED_REASON,
            f"Quota reserved in ClusterQueue {admit.cluster_queue}, wait time since queued was "
            f"{wait_s:.0f}s",
        )
        if not awaiting:  # with admission checks, Admitted comes when all are Ready
            self._events.record(
                obj,
                "Normal",
                c.ADMITTED_REASON,
                f"Admitted by ClusterQueue {admit.cluster_queue}, wait time since reservation "
                "was 0s",
            )
        logger.info(
            "admitted Workload %s in ClusterQueue %s", admit.workload, admit.cluster_queue
        )

    async def _landed(self, key: WorkloadKey, updated: Workload, *, pause: bool = True) -> bool:
        """Whether a status write of ``updated`` whose answer was lost is in the API, sending
        it again while that cannot be told. Never assumed either way: the write carries the
        resourceVersion it was based on, so of it and any resend at most one lands, and once
        the object has moved on without it, none can. Tries until it knows (a leadership that
        ends cancels it, and the engine forgets the admission then). ``pause``: before the first
        read too (after a conflict the API has answered: no need to wait for it).
        """
        namespace, name = key.split("/", 1)
        based_on = updated.metadata.resource_version
        for attempt in itertools.count(1):
            if pause or attempt > 1:
                await asyncio.sleep(pause_after_lost_answer(attempt))
            try:
                current = Workload.model_validate(await self._kube.get(WORKLOADS, name, namespace))
            except NotFound:
                return False
            except KubeError:
                continue
            if current.status.admission == updated.status.admission:
                self._on_written(key, current.metadata.resource_version)
                logger.info("the admission of Workload %s had landed", key)
                return True
            if current.metadata.resource_version != based_on:
                return False  # changed by someone else: our write can no longer land
            try:
                await self.put(key, updated)
                return True
            except (Unreachable, Conflict):
                continue
        raise AssertionError("itertools.count never ends")

    # -- evictions ---------------------------------------------------------------------------

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
            self._metrics.workload_preempted(
                p.preemptor_cluster_queue or p.cluster_queue, str(p.reason)
            )
            self._metrics.workload_evicted(
                self.get(p.victim), p.cluster_queue, c.EVICTED_BY_PREEMPTION
            )

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
            self._metrics.workload_evicted(self.get(e.workload), e.cluster_queue, str(e.reason))

    @staticmethod
    def _undo_timeout(engine: Engine, e: Evict) -> None:
        # Given up: the engine no longer counts the workload as going, and the next cycle may
        # decide its PodsReady timeout again; that decision must be the same requeue, not the
        # next one (counted twice, a workload would be deactivated too early). Done before any
        # await, so no cycle runs in between.
        engine.undo_eviction(e.workload, requeue_count=e.requeue_count, deactivate=e.deactivate)

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
            wl = self.get(key)
            lost = False
            for attempt in range(MODIFY_ATTEMPTS):
                if lost:
                    await asyncio.sleep(pause_after_lost_answer(attempt))
                if wl is None or not workload_status.holds_quota(wl):
                    engine.undo_eviction(key)
                    return False
                updated = workload_status.evict(
                    wl, reason, message, now, preempted_reason=preempted_reason
                )
                if updated is None:
                    return None
                if self._releases_itself(wl):
                    updated = workload_status.release(updated, now) or updated
                try:
                    await self.put(key, updated)
                except NotFound:
                    engine.undo_eviction(key)
                    return False
                except KubeError as exc:
                    # A conflict, or a lost answer: read again (the eviction may have landed,
                    # and the fresh read shows it: nothing is then written twice).
                    logger.info("eviction of Workload %s (attempt %d): %s", key, attempt + 1, exc)
                    lost = isinstance(exc, Unreachable)
                    try:
                        wl = Workload.model_validate(
                            await self._kube.get(
                                WORKLOADS, key.split("/", 1)[1], key.split("/", 1)[0]
                            )
                        )
                    except NotFound:
                        wl = None
                    except KubeError:
                        lost = True
                    continue
                obj = workload_ref(wl)
                if preempted_reason is not None:
                    self._events.record(obj, "Normal", c.PREEMPTED, message)
                self._events.record(obj, "Normal", c.EVICTED, f"{reason}: {message}")
                logger.info("evicting Workload %s: %s: %s", key, reason, message)
                return True
        except Exception:
            # A bug, not an API answer: the victim is no longer counted as going, so a later
            # cycle decides again (one left counted as going would never be evicted).
            engine.undo_eviction(key)
            raise
        logger.error("could not write the eviction of Workload %s; will decide again", key)
        engine.undo_eviction(key)
        self._retry()
        return False


# The first resourceVersion in a Workload's JSON is its own (metadata comes before status and no
# owner reference carries one): read without decoding the whole answer.
_RESOURCE_VERSION = re.compile(rb'"resourceVersion":\s*"([^"]*)"')


def _resource_version(body: bytes) -> str | None:
    match = _RESOURCE_VERSION.search(body)
    return match.group(1).decode() if match is not None else None


def log_crash(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error(
            "scheduler task %r crashed", task.get_name(), exc_info=task.exception()
        )
