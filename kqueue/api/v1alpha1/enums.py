"""The API's enumerated fields as Python enums, for code that branches on them (the engine).

The wire types are the ``Literal`` aliases beside the models (``clusterqueue.py``,
``workload.py``): pydantic validates them, the CRDs list their values, and fields that accept
only some values (``withinClusterQueue`` has no ``Any``) say so. These enums are the same values
with names; ``tests/api/test_enums.py`` keeps the two equal, so that the engine, which imports
these (``kqueue/engine/types.py``), never restates a value.
"""

from __future__ import annotations

from enum import StrEnum


class QueueingStrategy(StrEnum):
    """``ClusterQueue.spec.queueingStrategy``."""

    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


class StopPolicy(StrEnum):
    """``spec.stopPolicy`` of a ClusterQueue or LocalQueue."""

    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class FungibilityPolicy(StrEnum):
    """``flavorFungibility.whenCanBorrow`` / ``whenCanPreempt``: v1beta2 values (v1beta1's
    ``Borrow``/``Preempt`` both became ``MayStopSearch``)."""

    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(StrEnum):
    """``flavorFungibility.preference``: which flavor wins when every one tried needs borrowing,
    preemption or both."""

    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


class PreemptionPolicy(StrEnum):
    """``preemption.withinClusterQueue`` and ``reclaimWithinCohort`` (each accepts a subset)."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    ANY = "Any"


class BorrowWithinCohortPolicy(StrEnum):
    """``preemption.borrowWithinCohort.policy``."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class PreemptionOrder(StrEnum):
    """``preemption.preemptionOrder`` (a kqueue extension)."""

    NEWEST = "Newest"
    OLDEST = "Oldest"
    # The candidate that loses the least work: the most recent of its admission and its last
    # checkpoint (annotation kqueue.io/last-checkpoint-time) first.
    LEAST_WORK_LOST = "LeastWorkLost"


class Preemptibility(StrEnum):
    """``Workload.spec.preemptibility`` and the ``kqueue.io/preemptibility`` label's meaning."""

    PREEMPTIBLE = "Preemptible"
    NON_PREEMPTIBLE = "NonPreemptible"
