"""The manager's writes on its workers (a workload's copies, their deletion, the winner's job),
kept off the syncs' path (docs/multikueue.md, "Writes on the workers").

A sync starts its writes and waits for them at most :data:`SETTLE_SECONDS`: a worker that
answers at once is done with in the sync, as before; a slow one goes on in the background,
and the workload is queued again when its write ends. The check's few sync workers
(``WORKLOAD_CHECK_WORKERS``) then go on with workloads that other workers can place, rather than
all waiting on one worker's creates (docs/benchmarks.md section 12: 16 syncs spent a 10 x 200
run waiting on creates the workers had long made).

A create that got no answer, or was answered AlreadyExists, may have made the copy: it counts
as *unconfirmed*, a copy the controller waits to see in the worker's watch, and is not sent again
until :data:`REMOTE_WRITE_TIMEOUT_SECONDS` have passed without the copy showing (by then the
worker's API server has finished with the request, one way or the other). A worker that fails a
write (no answer, 429, 5xx) is written to again only after a backoff of its own, exponential and
capped (tenacity's ``wait_exponential``), reset by its next success; the other workers go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from tenacity import RetryCallState
from tenacity.wait import wait_exponential

from kqueue.controller.kube import KubeError
from kqueue.controller.webhook_server.server import WEBHOOK_TIMEOUT_SECONDS

logger = logging.getLogger(__name__)

# A write on a worker passes at most two of the worker kqueue's webhooks in series (a job's
# mutating and validating ones; a Workload's validating one), each given WEBHOOK_TIMEOUT_SECONDS
# by the worker's API server, and then the API server's own queueing and storage, allowed as much
# again. Giving up sooner (5 s, the read timeout, before) abandoned creates the worker completed
# anyway: 1,098 of them in the 10 x 200 benchmark, each sent again.
REMOTE_WRITE_TIMEOUT_SECONDS: Final = 3.0 * WEBHOOK_TIMEOUT_SECONDS
# How long a sync waits for its writes before leaving them to run on their own.
SETTLE_SECONDS: Final = 1.0
# Writes in flight to one worker at a time: a slow worker gets no more than this many requests
# queued behind its webhooks, and the others are not held up by its queue.
WRITES_PER_WORKER: Final = 8
# A failing worker is written to again after 1, 2, 4 ... seconds, at most BACKOFF_MAX_SECONDS.
BACKOFF_INITIAL_SECONDS: Final = 1.0
BACKOFF_MAX_SECONDS: Final = 30.0


class WorkerBackoff:
    """Per worker: how long to wait before writing to it again, after its consecutive failures
    (tenacity's exponential wait, capped). A success resets it."""

    def __init__(
        self,
        initial: float = BACKOFF_INITIAL_SECONDS,
        maximum: float = BACKOFF_MAX_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.initial = initial
        self._wait = wait_exponential(multiplier=initial, min=initial, max=maximum)
        self._clock = clock
        self._failures: dict[str, int] = {}
        self._until: dict[str, float] = {}

    def failed(self, worker: str) -> float:
        """Count a failure of ``worker``; the seconds until it is written to again."""
        failures = self._failures.get(worker, 0) + 1
        self._failures[worker] = failures
        state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
        state.attempt_number = failures
        delay = float(self._wait(state))
        self._until[worker] = self._clock() + delay
        return delay

    def succeeded(self, worker: str) -> None:
        self._failures.pop(worker, None)
        self._until.pop(worker, None)

    def left(self, worker: str) -> float:
        """Seconds until ``worker`` may be written to again (0: now)."""
        until = self._until.get(worker)
        return 0.0 if until is None else max(0.0, until - self._clock())


WriteKey = tuple[str, str, str]
"""``(what, worker, workload key)``: ``what`` is ``create``, ``delete`` or ``job``."""


@dataclass
class RemoteWrites:
    """The writes in flight to the workers, the creates not yet confirmed by a watch, and the
    workers' backoffs."""

    wake: Callable[[str], None]
    """Queue a workload's sync (when a write the sync did not wait for ends)."""
    backoff: WorkerBackoff = field(default_factory=WorkerBackoff)
    settle_seconds: float = SETTLE_SECONDS
    confirm_seconds: float = REMOTE_WRITE_TIMEOUT_SECONDS
    per_worker: int = WRITES_PER_WORKER
    clock: Callable[[], float] = time.monotonic
    _in_flight: dict[WriteKey, asyncio.Task[bool]] = field(default_factory=dict)
    _unconfirmed: dict[tuple[str, str], float] = field(default_factory=dict)
    _limits: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    def maybe_there(self, worker: str, key: str) -> bool:
        """Whether a copy of ``key`` on ``worker`` may exist although it was not seen: its
        create is in flight, or ended (made, no answer, AlreadyExists) less than
        ``confirm_seconds`` ago and the copy has not shown since."""
        if ("create", worker, key) in self._in_flight:
            return True
        until = self._unconfirmed.get((worker, key))
        if until is None:
            return False
        if self.clock() < until:
            return True
        del self._unconfirmed[(worker, key)]
        logger.info("MultiKueue: the copy of %s on %s not seen within %.0fs of its create",
                    key, worker, self.confirm_seconds)
        return False

    def unconfirmed(self, worker: str, key: str) -> None:
        """A create of ``key`` on ``worker`` may have made the copy: wait for its watch to show
        it, and look again when the wait is over."""
        self._unconfirmed[(worker, key)] = self.clock() + self.confirm_seconds

        def look_again() -> None:
            # Only for a copy still not seen: one seen meanwhile needs no second look.
            if (worker, key) in self._unconfirmed:
                self.wake(key)

        asyncio.get_running_loop().call_later(self.confirm_seconds, look_again)

    def confirmed(self, worker: str, key: str) -> None:
        """The copy was seen (or deleted on purpose)."""
        self._unconfirmed.pop((worker, key), None)

    def forget(self, key: str) -> None:
        for worker, k in [wk for wk in self._unconfirmed if wk[1] == key]:
            del self._unconfirmed[(worker, k)]

    def failed(self, worker: str, key: str, exc: KubeError) -> None:
        """A write failed: a worker that did not answer (or answered 429, 5xx) backs off, and
        the workload comes back when it may be written to again."""
        if exc.transient:
            delay = self.backoff.failed(worker)
        else:
            delay = max(self.backoff.left(worker), self.backoff.initial)
        asyncio.get_running_loop().call_later(delay, self.wake, key)

    def succeeded(self, worker: str) -> None:
        self.backoff.succeeded(worker)

    def start(
        self, what: str, worker: str, key: str, write: Callable[[], Awaitable[bool]]
    ) -> asyncio.Task[bool] | None:
        """Start ``write`` to ``worker`` unless the same one is in flight (None then)."""
        wkey = (what, worker, key)
        if wkey in self._in_flight:
            return None
        limit = self._limits.setdefault(worker, asyncio.Semaphore(self.per_worker))
        # A deletion goes after the same copy's create in flight, or the copy it makes is left.
        before = self._in_flight.get(("create", worker, key)) if what == "delete" else None

        async def run() -> bool:
            try:
                if before is not None:
                    await asyncio.wait([before])  # its outcome is its own
                async with limit:
                    return await write()
            finally:
                self._in_flight.pop(wkey, None)

        task = asyncio.create_task(run(), name=f"multikueue {what} {key} on {worker}")
        self._in_flight[wkey] = task
        return task

    async def settle(self, key: str, tasks: list[asyncio.Task[bool]]) -> bool | None:
        """Wait for a sync's writes at most ``settle_seconds``: whether all of them worked;
        None when some are still running (they queue the workload again when they end)."""
        if not tasks:
            return True
        done, pending = await asyncio.wait(tasks, timeout=self.settle_seconds)
        for task in pending:
            task.add_done_callback(lambda _t: self.wake(key))
        if pending:
            return None
        return all(not t.cancelled() and t.exception() is None and t.result() for t in done)

    async def close(self) -> None:
        """Cancel the writes in flight (the end of a term)."""
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
