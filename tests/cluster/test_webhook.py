"""The API server calls an HTTPS admission webhook served by aiohttp on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kqueue.localcluster.cluster import LocalCluster

pytestmark = pytest.mark.cluster

DENY_KEY = "forbidden"
MUTATED_LABEL = "webhook.kqueue.io/seen"


@dataclass
class Webhook:
    url: str
    calls: list[dict[str, Any]] = field(default_factory=list)


def _review_response(review: dict[str, Any], allowed: bool, **extra: Any) -> web.Response:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": allowed, **extra},
    }
    return web.json_response(body)


@pytest.fixture
async def webhook_server(cluster: LocalCluster, tmp_path: Any) -> AsyncIterator[Webhook]:
    """An aiohttp HTTPS server whose certificate is signed by the cluster's CA."""
    creds = cluster.ca.serving(tmp_path, "webhook")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(creds.cert_path, creds.key_path)
    hook = Webhook(url="")

    async def validate(request: web.Request) -> web.Response:
        review = await request.json()
        hook.calls.append(review)
        obj = review["request"]["object"]
        if DENY_KEY in (obj.get("data") or {}):
            return _review_response(
                review,
                False,
                status={"code": 403, "message": f"key {DENY_KEY!r} is not allowed here"},
            )
        return _review_response(review, True)

    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        hook.calls.append(review)
        labels = review["request"]["object"]["metadata"].get("labels")
        patch: list[dict[str, Any]] = []
        if labels is None:
            patch.append({"op": "add", "path": "/metadata/labels", "value": {}})
        patch.append(
            {
                "op": "add",
                "path": "/metadata/labels/" + MUTATED_LABEL.replace("/", "~1"),
                "value": "yes",
            }
        )
        return _review_response(
            review,
            True,
            patchType="JSONPatch",
            patch=base64.b64encode(json.dumps(patch).encode()).decode(),
        )

    app = web.Application()
    app.router.add_post("/validate", validate)
    app.router.add_post("/mutate", mutate)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    hook.url = f"https://127.0.0.1:{port}"
    try:
        yield hook
    finally:
        await runner.cleanup()


def _webhook_client_config(
    cluster: LocalCluster, url: str
) -> client.AdmissionregistrationV1WebhookClientConfig:
    return client.AdmissionregistrationV1WebhookClientConfig(
        url=url, ca_bundle=base64.b64encode(cluster.ca.pem).decode()
    )


async def test_api_server_calls_https_webhook_and_obeys_it(
    cluster: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
    webhook_server: Webhook,
) -> None:
    admission = client.AdmissionregistrationV1Api(api_client)
    core = client.CoreV1Api(api_client)
    suffix = uuid.uuid4().hex[:6]
    # Only this test's namespace, so the hook cannot disturb anything else in the cluster.
    scope = client.V1LabelSelector(match_labels={"kubernetes.io/metadata.name": namespace})
    rules = [
        client.V1RuleWithOperations(
            api_groups=[""], api_versions=["v1"], operations=["CREATE"], resources=["configmaps"]
        )
    ]
    validating = f"kqueue-test-validate-{suffix}"
    mutating = f"kqueue-test-mutate-{suffix}"
    await admission.create_validating_webhook_configuration(
        client.V1ValidatingWebhookConfiguration(
            metadata=client.V1ObjectMeta(name=validating),
            webhooks=[
                client.V1ValidatingWebhook(
                    name="validate.test.kqueue.io",
                    client_config=_webhook_client_config(cluster, webhook_server.url + "/validate"),
                    rules=rules,
                    namespace_selector=scope,
                    failure_policy="Fail",
                    side_effects="None",
                    admission_review_versions=["v1"],
                    timeout_seconds=5,
                )
            ],
        )
    )
    await admission.create_mutating_webhook_configuration(
        client.V1MutatingWebhookConfiguration(
            metadata=client.V1ObjectMeta(name=mutating),
            webhooks=[
                client.V1MutatingWebhook(
                    name="mutate.test.kqueue.io",
                    client_config=_webhook_client_config(cluster, webhook_server.url + "/mutate"),
                    rules=rules,
                    namespace_selector=scope,
                    failure_policy="Fail",
                    side_effects="None",
                    admission_review_versions=["v1"],
                    timeout_seconds=5,
                )
            ],
        )
    )
    try:
        # Webhook configurations reach the API server's admission chain through an informer,
        # so the first requests after creating them may not be intercepted yet.
        deadline = asyncio.get_running_loop().time() + 30
        attempt = 0
        while True:
            attempt += 1
            try:
                await core.create_namespaced_config_map(
                    namespace,
                    client.V1ConfigMap(
                        metadata=client.V1ObjectMeta(name=f"probe-{attempt}"),
                        data={DENY_KEY: "x"},
                    ),
                )
            except ApiException as exc:
                assert exc.status == 403, exc
                assert f"key '{DENY_KEY}' is not allowed here" in exc.body
                break
            if asyncio.get_running_loop().time() > deadline:
                pytest.fail("the validating webhook never took effect")
            await asyncio.sleep(0.2)

        created = await core.create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(metadata=client.V1ObjectMeta(name="allowed"), data={"ok": "1"}),
        )
        assert created.metadata.labels.get(MUTATED_LABEL) == "yes"
        stored = await core.read_namespaced_config_map("allowed", namespace)
        assert stored.metadata.labels[MUTATED_LABEL] == "yes"

        seen = [c["request"] for c in webhook_server.calls]
        assert any(r["name"] == "allowed" and r["operation"] == "CREATE" for r in seen)
        assert all(r["namespace"] == namespace for r in seen)
        assert seen[-1]["userInfo"]["groups"] and "system:masters" in seen[-1]["userInfo"]["groups"]
    finally:
        await admission.delete_validating_webhook_configuration(validating)
        await admission.delete_mutating_webhook_configuration(mutating)
