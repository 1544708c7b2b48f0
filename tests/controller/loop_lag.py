"""How late the event loop wakes up, for tests that compare a measured moment with a deadline.

A deadline kept by a timer is kept to within the loop's lateness, and on a loaded machine (the
unit tests run at a low priority beside a cluster) that lateness reaches a tenth of a second.
Such a test allows the worst lateness it saw, so that it stays exact on a quiet machine and
does not fail on a busy one for a reason that is not the code's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass
class LoopLag:
    tick: float = 0.005
    worst: float = 0.0
    _due: float | None = None

    async def _measure(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._due = loop.time() + self.tick
            await asyncio.sleep(self.tick)
            self.worst = max(self.worst, loop.time() - self._due)

    def so_far(self) -> float:
        """The worst lateness until now, counting the tick that is overdue (a stall the
        measuring task has not woken up from yet)."""
        overdue = 0.0 if self._due is None else asyncio.get_running_loop().time() - self._due
        return max(self.worst, overdue)


@contextlib.asynccontextmanager
async def loop_lag(tick: float = 0.005) -> AsyncIterator[LoopLag]:
    """Measure the worst lateness of a ``tick``-second timer while the block runs."""
    lag = LoopLag(tick)
    task = asyncio.create_task(lag._measure(), name="loop lag")
    try:
        yield lag
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
