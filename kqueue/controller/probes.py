"""Health probes (``/healthz``, ``/readyz``) and serving an aiohttp application on a bind
address (the probes, ``/metrics``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from kqueue.api.config import parse_bind_address

logger = logging.getLogger(__name__)

CheckResult = tuple[bool, str]
Check = Callable[[], CheckResult]


@dataclass
class Probes:
    """Named health checks behind ``/healthz`` (liveness) and ``/readyz`` (readiness).

    A check returns ``(ok, detail)``; e.g. ``probes.add_readiness_check("informers",
    informer.check)``. ``/readyz`` is 503 until every readiness check passes.
    """

    liveness: dict[str, Check] = field(default_factory=dict)
    readiness: dict[str, Check] = field(default_factory=dict)

    def add_liveness_check(self, name: str, check: Check) -> None:
        self.liveness[name] = check

    def add_readiness_check(self, name: str, check: Check) -> None:
        self.readiness[name] = check

    def evaluate(self, checks: dict[str, Check]) -> tuple[bool, list[str]]:
        ok = True
        lines: list[str] = []
        for name, check in sorted(checks.items()):
            try:
                passed, detail = check()
            except Exception as exc:
                logger.exception("health check %s raised", name)
                passed, detail = False, f"check raised {type(exc).__name__}: {exc}"
            ok = ok and passed
            lines.append(
                f"[{'+' if passed else '-'}]{name} {'ok' if passed else 'failed'}: {detail}"
            )
        return ok, lines

    async def _respond(self, request: web.Request, checks: dict[str, Check]) -> web.Response:
        ok, lines = self.evaluate(checks)
        # Like the API server: terse "ok" when healthy unless ?verbose, details when not.
        if ok and "verbose" not in request.query:
            return web.Response(text="ok")
        verdict = "check passed" if ok else "check failed"
        return web.Response(text="\n".join([*lines, verdict]) + "\n", status=200 if ok else 503)

    async def healthz(self, request: web.Request) -> web.Response:
        return await self._respond(request, self.liveness)

    async def readyz(self, request: web.Request) -> web.Response:
        return await self._respond(request, self.readiness)


def health_app(probes: Probes) -> web.Application:
    app = web.Application()
    app.router.add_get("/healthz", probes.healthz)
    app.router.add_get("/readyz", probes.readyz)
    return app


async def serve_app(app: web.Application, bind_address: str) -> web.AppRunner | None:
    """Serve ``app`` on ``bind_address`` (``":8080"``, ``"127.0.0.1:0"``); None when ``"0"``.

    Call ``await runner.cleanup()`` to stop; ``runner.addresses`` tells the bound port.
    """
    parsed = parse_bind_address(bind_address)
    if parsed is None:
        return None
    host, port = parsed
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or None, port).start()
    logger.info(
        "serving %s on %s", sorted(r.canonical for r in app.router.resources()), runner.addresses
    )
    return runner
