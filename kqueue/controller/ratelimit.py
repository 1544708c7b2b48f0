"""Client-side throttling of requests to the API server (``clientConnection.qps/burst``).

client-go's default: a token bucket holding ``burst`` tokens, refilled at ``qps`` per second;
every request takes one token and waits for it when the bucket is empty. Kueue's benchmarks run
with qps 50 / burst 100, and a controller that ignores the setting would compare unfairly.

The bucket hands out reservations instead of polling: a caller takes a token at once, possibly
driving the balance negative, and sleeps until the refill covers it. Waiters are therefore served
in arrival order and nothing spins.

Every request, watches included, goes through ``ApiClient.call_api``; :func:`throttle` wraps that
one method of one client instance, so the JSON writers, the informers' lists and watches and the
raw requests (leases, events) share one bucket, as they share one client-go rest.Config in Kueue.
A watch takes a token when it is opened, not while it streams.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client import ApiClient


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; starts full."""

    def __init__(
        self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be > 0, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self.qps = float(qps)
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        # Requests that went through, and total seconds they were held back (for benchmarks).
        self.acquired = 0
        self.waited = 0.0

    def reserve(self) -> float:
        """Take one token now; the seconds the caller must wait before using it."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        self.acquired += 1
        delay = 0.0 if self._tokens >= 0 else -self._tokens / self.qps
        self.waited += delay
        return delay

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


def throttle(api: ApiClient, qps: float, burst: int) -> TokenBucket | None:
    """Make every request of ``api`` take a token first; ``qps <= 0`` leaves it unthrottled."""
    if qps <= 0:
        return None
    bucket = TokenBucket(qps, burst)
    call_api = api.call_api

    async def throttled_call_api(*args: Any, **kwargs: Any) -> Any:
        await bucket.acquire()
        return await call_api(*args, **kwargs)

    # Instance attribute shadows the method for this client only.
    api.call_api = throttled_call_api  # type: ignore[method-assign]
    return bucket
