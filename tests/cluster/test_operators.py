"""The real operators (built from their Go modules) reconcile their objects on the local cluster.

No kqueue here: these prove the components kqueue's integrations are tested against. Each
object is reconciled by its operator into the children it really makes (Jobs, JobSets, pods),
the pods are bound by kube-scheduler to kwok nodes and run to completion where kwok is told to.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kqueue.localcluster import operators
from kqueue.localcluster.cluster import ClusterStartError, LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION, DEFAULT_NODES

pytestmark = pytest.mark.cluster

T = TypeVar("T")

KWOK_NODES = {n.name for n in DEFAULT_NODES}
PAUSE = "registry.k8s.io/pause:3.10"


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 90, what: str = "condition"
) -> T:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = await probe()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.3)


def true_condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def status_message(exc: ApiException) -> str:
    """The message of the Status the API server answered with."""
    return str(json.loads(exc.body or "{}").get("message", ""))


def owned_by(obj: Any, kind: str, name: str) -> bool:
    return any(
        ref.kind == kind and ref.name == name and ref.controller
        for ref in obj.metadata.owner_references or []
    )


async def running_pods(
    core: client.CoreV1Api, namespace: str, selector: str, count: int
) -> list[Any] | None:
    pods = (await core.list_namespaced_pod(namespace, label_selector=selector)).items
    ok = len(pods) == count and all(
        p.status.phase in ("Running", "Succeeded") and p.spec.node_name in KWOK_NODES for p in pods
    )
    return list(pods) if ok else None


def pod_template(name: str, *, complete_after: str | None = None) -> dict[str, Any]:
    meta = {"annotations": {COMPLETE_AFTER_ANNOTATION: complete_after}} if complete_after else {}
    return {
        "metadata": meta,
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": name, "image": PAUSE, "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


def replicated_job(name: str, replicas: int, pods: int) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 0,
                "template": pod_template(name, complete_after="3s"),
            }
        },
    }


async def test_jobset_reconciles_replicated_jobs_into_jobs_and_pods(
    jobset_operator: str, api_client: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {
            "replicatedJobs": [replicated_job("leader", 1, 1), replicated_job("workers", 2, 2)]
        },
    }
    await custom.create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", jobset
    )

    # One Job per replica of each replicatedJob, named <jobset>-<replicatedJob>-<index>.
    async def jobs() -> list[Any] | None:
        items = (
            await batch.list_namespaced_job(
                namespace, label_selector="jobset.sigs.k8s.io/jobset-name=js"
            )
        ).items
        return list(items) if len(items) == 3 else None

    made = await eventually(jobs, what="3 Jobs of JobSet js")
    assert sorted(j.metadata.name for j in made) == ["js-leader-0", "js-workers-0", "js-workers-1"]
    assert all(owned_by(j, "JobSet", "js") for j in made)
    assert {j.metadata.name: j.spec.parallelism for j in made} == {
        "js-leader-0": 1,
        "js-workers-0": 2,
        "js-workers-1": 2,
    }

    # 1 + 2 x 2 pods, bound by kube-scheduler to kwok nodes; kwok completes them after 3s.
    pods = await eventually(
        lambda: running_pods(core, namespace, "jobset.sigs.k8s.io/jobset-name=js", 5),
        what="5 JobSet pods on kwok nodes",
    )
    assert {p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] for p in pods} == {
        "leader",
        "workers",
    }

    async def completed() -> dict[str, Any] | None:
        obj = await custom.get_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", "js"
        )
        return obj if true_condition(obj, "Completed") else None

    done = await eventually(completed, what="JobSet js Completed")
    by_name = {r["name"]: r for r in done["status"]["replicatedJobsStatus"]}
    assert by_name["leader"]["succeeded"] == 1
    assert by_name["workers"]["succeeded"] == 2


async def test_jobset_webhook_on_loopback_rejects_invalid_jobset(
    jobset_operator: str, api_client: client.ApiClient, namespace: str
) -> None:
    """JobSet's own validating webhook answers from 127.0.0.1."""
    custom = client.CustomObjectsApi(api_client)
    # The schema accepts this; only JobSet's webhook knows "missing" is no replicatedJob.
    bad = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "bad"},
        "spec": {
            "replicatedJobs": [replicated_job("a", 1, 1)],
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["missing"]},
        },
    }
    with pytest.raises(ApiException) as err:
        await custom.create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", bad
        )
    message = status_message(err.value)
    assert err.value.status == 422
    assert 'admission webhook "vjobset.kb.io" denied' in message, message
    assert "replicatedJob name 'missing'" in message, message


