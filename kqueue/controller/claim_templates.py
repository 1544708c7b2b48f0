"""ResourceClaimTemplates for DRA quota (docs/dra.md).

With ``resources.deviceClassMappings`` configured, the controller watches the
ResourceClaimTemplates of every namespace (their ResourceClaimSpec only) and sizes each
Workload's device claims from them when it feeds the Workload to the engine, as Kueue resolves
them when it processes the Workload (``pkg/controller/core/workload_controller.go``,
``handleDRA``). A template created, changed or deleted after the Workload re-feeds the pending
Workloads that name it: a claim refused as missing is counted once its template exists.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.controller.informer import Store
from kqueue.engine.dra import DeviceClaims, claim_template_spec

__all__ = ["BY_CLAIM_TEMPLATE", "ClaimTemplates", "claim_template_keys", "template_spec"]

# Workload index: the ``namespace/name`` of each ResourceClaimTemplate its pods name.
BY_CLAIM_TEMPLATE = "by-claim-template"

Spec = Mapping[str, Any]


def template_spec(obj: Mapping[str, Any]) -> Spec:
    """What the informer keeps of a ResourceClaimTemplate: its ResourceClaimSpec."""
    return claim_template_spec(obj)


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
    """One namespace's templates by name, read from the informer's store when asked."""

    store: Store[Spec]
    namespace: str

    def __getitem__(self, name: str) -> Spec:
        spec = self.store.get(f"{self.namespace}/{name}")
        if spec is None:
            raise KeyError(name)
        return spec

    def __iter__(self) -> Iterator[str]:
        prefix = f"{self.namespace}/"
        return (k[len(prefix) :] for k in self.store if k.startswith(prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class ClaimTemplates:
    """Sizes a namespace's claims: its templates and the configured DeviceClass mapping."""

    store: Store[Spec]
    classes: Mapping[str, str]

    def __call__(self, namespace: str) -> DeviceClaims:
        return DeviceClaims(_Namespace(self.store, namespace), self.classes)
