"""The scheduler loop: runs engine cycles when something changed and hands on their decisions.

1. Wait until something changed (an informer event calls :meth:`Scheduler.trigger`), then a
   short debounce so a burst of events makes one cycle, not one per event; wait too while the
   decision writer has as many writes queued as it takes.
2. Run engine cycles: one, or more while they admit, as long as the decision writer has room
   for their writes (``Engine.schedule(now, admissions=n)``, engine/merged_cycles.py). Admissions are
   already *assumed* in the engine when it returns, so the next cycle counts their quota even
   before the API has them.
3. Hand the cycle's admissions, preemptions and evictions to the decision writer
   (``decision_writer.py``) and go on to the next cycle without waiting for them.
4. The ``after_cycle`` hooks run once a cycle's writes are done, cycle after cycle, in order;
   the result they get lists only the evictions that are in the API (an eviction given up is
   decided again by a later cycle, and a PodsReady timeout it carried is taken back).
5. Hand the cycle's pending heads to the pending-reason lane (``pending_reasons.py``), which
   also sweeps for pending workloads no cycle considers.
6. Run again at once while cycles make progress; otherwise wait for the next change, or for the
   periodic tick (sooner when the engine has a deadline) that lets requeue backoffs expire.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace

from kqueue.api.v1alpha1 import Workload
from kqueue.controller.clock import Now, utc_now
from kqueue.controller.decision_writer import DecisionWriter, log_crash
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Kube
from kqueue.controller.metrics import Metrics
from kqueue.controller.pending_reasons import PendingReasons, ReasonSettings
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.types import ClusterQueueName, WorkloadKey

logger = logging.getLogger(__name__)


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

    def reasons(self) -> ReasonSettings:
        return ReasonSettings(
            sweep_every_s=self.tick_s / 4,
            qps=self.reason_qps,
            burst=self.reason_burst,
            interval_s=self.reason_interval_s,
        )


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
        on_written: Callable[[WorkloadKey, str | None], None] = lambda key, rv: None,
        now: Now = utc_now,
        settings: SchedulerSettings | None = None,
    ) -> None:
        self._engine = engine
        self._metrics = metrics
        self._on_changed = on_changed
        self._now = now
        self.settings = settings or SchedulerSettings()
        self._wake = asyncio.Event()
        self.cycles = 0
        self.writer = DecisionWriter(
            workloads=workloads.get,
            kube=kube,
            events=events,
            metrics=metrics,
            releases_itself=releases_itself,
            retry=self.trigger,
            on_written=on_written,
        )
        self.reasons = PendingReasons(
            engine=engine,
            workloads=workloads,
            writer=self.writer,
            events=events,
            now=now,
            settings=self.settings.reasons(),
        )
        # Extension point: called after each cycle's decisions are written (workload slices to
        # finish, requeue state of PodsReady timeouts...), in registration order, cycle after
        # cycle.
        self.after_cycle: list[Callable[[Engine, CycleResult], Awaitable[None]]] = []
        self._hooks: asyncio.Task[None] | None = None
        # The hooks of the last cycle that finished replaced slices, until they are done.
        self._finishing: asyncio.Task[None] | None = None

    @property
    def admitted(self) -> int:
        """Admissions written so far."""
        return self.writer.admitted

    @property
    def reasons_written(self) -> int:
        return self.reasons.written

    def trigger(self) -> None:
        """Something changed that may let a workload in: run a cycle soon."""
        self._wake.set()

    async def run(self) -> None:
        lane = asyncio.get_running_loop().create_task(
            self.reasons.run(), name="scheduler: pending reasons"
        )
        lane.add_done_callback(log_crash)
        try:
            while True:
                try:
                    async with asyncio.timeout(self._sleep_s()):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                await asyncio.sleep(self.settings.debounce_s)
                await self.writer.room()
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
        # As many cycles as admit, up to what the writers can take now: a busy ClusterQueue
        # admits at the rate its writes go out, not one head per loop (engine/merged_cycles.py).
        result = engine.schedule(self._now(), admissions=max(1, self.writer.free_room()))
        self.cycles += result.cycles
        if result.heads:
            self._metrics.admission_attempt(
                "success" if result.admitted else "inadmissible", time.perf_counter() - started
            )
        self._metrics.preemption_skips(result.preemption_skips)
        self._metrics.protection_deferred(result.protection_deferred)
        landed: set[WorkloadKey] = set()
        writes = self.writer.apply(engine, result, landed)
        if self.after_cycle:
            self._hooks = self.writer.spawn_task(
                self._run_hooks(engine, result, writes, landed, self._hooks), "after-cycle hooks"
            )
            if result.finished:
                self._finishing = self._hooks
        self.reasons.sweep(engine, result)
        touched = {a.cluster_queue for a in result.admitted}
        touched |= {p.cluster_queue for p in result.preempted}
        touched |= {e.cluster_queue for e in result.evicted}
        touched |= {p.cluster_queue for p in result.pending if p.cluster_queue is not None}
        if touched or result.heads:
            self._on_changed(sorted(touched))
        return bool(result.admitted or result.preempted or result.evicted or result.finished)

    async def drain(self) -> None:
        """Wait until every decision write started so far and the hooks after it are done."""
        while self.writer.decisions or (self._hooks is not None and not self._hooks.done()):
            await asyncio.wait([*self.writer.decisions, *([self._hooks] if self._hooks else [])])

    async def stop_writes(self) -> None:
        """Cancel every write in flight; admissions not written are forgotten by the engine."""
        await self.writer.stop()

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
