"""DRA-backed extended resources (kqueue/engine/dra.py, ``extended_resource_devices``).

Ported from Kueue with its case names: ``TestSelectedDeviceClass`` and
``TestResolveExtendedResourceQuota`` (``pkg/dra/extended_resources_test.go``), run through
``from_api.workload`` (the pod set's quota and its devices). Not ported: the integer-only and
int64-overflow cases (kqueue rounds a fractional request up and its integers do not overflow)
and ``TestNeedsDRAReconcile`` (kqueue sizes every Workload it is fed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kqueue.api.config import Resources
from kqueue.api.v1alpha1 import Workload as ApiWorkload
from kqueue.engine import dra, from_api


def device_class(name: str, resource: str | None, created: int = 0) -> dict[str, Any]:
    spec = {"extendedResourceName": resource} if resource else {}
    ts = f"2026-01-01T00:{created // 60:02d}:{created % 60:02d}Z"
    return dra.device_class_view(
        {"metadata": {"name": name, "creationTimestamp": ts}, "spec": spec}
    )


SELECTED = {
    "one class is the one": ([("a", 100)], "a"),
    "the class created later wins": ([("a", 100), ("b", 200)], "b"),
    "and wins from either end of the list": ([("b", 200), ("a", 100)], "b"),
    "created together, the lexicographically first name wins": ([("b", 100), ("a", 100)], "a"),
    "and that tie does not depend on the list order either": ([("a", 100), ("b", 100)], "a"),
    "a later class beats an earlier one with a smaller name": ([("a", 100), ("z", 200)], "z"),
    "the tie-break applies among the latest only": (
        [("a", 300), ("z", 100), ("b", 300)], "a"
    ),
}


@pytest.mark.parametrize("items,want", SELECTED.values(), ids=SELECTED.keys())
def test_selected_device_class(items: list[tuple[str, int]], want: str) -> None:
    classes = {n: device_class(n, "example.com/gpu", created) for n, created in items}
    assert dra.serving_classes(classes) == {"example.com/gpu": want}


GPU = device_class("gpu.nvidia.com", "example.com/gpu")
MIG = device_class("mig.nvidia.com", "nvidia.com/mig-1g.10gb")
PLAIN = device_class("plain.nvidia.com", None)
ALPHA = device_class("alpha.example.com", "example.com/gpu", 100)
OMEGA = device_class("omega.example.com", "example.com/gpu", 200)
CLASS_A = device_class("class-a", "vendor.example/a")
CLASS_B = device_class("class-b", "vendor.example/b")


def container(name: str, **requests: str) -> dict[str, Any]:
    """Keyword ``a.b_c`` is the resource ``a.b/c`` (``example_com_gpu``: example.com/gpu)."""
    names = {k: "example.com/gpu" if k == "example_com_gpu" else k.replace("_", "/")
             for k in requests}
    return {"name": name, "resources": {"requests": {names[k]: v for k, v in requests.items()}}}


@dataclass(frozen=True)
class Case:
    containers: list[dict[str, Any]]
    classes: list[dict[str, Any]]
    want_devices: dict[str, int]
    want_kept: dict[str, int] = field(default_factory=dict)
    init: list[dict[str, Any]] = field(default_factory=list)
    mappings: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


def mapping(name: str, *classes: str, counter: bool = False) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "deviceClassNames": list(classes)}
    if counter:
        selector = {"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}
        m["sources"] = [{"counter": {"name": "memory", "driver": "gpu.nvidia.com",
                                     "deviceSelector": selector}}]
    return m


CASES = {
    "workload with extended resource backed by DRA": Case(
        [container("c", cpu="1", example_com_gpu="2")], [GPU],
        {"example.com/gpu": 2}, {"cpu": 1000},
    ),
    "workload with negative extended resource request is not charged": Case(
        # kqueue's Workload takes no negative quantity: a zero one stays a request of 0.
        [container("c", cpu="1", example_com_gpu="0")], [GPU], {},
        {"cpu": 1000, "example.com/gpu": 0},
    ),
    "workload with multiple extended resources": Case(
        [container("c", example_com_gpu="1", **{"nvidia.com_mig-1g.10gb": "2"})], [GPU, MIG],
        {"example.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2},
    ),
    "workload with extended resource not backed by DRA (no matching DeviceClass)": Case(
        [container("c", **{"other.com_fpga": "1"})], [GPU], {}, {"other.com/fpga": 1},
    ),
    "workload with no extended resources": Case(
        [container("c", cpu="1", memory="1Gi")], [GPU], {}, {"cpu": 1000, "memory": 2**30},
    ),
    "workload with DeviceClass that has no extendedResourceName": Case(
        [container("c", example_com_gpu="1")], [PLAIN], {}, {"example.com/gpu": 1},
    ),
    "workload with multiple containers": Case(
        [container("c1", example_com_gpu="1"), container("c2", example_com_gpu="2")], [GPU],
        {"example.com/gpu": 3},
    ),
    "init containers use max, regular containers use sum": Case(
        [container("c1", example_com_gpu="1"), container("c2", example_com_gpu="2")], [GPU],
        {"example.com/gpu": 5},
        init=[container("init1", example_com_gpu="5"), container("init2", example_com_gpu="3")],
    ),
    "two extended resource names sharing a quota key are not collapsed by cross-container "
    "aggregation": Case(
        [container("c", **{"vendor.example_b": "5"})], [CLASS_A, CLASS_B],
        {"gpu-claims": 10},
        init=[container("i", **{"vendor.example_a": "5"})],
        mappings=[mapping("gpu-claims", "class-a", "class-b")],
    ),
    "extended resource uses deviceClassMappings logical name when DeviceClass is mapped": Case(
        [container("c", example_com_gpu="2")], [GPU], {"nvidia.com/gpu": 2},
        mappings=[mapping("nvidia.com/gpu", "gpu.nvidia.com")],
    ),
    "extended resource with counters is rejected": Case(
        [container("c", example_com_gpu="1")], [GPU], {},
        mappings=[mapping("gpu.memory", "gpu.nvidia.com", counter=True)],
        error="resources.requests[example.com/gpu]: extended resource example.com/gpu resolves "
        "to DeviceClass gpu.nvidia.com with counters configured",
    ),
    "the mapping of the later DeviceClass decides the quota key": Case(
        [container("c", example_com_gpu="1")], [ALPHA, OMEGA], {"omega-key": 1},
        mappings=[mapping("alpha-key", "alpha.example.com"),
                  mapping("omega-key", "omega.example.com")],
    ),
    "an unmapped later DeviceClass leaves the extended resource name as the quota key": Case(
        [container("c", example_com_gpu="1")], [ALPHA, OMEGA], {"example.com/gpu": 1},
        mappings=[mapping("alpha-key", "alpha.example.com")],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_resolve_extended_resource_quota(case: Case) -> None:
    resources = Resources.model_validate({"deviceClassMappings": case.mappings})
    claims = dra.DeviceClaims(
        {}, resources.device_classes(), dra.counter_sources(resources), (),
        {c["metadata"]["name"]: c for c in case.classes},
    )
    pod: dict[str, Any] = {"containers": case.containers}
    if case.init:
        pod["initContainers"] = case.init
    wl = ApiWorkload.model_validate({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns1", "uid": "wl"},
        "spec": {"queueName": "lq", "podSets": [
            {"name": "main", "count": 1, "template": {"spec": pod}}]},
    })
    [ps] = from_api.workload(wl, claims=claims).pod_sets
    if case.error:
        assert case.error in (ps.device_error or "")
        return
    assert ps.device_error is None
    assert ps.devices == case.want_devices
    assert ps.requests == {**case.want_kept, **case.want_devices}
