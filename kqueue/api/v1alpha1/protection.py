"""ClusterQueue ``spec.preemption.protection``: a minimum admitted time before this queue's
workloads may be preempted, per preemption path (docs/contracts.md §6).

The same three paths as the Configuration's ``preemptionProtection`` (kqueue/api/config.py),
which a path set here overrides for this ClusterQueue's workloads as victims. Durations are Go
duration strings (kqueue/api/durations.py), kept as written and checked when read.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, Field, WithJsonSchema

from kqueue.api.durations import FORMS, DurationError, parse_duration
from kqueue.api.v1alpha1.base import KBase, kerror

DURATION_ALLOWED = f"{FORMS}, at least 0"


def _check_duration(value: str) -> str:
    try:
        negative = parse_duration(value) < timedelta(0)
    except DurationError:
        raise kerror(
            "duration", "{got} is not a duration", DURATION_ALLOWED, got=repr(value)
        ) from None
    if negative:
        raise kerror("duration", "{got} is negative", DURATION_ALLOWED, got=repr(value))
    return value


# A non-negative Go duration, as Kubernetes' metav1.Duration is written.
GoDuration = Annotated[
    str, AfterValidator(_check_duration), WithJsonSchema({"type": "string"})
]


def duration_of(value: str) -> timedelta:
    """A GoDuration (already checked) as a timedelta."""
    return parse_duration(value, allow_negative=False)


class MinAdmitDuration(KBase):
    """Protection on one preemption path."""

    min_admit_duration: GoDuration = Field(
        description="How long a workload stays admitted (from its current Admitted condition) "
        "before it may be preempted on this path, as a duration such as 10m or 1h30m. 0s: no "
        "protection on this path, whatever the Configuration says."
    )


class PreemptionProtection(KBase):
    """kqueue extension: minimum admitted times before this queue's workloads may be preempted.

    Each path set here overrides the Configuration's preemptionProtection for this ClusterQueue's
    workloads as victims; an unset path takes the Configuration's."""

    within_cluster_queue: MinAdmitDuration | None = Field(
        default=None,
        description="Guards preemption by workloads of this ClusterQueue (InClusterQueue).",
    )
    reclaim_within_cohort: MinAdmitDuration | None = Field(
        default=None,
        description="Guards reclaim by other ClusterQueues of the cohort (InCohortReclamation, "
        "InCohortReclaimWhileBorrowing).",
    )
    fair_sharing: MinAdmitDuration | None = Field(
        default=None,
        description="Guards fair-sharing preemption (InCohortFairSharing).",
    )
