"""The API's enums (kqueue/api/v1alpha1/enums.py, which the engine imports) and the Literal wire
types the models validate name the same values: a value added to one and not the other fails
here, not in a cluster."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, get_args

import pytest

from kqueue.api.v1alpha1 import clusterqueue as cq
from kqueue.api.v1alpha1 import enums
from kqueue.api.v1alpha1 import workload as wl
from kqueue.engine import types as engine_types

# (wire type, enum, whether the wire type accepts every value of the enum)
PAIRS: list[tuple[Any, type[StrEnum], bool]] = [
    (cq.QueueingStrategy, enums.QueueingStrategy, True),
    (cq.StopPolicy, enums.StopPolicy, True),
    (cq.FlavorFungibilityPolicy, enums.FungibilityPolicy, True),
    (cq.FlavorFungibilityPreference, enums.FungibilityPreference, True),
    (cq.PreemptionPolicy, enums.PreemptionPolicy, True),
    (cq.WithinClusterQueuePolicy, enums.PreemptionPolicy, False),
    (cq.ReclaimWithinCohortPolicy, enums.PreemptionPolicy, False),
    (cq.BorrowWithinCohortPolicy, enums.BorrowWithinCohortPolicy, True),
    (cq.PreemptionOrder, enums.PreemptionOrder, True),
    (wl.Preemptibility, enums.Preemptibility, True),
]


@pytest.mark.parametrize(("wire", "enum", "every"), PAIRS, ids=lambda x: getattr(x, "__name__", ""))
def test_wire_type_and_enum_name_the_same_values(
    wire: Any, enum: type[StrEnum], every: bool
) -> None:
    wire_values = set(get_args(wire))
    enum_values = {m.value for m in enum}
    if every:
        assert wire_values == enum_values
    else:
        assert wire_values < enum_values, f"{wire_values - enum_values} missing from {enum}"


def test_the_engine_uses_the_api_enums() -> None:
    for enum in {e for _, e, _ in PAIRS}:
        assert getattr(engine_types, enum.__name__) is enum
