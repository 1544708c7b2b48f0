"""Delegated authentication and authorization, the secure metrics door and the visibility app,
without a cluster: reviews answered by a stand-in for the API server's review endpoints.

The real API server's answers (TokenReview, SubjectAccessReview, the aggregation layer's front
proxy) are exercised in tests/controller_e2e/test_visibility_api.py; here the decisions kqueue
takes from those answers, including the ones a live cluster rarely gives (the API server
unreachable: 500, not an open door).
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest

from kqueue.api.config import Visibility
from kqueue.controller.delegated_auth import (
    AuthUnavailable,
    Decision,
    DelegatedAuth,
    RequestHeaderConfig,
    User,
)
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import CONFIGMAPS
from kqueue.controller.secure_metrics import secure_metrics_app
from kqueue.controller.serving import serve_tls, tls_context
from kqueue.controller.visibility_api import (
    BadParameter,
    VisibilityServer,
    page_param,
    serve_visibility,
)
from tests.controller.fake_apiserver import FakeCluster
from tests.visibility.scenario import cluster_queue, engine_of, flavor, local_queue, workload

Obj = dict[str, Any]


@dataclass
class Reviews(DelegatedAuth):
    """The API server's review answers: tokens it accepts, and who may do what."""

    tokens: dict[str, User] = field(default_factory=dict)
    allowed: set[tuple[str, str]] = field(default_factory=set)  # (user, what)
    down: bool = False
    calls: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(kube=None)  # type: ignore[arg-type]

    async def _review(self, path: str, body: Obj, what: str) -> Obj:
        self.calls.append(what)
        if self.down:
            raise AuthUnavailable(f"{what}: connection refused")
        spec = body["spec"]
        if what == "TokenReview":
            user = self.tokens.get(spec["token"])
            if user is None:
                return {"status": {"authenticated": False}}
            return {
                "status": {
                    "authenticated": True,
                    "user": {"username": user.name, "groups": list(user.groups)},
                }
            }
        attrs = spec.get("nonResourceAttributes") or spec.get("resourceAttributes") or {}
        key = attrs.get("path") or f"{attrs.get('resource')}/{attrs.get('subresource')}"
        return {"status": {"allowed": (spec["user"], key) in self.allowed}}


