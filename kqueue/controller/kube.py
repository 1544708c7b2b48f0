"""The controller's one client for the API server, and the one error type it raises.

Every read, write, list and watch (informers, leader election, certificates, reconcilers)
goes through :class:`Kube`, over plain JSON: the generated typed clients drop fields they do
not know when an object is read and written back, so objects the controller does not own
(Leases, Secrets, webhook configurations, Jobs) keep every field. Every failure raises a
:class:`KubeError` naming the object, so callers catch that one type and decide on outcomes
(``Conflict``: someone wrote first, read again; ``NotFound``: it is gone; ``Gone``: a watch's
resourceVersion expired, list again; ``Unreachable``: no answer, the connection failed or was
cut, so a write may or may not have landed) instead of parsing HTTP statuses or knowing which
of aiohttp's exceptions are ``OSError``s. Status writes carry the
resourceVersion that was read: the API server refuses a write based on a stale read
(optimistic concurrency), which is what keeps two writers, or a writer and a restart, from
admitting one workload twice.
"""

from __future__ import annotations

import asyncio
import functools
import json
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeVar
from urllib.parse import urlencode

import aiohttp
import pydantic_core
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client import Configuration as ClientConfiguration

from kqueue.controller.resources import Resource

Obj = dict[str, Any]
T = TypeVar("T")

__all__ = [
    "MODIFY_ATTEMPTS",
    "POOL_SIZE",
    "Conflict",
    "Gone",
    "Kube",
    "KubeError",
    "NotFound",
    "Unreachable",
    "WriteDeadlinePassed",
    "direct_call_api",
    "encode_body",
    "idempotent",
    "loads",
    "new_api_client",
    "pause_after_lost_answer",
    "send_directly",
]

MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"

# Connections the client may hold: each informer's watch keeps one open for good, and the
# writers (scheduler, job reconcilers, queue status, events, the lease) need theirs beside them.
# kubernetes_asyncio's default of 100 could make writes wait for a watch to end.
POOL_SIZE = 256
# The methods whose body ``RESTClientObject.request`` sends (JSON content types only here).
_WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH", "OPTIONS", "DELETE"})
# Matches kubernetes_asyncio's session: watch events of large objects exceed aiohttp's default.
_READ_BUFSIZE = 2**21
# Reads and writes of one get-modify-write (:meth:`Kube.modify_status`) before it gives up:
# with the pauses after lost answers, about 10 s, longer than a load balancer's failover.
MODIFY_ATTEMPTS = 8


async def new_api_client(kubeconfig: str | None) -> ApiClient:
    """The controller's connection: the kubeconfig's cluster, else the in-cluster account."""
    configuration = type.__call__(ClientConfiguration)  # a fresh one, not the shared default
    if kubeconfig:
        await kube_config.load_kube_config(
            config_file=kubeconfig, client_configuration=configuration
        )
    else:
        kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = POOL_SIZE
    api = ApiClient(configuration=configuration)
    skip_environment_lookups(api)
    send_directly(api)
    return api


def send_directly(api: ApiClient) -> None:
    """Make ``api.call_api`` send kqueue's requests without ``call_api``'s body copy.

    ``ApiClient.call_api`` rebuilds every dict and list of a request body
    (``sanitize_for_serialization``) before encoding it: for a Workload status write that copy
    cost more than the JSON encoding. :func:`direct_call_api` sends the requests :class:`Kube`
    makes (JSON bodies, the bearer token, an undecoded answer) on the same session with the same
    URL, headers and body text, and hands any other call to the original. Installed as an
    instance attribute, so the client throttle (``ratelimit.throttle``) wraps it as it wraps
    the original.
    """
    api.call_api = functools.partial(direct_call_api, api, api.call_api)  # type: ignore[method-assign]


