"""The web view's HTTP server (aiohttp): read-only pages over snapshots of the cluster.

Routes: ``/`` (the cohort tree with usage bars, and every ClusterQueue's pending workloads),
``/clusterqueues/{name}``, ``/workloads``, ``/workloads/{namespace}/{name}`` (the explanation),
``/healthz``. Only GET.

A snapshot lists the engine's kinds from the API server (:mod:`kqueue.cli.cluster`) and settles
an engine on them; pages within ``ttl`` seconds of each other share one, so a page costs at
most one listing every ``ttl`` seconds however many people look. The engine work runs in a
thread, off the event loop (``kqueue run`` shares its loop with the controller).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from kqueue.api.loader import LoadError
from kqueue.cli.cluster import fetch_engine_objects, load_cluster_objects
from kqueue.cli.webview import pages
from kqueue.cli.webview.board import Board, Node
from kqueue.controller import kube as k
from kqueue.controller.probes import serve_app
from kqueue.visibility.pending import UnknownQueue

logger = logging.getLogger(__name__)

Fetch = Callable[[], Awaitable[list[dict[str, Any]]]]

DEFAULT_TTL = 5.0


class Snapshots:
    """The latest :class:`Board`, refreshed at most every ``ttl`` seconds, on demand."""

    def __init__(self, fetch: Fetch, *, ttl: float = DEFAULT_TTL) -> None:
        self._fetch = fetch
        self._ttl = ttl
        self._board: Board | None = None
        self._at = 0.0
        self._lock = asyncio.Lock()

    @classmethod
    def of_cluster(cls, client: k.Kube, *, ttl: float = DEFAULT_TTL) -> Snapshots:
        return cls(lambda: fetch_engine_objects(client), ttl=ttl)

    async def board(self) -> Board:
        async with self._lock:
            if self._board is None or time.monotonic() - self._at >= self._ttl:
                docs = await self._fetch()
                now = datetime.now(UTC).replace(microsecond=0)
                self._board = await asyncio.to_thread(
                    lambda: Board.of(load_cluster_objects(docs), now)
                )
                self._at = time.monotonic()
            return self._board


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def web_view_app(snapshots: Snapshots) -> web.Application:
    async def board_or_error() -> Board | web.Response:
        try:
            return await snapshots.board()
        except (k.KubeError, LoadError, OSError) as err:
            logger.warning("web view: cannot read the cluster: %s", err)
            return _html(pages.error("Cannot read the cluster", str(err), None), 503)
        except Exception as err:  # a click.ClickException from the listing, or an engine bug
            logger.exception("web view: snapshot failed")
            return _html(pages.error("Cannot read the cluster", str(err), None), 503)

    async def overview(_request: web.Request) -> web.Response:
        board = await board_or_error()
        if isinstance(board, web.Response):
            return board
        pending = {cq: board.pending_in(cq) for cq in board.cluster_queue_names()}
        return _html(pages.overview(board.tree(), pending, board.taken_at))

    async def cluster_queue(request: web.Request) -> web.Response:
        board = await board_or_error()
        if isinstance(board, web.Response):
            return board
        name = request.match_info["name"]
        try:
            items = board.pending_in(name)
        except UnknownQueue as err:
            return _html(pages.error("ClusterQueue not found", str(err), board.taken_at), 404)
        node = _find_node(board.tree(), name) or Node("ClusterQueue", name)
        admitted = [r for r in board.workloads(name) if r.status == "Admitted"]
        return _html(pages.cluster_queue(node, items, admitted, board.taken_at))

    async def workloads(_request: web.Request) -> web.Response:
        board = await board_or_error()
        if isinstance(board, web.Response):
            return board
        return _html(pages.workloads(board.workloads(), board.taken_at))

    async def workload(request: web.Request) -> web.Response:
        board = await board_or_error()
        if isinstance(board, web.Response):
            return board
        key = f"{request.match_info['namespace']}/{request.match_info['name']}"
        result, text = await asyncio.to_thread(board.explain, key)
        return _html(
            pages.workload(key, result, text, board.taken_at), 200 if result.found else 404
        )

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", overview)
    app.router.add_get("/clusterqueues/{name}", cluster_queue)
    app.router.add_get("/workloads", workloads)
    app.router.add_get("/workloads/{namespace}/{name}", workload)
    app.router.add_get("/healthz", healthz)
    return app


def _find_node(nodes: list[Node], name: str) -> Node | None:
    for n in nodes:
        if n.kind == "ClusterQueue" and n.name == name:
            return n
        found = _find_node(n.children, name)
        if found is not None:
            return found
    return None


async def serve_web_view(snapshots: Snapshots, bind_address: str) -> web.AppRunner | None:
    """Serve the web view on ``bind_address``; None when it is ``"0"`` (off)."""
    return await serve_app(web_view_app(snapshots), bind_address)
