"""``/metrics`` over HTTPS for authenticated, authorized scrapers (``metrics.secure``).

As controller-runtime's ``filters.WithAuthenticationAndAuthorization``: the scraper's bearer
token is authenticated with a TokenReview (none, or one the API server rejects: 401), then the
token's user is authorized with a SubjectAccessReview for ``get`` on the non-resource URL
``/metrics`` (refused: 403). Prometheus scrapes with its ServiceAccount's token, bound to the
chart's ``<release>-metrics-reader`` ClusterRole.

The exposition itself is :func:`kqueue.controller.metrics.metrics_app`'s; only the door is
added here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from kqueue.api.config import Metrics as MetricsConfig
from kqueue.controller.delegated_auth import AuthUnavailable, DelegatedAuth, bearer_token
from kqueue.controller.metrics import Metrics, metrics_app, serve_app
from kqueue.controller.serving import serve_tls, tls_context

logger = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Names the self-signed certificate is made for; scrapers reach the pod by IP or Service.
SELF_SIGNED_HOSTS = ("localhost", "127.0.0.1")


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


def token_auth_middleware(auth: DelegatedAuth) -> Middleware:
    @web.middleware
    async def authenticated(request: web.Request, handler: Handler) -> web.StreamResponse:
        token = bearer_token(request)
        if token is None:
            return _text(401, "Unauthorized: a bearer token is required")
        try:
            user = await auth.authenticate_token(token)
            if user is None:
                return _text(401, "Unauthorized: the token was not accepted")
            verb = request.method.lower()
            decision = await auth.authorize(
                user, {"nonResourceAttributes": {"path": request.path, "verb": verb}}
            )
        except AuthUnavailable as err:
            logger.warning("metrics request not decided: %s", err)
            return _text(500, f"Internal Server Error: {err}")
        if not decision.allowed:
            return _text(
                403,
                f"Forbidden (user={user.name}, verb={verb}, nonResourceURL={request.path})"
                + (f": {decision.reason}" if decision.reason else ""),
            )
        return await handler(request)

    return authenticated


def secure_metrics_app(metrics: Metrics, auth: DelegatedAuth) -> web.Application:
    app = metrics_app(metrics)
    app.middlewares.append(token_auth_middleware(auth))
    return app


async def serve_metrics(
    metrics: Metrics, config: MetricsConfig, auth: DelegatedAuth
) -> web.AppRunner | None:
    """The metrics server as configured: HTTPS with authentication, or plain HTTP."""
    if not config.secure:
        logger.warning("metrics served over plain, unauthenticated HTTP (metrics.secure=false)")
        return await serve_app(metrics_app(metrics), config.bind_address)
    ctx = tls_context(config.cert_dir, SELF_SIGNED_HOSTS)
    return await serve_tls(secure_metrics_app(metrics, auth), config.bind_address, ctx)
