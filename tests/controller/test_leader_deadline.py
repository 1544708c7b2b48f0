"""A leader whose renewal hangs stops at its renew deadline, and its writes are bounded by it.

The Lease API here answers a partitioned replica with nothing at all (a hung connection), which
is what a half-open TCP connection or an overloaded API server looks like: a renewal request
that neither succeeds nor fails must not keep the replica leading past its renew deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from kqueue.controller.kube import Kube, Unreachable, WriteDeadlinePassed
from kqueue.controller.leader import LeaderElector
from kqueue.controller.resources import Resource
from tests.controller.fake_apiserver import FakeApiServer, eventually, start_app
from tests.controller.loop_lag import loop_lag

LEASE = timedelta(seconds=2)
RENEW = timedelta(milliseconds=600)
RETRY = timedelta(milliseconds=100)
# Event-loop scheduling slack when comparing a measured moment with a deadline, on a quiet
# machine; a busy one adds the lateness the test measured (loop_lag.py).
SLACK_S = 0.05
# Giving up takes a few wake-ups after the deadline (the watchdog, the wait, the poll), each of
# which may be late by the loop's lateness.
HOPS = 3

CONFIGMAPS = Resource("", "v1", "configmaps")


@dataclass
class HangingLeaseApi(FakeApiServer):
    """Requests from agents in ``hung``, and to paths containing one of ``hung_paths``, are
    held until the client gives up."""

    hung: set[str] = field(default_factory=set)
    hung_paths: set[str] = field(default_factory=set)
    held: int = 0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("User-Agent") in self.hung or any(
            p in request.path for p in self.hung_paths
        ):
            self.held += 1
            await asyncio.Event().wait()
        return await super()._handle(request)


@dataclass
class Env:
    api: HangingLeaseApi
    client: ApiClient


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    api = HangingLeaseApi()
    server, [client] = await start_app(api.app(), ["replica-0"])
    try:
        yield Env(api, client)
    finally:
        await client.close()
        await api.shutdown()
        await server.close()


def _elector(env: Env, lead: object) -> LeaderElector:
    return LeaderElector(
        env.client,
        name="kqueue-leader",
        namespace="kqueue-system",
        identity="replica-0",
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        on_started_leading=lead,  # type: ignore[arg-type]
    )


async def test_a_hung_renewal_ends_leadership_at_the_renew_deadline(env: Env) -> None:
    loop = asyncio.get_running_loop()
    kube = Kube(env.client)
    write_started = asyncio.Event()
    ended: dict[str, float] = {}
    outcome: list[BaseException] = []

    async def lead() -> None:
        # The leader's write is in flight (held by the API) when the renewals start to hang.
        write_started.set()
        try:
            await kube.create(CONFIGMAPS, {"metadata": {"name": "w"}}, namespace="ns")
        except BaseException as exc:
            outcome.append(exc)
            raise
        finally:
            ended["write"] = loop.time()

    elector = _elector(env, lead)
    kube.write_deadline = elector.write_deadline
    env.api.hung_paths.add("/configmaps")
    task = asyncio.create_task(elector.run())
    try:
        async with loop_lag() as lag:
            await eventually(lambda: elector.is_leader, what="replica-0 to lead")
            await write_started.wait()
            env.api.hung.add("replica-0")
            deadline = elector.write_deadline()
            assert deadline is not None
            assert loop.time() < deadline <= loop.time() + RENEW.total_seconds()
            await eventually(lambda: not elector.is_leader, within=5, what="replica-0 to give up")
            gave_up = loop.time()
            await eventually(lambda: "write" in ended, what="the in-flight write to end")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    slack = SLACK_S + HOPS * lag.worst
    # The renew deadline is kept to, though the renewal request in flight then would only
    # time out later (its own timeout is the whole renew deadline).
    assert elector.last_renewed_at is not None
    assert gave_up - elector.last_renewed_at <= RENEW.total_seconds() + slack
    # The write issued under that leadership did not outlive it: cancelled or timed out, and
    # not later than the deadline it was bound by.
    assert ended["write"] <= deadline + slack
    assert outcome and isinstance(outcome[0], asyncio.CancelledError | Unreachable)
    assert not [p for _, p in env.api.writes if "/configmaps/" in p], "the held write landed"
    assert elector.write_deadline() is None


async def test_writes_are_bounded_by_the_deadline_and_refused_after_it(env: Env) -> None:
    loop = asyncio.get_running_loop()
    deadline: list[float | None] = [loop.time() + 0.3]
    kube = Kube(env.client, write_deadline=lambda: deadline[0])
    env.api.hung.add("replica-0")
    started = loop.time()
    async with loop_lag() as lag:
        with pytest.raises(Unreachable):
            await kube.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns")
    # Bounded by the deadline, not by the client's 30 s request timeout.
    assert loop.time() - started <= 0.3 + SLACK_S * 4 + HOPS * lag.worst
    env.api.hung.clear()
    held = env.api.held
    deadline[0] = loop.time() - 1
    with pytest.raises(WriteDeadlinePassed, match="not sent"):
        await kube.create(CONFIGMAPS, {"metadata": {"name": "b"}}, namespace="ns")
    assert env.api.held == held and env.api.writes == [], "the refused write reached the API"
    # Reads are not writes: a lost leadership does not stop a replica from reading.
    env.api.add(CONFIGMAPS, {"metadata": {"name": "c", "namespace": "ns"}})
    assert (await kube.get(CONFIGMAPS, "c", "ns"))["metadata"]["name"] == "c"
    # Without a deadline (no leader election, or between terms) the usual timeout applies.
    deadline[0] = None
    created = await kube.create(CONFIGMAPS, {"metadata": {"name": "d"}}, namespace="ns")
    assert created["metadata"]["name"] == "d"
