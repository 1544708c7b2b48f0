"""MultiKueue's managedBy defaulting in the job webhooks (kqueue/controller/webhooks/multikueue.py),
through the handlers :func:`kqueue.controller.webhooks.register` installs: Kueue's webhook
TestDefault cases for managedBy (pkg/controller/jobs/job/job_webhook_test.go,
pkg/controller/jobs/jobset/jobset_webhook_test.go) by name, and kqueue's own."""

from __future__ import annotations

import asyncio
import base64
import json
from functools import partial
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kqueue.api.config import Configuration
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1 import parse_object
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME
from kqueue.controller.informer import Store
from kqueue.controller.manager import Manager
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import ADMISSION_CHECKS, CLUSTER_QUEUES, LOCAL_QUEUES
from kqueue.controller.webhook_server import AdmissionRequest, Handler
from kqueue.controller.webhook_server.server import ADMISSION_API_VERSION
from kqueue.controller.webhooks import register
from kqueue.controller.webhooks.multikueue import defaulted_kind, uses_multikueue
from tests.controller.fake_apiserver import FakeCluster

Obj = dict[str, Any]
MK = CONTROLLER_NAME
JOB_PATH = "/mutate-batch-v1-job"
JOBSET_PATH = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
DEPLOYMENT_PATH = "/mutate-apps-v1-deployment"


class _Server:
    def __init__(self) -> None:
        self.mutating: dict[str, Handler] = {}

    def add_mutating(self, path: str, handler: Handler) -> None:
        self.mutating[path] = handler

    def add_validating(self, path: str, handler: Handler) -> None:
        pass


def _docs(
    *, queue: bool = True, cq_checks: tuple[str, ...] | None = ("admission-check",),
    check_controller: str | None = MK,
) -> list[Obj]:
    """Kueue's fixtures: LocalQueue default/local-queue -> ClusterQueue cluster-queue with
    AdmissionChecks(cq_checks) (None: no cluster-queue), AdmissionCheck admission-check of
    ``check_controller`` (None: no such check)."""
    out: list[Obj] = []
    if queue:
        out.append({"kind": "LocalQueue",
                    "metadata": {"name": "local-queue", "namespace": "default"},
                    "spec": {"clusterQueue": "cluster-queue"}})
    if cq_checks is not None:
        spec: Obj = {"namespaceSelector": {}, "resourceGroups": []}
        if cq_checks:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in cq_checks]}
        out.append({"kind": "ClusterQueue", "metadata": {"name": "cluster-queue"}, "spec": spec})
    if check_controller is not None:
        out.append({"kind": "AdmissionCheck", "metadata": {"name": "admission-check"},
                    "spec": {"controllerName": check_controller}})
    return [{"apiVersion": "kqueue.io/v1alpha1", **d} for d in out]


