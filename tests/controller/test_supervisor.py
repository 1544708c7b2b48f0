"""Supervised tasks: crashes are logged with tracebacks and restarted with backoff."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kqueue.controller.clock import VirtualClock
from kqueue.controller.supervisor import Supervisor


async def test_a_crashing_task_is_logged_and_restarted_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock()
    starts: list[float] = []

    async def flaky() -> None:
        starts.append(clock.now())
        if len(starts) <= 3:
            raise ConnectionError(f"lost the apiserver (run {len(starts)})")
        await asyncio.Event().wait()  # then runs forever

    sup = Supervisor(clock=clock, initial_backoff=1, max_backoff=4)
    with caplog.at_level(logging.ERROR, logger="kqueue.controller.supervisor"):
        sup.spawn("informer/pods", flaky)
        await clock.advance(0)
        assert sup.status()["informer/pods"].state == "backoff"
        ok, detail = sup.check()
        assert not ok
        assert "informer/pods" in detail and "lost the apiserver (run 1)" in detail
        await clock.advance(10)
    assert starts == [0, 1, 3, 7]
    status = sup.status()["informer/pods"]
    assert (status.state, status.restarts) == ("running", 3)
    assert status.last_error == "ConnectionError: lost the apiserver (run 3)"
    assert sup.check()[0]
    crashes = [r for r in caplog.records if r.getMessage().startswith("background task")]
    assert len(crashes) == 3
    assert all(r.exc_info is not None for r in crashes)
    assert "'informer/pods' crashed" in crashes[0].getMessage()
    await sup.stop()
    assert sup.status()["informer/pods"].state == "stopped"


async def test_finished_tasks_stay_finished_unless_restart_always() -> None:
    clock = VirtualClock()
    runs = {"once": 0, "loop": 0}

    async def once() -> None:
        runs["once"] += 1

    async def loop() -> None:
        runs["loop"] += 1

    async with Supervisor(clock=clock, initial_backoff=1, max_backoff=1) as sup:
        sup.spawn("once", once)
        sup.spawn("loop", loop, restart="always")
        await clock.advance(3.5)
        assert runs == {"once": 1, "loop": 4}
        assert sup.status()["once"].state == "finished"
        assert sup.status()["loop"].state == "backoff"


async def test_stop_cancels_cleanly() -> None:
    cleaned = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.set()

    sup = Supervisor()
    sup.spawn("forever", forever)
    await asyncio.sleep(0)
    await sup.stop(grace_period=1)
    assert cleaned.is_set()
    assert sup.status()["forever"].state == "stopped"
    with pytest.raises(RuntimeError):
        sup.spawn("late", forever)


async def test_backoff_resets_after_a_stable_run() -> None:
    clock = VirtualClock()
    starts: list[float] = []

    async def crash_after(duration: float) -> None:
        starts.append(clock.now())
        await clock.sleep(duration)
        raise RuntimeError("boom")

    sup = Supervisor(clock=clock, initial_backoff=1, max_backoff=8, stable_after=8)
    # Runs 0..1 crash, backoff 1 -> restart at 2; crash at 3, backoff 2 -> 5; crash at 6,
    # backoff 4 -> 10. Each run lasts 1s (< stable_after), so the backoff keeps doubling.
    sup.spawn("short", lambda: crash_after(1))
    await clock.advance(10)
    assert starts == [0, 2, 5, 10]
    await sup.stop()

    starts.clear()
    sup = Supervisor(clock=clock, initial_backoff=1, max_backoff=8, stable_after=8)
    sup.spawn("long", lambda: crash_after(9))
    await clock.advance(30)
    # Every run lasts 9s >= stable_after: each crash restarts after the initial backoff.
    base = starts[0]
    assert [t - base for t in starts] == [0, 10, 20, 30]
    await sup.stop()
