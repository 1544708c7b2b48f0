"""``spec.flavorFungibility.preference``: accepted only with both policies TryNextFlavor.

The cases are Kueue's (``pkg/webhooks/clusterqueue_webhook_test.go`` TestValidateClusterQueue),
with their names; Kueue refuses them with a CEL rule on ``flavorFungibility`` and its webhook
names ``spec.flavorFungibility.preference``, as kqueue's validation does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kqueue.api.kueue import from_kueue
from kqueue.api.v1alpha1 import ClusterQueue, parse_object, validate
from kqueue.engine import from_api
from kqueue.engine.types import FungibilityPreference


def _cq(fungibility: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {"flavorFungibility": fungibility},
    }


@dataclass(frozen=True)
class Case:
    name: str
    fungibility: dict[str, Any]
    want_detail: str | None = None


CASES = [
    Case(
        "flavorFungibility preference set but whenCanPreempt != TryNextFlavor",
        {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch",
         "preference": "BorrowingOverPreemption"},
        "preference 'BorrowingOverPreemption' requires both whenCanBorrow and whenCanPreempt to "
        "be TryNextFlavor, got whenCanBorrow 'TryNextFlavor' and whenCanPreempt 'MayStopSearch'",
    ),
    Case(
        "flavorFungibility preference set but whenCanBorrow != TryNextFlavor",
        {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch",
         "preference": "BorrowingOverPreemption"},
        "preference 'BorrowingOverPreemption' requires both whenCanBorrow and whenCanPreempt to "
        "be TryNextFlavor, got whenCanBorrow 'MayStopSearch' and whenCanPreempt 'MayStopSearch'",
    ),
    Case(
        "flavorFungibility preference BorrowingOverPreemption with both TryNextFlavor is valid",
        {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
         "preference": "BorrowingOverPreemption"},
    ),
    Case(
        "flavorFungibility preference PreemptionOverBorrowing with both TryNextFlavor is valid",
        {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
         "preference": "PreemptionOverBorrowing"},
    ),
    Case(
        "flavorFungibility preference PreemptionOverBorrowing but whenCanBorrow != TryNextFlavor",
        {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor",
         "preference": "PreemptionOverBorrowing"},
        "preference 'PreemptionOverBorrowing' requires both whenCanBorrow and whenCanPreempt to "
        "be TryNextFlavor, got whenCanBorrow 'MayStopSearch' and whenCanPreempt 'TryNextFlavor'",
    ),
    # kqueue's: whenCanBorrow defaults to MayStopSearch, so a preference alone is refused too.
    Case(
        "preference alone: whenCanBorrow defaults to MayStopSearch",
        {"preference": "PreemptionOverBorrowing"},
        "preference 'PreemptionOverBorrowing' requires both whenCanBorrow and whenCanPreempt to "
        "be TryNextFlavor, got whenCanBorrow 'MayStopSearch' and whenCanPreempt 'TryNextFlavor'",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_preference_needs_both_policies_try_next_flavor(case: Case) -> None:
    cq = ClusterQueue.model_validate(_cq(case.fungibility))
    errors = validate(cq)
    if case.want_detail is None:
        assert errors == []
        return
    assert [(e.path, e.message) for e in errors] == [
        ("spec.flavorFungibility.preference", case.want_detail)
    ]


def test_unknown_preference_is_refused_naming_the_field() -> None:
    cq = _cq({"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
              "preference": "Cheapest"})
    with pytest.raises(Exception) as info:
        parse_object(cq)
    assert "spec.flavorFungibility.preference" in str(info.value)


def test_crd_carries_kueues_cel_rule() -> None:
    schema = ClusterQueue.model_json_schema(by_alias=True)
    rules = [
        r["rule"]
        for d in schema.get("$defs", {}).values()
        for r in d.get("x-kubernetes-validations", [])
    ]
    assert (
        "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && "
        "self.whenCanPreempt == 'TryNextFlavor')"
    ) in rules


def test_kueue_cluster_queue_keeps_its_preference() -> None:
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team"},
        "spec": {
            "flavorFungibility": {
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing",
            }
        },
    }
    out, warnings = from_kueue(doc)
    assert warnings == []
    assert out["spec"]["flavorFungibility"]["preference"] == "PreemptionOverBorrowing"
    cq = parse_object(out)
    assert isinstance(cq, ClusterQueue)
    spec = from_api.cluster_queue(cq)
    assert spec.flavor_fungibility.preference is FungibilityPreference.PREEMPTION_OVER_BORROWING


def test_unset_preference_reaches_the_engine_as_none() -> None:
    cq = ClusterQueue.model_validate(_cq({}))
    assert from_api.cluster_queue(cq).flavor_fungibility.preference is None
