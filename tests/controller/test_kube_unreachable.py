"""Every transport failure from Kube is an Unreachable; the retry loops built on it.

Against real HTTP servers that fail as networks do: nothing listening (connection refused), a
connection closed before the answer, an answer cut mid-body, an answer that never comes, and
a watch stream cut or gone silent while it is read. Callers catch :class:`KubeError` alone, so
each of these must arrive as an :class:`Unreachable` (status 0), never as one of aiohttp's
exceptions. Then ``modify_status`` (conflicts and lost answers read again; given up after
``MODIFY_ATTEMPTS``) and ``idempotent`` (lost answers only) on the cutting fake API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client import ApiClient, Configuration

from kqueue.controller import kube as kube_module
from kqueue.controller.kube import (
    MODIFY_ATTEMPTS,
    Conflict,
    Kube,
    KubeError,
    NotFound,
    Unreachable,
    idempotent,
)
from kqueue.controller.resources import CONFIGMAPS
from tests.controller.cutting_apiserver import (
    cutting_cluster,
    record_pauses,
    server_of,
)
from tests.controller.fake_apiserver import FakeCluster

Obj = dict[str, Any]
NS = "default"
CM_PATH = f"/api/v1/namespaces/{NS}/configmaps"


def _configmap(name: str, **data: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "5"},
        "data": dict(data),
    }


# -- a server that fails as networks do ----------------------------------------------------------


async def _hang_up(request: web.Request) -> web.StreamResponse:
    """The connection closes before any answer (a load balancer dropping it)."""
    assert request.transport is not None
    request.transport.abort()
    return web.Response()


async def _cut_mid_body(request: web.Request) -> web.StreamResponse:
    """Headers and part of the body, then the connection closes."""
    body = json.dumps(_configmap("cut", pad="x" * 4000)).encode()
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 3])
    assert request.transport is not None
    request.transport.abort()
    return response


async def _never_answers(_: web.Request) -> web.StreamResponse:
    await asyncio.sleep(30)
    return web.Response()


async def _watch(request: web.Request) -> web.StreamResponse:
    """One event, then the stream is cut (``?cut``) or goes silent."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    event = {"type": "ADDED", "object": _configmap("a")}
    await response.write((json.dumps(event) + "\n").encode())
    if request.query.get("labelSelector") == "cut":
        assert request.transport is not None
        request.transport.abort()
        return response
    await asyncio.sleep(30)
    return response


def _app() -> web.Application:
    app = web.Application()
    app.router.add_get(f"{CM_PATH}/hang-up", _hang_up)
    app.router.add_put(f"{CM_PATH}/hang-up/status", _hang_up)
    app.router.add_get(f"{CM_PATH}/cut", _cut_mid_body)
    app.router.add_get(f"{CM_PATH}/slow", _never_answers)
    app.router.add_get(CM_PATH, _watch)
    return app


def _kube(url: str, *, timeout: float = 5.0) -> Kube:
    return Kube(ApiClient(configuration=Configuration(host=url)), timeout=timeout)


@pytest.fixture
async def flaky() -> AsyncIterator[str]:
    server = TestServer(_app())
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _unreachable(call: Callable[[Kube], Awaitable[Any]], kube: Kube) -> Unreachable:
    try:
        with pytest.raises(KubeError) as caught:
            await call(kube)
    finally:
        await kube.api.close()
    assert isinstance(caught.value, Unreachable), repr(caught.value)
    assert caught.value.status == 0
    return caught.value


async def test_a_refused_connection_is_unreachable() -> None:
    kube = _kube(f"http://127.0.0.1:{_unused_port()}")
    err = await _unreachable(lambda k: k.get(CONFIGMAPS, "a", NS), kube)
    assert isinstance(err.__cause__, aiohttp.ClientConnectorError)
    assert "configmaps/a" in str(err)


@pytest.mark.parametrize(
    ("call", "cause"),
    [
        (lambda k: k.get(CONFIGMAPS, "hang-up", NS), aiohttp.ServerDisconnectedError),
        (
            lambda k: k.replace_status(CONFIGMAPS, _configmap("hang-up"), namespace=NS),
            aiohttp.ServerDisconnectedError,
        ),
        (lambda k: k.get(CONFIGMAPS, "cut", NS), aiohttp.ClientPayloadError),
    ],
    ids=["disconnect-before-answer", "write-answer-lost", "payload-cut-mid-body"],
)
async def test_a_connection_cut_before_the_whole_answer_is_unreachable(
    flaky: str, call: Callable[[Kube], Awaitable[Any]], cause: type[BaseException]
) -> None:
    err = await _unreachable(call, _kube(flaky))
    assert isinstance(err.__cause__, cause), repr(err.__cause__)


