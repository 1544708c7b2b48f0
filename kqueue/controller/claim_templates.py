"""ResourceClaimTemplates for DRA quota (docs/dra.md).

With ``resources.deviceClassMappings`` configured, the controller watches the
ResourceClaimTemplates of every namespace (their ResourceClaimSpec only) and sizes each
Workload's device claims from them when it feeds the Workload to the engine, as Kueue resolves
them when it processes the Workload (``pkg/controller/core/workload_controller.go``,
``handleDRA``). A template created, changed or deleted after the Workload re-feeds the pending
Workloads that name it: a claim refused as missing is counted once its template exists.

The DeviceClasses are watched too: a container's extended resource that a class serves
(``spec.extendedResourceName``) counts under the class's quota name, and the classes' selectors
pick a partitionable device's partitions. With counter ``sources``, the ResourceSlices are
watched (their spec): a request is counted by the counters its devices consume
(kqueue/engine/dra.py). A slice or class that changes re-sizes the pending Workloads (a claim
refused for want of devices is counted once a driver publishes them).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.controller.informer import Store
from kqueue.engine.dra import CounterSource, DeviceClaims, claim_template_spec

__all__ = [
    "BY_CLAIM_TEMPLATE",
    "ClaimTemplates",
    "claim_template_keys",
    "object_spec",
    "template_spec",
]

# Workload index: the ``namespace/name`` of each ResourceClaimTemplate its pods name.
BY_CLAIM_TEMPLATE = "by-claim-template"

Spec = Mapping[str, Any]


def template_spec(obj: Mapping[str, Any]) -> Spec:
    """What the informer keeps of a ResourceClaimTemplate: its ResourceClaimSpec."""
    return claim_template_spec(obj)


def object_spec(obj: Mapping[str, Any]) -> Spec:
    """What the informer keeps of a ResourceSlice: its spec."""
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def claim_template_keys(wl: Workload) -> list[str]:
    namespace = wl.namespace or "default"
    names = {
        str(prc["resourceClaimTemplateName"])
        for ps in wl.spec.pod_sets
        for prc in (ps.template.spec.model_extra or {}).get("resourceClaims") or []
        if isinstance(prc, Mapping) and prc.get("resourceClaimTemplateName")
    }
    return sorted(f"{namespace}/{n}" for n in names)


@dataclass(frozen=True)
class _Namespace(Mapping[str, Spec]):
    """One namespace's templates (or, with namespace None, cluster-scoped objects) by name,
    read from the informer's store when asked."""

    store: Store[Spec]
    namespace: str | None

    def __getitem__(self, name: str) -> Spec:
        spec = self.store.get_by_name(name, self.namespace)
        if spec is None:
            raise KeyError(name)
        return spec

    def __iter__(self) -> Iterator[str]:
        if self.namespace is None:
            return iter(self.store)
        prefix = f"{self.namespace}/"
        return (k[len(prefix) :] for k in self.store if k.startswith(prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class ClaimTemplates:
    """Sizes a namespace's claims: its templates and the configured DeviceClass mapping."""

    store: Store[Spec]
    classes: Mapping[str, str]
    counters: Mapping[str, Sequence[CounterSource]] = field(default_factory=dict)
    slices: Store[Spec] | None = None
    device_classes: Store[Spec] | None = None
    extended_resources: bool = True
    """KueueDRAIntegrationExtendedResource (dra.DeviceClaims)."""

    def __call__(self, namespace: str) -> DeviceClaims:
        return DeviceClaims(
            _Namespace(self.store, namespace),
            self.classes,
            self.counters,
            self.slices.objects() if self.slices is not None else (),
            _Namespace(self.device_classes, None) if self.device_classes is not None else {},
            extended_resources=self.extended_resources,
        )