def torch_runtime() -> dict[str, Any]:
    """The torch-distributed ClusterTrainingRuntime shipped in Trainer's module."""
    docs = operators.module_documents("trainer", "manifests/base/runtimes/torch_distributed.yaml")
    (runtime,) = [d for d in docs if d.get("kind") == "ClusterTrainingRuntime"]
    return copy.deepcopy(runtime)


async def test_trainjob_reconciles_into_jobset_jobs_and_pods(
    trainer_operator: str,
    cluster: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    custom = client.CustomObjectsApi(api_client)
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    runtime = torch_runtime()
    try:
        await custom.create_cluster_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", runtime
        )
    except ApiException as exc:
        if exc.status != 409:  # another test of this session installed it
            raise
    node_patch = {
        "name": "node",
        "template": {
            "spec": {"template": {"metadata": {"annotations": {COMPLETE_AFTER_ANNOTATION: "3s"}}}}
        },
    }
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj"},
        "spec": {
            "runtimeRef": {"name": runtime["metadata"]["name"]},
            "trainer": {"numNodes": 2, "image": PAUSE},
            "runtimePatches": [
                {
                    "manager": "kqueue.io/tests",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node_patch]}}},
                }
            ],
        },
    }
    await custom.create_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", trainjob
    )

    # Trainer makes a JobSet named after the TrainJob, owned by it ...
    async def jobset() -> dict[str, Any] | None:
        try:
            return dict(
                await custom.get_namespaced_custom_object(
                    "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", "tj"
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    js = await eventually(jobset, what="JobSet tj made by Trainer")
    owners = js["metadata"].get("ownerReferences") or []
    assert [(o["kind"], o["name"]) for o in owners] == [("TrainJob", "tj")]
    assert [r["name"] for r in js["spec"]["replicatedJobs"]] == ["node"]

    # ... which the JobSet operator turns into a Job of 2 pods (numNodes) on kwok nodes.
    async def node_job() -> Any:
        try:
            return await batch.read_namespaced_job("tj-node-0", namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    job = await eventually(node_job, what="Job tj-node-0")
    assert owned_by(job, "JobSet", "tj")
    assert job.spec.parallelism == 2
    await eventually(
        lambda: running_pods(core, namespace, "jobset.sigs.k8s.io/jobset-name=tj", 2),
        what="2 TrainJob pods on kwok nodes",
    )

    async def complete() -> dict[str, Any] | None:
        obj = await custom.get_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", "tj"
        )
        return obj if true_condition(obj, "Complete") else None

    await eventually(complete, what="TrainJob tj Complete")


async def test_trainjob_naming_a_missing_runtime_is_refused(
    trainer_operator: str, api_client: client.ApiClient, namespace: str
) -> None:
    """Trainer's validating webhook, served on 127.0.0.1, refuses an unknown runtimeRef."""
    custom = client.CustomObjectsApi(api_client)
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "orphan"},
        "spec": {"runtimeRef": {"name": "no-such-runtime"}},
    }
    with pytest.raises(ApiException) as err:
        await custom.create_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", trainjob
        )
    message = status_message(err.value)
    assert err.value.status == 403
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied' in message, message
    assert 'ClusterTrainingRuntime.trainer.kubeflow.org "no-such-runtime" not found' in message


def mpi_replica(name: str, replicas: int, *, complete_after: str | None) -> dict[str, Any]:
    template = pod_template(name, complete_after=complete_after)
    template["spec"].pop("restartPolicy")
    return {"replicas": replicas, "restartPolicy": "Never", "template": template}


