"""DRA device requests counted against quota (kqueue/engine/dra.py).

Ported from Kueue with its case names: ``Test_GetResourceRequests`` and
``Test_countDevicesPerClass_overflow`` (``pkg/dra/claims_test.go``). Not ported: the CEL
cases (Kueue compiles the selectors and matches them against the cluster's ResourceSlices;
kqueue does not evaluate CEL, see docs/dra.md) and "sum saturates at MaxInt64" (Python
integers do not wrap). Kueue's ``handleDRA`` refusing a ``resourceClaimName``
(``pkg/controller/core/workload_controller.go``) is folded into ``pod_devices`` here. Then the
engine: devices take quota per pod, and a bad claim is ``Misconfigured`` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kqueue.api.v1alpha1 import Workload as ApiWorkload
from kqueue.engine import dra, from_api

from .builders import key, make_cq, make_engine, make_flavor, pending_reasons, t

CLASSES = {"test-deviceclass-1": "res-1", "test-deviceclass-2": "res-2"}
ONLY_1 = {"test-deviceclass-1": "res-1"}


def request(name: str, device_class: str, count: int, **extra: Any) -> dict[str, Any]:
    """Kueue's ``MakeResourceClaimTemplate().DeviceRequest(name, class, count)`` entry."""
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    return {"name": name, "exactly": {**exactly, **extra}}


