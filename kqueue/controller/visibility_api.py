"""The ``visibility.kqueue.io/v1alpha1`` API: pending workloads, served from the live engine.

An aggregated API (Kueue's counterpart: ``visibility.kueue.x-k8s.io``, its shapes kept): an
APIService sends the kube-apiserver's requests for the group to this server, which answers

- ``GET /apis/visibility.kqueue.io/v1alpha1/clusterqueues/{name}/pendingworkloads``
- ``GET /apis/visibility.kqueue.io/v1alpha1/namespaces/{ns}/localqueues/{name}/pendingworkloads``

with a ``PendingWorkloadsSummary`` (``?offset=`` and ``?limit=``, Kueue's defaults 0 and 1000),
and the discovery documents kubectl reads. Positions, reason and message are computed by
:mod:`kqueue.visibility.pending` over the controller's own engine, the same code
``kubectl kqueue pending`` runs over an engine it builds. ``estimatedStartTime`` comes from the
controller's latest forecast (start_forecast.py), computed off the request and admission paths.

Each request is authenticated (the front proxy's client certificate and ``X-Remote-*``
headers, or a bearer token) and authorized with a SubjectAccessReview: ``get`` on
``clusterqueues/pendingworkloads`` (cluster-scoped) or ``localqueues/pendingworkloads`` in the
namespace, group ``visibility.kqueue.io``, with the queue's name. Discovery needs only an
authenticated caller, as the API server's ``system:discovery`` role grants.

Every replica serves it (the engine of a standby is fed by the same informers); only the
leader runs scheduling cycles, so a standby's reasons are those before any cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from kqueue.api.config import Visibility as VisibilityConfig
from kqueue.controller.delegated_auth import (
    AuthUnavailable,
    DelegatedAuth,
    RequestHeaderConfig,
    User,
    bearer_token,
    load_request_header_config,
)
from kqueue.controller.kube import KubeError
from kqueue.controller.serving import serve_tls, tls_context
from kqueue.controller.webhook_server.certs import service_hosts
from kqueue.engine.engine import Engine
from kqueue.visibility import pending

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

GROUP: Final = "visibility.kqueue.io"
VERSION: Final = "v1alpha1"
GROUP_VERSION: Final = f"{GROUP}/{VERSION}"
BASE: Final = f"/apis/{GROUP}/{VERSION}"
SERVICE_NAME: Final = "kqueue-visibility"

# Only the subresources are listed: listing "clusterqueues" itself would shadow
# clusterqueues.kqueue.io in kubectl's short resource names.
RESOURCES: Final = [
    {
        "name": "clusterqueues/pendingworkloads",
        "singularName": "",
        "namespaced": False,
        "kind": "PendingWorkloadsSummary",
        "verbs": ["get"],
    },
    {
        "name": "localqueues/pendingworkloads",
        "singularName": "",
        "namespaced": True,
        "kind": "PendingWorkloadsSummary",
        "verbs": ["get"],
    },
]


def status(code: int, reason: str, message: str, details: Obj | None = None) -> web.Response:
    """A ``metav1.Status`` failure, which kubectl prints as ``Error from server (Reason)``."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return web.json_response(body, status=code)


def _group() -> Obj:
    version = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {"name": GROUP, "versions": [version], "preferredVersion": version}


class BadParameter(ValueError):
    """A query parameter that is not what the API accepts; the message names it."""


