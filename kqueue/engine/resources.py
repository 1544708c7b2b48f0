"""Exact integer arithmetic on usages keyed by (flavor, resource).

Usages are plain dicts; a missing key is zero. Functions return new dicts unless their name says
they work in place, so a usage handed to a decision is never changed behind its back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kqueue.api.quantity import format_quantity

from .types import FlavorResource, PodSet, ResourceName, Usage


def add_into(target: Usage, other: Mapping[FlavorResource, int]) -> None:
    """``target += other``, in place."""
    for fr, amount in other.items():
        target[fr] = target.get(fr, 0) + amount


def sub_into(target: Usage, other: Mapping[FlavorResource, int]) -> None:
    """``target -= other``, in place; keys that reach zero are dropped."""
    for fr, amount in other.items():
        left = target.get(fr, 0) - amount
        if left:
            target[fr] = left
        else:
            target.pop(fr, None)


def total(usages: Iterable[Mapping[FlavorResource, int]]) -> Usage:
    out: Usage = {}
    for u in usages:
        add_into(out, u)
    return out


def pod_set_requests(pod_set: PodSet, count: int | None = None) -> dict[ResourceName, int]:
    """Requests of a pod set at ``count`` pods (its full count by default), zero entries kept.

    Per-pod requests times the count: exact, unlike Kueue's divide-then-multiply rescaling.
    """
    n = pod_set.count if count is None else count
    return {res: per_pod * n for res, per_pod in sorted(pod_set.requests.items())}


def fmt(amount: int, resource: str) -> str:
    """Print an amount of ``resource`` the way Kubernetes writes quantities."""
    return format_quantity(amount, resource)


def fmt_usage(usage: Mapping[FlavorResource, int]) -> str:
    parts = [f"{f}/{r}={fmt(v, r)}" for (f, r), v in sorted(usage.items())]
    return "{" + ", ".join(parts) + "}"
