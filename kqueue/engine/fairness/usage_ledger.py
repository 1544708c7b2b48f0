"""Admission fair sharing: the LocalQueues of one ClusterQueue ordered by their decayed usage.

Kueue's AdmissionFairSharing (pkg/cache/queue/afs, pkg/util/admissionfairsharing). A ClusterQueue
with ``admissionScope.admissionMode: UsageBasedAdmissionFairSharing`` takes its next head from
the LocalQueue whose *weighted usage* is lowest; within a LocalQueue the usual order (priority,
then queue-order time) holds. The usage of a LocalQueue is

    sum over resources of (consumed[r] + pending penalty[r]) x resourceWeights[r]  /  weight

where ``consumed`` is an exponentially decaying average of what its admitted workloads hold:
every ``usageSamplingInterval`` (and when an admission is settled) it becomes
``old x 0.5^(elapsed/halfLife) + admitted x (1 - 0.5^(elapsed/halfLife))``. Right after an
admission the average has barely moved, so each admission adds an *entry penalty*: its requests
times ``1 - 0.5^(interval/halfLife)``, pending until it is settled into ``consumed`` (at the next
cycle). A weight of 0 puts the queue after every queue with a positive weight.

Exactness: amounts are integers in nano-units of the resource's base unit (Kueue rounds its
products down to 10^-9 as well), so the status is an exact quantity. The decay factor is the
only irrational number: it is computed in decimal arithmetic at 34 significant digits (never
binary floating point) and each product rounded down to a nano-unit, which is deterministic on
every platform. Usages compare as exact fractions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_FLOOR, Context, Decimal
from fractions import Fraction

from kqueue.api.quantity import is_milli

from ..types import LocalQueueKey, ResourceName, Usage, WorkloadKey

NANO = 10**9
_CTX = Context(prec=34, rounding=ROUND_FLOOR)

# Per resource, in nano-units of its base unit.
NanoResources = dict[ResourceName, int]


@dataclass(frozen=True, slots=True)
class AdmissionFairSharingConfig:
    """The Configuration's admissionFairSharing: when given to the engine, AFS is on."""

    usage_half_life: timedelta = timedelta(0)
    usage_sampling_interval: timedelta = timedelta(minutes=5)
    # Weight per resource (missing: 1).
    resource_weights: Mapping[ResourceName, Fraction] = field(default_factory=dict)

    def weight_of(self, resource: ResourceName) -> Fraction:
        return self.resource_weights.get(resource, Fraction(1))


def _micros(d: timedelta) -> int:
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def alpha(elapsed: timedelta, half_life: timedelta) -> Decimal:
    """``1 - 0.5^(elapsed/halfLife)``: the weight of the new sample (Kueue's calculateAlphaRate);
    0 with a half-life of 0, as in Kueue."""
    h = _micros(half_life)
    if h <= 0:
        return Decimal(0)
    e = max(0, _micros(elapsed))
    keep = _CTX.power(Decimal("0.5"), _CTX.divide(Decimal(e), Decimal(h)))
    return _CTX.subtract(Decimal(1), keep)


def _scale(amounts: Mapping[ResourceName, int], factor: Decimal) -> NanoResources:
    out: NanoResources = {}
    for res, amount in amounts.items():
        scaled = int(_CTX.multiply(Decimal(amount), factor).to_integral_value(ROUND_FLOOR))
        if scaled:
            out[res] = scaled
    return out


def _add(a: Mapping[ResourceName, int], b: Mapping[ResourceName, int]) -> NanoResources:
    out = dict(a)
    for res, amount in b.items():
        total = out.get(res, 0) + amount
        if total:
            out[res] = total
        else:
            out.pop(res, None)
    return out


def decayed(
    old: Mapping[ResourceName, int],
    new: Mapping[ResourceName, int],
    elapsed: timedelta,
    half_life: timedelta,
) -> NanoResources:
    """Kueue's CalculateDecayedConsumed: ``old x (1 - a) + new x a``, a = alpha(elapsed)."""
    a = alpha(elapsed, half_life)
    return _add(_scale(old, _CTX.subtract(Decimal(1), a)), _scale(new, a))


