"""The worker connections across leadership terms: each term's :meth:`RemoteClusters.run`
closes its clients when it ends, and the next term connects again. A closed client kept for the
next term failed its first probe with aiohttp's "Session is closed", a RuntimeError that ended
the leader's term at once, every term after the first (found in tests/reliability/
test_dropped_connections.py, where a blackout ends a term and MultiKueueClusters were defined)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from kqueue.api.v1alpha1 import MultiKueueCluster, parse_object
from kqueue.controller.admission_checks.multikueue.clusters import RemoteClusters
from kqueue.controller.informer import Store


class _Manager:
    """The manager's API as RemoteClusters writes it: the clusters' Active condition."""

    def __init__(self) -> None:
        self.writes = 0

    async def modify_status(self, *args: object, **kwargs: object) -> None:
        self.writes += 1


@pytest.fixture
async def worker() -> AsyncIterator[str]:
    async def version(_: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "37", "gitVersion": "v1.37.2"})

    app = web.Application()
    app.router.add_get("/version", version)
    server = TestServer(app)
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


async def test_a_new_term_connects_again_after_the_last_one_closed_its_clients(
    worker: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "w1.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "w1",
        "clusters": [{"name": "w1", "cluster": {"server": worker}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "w1", "context": {"cluster": "w1", "user": "u"}}],
    }))
    mkc = parse_object({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "MultiKueueCluster",
        "metadata": {"name": "w1"},
        "spec": {"clusterSource": {"kubeConfig": {
            "locationType": "Path", "location": str(kubeconfig)}}},
    })
    assert isinstance(mkc, MultiKueueCluster)
    clusters: Store[MultiKueueCluster] = Store()
    clusters._put("w1", mkc, "1")
    remotes = RemoteClusters(
        clusters=clusters, kube=_Manager(),  # type: ignore[arg-type]
        namespace="kqueue-system", now=lambda: datetime.now(UTC),
    )
    for term in (1, 2, 3):
        run = asyncio.create_task(remotes.run())
        for _ in range(300):
            if remotes.client("w1") is not None or run.done():
                break
            await asyncio.sleep(0.01)
        assert not run.done(), f"term {term} ended: {run.exception()!r}"
        client = remotes.client("w1")
        assert client is not None, f"term {term}: worker w1 not reachable"
        status, _ = await client.request("GET", "/version")
        assert status == 200
        run.cancel()  # the term ends
        await asyncio.gather(run, return_exceptions=True)
        assert remotes.client("w1") is None