async def test_mpijob_reconciles_into_launcher_job_and_worker_pods(
    mpi_operator: str, api_client: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    mpijob = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": mpi_replica("launcher", 1, complete_after="3s"),
                "Worker": mpi_replica("worker", 2, complete_after=None),
            },
        },
    }
    await custom.create_namespaced_custom_object(
        "kubeflow.org", "v2beta1", namespace, "mpijobs", mpijob
    )

    # Workers are pods owned by the MPIJob; the launcher is a Job; the hostfile a ConfigMap.
    workers = await eventually(
        lambda: running_pods(
            core,
            namespace,
            "training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=worker",
            2,
        ),
        what="2 MPIJob worker pods on kwok nodes",
    )
    assert sorted(p.metadata.name for p in workers) == ["pi-worker-0", "pi-worker-1"]
    assert all(owned_by(p, "MPIJob", "pi") for p in workers)

    async def launcher() -> Any:
        try:
            return await batch.read_namespaced_job("pi-launcher", namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    job = await eventually(launcher, what="launcher Job pi-launcher")
    assert owned_by(job, "MPIJob", "pi")
    hostfile = await core.read_namespaced_config_map("pi-config", namespace)
    assert "pi-worker-0" in hostfile.data["hostfile"]
    assert "pi-worker-1" in hostfile.data["hostfile"]

    # The launcher completes after 3s; the MPIJob succeeds and its running workers are cleaned.
    async def succeeded() -> dict[str, Any] | None:
        obj = await custom.get_namespaced_custom_object(
            "kubeflow.org", "v2beta1", namespace, "mpijobs", "pi"
        )
        return obj if true_condition(obj, "Succeeded") else None

    await eventually(succeeded, what="MPIJob pi Succeeded")

    async def workers_cleaned() -> bool:
        pods = await core.list_namespaced_pod(
            namespace, label_selector="training.kubeflow.org/job-role=worker"
        )
        return not [p for p in pods.items if p.metadata.deletion_timestamp is None]

    await eventually(workers_cleaned, what="worker pods cleaned up (cleanPodPolicy Running)")


async def test_raycluster_reconciles_into_head_and_worker_pods(
    kuberay_operator: str, api_client: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)

    def group_template(name: str) -> dict[str, Any]:
        template = pod_template(name)
        template["spec"].pop("restartPolicy")
        return template

    raycluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc"},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": group_template("ray-head")},
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": 2,
                    "minReplicas": 2,
                    "maxReplicas": 2,
                    "rayStartParams": {},
                    "template": group_template("ray-worker"),
                }
            ],
        },
    }
    await custom.create_namespaced_custom_object(
        "ray.io", "v1", namespace, "rayclusters", raycluster
    )

    pods = await eventually(
        lambda: running_pods(core, namespace, "ray.io/cluster=rc", 3),
        what="RayCluster head + 2 worker pods on kwok nodes",
    )
    roles = sorted(p.metadata.labels["ray.io/node-type"] for p in pods)
    assert roles == ["head", "worker", "worker"]
    assert all(owned_by(p, "RayCluster", "rc") for p in pods)

    async def ready() -> dict[str, Any] | None:
        obj = await custom.get_namespaced_custom_object(
            "ray.io", "v1", namespace, "rayclusters", "rc"
        )
        return obj if true_condition(obj, "RayClusterProvisioned") else None

    await eventually(ready, what="RayCluster rc RayClusterProvisioned")