def page_param(query: Any, name: str, default: int) -> int:
    """``offset`` or ``limit``: a non-negative integer (absent: ``default``)."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()):
        raise BadParameter(
            f'invalid query parameter {name}="{raw}": {name} must be a non-negative integer'
        )
    return int(raw)


class VisibilityServer:
    """The aiohttp application; ``engine`` returns the controller's current engine."""

    def __init__(
        self,
        engine: Callable[[], Engine],
        auth: DelegatedAuth,
        request_header: RequestHeaderConfig | None,
        estimates: Callable[[], pending.Estimates] | None = None,
    ) -> None:
        self.engine = engine
        self.auth = auth
        self.request_header = request_header
        # The latest predicted starts (start_forecast.py); never computed on a request.
        self.estimates = estimates or dict

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._authenticate])
        app.router.add_get("/apis", self._api_group_list)
        app.router.add_get(f"/apis/{GROUP}", self._api_group)
        app.router.add_get(BASE, self._api_resources)
        app.router.add_get("/openapi/v2", self._openapi_v2)
        app.router.add_get("/openapi/v3", self._openapi_v3)
        app.router.add_get(f"{BASE}/clusterqueues/{{name}}/pendingworkloads", self._cluster_queue)
        app.router.add_get(
            f"{BASE}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads",
            self._local_queue,
        )
        app.router.add_get("/healthz", self._healthz)
        return app

    # -- authentication and authorization --------------------------------------------------

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == "/healthz":
            return await handler(request)
        try:
            user = await self._user(request)
        except AuthUnavailable as err:
            logger.warning("visibility request not authenticated: %s", err)
            return status(500, "InternalError", f"authentication unavailable: {err}")
        if user is None:
            return status(401, "Unauthorized", "Unauthorized")
        return await handler(request)

    async def _user(self, request: web.Request) -> User | None:
        if self.request_header is not None:
            user = self.request_header.user(request)
            if user is not None:
                return user
        token = bearer_token(request)
        return await self.auth.authenticate_token(token) if token else None

    async def _allowed(
        self, request: web.Request, resource: str, name: str, namespace: str | None
    ) -> web.Response | None:
        """None when the caller may get ``resource/pendingworkloads`` ``name``, else the 403."""
        # Authenticated by the middleware; asked again rather than stored on the request (a
        # token's review is cached, the front proxy's headers are read in place).
        user = await self._user(request)
        assert user is not None
        attrs: Obj = {
            "group": GROUP,
            "version": VERSION,
            "resource": resource,
            "subresource": "pendingworkloads",
            "name": name,
            "verb": "get",
        }
        if namespace is not None:
            attrs["namespace"] = namespace
        try:
            decision = await self.auth.authorize(user, {"resourceAttributes": attrs})
        except AuthUnavailable as err:
            logger.warning("visibility request not authorized: %s", err)
            return status(500, "InternalError", f"authorization unavailable: {err}")
        if decision.allowed:
            return None
        where = (
            f' in the namespace "{namespace}"' if namespace is not None else " at the cluster scope"
        )
        return status(
            403,
            "Forbidden",
            f'{resource}.{GROUP} "{name}" is forbidden: User "{user.name}" cannot get resource '
            f'"{resource}/pendingworkloads" in API group "{GROUP}"{where}'
            + (f": {decision.reason}" if decision.reason else ""),
            {"name": name, "group": GROUP, "kind": resource},
        )

    # -- discovery ----------------------------------------------------------------------------

    async def _api_group_list(self, _: web.Request) -> web.Response:
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group()]})

    async def _api_group(self, _: web.Request) -> web.Response:
        return web.json_response({"kind": "APIGroup", "apiVersion": "v1", **_group()})

    async def _api_resources(self, _: web.Request) -> web.Response:
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": GROUP_VERSION,
                "resources": RESOURCES,
            }
        )

    async def _openapi_v2(self, _: web.Request) -> web.Response:
        # The aggregator merges every server's OpenAPI; an empty document keeps it quiet.
        return web.json_response(
            {
                "swagger": "2.0",
                "info": {"title": "kqueue visibility", "version": VERSION},
                "paths": {},
            }
        )

    async def _openapi_v3(self, _: web.Request) -> web.Response:
        return web.json_response({"paths": {}})

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    # -- pendingworkloads ---------------------------------------------------------------------

    async def _cluster_queue(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        refused = await self._allowed(request, "clusterqueues", name, None)
        if refused is not None:
            return refused
        try:
            offset, limit = self._paging(request)
        except BadParameter as err:
            return status(400, "BadRequest", str(err))
        try:
            items = pending.in_cluster_queue(
                self.engine(), name, offset=offset, limit=limit, estimates=self.estimates()
            )
        except pending.UnknownQueue as err:
            return status(
                404,
                "NotFound",
                f"clusterqueues.{GROUP} {err}",
                {"name": name, "group": GROUP, "kind": "clusterqueues"},
            )
        return web.json_response(pending.summary(items))

    async def _local_queue(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        refused = await self._allowed(request, "localqueues", name, namespace)
        if refused is not None:
            return refused
        try:
            offset, limit = self._paging(request)
        except BadParameter as err:
            return status(400, "BadRequest", str(err))
        try:
            items = pending.in_local_queue(
                self.engine(),
                namespace,
                name,
                offset=offset,
                limit=limit,
                estimates=self.estimates(),
            )
        except pending.UnknownQueue as err:
            return status(
                404,
                "NotFound",
                f"localqueues.{GROUP} {err}",
                {"name": name, "group": GROUP, "kind": "localqueues"},
            )
        return web.json_response(pending.summary(items))

    @staticmethod
    def _paging(request: web.Request) -> tuple[int, int]:
        # limit=0 is the default page, as Kueue's defaulting makes it.
        return (
            page_param(request.query, "offset", 0),
            page_param(request.query, "limit", 0) or pending.DEFAULT_LIMIT,
        )


async def serve_visibility(
    engine: Callable[[], Engine],
    config: VisibilityConfig,
    auth: DelegatedAuth,
    namespace: str,
    estimates: Callable[[], pending.Estimates] | None = None,
) -> web.AppRunner | None:
    """Start the visibility server as configured; None when its bind address is ``"0"``."""
    if config.bind_address == "0":
        return None
    request_header: RequestHeaderConfig | None = None
    try:
        request_header = await load_request_header_config(auth.kube)
    except KubeError as err:
        # Admission must not stop over the visibility API: serve it, refusing what needs the
        # front proxy's CA, and say what is missing.
        logger.error(
            "visibility API: cannot read kube-system/extension-apiserver-authentication (%s); "
            "requests through the aggregation layer get 401 until kqueue restarts with read "
            "access to it (the chart's <release>-auth-reader Role)",
            err,
        )
    else:
        if request_header is None:
            logger.warning(
                "kube-system/extension-apiserver-authentication has no "
                "requestheader-client-ca-file: the API server has no aggregation layer "
                "configured; only bearer tokens are accepted"
            )
    ctx = tls_context(
        config.cert_dir,
        [*service_hosts(SERVICE_NAME, namespace), "localhost", "127.0.0.1"],
        client_ca_pem=request_header.client_ca_pem if request_header else None,
    )
    server = VisibilityServer(engine, auth, request_header, estimates)
    return await serve_tls(server.app(), config.bind_address, ctx)