@pytest.mark.parametrize(
    ("name", "data", "want"),
    [
        ("no aggregation layer", {"client-ca-file": "CA"}, None),
        (
            "kubeadm's front proxy",
            {
                "requestheader-client-ca-file": "FRONT-CA",
                "requestheader-allowed-names": '["front-proxy-client"]',
                "requestheader-username-headers": '["X-Remote-User"]',
                "requestheader-group-headers": '["X-Remote-Group"]',
                "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
            },
            RequestHeaderConfig(
                b"FRONT-CA",
                ("front-proxy-client",),
                ("X-Remote-User",),
                ("X-Remote-Group",),
                ("X-Remote-Extra-",),
            ),
        ),
        (
            "any client name, unreadable list",
            {"requestheader-client-ca-file": "CA", "requestheader-allowed-names": "not json"},
            RequestHeaderConfig(b"CA", (), (), (), ()),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_request_header_config_from_the_configmap(
    name: str, data: Obj, want: RequestHeaderConfig | None
) -> None:
    assert RequestHeaderConfig.from_configmap({"data": data}) == want


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (None, 7),
        ("", 7),
        ("0", 0),
        ("25", 25),
        ("-1", "limit"),
        ("ten", "limit"),
        ("1.5", "limit"),
        ("+3", "limit"),
        ("²", "limit"),
        (" 3", "limit"),
    ],
)
def test_page_parameters_are_non_negative_integers(raw: str | None, want: int | str) -> None:
    query = {} if raw is None else {"limit": raw}
    if isinstance(want, int):
        assert page_param(query, "limit", 7) == want
    else:
        with pytest.raises(BadParameter, match=re.escape(f'{want}="{raw}"') + ".*non-negative"):
            page_param(query, "limit", 7)


async def test_reviews_are_cached_briefly() -> None:
    auth = Reviews(tokens={"t": User("alice")}, allowed={("alice", "/metrics")})
    for _ in range(3):
        assert await auth.authenticate_token("t") == User("alice")
        assert await auth.authorize(
            User("alice"), {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
        ) == Decision(True, "")
    assert auth.calls == ["TokenReview", "SubjectAccessReview"]


async def _serve(app: aiohttp.web.Application) -> tuple[aiohttp.web.AppRunner, str]:
    runner = await serve_tls(app, "127.0.0.1:0", tls_context("", ["localhost", "127.0.0.1"]))
    assert runner is not None
    return runner, f"https://127.0.0.1:{runner.addresses[0][1]}"


def _insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


@pytest.mark.parametrize(
    ("name", "token", "down", "code"),
    [
        ("no token", None, False, 401),
        ("unknown token", "nope", False, 401),
        ("authenticated, not allowed", "bob", False, 403),
        ("allowed", "alice", False, 200),
        ("API server unreachable", "alice", True, 500),
    ],
    ids=lambda v: v if (isinstance(v, str) and " " in v) or v == "allowed" else "",
)
async def test_secure_metrics_door(name: str, token: str | None, down: bool, code: int) -> None:
    auth = Reviews(
        tokens={"alice": User("alice"), "bob": User("bob")},
        allowed={("alice", "/metrics")},
        down=down,
    )
    runner, base = await _serve(secure_metrics_app(Metrics(), auth))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{base}/metrics", headers=headers, ssl=_insecure()) as resp,
        ):
            body = await resp.text()
    finally:
        await runner.cleanup()
    assert resp.status == code, body
    if code == 200:
        assert "kqueue_admission_attempts_total" in body
    if code == 403:
        assert "user=bob, verb=get, nonResourceURL=/metrics" in body


async def test_visibility_app_with_a_bearer_token() -> None:
    engine = engine_of(
        [
            flavor(),
            cluster_queue("cq", "1"),
            local_queue("lq", "cq"),
            workload("running", "lq"),
            workload("first", "lq", created=1),
            workload("second", "lq", created=2),
        ]
    )
    auth = Reviews(
        tokens={"alice": User("alice"), "bob": User("bob")},
        allowed={("alice", "clusterqueues/pendingworkloads")},
    )
    server = VisibilityServer(lambda: engine, auth, request_header=None)
    runner, base = await _serve(server.app())
    path = "/apis/visibility.kqueue.io/v1alpha1/clusterqueues/cq/pendingworkloads"
    try:
        async with aiohttp.ClientSession() as session:

            async def get(url: str, token: str | None) -> tuple[int, Obj]:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with session.get(base + url, headers=headers, ssl=_insecure()) as resp:
                    return resp.status, await resp.json()

            code, body = await get(path, "alice")
            assert code == 200, body
            assert [
                (i["metadata"]["name"], i["positionInClusterQueue"]) for i in body["items"]
            ] == [
                ("first", 0),
                ("second", 1),
            ]
            # limit=0 is Kueue's default page (1000), not an empty one.
            code, body = await get(f"{path}?limit=0&offset=1", "alice")
            assert [i["metadata"]["name"] for i in body["items"]] == ["second"]
            code, body = await get(path, "bob")
            assert (code, body["reason"]) == (403, "Forbidden")
            assert (
                'User "bob" cannot get resource "clusterqueues/pendingworkloads"' in body["message"]
            )
            code, body = await get(path, None)
            assert (code, body["reason"]) == (401, "Unauthorized")
            # Discovery needs an authenticated caller only.
            code, body = await get("/apis/visibility.kqueue.io/v1alpha1", "bob")
            assert code == 200 and body["kind"] == "APIResourceList"
            code, body = await get("/apis", "bob")
            assert body["groups"][0]["preferredVersion"]["groupVersion"] == (
                "visibility.kqueue.io/v1alpha1"
            )
    finally:
        await runner.cleanup()


async def test_visibility_serves_without_the_configmap_and_says_why(
    caplog: pytest.LogCaptureFixture, cluster: FakeCluster
) -> None:
    """Admission must not stop over the visibility API: the server starts, bearer tokens work,
    the log names the ConfigMap and the Role that grants it."""
    # The API server refuses the authentication ConfigMap (RBAC missing).
    cluster.server.add(CONFIGMAPS, {"metadata": {
        "name": "extension-apiserver-authentication", "namespace": "kube-system",
    }})
    cluster.server.fail("GET", CONFIGMAPS, "extension-apiserver-authentication", code=403)
    auth = Reviews(tokens={"alice": User("alice")})
    auth.kube = cluster.kube
    engine = engine_of([flavor(), cluster_queue("cq", "1")])
    runner = await serve_visibility(
        lambda: engine, Visibility(bind_address="127.0.0.1:0"), auth, "kqueue-system"
    )
    assert runner is not None
    try:
        base = f"https://127.0.0.1:{runner.addresses[0][1]}"
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"{base}/apis/visibility.kqueue.io/v1alpha1",
                headers={"Authorization": "Bearer alice"},
                ssl=_insecure(),
            ) as resp,
        ):
            assert resp.status == 200
    finally:
        await runner.cleanup()
    assert "extension-apiserver-authentication" in caplog.text
    assert "auth-reader" in caplog.text
    assert [r.status for r in cluster.server.requests_to("GET", CONFIGMAPS)] == [403]
