"""Whether a workload's resources can run at all: Kueue's ValidateResources and
ValidateLimitRange (``pkg/workload/resources.go``), checked when it is nominated.

A container whose requests exceed its limits, or a container or pod outside the LimitRanges of
its namespace, could never start: the pods would be refused. Such a workload stays pending with
reason ``Misconfigured`` and a message naming the pod set, the container and the numbers, until
the workload or the LimitRanges change. Containers are checked as their pods will run: LimitRange
defaults first, then limits standing in for missing requests (``limitrange.with_defaults``).

Kueue names the container by its path (``spec.podSets[0].template.spec.containers[1]``);
kqueue names the pod set and the container, which is what the user wrote.
"""

from __future__ import annotations

from dataclasses import replace

from .dra import with_devices
from .limitrange import (
    BELOW_MIN,
    Summary,
    Violation,
    greater,
    pod_requests,
    validate,
    with_defaults,
)
from .resources import fmt
from .types import ContainerResources, PodSet, Workload

REQUESTS_EXCEED_LIMITS = "requests must not exceed its limits"
INVALID_RESOURCES = "resources validation failed"
INVALID_DEVICE_CLAIMS = "device claims cannot be counted against quota"
LIMIT_RANGE_UNSATISFIED = "resources didn't satisfy LimitRange constraints"


def effective_containers(ps: PodSet, summary: Summary) -> tuple[ContainerResources, ...]:
    return tuple(with_defaults(c, summary) for c in ps.containers)


def adjust(wl: Workload, summary: Summary) -> Workload:
    """``wl`` with each pod set's requests as its pods will have them (Kueue's AdjustResources):
    the namespace's LimitRange defaults, then limits for missing requests. Containers stay as
    written, so adjusting again for other LimitRanges (or none) starts from the same input.
    Pod sets known only by their requests are left as they are."""
    if not any(ps.containers for ps in wl.pod_sets):
        return wl
    pod_sets = tuple(
        replace(
            ps,
            requests=with_devices(
                {
                    r: n
                    for r, n in pod_requests(effective_containers(ps, summary), ps.overhead).items()
                    if r not in ps.dra_extended
                },
                ps.devices,
            ),
            node_requests=None,
        )
        if ps.containers
        else ps
        for ps in wl.pod_sets
    )
    return replace(wl, pod_sets=pod_sets)


def _where(ps: PodSet, c: ContainerResources | None) -> str:
    if c is None:
        return f"pod set {ps.name}"
    kind = "init container" if c.init else "container"
    return f"pod set {ps.name}, {kind} {c.name}"


def _numbers(amounts: tuple[tuple[str, int, int], ...], sign: str) -> str:
    return ", ".join(f"{r}: {fmt(v, r)} {sign} {fmt(bound, r)}" for r, v, bound in amounts)


def _requests_within_limits(ps: PodSet, containers: tuple[ContainerResources, ...]) -> list[str]:
    out: list[str] = []
    for c in [*(c for c in containers if c.init), *(c for c in containers if not c.init)]:
        over = greater(c.requests, c.limits)
        if over:
            numbers = _numbers(tuple((r, c.requests[r], c.limits[r]) for r in over), ">")
            out.append(f"{_where(ps, c)}: {REQUESTS_EXCEED_LIMITS} ({numbers})")
    return out


def _violation(ps: PodSet, v: Violation) -> str:
    sign = "<" if v.message == BELOW_MIN else ">"
    return f"{_where(ps, v.container)}: {v.message} ({_numbers(v.amounts, sign)})"


def misconfiguration(wl: Workload, summary: Summary) -> str | None:
    """Why ``wl`` can never run as it is, or None (Kueue's ValidateResources, then
    ValidateLimitRange: requests above limits are reported alone, as in Kueue)."""
    claims = [f"pod set {ps.name}: {ps.device_error}" for ps in wl.pod_sets if ps.device_error]
    if claims:
        return f"{INVALID_DEVICE_CLAIMS}: {'; '.join(claims)}"
    effective = [(ps, effective_containers(ps, summary)) for ps in wl.pod_sets]
    invalid = [m for ps, cs in effective for m in _requests_within_limits(ps, cs)]
    if invalid:
        return f"{INVALID_RESOURCES}: {'; '.join(invalid)}"
    if not summary.present:
        return None
    broken = [
        _violation(ps, v) for ps, cs in effective if cs for v in validate(cs, ps.overhead, summary)
    ]
    if broken:
        return f"{LIMIT_RANGE_UNSATISFIED}: {'; '.join(broken)}"
    return None
