"""Parity with Kueue's admission fair sharing arithmetic tests
(``pkg/util/admissionfairsharing/admission_fair_sharing_test.go``), each under its Kueue name.

Kueue computes with float64 factors and quantities rounded down to 10^-9; kqueue with decimal
factors (34 digits) and integer nano-units rounded down, so the expected values are Kueue's.
``TestResolveLQWeight``'s cases are the adapter's (a missing or unset weight is 1):
tests/api/test_config_admission_fair_sharing.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

from kqueue.api.quantity import Quantity
from kqueue.engine.fairness.usage_ledger import (
    AdmissionFairSharingConfig,
    FairUsage,
    LedgerEntry,
    UsageLedger,
    decayed,
)
from kqueue.engine.types import LocalQueueKey, ResourceName, WorkloadKey

LQ = LocalQueueKey("ns/lq")
LONG_HALF_LIFE = timedelta(hours=168)
SAMPLING = timedelta(minutes=5)
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def nanos(resources: dict[str, str]) -> dict[ResourceName, int]:
    return {ResourceName(r): Quantity(v).nanos for r, v in resources.items()}


def test_calculate_entry_penalty_with_dra_resources() -> None:
    """TestCalculateEntryPenaltyWithDRAResources."""
    ledger = UsageLedger(AdmissionFairSharingConfig(timedelta(minutes=10), SAMPLING))
    ledger.push_penalty(LQ, WorkloadKey("ns/w"), nanos({"cpu": "4", "gpu-logical": "2"}), T0)
    penalty = ledger.entry(LQ).pending()  # type: ignore[union-attr]
    assert penalty[ResourceName("cpu")] > 0 and penalty[ResourceName("gpu-logical")] > 0


def test_calculate_entry_penalty_with_long_half_life() -> None:
    """TestCalculateEntryPenaltyWithLongHalfLife."""
    ledger = UsageLedger(AdmissionFairSharingConfig(LONG_HALF_LIFE, SAMPLING))
    ledger.push_penalty(LQ, WorkloadKey("ns/w"), nanos({"cpu": "2", "nvidia.com/gpu": "1"}), T0)
    penalty = ledger.entry(LQ).pending()  # type: ignore[union-attr]
    assert penalty[ResourceName("cpu")] > 0 and penalty[ResourceName("nvidia.com/gpu")] > 0


def test_calculate_decayed_consumed_accumulates_sub_milli() -> None:
    """TestCalculateDecayedConsumedAccumulatesSubMilli: a 5-minute sample of a 168h half-life
    adds less than a milli-unit, and still grows every time."""
    usage = nanos({"cpu": "2", "nvidia.com/gpu": "1"})
    consumed: dict[ResourceName, int] = {}
    previous = {r: 0 for r in usage}
    for _ in range(3):
        consumed = decayed(consumed, usage, SAMPLING, LONG_HALF_LIFE)
        for r in usage:
            assert consumed[r] > previous[r]
        previous = dict(consumed)


def test_calculate_decayed_consumed_converges_to_usage() -> None:
    """TestCalculateDecayedConsumedConvergesToUsage: 1 - 0.5^n of the way after n half-lives
    (2016 samples each), within a milli-unit, never above the usage."""
    usage = nanos({"cpu": "2"})
    consumed: dict[ResourceName, int] = {}
    want = {1: "1", 2: "1500m", 3: "1750m"}
    for half_lives in (1, 2, 3):
        for _ in range(2016):
            consumed = decayed(consumed, usage, SAMPLING, LONG_HALF_LIFE)
        got = consumed[ResourceName("cpu")]
        assert abs(got - Quantity(want[half_lives]).nanos) <= Quantity("1m").nanos
        assert got <= usage[ResourceName("cpu")]


@pytest.mark.parametrize("size", ["16Gi", "1Ti", "64Ti"])
def test_calculate_decayed_consumed_keeps_large_quantities_positive(size: str) -> None:
    """TestCalculateDecayedConsumedKeepsLargeQuantitiesPositive."""
    consumed = decayed({}, nanos({"memory": size}), SAMPLING, LONG_HALF_LIFE)
    assert consumed[ResourceName("memory")] > 0


USAGE_CASES = [
    # name, consumed, penalty, LocalQueue weight, resource weights, want
    ("DRA resource with default weight", {"gpu-logical": "2"}, {}, "1", {}, 2),
    ("DRA resource with explicit weight", {"gpu-logical": "2"}, {}, "1", {"gpu-logical": "3"}, 6),
    ("mixed CPU and DRA resources", {"cpu": "4", "gpu-logical": "2"}, {}, "1",
     {"cpu": "1", "gpu-logical": "5"}, 14),
    ("DRA resource with weight zero contributes nothing", {"gpu-logical": "10"}, {}, "1",
     {"gpu-logical": "0"}, 0),
    ("DRA resource in penalty only", {}, {"gpu-logical": "3"}, "1", {}, 3),
    ("DRA resource in both consumed and penalty", {"gpu-logical": "2"}, {"gpu-logical": "1"}, "2",
     {"gpu-logical": "4"}, 6),
]


@pytest.mark.parametrize(
    ("consumed", "penalty", "lq_weight", "weights", "want"),
    [pytest.param(*c[1:], id=c[0]) for c in USAGE_CASES],
)
def test_calculate_usage_with_dra(
    consumed: dict[str, str], penalty: dict[str, str], lq_weight: str,
    weights: dict[str, str], want: int,
) -> None:
    """TestCalculateUsageWithDRA."""
    cfg = AdmissionFairSharingConfig(
        LONG_HALF_LIFE, SAMPLING, {ResourceName(r): Fraction(w) for r, w in weights.items()}
    )
    ledger = UsageLedger(cfg)
    ledger.entries[LQ] = LedgerEntry(
        consumed=nanos(consumed), penalties={WorkloadKey("ns/w"): nanos(penalty)} if penalty else {}
    )
    assert ledger.usage(LQ, Fraction(lq_weight)) == FairUsage(False, Fraction(want))
