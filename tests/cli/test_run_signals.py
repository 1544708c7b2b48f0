"""`kqueue run`'s signals: the first SIGTERM or SIGINT starts the graceful shutdown; a second
(Ctrl-C reaches a whole process group, and `make run` forwards it as well) does not cut it short,
where the lease release used to find the API client closed."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from kqueue.cli.run import stop_on_signals


@pytest.mark.parametrize("signals", [(signal.SIGINT, signal.SIGTERM), (signal.SIGTERM, signal.SIGTERM)])
async def test_a_second_signal_does_not_cut_the_graceful_shutdown_short(
    signals: tuple[signal.Signals, signal.Signals], caplog: pytest.LogCaptureFixture
) -> None:
    shutdown: list[str] = []
    cancelled = asyncio.Event()

    async def run() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            shutdown.append("started")
            await asyncio.sleep(0.3)  # the lease release, the events drained...
            shutdown.append("done")
            raise

    task = asyncio.create_task(run())
    await asyncio.sleep(0)
    stop_on_signals(task)
    caplog.set_level("INFO", logger="kqueue")
    os.kill(os.getpid(), signals[0])
    await asyncio.wait_for(cancelled.wait(), timeout=5)
    os.kill(os.getpid(), signals[1])  # while it shuts down
    await asyncio.gather(task, return_exceptions=True)

    assert task.cancelled()
    assert shutdown == ["started", "done"]
    assert f"{signals[0].name}: shutting down" in caplog.text
    assert f"{signals[1].name}: already shutting down gracefully" in caplog.text
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)
