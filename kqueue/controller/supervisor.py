"""Supervised background tasks: a crash is logged with its traceback and the task restarted.

Everything long-running in the controller (informers, workers, the lease renewer, certificate
rotation) runs under a :class:`Supervisor`, so an unexpected exception is never silently lost
with a forgotten ``asyncio.Task``: it is logged, counted, reflected in readiness, and the task is
restarted after an exponential backoff. Shutdown cancels every task and waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

from kqueue.controller.clock import Clock, LoopClock

logger = logging.getLogger(__name__)

TaskState = Literal["running", "backoff", "finished", "stopped"]
RestartPolicy = Literal["always", "on-failure"]


@dataclass
class TaskStatus:
    """What ``/readyz`` and the logs need to know about one supervised task."""

    name: str
    state: TaskState = "running"
    restarts: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    started_at: float = 0.0


@dataclass
class _Entry:
    factory: Callable[[], Awaitable[None]]
    restart: RestartPolicy
    status: TaskStatus
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class Supervisor:
    """Runs named coroutines and restarts them when they fail.

    ``factory`` is called anew for every (re)start, so it must return a fresh coroutine::

        supervisor.spawn("informer/workloads", workloads.run)

    With ``restart="on-failure"`` (the default) a task that returns normally is finished;
    with ``"always"`` a normal return is treated like a crash (for loops that must never end).
    The backoff doubles from ``initial_backoff`` up to ``max_backoff`` and starts over once a
    run lasted ``stable_after`` seconds.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        initial_backoff: float = 1.0,
        max_backoff: float = 60.0,
        stable_after: float | None = None,
    ) -> None:
        self._clock = clock if clock is not None else LoopClock()
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._stable_after = stable_after if stable_after is not None else max_backoff
        self._entries: dict[str, _Entry] = {}
        self._stopping = False

    def spawn(
        self,
        name: str,
        factory: Callable[[], Awaitable[None]],
        *,
        restart: RestartPolicy = "on-failure",
    ) -> None:
        """Start ``factory()`` as the task ``name`` (names are unique while the task lives)."""
        if self._stopping:
            raise RuntimeError(f"supervisor is stopping; cannot start task {name!r}")
        existing = self._entries.get(name)
        if existing is not None and existing.task is not None and not existing.task.done():
            raise ValueError(f"a task named {name!r} is already running")
        entry = _Entry(factory=factory, restart=restart, status=TaskStatus(name=name))
        entry.task = asyncio.get_running_loop().create_task(
            self._supervise(entry=entry), name=f"supervised: {name}"
        )
        self._entries[name] = entry

    async def _supervise(self, *, entry: _Entry) -> None:
        status = entry.status
        failures = 0
        while True:
            status.state = "running"
            status.started_at = self._clock.now()
            try:
                await entry.factory()
            except asyncio.CancelledError:
                status.state = "stopped"
                raise
            except Exception as exc:
                problem = f"{type(exc).__name__}: {exc}"
                crashed = True
            else:
                if entry.restart == "on-failure":
                    status.state = "finished"
                    logger.debug("background task %r finished", status.name)
                    return
                problem = "returned although it should run until stopped"
                crashed = False
            if self._clock.now() - status.started_at >= self._stable_after:
                failures = 0
            delay = min(self._initial_backoff * (1 << min(failures, 32)), self._max_backoff)
            failures += 1
            status.state = "backoff"
            status.restarts += 1
            status.last_error = problem
            status.last_error_at = self._clock.now()
            logger.error(
                "background task %r %s; restart #%d in %.1fs",
                status.name,
                "crashed" if crashed else problem,
                status.restarts,
                delay,
                exc_info=crashed,
            )
            await self._clock.sleep(delay)

    async def cancel(self, name: str) -> None:
        """Stop one task and wait for it."""
        entry = self._entries.get(name)
        if entry is None or entry.task is None:
            return
        entry.task.cancel()
        await asyncio.gather(entry.task, return_exceptions=True)
        entry.status.state = "stopped" if entry.status.state != "finished" else "finished"

    async def stop(self, grace_period: float | None = 30.0) -> None:
        """Cancel every task and wait (up to ``grace_period`` seconds) for them to finish."""
        self._stopping = True
        tasks = [e.task for e in self._entries.values() if e.task is not None and not e.task.done()]
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_period)
        for task in pending:
            logger.error(
                "background task %r did not stop within %ss", task.get_name(), grace_period
            )
        for entry in self._entries.values():
            if entry.status.state != "finished":
                entry.status.state = "stopped"

    def status(self) -> dict[str, TaskStatus]:
        """A snapshot of every task's status, by name."""
        return {name: TaskStatus(**vars(e.status)) for name, e in sorted(self._entries.items())}

    def check(self) -> tuple[bool, str]:
        """Readiness: every task is running (or finished); names the ones that are not."""
        failing = [
            f"{s.name} ({s.state}, {s.restarts} restarts, last error: {s.last_error})"
            for s in self.status().values()
            if s.state not in ("running", "finished")
        ]
        if failing:
            return False, "not running: " + "; ".join(failing)
        return True, f"{len(self._entries)} tasks running"

    async def __aenter__(self) -> Supervisor:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
