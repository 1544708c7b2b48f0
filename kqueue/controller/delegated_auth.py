"""Who is calling, and may they: authentication and authorization delegated to the API server.

What kqueue's own servers (secure metrics, the visibility API) use, as an aggregated API server
and controller-runtime's metrics filters do:

- a bearer token is authenticated with a TokenReview;
- a request proxied by the kube-apiserver's aggregation layer carries a client certificate
  signed by the request-header CA and the user in ``X-Remote-User``/``X-Remote-Group``/
  ``X-Remote-Extra-*`` headers. The CA, the allowed client names and the header names are the
  ones the API server publishes in ``kube-system/extension-apiserver-authentication``; headers
  are believed only from a client whose certificate verified against that CA and whose name
  is allowed;
- every request is then authorized with a SubjectAccessReview for that user.

Answers are cached briefly (TokenReview and SubjectAccessReview alike: ten seconds), so a
scraper or a polling client costs the API server one review per interval, not per request.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

from kqueue.controller.kube import Kube, KubeError
from kqueue.controller.resources import CONFIGMAPS

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

AUTHENTICATION_CONFIGMAP: Final = ("kube-system", "extension-apiserver-authentication")
TOKEN_REVIEWS_PATH: Final = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS_PATH: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CACHE_SECONDS: Final = 10.0


class AuthUnavailable(Exception):
    """The API server could not answer a review: the request cannot be decided (500)."""


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestHeaderConfig:
    """How the front proxy names its user (kube-apiserver's ``--requestheader-*`` flags)."""

    client_ca_pem: bytes
    allowed_names: tuple[str, ...]
    username_headers: tuple[str, ...]
    group_headers: tuple[str, ...]
    extra_prefixes: tuple[str, ...]

    @staticmethod
    def from_configmap(cm: Obj) -> RequestHeaderConfig | None:
        """From ``extension-apiserver-authentication``; None when the API server publishes no
        request-header CA (no aggregation layer configured)."""
        data = cm.get("data") or {}
        ca = data.get("requestheader-client-ca-file") or ""
        if not ca:
            return None

        def names(key: str) -> tuple[str, ...]:
            # Published as JSON lists, e.g. '["X-Remote-User"]'.
            raw = data.get(key) or "[]"
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                return ()
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        return RequestHeaderConfig(
            client_ca_pem=ca.encode(),
            allowed_names=names("requestheader-allowed-names"),
            username_headers=names("requestheader-username-headers"),
            group_headers=names("requestheader-group-headers"),
            extra_prefixes=names("requestheader-extra-headers-prefix"),
        )

    def user(self, request: web.Request) -> User | None:
        """The user the front proxy vouches for, if this request came from it.

        The TLS layer verified any client certificate against the request-header CA (see
        :func:`kqueue.controller.serving.tls_context`); here the certificate must be present
        and carry an allowed common name (any, when the list is empty, as in Kubernetes).
        """
        transport = request.transport
        peer = transport.get_extra_info("peercert") if transport is not None else None
        if not peer:
            return None
        common_names = [
            value for rdn in peer.get("subject", ()) for key, value in rdn if key == "commonName"
        ]
        if self.allowed_names and not set(common_names) & set(self.allowed_names):
            logger.warning(
                "client certificate %s is not an allowed front proxy (%s)",
                common_names,
                ", ".join(self.allowed_names),
            )
            return None
        name = next(
            (request.headers[h] for h in self.username_headers if request.headers.get(h)), ""
        )
        if not name:
            return None
        groups = tuple(g for h in self.group_headers for g in request.headers.getall(h, []))
        extra: dict[str, tuple[str, ...]] = {}
        for prefix in self.extra_prefixes:
            for header in request.headers:
                if header.lower().startswith(prefix.lower()):
                    key = header[len(prefix) :].lower()
                    extra[key] = tuple(request.headers.getall(header))
        return User(name=name, groups=groups, extra=extra)


async def load_request_header_config(kube: Kube) -> RequestHeaderConfig | None:
    """The front proxy's configuration, as the API server publishes it (None if it does not)."""
    namespace, name = AUTHENTICATION_CONFIGMAP
    cm = await kube.get(CONFIGMAPS, name, namespace)
    return RequestHeaderConfig.from_configmap(cm)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def bearer_token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class DelegatedAuth:
    """TokenReview and SubjectAccessReview through ``kube``, with a short-lived cache.

    ``kube`` must be a client without a write deadline: these are POSTs, but not writes the
    leadership guards, and standbys answer them too.
    """

    def __init__(self, kube: Kube, *, cache_seconds: float = CACHE_SECONDS) -> None:
        self.kube = kube
        self.cache_seconds = cache_seconds
        self._tokens: dict[str, tuple[float, User | None]] = {}
        self._decisions: dict[str, tuple[float, Decision]] = {}

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _cached(self, cache: dict[str, tuple[float, Any]], key: str) -> tuple[bool, Any]:
        hit = cache.get(key)
        if hit is not None and hit[0] > self._now():
            return True, hit[1]
        if len(cache) > 4096:  # a bound, not an LRU: expired entries go first
            now = self._now()
            for k in [k for k, (exp, _) in cache.items() if exp <= now]:
                del cache[k]
        return False, None

    async def _review(self, path: str, body: Obj, what: str) -> Obj:
        try:
            status, answer = await self.kube.request("POST", path, body, time_limit=10)
        except KubeError as err:
            raise AuthUnavailable(f"{what}: {err}") from err
        if status not in (200, 201):
            raise AuthUnavailable(f"{what}: HTTP {status}: {answer.get('message', '')}")
        return answer

    async def authenticate_token(self, token: str) -> User | None:
        """The token's user, or None when the API server does not accept the token."""
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, user = self._cached(self._tokens, key)
        if hit:
            return user  # type: ignore[no-any-return]
        answer = await self._review(
            TOKEN_REVIEWS_PATH,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
            "TokenReview",
        )
        status = answer.get("status") or {}
        found: User | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            found = User(
                name=str(info.get("username", "")),
                uid=str(info.get("uid", "")),
                groups=tuple(info.get("groups") or ()),
                extra={k: tuple(v) for k, v in (info.get("extra") or {}).items()},
            )
        self._tokens[key] = (self._now() + self.cache_seconds, found)
        return found

    async def authorize(self, user: User, attributes: Obj) -> Decision:
        """A SubjectAccessReview for ``user`` with ``attributes`` (``{"resourceAttributes":
        {...}}`` or ``{"nonResourceAttributes": {...}}``)."""
        spec: Obj = {"user": user.name, "groups": list(user.groups), **attributes}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        key = json.dumps(spec, sort_keys=True)
        hit, decision = self._cached(self._decisions, key)
        if hit:
            return decision  # type: ignore[no-any-return]
        answer = await self._review(
            SUBJECT_ACCESS_REVIEWS_PATH,
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
            "SubjectAccessReview",
        )
        status = answer.get("status") or {}
        found = Decision(bool(status.get("allowed")), str(status.get("reason", "")))
        self._decisions[key] = (self._now() + self.cache_seconds, found)
        return found


def forbidden_message(user: User, verb: str, what: Sequence[str]) -> str:
    """The API server's wording: ``user "x" cannot get resource "y" ...``."""
    return f'user "{user.name}" cannot {verb} ' + " ".join(what)
