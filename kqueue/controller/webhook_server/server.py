"""The admission webhook server: AdmissionReview v1 over HTTPS, routed by path to handlers.

Handlers are small async functions that look at an :class:`AdmissionRequest` and return a
:class:`Verdict`: allow (with warnings), deny with field errors, or, for mutating webhooks,
the object as it should be (the server sends the JSON Patch). Everything around them is the
server's job and never their concern:

* malformed requests get HTTP 400 with what is wrong, never a 500 or a crash;
* a handler that raises or times out yields a *denial* (``allowed: false``, code 500) naming
  the webhook and the object, with the traceback in the log: kqueue's webhooks fail closed, so
  an object is never admitted unchecked because of a bug;
* TLS only; the certificate and key are reloaded when the files in ``cert_dir`` change.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from aiohttp import web

from kqueue.controller.kube import loads
from kqueue.controller.webhook_server.certs import TLS_CERT, TLS_KEY
from kqueue.controller.webhook_server.patch import json_patch

# Each webhook's timeoutSeconds in kqueue's webhook configurations (Kubernetes' default): how
# long an API server waits for kqueue's answer. The MultiKueue manager times its writes on a
# worker from it (admission_checks/multikueue/remote_writes.py).
WEBHOOK_TIMEOUT_SECONDS: Final = 10

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

ADMISSION_API_VERSION = "admission.k8s.io/v1"
# The API server sends at most an object and its old version, each under etcd's 1.5 MiB limit,
# plus envelope; anything bigger is not from the API server.
MAX_BODY_BYTES = 8 * 1024 * 1024

# (webhook path, "allowed" | "denied" | "error", seconds taken): how each answer is counted
# (the controller's metrics); the server itself knows nothing of Prometheus.
Observer = Callable[[str, Literal["allowed", "denied", "error"], float], None]


@dataclass(frozen=True)
class FieldError:
    """One problem with one field: ``FieldError("spec.podSets[0].count", "must be >= 1")``."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class Verdict:
    """A handler's answer. Build it with :meth:`allow`, :meth:`deny` or :meth:`patch`."""

    allowed: bool = True
    errors: tuple[FieldError, ...] = ()
    warnings: tuple[str, ...] = ()
    patched: Obj | None = None
    reason: str = ""

    @classmethod
    def allow(cls, *warnings: str) -> Verdict:
        return cls(allowed=True, warnings=tuple(warnings))

    @classmethod
    def deny(cls, *errors: FieldError, reason: str = "Invalid") -> Verdict:
        """Refuse the request; ``reason`` is ``Invalid`` (field errors) or ``Forbidden``."""
        if not errors:
            raise ValueError("deny() needs at least one FieldError saying what is wrong")
        return cls(allowed=False, errors=tuple(errors), reason=reason)

    @classmethod
    def patch(cls, patched: Obj, *warnings: str) -> Verdict:
        """Allow, with the object changed to ``patched`` (mutating webhooks only)."""
        return cls(allowed=True, patched=patched, warnings=tuple(warnings))


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of ``AdmissionReview.request`` handlers use; ``raw`` has the rest."""

    uid: str
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    kind: Obj
    resource: Obj
    namespace: str | None
    name: str | None
    object: Obj | None
    old_object: Obj | None
    sub_resource: str | None = None
    dry_run: bool = False
    user_info: Obj = field(default_factory=dict)
    raw: Obj = field(default_factory=dict)

    def describe(self) -> str:
        """``Workload team-a/job-1`` for messages and logs."""
        obj = self.object or self.old_object
        # Called on the error path too, so it must survive any shape a client sent: a 500 here
        # would hide the handler's real failure behind a transport error.
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            meta = {}
        name = self.name or meta.get("name") or f"{meta.get('generateName', '')}<generated>"
        target = f"{self.namespace}/{name}" if self.namespace else str(name)
        return f"{self.kind.get('kind', '?')} {target}"


Handler = Callable[[AdmissionRequest], Awaitable[Verdict]]


class BadRequest(Exception):
    """An AdmissionReview we cannot read; answered with HTTP 400."""


def parse_review(body: bytes) -> tuple[str, AdmissionRequest]:
    """Read an AdmissionReview; returns its apiVersion and request. Raises BadRequest."""
    try:
        # The API server sends one review per Workload create or update: decoded with the
        # client's parser (kube.loads), which falls back to json.loads and its errors.
        review = loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise BadRequest("body is not a JSON object")
    api_version = review.get("apiVersion")
    if api_version != ADMISSION_API_VERSION:
        raise BadRequest(f"apiVersion: expected {ADMISSION_API_VERSION!r}, got {api_version!r}")
    if review.get("kind") != "AdmissionReview":
        raise BadRequest(f"kind: expected 'AdmissionReview', got {review.get('kind')!r}")
    req = review.get("request")
    if not isinstance(req, dict):
        raise BadRequest("request: required object is missing")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadRequest("request.uid: required string is missing")
    operation = req.get("operation")
    if operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise BadRequest(f"request.operation: unknown operation {operation!r}")
    for key in ("kind", "resource"):
        if not isinstance(req.get(key), dict):
            raise BadRequest(f"request.{key}: required object is missing")
    for key in ("object", "oldObject"):
        if req.get(key) is not None and not isinstance(req.get(key), dict):
            raise BadRequest(f"request.{key}: must be an object")
    for key in ("namespace", "name", "subResource"):
        if req.get(key) is not None and not isinstance(req.get(key), str):
            raise BadRequest(f"request.{key}: must be a string")
    user_info = req.get("userInfo")
    return api_version, AdmissionRequest(
        uid=uid,
        operation=operation,
        kind=req["kind"],
        resource=req["resource"],
        namespace=req.get("namespace") or None,
        name=req.get("name") or None,
        object=req.get("object"),
        old_object=req.get("oldObject"),
        sub_resource=req.get("subResource") or None,
        dry_run=bool(req.get("dryRun", False)),
        user_info=user_info if isinstance(user_info, dict) else {},
        raw=req,
    )


def review_response(request: AdmissionRequest, verdict: Verdict, *, mutating: bool) -> Obj:
    """The AdmissionReview answering ``request`` with ``verdict``."""
    response: Obj = {"uid": request.uid, "allowed": verdict.allowed}
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    if not verdict.allowed:
        response["status"] = _denial_status(request, verdict)
    elif mutating and verdict.patched is not None:
        ops = json_patch(request.object or {}, verdict.patched)
        if ops:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}


def _denial_status(request: AdmissionRequest, verdict: Verdict) -> Obj:
    # Shaped like the API server's own validation errors, so `kubectl` users see
    # 'Workload "a" is invalid: spec.podSets[0].count: must be >= 1'.
    reason = verdict.reason or "Invalid"
    name = request.name or ""
    kind = request.kind.get("kind", "object")
    details = "; ".join(str(e) for e in verdict.errors)
    if reason == "Invalid":
        message = f'{kind} "{name}" is invalid: {details}'
        code = 422
    else:
        message = details
        code = 500 if reason == "InternalError" else 403
    return {
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        "details": {
            "name": name,
            "kind": kind,
            "causes": [
                {"type": "FieldValueInvalid", "field": e.field, "message": e.message}
                for e in verdict.errors
            ],
        },
    }


def _json_error(status: int, message: str) -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": status,
            "message": message,
        },
        status=status,
    )


@dataclass(frozen=True)
class _Route:
    handler: Handler
    mutating: bool


class WebhookServer:
    """HTTPS server for admission webhooks registered by path.

    ``port=0`` binds an ephemeral port (tests); :attr:`port` tells which after :meth:`start`.
    """

    def __init__(
        self,
        *,
        cert_dir: Path,
        host: str = "",
        port: int = 9443,
        handler_timeout: float = 8.0,
        reload_interval: float = 10.0,
        observe: Observer | None = None,
    ) -> None:
        self.cert_dir = cert_dir
        self._observe = observe
        self.host = host
        self.port = port
        # The API server gives up after the webhook's timeoutSeconds (10s by default); answer
        # (with a denial) before that, so the reason is ours and not a generic timeout.
        self.handler_timeout = handler_timeout
        self.reload_interval = reload_interval
        self._routes: dict[str, _Route] = {}
        self._ssl: ssl.SSLContext | None = None
        self._cert_fingerprint: bytes | None = None
        self._runner: web.AppRunner | None = None
        self.requests_served = 0

    # -- registration -------------------------------------------------------------------------

    def add_mutating(self, path: str, handler: Handler) -> None:
        self._add(path, _Route(handler, mutating=True))

    def add_validating(self, path: str, handler: Handler) -> None:
        self._add(path, _Route(handler, mutating=False))

    def _add(self, path: str, route: _Route) -> None:
        if not path.startswith("/"):
            raise ValueError(f"webhook path {path!r} must start with '/'")
        if path in self._routes or path in ("/healthz", "/readyz"):
            raise ValueError(f"webhook path {path!r} is already registered")
        if self._runner is not None:
            raise RuntimeError("register webhooks before the server starts")
        self._routes[path] = route

    # -- the app ----------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        for path in self._routes:
            app.router.add_post(path, self._serve)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        ok, detail = self.check()
        return web.Response(text=detail, status=200 if ok else 503)

    async def _serve(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        response, result = await self._answer(request)
        if self._observe is not None:
            try:
                self._observe(request.path, result, time.monotonic() - started)
            except Exception:  # counting must never change an answer
                logger.exception("webhook %s: observer failed", request.path)
        return response

    async def _answer(
        self, request: web.Request
    ) -> tuple[web.Response, Literal["allowed", "denied", "error"]]:
        route = self._routes.get(request.path)
        if route is None:  # the router only sends registered paths; be safe anyway
            return _json_error(404, f"no webhook at {request.path}"), "error"
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _json_error(413, f"body larger than {MAX_BODY_BYTES} bytes"), "error"
        try:
            _, admission = parse_review(body)
        except BadRequest as exc:
            logger.warning("webhook %s: bad request: %s", request.path, exc)
            return _json_error(400, f"invalid AdmissionReview: {exc}"), "error"
        verdict = await self._decide(request.path, route, admission)
        self.requests_served += 1
        try:
            answer = review_response(admission, verdict, mutating=route.mutating)
        except (TypeError, ValueError) as exc:
            # A patched object that is not JSON-serialisable is a handler bug: fail closed.
            logger.exception(
                "webhook %s: cannot encode the answer for %s", request.path, admission.describe()
            )
            verdict = self._internal_error(request.path, admission, exc)
            answer = review_response(admission, verdict, mutating=False)
        result: Literal["allowed", "denied", "error"] = (
            "allowed" if verdict.allowed
            else "error" if verdict.reason == "InternalError"
            else "denied"
        )
        return web.json_response(answer), result

    async def _decide(self, path: str, route: _Route, admission: AdmissionRequest) -> Verdict:
        try:
            async with asyncio.timeout(self.handler_timeout):
                verdict = await route.handler(admission)
        except TimeoutError as exc:
            logger.error(
                "webhook %s: timed out after %ss on %s",
                path,
                self.handler_timeout,
                admission.describe(),
            )
            return self._internal_error(path, admission, exc)
        except Exception as exc:
            logger.exception("webhook %s: handler failed on %s", path, admission.describe())
            return self._internal_error(path, admission, exc)
        if not isinstance(verdict, Verdict):
            logger.error(
                "webhook %s: handler returned %r, not a Verdict", path, type(verdict).__name__
            )
            return self._internal_error(path, admission, TypeError("handler returned no Verdict"))
        if verdict.patched is not None and not route.mutating:
            logger.error("webhook %s: a validating handler returned a patch", path)
            return self._internal_error(
                path, admission, TypeError("validating handler returned a patch")
            )
        return verdict

    @staticmethod
    def _internal_error(path: str, admission: AdmissionRequest, exc: BaseException) -> Verdict:
        problem = "timed out" if isinstance(exc, TimeoutError) else f"failed ({type(exc).__name__})"
        return Verdict(
            allowed=False,
            errors=(
                FieldError(
                    "<webhook>",
                    f"internal error: webhook {path} {problem} on {admission.describe()}",
                ),
            ),
            reason="InternalError",
        )

    # -- TLS and lifecycle --------------------------------------------------------------------------

    def _load_tls(self) -> bool:
        """(Re)load ``tls.crt``/``tls.key``; returns whether the served certificate changed."""
        cert_path, key_path = self.cert_dir / TLS_CERT, self.cert_dir / TLS_KEY
        try:
            fingerprint = hashlib.sha256(cert_path.read_bytes() + key_path.read_bytes()).digest()
        except FileNotFoundError as exc:
            raise ssl.SSLError(f"missing {exc.filename}") from None
        if fingerprint == self._cert_fingerprint:
            return False
        # Check the pair on a scratch context first: a half-rotated directory (new cert, old
        # key) must not break the live one.
        scratch = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        scratch.load_cert_chain(cert_path, key_path)
        if self._ssl is None:
            self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        # New handshakes use the new pair; connections already open keep theirs.
        self._ssl.load_cert_chain(cert_path, key_path)
        self._cert_fingerprint = fingerprint
        return True

    async def start(self) -> None:
        """Load the certificates and listen. Fails (with the file named) if they are missing."""
        try:
            self._load_tls()
        except (ssl.SSLError, OSError) as exc:
            raise RuntimeError(
                f"webhook server: cannot load TLS files from {self.cert_dir}: {exc}"
            ) from exc
        assert self._ssl is not None
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host or None, self.port, ssl_context=self._ssl)
        await site.start()
        if self.port == 0 and self._runner.addresses:
            self.port = int(self._runner.addresses[0][1])
        logger.info(
            "webhook server listening on %s:%d (TLS) for %s",
            self.host or "*",
            self.port,
            sorted(self._routes),
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def watch_certs(self) -> None:
        """Reload the certificate when its files change (run it under a Supervisor)."""
        while True:
            await asyncio.sleep(self.reload_interval)
            try:
                if self._load_tls():
                    logger.info("webhook server: reloaded the certificate from %s", self.cert_dir)
            except (ssl.SSLError, OSError, ValueError) as exc:
                # Keep serving the previous certificate; a rotation in progress settles soon.
                logger.warning(
                    "webhook server: not reloading certificates from %s: %s", self.cert_dir, exc
                )

    async def serve(self) -> None:
        """Start, reload certificates until cancelled, then stop."""
        await self.start()
        try:
            await self.watch_certs()
        finally:
            await self.stop()

    def check(self) -> tuple[bool, str]:
        if self._runner is None:
            return False, "webhook server not started"
        return True, f"webhook server serving {len(self._routes)} webhooks on port {self.port}"