def to_nanos(amount: int, resource: ResourceName) -> int:
    """kqueue's integer unit of ``resource`` (milli for CPU) in nano-units of its base unit."""
    return amount * (NANO // 1000 if is_milli(resource) else NANO)


def flatten(usage: Usage | Iterable[Mapping[ResourceName, int]]) -> NanoResources:
    """Per-(flavor, resource) usage, or per-resource request maps, summed per resource in
    nano-units (Kueue's FlattenFlavors)."""
    out: NanoResources = {}
    if isinstance(usage, dict):
        for (_, res), amount in usage.items():
            out[res] = out.get(res, 0) + to_nanos(amount, res)
    else:
        for requests in usage:
            for res, amount in requests.items():
                out[res] = out.get(res, 0) + to_nanos(amount, res)
    return {r: a for r, a in out.items() if a}


@dataclass(frozen=True, slots=True, order=True)
class FairUsage:
    """A LocalQueue's weighted usage; compares as Kueue's float (infinite sorts last)."""

    infinite: bool
    value: Fraction

    def __str__(self) -> str:
        if self.infinite:
            return "+Inf (weight 0)"
        return _short(self.value)

    def precise(self) -> float:
        """For metrics only (a Prometheus sample is a float): +Inf when infinite."""
        return math.inf if self.infinite else float(self.value)


def _short(x: Fraction) -> str:
    """Four significant digits, for messages (decimal arithmetic, no binary floats)."""
    if x.denominator == 1:
        return str(x.numerator)
    return f"{_CTX.divide(Decimal(x.numerator), Decimal(x.denominator)):.4g}"


@dataclass(slots=True)
class LedgerEntry:
    consumed: NanoResources = field(default_factory=dict)
    # None until the first sample: then it only starts the clock (Kueue's initialization).
    last_update: datetime | None = None
    penalties: dict[WorkloadKey, NanoResources] = field(default_factory=dict)
    # The LocalQueue's persisted status was folded in (once per engine).
    seeded: bool = False

    def pending(self) -> NanoResources:
        out: NanoResources = {}
        for p in self.penalties.values():
            out = _add(out, p)
        return out


class UsageLedger:
    """The decayed usage and pending entry penalties of every LocalQueue (Kueue's
    AfsUsageLedger). Pure: the caller gives ``now`` and the live admitted usage."""

    def __init__(self, config: AdmissionFairSharingConfig) -> None:
        self.config = config
        self.entries: dict[LocalQueueKey, LedgerEntry] = {}

    def entry(self, lq: LocalQueueKey) -> LedgerEntry | None:
        return self.entries.get(lq)

    def seed(
        self, lq: LocalQueueKey, consumed: Mapping[ResourceName, int], last_update: datetime | None
    ) -> None:
        """Fold the LocalQueue's persisted ``consumedResources`` in, once."""
        e = self.entries.get(lq)
        if e is None:
            self.entries[lq] = LedgerEntry(dict(consumed), last_update, seeded=True)
        elif not e.seeded:
            e.consumed = _add(e.consumed, consumed)
            e.seeded = True

    def forget(self, lq: LocalQueueKey) -> None:
        self.entries.pop(lq, None)

    def push_penalty(
        self, lq: LocalQueueKey, wl: WorkloadKey, requests: NanoResources, now: datetime
    ) -> None:
        """Charge an admission at once (Kueue's entry penalty); re-pushing replaces."""
        a = alpha(self.config.usage_sampling_interval, self.config.usage_half_life)
        e = self.entries.setdefault(lq, LedgerEntry(last_update=now))
        e.penalties[wl] = _scale(requests, a)

    def drop_penalty(self, lq: LocalQueueKey, wl: WorkloadKey) -> None:
        e = self.entries.get(lq)
        if e is not None:
            e.penalties.pop(wl, None)

    def has_penalty(self, lq: LocalQueueKey, wl: WorkloadKey) -> bool:
        e = self.entries.get(lq)
        return e is not None and wl in e.penalties

    def _decay(self, e: LedgerEntry, admitted: NanoResources, now: datetime) -> None:
        if self.config.usage_half_life <= timedelta(0):
            # Kueue resets the usage when nothing is remembered.
            e.consumed = {}
        elif e.last_update is not None:
            elapsed = max(timedelta(0), now - e.last_update)
            e.consumed = decayed(e.consumed, admitted, elapsed, self.config.usage_half_life)
        if e.last_update is None or now > e.last_update:
            e.last_update = now

    def settle(
        self, lq: LocalQueueKey, wl: WorkloadKey, admitted: NanoResources, now: datetime
    ) -> NanoResources:
        """The admission of ``wl`` took effect: decay to ``now`` with the LocalQueue's live
        admitted usage and fold the workload's penalty into ``consumed`` (Kueue's
        updateAfsConsumedUsage). Returns what was folded."""
        e = self.entries.setdefault(lq, LedgerEntry(last_update=now))
        self._decay(e, admitted, now)
        penalty = e.penalties.pop(wl, {})
        if self.config.usage_half_life <= timedelta(0):
            return {}
        e.consumed = _add(e.consumed, penalty)
        return penalty

    def unsettle(self, lq: LocalQueueKey, folded: NanoResources) -> None:
        """Take back a folded penalty (the admission's write failed after all), never below 0."""
        e = self.entries.get(lq)
        if e is None:
            return
        e.consumed = {
            r: a for r, a in ((r, a - min(a, folded.get(r, 0))) for r, a in e.consumed.items()) if a
        }

    def due(self, lq: LocalQueueKey, now: datetime) -> bool:
        e = self.entries.get(lq)
        if e is None or e.last_update is None:
            return True
        return now - e.last_update >= self.config.usage_sampling_interval

    def sample(self, lq: LocalQueueKey, admitted: NanoResources, now: datetime) -> None:
        """The periodic update (Kueue's LocalQueue reconcile every usageSamplingInterval)."""
        e = self.entries.setdefault(lq, LedgerEntry())
        self._decay(e, admitted, now)

    def next_sample(self) -> datetime | None:
        times = [
            e.last_update + self.config.usage_sampling_interval
            for e in self.entries.values()
            if e.last_update is not None
        ]
        return min(times, default=None)

    def usage(self, lq: LocalQueueKey, weight: Fraction) -> FairUsage:
        """Kueue's CalculateUsage: resource-weighted consumed + pending, over the weight."""
        e = self.entries.get(lq)
        total = Fraction(0)
        if e is not None:
            for res, amount in _add(e.consumed, e.pending()).items():
                total += Fraction(amount, NANO) * self.config.weight_of(res)
        if weight <= 0:
            return FairUsage(True, total)
        return FairUsage(False, total / weight)
