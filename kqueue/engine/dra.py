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

Partitionable devices (Kueue's KueueDRAIntegrationPartitionableDevices,
``pkg/dra/counters.go``): a DeviceClass whose mapping has counter ``sources`` is counted by its
counters, not by device. For each source, the devices of the source's driver in complete pools
of the published ResourceSlices that the source's ``deviceSelector``, the DeviceClass's
selectors and the request's selectors all match are found (CEL, as far as ``dra_cel.py``
reads it); the request counts the largest value of the source's counter among them, times its
count. Fewer matching devices than requested, or none consuming the counter, leave the workload
``Misconfigured`` until the slices change (Kueue retries).

Objects are read as the API server stores them; fields it would default (``allocationMode``
ExactCount, ``count`` 1) get those defaults, so templates read from files count the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kqueue.api.config import Resources
from kqueue.api.quantity import QuantityError, parse_quantity

from .dra_cel import CelError, device_matches, device_view
from .types import ResourceName

EXACT_COUNT = "ExactCount"
ALL = "All"


# Kueue charges with saturating int64 arithmetic (utilmath.SaturatingMul); kept so a driver's
# absurd counter gives Kueue's number, not an integer larger than any quota.
MAX_INT64 = 2**63 - 1


@dataclass(frozen=True)
class CounterSource:
    """A mapping's counter source: requests for its DeviceClasses count this counter."""

    resource: str  # the mapping's quota resource name
    driver: str
    counter: str
    selector: str  # the source's deviceSelector CEL expression


def counter_sources(resources: Resources) -> dict[str, tuple[CounterSource, ...]]:
    """Each DeviceClass's counter sources (Kueue's ResourceMapper.deviceClassCounters)."""
    out: dict[str, list[CounterSource]] = {}
    for m in resources.device_class_mappings:
        for dc in m.device_class_names:
            out.setdefault(dc, []).extend(
                CounterSource(
                    m.name,
                    s.counter.driver,
                    s.counter.name,
                    s.counter.device_selector.cel.expression,
                )
                for s in m.sources
            )
    return {dc: tuple(srcs) for dc, srcs in out.items() if srcs}


@dataclass(frozen=True)
class DeviceClaims:
    """What sizing a namespace's pods' claims needs: its ResourceClaimTemplates by name (their
    ResourceClaimSpec), each mapped DeviceClass's quota resource name and, for partitionable
    devices, the counter sources, the published ResourceSlices (their spec) and the
    DeviceClasses (their spec) by name."""

    templates: Mapping[str, Mapping[str, Any]]
    classes: Mapping[str, str]
    counters: Mapping[str, Sequence[CounterSource]] = field(default_factory=dict)
    slices: Sequence[Mapping[str, Any]] = ()
    # DeviceClasses by name, as device_class_view keeps them.
    device_classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # KueueDRAIntegrationExtendedResource: DRA-backed extended resources counted by their
    # class's mapping (extended_resource_devices); off, they stay container requests.
    extended_resources: bool = True
    # KueueDRAIntegration off with KueueDRARejectWorkloadsWhenDRADisabled: why a pod with
    # claims is refused (nothing is counted); None: DRA on.
    refused: str | None = None


# Kueue's message (pkg/controller/core/workload_controller.go) for a workload with claims while
# KueueDRAIntegration is off and KueueDRARejectWorkloadsWhenDRADisabled on.
DRA_DISABLED: Final = (
    "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled"
)


def refusing_claims() -> DeviceClaims:
    """Claims with KueueDRAIntegration off and KueueDRARejectWorkloadsWhenDRADisabled on: a
    pod with any ResourceClaim or template makes its workload ``Misconfigured``."""
    return DeviceClaims({}, {}, extended_resources=False, refused=DRA_DISABLED)


def device_class_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What sizing claims reads of a DeviceClass: its name, creation time (which of two classes
    serving one extended resource kube-scheduler picks) and spec."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec")
    return {
        "metadata": {k: meta[k] for k in ("name", "creationTimestamp") if k in meta},
        "spec": spec if isinstance(spec, Mapping) else {},
    }


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


@dataclass(frozen=True)
class _Request:
    path: str
    device_class: str
    count: int
    selectors: tuple[str, ...]  # its CEL selectors


