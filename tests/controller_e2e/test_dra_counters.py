"""Partitionable devices on the real control plane (docs/dra.md): the test acts as a DRA driver
and publishes, for one kwok node, a GPU's shared memory counter (40Gi) and four 10Gi partitions
that consume it, plus the whole GPU (all 40Gi). kqueue is configured with Kueue's counter source
(``gpu.memory`` counts the ``memory`` counter). A Job of 2 pods, each claiming one 10Gi
partition, takes 20Gi of ``gpu.memory`` (its counters, not a device count) and is admitted
against a quota of 20Gi; kube-scheduler allocates the partitions and the pods bind. A second
Job waits with ``WaitingForQuota`` naming ``gpu.memory``."""

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
    job,
    local_queue,
    pending_reason,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_dra import RESOURCE, _create, admitted_usage, resource_claims
from tests.gang_e2e.fragment import add_node

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
DRIVER = "mig.example.com"
DEVICE_CLASS = "mig.example.com"
MEMORY = "gpu.memory"
PROFILE = f"device.attributes['{DRIVER}'].profile"


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    selector = {"cel": {"expression": f"device.driver == '{DRIVER}'"}}
    mappings = {"deviceClassMappings": [{
        "name": MEMORY, "deviceClassNames": [DEVICE_CLASS],
        "sources": [{"counter": {"name": "memory", "driver": DRIVER, "deviceSelector": selector}}],
    }]}
    yield from configured_kqueue(
        cluster, Path(tmp_path_factory.mktemp("kqueue-dra-counters")), {"resources": mappings}
    )


def _partition(name: str, profile: str, memory: str) -> Obj:
    return {
        "name": name,
        "attributes": {"profile": {"string": profile}},
        "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}],
    }


def publish_partitions(cluster: LocalCluster, node: str) -> None:
    """What a MIG-like driver publishes: the GPU's counter set in one slice, the devices that
    consume it in another, one pool of two slices (devices and shared counters are published
    apart, as Kubernetes requires)."""
    _create(cluster, f"{RESOURCE}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    })
    pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
    _create(cluster, f"{RESOURCE}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}-counters"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": pool,
                 "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]},
    })
    devices = [_partition(f"gpu-0-1g10gb-{i}", "1g.10gb", "10Gi") for i in range(4)]
    devices.append(_partition("gpu-0-whole", "whole", "40Gi"))
    _create(cluster, f"{RESOURCE}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}-devices"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": pool, "devices": devices},
    })


def unpublish_partitions(cluster: LocalCluster, node: str) -> None:
    for part in ("counters", "devices"):
        cluster.request("DELETE", f"{RESOURCE}/resourceslices/{node}-{DRIVER}-{part}")
    cluster.request("DELETE", f"/api/v1/nodes/{node}")
    cluster.request("DELETE", f"{RESOURCE}/deviceclasses/{DEVICE_CLASS}")


def partition_job(name: str, namespace: str, count: int) -> Obj:
    obj = job(name, namespace, "q", count=count, cpu="100m")
    pod = obj["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-partition"}]
    pod["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return obj


async def test_partition_is_counted_by_its_counters_and_binds(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    instance_type = unique("mig")
    node = f"{instance_type}-a"
    await add_node(cluster, instance_type, node, "4")
    await asyncio.to_thread(publish_partitions, cluster, node)
    try:
        await _run(api, cluster, namespace, instance_type)
    finally:
        await asyncio.to_thread(unpublish_partitions, cluster, node)


async def _run(api: Api, cluster: LocalCluster, namespace: str, instance_type: str) -> None:
    fl, cq = unique("mig"), unique("cq")
    await api.apply(flavor(fl, instance_type))
    await api.apply({
        "apiVersion": c.API_VERSION, "kind": "ClusterQueue",
        "metadata": {"name": cq},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory", MEMORY],
            "flavors": [{"name": fl, "resources": [
                {"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "8Gi"},
                {"name": MEMORY, "nominalQuota": "20Gi"}]}],
        }]},
    })
    await api.apply(local_queue("q", namespace, cq))
    _create(cluster, f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-partition", "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": DEVICE_CLASS, "count": 1,
            "selectors": [{"cel": {"expression": f"{PROFILE} == '1g.10gb'"}}]}}]}}},
    })

    # 2 pods x one 10Gi partition: 20Gi of gpu.memory, the whole quota.
    await api.apply(partition_job("first", namespace, 2))
    wl, usage = await admitted_usage(api, namespace, "first")
    assert usage.get(MEMORY) == "20Gi", wl["status"]["admission"]

    async def bound_with_partitions() -> list[Obj] | None:
        pods = [p for p in await api.pods_of(namespace, "first") if p["spec"].get("nodeName")]
        if len(pods) != 2:
            return None
        status, claims = await resource_claims(cluster, namespace)
        allocated = [
            result["device"]
            for cl in claims
            for result in ((cl.get("status") or {}).get("allocation") or {})
            .get("devices", {}).get("results", [])
        ]
        return pods if status == 200 and len(allocated) == 2 else None

    async def state() -> str:
        pods = [(p["metadata"]["name"], p["spec"].get("nodeName"), condition(p, "PodScheduled"))
                for p in await api.pods_of(namespace, "first")]
        _, claims = await resource_claims(cluster, namespace)
        return f"pods: {pods}; claims: {claims}"

    try:
        await eventually(
            bound_with_partitions, within=60,
            what="both pods of Job first bound, a partition allocated to each by kube-scheduler",
        )
    except BaseException:
        raise AssertionError(await state()) from None

    # One more 10Gi partition: over the quota, though the GPU has 20Gi left.
    await api.apply(partition_job("second", namespace, 1))
    wl = await api.wait_workload(
        namespace, "second", lambda w: pending_reason(w) == c.WAITING_FOR_QUOTA,
        what="pending, WaitingForQuota",
    )
    message = (condition(wl, c.QUOTA_RESERVED) or {}).get("message", "")
    assert MEMORY in message, message
