"""The webhook server over real TLS: routing, patches, denials, malformed input, reloads."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict, WebhookServer
from kqueue.controller.webhook_server.certs import (
    ensure_local_certs,
    generate_bundle,
    write_cert_dir,
)
from kqueue.controller.webhook_server.patch import apply_json_patch, json_patch
from tests.controller.fake_apiserver import eventually

Obj = dict[str, Any]


def workload(name: str = "job-1", count: int = 1) -> Obj:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team-a", "labels": {"a/b": "1"}},
        "spec": {"count": count, "tolerations": [{"key": "x"}]},
    }


def review(obj: Obj | None = None, *, uid: str = "uid-1", operation: str = "CREATE") -> Obj:
    obj = obj if obj is not None else workload()
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "kqueue.io", "version": "v1alpha1", "kind": "Workload"},
            "resource": {"group": "kqueue.io", "version": "v1alpha1", "resource": "workloads"},
            "operation": operation,
            "namespace": "team-a",
            "name": obj["metadata"]["name"],
            "object": obj,
            "oldObject": None,
            "userInfo": {"username": "alice"},
        },
    }


async def default_workload(req: AdmissionRequest) -> Verdict:
    assert req.object is not None
    obj = json.loads(json.dumps(req.object))
    obj["metadata"]["labels"]["kqueue.io/defaulted"] = "true"
    obj["spec"]["tolerations"].append({"key": "kqueue.io/spot", "operator": "Exists"})
    obj["spec"].setdefault("priority", 0)
    return Verdict.patch(obj, "defaulted priority to 0")


async def validate_workload(req: AdmissionRequest) -> Verdict:
    assert req.object is not None
    count = req.object["spec"]["count"]
    if count < 1:
        return Verdict.deny(FieldError("spec.count", f"must be >= 1, got {count}"))
    return Verdict.allow()


async def crash(req: AdmissionRequest) -> Verdict:
    raise KeyError("spec")


async def slow(req: AdmissionRequest) -> Verdict:
    await asyncio.sleep(10)
    return Verdict.allow()


async def validating_that_patches(req: AdmissionRequest) -> Verdict:
    return Verdict.patch({})


@dataclass
class Env:
    server: WebhookServer
    session: aiohttp.ClientSession
    cert_dir: Path

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.server.port}"

    async def post(self, path: str, body: object) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.session.post(self.base + path, data=data) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    return ctx


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    bundle = ensure_local_certs(tmp_path)
    server = WebhookServer(
        cert_dir=tmp_path, host="127.0.0.1", port=0, handler_timeout=0.3, reload_interval=0.05
    )
    server.add_mutating("/mutate-workload", default_workload)
    server.add_validating("/validate-workload", validate_workload)
    server.add_validating("/crash", crash)
    server.add_validating("/slow", slow)
    server.add_validating("/validating-patch", validating_that_patches)
    await server.start()
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=client_context(bundle.ca_pem))
    )
    try:
        yield Env(server, session, tmp_path)
    finally:
        await session.close()
        await server.stop()


def decision(answer: Obj) -> Obj:
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response: Obj = answer["response"]
    assert response["uid"] == "uid-1"
    return response


async def test_mutating_webhook_answers_with_a_json_patch(env: Env) -> None:
    status, answer = await env.post("/mutate-workload", review())
    assert status == 200
    response = decision(answer)
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert response["warnings"] == ["defaulted priority to 0"]
    ops = json.loads(base64.b64decode(response["patch"]))
    assert ops == [
        {"op": "add", "path": "/metadata/labels/kqueue.io~1defaulted", "value": "true"},
        {
            "op": "add",
            "path": "/spec/tolerations/1",
            "value": {"key": "kqueue.io/spot", "operator": "Exists"},
        },
        {"op": "add", "path": "/spec/priority", "value": 0},
    ]
    patched = apply_json_patch(workload(), ops)
    assert patched["metadata"]["labels"]["kqueue.io/defaulted"] == "true"
    assert patched["spec"]["priority"] == 0


async def test_validating_webhook_allows_and_denies_naming_the_field(env: Env) -> None:
    status, answer = await env.post("/validate-workload", review(workload(count=2)))
    assert status == 200
    assert decision(answer) == {"uid": "uid-1", "allowed": True}
    status, answer = await env.post("/validate-workload", review(workload(count=0)))
    response = decision(answer)
    assert status == 200
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["reason"] == "Invalid"
    assert (
        response["status"]["message"]
        == 'Workload "job-1" is invalid: spec.count: must be >= 1, got 0'
    )
    assert response["status"]["details"]["causes"] == [
        {"type": "FieldValueInvalid", "field": "spec.count", "message": "must be >= 1, got 0"}
    ]


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}, "apiVersion"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}, "kind"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request: required"),
        (
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": ""},
            },
            "request.uid",
        ),
        ("no uid", "request.uid"),
        ("bad operation", "request.operation"),
        ("object not a map", "request.object"),
        (b"\xff\xfe", "not JSON"),
    ],
)
async def test_malformed_requests_get_400_naming_the_problem(
    env: Env, body: object, want: str
) -> None:
    if body == "no uid":
        body = review()
        del body["request"]["uid"]  # type: ignore[index]
    elif body == "bad operation":
        body = review(operation="PATCH")
    elif body == "object not a map":
        body = review()
        body["request"]["object"] = "a string"  # type: ignore[index]
    status, answer = await env.post("/validate-workload", body)
    assert status == 400
    assert want in answer["message"]


async def test_other_methods_paths_and_huge_bodies_are_client_errors(env: Env) -> None:
    async with env.session.get(env.base + "/validate-workload") as resp:
        assert resp.status == 405
    async with env.session.post(env.base + "/nowhere", data=b"{}") as resp:
        assert resp.status == 404
    status, _ = await env.post("/validate-workload", b" " * (9 * 1024 * 1024))
    assert status == 413


async def test_a_crashing_handler_is_a_logged_denial_not_a_500(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="kqueue.controller.webhook_server.server"):
        status, answer = await env.post("/crash", review())
    assert status == 200
    response = decision(answer)
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert response["status"]["reason"] == "InternalError"
    assert (
        "webhook /crash failed (KeyError) on Workload team-a/job-1" in response["status"]["message"]
    )
    assert any(r.exc_info and "Workload team-a/job-1" in r.getMessage() for r in caplog.records)
    # The server is still fine.
    status, answer = await env.post("/validate-workload", review())
    assert decision(answer)["allowed"] is True


async def test_a_slow_handler_times_out_into_a_denial(env: Env) -> None:
    status, answer = await env.post("/slow", review())
    response = decision(answer)
    assert (status, response["allowed"], response["status"]["code"]) == (200, False, 500)
    assert "timed out" in response["status"]["message"]


async def test_a_validating_handler_cannot_patch(env: Env) -> None:
    _, answer = await env.post("/validating-patch", review())
    assert decision(answer)["allowed"] is False


async def test_health_endpoints_and_tls_only(env: Env) -> None:
    async with env.session.get(env.base + "/healthz") as resp:
        assert (resp.status, await resp.text()) == (200, "ok")
    async with env.session.get(env.base + "/readyz") as resp:
        assert resp.status == 200
    assert env.server.check()[0]
    async with aiohttp.ClientSession() as plain:
        with pytest.raises(aiohttp.ClientError):
            async with plain.get(f"http://127.0.0.1:{env.server.port}/healthz") as resp:
                await resp.read()


async def peer_certificate(port: int, ca_pem: bytes) -> bytes:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(ca_pem))
    try:
        der: bytes = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return der
    finally:
        writer.close()
        await writer.wait_closed()


async def test_certificates_are_reloaded_when_the_files_change(env: Env) -> None:
    from cryptography.hazmat.primitives.serialization import Encoding

    before = ensure_local_certs(env.cert_dir)
    assert await peer_certificate(
        env.server.port, before.ca_pem
    ) == before.certificate.public_bytes(Encoding.DER)
    watcher = asyncio.create_task(env.server.watch_certs())
    try:
        # A half-written rotation (certificate without its key) keeps the old certificate.
        rotated = generate_bundle(["127.0.0.1"], previous=before)
        (env.cert_dir / "tls.crt").write_bytes(rotated.cert_pem)
        await asyncio.sleep(0.2)
        assert await peer_certificate(
            env.server.port, before.ca_pem
        ) == before.certificate.public_bytes(Encoding.DER)
        write_cert_dir(env.cert_dir, rotated)
        want = rotated.certificate.public_bytes(Encoding.DER)
        for _ in range(100):
            if await peer_certificate(env.server.port, rotated.ca_pem) == want:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the rotated certificate was never served")
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


async def test_start_fails_clearly_without_certificates(tmp_path: Path) -> None:
    server = WebhookServer(cert_dir=tmp_path / "empty", port=0)
    with pytest.raises(RuntimeError, match="empty"):
        await server.start()
    assert not server.check()[0]


async def test_registration_rules(tmp_path: Path) -> None:
    server = WebhookServer(cert_dir=tmp_path, port=0)
    server.add_validating("/v", validate_workload)
    with pytest.raises(ValueError, match="already registered"):
        server.add_mutating("/v", default_workload)
    with pytest.raises(ValueError, match="start with"):
        server.add_mutating("m", default_workload)
    with pytest.raises(ValueError, match="FieldError"):
        Verdict.deny()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet="ab/~c", max_size=3), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(old=json_values, new=json_values)
def test_json_patch_round_trips(old: Any, new: Any) -> None:
    ops = json_patch(old, new)
    assert apply_json_patch(old, ops) == new
    if json.dumps(old, sort_keys=True) == json.dumps(new, sort_keys=True):
        assert ops == []


def test_json_patch_distinguishes_booleans_from_numbers() -> None:
    assert json_patch({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]
    assert json_patch({"a": [1]}, {"a": [1]}) == []


async def test_eventually_helper_reports_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match="the moon"):
        await eventually(lambda: False, within=0.05, what="the moon")