def _requests(claim_spec: Mapping[str, Any]) -> Iterator[_Request]:
    """The requests of a ResourceClaimSpec that take quota."""
    devices = claim_spec.get("devices")
    requests = (devices.get("requests") if isinstance(devices, Mapping) else None) or []
    for i, req in enumerate(requests):
        path = f"devices.requests[{i}]"
        if not isinstance(req, Mapping):
            raise ClaimError(f"{path}: must be an object")
        counted = _request_count(req, path)
        if counted is not None:
            yield _Request(path, *counted, _cel(req["exactly"].get("selectors"), path))


def _cel(selectors: Any, path: str) -> tuple[str, ...]:
    out: list[str] = []
    for k, sel in enumerate(selectors or []):
        cel = sel.get("cel") if isinstance(sel, Mapping) else None
        if isinstance(cel, Mapping) and isinstance(cel.get("expression"), str):
            out.append(cel["expression"])
        elif cel is not None:
            raise ClaimError(f"{path}.exactly.selectors[{k}].cel.expression: must be a string")
    return tuple(out)


def devices_per_class(claim_spec: Mapping[str, Any]) -> dict[str, int]:
    """Kueue's countDevicesPerClass: the devices a ResourceClaimSpec requests, per DeviceClass."""
    out: dict[str, int] = {}
    for req in _requests(claim_spec):
        out[req.device_class] = out.get(req.device_class, 0) + req.count
    return out


def pool_devices(slices: Sequence[Mapping[str, Any]], driver: str) -> list[Mapping[str, Any]]:
    """Kueue's groupSlicesByPool and isComplete: the devices of the driver's pools whose every
    slice of the newest generation is published."""
    pools: dict[str, tuple[int, int, list[Mapping[str, Any]]]] = {}
    for spec in slices:
        if spec.get("driver") != driver:
            continue
        pool = spec.get("pool") or {}
        name, gen = str(pool.get("name", "")), int(pool.get("generation", 0))
        count = int(pool.get("resourceSliceCount", 1))
        seen = pools.get(name)
        if seen is None or gen > seen[0]:
            pools[name] = (gen, count, [spec])
        elif gen == seen[0]:
            seen[2].append(spec)
    return [
        dev
        for name in sorted(pools)
        if len(pools[name][2]) == pools[name][1]
        for spec in pools[name][2]
        for dev in spec.get("devices") or []
    ]


def _counter_value(value: Any) -> int:
    """A consumed counter's value in whole units, rounded up; a negative one counts 0
    (Kueue's safeChargeValue)."""
    raw = value.get("value") if isinstance(value, Mapping) else value
    n = parse_quantity(raw if isinstance(raw, int) else str(raw))
    return min(max(n, 0), MAX_INT64)


def counter_charge(
    source: CounterSource, matched: Sequence[Mapping[str, Any]], count: int
) -> int | None:
    """Kueue's computeCounterCharges: the largest value of the source's counter consumed by a
    matched device, times ``count`` (saturating at int64); None when no device consumes it."""
    best: int | None = None
    for dev in matched:
        for consumption in dev.get("consumesCounters") or []:
            counters = consumption.get("counters") or {}
            if source.counter in counters:
                v = _counter_value(counters[source.counter])
                best = v if best is None else max(best, v)
    return None if best is None else min(best * count, MAX_INT64)


def _charge(req: _Request, source: CounterSource, claims: DeviceClaims) -> int:
    """Kueue's processCounterCharge for one request and counter source."""
    device_class = claims.device_classes.get(req.device_class)
    if device_class is None:
        raise ClaimError(f"{req.path}: DeviceClass {req.device_class} not found")
    spec = device_class.get("spec") or {}
    class_cel = _cel(spec.get("selectors"), f"DeviceClass {req.device_class} spec")
    matched: list[Mapping[str, Any]] = []
    try:
        for dev in pool_devices(claims.slices, source.driver):
            view = device_view(source.driver, dev)
            if all(device_matches(e, view) for e in (source.selector, *class_cel, *req.selectors)):
                matched.append(dev)
    except CelError as e:
        raise ClaimError(f"{req.path}: {e}") from None
    if len(matched) < req.count:
        raise ClaimError(
            f"{req.path}: insufficient matching devices for counter driver: {len(matched)} "
            f"device(s) match but {req.count} requested"
        )
    try:
        charge = counter_charge(source, matched, req.count)
    except QuantityError as e:
        raise ClaimError(f"{req.path}: counter {source.counter}: {e}") from None
    if charge is None:
        raise ClaimError(
            f"{req.path}: matched devices have no consumesCounters entry for counter "
            f"{source.counter!r}"
        )
    return charge


