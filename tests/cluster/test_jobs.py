"""Jobs run through the real controller-manager and scheduler onto kwok nodes (no kqueue)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import client

from kqueue.localcluster.nodes import (
    COMPLETE_AFTER_ANNOTATION,
    DEFAULT_NODES,
    FAIL_AFTER_ANNOTATION,
    GPU_RESOURCE,
    INSTANCE_TYPE_LABEL,
)

pytestmark = pytest.mark.cluster

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 60, what: str = "condition"
) -> T:
    """Poll until probe() returns something truthy; fail with `what` after timeout."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = await probe()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.2)


def job(
    name: str,
    *,
    count: int = 1,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[client.V1Toleration] | None = None,
    requests: dict[str, str] | None = None,
    backoff_limit: int = 6,
) -> client.V1Job:
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(
            parallelism=count,
            completions=count,
            backoff_limit=backoff_limit,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(annotations=annotations),
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    node_selector=node_selector,
                    tolerations=tolerations,
                    containers=[
                        client.V1Container(
                            name="main",
                            image="registry.k8s.io/pause:3.10",
                            resources=client.V1ResourceRequirements(
                                requests=requests or {"cpu": "1"},
                                limits={
                                    k: v for k, v in (requests or {}).items() if k == GPU_RESOURCE
                                }
                                or None,
                            ),
                        )
                    ],
                ),
            ),
        ),
    )


async def job_pods(core: client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    pods = await core.list_namespaced_pod(namespace, label_selector=f"job-name={name}")
    return list(pods.items)


def condition(obj: Any, kind: str) -> Any:
    for cond in obj.status.conditions or []:
        if cond.type == kind and cond.status == "True":
            return cond
    return None


async def test_job_runs_to_completion_on_kwok_nodes(
    api_client: client.ApiClient, namespace: str
) -> None:
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    await batch.create_namespaced_job(
        namespace,
        job(
            "plain",
            count=3,
            annotations={COMPLETE_AFTER_ANNOTATION: "2s"},
            node_selector={INSTANCE_TYPE_LABEL: "on-demand"},
        ),
    )

    # Pods are created by the Job controller, bound by kube-scheduler and run by kwok.
    async def running() -> list[Any] | None:
        pods = await job_pods(core, namespace, "plain")
        ok = len(pods) == 3 and all(p.status.phase in ("Running", "Succeeded") for p in pods)
        return pods if ok else None

    pods = await eventually(running, what="3 job pods running")
    on_demand = {
        n.name for n in DEFAULT_NODES if n.labels.get(INSTANCE_TYPE_LABEL) == "on-demand"
    }
    assert {p.spec.node_name for p in pods} <= on_demand

    async def complete() -> Any:
        j = await batch.read_namespaced_job_status("plain", namespace)
        return j if condition(j, "Complete") else None

    done = await eventually(complete, what="job Complete")
    assert done.status.succeeded == 3
    assert not done.status.failed
    pods = await job_pods(core, namespace, "plain")
    assert [p.status.phase for p in pods] == ["Succeeded"] * 3
    # the Job controller's tracking finalizer is gone once the pods are accounted for
    assert all(not p.metadata.finalizers for p in pods)


async def test_pods_without_completion_annotation_keep_running(
    api_client: client.ApiClient, namespace: str
) -> None:
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    await batch.create_namespaced_job(namespace, job("forever"))

    async def ready() -> Any:
        pods = await job_pods(core, namespace, "forever")
        return pods if pods and condition(pods[0], "Ready") else None

    pods = await eventually(ready, what="pod Ready")
    assert pods[0].status.pod_ip
    await asyncio.sleep(3)
    pod = await core.read_namespaced_pod(pods[0].metadata.name, namespace)
    assert pod.status.phase == "Running"

    # Suspending the Job deletes its pod: kwok terminates it as a kubelet would and the pod
    # object goes away once the Job controller has dropped its finalizer.
    await batch.patch_namespaced_job("forever", namespace, {"spec": {"suspend": True}})

    async def gone() -> bool:
        return not await job_pods(core, namespace, "forever")

    await eventually(gone, what="suspended job's pod deleted")


async def test_failing_pod_fails_the_job(api_client: client.ApiClient, namespace: str) -> None:
    batch = client.BatchV1Api(api_client)
    await batch.create_namespaced_job(
        namespace, job("fails", annotations={FAIL_AFTER_ANNOTATION: "1s"}, backoff_limit=0)
    )

    async def failed() -> Any:
        j = await batch.read_namespaced_job_status("fails", namespace)
        return j if condition(j, "Failed") else None

    j = await eventually(failed, what="job Failed")
    assert condition(j, "Failed").reason == "BackoffLimitExceeded"


async def test_scheduler_honours_taints_and_extended_resources(
    api_client: client.ApiClient, namespace: str
) -> None:
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    spot = {INSTANCE_TYPE_LABEL: "spot"}
    toleration = client.V1Toleration(
        key="spot", operator="Equal", value="true", effect="NoSchedule"
    )
    await batch.create_namespaced_job(namespace, job("untolerated", node_selector=spot))
    await batch.create_namespaced_job(
        namespace, job("tolerated", node_selector=spot, tolerations=[toleration])
    )
    await batch.create_namespaced_job(
        namespace, job("gpu", requests={"cpu": "1", GPU_RESOURCE: "2"})
    )

    async def placed(name: str) -> Any:
        pods = await job_pods(core, namespace, name)
        return pods[0] if pods and pods[0].status.phase == "Running" else None

    tolerated = await eventually(lambda: placed("tolerated"), what="tolerated pod running")
    assert tolerated.spec.node_name.startswith("kwok-spot-")
    gpu = await eventually(lambda: placed("gpu"), what="gpu pod running")
    assert gpu.spec.node_name == "kwok-gpu-1"

    async def unschedulable() -> Any:
        pods = await job_pods(core, namespace, "untolerated")
        if not pods:
            return None
        for cond in pods[0].status.conditions or []:
            if cond.type == "PodScheduled" and cond.reason == "Unschedulable":
                return cond
        return None

    cond = await eventually(unschedulable, what="untolerated pod marked Unschedulable")
    assert "untolerated taint" in cond.message
