"""Bad input against the real API server: every case of the table is refused, by the layer the
design says, with a message that names the field; a few are accepted with a documented fallback.

The CRDs come from ``api/``. kqueue's validating webhooks run in this process: the real
:class:`~kqueue.controller.webhook.WebhookServer` with the real handlers
(:func:`kqueue.controller.webhooks.register`) on its own event loop in a thread, registered with
``clientConfig.url`` and selectors that reach only this module's objects. The fallback cases need
the controller and run ``kqueue run`` as a subprocess.

``KQUEUE_BAD_INPUT_REPORT=<file>`` writes each case's actual API server message there (JSON), the
source of the table in docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kqueue.api.config import LabelSelector
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.webhook import WebhookServer
from kqueue.controller.webhook.certs import ensure_local_certs
from kqueue.controller.webhooks import register
from kqueue.controller.webhooks.config import webhook_configurations
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import install_crds
from tests.fixtures.cluster import TEST_NAMESPACE_LABEL
from tests.reliability.bad_input_cases import (
    CASE_LABEL,
    CASES,
    Case,
    Layer,
    cohort,
    instantiate,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
GROUP, VERSION = c.GROUP, c.VERSION
PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "LocalQueue": "localqueues",
    "Workload": "workloads",
}
NAMESPACED = {"LocalQueue", "Workload", "Job", "Pod"}
VALIDATING_NAME = "kqueue-reliability-bad-input"
WEBHOOK_MARK = 'admission webhook "'

MESSAGES: dict[str, Obj] = {}


# --- kqueue's webhook server, in this process ------------------------------------------------------


class ThreadedWebhookServer:
    """The real webhook server on its own loop: the API server calls it while a test awaits."""

    def __init__(self, cert_dir: Path) -> None:
        self.server = WebhookServer(cert_dir=cert_dir, host="127.0.0.1", port=0)
        register(self.server)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def _wait_until_enforced(cluster: LocalCluster) -> None:
    """Webhook configurations reach the API server through an informer: wait until a probe that
    only the webhook refuses is refused."""
    probe = instantiate(
        cohort(parentName="co-SFX"), f"probe{uuid.uuid4().hex[:6]}", "default"
    )
    text = yaml.safe_dump(probe)
    stderr = ""
    for _ in range(150):
        res = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=text, check=False)
        stderr = res.stderr
        if "must not be the Cohort itself" in stderr:  # only the webhook says this
            return
        time.sleep(0.2)
    pytest.fail(f"kqueue's validating webhook never took effect; last answer: {stderr}")


@pytest.fixture(scope="module")
def kqueue_webhooks(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ThreadedWebhookServer]:
    install_crds(cluster)
    cert_dir = tmp_path_factory.mktemp("webhook-certs")
    bundle = ensure_local_certs(cert_dir)
    server = ThreadedWebhookServer(cert_dir)
    server.start()
    _, validating = webhook_configurations(
        namespace_selector=LabelSelector(match_labels={TEST_NAMESPACE_LABEL: "true"}),
        base_url=f"https://127.0.0.1:{server.server.port}",
        ca_bundle=bundle.ca_pem,
        validating_name=VALIDATING_NAME,
    )
    for hook in validating["webhooks"]:
        # Only this module's objects: the cluster is shared with other tests.
        hook["objectSelector"] = {
            "matchExpressions": [
                *hook.get("objectSelector", {}).get("matchExpressions", []),
                {"key": CASE_LABEL, "operator": "Exists"},
            ]
        }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(validating))
    try:
        _wait_until_enforced(cluster)
        yield server
    finally:
        cluster.kubectl(
            "delete", "validatingwebhookconfiguration", VALIDATING_NAME, "--ignore-not-found",
            check=False,
        )
        server.stop()
        report = os.environ.get("KQUEUE_BAD_INPUT_REPORT")
        if report and MESSAGES:
            Path(report).write_text(json.dumps(MESSAGES, indent=2, sort_keys=True) + "\n")


# --- talking to the API server ------------------------------------------------------------------


class Objects:
    """Create, update and delete any object of the table, remembering what to clean up."""

    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.batch = client.BatchV1Api(api)
        self.core = client.CoreV1Api(api)
        self.created: list[Obj] = []

    async def create(self, body: Obj) -> Obj:
        kind, ns = body["kind"], body["metadata"].get("namespace")
        if kind == "Job":
            out = await self.batch.create_namespaced_job(ns, body)
            result: Obj = client.ApiClient().sanitize_for_serialization(out)
        elif kind == "Pod":
            out = await self.core.create_namespaced_pod(ns, body)
            result = client.ApiClient().sanitize_for_serialization(out)
        elif kind in NAMESPACED:
            result = await self.custom.create_namespaced_custom_object(
                GROUP, VERSION, ns, PLURALS[kind], body
            )
        else:
            result = await self.custom.create_cluster_custom_object(
                GROUP, VERSION, PLURALS[kind], body
            )
        self.created.append(body)
        return result

    async def get(self, body: Obj) -> Obj:
        kind, name, ns = body["kind"], body["metadata"]["name"], body["metadata"].get("namespace")
        if kind == "Job":
            return dict(client.ApiClient().sanitize_for_serialization(
                await self.batch.read_namespaced_job(name, ns)))
        if kind in NAMESPACED:
            out: Obj = await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, ns, PLURALS[kind], name)
            return out
        out = await self.custom.get_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name)
        return out

    async def replace(self, body: Obj, *, status: bool = False) -> Obj:
        kind, name, ns = body["kind"], body["metadata"]["name"], body["metadata"].get("namespace")
        if kind == "Job":
            return dict(client.ApiClient().sanitize_for_serialization(
                await self.batch.replace_namespaced_job(name, ns, body)))
        if kind in NAMESPACED:
            replace = (
                self.custom.replace_namespaced_custom_object_status
                if status else self.custom.replace_namespaced_custom_object
            )
            out: Obj = await replace(GROUP, VERSION, ns, PLURALS[kind], name, body)
            return out
        replace_cluster = (
            self.custom.replace_cluster_custom_object_status
            if status else self.custom.replace_cluster_custom_object
        )
        out = await replace_cluster(GROUP, VERSION, PLURALS[kind], name, body)
        return out

    async def cleanup(self) -> None:
        # Namespaced objects go with the test's namespace.
        for body in reversed(self.created):
            if body["kind"] in NAMESPACED:
                continue
            try:
                await self.custom.delete_cluster_custom_object(
                    GROUP, VERSION, PLURALS[body["kind"]], body["metadata"]["name"]
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
async def objects(api_client: client.ApiClient) -> AsyncIterator[Objects]:
    o = Objects(api_client)
    try:
        yield o
    finally:
        await o.cleanup()


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message", exc.body))
    except (TypeError, ValueError):
        return str(exc.body)


async def _refusal(objects: Objects, case: Case, namespace: str) -> tuple[int, str]:
    suffix = uuid.uuid4().hex[:6]
    body = instantiate(case.body, suffix, namespace)
    if case.is_update:
        await objects.create(body)
        current = await objects.get(body)
        if case.old_status is not None:
            current["status"] = instantiate(case.old_status, suffix, namespace)
            current = await objects.replace(current, status=True)
        assert case.change is not None
        case.change(current)
        body = current
    with pytest.raises(ApiException) as err:
        if case.is_update:
            await objects.replace(body)
        else:
            await objects.create(body)
    return err.value.status, _message(err.value)


# --- the table ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in CASES])
async def test_bad_input_is_refused_naming_the_field(
    kqueue_webhooks: ThreadedWebhookServer, objects: Objects, namespace: str, case: Case
) -> None:
    status, message = await _refusal(objects, case, namespace)
    MESSAGES[case.id] = {"status": status, "message": message}
    assert status in (400, 422), f"{case.id}: HTTP {status}: {message}"
    assert case.path in message, f"{case.id}: {case.path!r} not named in: {message}"
    by_webhook = WEBHOOK_MARK in message
    assert by_webhook == (case.layer is Layer.WEBHOOK), (
        f"{case.id}: expected {case.layer.value} to refuse it, got: {message}"
    )
    assert case.message in message, f"{case.id}: {case.message!r} not in: {message}"