def pod_devices(
    resource_claims: Sequence[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    classes: Mapping[str, str],
    cluster: DeviceClaims | None = None,
) -> dict[ResourceName, int]:
    """The quota one pod's device claims take, by quota resource name.

    ``resource_claims``: the pod spec's ``resourceClaims``; ``templates``: the namespace's
    ResourceClaimTemplates by name (their ``spec.spec``, the ResourceClaimSpec); ``classes``:
    each mapped DeviceClass's resource name; ``cluster``: counter sources, ResourceSlices and
    DeviceClasses for partitionable devices. Raises :class:`ClaimError` naming the claim."""
    cluster = cluster if cluster is not None else DeviceClaims(templates, classes)
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
            requests = list(_requests(spec))
            counts: dict[str, int] = {}
            for req in requests:
                counts[req.device_class] = counts.get(req.device_class, 0) + req.count
            for device_class in sorted(counts):
                if device_class not in classes:
                    raise ClaimError(
                        f"DeviceClass {device_class} is not mapped in resources.deviceClassMappings"
                    )
            for req in requests:
                sources = cluster.counters.get(req.device_class) or ()
                for source in sources:
                    _add(out, source.resource, _charge(req, source, cluster))
                if not sources:
                    _add(out, classes[req.device_class], req.count)
        except ClaimError as e:
            raise ClaimError(f"{where}: {e}") from None
    return out


def _add(out: dict[ResourceName, int], resource: str, n: int) -> None:
    key = ResourceName(resource)
    out[key] = out.get(key, 0) + n


def claim_template_spec(template: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ResourceClaimTemplate's ResourceClaimSpec (``spec.spec``)."""
    spec = template.get("spec") or {}
    inner = spec.get("spec") if isinstance(spec, Mapping) else None
    return inner if isinstance(inner, Mapping) else {}


def serving_classes(device_classes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each extended resource a DeviceClass serves (``spec.extendedResourceName``, Kubernetes'
    DRAExtendedResource), with the class kube-scheduler allocates it from: of several, the one
    created last, then the first by name (Kueue's selectedDeviceClass)."""
    best: dict[str, tuple[str, str]] = {}
    for name in sorted(device_classes):
        obj = device_classes[name]
        resource = (obj.get("spec") or {}).get("extendedResourceName")
        if not resource:
            continue
        created = str((obj.get("metadata") or {}).get("creationTimestamp") or "")
        seen = best.get(resource)
        if seen is None or created > seen[0]:
            best[resource] = (created, name)
    return {resource: name for resource, (_, name) in best.items()}


def extended_resource_devices(
    requests: Mapping[ResourceName, int], claims: DeviceClaims
) -> tuple[dict[ResourceName, int], dict[ResourceName, int]]:
    """Kueue's ResolveExtendedResourceQuota (KueueDRAIntegrationExtendedResource): a pod's
    requests split into those kept and its DRA-backed extended resources, as devices under the
    quota name of the DeviceClass serving them (its mapping's name, else the resource's own).

    A request ``nvidia.com/gpu: 1`` served by a DeviceClass mapped to ``example.com/gpu``
    counts 1 of ``example.com/gpu``, as a claim of that class does. Raises :class:`ClaimError`
    when the class is counted by counters (only a claim's selectors can say which partition)."""
    backing = serving_classes(claims.device_classes)
    kept: dict[ResourceName, int] = {}
    devices: dict[ResourceName, int] = {}
    for r, n in requests.items():
        device_class = backing.get(r)
        if device_class is None or n <= 0:
            kept[r] = n
            continue
        if claims.counters.get(device_class):
            raise ClaimError(
                f"resources.requests[{r}]: extended resource {r} resolves to DeviceClass "
                f"{device_class} with counters configured; use ResourceClaimTemplates with CEL "
                "selectors for counter-based quota"
            )
        _add(devices, claims.classes.get(device_class, r), n)
    return kept, devices


def with_devices(
    requests: Mapping[ResourceName, int], devices: Mapping[ResourceName, int]
) -> dict[ResourceName, int]:
    """A pod's container requests plus its devices (a container may also ask for the mapped
    resource, as an extended resource: both count)."""
    out = dict(requests)
    for r, n in devices.items():
        out[r] = out.get(r, 0) + n
    return dict(sorted(out.items()))
