"""An in-process kube-apiserver over real HTTP, shared by the controller's unit tests.

The controller's real client (:class:`~kqueue.controller.kube.Kube`) and real informers talk to
it as to a cluster: objects of any resource by their REST paths, lists and watches (with label
selectors, resuming from a resourceVersion, objects leaving a selector seen as deleted), create
(409 AlreadyExists, ``generateName``), replace with optimistic concurrency (409 Conflict on a
stale resourceVersion), the ``status`` subresource (a write to one part keeps the other), merge
and JSON patches (``test`` ops and a ``metadata.resourceVersion`` in a merge patch are
preconditions), delete with finalizers (``deletionTimestamp`` until the last one goes), and
discovery of the group/versions a test declares served (``discovery``). What the API server's
defaulting and validation do to a created object of a kind (``admission``) a test may say.

Tests set objects up with :meth:`FakeApiServer.add` (kept as given, uid included, with a fresh
resourceVersion), read what the controller wrote with :meth:`FakeApiServer.get` and
:meth:`FakeApiServer.requests_to`, make requests fail (:meth:`FakeApiServer.fail`), take
time (``delay``) or wait until released (:meth:`FakeApiServer.hold`), and read how many
overlapped, per resource or per object (:meth:`FakeApiServer.max_in_flight`). Nothing
here reaches into the controller's stores: a test waits for its informers to see the server's
state (:meth:`FakeCluster.synced`).

Clients are told apart by their User-Agent (:func:`start_app` makes one client per agent): those
in ``partitioned`` get 503, as if the network between them and the server were down. What no
consistent server would say, an informer test scripts: queued :class:`ListResponse` answers
(paginated by ``limit``/``continue``, or an HTTP error) and watch scripts of :data:`Step`
(events, bookmarks, a 410 in the stream or on the request, a malformed line, the end of the
stream) answer list and watch requests while any is queued, instead of the stored objects.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client import ApiClient, Configuration

from kqueue.controller.informer import Informer
from kqueue.controller.kube import Kube
from kqueue.controller.resources import Resource, object_key

Obj = dict[str, Any]
T = TypeVar("T")

# Sub-paths that are subresources of an object, not collections in a namespace.
_SUBRESOURCES = frozenset({"status", "finalize", "scale", "eviction"})

# The Status reason the API server gives with an HTTP code (a scripted fault answers with it).
_REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    503: "ServiceUnavailable",
}


def status(code: int, reason: str, message: str) -> Obj:
    """A ``Status`` object, as the API server answers a refusal."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


