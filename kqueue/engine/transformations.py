"""Resource transformations: what a pod requests, as counted against quota (Kueue's
Configuration ``resources.transformations`` and ``resources.excludeResourcePrefixes``).

A resource whose name starts with an excluded prefix is not counted. A transformed resource
counts per unit as its outputs (a MIG slice as accelerator memory and credits), optionally
multiplied by another resource the pod requests (``multiplyBy``: memory per GPU times the GPUs);
with ``Retain`` it still counts as itself too, with ``Replace`` it does not. Outputs of several
inputs add up, and a negative total counts as zero (a negative factor is an allowance). Kueue's
``applyResourceTransformations`` (pkg/workload/workload.go) does the same with decimal
quantities; here every step is an exact fraction of the resource's base unit, rounded up to the
engine's integer units (milli-units for CPU) at the end.

Only quota sees the transformed requests: a pod set keeps what its pods ask of a node
(``PodSet.node_requests``) for placement, as Kueue places by the pod spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from kqueue.api.quantity import is_milli

from .types import PodSet, ResourceName, Workload


@dataclass(frozen=True, slots=True)
class Transformation:
    """One ``transformations[]`` entry; ``outputs`` per unit of the input, in base units."""

    input: ResourceName
    replace: bool = False
    multiply_by: ResourceName | None = None
    outputs: Mapping[ResourceName, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QuotaResources:
    """How requests are counted against quota; empty: as they are."""

    exclude_prefixes: tuple[str, ...] = ()
    transformations: Mapping[ResourceName, Transformation] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.exclude_prefixes or self.transformations)


def _exact(resource: str, amount: int) -> Fraction:
    return Fraction(amount, 1000) if is_milli(resource) else Fraction(amount)


def _units(resource: str, value: Fraction) -> int:
    scaled = value * 1000 if is_milli(resource) else value
    return -((-scaled.numerator) // scaled.denominator)


def quota_requests(
    requests: Mapping[ResourceName, int], rules: QuotaResources
) -> dict[ResourceName, int]:
    """One pod's ``requests`` as counted against quota under ``rules``."""
    kept = {
        r: n for r, n in requests.items()
        if not any(r.startswith(p) for p in rules.exclude_prefixes)
    }
    if not any(r in rules.transformations for r in kept):
        return dict(kept)
    retained: dict[ResourceName, Fraction] = {}
    generated: dict[ResourceName, Fraction] = {}
    for r, n in kept.items():
        tr = rules.transformations.get(r)
        if tr is None:
            retained[r] = _exact(r, n)
            continue
        base = _exact(r, n)
        if tr.multiply_by is not None and tr.multiply_by in kept:
            base *= _exact(tr.multiply_by, kept[tr.multiply_by])
        for out, factor in tr.outputs.items():
            generated[out] = generated.get(out, Fraction(0)) + base * factor
        if not tr.replace:
            retained[r] = _exact(r, n)
    total = dict(retained)
    for out, amount in generated.items():
        total[out] = total.get(out, Fraction(0)) + max(amount, Fraction(0))
    return {r: _units(r, v) for r, v in sorted(total.items())}


def apply(wl: Workload, rules: QuotaResources) -> Workload:
    """``wl`` with each pod set's ``requests`` counted under ``rules`` and what its pods ask of
    a node kept in ``node_requests``. DRA devices (already quota resources) are left as they
    are, as Kueue adds them after transforming."""
    if not rules:
        return wl
    pod_sets: list[PodSet] = []
    for ps in wl.pod_sets:
        node = ps.node_requests if ps.node_requests is not None else ps.requests
        containers = {r: n - ps.devices.get(r, 0) for r, n in node.items()}
        counted = quota_requests({r: n for r, n in containers.items() if n > 0}, rules)
        for r, n in ps.devices.items():
            counted[r] = counted.get(r, 0) + n
        if counted == dict(node):
            pod_sets.append(replace(ps, requests=dict(node), node_requests=None))
        else:
            pod_sets.append(replace(ps, requests=counted, node_requests=dict(node)))
    return replace(wl, pod_sets=tuple(pod_sets))
