"""The controller's API client: one connection pool, no per-request env lookups, one error tree."""

from __future__ import annotations

import asyncio
import copy
import functools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient

from kqueue.controller.kube import (
    JSON_PATCH,
    MERGE_PATCH,
    POOL_SIZE,
    Conflict,
    Gone,
    Kube,
    KubeError,
    NotFound,
    Unreachable,
    direct_call_api,
    encode_body,
    loads,
    new_api_client,
    send_directly,
)
from kqueue.controller.ratelimit import throttle
from kqueue.controller.resources import CONFIGMAPS
from tests.controller.fake_apiserver import FakeApiServer, start_app

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
        assert isinstance(api.call_api, functools.partial)
        assert api.call_api.func is direct_call_api
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
    server = FakeApiServer()
    server.fail("GET", CONFIGMAPS, code=404)
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
        with pytest.raises(Unreachable, match="TimeoutError"):
            await kube.get(CONFIGMAPS, "slow", "default", time_limit=0.2)
        assert asyncio.get_running_loop().time() - started < 2
    finally:
        await client.close()
        await test_server.close()


# -- requests are sent as ApiClient.call_api sends them -----------------------------------------

_Seen = tuple[str, str, dict[str, str], bytes]


async def _recording_server() -> tuple[web.Application, list[_Seen]]:
    seen: list[_Seen] = []

    async def record(request: web.Request) -> web.Response:
        headers = {
            k.lower(): v for k, v in request.headers.items()
            if k.lower() not in ("content-length", "host")
        }
        seen.append((request.method, str(request.rel_url), headers, await request.read()))
        return web.json_response({"kind": "Status", "code": 200})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    return app, seen


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "query"),
    [
        pytest.param("GET", "/api/v1/namespaces/a/configmaps/x", None, "application/json", None,
                     id="get"),
        pytest.param("GET", "/apis/kqueue.io/v1alpha1/workloads", None, "application/json",
                     [("labelSelector", "a=b,c in (d)"), ("limit", "500")], id="list-with-query"),
        pytest.param("PUT", "/apis/kqueue.io/v1alpha1/namespaces/a/workloads/w/status",
                     {"metadata": {"name": "w", "resourceVersion": "7"},
                      "status": {"conditions": [{"type": "Admitted", "status": "True",
                                                 "message": "é ✓ \"quoted\""}],
                                 "count": 3, "ratio": 0.5, "none": None, "flag": False}},
                     "application/json", None, id="put-status"),
        pytest.param("PATCH", "/api/v1/namespaces/a/pods/p", [{"op": "remove", "path": "/x"}],
                     JSON_PATCH, None, id="json-patch"),
        pytest.param("PATCH", "/api/v1/namespaces/a/pods/p", {"metadata": {"labels": {}}},
                     MERGE_PATCH, None, id="merge-patch"),
        pytest.param("POST", "/api/v1/namespaces/a/events", {}, "application/json", None,
                     id="empty-body"),
        pytest.param("POST", "/api/v1/namespaces/a/events",
                     {"eventTime": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
                      "series": ("a", 1)}, "application/json", None,
                     id="datetime-and-tuple-take-call-api-way"),
        pytest.param("DELETE", "/api/v1/namespaces/a/pods/p",
                     {"kind": "DeleteOptions", "apiVersion": "v1",
                      "propagationPolicy": "Background"}, "application/json", None,
                     id="delete"),
    ],
)
async def test_a_request_is_sent_as_call_api_sends_it(
    method: str, path: str, body: Any, content_type: str, query: list[tuple[str, str]] | None
) -> None:
    app, seen = await _recording_server()
    test_server, (client,) = await start_app(app, ["kqueue"])
    client.configuration.api_key["BearerToken"] = "secret"
    client.configuration.api_key_prefix["BearerToken"] = "Bearer"
    refreshed: list[int] = []
    client.configuration.refresh_api_key_hook = lambda _: refreshed.append(1)
    try:
        response = await client.call_api(
            path, method, query_params=list(query or []),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=copy.deepcopy(body), auth_settings=["BearerToken"], _preload_content=False,
        )
        response.release()
        send_directly(client)
        status, _ = await Kube(client).request(
            method, path, copy.deepcopy(body), content_type=content_type, query=query
        )
        assert status == 200
    finally:
        await client.close()
        await test_server.close()
    assert len(seen) == 2
    assert seen[1] == seen[0]
    assert seen[1][2]["authorization"] == "Bearer secret"
    assert refreshed == [1, 1], "the token's refresh hook runs for every request"


