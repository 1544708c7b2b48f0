"""The client-side token bucket: burst first, then qps; reservations in arrival order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kqueue.controller.ratelimit import TokenBucket, throttle


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_burst_is_free_then_requests_are_spaced_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, 3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    # The bucket is empty: the next ones wait 1/qps more each (served in arrival order).
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)
    assert bucket.acquired == 5
    assert bucket.waited == pytest.approx(0.3)


def test_refill_is_capped_at_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(50, 100, clock=clock)
    for _ in range(100):
        bucket.reserve()
    clock.now += 1.0  # 50 tokens back
    assert all(bucket.reserve() == 0.0 for _ in range(50))
    assert bucket.reserve() == pytest.approx(0.02)
    clock.now += 3600  # idle for long: only ``burst`` saved up
    assert sum(bucket.reserve() == 0.0 for _ in range(150)) == 100


def test_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0, 1)
    with pytest.raises(ValueError):
        TokenBucket(5, 0)


class FakeApi:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def call_api(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append(asyncio.get_running_loop().time())
        return "ok"


async def test_throttle_wraps_call_api() -> None:
    api = FakeApi()
    bucket = throttle(api, 100, 2)  # type: ignore[arg-type]
    assert bucket is not None
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    results = await asyncio.gather(*(api.call_api("/x", "GET") for _ in range(6)))
    assert results == ["ok"] * 6
    # Two free, then four spaced 10 ms apart: about 40 ms in all.
    assert loop.time() - t0 >= 0.035
    assert bucket.acquired == 6


def test_throttle_disabled_with_nonpositive_qps() -> None:
    api = FakeApi()
    original = api.call_api
    assert throttle(api, 0, 100) is None  # type: ignore[arg-type]
    assert api.call_api == original
