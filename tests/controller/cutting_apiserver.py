"""The shared fake API server (fake_apiserver.py), with connections cut as a load balancer cuts them.

:class:`CuttingApiServer` answers as :class:`~tests.controller.fake_apiserver.FakeApiServer`
does, except where a test asks for a cut: a request whose connection is closed before it is
served (the write never lands), or after it is served (the write landed and its answer is lost:
the client cannot tell the two apart), and open watches closed mid-stream. The client then sees
what it sees on a real cluster behind a flaky load balancer: a dropped connection, a payload
not completed; never an HTTP status.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

import pytest
from aiohttp import web

from kqueue.controller.resources import Resource
from tests.controller.fake_apiserver import (
    FakeApiServer,
    FakeCluster,
    parse_path,
    start_fake_cluster,
)

__all__ = ["CuttingApiServer", "cutting_cluster", "record_pauses", "server_of"]


@dataclass
class _Cut:
    method: str
    plural: str
    subresource: str | None
    times: int | None
    served: bool
    then: Callable[[], None] | None
    watches: bool
    until: Callable[[], bool] | None


class CuttingApiServer(FakeApiServer):
    def __post_init__(self) -> None:
        super().__post_init__()
        self._cuts: list[_Cut] = []
        self._watching: set[asyncio.Transport] = set()
        self.hung_up = 0
        """Requests whose connection was cut (served or not)."""
        self.received: list[tuple[str, str, dict[str, str]]] = []
        """Every request as it arrived (cut ones too): method, path, query."""

    def cut(
        self,
        method: str,
        resource: Resource,
        *,
        subresource: str | None = None,
        served: bool,
        times: int | None = 1,
        then: Callable[[], None] | None = None,
        watches: bool = False,
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Close the connection of matching requests (``times`` of them; None: until cleared),
        before serving them or, with ``served``, after serving them (the answer is lost).
        ``then`` runs after each cut: what someone else did while the client was cut off.
        ``watches``: only watch requests match (a watch cut before it opens). ``until``: no
        longer once it holds (aiohttp sends an idempotent request cut on a reused connection
        once more by itself, so the client's own count is the one to stop at)."""
        self._cuts.append(
            _Cut(method, resource.plural, subresource, times, served, then, watches, until)
        )

    def watch_versions(self) -> list[str]:
        """The resourceVersion each watch request asked to start from, in order."""
        return [q.get("resourceVersion", "") for m, _, q in self.received if _is_watch(q)]

    def list_requests(self) -> int:
        """Collection reads that are not watches (lists), cut or not."""
        return sum(
            1
            for method, path, q in self.received
            if method == "GET" and not _is_watch(q) and (t := parse_path(path)) and not t.name
        )

    def cut_watches(self) -> int:
        """Close every open watch's connection mid-stream; returns how many were open."""
        open_now = list(self._watching)
        for transport in open_now:
            transport.close()
        self._watching.clear()
        return len(open_now)

    def clear_cuts(self) -> None:
        self._cuts.clear()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.received.append((request.method, request.path, dict(request.query)))
        cut = self._take_cut(request)
        transport = request.transport
        if cut is None or transport is None:
            if _is_watch(request.query) and transport is not None:
                self._watching.add(transport)  # type: ignore[arg-type]
            return await super()._handle(request)
        response: web.StreamResponse = web.Response()
        if cut.served:
            response = await super()._handle(request)
        self.hung_up += 1
        transport.abort()
        if cut.then is not None:
            cut.then()
        return response

    def _take_cut(self, request: web.Request) -> _Cut | None:
        target = parse_path(request.path)
        if target is None:
            return None
        for cut in self._cuts:
            if cut.method != request.method or cut.plural != target.plural:
                continue
            if cut.subresource is not None and cut.subresource != target.subresource:
                continue
            if cut.watches and not _is_watch(request.query):
                continue
            if cut.until is not None and cut.until():
                continue
            if cut.times is not None:
                if cut.times <= 0:
                    continue
                cut.times -= 1
            return cut
        return None


def _is_watch(query: Mapping[str, str]) -> bool:
    return query.get("watch") in ("true", "1")


async def cutting_cluster() -> AsyncIterator[FakeCluster]:
    """The ``cluster`` fixture's body (fake_apiserver.py), on a :class:`CuttingApiServer`."""
    test_server, cluster = await start_fake_cluster(CuttingApiServer())
    try:
        yield cluster
    finally:
        await cluster.close()
        await cluster.server.shutdown()
        await test_server.close()


def server_of(cluster: FakeCluster) -> CuttingApiServer:
    assert isinstance(cluster.server, CuttingApiServer)
    return cluster.server


def record_pauses(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[int]:
    """Replace ``module``'s ``pause_after_lost_answer`` (kube.py) with one that records each
    attempt it is asked about and pauses for a millisecond: the retries, not their waits."""
    attempts: list[int] = []

    def pause(attempt: int) -> float:
        attempts.append(attempt)
        return 0.001

    monkeypatch.setattr(module, "pause_after_lost_answer", pause)
    return attempts
