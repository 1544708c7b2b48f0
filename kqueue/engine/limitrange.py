"""A namespace's LimitRanges as Kueue reads them (its ``pkg/util/limitrange``).

All LimitRanges of a namespace are summarized per type: the lowest ``max``, the highest ``min``,
and the first ``default``/``defaultRequest`` met (LimitRanges taken in name order, as the API
server lists them). Container defaults fill in what a container leaves out, as the LimitRanger
admission plugin will do to its pods; then the summary bounds each container (the larger of
request and limit against ``max``, the smaller against ``min``) and each pod (its total
requests, with init containers and overhead, against the Pod ``max``/``min``). Only resources
both sides name are compared, as in Kueue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from .types import ContainerResources, LimitRangeItem, LimitType, ResourceName

Amounts = Mapping[ResourceName, int]

ABOVE_MAX = "requests must not be above the limitRange max"
BELOW_MIN = "requests must not be below the limitRange min"


@dataclass(frozen=True, slots=True)
class Summary:
    """The summarized LimitRanges of one namespace; empty items when it has none of a type."""

    container: LimitRangeItem = field(
        default_factory=lambda: LimitRangeItem(LimitType.CONTAINER)
    )
    pod: LimitRangeItem = field(default_factory=lambda: LimitRangeItem(LimitType.POD))
    # Whether any LimitRange of either type exists (Kueue checks nothing without one).
    present: bool = False


EMPTY = Summary()


def _merge(
    a: Amounts, b: Amounts, keep: Callable[[int, int], int] | None
) -> dict[ResourceName, int]:
    """Kueue's mergeResourceList: all keys of both; on a clash ``keep`` decides (None: a's)."""
    out = dict(a)
    for k, v in b.items():
        if k not in out:
            out[k] = v
        elif keep is not None:
            out[k] = keep(out[k], v)
    return out


def keep_first(a: Amounts, b: Amounts) -> dict[ResourceName, int]:
    return _merge(a, b, None)


def _add(summary: LimitRangeItem, item: LimitRangeItem) -> LimitRangeItem:
    return LimitRangeItem(
        summary.type,
        max=_merge(summary.max, item.max, min),
        min=_merge(summary.min, item.min, max),
        default=keep_first(summary.default, item.default),
        default_request=keep_first(summary.default_request, item.default_request),
    )


def summarize(ranges: Iterable[Iterable[LimitRangeItem]]) -> Summary:
    """Kueue's Summarize over the LimitRanges (each an iterable of its items), in order."""
    container = LimitRangeItem(LimitType.CONTAINER)
    pod = LimitRangeItem(LimitType.POD)
    present = False
    for items in ranges:
        for item in items:
            present = True
            if item.type == LimitType.CONTAINER:
                container = _add(container, item)
            elif item.type == LimitType.POD:
                pod = _add(pod, item)
    return Summary(container, pod, present)


def with_defaults(c: ContainerResources, summary: Summary) -> ContainerResources:
    """The container as its pod will run it: LimitRange defaults for what it leaves out, then
    its limits as requests where it has none (Kueue's handlePodLimitRange and
    UseLimitsAsMissingRequestsInPod, in that order)."""
    limits = keep_first(c.limits, summary.container.default)
    requests = keep_first(c.requests, summary.container.default_request)
    requests = keep_first(requests, limits)
    return replace(c, requests=requests, limits=limits)


def pod_requests(
    containers: Iterable[ContainerResources], overhead: Amounts
) -> dict[ResourceName, int]:
    """Kubernetes' PodRequests: the larger of the main containers plus sidecars and the peak of
    the init containers (with the sidecars started before each), plus the overhead."""
    total: dict[ResourceName, int] = {}
    sidecars: dict[ResourceName, int] = {}
    init_peak: dict[ResourceName, int] = {}
    for c in containers:
        if not c.init:
            _sum_into(total, c.requests)
            continue
        if c.sidecar:
            _sum_into(total, c.requests)
            _sum_into(sidecars, c.requests)
            during = dict(sidecars)
        else:
            during = dict(c.requests)
            _sum_into(during, sidecars)
        for k, v in during.items():
            init_peak[k] = max(init_peak.get(k, v), v)
    for k, v in init_peak.items():
        total[k] = max(total.get(k, v), v)
    _sum_into(total, overhead)
    return total


def _sum_into(into: dict[ResourceName, int], other: Amounts) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def greater(a: Amounts, b: Amounts) -> list[ResourceName]:
    """Kueue's GreaterKeys: resources named by both where ``a`` is greater, sorted."""
    return sorted(k for k, v in a.items() if k in b and v > b[k])


@dataclass(frozen=True, slots=True)
class Violation:
    """One bound broken: by a container (``container`` set) or by the whole pod."""

    container: ContainerResources | None
    message: str
    # (resource, the amount compared, the bound)
    amounts: tuple[tuple[ResourceName, int, int], ...]


def validate(
    containers: Iterable[ContainerResources], overhead: Amounts, summary: Summary
) -> list[Violation]:
    """Kueue's Summary.ValidatePodSpec on containers that already have their defaults: init
    containers first, then the main ones, then the pod."""
    cs = list(containers)
    out: list[Violation] = []
    for c in [*(c for c in cs if c.init), *(c for c in cs if not c.init)]:
        high = _merge(c.requests, c.limits, max)
        low = _merge(c.requests, c.limits, min)
        over = greater(high, summary.container.max)
        if over:
            out.append(
                Violation(c, ABOVE_MAX, tuple((r, high[r], summary.container.max[r]) for r in over))
            )
        under = greater(summary.container.min, low)
        if under:
            out.append(
                Violation(c, BELOW_MIN, tuple((r, low[r], summary.container.min[r]) for r in under))
            )
    total = pod_requests(cs, overhead)
    over = greater(total, summary.pod.max)
    if over:
        out.append(
            Violation(None, ABOVE_MAX, tuple((r, total[r], summary.pod.max[r]) for r in over))
        )
    under = greater(summary.pod.min, total)
    if under:
        out.append(
            Violation(None, BELOW_MIN, tuple((r, total[r], summary.pod.min[r]) for r in under))
        )
    return out
