"""The controller's API client: one connection pool, no per-request env lookups, one error tree."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from kqueue.controller.kube import (
    POOL_SIZE,
    Conflict,
    Gone,
    Kube,
    KubeError,
    NotFound,
    new_api_client,
)
from kqueue.controller.resources import CONFIGMAPS
from tests.controller.mock_apiserver import ObjectApiServer, start_app

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    return str(path)


async def test_without_a_proxy_requests_skip_the_environment(kubeconfig: str) -> None:
    api = await new_api_client(kubeconfig)
    try:
        session = api.rest_client.pool_manager
        assert session.trust_env is False
        assert session.connector is not None and session.connector.limit == POOL_SIZE
        assert api.configuration.host == "https://127.0.0.1:6443"
    finally:
        await api.close()
    assert session.closed and session.connector is None


async def test_a_proxy_in_the_environment_is_still_honoured(
    kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    api = await new_api_client(kubeconfig)
    try:
        assert api.rest_client.pool_manager.trust_env is True
    finally:
        await api.close()


@pytest.mark.parametrize(
    ("status", "error"),
    [
        pytest.param(409, Conflict, id="conflict"),
        pytest.param(404, NotFound, id="not-found"),
        pytest.param(410, Gone, id="gone"),
        pytest.param(500, KubeError, id="other"),
    ],
)
def test_one_error_tree_from_an_http_answer_or_a_status_object(
    status: int, error: type[KubeError]
) -> None:
    body = {"kind": "Status", "code": status, "reason": "Why", "message": "what happened"}
    for err in (
        KubeError.of("get pods default/p", status, body),
        KubeError.from_status(body, what="watch pods"),
        KubeError.from_status({"reason": "Why", "message": "m"}, what="x", http_status=status),
    ):
        assert type(err) is error
        assert err.status == status and err.reason == "Why"
    assert str(KubeError.of("get pods default/p", status, body)) == (
        f"get pods default/p: HTTP {status} Why: what happened"
    )


async def test_a_refused_watch_raises_before_the_stream_is_read() -> None:
    server = ObjectApiServer()
    test_server, (client,) = await start_app(server.app(), ["kqueue"])
    try:
        kube = Kube(client)
        with pytest.raises(NotFound, match="watch configmaps in namespace default"):
            async with kube.stream(
                CONFIGMAPS, namespace="default", query=[("watch", "true")], read_timeout=5
            ):
                pass
    finally:
        await client.close()
        await test_server.close()


async def test_a_call_may_bound_itself_tighter_than_the_client() -> None:
    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps/slow", slow)
    test_server, (client,) = await start_app(app, ["kqueue"])
    try:
        kube = Kube(client, timeout=30)
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await kube.get(CONFIGMAPS, "slow", "default", time_limit=0.2)
        assert asyncio.get_running_loop().time() - started < 2
    finally:
        await client.close()
        await test_server.close()
