"""The result of flavor assignment: flavors per pod set and resource, modes, usage, and why.

Produced by ``flavor.FlavorAssigner``, read by the cycle, the preemptor and the explanations.
Everything here is immutable; the structured attempts are what ``explain`` turns into details.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .tas.placement import Placement
from .types import (
    ClusterQueueName,
    FlavorName,
    Mode,
    PendingReason,
    PodSetName,
    ResourceName,
    TopologyAssignment,
    Usage,
)


@dataclass(frozen=True, slots=True)
class Shortfall:
    """One resource of one flavor that did not fit, with the numbers."""

    resource: ResourceName
    # What this pod set needs plus what earlier pod sets of the workload already took from
    # the same flavor in this assignment.
    requested: int
    previously_assigned: int
    # Unused quota reachable now (including what may be borrowed now).
    available: int
    # The most ever reachable: nominal quota plus what borrowing limits allow.
    max_capacity: int
    # The ClusterQueue's own nominal quota, and what it may borrow on top of it.
    nominal: int
    borrowable: int

    @property
    def exceeds_max(self) -> bool:
        return self.requested > self.max_capacity

    @property
    def missing(self) -> int:
        return max(0, self.requested - max(0, self.available))


@dataclass(frozen=True, slots=True)
class FlavorAttempt:
    """One flavor tried for one resource group of a pod set."""

    flavor: FlavorName
    mode: Mode
    borrow: int = 0
    # Set when the flavor could not be used at all for this pod set.
    reason: PendingReason | None = None
    # Why the flavor was skipped before looking at quota (taint, affinity, missing flavor).
    skipped: str | None = None
    messages: tuple[str, ...] = ()
    shortfalls: tuple[Shortfall, ...] = ()


@dataclass(frozen=True, slots=True)
class FlavorChoice:
    flavor: FlavorName
    mode: Mode
    borrow: int
    # Index of the last flavor tried in the resource group, -1 when the whole list was walked;
    # the next attempt resumes after it (Kueue's LastTriedFlavorIdx).
    tried_index: int = -1


@dataclass(frozen=True, slots=True)
class PodSetResult:
    name: PodSetName
    count: int
    # Totals at ``count`` (pods included when the ClusterQueue covers ``pods``).
    requests: Mapping[ResourceName, int]
    flavors: Mapping[ResourceName, FlavorChoice]
    # Kueue's status reasons; non-empty means "not a plain Fit".
    reasons: tuple[str, ...] = ()
    error: str | None = None
    attempts: tuple[FlavorAttempt, ...] = ()
    no_fit_reason: PendingReason | None = None
    # With a topology-aware flavor: where the pods go (tas/fit.py).
    topology: TopologyAssignment | None = None
    # When the placement failed: the domains of the requested level and what each fits.
    placement: Placement | None = None

    def mode(self) -> Mode:
        if self.error is not None:
            return Mode.NO_FIT
        if not self.reasons:
            return Mode.FIT
        if not self.flavors:
            return Mode.NO_FIT
        return min(choice.mode for choice in self.flavors.values())

    def message(self) -> str:
        if self.error is not None:
            return self.error
        return ", ".join(sorted(self.reasons))


@dataclass(frozen=True, slots=True)
class Assignment:
    # The ClusterQueue the assignment is for (where the workload waits).
    cluster_queue: ClusterQueueName
    pod_sets: tuple[PodSetResult, ...]
    # Height of the smallest cohort subtree that fits the usage (0: no borrowing).
    borrowing: int = 0
    usage: Usage = field(default_factory=dict)
    no_fit_reason: PendingReason | None = None

    def mode(self) -> Mode:
        """The worst mode over pod sets (NoFit when nothing was assigned)."""
        if not self.pod_sets:
            return Mode.NO_FIT
        return min(ps.mode() for ps in self.pod_sets)

    def borrows(self) -> bool:
        return self.borrowing > 0

    def counts(self) -> tuple[int, ...]:
        return tuple(ps.count for ps in self.pod_sets)

    def message(self) -> str:
        """Kueue's inadmissible message, e.g. ``couldn't assign flavors to pod set main: ...``."""
        parts: list[str] = []
        for ps in self.pod_sets:
            if ps.mode() == Mode.FIT and ps.error is None:
                continue
            if ps.error is not None:
                return f"failed to assign flavors to pod set {ps.name}: {ps.error}"
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.message()}")
        return "; ".join(parts)

    def last_tried(self) -> tuple[dict[ResourceName, int], ...]:
        return tuple(
            {res: choice.tried_index for res, choice in ps.flavors.items()} for ps in self.pod_sets
        )