async def test_rayjob_reconciles_into_raycluster_pods_and_submitter_job(
    kuberay_operator: str, api_client: client.ApiClient, namespace: str
) -> None:
    """As far as a cluster without a Ray dashboard goes: the job stays Running after that."""
    custom = client.CustomObjectsApi(api_client)
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)

    def group_template(name: str) -> dict[str, Any]:
        template = pod_template(name)
        template["spec"].pop("restartPolicy")
        return template

    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj"},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "K8sJobMode",
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": group_template("ray-head")},
                "workerGroupSpecs": [
                    {
                        "groupName": "w",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": 1,
                        "rayStartParams": {},
                        "template": group_template("ray-worker"),
                    }
                ],
            },
        },
    }
    await custom.create_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", rayjob)

    async def cluster_name() -> str | None:
        obj = await custom.get_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", "rj")
        return str((obj.get("status") or {}).get("rayClusterName") or "") or None

    name = await eventually(cluster_name, what="RayJob rj's RayCluster")
    ray_cluster = await custom.get_namespaced_custom_object(
        "ray.io", "v1", namespace, "rayclusters", name
    )
    owners = ray_cluster["metadata"].get("ownerReferences") or []
    assert [(o["kind"], o["name"]) for o in owners] == [("RayJob", "rj")]
    await eventually(
        lambda: running_pods(core, namespace, f"ray.io/cluster={name}", 2),
        what="RayJob head + worker pods on kwok nodes",
    )

    async def submitter() -> Any:
        try:
            return await batch.read_namespaced_job("rj", namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    job = await eventually(submitter, what="RayJob submitter Job rj")
    assert owned_by(job, "RayJob", "rj")

    # KubeRay moves the RayJob from Initializing to Running once the submitter exists; its
    # status update may come a moment after the Job.
    async def running() -> dict[str, Any] | None:
        obj = await custom.get_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", "rj")
        return obj if (obj.get("status") or {}).get("jobDeploymentStatus") == "Running" else None

    await eventually(running, what="RayJob rj Running")


async def test_leaderworkerset_reconciles_into_statefulsets_and_pods(
    lws_operator: str, api_client: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    apps = client.AppsV1Api(api_client)
    core = client.CoreV1Api(api_client)
    template = pod_template("w")
    template["spec"].pop("restartPolicy")
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": template}},
    }
    await custom.create_namespaced_custom_object(
        "leaderworkerset.x-k8s.io", "v1", namespace, "leaderworkersets", lws
    )

    # 2 groups of 3: a leader StatefulSet of 2 pods, and per leader a worker StatefulSet of 2.
    pods = await eventually(
        lambda: running_pods(core, namespace, "leaderworkerset.sigs.k8s.io/name=lws", 6),
        what="6 LeaderWorkerSet pods on kwok nodes",
    )
    assert sorted(p.metadata.name for p in pods) == [
        "lws-0",
        "lws-0-1",
        "lws-0-2",
        "lws-1",
        "lws-1-1",
        "lws-1-2",
    ]
    sets = (await apps.list_namespaced_stateful_set(namespace)).items
    assert sorted(s.metadata.name for s in sets) == ["lws", "lws-0", "lws-1"]

    async def available() -> dict[str, Any] | None:
        obj = await custom.get_namespaced_custom_object(
            "leaderworkerset.x-k8s.io", "v1", namespace, "leaderworkersets", "lws"
        )
        return obj if true_condition(obj, "Available") else None

    await eventually(available, what="LeaderWorkerSet lws Available")


def test_an_operator_that_exits_fails_its_start_with_its_log(
    jobset_operator: str, cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start failure names the operator and module version and shows the operator's log."""
    jobset = operators.get("jobset")

    def bad_flags(ctx: operators.RunContext) -> tuple[list[str], dict[str, str]]:
        args, env = jobset.command(ctx)
        return [*args, "--no-such-flag"], env

    broken = dataclasses.replace(jobset, name="jobset-broken", webhooks=None, command=bad_flags)
    monkeypatch.setitem(operators.OPERATORS, broken.name, broken)
    with pytest.raises(ClusterStartError) as err:
        cluster.start_operator(broken.name)
    message = str(err.value)
    assert "operator jobset-broken (sigs.k8s.io/jobset@v0.12.0)" in message
    assert "exited with code 2" in message
    assert "flag provided but not defined: -no-such-flag" in message
    assert not cluster.operator_running(broken.name)
    assert cluster.operator_running("jobset"), "the real JobSet operator is untouched"