async def test_an_answer_that_never_comes_is_unreachable(flaky: str) -> None:
    err = await _unreachable(lambda k: k.get(CONFIGMAPS, "slow", NS), _kube(flaky, timeout=0.2))
    assert isinstance(err.__cause__, TimeoutError)


@pytest.mark.parametrize(("selector", "read_timeout"), [("cut", 30.0), ("silent", 0.3)])
async def test_a_watch_stream_cut_or_silent_while_read_is_unreachable(
    flaky: str, selector: str, read_timeout: float
) -> None:
    lines: list[bytes] = []

    async def read(k: Kube) -> None:
        async with k.stream(
            CONFIGMAPS,
            namespace=NS,
            query=[("watch", "true"), ("labelSelector", selector)],
            read_timeout=read_timeout,
        ) as content:
            async for line in content:
                lines.append(line)

    await _unreachable(read, _kube(flaky))
    assert len(lines) == 1 and b'"ADDED"' in lines[0]  # the event before the cut was read


# -- modify_status and idempotent ---------------------------------------------------------------


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async for c in cutting_cluster():
        yield c


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the pauses after lost answers instead of waiting them out."""
    return record_pauses(monkeypatch, kube_module)


def _status_writes(cluster: FakeCluster) -> list[int]:
    """The HTTP status of each status write the server served (cut ones included)."""
    return [r.status for r in cluster.server.requests_to("PUT", CONFIGMAPS, subresource="status")]


def _set_phase(obj: Obj) -> Obj | None:
    """An idempotent change: sets the phase, or nothing to write once it is set."""
    status = obj.setdefault("status", {})
    if status.get("phase") == "done":
        return None
    status["phase"] = "done"
    return obj


async def test_modify_status_reads_again_after_a_conflict(cluster: FakeCluster) -> None:
    cluster.server.add(CONFIGMAPS, _configmap("a"))
    seen: list[str] = []

    def change(obj: Obj) -> Obj | None:
        seen.append(obj["metadata"]["resourceVersion"])
        if len(seen) == 1:
            # Someone else writes between our read and our write.
            cluster.server.add(CONFIGMAPS, {**obj, "data": {"by": "them"}})
        return _set_phase(obj)

    written = await cluster.kube.modify_status(CONFIGMAPS, "a", change, namespace=NS)
    assert written is not None and written["status"] == {"phase": "done"}
    assert _status_writes(cluster) == [409, 200]
    assert seen[0] != seen[1]  # the second change started from a fresh read
    stored = cluster.server.get(CONFIGMAPS, "a", NS)
    assert stored is not None and stored["data"] == {"by": "them"}
    assert stored["status"] == {"phase": "done"}


async def test_a_lost_answer_is_read_back_and_not_written_twice(
    cluster: FakeCluster, no_pauses: list[int]
) -> None:
    cluster.server.add(CONFIGMAPS, _configmap("a"))
    server_of(cluster).cut("PUT", CONFIGMAPS, subresource="status", served=True)
    # aiohttp sends a PUT cut on a reused connection once more by itself: that copy is cut too
    # (unserved), so the loss reaches modify_status as it does behind a load balancer that is down.
    server_of(cluster).cut("PUT", CONFIGMAPS, subresource="status", served=False)
    calls: list[Obj | None] = []

    def change(obj: Obj) -> Obj | None:
        calls.append(out := _set_phase(obj))
        return out

    assert await cluster.kube.modify_status(CONFIGMAPS, "a", change, namespace=NS) is None
    # The write landed although its answer was lost; the read after the pause showed it.
    assert _status_writes(cluster) == [200]
    assert [c is None for c in calls] == [False, True]
    assert no_pauses == [1]
    stored = cluster.server.get(CONFIGMAPS, "a", NS)
    assert stored is not None and stored["status"] == {"phase": "done"}


async def test_a_write_cut_before_it_landed_is_sent_again(cluster: FakeCluster) -> None:
    cluster.server.add(CONFIGMAPS, _configmap("a"))
    server_of(cluster).cut("PUT", CONFIGMAPS, subresource="status", served=False)
    written = await cluster.kube.modify_status(CONFIGMAPS, "a", _set_phase, namespace=NS)
    assert written is not None and written["status"] == {"phase": "done"}
    assert server_of(cluster).hung_up == 1
    assert _status_writes(cluster) == [200]  # the one that was served


@pytest.mark.parametrize(
    ("fault", "error"), [("conflict", Conflict), ("cut", Unreachable)], ids=["conflict", "cut"]
)
async def test_modify_status_gives_up_after_its_attempts_with_the_last_error(
    cluster: FakeCluster, fault: str, error: type[KubeError]
) -> None:
    cluster.server.add(CONFIGMAPS, _configmap("a"))
    if fault == "conflict":
        cluster.server.fail("PUT", CONFIGMAPS, code=409)
    else:
        server_of(cluster).cut("PUT", CONFIGMAPS, subresource="status", served=False, times=None)
    with pytest.raises(KubeError) as caught:
        await cluster.kube.modify_status(CONFIGMAPS, "a", _set_phase, namespace=NS)
    assert type(caught.value) is error
    assert len(cluster.server.requests_to("GET", CONFIGMAPS)) == MODIFY_ATTEMPTS
    if fault == "conflict":
        assert _status_writes(cluster) == [409] * MODIFY_ATTEMPTS
    else:
        assert _status_writes(cluster) == []  # every one cut before it was served
        stored = cluster.server.get(CONFIGMAPS, "a", NS)
        assert stored is not None and "status" not in stored


async def test_modify_status_of_an_object_gone_is_none(cluster: FakeCluster) -> None:
    assert await cluster.kube.modify_status(CONFIGMAPS, "gone", _set_phase, namespace=NS) is None


def _raising(*errors: BaseException) -> tuple[Callable[[], Awaitable[str]], list[int]]:
    """A call raising ``errors`` one per call, then answering; and its call count."""
    count = [0]

    async def call() -> str:
        count[0] += 1
        if count[0] <= len(errors):
            raise errors[count[0] - 1]
        return "answer"

    return call, count


def _lost() -> Unreachable:
    return Unreachable(what="PATCH x", cause=aiohttp.ServerDisconnectedError())


async def test_idempotent_retries_lost_answers_only(no_pauses: list[int]) -> None:
    call, count = _raising(_lost(), _lost())
    assert await idempotent(call) == "answer"
    assert count == [3]
    assert no_pauses == [1, 2]

    refused = Conflict(what="PATCH x", status=409, body={"reason": "Conflict"})
    call, count = _raising(refused, _lost())
    with pytest.raises(Conflict):
        await idempotent(call)
    assert count == [1]

    call, count = _raising(NotFound(what="DELETE x", status=404, body={}))
    with pytest.raises(NotFound):
        await idempotent(call)
    assert count == [1]


async def test_idempotent_gives_up_after_its_attempts() -> None:
    call, count = _raising(*(_lost() for _ in range(4)))
    with pytest.raises(Unreachable):
        await idempotent(call, attempts=3)
    assert count == [3]


async def test_a_cancellation_meeting_the_time_limit_is_never_swallowed(flaky: str) -> None:
    """A task cancelled just as its call's time limit passes ends cancelled, every time.

    With aiohttp's own total timeout (``ClientTimeout(total=...)``) on Python 3.11 about one
    such cancellation in four came back as a TimeoutError instead: the leader's renewal loop,
    cancelled at the end of a term as its call timed out, carried on renewing the lease of a
    replica that no longer led (a dropped-connections run held the lease for minutes with
    nothing scheduled). The call now runs under ``asyncio.timeout``, which counts the
    cancellations it did not make."""
    kube = _kube(flaky, timeout=0.1)
    swallowed = 0

    async def renew_forever() -> None:
        while True:
            with contextlib.suppress(KubeError):
                await kube.get(CONFIGMAPS, "slow", NS)

    try:
        for i in range(40):
            task = asyncio.create_task(renew_forever())
            # Around the limit: before, at and after the call's timer.
            await asyncio.sleep(0.1 + (i % 5 - 2) * 0.001)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=1.0)
            if not done:
                swallowed += 1
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            else:
                assert task.cancelled()
    finally:
        await kube.api.close()
    assert swallowed == 0, f"{swallowed} of 40 cancellations swallowed"