def _stores(**kw: Any) -> dict[str, Any]:
    stores: dict[str, Store[Any]] = {
        "LocalQueue": Store(), "ClusterQueue": Store(), "AdmissionCheck": Store()
    }
    for doc in _docs(**kw):
        meta = doc["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
        stores[doc["kind"]]._put(key, parse_object(doc), "1")
    return {"local_queues": stores["LocalQueue"], "cluster_queues": stores["ClusterQueue"],
            "checks": stores["AdmissionCheck"]}


def _handlers(stores: dict[str, Any]) -> dict[str, Handler]:
    server = _Server()
    config = Configuration.model_validate({"integrations": {"frameworks": [
        "batch/job", "jobset.x-k8s.io/jobset", "deployment", "pod"]}})
    register(server, config, multikueue_queue=partial(uses_multikueue, **stores))  # type: ignore[arg-type]
    return server.mutating


def _obj(api_version: str, kind: str, queue: str | None, managed_by: str | None) -> Obj:
    labels = {c.QUEUE_NAME_LABEL: queue} if queue is not None else {}
    spec: Obj = {}
    if kind == "Job":
        spec = {"template": {"spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "c", "image": "i"}]}}}
    elif kind == "JobSet":
        spec = {"replicatedJobs": [{"name": "r", "replicas": 1, "template": {"spec": {
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}}]}
    if managed_by is not None:
        spec["managedBy"] = managed_by
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "job", "namespace": "default", "labels": labels}, "spec": spec}


async def _mutated(handler: Handler, obj: Obj, operation: str = "CREATE") -> Obj:
    group, _, version = obj["apiVersion"].rpartition("/")
    verdict = await handler(AdmissionRequest(
        uid="u", operation=operation,  # type: ignore[arg-type]
        kind={"group": group, "version": version, "kind": obj["kind"]},
        resource={"group": group, "version": version, "resource": obj["kind"].lower() + "s"},
        namespace="default", name="job", object=obj,
        old_object=obj if operation == "UPDATE" else None,
    ))
    assert verdict.allowed, verdict
    return verdict.patched if verdict.patched is not None else obj


JOB = ("batch/v1", "Job", JOB_PATH)
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet", JOBSET_PATH)


@pytest.mark.parametrize(
    ("kind", "queue", "managed_by", "stores", "want"),
    [
        # job_webhook_test.go TestDefault.
        pytest.param(JOB, "local-queue", None, {}, MK,
                     id="managed by is defaulted: queue label was set"),
        pytest.param(JOB, "local-queue", "example.com/foo", {}, "example.com/foo",
                     id="no change in managed by: user specified managed by"),
        pytest.param(JOB, "invalid-local-queue", None, {}, None, id="invalid queue name"),
        # Kueue's Job CanDefaultManagedBy: the Job controller's own name is the default.
        pytest.param(JOB, "local-queue", "kubernetes.io/job-controller", {}, MK,
                     id="CanDefaultManagedBy: batchv1.JobControllerName is replaced"),
        # jobset_webhook_test.go TestDefault.
        pytest.param(JOBSET, "local-queue", "jobset.sigs.k8s.io/jobset-controller", {}, MK,
                     id="TestDefault_JobSetManagedBy_jobsetapi.JobSetControllerName"),
        pytest.param(JOBSET, "local-queue", None, {}, MK, id="TestDefault_WithQueueLabel"),
        pytest.param(JOBSET, None, None, {}, None, id="TestDefault_WithoutQueueLabel"),
        pytest.param(JOBSET, "invalid-queue", None, {}, None, id="TestDefault_InvalidQueueName"),
        pytest.param(JOBSET, "non-existent-queue", None, {}, None,
                     id="TestDefault_QueueNotFound"),
        pytest.param(JOBSET, "local-queue", None,
                     {"cq_checks": ("non-existent-admission-check",)}, None,
                     id="TestDefault_AdmissionCheckNotFound"),
        pytest.param(JOBSET, "local-queue", "example.com/foo", {}, "example.com/foo",
                     id="TestDefault_UserSpecifiedManagedBy"),
        pytest.param(JOBSET, "local-queue", None, {"cq_checks": ()}, None,
                     id="TestDefault_ClusterQueueWithoutAdmissionCheck"),
        # kqueue: a ClusterQueue whose check is another controller's.
        pytest.param(JOB, "local-queue", None,
                     {"check_controller": "kqueue.io/provisioning-request"}, None,
                     id="kqueue: the ClusterQueue's check is not MultiKueue's"),
        pytest.param(JOB, "local-queue", None, {"queue": True, "cq_checks": None}, None,
                     id="kqueue: the LocalQueue's ClusterQueue does not exist"),
    ],
)
async def test_default_managed_by(
    kind: tuple[str, str, str], queue: str | None, managed_by: str | None,
    stores: dict[str, Any], want: str | None,
) -> None:
    api_version, kind_name, path = kind
    handler = _handlers(_stores(**stores))[path]
    out = await _mutated(handler, _obj(api_version, kind_name, queue, managed_by))
    assert out["spec"].get("managedBy") == want


async def test_the_kinds_own_mutation_is_kept() -> None:
    handler = _handlers(_stores())[JOB_PATH]
    out = await _mutated(handler, _obj("batch/v1", "Job", "local-queue", None))
    # Queued as every Job (suspended by kqueue, pods gated), and for MultiKueue.
    assert out["spec"]["managedBy"] == MK
    assert out["spec"]["suspend"] is True
    assert out["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"


async def test_only_at_creation() -> None:
    # spec.managedBy is immutable once the object exists.
    handler = _handlers(_stores())[JOB_PATH]
    job = _obj("batch/v1", "Job", "local-queue", None)
    job["spec"]["suspend"] = True
    out = await _mutated(handler, job, operation="UPDATE")
    assert "managedBy" not in out["spec"]


async def test_a_kind_multikueue_cannot_dispatch_is_left_alone() -> None:
    # A Deployment has no managedBy and no adapter: its webhook is not wrapped.
    assert defaulted_kind("apps/v1", "Deployment") is None
    handler = _handlers(_stores())[DEPLOYMENT_PATH]
    deployment = _obj("apps/v1", "Deployment", "local-queue", None)
    deployment["spec"] = {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {
        "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    out = await _mutated(handler, deployment)
    assert "managedBy" not in out["spec"]


@pytest.mark.parametrize(
    ("api_version", "kind", "path", "value"),
    [
        pytest.param("batch/v1", "Job", ("spec", "managedBy"), MK, id="job-kqueue-value"),
        pytest.param("trainer.kubeflow.org/v1alpha1", "TrainJob", ("spec", "managedBy"),
                     "kueue.x-k8s.io/multikueue", id="trainjob-kueue-value"),
        pytest.param("kubeflow.org/v1", "PyTorchJob", ("spec", "runPolicy", "managedBy"),
                     "kueue.x-k8s.io/multikueue", id="pytorchjob-run-policy"),
    ],
)
def test_the_defaulted_value_and_place_are_the_adapters(
    api_version: str, kind: str, path: tuple[str, ...], value: str
) -> None:
    # Trainer, KubeRay, the MPI and training operators accept only Kueue's value, some under
    # spec.runPolicy: the webhook writes what the kind's adapter reads.
    field = defaulted_kind(api_version, kind)
    assert field is not None
    assert (field.path, field.multikueue) == (path, value)


async def test_the_manager_defaults_from_its_caches(cluster: FakeCluster) -> None:
    """The Manager's lookup reads its LocalQueue, ClusterQueue and AdmissionCheck informers."""
    m = Manager(cluster.api, Configuration.model_validate({
        "integrations": {"frameworks": ["batch/job"]}, "leaderElection": {"leaderElect": False},
    }), metrics=Metrics())
    resources = {"LocalQueue": LOCAL_QUEUES, "ClusterQueue": CLUSTER_QUEUES,
                 "AdmissionCheck": ADMISSION_CHECKS}
    for doc in _docs():
        await cluster.kube.create(
            resources[doc["kind"]], doc, namespace=doc["metadata"].get("namespace")
        )
    tasks = [asyncio.create_task(i.run()) for i in m.informers().values()]
    try:
        for informer in m.informers().values():
            await asyncio.wait_for(informer.wait_synced(), 5)
        review = {
            "apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
            "request": {
                "uid": "1", "operation": "CREATE",
                "kind": {"group": "batch", "version": "v1", "kind": "Job"},
                "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
                "namespace": "default", "name": "job",
                "object": _obj("batch/v1", "Job", "local-queue", None),
            },
        }
        async with TestClient(TestServer(m.webhook_server.app())) as client:
            response = await client.post(JOB_PATH, data=json.dumps(review))
            answer = (await response.json())["response"]
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    patch = json.loads(base64.b64decode(answer["patch"]))
    assert {"op": "add", "path": "/spec/managedBy", "value": MK} in patch
