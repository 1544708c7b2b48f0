"""A scripted kube-apiserver over real HTTP, for informer tests without a cluster.

It serves one collection (``/api/v1/namespaces/{ns}/configmaps`` and ``/api/v1/configmaps``):
list requests get the next queued list (paginated by ``limit``/``continue`` like the real
server), watch requests play the next queued script of events as a chunked JSON-lines stream.
Every request's query is recorded so tests can assert what the client asked for.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client import ApiClient, Configuration

Obj = dict[str, Any]


def configmap(name: str, rv: int, namespace: str = "default", **data: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv)},
        "data": dict(data),
    }


def status(code: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


@dataclass
class ListResponse:
    resource_version: int
    items: list[Obj]
    http_error: int | None = None  # answer with this HTTP status and a Status body instead


@dataclass
class Event:
    type: str
    object: Obj


def bookmark(rv: int) -> Event:
    return Event(
        "BOOKMARK",
        {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}},
    )


def gone_event() -> Event:
    return Event("ERROR", status(410, "Expired", "too old resource version: 10 (30)"))


@dataclass
class Close:
    """End the stream (as the server does after timeoutSeconds)."""


@dataclass
class HttpStatus:
    """Refuse the watch request itself with this HTTP status."""

    code: int


@dataclass
class RawLine:
    data: bytes


Step = Event | Close | HttpStatus | RawLine


@dataclass
class Request:
    path: str
    query: dict[str, str]

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


@dataclass
class MockApiServer:
    lists: deque[ListResponse] = field(default_factory=deque)
    watches: deque[list[Step]] = field(default_factory=deque)
    requests: list[Request] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{namespace}/configmaps", self._handle)
        app.router.add_get("/api/v1/configmaps", self._handle)
        return app

    @property
    def list_requests(self) -> list[Request]:
        return [r for r in self.requests if not r.is_watch]

    @property
    def watch_requests(self) -> list[Request]:
        return [r for r in self.requests if r.is_watch]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        req = Request(request.path, dict(request.query))
        self.requests.append(req)
        if req.is_watch:
            return await self._watch(request)
        return self._list(req)

    def _list(self, req: Request) -> web.Response:
        if not self.lists:
            return web.json_response(status(500, "InternalError", "no list scripted"), status=500)
        # The last scripted list keeps answering; earlier ones are consumed, except while
        # paginating (a continue token refers to the list being paged through).
        current = self.lists[0]
        if current.http_error is not None:
            self.lists.popleft()
            return web.json_response(
                status(current.http_error, "InternalError", "etcd is sad"),
                status=current.http_error,
            )
        start = int(req.query.get("continue") or 0)
        limit = int(req.query.get("limit") or 0) or len(current.items) or 1
        # Like the real server for built-in types, list items carry no apiVersion/kind.
        page = [
            {k: v for k, v in item.items() if k not in ("apiVersion", "kind")}
            for item in current.items[start : start + limit]
        ]
        metadata: Obj = {"resourceVersion": str(current.resource_version)}
        if start + limit < len(current.items):
            metadata = {"continue": str(start + limit)}
        elif len(self.lists) > 1:
            self.lists.popleft()
        return web.json_response(
            {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": metadata, "items": page}
        )

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        script = self.watches.popleft() if self.watches else []
        if script and isinstance(script[0], HttpStatus):
            code = script[0].code
            return web.json_response(
                status(code, "Expired", "resource version too old"), status=code
            )
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for step in script:
            if isinstance(step, Close):
                return response
            if isinstance(step, RawLine):
                await response.write(step.data)
            elif isinstance(step, Event):
                line = json.dumps({"type": step.type, "object": step.object}) + "\n"
                await response.write(line.encode())
            await asyncio.sleep(0)
        # Script exhausted: keep the stream open, like an idle watch, until the client leaves.
        await asyncio.Event().wait()
        return response


async def start(
    server: MockApiServer,
) -> tuple[TestServer, ApiClient]:
    test_server = TestServer(server.app())
    await test_server.start_server()
    config = Configuration(host=str(test_server.make_url("")).rstrip("/"))
    return test_server, ApiClient(configuration=config)


async def eventually(
    condition: Callable[[], bool], *, within: float = 5.0, what: str = "condition"
) -> None:
    """Poll ``condition`` (state owned by the code under test, which signals nothing)."""
    try:
        async with asyncio.timeout(within):
            while not condition():  # noqa: ASYNC110 - there is no event to wait on
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out after {within}s waiting for {what}") from None


@dataclass
class ObjectApiServer:
    """Any object by its URL path, with the API server's optimistic concurrency: a PUT with a
    stale resourceVersion gets 409 Conflict, a POST of an existing name 409 AlreadyExists.
    Clients whose User-Agent is in ``partitioned`` get 503, as if the network were down."""

    objects: dict[str, Obj] = field(default_factory=dict)
    partitioned: set[str] = field(default_factory=set)
    writes: list[tuple[str, str]] = field(default_factory=list)
    _rv: int = 100

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    def put(self, path: str, obj: Obj) -> Obj:
        """Store ``obj`` at ``path`` directly (test setup), with a fresh resourceVersion."""
        stored = {
            **obj,
            "metadata": {**obj.get("metadata", {}), "resourceVersion": self._next_rv()},
        }
        self.objects[path] = stored
        return stored

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    async def _handle(self, request: web.Request) -> web.Response:
        if request.headers.get("User-Agent") in self.partitioned:
            return web.json_response(status(503, "ServiceUnavailable", "partitioned"), status=503)
        path = request.path
        if request.method == "GET":
            obj = self.objects.get(path)
            if obj is None:
                return web.json_response(status(404, "NotFound", f"{path} not found"), status=404)
            return web.json_response(obj)
        body = await request.json()
        if request.method == "POST":
            target = f"{path}/{body['metadata']['name']}"
            if target in self.objects:
                return web.json_response(status(409, "AlreadyExists", "already exists"), status=409)
            self.writes.append(("create", target))
            return web.json_response(self.put(target, body), status=201)
        if request.method == "PUT":
            current = self.objects.get(path)
            if current is None:
                return web.json_response(status(404, "NotFound", f"{path} not found"), status=404)
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return web.json_response(
                    status(409, "Conflict", "the object has been modified"), status=409
                )
            self.writes.append(("replace", path))
            return web.json_response(self.put(path, body))
        return web.json_response(status(405, "MethodNotAllowed", request.method), status=405)


LEASES_PATH = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"


@dataclass
class LeaseApiServer(ObjectApiServer):
    def lease(self, namespace: str, name: str) -> Obj:
        return self.objects[LEASES_PATH.format(namespace=namespace, name=name)]

    def holder(self, namespace: str, name: str) -> str | None:
        lease = self.objects.get(LEASES_PATH.format(namespace=namespace, name=name))
        return None if lease is None else lease["spec"].get("holderIdentity")


async def start_app(
    app: web.Application, user_agents: list[str]
) -> tuple[TestServer, list[ApiClient]]:
    """Serve ``app`` and make one ApiClient per user agent."""
    test_server = TestServer(app)
    await test_server.start_server()
    clients = []
    for agent in user_agents:
        config = Configuration(host=str(test_server.make_url("")).rstrip("/"))
        client = ApiClient(configuration=config)
        client.user_agent = agent
        clients.append(client)
    return test_server, clients
