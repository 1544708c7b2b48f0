"""Watching a collection from the benchmarks' runners: the runner sees each object as the API
server streams it, so its timestamps are when a change became visible to any client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

from kqueue.controller.kube import Kube

Obj = dict[str, Any]


async def watch_round(kube: Kube, path: str, rv: str) -> AsyncIterator[tuple[Obj, str]]:
    """One watch request of the collection at ``path`` from ``rv``: each object added or
    modified, with the resourceVersion to resume from, until the server ends the stream."""
    response: aiohttp.ClientResponse = await kube.api.call_api(
        path,
        "GET",
        query_params=[
            ("watch", "1"),
            ("resourceVersion", rv),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "3600"),
        ],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
    )
    async with response:
        async for line in response.content:
            if not line.strip():
                continue
            ev = json.loads(line)
            obj = ev.get("object") or {}
            if ev.get("type") == "ERROR":
                raise RuntimeError(f"watch error: {obj}")
            rv = obj.get("metadata", {}).get("resourceVersion", rv)
            if ev.get("type") in ("ADDED", "MODIFIED"):
                yield obj, rv


async def watch_from_now(kube: Kube, path: str, observe: Callable[[Obj], None]) -> None:
    """Every change to the collection at ``path`` after now, given to ``observe``, until the
    task is cancelled (each round resumes where the last one ended)."""
    rv = (await kube.request("GET", path))[1]["metadata"]["resourceVersion"]
    while True:
        async for obj, seen in watch_round(kube, path, rv):
            rv = seen
            observe(obj)
