"""DRA quota in the controller: ResourceClaimTemplates size the Workloads' device claims
(kqueue/controller/claim_templates.py), read when the Workload is fed and again when a template
it names changes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kqueue.controller.manager import Manager
from kqueue.engine.types import ResourceName, WorkloadKey
from tests.controller.test_manager import manager

__all__ = ["manager"]  # fixture

Obj = dict[str, Any]
MAPPINGS = {"resources": {"deviceClassMappings": [
    {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.example.com"]}]}}
KEY = WorkloadKey("team-a/w")


def template(count: int, version: str = "1", device_class: str = "gpu.example.com") -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu", "namespace": "team-a", "resourceVersion": version},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}}]}}},
    }


def workload() -> Obj:
    pod = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
           "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}
    return {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team-a", "uid": "w", "resourceVersion": "1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"queueName": "lq", "podSets": [
            {"name": "main", "count": 2, "template": {"spec": pod}}]},
    }


def pod_set(m: Manager) -> Any:
    return m.engine.queues.pending[KEY].obj.pod_sets[0]


def test_without_mappings_no_template_is_read_and_claims_take_no_quota(
    manager: Callable[..., Manager],
) -> None:
    m = manager(["batch/job"])
    assert "resourceclaimtemplates" not in m.informers()
    m.workloads._apply("ADDED", workload())
    assert pod_set(m).requests == {ResourceName("cpu"): 1000}


def test_templates_size_the_claims_and_their_changes_reach_the_engine(
    manager: Callable[..., Manager],
) -> None:
    m = manager(["batch/job"], **MAPPINGS)
    informers = list(m.informers())
    # Read before the Workloads, so a Workload arriving at start-up finds its templates.
    assert informers.index("resourceclaimtemplates") < informers.index("workloads")
    templates = m.claim_templates
    assert templates is not None

    m.workloads._apply("ADDED", workload())
    assert pod_set(m).device_error == (
        "spec.resourceClaims[0] (ResourceClaimTemplate gpu): ResourceClaimTemplate not found"
    )

    templates._apply("ADDED", json.loads(json.dumps(template(2))))
    assert pod_set(m).device_error is None
    assert pod_set(m).requests == {"cpu": 1000, "nvidia.com/gpu": 2}

    templates._apply("MODIFIED", template(3, version="2"))
    assert pod_set(m).requests == {"cpu": 1000, "nvidia.com/gpu": 3}

    templates._apply("MODIFIED", template(1, version="3", device_class="other.example.com"))
    assert "DeviceClass other.example.com is not mapped" in (pod_set(m).device_error or "")

    templates._apply("DELETED", template(1, version="3"))
    assert "ResourceClaimTemplate not found" in (pod_set(m).device_error or "")


def test_a_template_of_another_namespace_does_not_count(manager: Callable[..., Manager]) -> None:
    m = manager(["batch/job"], **MAPPINGS)
    assert m.claim_templates is not None
    other = template(2)
    other["metadata"]["namespace"] = "team-b"
    m.claim_templates._apply("ADDED", other)
    m.workloads._apply("ADDED", workload())
    assert pod_set(m).device_error is not None
    assert ResourceName("nvidia.com/gpu") not in pod_set(m).requests


COUNTERS = {"resources": {"deviceClassMappings": [{
    "name": "gpu.memory", "deviceClassNames": ["gpu.example.com"],
    "sources": [{"counter": {"name": "memory", "driver": "gpu.example.com", "deviceSelector": {
        "cel": {"expression": "device.driver == 'gpu.example.com'"}}}}],
}]}}


def device_class(version: str = "1") -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com", "resourceVersion": version},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
    }


def resource_slice(memory: str, version: str = "1") -> Obj:
    part = {"name": "part-0", "consumesCounters": [
        {"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]}
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu", "resourceVersion": version},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-1",
                 "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [part]},
    }


def test_counter_sources_read_slices_and_classes_and_their_changes_reach_the_engine(
    manager: Callable[..., Manager],
) -> None:
    m = manager(["batch/job"], **COUNTERS)
    informers = list(m.informers())
    assert informers.index("resourceslices") < informers.index("workloads")
    assert informers.index("deviceclasses") < informers.index("workloads")
    assert m.claim_templates is not None and m.resource_slices is not None
    assert m.device_classes is not None
    m.claim_templates._apply("ADDED", template(1))
    m.workloads._apply("ADDED", workload())
    assert "DeviceClass gpu.example.com not found" in (pod_set(m).device_error or "")

    m.device_classes._apply("ADDED", device_class())
    assert "0 device(s) match but 1 requested" in (pod_set(m).device_error or "")

    m.resource_slices._apply("ADDED", resource_slice("20Gi"))
    assert pod_set(m).device_error is None
    assert pod_set(m).requests == {"cpu": 1000, "gpu.memory": 20 * 2**30}

    m.resource_slices._apply("MODIFIED", resource_slice("40Gi", version="2"))
    assert pod_set(m).requests == {"cpu": 1000, "gpu.memory": 40 * 2**30}


def test_without_counter_sources_slices_are_not_read(manager: Callable[..., Manager]) -> None:
    m = manager(["batch/job"], **MAPPINGS)
    assert "resourceslices" not in m.informers()
    assert "deviceclasses" in m.informers()  # extended resources they serve


def test_extended_resource_served_by_a_device_class_counts_under_its_mapping(
    manager: Callable[..., Manager],
) -> None:
    """A container's ``example.com/gpu`` counts as the mapped ``nvidia.com/gpu`` once a
    DeviceClass serving it arrives (Kueue's KueueDRAIntegrationExtendedResource)."""
    m = manager(["batch/job"], **MAPPINGS)
    assert m.device_classes is not None
    obj = workload()
    pod = obj["spec"]["podSets"][0]["template"]["spec"]
    del pod["resourceClaims"]
    pod["containers"][0]["resources"]["requests"]["example.com/gpu"] = "2"
    m.workloads._apply("ADDED", obj)
    assert pod_set(m).requests == {"cpu": 1000, "example.com/gpu": 2}

    served = device_class()
    served["spec"]["extendedResourceName"] = "example.com/gpu"
    m.device_classes._apply("ADDED", served)
    assert pod_set(m).requests == {"cpu": 1000, "nvidia.com/gpu": 2}
    assert pod_set(m).devices == {"nvidia.com/gpu": 2}