@settings(max_examples=200, deadline=None)
@given(body=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
))
def test_a_json_body_encodes_to_call_api_s_text(body: Any) -> None:
    api = ApiClient.__new__(ApiClient)  # sanitize_for_serialization reads no client state
    sanitized = api.sanitize_for_serialization(body) if body else body
    want = None if sanitized is None else json.dumps(sanitized)
    assert encode_body(api, body) == want


async def test_a_throttled_client_still_throttles_requests_sent_directly() -> None:
    app, seen = await _recording_server()
    test_server, (client,) = await start_app(app, ["kqueue"])
    send_directly(client)
    limits = throttle(client, qps=1000, burst=5)
    assert limits is not None
    try:
        kube = Kube(client)
        for _ in range(3):
            await kube.request("PUT", "/apis/kqueue.io/v1alpha1/namespaces/a/workloads/w/status", {})
        await kube.request("GET", "/api/v1/namespaces/a/configmaps/c")
    finally:
        await client.close()
        await test_server.close()
    assert len(seen) == 4
    assert limits.buckets["kqueue.io/workloads"].acquired == 3
    assert limits.buckets["/configmaps"].acquired == 1


async def test_other_calls_go_to_call_api_s_own_way() -> None:
    """A typed call (path parameters, a decoded answer) is not one direct_call_api sends."""
    calls: list[tuple[Any, ...]] = []

    async def original(*args: Any, **kwargs: Any) -> str:
        calls.append((args, kwargs))
        return "original"

    api = ApiClient.__new__(ApiClient)
    got = await direct_call_api(
        api, original, "/api/v1/namespaces/{namespace}/pods", "GET",
        path_params={"namespace": "a"}, response_types_map={200: "V1PodList"},
    )
    assert got == "original"
    assert calls and calls[0][1]["path_params"] == {"namespace": "a"}


async def test_write_status_answers_what_replace_status_decodes_and_raises_the_same() -> None:
    server = FakeApiServer()
    server.add(CONFIGMAPS, {"metadata": {"name": "c", "namespace": "default"}, "status": {"n": 1}})
    test_server, (client,) = await start_app(server.app(), ["kqueue"])

    def stored() -> Any:
        return server.get(CONFIGMAPS, "c", "default")

    try:
        kube = Kube(client)
        rv = stored()["metadata"]["resourceVersion"]
        raw = await kube.write_status(
            CONFIGMAPS, {"metadata": {"name": "c", "resourceVersion": rv}, "status": {"n": 2}},
            namespace="default",
        )
        assert isinstance(raw, bytes)
        assert loads(raw) == stored()
        decoded = await kube.replace_status(
            CONFIGMAPS,
            {"metadata": {"name": "c", "resourceVersion": loads(raw)["metadata"]["resourceVersion"]},
             "status": {"n": 3}},
            namespace="default",
        )
        assert decoded == stored() and decoded["status"] == {"n": 3}
        stale = {"metadata": {"name": "c", "resourceVersion": rv}, "status": {"n": 4}}
        errors = []
        for write in (kube.write_status, kube.replace_status):
            with pytest.raises(Conflict) as caught:
                await write(CONFIGMAPS, stale, namespace="default")
            errors.append(str(caught.value))
        assert errors[0] == errors[1]
        assert "update status of configmaps default/c: HTTP 409 Conflict" in errors[0]
    finally:
        await client.close()
        await test_server.close()