async def direct_call_api(
    api: ApiClient,
    original: Callable[..., Awaitable[Any]],
    resource_path: str,
    method: str,
    *args: Any,
    query_params: list[tuple[str, str]] | None = None,
    header_params: dict[str, str] | None = None,
    body: Any = None,
    auth_settings: list[str] | None = None,
    _preload_content: bool = True,
    _request_timeout: aiohttp.ClientTimeout | None = None,
    **kwargs: Any,
) -> Any:
    """``ApiClient.call_api`` for :class:`Kube`'s requests, as ``call_api`` sends them.

    The same URL, headers (the call's, then the client's default headers and cookie, then the
    bearer token after the configuration's refresh hook, if any), proxy and TLS server name,
    and the same JSON text for the body; what is skipped is the deep copy of the body. Calls
    of any other shape (typed API calls: path parameters, forms, decoded answers) go to
    ``original``.
    """
    if (
        args
        or kwargs
        or _preload_content
        or not isinstance(_request_timeout, aiohttp.ClientTimeout)
        or "json" not in (header_params or {}).get("Content-Type", "")
    ):
        return await original(
            resource_path,
            method,
            *args,
            query_params=query_params,
            header_params=header_params,
            body=body,
            auth_settings=auth_settings,
            _preload_content=_preload_content,
            _request_timeout=_request_timeout,
            **kwargs,
        )
    config = api.configuration
    headers = dict(header_params or {})
    headers.update(api.default_headers)
    if api.cookie:
        headers["Cookie"] = api.cookie
    queries = list(query_params or [])
    # The token, after the configuration's refresh hook (exec plugins, in-cluster token files).
    await api.update_params_for_auth(headers, queries, auth_settings or [])
    rest = api.rest_client
    url = f"{config.host}{resource_path}"
    if queries:
        url += "?" + urlencode(queries)
    request: dict[str, Any] = {
        "method": method,
        "url": url,
        "timeout": _request_timeout,
        "headers": headers,
    }
    if rest.proxy:
        request["proxy"] = rest.proxy
    if rest.proxy_headers:
        request["proxy_headers"] = rest.proxy_headers
    if rest.server_hostname:
        request["server_hostname"] = rest.server_hostname
    if method in _WITH_BODY:
        request["data"] = encode_body(api, body)
    return await rest.pool_manager.request(**request)


def skip_environment_lookups(api: ApiClient) -> None:
    """No proxy or netrc lookups per request unless the environment names a proxy.

    kubernetes_asyncio builds its aiohttp session with ``trust_env=True``: every request then
    looks up the proxy variables and reads ``~/.netrc`` (1.3% of the controller's CPU under
    load). With no proxy in the environment that finds nothing, so the session is rebuilt on
    the same connection pool without it. A proxy from the kubeconfig is passed per request
    and is unaffected.
    """
    if urllib.request.getproxies():
        return
    rest = api.rest_client
    session: aiohttp.ClientSession = rest.pool_manager
    connector = session.connector
    if connector is None or session.closed:
        return
    session.detach()  # the new session owns the pool; the old one closes nothing
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=_READ_BUFSIZE
    )


# -- errors ------------------------------------------------------------------------------------


class KubeError(Exception):
    """A request that failed: refused by the API server (``status`` is the HTTP status or the
    Status code), or not answered at all (:class:`Unreachable`, ``status`` 0)."""

    def __init__(self, *, what: str, status: int, body: Obj) -> None:
        self.status = status
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", ""))
        details = body.get("details")
        causes = details.get("causes") if isinstance(details, dict) else None
        self.causes = tuple(
            str(c.get("reason", "")) for c in causes or () if isinstance(c, dict)
        )
        if status:
            super().__init__(f"{what}: HTTP {status} {self.reason}: {self.message}")
        else:
            super().__init__(f"{what}: {self.reason}: {self.message}")

    @property
    def transient(self) -> bool:
        """No answer (a cut connection, a timeout, a write held back at the end of a
        leadership) or a passing refusal (429, 5xx): the same request may succeed later.
        Other refusals (400, 403, 404, 422) are not cured by sending it again."""
        return self.status == 0 or self.status == 429 or self.status >= 500

    @property
    def namespace_terminating(self) -> bool:
        """The API server refused to create something in a namespace being deleted (403 with
        the NamespaceTerminating cause; older servers say so only in the message). Expected
        while a namespace goes: its objects' deletions follow, and a retry is refused again."""
        return self.status == 403 and (
            "NamespaceTerminating" in self.causes or "being terminated" in self.message
        )

    @staticmethod
    def of(what: str, status: int, body: Obj) -> KubeError:
        """The error for an HTTP answer: its class chosen by ``status``."""
        cls = _BY_STATUS.get(status, KubeError)
        return cls(what=what, status=status, body=body)

    @staticmethod
    def from_status(status_obj: Obj, *, what: str, http_status: int = 0) -> KubeError:
        """The error a ``Status`` object describes (a watch's ERROR event, an error body)."""
        code = status_obj.get("code")
        return KubeError.of(what, code if isinstance(code, int) else http_status, status_obj)


class Conflict(KubeError):
    """409: the object changed since it was read (or already exists)."""


class NotFound(KubeError):
    """404: the object (or its namespace) is gone."""


class Gone(KubeError):
    """410: the resourceVersion a watch starts from is no longer available; list again."""


