"""DRA quota on the real control plane (docs/dra.md): the test acts as a DRA driver and
publishes a DeviceClass and ResourceSlices (4 devices) for two kwok nodes; kube-scheduler
allocates the devices. A Job whose pods take 2 devices each through a ResourceClaimTemplate is
admitted against quota mapped to ``nvidia.com/gpu`` and its pods bind; a second one waits with
``WaitingForQuota`` naming the mapped resource. Then the same through an extended resource
(Kubernetes' DRAExtendedResource, Kueue's KueueDRAIntegrationExtendedResource): a DeviceClass
serving ``example.com/gpu``, mapped to ``nvidia.com/gpu``; containers request
``example.com/gpu: 2`` with no claim, kqueue counts them as ``nvidia.com/gpu`` and
kube-scheduler allocates them from the ResourceSlices."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    condition,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    pending_reason,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.gang_e2e.fragment import add_node

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.example.com"
EXTENDED_CLASS = "gpu-extended.example.com"
EXTENDED = "example.com/gpu"
GPU = "nvidia.com/gpu"
DEVICES_PER_NODE = 4
RESOURCE = "/apis/resource.k8s.io/v1"


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    mappings = {"deviceClassMappings": [
        {"name": GPU, "deviceClassNames": [DEVICE_CLASS, EXTENDED_CLASS]}]}
    yield from configured_kqueue(
        cluster, Path(tmp_path_factory.mktemp("kqueue-dra")), {"resources": mappings}
    )


def _create(cluster: LocalCluster, path: str, obj: Obj) -> None:
    status, body = cluster.request("POST", path, obj)
    assert status == 201, f"creating {obj['kind']} {obj['metadata']['name']}: {status} {body}"


async def admitted_usage(api: Api, namespace: str, name: str) -> tuple[Obj, dict[str, str]]:
    """The Workload of Job ``name`` once admitted, and its admission's resource usage."""
    try:
        wl = await api.wait_workload(
            namespace, name, lambda w: is_true(w, c.ADMITTED), what="admitted"
        )
    except BaseException:
        pending = await api.workload_of(namespace, name)
        raise AssertionError(f"not admitted: {(pending or {}).get('status')}") from None
    usage = {
        r: q
        for ps in wl["status"]["admission"]["podSetAssignments"]
        for r, q in (ps.get("resourceUsage") or {}).items()
    }
    return wl, usage


async def resource_claims(cluster: LocalCluster, namespace: str) -> tuple[int, list[Obj]]:
    """The namespace's ResourceClaims (the HTTP status and the items)."""
    status, claims = await asyncio.to_thread(
        cluster.request, "GET", f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    )
    return status, list((claims or {}).get("items") or [])


def publish_devices(
    cluster: LocalCluster, nodes: list[str], device_class: str = DEVICE_CLASS, **spec: str
) -> None:
    """What a DRA driver's kubelet plugin would publish: a DeviceClass selecting the driver's
    devices (with ``spec``: the extended resource it serves), and one ResourceSlice per node."""
    _create(cluster, f"{RESOURCE}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": device_class},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}], **spec},
    })
    for node in nodes:
        _create(cluster, f"{RESOURCE}/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {
                "driver": DRIVER, "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}"} for i in range(DEVICES_PER_NODE)],
            },
        })


def unpublish_devices(
    cluster: LocalCluster, nodes: list[str], device_class: str = DEVICE_CLASS
) -> None:
    for node in nodes:
        cluster.request("DELETE", f"{RESOURCE}/resourceslices/{node}-{DRIVER}")
        cluster.request("DELETE", f"/api/v1/nodes/{node}")
    cluster.request("DELETE", f"{RESOURCE}/deviceclasses/{device_class}")


