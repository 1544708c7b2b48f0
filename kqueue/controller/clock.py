"""Time as the controller's timing code sees it: a monotonic ``now()`` and an awaitable ``sleep``.

``Now`` is wall-clock time for timestamps written to the API. Work queues, the supervisor and
leader election take a :class:`Clock` so tests can run them in
virtual time (:class:`VirtualClock`) instead of waiting for real backoffs and lease expiries.
Seconds are floats here because that is asyncio's unit of time; these are timings, never
quantities.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import UTC, datetime
from typing import Protocol


class Now(Protocol):
    """Wall-clock time (timestamps written to the API: conditions, events, admission times)."""

    def __call__(self) -> datetime: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


class Clock(Protocol):
    """Monotonic time in seconds and a way to wait for it to pass."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The running event loop's monotonic clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


class VirtualClock:
    """A clock that moves only when told to (tests).

    ``await clock.advance(30)`` wakes every sleeper whose deadline falls within the next 30
    virtual seconds, in deadline order, letting the woken tasks run between wake-ups so that
    the sleeps they start are honoured in the same advance.
    """

    def __init__(self, start: float = 0.0, *, settle_rounds: int = 50) -> None:
        self._now = start
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._settle_rounds = settle_rounds

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (tests use it to know when tasks are parked)."""
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    def next_deadline(self) -> float | None:
        for deadline, _, fut in sorted(self._sleepers):
            if not fut.done():
                return deadline
        return None

    async def settle(self) -> None:
        """Let ready tasks run until they block again (on I/O, a future or a sleep)."""
        for _ in range(self._settle_rounds):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        target = self._now + seconds
        await self.settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, fut = heapq.heappop(self._sleepers)
            if fut.done():  # the sleeper was cancelled
                continue
            self._now = max(self._now, deadline)
            fut.set_result(None)
            await self.settle()
        self._now = target
        await self.settle()
