"""Work queue semantics in virtual time: dedup, re-queue while processing, backoff, add_after."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kqueue.controller.clock import VirtualClock
from kqueue.controller.workqueue import QueueShutDown, Requeue, WorkQueue, run_workers


def make_queue(clock: VirtualClock, **kwargs: float) -> WorkQueue[str]:
    return WorkQueue("test", clock=clock, **kwargs)


async def test_a_key_added_twice_is_queued_once() -> None:
    q = make_queue(VirtualClock())
    q.add("a")
    q.add("b")
    q.add("a")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_a_key_added_while_processing_is_requeued_once_after_done() -> None:
    q = make_queue(VirtualClock())
    q.add("a")
    key = await q.get()
    q.add("a")
    q.add("a")
    # Not handed to a second worker while the first one holds it.
    assert len(q) == 0
    assert q.processing == {"a"}
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_get_waits_for_an_add() -> None:
    q = make_queue(VirtualClock())
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.add("x")
    assert await getter == "x"


async def test_a_cancelled_getter_does_not_swallow_a_key() -> None:
    q = make_queue(VirtualClock())
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("x")
    first.cancel()  # woken for "x" but cancelled before taking it
    await asyncio.gather(first, return_exceptions=True)
    assert await asyncio.wait_for(second, 1) == "x"


async def test_add_after_waits_and_keeps_the_earliest_deadline() -> None:
    clock = VirtualClock()
    q = make_queue(clock)
    q.add_after("a", 10)
    q.add_after("a", 30)  # later: ignored
    q.add_after("b", 20)
    q.add_after("b", 5)  # earlier: replaces
    await clock.advance(4.9)
    assert len(q) == 0
    await clock.advance(0.1)
    assert [await q.get()] == ["b"]
    await clock.advance(5)
    assert await q.get() == "a"
    await clock.advance(100)
    assert len(q) == 0
    assert q.delayed == 0


async def test_rate_limited_backoff_doubles_up_to_the_cap_and_forget_resets() -> None:
    clock = VirtualClock()
    q = make_queue(clock, base_delay=1.0, max_delay=8.0)
    delays = [q.add_rate_limited("k") for _ in range(6)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert q.num_requeues("k") == 6
    q.forget("k")
    assert q.num_requeues("k") == 0
    assert q.add_rate_limited("k") == 1.0


async def test_shutdown_wakes_getters_and_drops_pending_keys() -> None:
    clock = VirtualClock()
    q = make_queue(clock)
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add_after("later", 1)
    q.shutdown()
    with pytest.raises(QueueShutDown):
        await getter
    q.add("new")
    await clock.advance(2)
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_workers_retry_failures_with_backoff_and_honour_requeue_after(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock()
    q = make_queue(clock, base_delay=1.0, max_delay=60.0)
    calls: list[tuple[float, str]] = []

    async def reconcile(key: str) -> Requeue | None:
        calls.append((clock.now(), key))
        if key == "flaky" and len([c for c in calls if c[1] == "flaky"]) < 3:
            raise RuntimeError("apiserver said no")
        if key == "periodic" and len([c for c in calls if c[1] == "periodic"]) < 2:
            return Requeue(after=30)
        return None

    workers = asyncio.create_task(run_workers(q, reconcile, workers=2))
    q.add("flaky")
    q.add("periodic")
    with caplog.at_level(logging.ERROR, logger="kqueue.controller.workqueue"):
        await clock.advance(0)
        await clock.advance(1)  # first retry of flaky after 1s
        await clock.advance(2)  # second retry after 2s more
        await clock.advance(30)
    assert [t for t, k in calls if k == "flaky"] == [0, 1, 3]
    assert [t for t, k in calls if k == "periodic"] == [0, 30]
    assert q.num_requeues("flaky") == 0  # forgotten after the success
    failures = [r for r in caplog.records if "apiserver said no" in (r.exc_text or "")]
    assert len(failures) == 2
    assert "'flaky'" in failures[0].getMessage()
    q.shutdown()
    await asyncio.wait_for(workers, 1)


async def test_one_worker_per_key_even_with_many_workers() -> None:
    clock = VirtualClock()
    q = make_queue(clock)
    running: set[str] = set()
    overlaps: list[str] = []
    runs: list[str] = []
    release = asyncio.Event()

    async def reconcile(key: str) -> None:
        if key in running:
            overlaps.append(key)
        running.add(key)
        runs.append(key)
        await release.wait()
        running.discard(key)

    workers = asyncio.create_task(run_workers(q, reconcile, workers=4))
    q.add("a")
    await clock.settle()
    q.add("a")  # arrives while "a" is being processed
    q.add("b")
    await clock.settle()
    assert runs == ["a", "b"]
    release.set()
    await clock.settle()
    assert runs == ["a", "b", "a"]
    assert overlaps == []
    await q.wait_idle()
    q.shutdown()
    await asyncio.wait_for(workers, 1)


async def test_a_namespace_being_deleted_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    from kqueue.controller.kube import KubeError

    clock = VirtualClock()
    q = make_queue(clock, base_delay=1.0, max_delay=60.0)
    calls: list[float] = []

    async def reconcile(key: str) -> Requeue | None:
        calls.append(clock.now())
        raise KubeError(
            what=f"create workloads.kqueue.io {key}",
            status=403,
            body={
                "reason": "Forbidden",
                "message": 'workloads.kqueue.io "job-x" is forbidden: unable to create new '
                "content in namespace t because it is being terminated",
            },
        )

    workers = asyncio.create_task(run_workers(q, reconcile, workers=1))
    q.add("t/job")
    with caplog.at_level(logging.INFO, logger="kqueue.controller.workqueue"):
        await clock.advance(0)
        await clock.advance(60)
    assert calls == [0]  # not retried
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("being terminated" in r.getMessage() for r in caplog.records)
    q.shutdown()
    await asyncio.wait_for(workers, 1)
