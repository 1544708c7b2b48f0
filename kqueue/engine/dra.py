"""DRA device requests as quota (Kueue's KueueDRAIntegration, ``pkg/dra/claims.go``).

A pod set's pods name ResourceClaimTemplates in ``spec.resourceClaims``; each pod gets its own
claims from them, so every device a template requests counts once per pod. The Configuration's
``resources.deviceClassMappings`` turns DeviceClasses into quota resource names
(:class:`kqueue.api.config.Resources`); a request counts ``exactly.count`` units of the resource
its DeviceClass is mapped to.

As in Kueue (countDevicesPerClass and GetResourceRequestsForResourceClaimTemplates):

* only ``exactly`` requests with ``allocationMode: ExactCount`` are sized; ``All`` (how many
  devices depends on the node) and ``firstAvailable`` (which alternative depends on the
  allocation) cannot be, and make the workload ``Misconfigured``;
* ``adminAccess`` requests take no quota (they monitor devices other claims hold);
* a DeviceClass that no mapping names makes the workload ``Misconfigured``;
* a claim named by ``resourceClaimName`` (shared by pods, not per pod) makes the workload
  ``Misconfigured`` (Kueue: "KueueDRAIntegration feature does not support use of resource
  claims");
* a request without ``deviceClassName`` is skipped.

Objects are read as the API server stores them; fields it would default (``allocationMode``
ExactCount, ``count`` 1) get those defaults, so templates read from files count the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .types import ResourceName

EXACT_COUNT = "ExactCount"
ALL = "All"


@dataclass(frozen=True)
class DeviceClaims:
    """What sizing a namespace's pods' claims needs: its ResourceClaimTemplates by name (their
    ResourceClaimSpec) and each mapped DeviceClass's quota resource name."""

    templates: Mapping[str, Mapping[str, Any]]
    classes: Mapping[str, str]


class ClaimError(ValueError):
    """A claim that cannot be counted; the message names the claim and the field."""


def _request_count(req: Mapping[str, Any], path: str) -> tuple[str, int] | None:
    """The DeviceClass and device count of one ``devices.requests[]`` entry; None when it takes
    no quota."""
    if req.get("firstAvailable") is not None:
        raise ClaimError(f"{path}: FirstAvailable device selection is not supported")
    exactly = req.get("exactly")
    if not isinstance(exactly, Mapping):
        raise ClaimError(f"{path}: Exactly must be set if FirstAvailable is nil")
    if exactly.get("adminAccess") is True:
        return None
    mode = exactly.get("allocationMode") or EXACT_COUNT
    if mode == ALL:
        raise ClaimError(f"{path}.exactly.allocationMode: AllocationMode 'All' is not supported")
    if mode != EXACT_COUNT:
        raise ClaimError(
            f"{path}.exactly.allocationMode: unsupported allocation mode: {mode}; allowed: "
            f"{EXACT_COUNT}"
        )
    count = exactly.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ClaimError(f"{path}.exactly.count: {count!r} is not a whole number of devices >= 1")
    device_class = exactly.get("deviceClassName") or ""
    if not device_class:
        return None
    return str(device_class), count


def devices_per_class(claim_spec: Mapping[str, Any]) -> dict[str, int]:
    """Kueue's countDevicesPerClass: the devices a ResourceClaimSpec requests, per DeviceClass."""
    out: dict[str, int] = {}
    devices = claim_spec.get("devices")
    requests = (devices.get("requests") if isinstance(devices, Mapping) else None) or []
    for i, req in enumerate(requests):
        path = f"devices.requests[{i}]"
        if not isinstance(req, Mapping):
            raise ClaimError(f"{path}: must be an object")
        counted = _request_count(req, path)
        if counted is not None:
            device_class, count = counted
            out[device_class] = out.get(device_class, 0) + count
    return out


def pod_devices(
    resource_claims: Sequence[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    classes: Mapping[str, str],
) -> dict[ResourceName, int]:
    """The quota one pod's device claims take, by quota resource name.

    ``resource_claims``: the pod spec's ``resourceClaims``; ``templates``: the namespace's
    ResourceClaimTemplates by name (their ``spec.spec``, the ResourceClaimSpec); ``classes``:
    each mapped DeviceClass's resource name. Raises :class:`ClaimError` naming the claim."""
    out: dict[ResourceName, int] = {}
    for j, prc in enumerate(resource_claims):
        if prc.get("resourceClaimName"):
            raise ClaimError(
                f"spec.resourceClaims[{j}] (ResourceClaim {prc['resourceClaimName']}): "
                "KueueDRAIntegration feature does not support use of resource claims"
            )
        name = prc.get("resourceClaimTemplateName")
        if not name:
            continue
        where = f"spec.resourceClaims[{j}] (ResourceClaimTemplate {name})"
        spec = templates.get(name)
        if spec is None:
            raise ClaimError(f"{where}: ResourceClaimTemplate not found")
        try:
            counts = devices_per_class(spec)
        except ClaimError as e:
            raise ClaimError(f"{where}: {e}") from None
        for device_class in sorted(counts):
            resource = classes.get(device_class)
            if resource is None:
                raise ClaimError(
                    f"{where}: DeviceClass {device_class} is not mapped in "
                    "resources.deviceClassMappings"
                )
            key = ResourceName(resource)
            out[key] = out.get(key, 0) + counts[device_class]
    return out


def claim_template_spec(template: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ResourceClaimTemplate's ResourceClaimSpec (``spec.spec``)."""
    spec = template.get("spec") or {}
    inner = spec.get("spec") if isinstance(spec, Mapping) else None
    return inner if isinstance(inner, Mapping) else {}


def with_devices(
    requests: Mapping[ResourceName, int], devices: Mapping[ResourceName, int]
) -> dict[ResourceName, int]:
    """A pod's container requests plus its devices (a container may also ask for the mapped
    resource, as an extended resource: both count)."""
    out = dict(requests)
    for r, n in devices.items():
        out[r] = out.get(r, 0) + n
    return dict(sorted(out.items()))
