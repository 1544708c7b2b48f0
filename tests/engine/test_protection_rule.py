"""The preemption protection rule of one candidate (preemption/protection.py, Protection.check),
and where its start comes from: the workload's current ``Admitted`` condition (from_api).

Named table cases: which setting applies (the victim's ClusterQueue path by path, else the
Configuration's), the boundary at the end of the protection, and the workloads never protected
(not admitted yet, already being evicted)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from kqueue.api.v1alpha1 import Workload as ApiWorkload
from kqueue.api.v1alpha1 import format_time, parse_object
from kqueue.engine import from_api
from kqueue.engine.preemption.protection import Protection
from kqueue.engine.types import EPOCH, ClusterQueueName, PreemptionReason, ProtectionConfig
from kqueue.engine.workload import AdmittedWorkload, make_info

RECLAIM = PreemptionReason.IN_COHORT_RECLAMATION
WHILE_BORROWING = PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
WITHIN = PreemptionReason.IN_CLUSTER_QUEUE
FAIR = PreemptionReason.IN_COHORT_FAIR_SHARING
MIN = timedelta(minutes=1)


def _at(minutes: float) -> datetime:
    return EPOCH + timedelta(minutes=minutes)


def _api_workload(conditions: dict[str, tuple[str, float]]) -> ApiWorkload:
    """A Workload holding 1 cpu in ClusterQueue ``dev``; ``conditions``: type -> (status,
    minute of its lastTransitionTime)."""
    doc: dict[str, Any] = {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "batch", "namespace": "dev", "uid": "u"},
        "spec": {"queueName": "q", "podSets": [{
            "name": "main", "count": 1,
            "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1"}}},
            ]}},
        }]},
        "status": {
            "admission": {"clusterQueue": "dev", "podSetAssignments": [{
                "name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"},
                "count": 1,
            }]},
            "conditions": [
                {"type": kind, "status": status, "reason": kind, "message": "",
                 "lastTransitionTime": format_time(_at(minute))}
                for kind, (status, minute) in conditions.items()
            ],
        },
    }
    obj = parse_object(doc)
    assert isinstance(obj, ApiWorkload)
    return obj


def _admitted(conditions: dict[str, tuple[str, float]]) -> AdmittedWorkload:
    wl = from_api.workload(_api_workload(conditions))
    assert wl.admission is not None
    return AdmittedWorkload.of(make_info(wl, {}), wl.admission)


# Reserved at 0, admitted at 3 (it waited for admission checks in between).
ADMITTED_AT_3 = {"QuotaReserved": ("True", 0), "Admitted": ("True", 3)}


@dataclass(frozen=True)
class Case:
    name: str
    now: float  # minute
    reason: PreemptionReason
    configuration: ProtectionConfig | None
    own: ProtectionConfig | None  # the victim's ClusterQueue spec.preemption.protection
    want_until: float | None  # minute the protection ends; None: not protected
    want_source: str = "the Configuration"
    conditions: dict[str, tuple[str, float]] | None = None
    evicting: bool = False


CASES = [
    Case("the Configuration's reclaim protection counts from Admitted, not QuotaReserved",
         now=10, reason=RECLAIM, configuration=ProtectionConfig(reclaim_within_cohort=10 * MIN),
         own=None, want_until=13),
    Case("reclaimWithinCohort also guards InCohortReclaimWhileBorrowing",
         now=10, reason=WHILE_BORROWING,
         configuration=ProtectionConfig(reclaim_within_cohort=10 * MIN), own=None, want_until=13),
    Case("one second before the end: still protected",
         now=13 - 1 / 60, reason=RECLAIM,
         configuration=ProtectionConfig(reclaim_within_cohort=10 * MIN), own=None, want_until=13),
    Case("at the end exactly: not protected",
         now=13, reason=RECLAIM, configuration=ProtectionConfig(reclaim_within_cohort=10 * MIN),
         own=None, want_until=None),
    Case("another path's protection does not guard this one",
         now=4, reason=RECLAIM,
         configuration=ProtectionConfig(within_cluster_queue=MIN * 60, fair_sharing=MIN * 60),
         own=None, want_until=None),
    Case("withinClusterQueue guards InClusterQueue",
         now=4, reason=WITHIN, configuration=ProtectionConfig(within_cluster_queue=5 * MIN),
         own=None, want_until=8),
    Case("fairSharing guards InCohortFairSharing",
         now=4, reason=FAIR, configuration=ProtectionConfig(fair_sharing=60 * MIN),
         own=None, want_until=63),
    Case("the victim's ClusterQueue overrides the Configuration on its path",
         now=10, reason=RECLAIM, configuration=ProtectionConfig(reclaim_within_cohort=10 * MIN),
         own=ProtectionConfig(reclaim_within_cohort=30 * MIN), want_until=33,
         want_source="ClusterQueue dev"),
    Case("the victim's ClusterQueue 0s turns the path off",
         now=4, reason=RECLAIM, configuration=ProtectionConfig(reclaim_within_cohort=10 * MIN),
         own=ProtectionConfig(reclaim_within_cohort=timedelta(0)), want_until=None),
    Case("a path the victim's ClusterQueue leaves unset takes the Configuration's",
         now=4, reason=FAIR, configuration=ProtectionConfig(fair_sharing=10 * MIN),
         own=ProtectionConfig(reclaim_within_cohort=30 * MIN), want_until=13),
    Case("the victim's ClusterQueue without a Configuration",
         now=4, reason=WITHIN, configuration=None,
         own=ProtectionConfig(within_cluster_queue=2 * MIN), want_until=5,
         want_source="ClusterQueue dev"),
    Case("no setting anywhere", now=4, reason=RECLAIM, configuration=None, own=None,
         want_until=None),
    Case("holding quota but not admitted (waiting for its checks): not protected",
         now=4, reason=RECLAIM, configuration=ProtectionConfig(reclaim_within_cohort=10 * MIN),
         own=None, want_until=None,
         conditions={"QuotaReserved": ("True", 0), "Admitted": ("False", 0)}),
    Case("already being evicted: not protected",
         now=4, reason=RECLAIM, configuration=ProtectionConfig(reclaim_within_cohort=10 * MIN),
         own=None, want_until=None, evicting=True),
    Case("admitted again after an eviction: counts from the new Admitted condition",
         now=25, reason=RECLAIM, configuration=ProtectionConfig(reclaim_within_cohort=10 * MIN),
         own=None, want_until=30,
         conditions={"QuotaReserved": ("True", 20), "Admitted": ("True", 20),
                     "Evicted": ("False", 20)}),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_protection_of_a_candidate(case: Case) -> None:
    wl = _admitted(case.conditions or ADMITTED_AT_3)
    rule = Protection(case.configuration, _at(case.now))
    got = rule.check(wl, case.reason, case.own, case.evicting)
    if case.want_until is None:
        assert got is None
        return
    assert got is not None
    assert (got.workload, got.cluster_queue, got.reason) == (wl.key, ClusterQueueName("dev"),
                                                            case.reason)
    assert got.until == _at(case.want_until)
    assert got.source == case.want_source
    assert got.until - got.duration == wl.admission.admitted_at


def test_admitted_at_is_the_admitted_conditions_time() -> None:
    assert _admitted(ADMITTED_AT_3).admission.admitted_at == _at(3)
    not_yet = _admitted({"QuotaReserved": ("True", 0), "Admitted": ("False", 1)})
    assert not_yet.admission.admitted_at is None
