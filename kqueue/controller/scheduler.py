"""The scheduler loop: runs engine cycles when something changed and writes their decisions.

1. Wait until something changed (an informer event calls :meth:`Scheduler.trigger`), then a
   short debounce so a burst of events makes one cycle, not one per event.
2. Run one engine cycle. Admissions are already *assumed* in the engine when it returns, so the
   next cycle counts their quota even before the API has them.
3. Write each admission to its Workload's status with the resourceVersion that was read
   (optimistic concurrency). A refused or failed write rolls the assumption back
   (``engine.forget``) and the workload is tried again: an admission exists only once it is in
   the API, and never twice.
4. Write evictions (``Evicted=True``, plus ``Preempted=True`` for victims) and pending reasons
   (``QuotaReserved=False``, only when reason or message changed, to spare the API server).
5. Run again at once while cycles make progress; otherwise wait for the next change, or for the
   periodic tick that lets requeue backoffs expire.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workloads as wlstatus
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import WORKLOADS, Conflict, Kube, KubeError, NotFound
from kqueue.controller.metrics import Metrics
from kqueue.engine.cycle import Admit, CycleResult, Evict, Pending, Preempt
from kqueue.engine.engine import Engine
from kqueue.engine.types import ClusterQueueName, WorkloadKey

logger = logging.getLogger(__name__)

# Concurrent status writes per cycle: enough to admit a burst quickly, bounded so a cycle with
# thousands of pending workloads does not open thousands of connections.
_WRITE_CONCURRENCY = 16
_EVICTION_ATTEMPTS = 5


class Now(Protocol):
    def __call__(self) -> datetime: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class SchedulerSettings:
    debounce_s: float = 0.02
    """Wait this long after the first change before a cycle, to batch a burst of events."""
    tick_s: float = 2.0
    """Run a cycle at least this often while anything is pending (requeue backoffs expire)."""


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
        self._last_sweep = float("-inf")
        # Extension point: called after each cycle's decisions are written (workload slices to
        # finish, requeue state of PodsReady timeouts...), in registration order.
        self.after_cycle: list[Callable[[Engine, CycleResult], Awaitable[None]]] = []

    def trigger(self) -> None:
        """Something changed that may let a workload in: run a cycle soon."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self._sleep_s()):
                    await self._wake.wait()
            except TimeoutError:
                pass
            await asyncio.sleep(self.settings.debounce_s)
            self._wake.clear()
            progressed = await self.run_once()
            if progressed:
                self._wake.set()

    def _sleep_s(self) -> float:
        """Until the next tick, or sooner when the engine has a deadline (a PodsReady timeout,
        the end of a requeue backoff) that lets it decide something without any event."""
        deadline = self._engine().next_deadline()
        if deadline is None:
            return self.settings.tick_s
        return min(self.settings.tick_s, max((deadline - self._now()).total_seconds(), 0.0))

    async def run_once(self) -> bool:
        """One cycle and its writes; returns whether it admitted, preempted or evicted."""
        engine = self._engine()
        started = time.perf_counter()
        result = engine.schedule(self._now())
        self.cycles += 1
        if result.heads:
            self._metrics.admission_attempt(
                "success" if result.admitted else "inadmissible", time.perf_counter() - started
            )
        await self._apply(engine, result)
        for hook in self.after_cycle:
            await hook(engine, result)
        await self._explain_unconsidered(engine, result)
        touched = {a.cluster_queue for a in result.admitted}
        touched |= {p.cluster_queue for p in result.preempted}
        touched |= {e.cluster_queue for e in result.evicted}
        touched |= {p.cluster_queue for p in result.pending if p.cluster_queue is not None}
        if touched or result.heads:
            self._on_changed(sorted(touched))
        return bool(result.admitted or result.preempted or result.evicted or result.finished)

    # -- writing decisions -------------------------------------------------------------------

    async def _apply(self, engine: Engine, result: CycleResult) -> None:
        jobs: list[Awaitable[None]] = []
        jobs += [self._write_admission(engine, a, result.now) for a in result.admitted]
        jobs += [self._write_preemption(engine, p, result.now) for p in result.preempted]
        jobs += [self._write_eviction(engine, e, result.now) for e in result.evicted]
        jobs += [self._write_pending(p, result.now) for p in result.pending]
        if jobs:
            await asyncio.gather(*jobs)

    def _get(self, key: WorkloadKey) -> Workload | None:
        return self._workloads.get(key)

    async def _put(self, wl: Workload) -> Workload:
        async with self._write_slots:
            body = await self._kube.replace_status(WORKLOADS, wl.to_dict(), namespace=wl.namespace)
        return Workload.model_validate(body)

    async def _write_admission(self, engine: Engine, admit: Admit, now: datetime) -> None:
        wl = self._get(admit.workload)
        if wl is None:
            engine.forget(admit.workload)
            return
        if wl.status.admission is not None or wl.is_finished:
            # Our informer is behind the API: this workload already holds quota (or finished).
            # Never write a second admission; the informer's next event corrects the engine.
            engine.forget(admit.workload)
            return
        updated = wlstatus.admit(wl, admit.admission, now)
        try:
            await self._put(updated)
        except asyncio.CancelledError:
            engine.forget(admit.workload)
            raise
        except (KubeError, OSError, TimeoutError) as exc:
            # Conflict: the workload changed since our informer saw it. Either way the
            # assumption goes, and the workload is tried again with what the API says.
            level = logging.INFO if isinstance(exc, Conflict | NotFound) else logging.WARNING
            logger.log(level, "admission of Workload %s not written: %s", admit.workload, exc)
            engine.forget(admit.workload)
            self.trigger()
            return
        self.admitted += 1
        queued = wlstatus.queued_since(wl) or now
        wait_s = max((now - queued).total_seconds(), 0.0)
        self._metrics.quota_reserved(admit.cluster_queue, wait_s)
        self._metrics.workload_admitted(admit.cluster_queue, wait_s)
        obj = wl.to_dict()
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
            self._metrics.workload_preempted(p.cluster_queue, str(p.reason))
            self._metrics.workload_evicted(p.cluster_queue, c.EVICTED_BY_PREEMPTION)

    async def _write_eviction(self, engine: Engine, e: Evict, now: datetime) -> None:
        if await self._evict(engine, e.workload, str(e.reason), e.message, now):
            self._metrics.workload_evicted(e.cluster_queue, str(e.reason))

    async def _evict(
        self,
        engine: Engine,
        key: WorkloadKey,
        reason: str,
        message: str,
        now: datetime,
        *,
        preempted_reason: str | None = None,
    ) -> bool:
        """Write the eviction, re-reading on conflicts: the engine already counts it as going."""
        wl = self._get(key)
        for attempt in range(_EVICTION_ATTEMPTS):
            if wl is None or not wlstatus.holds_quota(wl):
                engine.cache.evicting.discard(key)
                return False
            updated = wlstatus.evict(
                wl, reason, message, now, preempted_reason=preempted_reason
            )
            if updated is None:
                return False
            if self._releases_itself(wl):
                updated = wlstatus.release(updated, now) or updated
            try:
                await self._put(updated)
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
            obj = wl.to_dict()
            if preempted_reason is not None:
                self._events.record(obj, "Normal", c.PREEMPTED, message)
            self._events.record(obj, "Normal", c.EVICTED, f"{reason}: {message}")
            logger.info("evicting Workload %s: %s: %s", key, reason, message)
            return True
        logger.error("could not write the eviction of Workload %s; will decide again", key)
        engine.cache.evicting.discard(key)
        self.trigger()
        return False

    async def _explain_unconsidered(self, engine: Engine, result: CycleResult) -> None:
        """Pending reasons for workloads no cycle looks at.

        Heads are taken from active ClusterQueues only, so a workload whose ClusterQueue is
        stopped or misconfigured, or whose LocalQueue is missing, gets no decision from the
        cycle; its reason comes from ``engine.explain``. Only workloads that have no
        QuotaReserved condition yet or sit behind an inactive or missing queue are checked.
        """
        # The sweep reads every pending workload: at most once per tick, not once per cycle,
        # so a burst of cycles stays linear in the number of pending workloads.
        loop_now = asyncio.get_running_loop().time()
        if loop_now - self._last_sweep < self.settings.tick_s / 4:
            return
        self._last_sweep = loop_now
        decided = {p.workload for p in result.pending}
        writes: list[Awaitable[None]] = []
        for key in sorted(engine.queues.pending):
            if key in decided:
                continue
            wl = self._get(key)
            if wl is None:
                continue
            cq = engine.queues.cluster_queue_of(key)
            blocked = cq is None or engine.cache.inactive(cq) is not None
            if not blocked and wl.condition(c.QUOTA_RESERVED) is not None:
                continue
            details = engine.explain(key)
            if details is None:
                continue
            writes.append(
                self._write_pending_reason(wl, str(details.reason), details.message, result.now)
            )
        if writes:
            await asyncio.gather(*writes)

    async def _write_pending(self, p: Pending, now: datetime) -> None:
        wl = self._get(p.workload)
        if wl is None:
            return
        await self._write_pending_reason(wl, str(p.reason), p.message, now)

    async def _write_pending_reason(
        self, wl: Workload, reason: str, message: str, now: datetime
    ) -> None:
        updated = wlstatus.pending(wl, reason, message, now)
        if updated is None:
            return
        try:
            await self._put(updated)
        except (KubeError, OSError, TimeoutError) as exc:
            # The next cycle that decides the same writes it again.
            logger.debug("pending status of Workload %s not written: %s", wl.key, exc)
            return
        self._events.record(wl.to_dict(), "Normal", "Pending", f"{reason}: {message}")