class Refused(Exception):
    """Raised by an ``admission`` hook: the API server refuses the object."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


@dataclass(frozen=True)
class Target:
    """What a request addresses: a group/version (discovery, ``plural`` empty), a collection
    (``name`` empty) or one object."""

    group: str
    version: str
    plural: str
    namespace: str | None
    name: str = ""
    subresource: str = ""

    @property
    def kind_key(self) -> tuple[str, str]:
        return self.group, self.plural


@dataclass
class Recorded:
    """One request the server answered."""

    method: str
    target: Target
    query: dict[str, str]
    body: Any
    status: int = 0
    """The HTTP status of the answer (0 while unanswered)."""
    path: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def is_watch(self) -> bool:
        return self.method == "GET" and self.query.get("watch") in ("true", "1")

    @property
    def plural(self) -> str:
        return self.target.plural

    @property
    def name(self) -> str:
        return self.target.name


# -- scripted answers (informer tests) ---------------------------------------------------------


@dataclass
class ListResponse:
    """A scripted answer to list requests: ``items`` at ``resource_version``."""

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
class _Fault:
    method: str
    plural: str
    name: str | None
    code: int
    times: int | None
    when: Callable[[Any], bool] | None = None


@dataclass
class _WatchEvent:
    rv: int
    kind_key: tuple[str, str]
    type: str
    obj: Obj
    old: Obj | None


def parse_path(path: str) -> Target | None:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return Target(group, version, "", None)
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return Target(group, version, plural, namespace, name, sub)


def _selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """The label selector syntax of list and watch requests: ``k``, ``!k``, ``k=v``, ``k!=v``."""
    for term in (t.strip() for t in selector.split(",") if t.strip()):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class PatchTestFailed(Exception):
    pass


def json_patch(doc: Obj, ops: list[Obj]) -> Obj:
    """RFC 6902 JSON patch (add, remove, replace, test)."""
    out = copy.deepcopy(doc)
    for op in ops:
        tokens = [
            t.replace("~1", "/").replace("~0", "~") for t in str(op["path"]).split("/")[1:]
        ]
        parent: Any = out
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1] if tokens else ""
        kind = op["op"]
        if kind == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op.get("value"):
                raise PatchTestFailed(f"test of {op['path']} failed")
        elif kind == "add":
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                parent.insert(index, copy.deepcopy(op["value"]))
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "replace":
            if isinstance(parent, list):
                parent[int(last)] = copy.deepcopy(op["value"])
            else:
                if last not in parent:
                    raise KeyError(op["path"])
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        else:
            raise ValueError(f"unsupported JSON patch op {kind!r}")
    return out


@dataclass
class FakeApiServer:
    delay: dict[str, float] = field(default_factory=dict)
    """Seconds each request of a method (``PATCH``...) takes, so concurrent ones overlap."""
    requests: list[Recorded] = field(default_factory=list)
    partitioned: set[str] = field(default_factory=set)
    """User-Agents answered 503 before anything is read or recorded."""
    lists: deque[ListResponse] = field(default_factory=deque)
    """Scripted list answers: the last one keeps answering, earlier ones are used once (all
    pages of a paginated list from the same one)."""
    watches: deque[list[Step]] = field(default_factory=deque)
    """Scripted watch streams, one per watch request; an exhausted script stays open, idle."""
    discovery: dict[str, list[str]] = field(default_factory=dict)
    """The plurals served per group/version (``scheduling.k8s.io/v1alpha2``), what discovery
    answers; a group/version not here is not served (404)."""
    admission: dict[str, Callable[[Obj], Obj]] = field(default_factory=dict)
    """Per plural: the object the API server stores for one created (a disabled feature's
    fields dropped, defaults set); raising :class:`Refused` refuses it."""

    def __post_init__(self) -> None:
        self._objects: dict[tuple[str, str], dict[str, Obj]] = {}
        self._rv = 100
        self._history: list[_WatchEvent] = []
        self._changed = asyncio.Condition()
        self._faults: list[_Fault] = []
        # Per (method, plural) and per (method, plural, object key): requests being answered.
        self._in_flight: Counter[tuple[str, ...]] = Counter()
        self._max_in_flight: Counter[tuple[str, ...]] = Counter()
        self._holds: list[tuple[str, str, str | None]] = []
        self._released = asyncio.Event()
        self._uids = 0
        self._closed = False
        self._lagging: set[tuple[tuple[str, str], str]] = set()

    async def shutdown(self) -> None:
        """End every open watch (a server closing its streams)."""
        self._closed = True
        async with self._changed:
            self._changed.notify_all()

    # -- test set-up and inspection --------------------------------------------------------------

    def add(self, resource: Resource, obj: Obj) -> Obj:
        """Store ``obj`` as given (its uid too), with a fresh resourceVersion; watchers see it."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", self._next_uid())
        meta.setdefault("creationTimestamp", _now())
        obj.setdefault("apiVersion", resource.api_version)
        target = Target(
            resource.group, resource.version, resource.plural, meta.get("namespace"), meta["name"]
        )
        old = self._objects.get(target.kind_key, {}).get(object_key(obj))
        self._store(target, obj, old)
        return obj

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj | None:
        key = f"{namespace}/{name}" if namespace else name
        found = self._objects.get((resource.group, resource.plural), {}).get(key)
        return copy.deepcopy(found) if found is not None else None

    def objects(self, resource: Resource) -> list[Obj]:
        return [copy.deepcopy(o) for o in self._objects.get((resource.group, resource.plural), {}).values()]

    def remove(self, resource: Resource, name: str, namespace: str | None = None) -> None:
        """Delete at once (finalizers or not), as if the object's owner were gone."""
        key = f"{namespace}/{name}" if namespace else name
        old = self._objects.get((resource.group, resource.plural), {}).pop(key, None)
        if old is not None:
            self._gone((resource.group, resource.plural), old)

    def requests_to(
        self, method: str, resource: Resource | None = None, *, subresource: str | None = None
    ) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if r.method == method
            and (resource is None or r.target.kind_key == (resource.group, resource.plural))
            and (subresource is None or r.target.subresource == subresource)
        ]

    def fail(
        self,
        method: str,
        resource: Resource,
        name: str | None = None,
        *,
        code: int = 500,
        times: int | None = None,
        when: Callable[[Any], bool] | None = None,
    ) -> None:
        """Answer matching requests with ``code`` (``times`` times; None: until cleared); with
        ``when``, only the requests whose body it accepts (a write of one kind of change)."""
        self._faults.append(_Fault(method, resource.plural, name, code, times, when))

    def hold(self, method: str, resource: Resource, name: str | None = None) -> None:
        """Keep matching requests (of one object, with ``name``) waiting, unanswered and in
        flight, until :meth:`release`: what a client does while its requests are slow."""
        self._holds.append((method, resource.plural, name))

    def release(self) -> None:
        """Go on with every held request and hold no more. One whose client gave up meanwhile
        is not carried out, as the API server cancels a request whose connection closed."""
        self._holds.clear()
        self._released.set()
        self._released = asyncio.Event()

    def lag(self, resource: Resource, key: str) -> None:
        """Withhold watch events of one object (``namespace/name``) until :meth:`catch_up`:
        the informers' copy of it lags behind while other objects' events flow."""
        self._lagging.add(((resource.group, resource.plural), key))

    def catch_up(self, resource: Resource, key: str) -> None:
        kind_key = (resource.group, resource.plural)
        self._lagging.discard((kind_key, key))
        current = self._objects.get(kind_key, {}).get(key)
        if current is not None:
            self._emit(kind_key, "MODIFIED", current, None)

    def clear_faults(self) -> None:
        self._faults.clear()

    @property
    def list_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "GET" and not r.target.name and not r.is_watch]

    @property
    def watch_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.is_watch]

    @property
    def writes(self) -> list[tuple[str, str]]:
        """(verb, object path) of every write the server carried out, in order."""
        verbs = {"POST": "create", "PUT": "replace", "PATCH": "patch", "DELETE": "delete"}
        return [
            (
                verbs[r.method],
                f"{r.path}/{r.body['metadata']['name']}" if r.method == "POST" else r.path,
            )
            for r in self.requests
            if r.method in verbs and r.ok
        ]

    def max_in_flight(
        self, method: str, resource: Resource, name: str | None = None, namespace: str | None = None
    ) -> int:
        """The most requests answered at once, to the resource or (with ``name``) one object."""
        return self._max_in_flight[_slot(method, resource.plural, name, namespace)]

    def in_flight(
        self, method: str, resource: Resource, name: str | None = None, namespace: str | None = None
    ) -> int:
        return self._in_flight[_slot(method, resource.plural, name, namespace)]

    # -- HTTP --------------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("User-Agent") in self.partitioned:
            return _refuse(503, "ServiceUnavailable", "partitioned")
        target = parse_path(request.path)
        if target is None:
            return _refuse(404, "NotFound", f"no API at {request.path}")
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            body = json.loads(raw) if raw else None
        recorded = Recorded(request.method, target, dict(request.query), body, path=request.path)
        self.requests.append(recorded)
        slots = [_slot(request.method, target.plural)]
        if target.name:
            slots.append(_slot(request.method, target.plural, target.name, target.namespace))
        for slot in slots:
            self._in_flight[slot] += 1
            self._max_in_flight[slot] = max(self._max_in_flight[slot], self._in_flight[slot])
        try:
            if self.delay.get(request.method):
                await asyncio.sleep(self.delay[request.method])
            if self._held(request.method, target):
                await self._released.wait()
                # Let a client that gave up be seen gone (its close reaches us as an EOF).
                await asyncio.sleep(0.01)
                if request.transport is None or request.transport.is_closing():
                    recorded.status = 499
                    return web.Response(status=499)
            fault = self._fault(request.method, target, body)
            if fault is not None:
                response: web.StreamResponse = _refuse(
                    fault,
                    _REASONS.get(fault, "InternalError"),
                    f"{request.method} {request.path} failed",
                )
            else:
                response = await self._serve(request, target, body)
            recorded.status = response.status
            return response
        finally:
            for slot in slots:
                self._in_flight[slot] -= 1

    def _held(self, method: str, target: Target) -> bool:
        return any(
            m == method and plural == target.plural and name in (None, target.name)
            for m, plural, name in self._holds
        )

    def _fault(self, method: str, target: Target, body: Any) -> int | None:
        for f in self._faults:
            if f.method != method or f.plural != target.plural:
                continue
            if f.name is not None and f.name != target.name:
                continue
            if f.when is not None and not f.when(body):
                continue
            if f.times is not None:
                if f.times <= 0:
                    continue
                f.times -= 1
            return f.code
        return None

    async def _serve(self, request: web.Request, target: Target, body: Any) -> web.StreamResponse:
        method = request.method
        if not target.plural:
            return self._discover(target)
        if not target.name:
            if method == "GET" and request.query.get("watch") in ("true", "1"):
                if self.watches:
                    return await self._scripted_watch(request, self.watches.popleft())
                return await self._watch(request, target)
            if method == "GET":
                if self.lists:
                    return self._scripted_list(request.query)
                return web.json_response(self._list(target, request.query))
            if method == "POST":
                return self._create(target, body)
            return _refuse(405, "MethodNotAllowed", f"{method} on a collection")
        key = f"{target.namespace}/{target.name}" if target.namespace else target.name
        current = self._objects.get(target.kind_key, {}).get(key)
        if current is None:
            what = f"{target.plural} {target.name!r} not found"
            return _refuse(404, "NotFound", what)
        if method == "GET":
            return web.json_response(current)
        if method == "PUT":
            return self._replace(target, current, body)
        if method == "PATCH":
            return self._patch(target, current, body, request.content_type)
        if method == "DELETE":
            return self._delete(target, current)
        return _refuse(405, "MethodNotAllowed", method)

    # -- verbs -------------------------------------------------------------------------------------

    def _list(self, target: Target, query: Any) -> Obj:
        selector = query.get("labelSelector", "")
        # Only the field selector kqueue uses: metadata.name=<name>.
        by_name = dict(
            f.split("=", 1) for f in (query.get("fieldSelector") or "").split(",") if "=" in f
        ).get("metadata.name")
        items = [
            o
            for o in self._objects.get(target.kind_key, {}).values()
            if (target.namespace is None or o["metadata"].get("namespace") == target.namespace)
            and _selector_matches(selector, o["metadata"].get("labels") or {})
            and (by_name is None or o["metadata"].get("name") == by_name)
        ]
        return {
            "kind": "List",
            "apiVersion": f"{target.group}/{target.version}" if target.group else target.version,
            "metadata": {"resourceVersion": str(self._rv)},
            "items": [copy.deepcopy(o) for o in sorted(items, key=object_key)],
        }

    def _discover(self, target: Target) -> web.Response:
        group_version = f"{target.group}/{target.version}" if target.group else target.version
        served = self.discovery.get(group_version)
        if served is None:
            return _refuse(404, "NotFound", f"the server could not find {group_version}")
        return web.json_response({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": [{"name": plural} for plural in served],
        })

    def _create(self, target: Target, body: Obj) -> web.Response:
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            self._uids += 1
            meta["name"] = f"{meta['generateName']}{self._uids:05d}"
        if target.namespace is not None:
            meta["namespace"] = target.namespace
        admit = self.admission.get(target.plural)
        if admit is not None:
            try:
                body = admit(copy.deepcopy(body))
            except Refused as refused:
                return _refuse(refused.code, refused.reason, refused.message)
            meta = body["metadata"]
        key = object_key(body)
        if key in self._objects.get(target.kind_key, {}):
            return _refuse(409, "AlreadyExists", f"{target.plural} {meta['name']!r} already exists")
        meta["uid"] = self._next_uid()
        meta["creationTimestamp"] = _now()
        meta.pop("resourceVersion", None)
        stored = self._store(replace(target, name=meta["name"]), body, None)
        return web.json_response(stored, status=201)

    def _replace(self, target: Target, current: Obj, body: Obj) -> web.Response:
        sent = (body.get("metadata") or {}).get("resourceVersion")
        if sent and sent != current["metadata"]["resourceVersion"]:
            return _conflict(target)
        if target.subresource == "status":
            new = {**copy.deepcopy(current), "status": copy.deepcopy(body.get("status"))}
        else:
            new = copy.deepcopy(body)
            new["metadata"] = {
                **new.get("metadata", {}),
                "uid": current["metadata"]["uid"],
                "creationTimestamp": current["metadata"].get("creationTimestamp"),
            }
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
        return web.json_response(self._update(target, current, new))

    def _patch(self, target: Target, current: Obj, body: Any, content_type: str) -> web.Response:
        try:
            if content_type == "application/json-patch+json":
                new = json_patch(current, body)
            else:
                sent = ((body or {}).get("metadata") or {}).get("resourceVersion")
                if sent and sent != current["metadata"]["resourceVersion"]:
                    return _conflict(target)
                new = merge_patch(current, body)
        except PatchTestFailed as exc:
            return _refuse(422, "Invalid", str(exc))
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            return _refuse(422, "Invalid", f"the patch does not apply: {exc!r}")
        if target.subresource == "status":
            new = {**copy.deepcopy(current), "status": new.get("status")}
        elif "status" in current:
            new["status"] = copy.deepcopy(current["status"])
        return web.json_response(self._update(target, current, new))

    def _delete(self, target: Target, current: Obj) -> web.Response:
        if current["metadata"].get("finalizers"):
            new = copy.deepcopy(current)
            new["metadata"].setdefault("deletionTimestamp", _now())
            return web.json_response(self._update(target, current, new))
        del self._objects[target.kind_key][object_key(current)]
        self._gone(target.kind_key, current)
        return web.json_response(status(200, "", "deleted") | {"status": "Success"})

    def _update(self, target: Target, current: Obj, new: Obj) -> Obj:
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self._objects[target.kind_key][object_key(current)]
            return self._gone(target.kind_key, new)
        return self._store(target, new, current)

    def _store(self, target: Target, obj: Obj, old: Obj | None) -> Obj:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._objects.setdefault(target.kind_key, {})[object_key(obj)] = obj
        self._emit(target.kind_key, "ADDED" if old is None else "MODIFIED", obj, old)
        return copy.deepcopy(obj)

    def _gone(self, kind_key: tuple[str, str], obj: Obj) -> Obj:
        # Like the API server: the deleted object comes with the deletion's resourceVersion.
        self._rv += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._emit(kind_key, "DELETED", gone, None)
        return gone

    def _emit(self, kind_key: tuple[str, str], type_: str, obj: Obj, old: Obj | None) -> None:
        self._history.append(_WatchEvent(self._rv, kind_key, type_, copy.deepcopy(obj), old))

        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        asyncio.get_running_loop().create_task(notify())

    def _next_uid(self) -> str:
        self._uids += 1
        return f"uid-{self._uids:06d}"

    # -- watch -------------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or self._rv)
        selector = request.query.get("labelSelector", "")
        timeout = float(request.query.get("timeoutSeconds") or 300)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        sent = next((i for i, e in enumerate(self._history) if e.rv > since), len(self._history))
        try:
            async with asyncio.timeout(timeout):
                while not self._closed:
                    for event in self._history[sent:]:
                        if (event.kind_key, object_key(event.obj)) in self._lagging:
                            continue
                        line = self._watch_line(event, target, selector)
                        if line is not None:
                            await response.write(line)
                    sent = len(self._history)
                    async with self._changed:
                        if sent == len(self._history) and not self._closed:
                            await self._changed.wait()
        except TimeoutError:
            pass
        return response

    # -- scripted answers ----------------------------------------------------------------------

    def _scripted_list(self, query: Any) -> web.Response:
        current = self.lists[0]
        if current.http_error is not None:
            self.lists.popleft()
            return _refuse(current.http_error, "InternalError", "etcd is sad")
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(current.items) or 1
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
        kind = current.items[0].get("kind", "") if current.items else ""
        return web.json_response(
            {"kind": f"{kind}List", "apiVersion": "v1", "metadata": metadata, "items": page}
        )

    async def _scripted_watch(self, request: web.Request, script: list[Step]) -> web.StreamResponse:
        if script and isinstance(script[0], HttpStatus):
            return _refuse(script[0].code, "Expired", "resource version too old")
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

    @staticmethod
    def _watch_line(event: _WatchEvent, target: Target, selector: str) -> bytes | None:
        if event.kind_key != target.kind_key:
            return None
        if target.namespace is not None and event.obj["metadata"].get("namespace") != target.namespace:
            return None

        def matches(obj: Obj | None) -> bool:
            return obj is not None and _selector_matches(
                selector, obj["metadata"].get("labels") or {}
            )

        type_ = event.type
        if type_ == "MODIFIED" and selector:
            # As the API server does: an object entering a selected watch is added, one leaving
            # it deleted.
            now, before = matches(event.obj), matches(event.old)
            if not now and not before:
                return None
            type_ = "MODIFIED" if now and before else ("ADDED" if now else "DELETED")
        elif not matches(event.obj):
            return None
        return (json.dumps({"type": type_, "object": event.obj}) + "\n").encode()


