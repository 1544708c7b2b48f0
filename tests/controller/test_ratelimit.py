"""The client-side token buckets: burst first, then qps; reservations in arrival order; one
bucket per resource type; background requests never ahead of decisions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kqueue.controller.ratelimit import (
    Lane,
    TokenBucket,
    background,
    current_lane,
    resource_type,
    throttle,
)
from tests.controller.loop_lag import loop_lag


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
    path = "/apis/kqueue.io/v1alpha1/namespaces/ns/workloads/w/status"
    results = await asyncio.gather(*(api.call_api(path, "PUT") for _ in range(6)))
    assert results == ["ok"] * 6
    # Two free, then four spaced 10 ms apart: about 40 ms in all.
    assert loop.time() - t0 >= 0.035
    assert bucket.acquired == 6


def test_throttle_disabled_with_nonpositive_qps() -> None:
    api = FakeApi()
    original = api.call_api
    assert throttle(api, 0, 100) is None  # type: ignore[arg-type]
    assert api.call_api == original


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("/apis/kqueue.io/v1alpha1/namespaces/ns/workloads/w/status", "kqueue.io/workloads"),
        ("/apis/kqueue.io/v1alpha1/namespaces/ns/workloads", "kqueue.io/workloads"),
        ("/apis/kqueue.io/v1alpha1/workloads?watch=true", "kqueue.io/workloads"),
        ("/apis/kqueue.io/v1alpha1/clusterqueues/cq/status", "kqueue.io/clusterqueues"),
        ("/api/v1/namespaces/ns/pods/p", "/pods"),
        ("/api/v1/namespaces/ns/events", "/events"),
        ("/api/v1/namespaces/ns", "/namespaces"),
        ("/api/v1/namespaces", "/namespaces"),
        ("/apis/batch/v1/namespaces/ns/jobs/j", "batch/jobs"),
        ("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", "coordination.k8s.io/leases"),
        ("/version", "/other"),
    ],
)
def test_resource_type_of_a_path(path: str, key: str) -> None:
    assert resource_type(path) == key


async def test_each_resource_type_has_its_own_budget() -> None:
    """As controller-runtime's per-type clients: QPS 100 / burst 2 lets 2 Workload writes and 2
    ClusterQueue writes through at once, and a third of either waits."""
    api = FakeApi()
    limits = throttle(api, 100, 2)  # type: ignore[arg-type]
    assert limits is not None
    wl = "/apis/kqueue.io/v1alpha1/namespaces/ns/workloads/w/status"
    cq = "/apis/kqueue.io/v1alpha1/clusterqueues/cq/status"
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await asyncio.gather(*(api.call_api(p, "PUT") for p in (wl, wl, cq, cq)))
    assert limits.waited == 0.0  # four at once: two buckets of burst 2
    assert sorted(limits.buckets) == ["kqueue.io/clusterqueues", "kqueue.io/workloads"]
    await api.call_api(wl, "PUT")
    assert loop.time() - t0 >= 0.008  # the third Workload write waited for its refill
    assert limits.acquired == 5


def test_background_leaves_half_the_burst_to_decisions() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, 10, clock=clock)
    taken = 0
    while bucket.try_background() == 0.0:
        taken += 1
    assert taken == 5  # the other half stays for decisions
    assert [bucket.reserve() for _ in range(5)] == [0.0] * 5  # decisions: no wait at all
    assert bucket.background_acquired == 5


def test_background_waits_while_decisions_wait() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, 2, clock=clock)
    for _ in range(4):
        bucket.reserve()  # two free, two waiting (balance -2)
    clock.now += 0.15  # 1.5 tokens refilled: the waiting decisions are not yet covered
    assert bucket.try_background() > 0
    clock.now += 1.0
    assert bucket.try_background() == 0.0


async def test_decisions_never_queue_behind_background_requests() -> None:
    """A stream of pending-reason writes (background) and then a burst of admissions: every
    admission goes out at once, none waits behind the reasons."""
    api = FakeApi()
    limits = throttle(api, 50, 10)  # type: ignore[arg-type]
    assert limits is not None
    path = "/apis/kqueue.io/v1alpha1/namespaces/ns/workloads/w/status"

    async def reasons() -> None:
        with background():
            assert current_lane() == Lane.BACKGROUND
            for _ in range(20):
                await api.call_api(path, "PUT")

    lane = asyncio.ensure_future(reasons())
    await asyncio.sleep(0.05)  # the reasons have used what they may
    assert current_lane() == Lane.DECISION
    loop = asyncio.get_running_loop()
    async with loop_lag() as lag:
        await asyncio.sleep(0.01)  # the lag is measured from a tick on
        t0 = loop.time()
        await asyncio.gather(*(api.call_api(path, "PUT") for _ in range(5)))
        took = loop.time() - t0
        assert took < 0.005 + lag.so_far()  # half the burst (5) was kept for them
    await lane
    bucket = limits.buckets["kqueue.io/workloads"]
    assert bucket.background_acquired == 20