_BY_STATUS: Final[dict[int, type[KubeError]]] = {409: Conflict, 404: NotFound, 410: Gone}


class Unreachable(KubeError):
    """No answer: the connection could not be made, was cut (a load balancer, a restarting API
    server, an HTTP/2 GOAWAY), or the call timed out. A write may have been committed although
    its answer was lost: read the object back before assuming either way."""

    def __init__(self, *, what: str, cause: BaseException) -> None:
        reason = type(cause).__name__
        super().__init__(
            what=what, status=0, body={"reason": reason, "message": str(cause) or "no answer"}
        )


class WriteDeadlinePassed(KubeError):
    """A write not sent: the leadership it would have been issued under may be over."""

    def __init__(self, *, what: str, message: str) -> None:
        super().__init__(
            what=what, status=0, body={"reason": "WriteDeadlinePassed", "message": message}
        )


# What a request raises when no answer arrives: aiohttp's own errors (ServerDisconnectedError
# and ClientPayloadError are not OSErrors), socket errors and timeouts. Wrapped in Unreachable.
_TRANSPORT_ERRORS: Final = (aiohttp.ClientError, OSError, TimeoutError)
# Requests are bounded by asyncio.timeout (Kube.send); a connection attempt by its own limit.
_NO_TOTAL: Final = aiohttp.ClientTimeout(total=None, sock_connect=30)


def _raise_for(what: str, status: int, body: Obj) -> None:
    if not 200 <= status < 300:
        raise KubeError.of(what, status, body)


def loads(raw: bytes | str) -> Any:
    """``json.loads``, through pydantic-core's parser (written in Rust, and sharing the objects
    of repeated short strings such as keys) for what the API server sends: every watch event
    and response is decoded. Text only ``json.loads`` reads (lone UTF-16 surrogates) and
    malformed JSON go to ``json.loads``, so the result and the errors are its own."""
    try:
        return pydantic_core.from_json(raw)
    except ValueError:
        return json.loads(raw)


class _NotJson(Exception):
    """A body holding something other than JSON's own types (a datetime, a client model)."""


def _not_json(value: Any) -> Any:
    raise _NotJson(type(value).__name__)


def encode_body(api: ApiClient, body: Any) -> str | None:
    """The body's JSON text, the same text ``ApiClient.call_api`` sends for it.

    ``call_api`` first copies the body through ``sanitize_for_serialization`` (datetimes as
    ISO text, client models as dicts), then ``json.dumps`` it. A body of JSON's own types (every
    body kqueue builds) is its own sanitized copy, so it is encoded directly; anything else
    takes ``call_api``'s way. An empty body (None, ``{}``) is what ``call_api`` makes of it too.
    """
    if body is None:
        return None
    try:
        return json.dumps(body, default=_not_json)
    except _NotJson:
        return json.dumps(api.sanitize_for_serialization(body))


def _decode(raw: bytes) -> Obj:
    """A JSON object body; anything else comes back as ``{"message": ...}``."""
    try:
        data = loads(raw) if raw else {}
    except ValueError:
        return {"message": raw[:500].decode("utf-8", "replace")}
    return data if isinstance(data, dict) else {"message": str(data)[:500]}