def _slot(
    method: str, plural: str, name: str | None = None, namespace: str | None = None
) -> tuple[str, ...]:
    return (method, plural) if name is None else (method, plural, f"{namespace or ''}/{name}")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _refuse(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(status(code, reason, message), status=code)


def _conflict(target: Target) -> web.Response:
    return _refuse(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {target.plural} "{target.name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
    )


# -- the fixture's view ------------------------------------------------------------------------------


@dataclass
class FakeCluster:
    """The fake API server, a real client on it, and informers started by the test."""

    server: FakeApiServer
    api: ApiClient
    kube: Kube
    _informers: list[Informer[Any]] = field(default_factory=list)
    _selectors: dict[int, str] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def informer(
        self,
        resource: Resource,
        converter: Callable[[Obj], T],
        *,
        label_selector: str | None = None,
        indexes: dict[str, Callable[[T], Any]] | None = None,
    ) -> Informer[T]:
        """A running, synced informer on ``resource``."""
        informer: Informer[T] = Informer(
            self.kube, resource, converter=converter, label_selector=label_selector,
            initial_backoff=0.01, max_backoff=0.05,
        )
        for name, func in (indexes or {}).items():
            informer.store.add_index(name, func)
        self._informers.append(informer)
        self._selectors[id(informer)] = label_selector or ""
        self._tasks.append(asyncio.get_running_loop().create_task(informer.run()))
        await asyncio.wait_for(informer.wait_synced(), 5)
        return informer

    async def synced(self, *, within: float = 5.0) -> None:
        """Wait until every informer's store holds what the server holds (by resourceVersion)."""

        def caught_up() -> bool:
            for informer in self._informers:
                resource = informer.resource
                selector = self._selectors[id(informer)]
                want = {
                    object_key(o): o["metadata"]["resourceVersion"]
                    for o in self.server.objects(resource)
                    if _selector_matches(selector, o["metadata"].get("labels") or {})
                }
                have = {k: informer.store.resource_version(k) for k in informer.store}
                if want != have:
                    return False
            return True

        async with asyncio.timeout(within):
            while not caught_up():  # noqa: ASYNC110 - the informers signal nothing per event
                await asyncio.sleep(0.005)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.api.close()


async def start_app(
    app: web.Application, user_agents: list[str]
) -> tuple[TestServer, list[ApiClient]]:
    """Serve ``app`` (a :class:`FakeApiServer`'s, or a handler a test writes to misbehave at
    the transport level) over real HTTP, with one real client per User-Agent."""
    test_server = TestServer(app)
    await test_server.start_server()
    clients = []
    for agent in user_agents:
        client = _client(test_server)
        client.user_agent = agent
        clients.append(client)
    return test_server, clients


def _client(test_server: TestServer) -> ApiClient:
    return ApiClient(configuration=Configuration(host=str(test_server.make_url("")).rstrip("/")))


async def start_fake_cluster(server: FakeApiServer | None = None) -> tuple[TestServer, FakeCluster]:
    server = server if server is not None else FakeApiServer()
    test_server = TestServer(server.app())
    await test_server.start_server()
    api = _client(test_server)
    return test_server, FakeCluster(server=server, api=api, kube=Kube(api))


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


async def fake_cluster() -> AsyncIterator[FakeCluster]:
    """The body of the ``cluster`` fixture (conftest.py)."""
    test_server, cluster = await start_fake_cluster()
    try:
        yield cluster
    finally:
        await cluster.close()
        await cluster.server.shutdown()
        await test_server.close()


__all__ = [
    "Close",
    "Event",
    "FakeApiServer",
    "FakeCluster",
    "HttpStatus",
    "ListResponse",
    "RawLine",
    "Refused",
    "Step",
    "bookmark",
    "eventually",
    "fake_cluster",
    "gone_event",
    "start_app",
    "start_fake_cluster",
]
