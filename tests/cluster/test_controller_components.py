"""The informer, leader election and the webhook server against the real local control plane.

(Here, not in tests/controller, whose conftest gives `cluster` to the fake API server.)"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kqueue.controller.informer import Informer, as_dict
from kqueue.controller.kube import Kube
from kqueue.controller.leader import LeaderElector
from kqueue.controller.resources import CONFIGMAPS
from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict, WebhookServer
from kqueue.controller.webhook_server.certs import CertRotator
from tests.controller.fake_apiserver import eventually

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


@contextlib.asynccontextmanager
async def running(coro_fn: Any) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(coro_fn())
    try:
        yield task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def configmap(name: str, **data: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "kqueue-test"}), data=data
    )


async def test_informer_on_configmaps_converges_through_create_update_delete(
    api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespaced_config_map(namespace, configmap("before", v="0"))
    await core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="unlabelled"))
    )
    informer = Informer(
        Kube(api_client),
        CONFIGMAPS,
        converter=as_dict,
        namespace=namespace,
        label_selector="app=kqueue-test",
    )
    seen: list[str] = []
    informer.add_handler(
        on_add=lambda key, obj: seen.append(f"add {key}"),
        on_update=lambda key, old, new: seen.append(f"update {key}"),
        on_delete=lambda key, obj: seen.append(f"delete {key}"),
    )

    def data() -> dict[str, Obj]:
        return {obj["metadata"]["name"]: obj.get("data") or {} for obj in informer.store.objects()}

    async with running(informer.run):
        await asyncio.wait_for(informer.wait_synced(), 30)
        assert data() == {"before": {"v": "0"}}
        assert informer.store.get(f"{namespace}/before")["kind"] == "ConfigMap"  # type: ignore[index]

        await core.create_namespaced_config_map(namespace, configmap("a", v="1"))
        await core.create_namespaced_config_map(namespace, configmap("b", v="1"))
        await core.patch_namespaced_config_map("a", namespace, {"data": {"v": "2"}})
        await core.delete_namespaced_config_map("b", namespace)
        await core.delete_namespaced_config_map("before", namespace)
        await eventually(
            lambda: data() == {"a": {"v": "2"}}, within=30, what="the store to converge"
        )
        # The store agrees with a fresh list, resourceVersions included.
        listed = await core.list_namespaced_config_map(namespace, label_selector="app=kqueue-test")
        assert {cm.metadata.name: cm.metadata.resource_version for cm in listed.items} == {
            "a": informer.store.resource_version(f"{namespace}/a")
        }
    assert seen == [
        f"add {namespace}/before",
        f"add {namespace}/a",
        f"add {namespace}/b",
        f"update {namespace}/a",
        f"delete {namespace}/b",
        f"delete {namespace}/before",
    ]
    assert informer.lists == 1


LEASE = timedelta(seconds=2)
RENEW = timedelta(milliseconds=1500)
RETRY = timedelta(milliseconds=250)


async def test_leader_election_on_a_real_lease(
    api_client: client.ApiClient, namespace: str
) -> None:
    coordination = client.CoordinationV1Api(api_client)
    started: list[str] = []

    def elector(identity: str) -> LeaderElector:
        async def lead() -> None:
            started.append(identity)
            await asyncio.Event().wait()

        return LeaderElector(
            api_client,
            name="kqueue-leader",
            namespace=namespace,
            identity=identity,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
            on_started_leading=lead,
        )

    first, second = elector("replica-a"), elector("replica-b")
    overlaps: list[list[str]] = []

    async def watch_leaders() -> None:
        while True:
            leaders = [e.identity for e in (first, second) if e.is_leader]
            if len(leaders) > 1:
                overlaps.append(leaders)
            await asyncio.sleep(0.01)

    loop = asyncio.get_running_loop()
    async with running(watch_leaders):
        first_task = asyncio.create_task(first.run())
        second_task = asyncio.create_task(second.run())
        try:
            await eventually(
                lambda: first.is_leader or second.is_leader, within=30, what="a leader"
            )
            await asyncio.sleep(3 * RETRY.total_seconds())
            leader, standby = (first, second) if first.is_leader else (second, first)
            leader_task, standby_task = (
                (first_task, second_task) if leader is first else (second_task, first_task)
            )
            assert started == [leader.identity]
            assert standby.leader == leader.identity
            lease = await coordination.read_namespaced_lease("kqueue-leader", namespace)
            assert lease.spec.holder_identity == leader.identity
            assert lease.spec.lease_duration_seconds == 2

            # The leader dies without releasing: it simply stops renewing.
            leader.release_on_cancel = False
            leader_task.cancel()
            await asyncio.gather(leader_task, return_exceptions=True)
            assert leader.last_renewed_at is not None
            last_renewal = leader.last_renewed_at
            lease = await coordination.read_namespaced_lease("kqueue-leader", namespace)
            assert lease.spec.holder_identity == leader.identity
            await eventually(lambda: standby.is_leader, within=30, what="the standby to take over")
            took_over = loop.time() - last_renewal
            # Not before the lease expired on the standby's clock; at most one lease duration
            # plus the polling of the standby (it sees a renewal up to one retry period late and
            # retries every retry period, both jittered by up to 20%) after the last renewal.
            assert took_over >= LEASE.total_seconds() - 1.2 * RETRY.total_seconds()
            assert took_over <= (LEASE + 2.4 * RETRY).total_seconds() + 1.0
            lease = await coordination.read_namespaced_lease("kqueue-leader", namespace)
            assert lease.spec.holder_identity == standby.identity
            assert lease.spec.lease_transitions >= 1

            # A clean shutdown releases the lease.
            assert standby.release_on_cancel
            standby_task.cancel()
            await asyncio.gather(standby_task, return_exceptions=True)
            lease = await coordination.read_namespaced_lease("kqueue-leader", namespace)
            assert not lease.spec.holder_identity
        finally:
            for task in (first_task, second_task):
                task.cancel()
            await asyncio.gather(first_task, second_task, return_exceptions=True)
    assert overlaps == []


async def test_webhook_server_with_managed_certificates_is_called_by_the_api_server(
    api_client: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """CertRotator issues the certificate into a Secret and cert dir and injects its CA; the
    API server then trusts the WebhookServer, obeys its denial and applies its patch."""
    admission = client.AdmissionregistrationV1Api(api_client)
    core = client.CoreV1Api(api_client)
    suffix = uuid.uuid4().hex[:6]
    validating, mutating = f"kqueue-test-v-{suffix}", f"kqueue-test-m-{suffix}"
    rotator = CertRotator(
        api_client,
        namespace=namespace,
        secret_name="kqueue-webhook-server-cert",
        service_name="kqueue-webhook-service",
        cert_dir=tmp_path,
        webhook_configurations=[
            ("ValidatingWebhookConfiguration", validating),
            ("MutatingWebhookConfiguration", mutating),
        ],
        extra_hosts=["127.0.0.1"],
    )
    await rotator.ensure()  # certificates first: the server needs them to start

    async def validate(req: AdmissionRequest) -> Verdict:
        assert req.object is not None
        if "forbidden" in (req.object.get("data") or {}):
            return Verdict.deny(FieldError("data.forbidden", "is not allowed here"))
        return Verdict.allow()

    async def mutate(req: AdmissionRequest) -> Verdict:
        assert req.object is not None
        obj = copy.deepcopy(req.object)
        obj["metadata"].setdefault("labels", {})["kqueue.io/seen"] = "yes"
        return Verdict.patch(obj)

    server = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0)
    server.add_validating("/validate", validate)
    server.add_mutating("/mutate", mutate)
    await server.start()
    scope = client.V1LabelSelector(match_labels={"kubernetes.io/metadata.name": namespace})
    rules = [
        client.V1RuleWithOperations(
            api_groups=[""], api_versions=["v1"], operations=["CREATE"], resources=["configmaps"]
        )
    ]

    def hook_config(path: str) -> client.AdmissionregistrationV1WebhookClientConfig:
        # No caBundle: the rotator injects it.
        return client.AdmissionregistrationV1WebhookClientConfig(
            url=f"https://127.0.0.1:{server.port}{path}"
        )

    await admission.create_validating_webhook_configuration(
        client.V1ValidatingWebhookConfiguration(
            metadata=client.V1ObjectMeta(name=validating),
            webhooks=[
                client.V1ValidatingWebhook(
                    name="validate.test.kqueue.io",
                    client_config=hook_config("/validate"),
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
                    client_config=hook_config("/mutate"),
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
        bundle = await rotator.ensure()
        stored = await admission.read_validating_webhook_configuration(validating)
        assert (
            stored.webhooks[0].client_config.ca_bundle == base64.b64encode(bundle.ca_pem).decode()
        )
        secret = await core.read_namespaced_secret("kqueue-webhook-server-cert", namespace)
        assert secret.type == "kubernetes.io/tls"

        # Webhook configurations reach the API server's admission chain through an informer:
        # the first requests may pass before it sees them.
        deadline = asyncio.get_running_loop().time() + 30
        attempt = 0
        while True:
            attempt += 1
            try:
                await core.create_namespaced_config_map(
                    namespace,
                    client.V1ConfigMap(
                        metadata=client.V1ObjectMeta(name=f"probe-{attempt}"),
                        data={"forbidden": "x"},
                    ),
                )
            except ApiException as exc:
                assert exc.status == 422, exc.body
                status = json.loads(exc.body)
                assert status["message"] == (
                    'admission webhook "validate.test.kqueue.io" denied the request: '
                    f'ConfigMap "probe-{attempt}" is invalid: data.forbidden: is not allowed here'
                )
                assert status["details"]["causes"] == [
                    {"message": "is not allowed here", "field": "data.forbidden"}
                ]
                break
            assert asyncio.get_running_loop().time() < deadline, "the webhook never took effect"
            await asyncio.sleep(0.2)
        created = await core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="allowed"))
        )
        assert created.metadata.labels == {"kqueue.io/seen": "yes"}
        assert server.requests_served >= 2
    finally:
        await admission.delete_validating_webhook_configuration(validating)
        await admission.delete_mutating_webhook_configuration(mutating)
        await server.stop()