@dataclass
class Kube:
    """The controller's JSON client; one per process, shared by every writer.

    ``request`` is the raw call (HTTP status and decoded body, never raises for a status);
    the object methods raise :class:`KubeError` for a refusal; ``stream`` opens a watch.
    ``timeout`` (seconds) bounds every call unless the call passes its own ``time_limit``.
    """

    api: ApiClient
    timeout: float = 30.0
    write_deadline: Callable[[], float | None] | None = None
    """Event-loop time by which a write (any method but GET) must be over; None: no bound.

    With leader election this is the leader's renew deadline
    (:meth:`~kqueue.controller.leader.LeaderElector.write_deadline`): the client abandons a
    write before the leadership it was issued under can end, and refuses to send one after.
    A request the API server already accepted may still complete: that is the bound's limit.
    """

    def _timeout(self, method: str, what: str, time_limit: float | None) -> float:
        limit = self.timeout if time_limit is None else time_limit
        if method == "GET" or self.write_deadline is None:
            return limit
        deadline = self.write_deadline()
        if deadline is None:
            return limit
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            raise WriteDeadlinePassed(
                what=f"{method} {what}",
                message="not sent, the leadership it was issued under may be over "
                f"(renew deadline passed {-left:.1f}s ago)",
            )
        return min(limit, left)

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        client_timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        # Through call_api, which the client throttle (ratelimit.throttle) wraps.
        try:
            response: aiohttp.ClientResponse = await self.api.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=client_timeout,
            )
        except _TRANSPORT_ERRORS as exc:
            raise Unreachable(what=f"{method} {path}", cause=exc) from exc
        return response

    async def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        time_limit: float | None = None,
    ) -> tuple[int, bytes]:
        """``(HTTP status, the answer's body undecoded)``: for callers that decode the answer
        only when they need it."""
        total = self._timeout(method, path, time_limit)
        # The call's time limit is asyncio's, not aiohttp's ``ClientTimeout(total=...)``: on
        # Python 3.11 aiohttp's turns a cancellation that meets its own timeout into a
        # TimeoutError about once in four, and a task cancelled then (a term's workers at the
        # end of a leadership) carried on as if never cancelled (docs/reliability.md).
        try:
            async with asyncio.timeout(total):
                response = await self._call(
                    method,
                    path,
                    body=body,
                    content_type=content_type,
                    query=query,
                    client_timeout=_NO_TOTAL,
                )
                try:
                    async with response:
                        raw = await response.read()
                except _TRANSPORT_ERRORS as exc:
                    raise Unreachable(what=f"{method} {path}", cause=exc) from exc
        except TimeoutError as exc:
            raise Unreachable(what=f"{method} {path}", cause=exc) from exc
        return response.status, raw

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        time_limit: float | None = None,
    ) -> tuple[int, Obj]:
        """``(HTTP status, decoded JSON body)``; a non-JSON body is ``{"message": ...}``."""
        status, raw = await self.send(
            method, path, body, content_type=content_type, query=query, time_limit=time_limit
        )
        return status, _decode(raw)

    @asynccontextmanager
    async def stream(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        query: list[tuple[str, str]],
        read_timeout: float,
    ) -> AsyncIterator[aiohttp.StreamReader]:
        """A streaming GET of a collection (a watch): the open body, until the block ends.

        Only a dead connection times out (no bytes for ``read_timeout`` seconds): a watch
        lasts as long as the server keeps it open. A refusal raises :class:`KubeError`
        (:class:`Gone` for 410) before anything is read; a stream cut while it is read raises
        :class:`Unreachable` from the block.
        """
        response = await self._call(
            "GET",
            resource.collection_path(namespace),
            query=query,
            client_timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=30, sock_read=read_timeout
            ),
        )
        async with response:
            if response.status != 200:
                try:
                    raw = await response.read()
                except _TRANSPORT_ERRORS as exc:
                    raise Unreachable(what=f"watch {resource}", cause=exc) from exc
                body = _decode(raw)
                body.setdefault("reason", response.reason or "")
                where = f"{resource} in namespace {namespace}" if namespace else str(resource)
                raise KubeError.of(f"watch {where}", response.status, body)
            try:
                yield response.content
            except _TRANSPORT_ERRORS as exc:
                raise Unreachable(what=f"watch {resource}", cause=exc) from exc

    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        time_limit: float | None = None,
    ) -> Obj:
        what = _what(resource, name, namespace)
        status, body = await self.request(
            "GET", resource.object_path(name, namespace), time_limit=time_limit
        )
        _raise_for(f"get {what}", status, body)
        return body

    async def create(
        self,
        resource: Resource,
        obj: Obj,
        namespace: str | None = None,
        *,
        time_limit: float | None = None,
    ) -> Obj:
        name = (obj.get("metadata") or {}).get("name") or "<generated>"
        status, body = await self.request(
            "POST", resource.collection_path(namespace), obj, time_limit=time_limit
        )
        _raise_for(f"create {_what(resource, name, namespace)}", status, body)
        return body

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str = "",
        content_type: str = MERGE_PATCH,
        time_limit: float | None = None,
    ) -> Obj:
        path = resource.object_path(name, namespace) + (f"/{subresource}" if subresource else "")
        status, body = await self.request(
            "PATCH", path, patch, content_type=content_type, time_limit=time_limit
        )
        what = _what(resource, name, namespace) + (f" ({subresource})" if subresource else "")
        _raise_for(f"patch {what}", status, body)
        return body

    async def replace_status(
        self,
        resource: Resource,
        obj: Obj,
        *,
        namespace: str | None = None,
        time_limit: float | None = None,
    ) -> Obj:
        """PUT the status subresource; ``obj`` carries the resourceVersion it was read at."""
        return _decode(
            await self.write_status(resource, obj, namespace=namespace, time_limit=time_limit)
        )

    async def write_status(
        self,
        resource: Resource,
        obj: Obj,
        *,
        namespace: str | None = None,
        time_limit: float | None = None,
    ) -> bytes:
        """:meth:`replace_status`, with the API's answer (the object written) left undecoded:
        the status writers seldom read it, and decoding a whole object per write cost as much
        as a watch event's."""
        name = obj["metadata"]["name"]
        path = resource.object_path(name, namespace) + "/status"
        status, raw = await self.send("PUT", path, obj, time_limit=time_limit)
        if not 200 <= status < 300:
            raise KubeError.of(
                f"update status of {_what(resource, name, namespace)}", status, _decode(raw)
            )
        return raw

    async def replace(
        self,
        resource: Resource,
        obj: Obj,
        *,
        namespace: str | None = None,
        time_limit: float | None = None,
    ) -> Obj:
        """PUT the whole object; ``obj`` carries the resourceVersion it was read at."""
        name = obj["metadata"]["name"]
        status, body = await self.request(
            "PUT", resource.object_path(name, namespace), obj, time_limit=time_limit
        )
        _raise_for(f"update {_what(resource, name, namespace)}", status, body)
        return body

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation: str = "Background",
        time_limit: float | None = None,
    ) -> None:
        """Delete; an object already gone is not an error."""
        status, body = await self.request(
            "DELETE",
            resource.object_path(name, namespace),
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation},
            time_limit=time_limit,
        )
        if status == 404:
            return
        _raise_for(f"delete {_what(resource, name, namespace)}", status, body)

    async def list_page(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        query: list[tuple[str, str]] | None = None,
        time_limit: float | None = None,
    ) -> Obj:
        """One list request: the List object (``items``, ``metadata.continue`` and
        ``metadata.resourceVersion``), for callers that page through a collection."""
        status, body = await self.request(
            "GET", resource.collection_path(namespace), query=query, time_limit=time_limit
        )
        where = f"{resource} in namespace {namespace}" if namespace else str(resource)
        _raise_for(f"list {where}", status, body)
        return body

    async def modify_status(
        self,
        resource: Resource,
        name: str,
        change: Callable[[Obj], Obj | None],
        *,
        namespace: str | None = None,
        attempts: int = MODIFY_ATTEMPTS,
    ) -> Obj | None:
        """Get, change and write back the status, until it is written or given up.

        ``change`` gets the object as read and returns the object to write (it may change it in
        place), or None when there is nothing to write. A conflict (someone wrote first) reads
        again; so does a lost answer (:class:`Unreachable`), after a short pause: the write
        may have landed, and the fresh read shows it. So ``change`` must be idempotent: applied
        to what it wrote, it writes the same again or returns None. Returns the object written,
        or None when the object is gone or ``change`` found nothing to write; raises the last
        :class:`KubeError` when every attempt failed.
        """
        last: KubeError | None = None
        for attempt in range(attempts):
            if isinstance(last, Unreachable):
                await asyncio.sleep(pause_after_lost_answer(attempt))
            try:
                obj = await self.get(resource, name, namespace)
            except NotFound:
                return None
            except Unreachable as exc:
                last = exc
                continue
            out = change(obj)
            if out is None:
                return None
            try:
                return await self.replace_status(resource, out, namespace=namespace)
            except NotFound:
                return None
            except (Conflict, Unreachable) as exc:
                last = exc
        assert last is not None
        raise last

    async def list(
        self, resource: Resource, *, namespace: str | None = None, label_selector: str = ""
    ) -> list[Obj]:
        query = [("labelSelector", label_selector)] if label_selector else []
        body = await self.list_page(resource, namespace=namespace, query=query)
        return list(body.get("items") or [])


async def idempotent(call: Callable[[], Awaitable[T]], *, attempts: int = MODIFY_ATTEMPTS) -> T:
    """``await call()``, again after a lost answer (:class:`Unreachable`), for a request that
    may safely land twice (a merge patch setting fields, a delete); other errors are raised."""
    for attempt in range(attempts - 1):
        try:
            return await call()
        except Unreachable:
            await asyncio.sleep(pause_after_lost_answer(attempt + 1))
    return await call()


def pause_after_lost_answer(attempt: int) -> float:
    """Seconds to wait before ``attempt`` after a lost answer: 0.4, 0.8, 1.6, then 2."""
    return min(0.2 * 2.0**attempt, 2.0)


def _what(resource: Resource, name: str, namespace: str | None) -> str:
    return f"{resource} {namespace}/{name}" if namespace else f"{resource} {name}"