def claim_spec(*requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {"devices": {"requests": list(requests), **devices}}


def tmpl(name: str) -> dict[str, Any]:
    return {"name": name.replace("claim-tmpl", "req"), "resourceClaimTemplateName": name}


TEMPLATES: dict[str, dict[str, Any]] = {
    "claim-tmpl-1": claim_spec(request("device-request", "test-deviceclass-1", 2)),
    "claim-tmpl-2": claim_spec(request("device-request", "test-deviceclass-2", 1)),
    "claim-tmpl-3": claim_spec(request("device-request", "test-deviceclass-1", 2)),
    "claim-tmpl-all": claim_spec(
        {"name": "device-request",
         "exactly": {"deviceClassName": "test-deviceclass-1", "allocationMode": "All"}}
    ),
    "claim-tmpl-constraints": claim_spec(
        request("gpu-1", "test-deviceclass-1", 1),
        request("gpu-2", "test-deviceclass-1", 1),
        constraints=[{"requests": ["gpu-1", "gpu-2"], "matchAttribute": "numa-node"}],
    ),
    "claim-tmpl-first": claim_spec(
        {"name": "req", "firstAvailable": [{"name": "a", "deviceClassName": "test-deviceclass-1"}]}
    ),
    "claim-tmpl-empty": claim_spec({"name": "req"}),
    "claim-tmpl-admin": claim_spec(request("req", "test-deviceclass-1", 1, adminAccess=True)),
    "claim-tmpl-mixed": claim_spec(
        request("normal-req", "test-deviceclass-1", 2),
        request("admin-req", "test-deviceclass-1", 1, adminAccess=True),
    ),
    "claim-tmpl-config": claim_spec(
        request("req", "test-deviceclass-1", 1),
        config=[{"requests": ["req"], "opaque": {"driver": "gpu.example.com", "parameters": {}}}],
    ),
    "claim-tmpl-defaults": claim_spec({"name": "req", "exactly": {"deviceClassName": "test-deviceclass-1"}}),
    "claim-tmpl-half": claim_spec(request("req", "test-deviceclass-1", "1.5")),  # type: ignore[arg-type]
}


@dataclass(frozen=True)
class Case:
    claims: list[dict[str, Any]]
    classes: dict[str, str] = field(default_factory=lambda: CLASSES)
    want: dict[str, int] = field(default_factory=dict)
    error: str | None = None  # a part of the message (it names the claim and the field)


CASES = {
    # Test_GetResourceRequests
    "Single claim template with single device": Case([tmpl("claim-tmpl-1")], want={"res-1": 2}),
    "Unmapped DeviceClass returns error": Case(
        [tmpl("claim-tmpl-1")],
        classes={},
        error="spec.resourceClaims[0] (ResourceClaimTemplate claim-tmpl-1): DeviceClass "
        "test-deviceclass-1 is not mapped in resources.deviceClassMappings",
    ),
    "Two containers each using different claim templates": Case(
        [tmpl("claim-tmpl-1"), tmpl("claim-tmpl-2")], want={"res-1": 2, "res-2": 1}
    ),
    # Containers sharing a claim share its devices: the pod's claims are counted, not the
    # containers' references to them.
    "Two containers sharing one claim template": Case(
        [tmpl("claim-tmpl-1")], classes=ONLY_1, want={"res-1": 2}
    ),
    "Single template requesting two devices": Case(
        [tmpl("claim-tmpl-3")], classes=ONLY_1, want={"res-1": 2}
    ),
    "Init and regular container sharing one template": Case(
        [tmpl("claim-tmpl-1")], classes=ONLY_1, want={"res-1": 2}
    ),
    "AllocationMode All returns error": Case(
        [tmpl("claim-tmpl-all")],
        error="spec.resourceClaims[0] (ResourceClaimTemplate claim-tmpl-all): "
        "devices.requests[0].exactly.allocationMode: AllocationMode 'All' is not supported",
    ),
    "Device constraints are pass-through and counted correctly": Case(
        [tmpl("claim-tmpl-constraints")], classes=ONLY_1, want={"res-1": 2}
    ),
    "FirstAvailable returns error": Case(
        [tmpl("claim-tmpl-first")],
        error="devices.requests[0]: FirstAvailable device selection is not supported",
    ),
    "Exactly and FirstAvailable are nil returns error": Case(
        [tmpl("claim-tmpl-empty")],
        error="devices.requests[0]: Exactly must be set if FirstAvailable is nil",
    ),
    "AdminAccess request is skipped with zero quota": Case([tmpl("claim-tmpl-admin")]),
    "Mixed AdminAccess and normal requests counts only normal": Case(
        [tmpl("claim-tmpl-mixed")], want={"res-1": 2}
    ),
    "Device config is pass-through and counted correctly": Case(
        [tmpl("claim-tmpl-config")], want={"res-1": 1}
    ),
    # Kueue's handleDRA: workload.HasResourceClaim
    "handleDRA: a ResourceClaim (not a template) is refused": Case(
        [tmpl("claim-tmpl-1"), {"name": "req-2", "resourceClaimName": "claim-2"}],
        error="spec.resourceClaims[1] (ResourceClaim claim-2): KueueDRAIntegration feature "
        "does not support use of resource claims",
    ),
    # kqueue's own
    "kqueue: a missing template is named": Case(
        [tmpl("claim-tmpl-gone")],
        error="spec.resourceClaims[0] (ResourceClaimTemplate claim-tmpl-gone): "
        "ResourceClaimTemplate not found",
    ),
    "kqueue: the API server's defaults (ExactCount, count 1)": Case(
        [tmpl("claim-tmpl-defaults")], want={"res-1": 1}
    ),
    "kqueue: a count that is not a whole number is named": Case(
        [tmpl("claim-tmpl-half")],
        error="devices.requests[0].exactly.count: '1.5' is not a whole number of devices >= 1",
    ),
    "kqueue: two templates of the same class add up": Case(
        [tmpl("claim-tmpl-1"), tmpl("claim-tmpl-3")], want={"res-1": 4}
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_get_resource_requests(case: Case) -> None:
    if case.error is not None:
        with pytest.raises(dra.ClaimError) as raised:
            dra.pod_devices(case.claims, TEMPLATES, case.classes)
        assert case.error in str(raised.value)
        return
    assert dra.pod_devices(case.claims, TEMPLATES, case.classes) == case.want


OVERFLOW = {
    # Test_countDevicesPerClass_overflow
    "normal sum across requests": ([("r0", 2), ("r1", 3)], 5),
    "kqueue: sums past MaxInt64 stay exact": ([("r0", 2**63 - 1), ("r1", 2**63 - 1)], 2**64 - 2),
}


@pytest.mark.parametrize("requests,want", OVERFLOW.values(), ids=OVERFLOW.keys())
def test_count_devices_per_class_overflow(requests: list[tuple[str, int]], want: int) -> None:
    spec = claim_spec(*(request(n, "gpu", c) for n, c in requests))
    assert dra.devices_per_class(spec) == {"gpu": want}


# -- through the engine ------------------------------------------------------------------------


def api_workload(name: str, count: int, *claims: dict[str, Any]) -> ApiWorkload:
    pod = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if claims:
        pod["resourceClaims"] = list(claims)
    return ApiWorkload.model_validate({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "uid": name,
                     "creationTimestamp": f"2026-01-01T00:00:0{len(name) % 10}Z"},
        "spec": {"queueName": "lq", "podSets": [
            {"name": "main", "count": count, "template": {"spec": pod}}]},
    })


GPU = dra.DeviceClaims(
    templates={"gpu": claim_spec(request("gpu", "gpu.example.com", 2))},
    classes={"gpu.example.com": "nvidia.com/gpu"},
)


def test_devices_take_quota_per_pod_under_the_mapped_name() -> None:
    engine = make_engine(
        make_flavor("default").obj(),
        make_cq("cq").quota("default", **{"cpu": "10", "nvidia.com/gpu": "8"}).obj(),
    )
    first = from_api.workload(api_workload("a", 3, tmpl("gpu")), claims=GPU)
    assert first.pod_sets[0].requests == {"cpu": 1000, "nvidia.com/gpu": 2}
    engine.upsert_workload(first)
    result = engine.schedule(t(1))
    assert [a.workload for a in result.admitted] == [key("a")]
    [ps] = result.admitted[0].admission.pod_sets
    assert ps.resource_usage["nvidia.com/gpu"] == 6  # 3 pods x 2 devices
    engine.upsert_workload(from_api.workload(api_workload("bb", 2, tmpl("gpu")), claims=GPU))
    result = engine.schedule(t(2))
    assert pending_reasons(result) == {"bb": "WaitingForQuota"}
    assert "nvidia.com/gpu" in result.pending[0].message


def test_bad_claim_is_misconfigured_naming_it() -> None:
    engine = make_engine(
        make_flavor("default").obj(),
        make_cq("cq").quota("default", **{"cpu": "10", "nvidia.com/gpu": "8"}).obj(),
    )
    bad = {"name": "x", "resourceClaimTemplateName": "nope"}
    engine.upsert_workload(from_api.workload(api_workload("a", 1, bad), claims=GPU))
    result = engine.schedule(t(1))
    assert pending_reasons(result) == {"a": "Misconfigured"}
    assert result.pending[0].message == (
        "device claims cannot be counted against quota: pod set main: spec.resourceClaims[0] "
        "(ResourceClaimTemplate nope): ResourceClaimTemplate not found"
    )


def test_without_claims_resolution_devices_take_no_quota() -> None:
    # What kqueue did before: the claims are left to kube-scheduler.
    wl = from_api.workload(api_workload("a", 1, tmpl("gpu")))
    assert wl.pod_sets[0].requests == {"cpu": 1000}
    assert wl.pod_sets[0].device_error is None


def test_devices_take_no_node_capacity() -> None:
    """Node fit and topology placement read per_pod_requests: devices are in ResourceSlices,
    not in a node's allocatable; a container's own request of the resource still counts."""
    from kqueue.engine.tas.topology import PODS, per_pod_requests

    gpu = dra.DeviceClaims(GPU.templates, GPU.classes)
    [ps] = from_api.workload(api_workload("a", 1, tmpl("gpu")), claims=gpu).pod_sets
    assert ps.requests["nvidia.com/gpu"] == 2
    assert per_pod_requests(ps) == {"cpu": 1000, PODS: 1}