def gpu_job(name: str, namespace: str, count: int) -> Obj:
    obj = job(name, namespace, "q", count=count, cpu="100m")
    pod = obj["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]
    pod["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return obj


def extended_job(name: str, namespace: str, count: int) -> Obj:
    """Each pod asks for 2 devices as an extended resource: no claim of its own."""
    obj = job(name, namespace, "q", count=count, cpu="100m")
    resources = obj["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources.setdefault("requests", {})[EXTENDED] = "2"
    resources.setdefault("limits", {})[EXTENDED] = "2"
    return obj


async def _binding_state(api: Api, cluster: LocalCluster, namespace: str) -> str:
    """What kube-scheduler made of the pods and their claims, for the failure message."""
    pods = [
        {
            "name": p["metadata"]["name"],
            "nodeName": p["spec"].get("nodeName"),
            "gates": p["spec"].get("schedulingGates"),
            "scheduled": condition(p, "PodScheduled"),
            "claims": (p.get("status") or {}).get("resourceClaimStatuses"),
        }
        for p in await api.pods_of(namespace, "first")
    ]
    _, claims = await asyncio.to_thread(
        cluster.request, "GET", f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    )
    found = [
        (cl["metadata"]["name"], (cl.get("status") or {}).get("allocation"))
        for cl in (claims or {}).get("items", [])
    ]
    return f"pods: {pods}; ResourceClaims: {found}"


async def test_dra_gpu_claims_take_mapped_quota_and_bind(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    instance_type = unique("dra")
    nodes = [f"{instance_type}-a", f"{instance_type}-b"]
    for node in nodes:
        await add_node(cluster, instance_type, node, "4")
    await asyncio.to_thread(publish_devices, cluster, nodes)
    try:
        await _run(api, cluster, namespace, instance_type)
    finally:
        await asyncio.to_thread(unpublish_devices, cluster, nodes)


async def test_dra_extended_resource_takes_mapped_quota_and_binds(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    instance_type = unique("dra-er")
    nodes = [f"{instance_type}-a", f"{instance_type}-b"]
    for node in nodes:
        await add_node(cluster, instance_type, node, "4")
    await asyncio.to_thread(
        publish_devices, cluster, nodes, EXTENDED_CLASS, extendedResourceName=EXTENDED
    )
    try:
        await _run(api, cluster, namespace, instance_type, extended_job)
    finally:
        await asyncio.to_thread(unpublish_devices, cluster, nodes, EXTENDED_CLASS)


async def _run(
    api: Api, cluster: LocalCluster, namespace: str, instance_type: str, make_job: Any = gpu_job
) -> None:
    fl, cq = unique("dra"), unique("cq")
    await api.apply(flavor(fl, instance_type))
    await api.apply({
        "apiVersion": c.API_VERSION, "kind": "ClusterQueue",
        "metadata": {"name": cq},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory", GPU],
            "flavors": [{"name": fl, "resources": [
                {"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "8Gi"},
                {"name": GPU, "nominalQuota": "4"}]}],
        }]},
    })
    await api.apply(local_queue("q", namespace, cq))
    _create(cluster, f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-gpus", "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": 2}}]}}},
    })

    # 2 pods x 2 devices: the whole quota of 4.
    await api.apply(make_job("first", namespace, 2))
    wl, usage = await admitted_usage(api, namespace, "first")
    assert usage.get(GPU) == "4", wl["status"]["admission"]

    async def bound_with_devices() -> list[Obj] | None:
        pods = [p for p in await api.pods_of(namespace, "first") if p["spec"].get("nodeName")]
        if len(pods) != 2:
            return None
        status, claims = await resource_claims(cluster, namespace)
        allocated = [cl for cl in claims if (cl.get("status") or {}).get("allocation")]
        return pods if status == 200 and len(allocated) == 2 else None

    try:
        pods = await eventually(
            bound_with_devices, within=60,
            what="both pods of Job first bound, their ResourceClaims allocated by kube-scheduler",
        )
    except BaseException:
        raise AssertionError(await _binding_state(api, cluster, namespace)) from None
    assert {p["spec"]["nodeName"] for p in pods} <= {f"{instance_type}-a", f"{instance_type}-b"}

    # 1 pod x 2 more devices: over the quota.
    await api.apply(make_job("second", namespace, 1))
    wl = await api.wait_workload(
        namespace, "second", lambda w: pending_reason(w) == c.WAITING_FOR_QUOTA,
        what="pending, WaitingForQuota",
    )
    message = (condition(wl, c.QUOTA_RESERVED) or {}).get("message", "")
    assert GPU in message, message
