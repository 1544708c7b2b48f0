"""A deduplicating, rate-limited work queue of object keys, and the workers that drain it.

Semantics follow client-go's workqueue, which every Kubernetes controller relies on:

* a key is queued at most once, however many events arrive for it before a worker takes it;
* a key is never processed by two workers at once: if it is added while being processed, it is
  queued again (once) when that processing is :meth:`WorkQueue.done`;
* failures are retried with a per-key exponential backoff (``base_delay * 2**n``, capped at
  ``max_delay``) until :meth:`WorkQueue.forget` resets it;
* :meth:`WorkQueue.add_after` queues a key later; of several pending delays the earliest wins.

Reconcilers therefore only ever see a key, never an event: they read the current state from an
informer's store, which makes them naturally idempotent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kqueue.controller.clock import Clock, LoopClock

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class QueueShutDown(Exception):
    """The queue was shut down: no more keys will be handed out."""


@dataclass(frozen=True)
class Requeue:
    """Returned by a reconciler to process the key again.

    ``after=None`` retries with the key's backoff (as for an error, without logging one);
    ``after=N`` processes it again in N seconds and resets the backoff.
    """

    after: float | None = None


class Reconciler(Protocol[K_contra]):
    """Brings the world in line with the desired state of one object key.

    Returns ``None`` when done, a :class:`Requeue` to come back later; raising an exception
    logs it and retries with backoff.
    """

    async def __call__(self, key: K_contra, /) -> Requeue | None: ...


class WorkQueue(Generic[K]):
    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        base_delay: float = 0.005,
        max_delay: float = 300.0,
    ) -> None:
        self.name = name
        self._clock = clock if clock is not None else LoopClock()
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._queue: deque[K] = deque()
        # Keys that must be processed (again): queued ones, and ones re-added while processing.
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, tuple[float, asyncio.Task[None]]] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._idle = asyncio.Event()
        self._idle.set()
        self._shut_down = False

    # -- adding ---------------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue ``key`` unless it is already waiting; ignored after :meth:`shutdown`."""
        if self._shut_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # done() queues it again once the current run finishes
        self._queue.append(key)
        self._idle.clear()
        self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` in ``delay`` seconds (now if ``delay <= 0``)."""
        if self._shut_down:
            return
        if delay <= 0:
            self.add(key)
            return
        ready_at = self._clock.now() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()
        task = asyncio.get_running_loop().create_task(
            self._fire(key, delay), name=f"workqueue {self.name}: {key!r} after {delay:.3f}s"
        )
        self._timers[key] = (ready_at, task)

    async def _fire(self, key: K, delay: float) -> None:
        await self._clock.sleep(delay)
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its backoff and lengthen the backoff; returns the delay used."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        # The exponent is capped so a key failing for days cannot overflow the float.
        delay = min(self._base_delay * (1 << min(failures, 64)), self._max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (call it once the key was processed successfully)."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        """How many rate-limited retries ``key`` has had since it was last forgotten."""
        return self._failures.get(key, 0)

    # -- taking -------------------------------------------------------------------------------

    async def get(self) -> K:
        """Wait for a key and mark it as being processed; pair every call with :meth:`done`.

        Raises :class:`QueueShutDown` once the queue is shut down.
        """
        while not self._queue:
            if self._shut_down:
                raise QueueShutDown(self.name)
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    # We were woken for a key we will not take: pass the wake-up on.
                    self._wake_one()
                elif fut in self._getters:
                    self._getters.remove(fut)
                raise
        if self._shut_down:
            raise QueueShutDown(self.name)
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """Mark ``key``'s processing finished; re-queue it if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty and not self._shut_down:
            self._queue.append(key)
            self._wake_one()
        if not self._queue and not self._processing:
            self._idle.set()

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    # -- state and shutdown -------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys waiting to be processed (not counting delayed ones or those being processed)."""
        return len(self._queue)

    @property
    def processing(self) -> frozenset[K]:
        return frozenset(self._processing)

    @property
    def delayed(self) -> int:
        """Keys waiting for an :meth:`add_after` delay."""
        return len(self._timers)

    @property
    def is_shut_down(self) -> bool:
        return self._shut_down

    async def wait_idle(self) -> None:
        """Wait until nothing is queued or being processed (delayed keys do not count)."""
        await self._idle.wait()

    def shutdown(self) -> None:
        """Stop handing out keys: waiting and future :meth:`get` calls raise QueueShutDown.

        Queued and delayed keys are dropped; keys being processed finish normally (their
        :meth:`done` is still expected). Idempotent.
        """
        if self._shut_down:
            return
        self._shut_down = True
        self._queue.clear()
        self._dirty.clear()
        for _, task in self._timers.values():
            task.cancel()
        self._timers.clear()
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
        if not self._processing:
            self._idle.set()


async def run_workers(
    queue: WorkQueue[K],
    reconcile: Reconciler[K],
    *,
    workers: int,
) -> None:
    """Process keys from ``queue`` with ``workers`` concurrent workers until it is shut down.

    Each key goes through ``reconcile`` with the queue's guarantees (one worker per key at a
    time). Returns when the queue is shut down and the workers finished their current keys;
    cancelling it cancels the workers.
    """
    if workers < 1:
        raise ValueError(f"workers: must be >= 1, got {workers}")
    async with asyncio.TaskGroup() as group:
        for i in range(workers):
            group.create_task(
                _worker(queue=queue, reconcile=reconcile), name=f"{queue.name} worker {i}"
            )


def namespace_terminating(exc: BaseException) -> bool:
    """``exc`` is the API server refusing to create something in a namespace being deleted
    (:attr:`KubeError.namespace_terminating`)."""
    return bool(getattr(exc, "namespace_terminating", False))


async def _worker(*, queue: WorkQueue[K], reconcile: Reconciler[K]) -> None:
    while True:
        try:
            key = await queue.get()
        except QueueShutDown:
            return
        try:
            result = await reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if namespace_terminating(exc):
                # Expected while a namespace is deleted: its objects' deletions follow, and a
                # retry could only be refused again (no traceback, no retry).
                logger.info("reconciling %s %r: %s; not retried", queue.name, key, exc)
                queue.forget(key)
                continue
            delay = queue.add_rate_limited(key)
            logger.exception(
                "reconciling %s %r failed (attempt %d); retrying in %.3fs",
                queue.name,
                key,
                queue.num_requeues(key),
                delay,
            )
        else:
            if result is None:
                queue.forget(key)
            elif result.after is None:
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
                queue.add_after(key, result.after)
        finally:
            queue.done(key)
