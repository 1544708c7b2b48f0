"""Two-phase admission in the engine (kqueue/engine/checks.py): Kueue's admission-check cases
from pkg/workload/admissionchecks_test.go, pkg/controller/core/workload_controller_test.go,
pkg/workload/evict and pkg/cache/scheduler/clusterqueue_test.go, ported by name."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from kqueue.api.v1alpha1 import AdmissionCheckState
from kqueue.engine import checks
from kqueue.engine.checks import CheckRule, Verdict
from kqueue.engine.readiness import PodsReadyConfig
from kqueue.engine.types import EvictionReason, PendingReason

from .builders import (
    admitted_flavors,
    key,
    make_cq,
    make_engine,
    make_flavor,
    make_lq,
    make_workload,
    t,
)

BASE = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def st(
    name: str, state: str, *, at: datetime | None = BASE, after: int | None = None,
    retries: int | None = None, message: str = "",
) -> AdmissionCheckState:
    return AdmissionCheckState(
        name=name, state=state, last_transition_time=at, requeue_after_seconds=after,
        retry_count=retries, message=message,
    )


# -- Kueue TestSyncAdmittedCondition ------------------------------------------------------------


@dataclass
class AdmittedCase:
    name: str
    reservation: bool
    states: list[AdmissionCheckState] = field(default_factory=list)
    want: tuple[bool, str] = (False, "NoReservation")


ADMITTED_CASES = [
    AdmittedCase("empty", False, [], (False, "NoReservation")),
    AdmittedCase("reservation no checks", True, [], (True, "Admitted")),
    AdmittedCase(
        "reservation, checks not ready",
        True,
        [st("check1", "Pending"), st("check2", "Ready")],
        (False, "UnsatisfiedAdmissionChecks"),
    ),
    AdmittedCase(
        "reservation, checks ready",
        True,
        [st("check1", "Ready"), st("check2", "Ready")],
        (True, "Admitted"),
    ),
    AdmittedCase(
        "reservation lost", False, [st("check1", "Ready"), st("check2", "Ready")],
        (False, "NoReservation"),
    ),
    AdmittedCase(
        "check lost", True, [st("check1", "Ready"), st("check2", "Pending")],
        (False, "UnsatisfiedAdmissionChecks"),
    ),
    # kqueue's reasons are Kueue's with UnadmittedWorkloadsObservability (always on here): the
    # lost reservation wins over the checks.
    AdmittedCase(
        "reservation and check lost", False, [st("check1", "Ready"), st("check2", "Pending")],
        (False, "NoReservation"),
    ),
    AdmittedCase(
        "reservation, checks not ready with observability", True,
        [st("check1", "Pending"), st("check2", "Ready")], (False, "UnsatisfiedAdmissionChecks"),
    ),
    AdmittedCase(
        "reservation lost with observability", False,
        [st("check1", "Ready"), st("check2", "Ready")], (False, "NoReservation"),
    ),
    AdmittedCase(
        "check lost with observability", True, [st("check1", "Ready"), st("check2", "Pending")],
        (False, "UnsatisfiedAdmissionChecks"),
    ),
    AdmittedCase(
        "reservation and check lost with observability", False,
        [st("check1", "Ready"), st("check2", "Pending")], (False, "NoReservation"),
    ),
    AdmittedCase(
        "no reservation, no condition initially", False, [st("check1", "Pending")],
        (False, "NoReservation"),
    ),
]


@pytest.mark.parametrize("case", ADMITTED_CASES, ids=lambda c: c.name)
def test_sync_admitted_condition(case: AdmittedCase) -> None:
    status, reason, _ = checks.admitted_condition(case.reservation, case.states)
    assert (status, reason) == case.want


# -- Kueue TestGetMaxRetryTime ------------------------------------------------------------------


RETRY_CASES = [
    ("no admission checks", [], None),
    ("admission check with nil RequeueAfterSeconds", [st("check1", "Retry")], None),
    (
        "admission check with zero LastTransitionTime",
        [st("check1", "Retry", at=None, after=60)],
        None,
    ),
    (
        "single admission check with valid retry time",
        [st("check1", "Retry", after=60)],
        BASE + timedelta(seconds=60),
    ),
    (
        "multiple admission checks, returns max retry time",
        [st("check1", "Retry", after=60), st("check2", "Retry", after=120),
         st("check3", "Retry", after=30)],
        BASE + timedelta(seconds=120),
    ),
    (
        "multiple checks with mixed nil and valid values",
        [st("check1", "Retry"), st("check2", "Retry", after=90),
         st("check3", "Retry", at=None, after=180)],
        BASE + timedelta(seconds=90),
    ),
    (
        "checks with different base times",
        [st("check1", "Retry", after=60),
         st("check2", "Retry", at=BASE + timedelta(seconds=30), after=60)],
        BASE + timedelta(seconds=90),
    ),
]


@pytest.mark.parametrize(("name", "states", "want"), RETRY_CASES, ids=[c[0] for c in RETRY_CASES])
def test_get_max_retry_time(
    name: str, states: list[AdmissionCheckState], want: datetime | None
) -> None:
    assert checks.max_retry_time(states) == want


# -- Kueue syncAdmissionCheckConditions ---------------------------------------------------------


def test_sync_adds_missing_checks_as_pending_and_drops_others_sorted() -> None:
    now = BASE + timedelta(minutes=1)
    got, changed = checks.sync([st("old", "Ready"), st("b", "Ready")], ["b", "a"], now)
    assert changed
    assert [(s.name, s.state) for s in got] == [("a", "Pending"), ("b", "Ready")]
    assert got[0].last_transition_time == now
    assert got[1].last_transition_time == BASE  # kept as it was


def test_sync_without_required_checks_clears_them() -> None:
    assert checks.sync([st("a", "Ready")], [], BASE) == ([], True)
    assert checks.sync([], [], BASE) == ([], False)
    same, changed = checks.sync([st("a", "Pending")], ["a"], BASE)
    assert not changed and [s.name for s in same] == ["a"]


# -- Kueue SetAdmissionCheckState ---------------------------------------------------------------


def test_set_state_moves_transition_time_only_with_the_state() -> None:
    later = BASE + timedelta(minutes=5)
    kept = checks.set_state([st("a", "Pending")], st("a", "Pending", at=None, message="m"), later)
    assert kept[0].last_transition_time == BASE and kept[0].message == "m"
    moved = checks.set_state([st("a", "Pending")], st("a", "Ready", at=None), later)
    assert moved[0].last_transition_time == later and moved[0].state == "Ready"


# -- Kueue resetChecksOnEviction ----------------------------------------------------------------


def test_reset_checks_on_eviction() -> None:
    now = BASE + timedelta(hours=1)
    got = checks.reset_on_eviction(
        [st("p", "Pending"), st("r", "Ready"), st("x", "Retry", after=60, retries=1)], now
    )
    assert [(s.name, s.state, s.retry_count) for s in got] == [
        ("p", "Pending", None), ("r", "Pending", None), ("x", "Pending", 2)
    ]
    assert got[0].last_transition_time == BASE
    assert got[1].message == "Reset to Pending after eviction. Previously: Ready"
    assert got[2].requeue_after_seconds == 60 and got[2].last_transition_time == now


# -- Kueue reconcileCheckBasedEviction / buildAdmissionChecksMessage ----------------------------


@pytest.mark.parametrize(
    ("states", "want"),
    [
        ([st("a", "Pending"), st("b", "Ready")], Verdict.WAIT),
        ([st("a", "Ready"), st("b", "Ready")], Verdict.ADMIT),
        ([], Verdict.ADMIT),
        ([st("a", "Retry"), st("b", "Pending")], Verdict.RETRY),
        ([st("a", "Retry"), st("b", "Rejected")], Verdict.REJECT),
    ],
)
def test_verdict(states: list[AdmissionCheckState], want: Verdict) -> None:
    assert checks.verdict(states) == want


def test_build_admission_checks_message() -> None:
    one = [st("check1", "Rejected", message="not possible")]
    assert checks.checks_message(one, "Rejected") == (
        'AdmissionCheck in Rejected state: "check1" (not possible)'
    )
    two = [st("b", "Retry"), st("a", "Retry", message="x"), st("c", "Ready")]
    assert checks.checks_message(two, "Retry") == (
        'AdmissionChecks in Retry state: "a" (x); "b"'
    )


# -- admissionChecksForAdmission (onFlavors) -------------------------------------------------


def test_checks_for_flavors() -> None:
    rules = [CheckRule("all"), CheckRule("spot-only", frozenset({"spot"}))]
    assert checks.checks_for(rules, ["spot", "on-demand"]) == ["all", "spot-only"]
    assert checks.checks_for(rules, ["on-demand"]) == ["all"]


# -- Kueue pkg/cache/scheduler clusterqueue_test.go: Active with admission checks -------------


def _cq_with(*names: str, on_flavors: dict[str, frozenset[str]] | None = None):  # type: ignore[no-untyped-def]
    cq = make_cq("cq").quota("default", cpu="10").obj()
    rules = tuple(CheckRule(n, (on_flavors or {}).get(n, frozenset())) for n in names)
    return replace(cq, admission_checks=rules)


@pytest.mark.parametrize(
    ("name", "checks_known", "want_cause", "want_message"),
    [
        (
            "Pending clusterQueue with an AC strategy updated valid AC list",
            {"check1": None, "check2": None, "check3": None},
            None,
            None,
        ),
        (
            "Active clusterQueue with an AC strategy updated with not found AC",
            {"check1": None, "check2": None},
            "AdmissionCheckNotFound",
            "ClusterQueue cq is inactive: references missing AdmissionCheck(s): check3",
        ),
        (
            "Active clusterQueue with an AC strategy updated with inactive AC",
            {"check1": None, "check2": None, "check3": "no controller"},
            "AdmissionCheckInactive",
            "ClusterQueue cq is inactive: references inactive AdmissionCheck(s): "
            "check3 (no controller)",
        ),
    ],
)
def test_cluster_queue_active_with_admission_checks(
    name: str, checks_known: dict[str, str | None], want_cause: str | None,
    want_message: str | None,
) -> None:
    engine = make_engine(
        make_flavor("default").obj(), _cq_with("check1", "check2", "check3"),
        make_workload("a").queue("lq").request("cpu", "1").obj(),
    )
    for n, why in checks_known.items():
        engine.upsert_admission_check(n, why)
    inactive = engine.inactive("cq")  # type: ignore[arg-type]
    result = engine.schedule(t(1))
    if want_cause is None:
        assert inactive is None
        assert admitted_flavors(result) == {"a": {"cpu": "default"}}
        return
    assert inactive is not None
    assert (inactive.cause, inactive.message) == (want_cause, want_message)
    assert inactive.reason == PendingReason.MISCONFIGURED
    assert admitted_flavors(result) == {}


@pytest.mark.parametrize(
    ("name", "kinds", "on_flavors", "want_cause", "want_message"),
    [
        (
            "Active clusterQueue with an MultiKueue AC strategy updated with duplicate single "
            "instance AC Controller",
            {"check1": "multikueue", "check2": "custom", "check3": "multikueue"}, {},
            "MultipleMultiKueueAdmissionChecks",
            "ClusterQueue cq is inactive: Cannot use multiple MultiKueue AdmissionChecks on the "
            "same ClusterQueue, found: check1,check3",
        ),
        (
            "Active clusterQueue with both MultiKueue and ProvisioningRequest ACs",
            {"check1": "multikueue", "check2": "custom", "check3": "provisioning"}, {},
            "MultiKueueWithProvisioningRequest",
            "ClusterQueue cq is inactive: Cannot use both MultiKueue and ProvisioningRequest "
            "AdmissionChecks together, found: check1, check3",
        ),
        # Kueue's updateQueueStatus, perFlavorMultiKueueAdmissionChecks (no case of its own).
        (
            "MultiKueue AC applied per flavor",
            {"check1": "multikueue", "check2": "custom", "check3": "custom"},
            {"check1": frozenset({"default"})},
            "MultiKueueAdmissionCheckAppliedPerFlavor",
            "ClusterQueue cq is inactive: Cannot specify MultiKueue AdmissionCheck per flavor, "
            "found: check1",
        ),
        ("one MultiKueue AC for every flavor",
         {"check1": "multikueue", "check2": "custom", "check3": "custom"}, {}, None, None),
    ],
)
def test_cluster_queue_active_with_multikueue_checks(
    name: str, kinds: dict[str, str], on_flavors: dict[str, frozenset[str]],
    want_cause: str | None, want_message: str | None,
) -> None:
    engine = make_engine(
        make_flavor("default").obj(), _cq_with("check1", "check2", "check3", on_flavors=on_flavors),
        make_workload("a").queue("lq").request("cpu", "1").obj(),
    )
    for n, kind in kinds.items():
        engine.upsert_admission_check(
            n, None, provisions=kind == "provisioning", delegates=kind == "multikueue"
        )
    inactive = engine.inactive("cq")  # type: ignore[arg-type]
    if want_cause is None:
        assert inactive is None
        return
    assert inactive is not None
    assert (inactive.cause, inactive.message) == (want_cause, want_message)
    assert inactive.reason == PendingReason.MISCONFIGURED
    assert admitted_flavors(engine.schedule(t(1))) == {}


def test_check_becoming_active_requeues_the_cluster_queue() -> None:
    engine = make_engine(
        make_flavor("default").obj(), _cq_with("prov"),
        make_workload("a").queue("lq").request("cpu", "1").obj(),
    )
    assert admitted_flavors(engine.schedule(t(1))) == {}
    engine.upsert_admission_check("prov", None)
    assert admitted_flavors(engine.schedule(t(2))) == {"a": {"cpu": "default"}}
    engine.delete_admission_check("prov")
    assert engine.inactive("cq") is not None  # type: ignore[arg-type]


# -- Kueue scheduler_test: the reservation waits for the checks; per-flavor strategy ---------


def test_reservation_awaits_checks_only_on_their_flavors() -> None:
    cq = make_cq("cq").quota("spot", cpu="2").quota("reserved", cpu="10").obj()
    cq = replace(cq, admission_checks=(CheckRule("prov", frozenset({"spot"})),))
    engine = make_engine(
        make_flavor("spot").obj(), make_flavor("reserved").obj(), cq,
        make_workload("on-spot").queue("lq").request("cpu", "2").obj(),
        make_workload("on-reserved").queue("lq").request("cpu", "2").obj(),
    )
    engine.upsert_admission_check("prov", None)
    first = engine.schedule(t(1), admissions=2)
    flavors = {name: f["cpu"] for name, f in admitted_flavors(first).items()}
    assert sorted(flavors.values()) == ["reserved", "spot"]
    for a in first.admitted:
        on_spot = flavors[a.workload.split("/")[1]] == "spot"
        assert a.admission.awaiting_checks == on_spot
        assert engine.admission_checks_for(a.admission) == (["prov"] if on_spot else [])


def test_wait_for_pods_ready_counts_from_admitted() -> None:
    cfg = PodsReadyConfig(timeout=timedelta(seconds=300))
    engine = make_engine(make_flavor("default").obj(), make_cq("cq").quota("default", cpu="4").obj())
    engine.readiness.config = cfg
    waiting = make_workload("w").queue("lq").request("cpu", "1").reserved_in("cq", "default").obj()
    assert waiting.admission is not None
    waiting = replace(waiting, admission=replace(waiting.admission, awaiting_checks=True))
    engine.upsert_workload(waiting)
    assert engine.next_deadline() is None  # no pods released yet: no timeout runs
    admitted = replace(
        waiting, admission=replace(waiting.admission, awaiting_checks=False, admitted_at=t(600))
    )
    engine.upsert_workload(admitted)
    assert engine.next_deadline() == t(900)
    result = engine.schedule(t(900))
    assert [(e.workload, e.reason) for e in result.evicted] == [
        (key("w"), EvictionReason.PODS_READY_TIMEOUT)
    ]


def test_max_execution_time_counts_from_admitted() -> None:
    # Kueue counts a workload's execution from Admitted: the time its checks take (nodes being
    # provisioned) uses none of its maximumExecutionTimeSeconds.
    engine = make_engine(make_flavor("default").obj(), make_cq("cq").quota("default", cpu="4").obj())
    waiting = (
        make_workload("w").queue("lq").request("cpu", "1").max_exec(300)
        .reserved_in("cq", "default").obj()
    )
    assert waiting.admission is not None
    waiting = replace(waiting, admission=replace(waiting.admission, awaiting_checks=True))
    engine.upsert_workload(waiting)
    assert engine.next_deadline() is None
    assert not engine.schedule(t(600)).evicted
    admitted = replace(
        waiting, admission=replace(waiting.admission, awaiting_checks=False, admitted_at=t(600))
    )
    engine.upsert_workload(admitted)
    assert engine.next_deadline() == t(900)
    assert not engine.schedule(t(899)).evicted
    result = engine.schedule(t(900))
    assert [(e.workload, e.reason) for e in result.evicted] == [
        (key("w"), EvictionReason.DEACTIVATED_DUE_TO_MAXIMUM_EXECUTION_TIME_EXCEEDED)
    ]


def test_pending_admission_check_with_nofit_and_fit_flavors() -> None:
    # Kueue scheduler_test "pending admission check with nofit and fit flavors": the first
    # flavor does not fit, the second does; the reservation there waits for the check.
    cq = make_cq("eng-beta").quota("on-demand", cpu="60").quota("spot", cpu="100").obj()
    cq = replace(cq, admission_checks=(CheckRule("check"),))
    engine = make_engine(
        make_flavor("on-demand").obj(), make_flavor("spot").obj(), cq,
        make_lq("main", "eng-beta", namespace="eng-beta"),
        make_workload("pending-check", "eng-beta").queue("main").request("cpu", "80").obj(),
    )
    engine.upsert_admission_check("check", None)
    result = engine.schedule(t(1))
    (admitted,) = result.admitted
    assert admitted.workload == key("pending-check", "eng-beta")
    assert [dict(ps.flavors) for ps in admitted.admission.pod_sets] == [{"cpu": "spot"}]
    assert admitted.admission.awaiting_checks and admitted.admission.admitted_since is None


def test_rejected_check_deactivation_evicts_with_its_reason() -> None:
    # Kueue's workload controller: DeactivationTarget (AdmissionCheck), spec.active false, then
    # the eviction "DeactivatedDueToAdmissionCheck" with the checks' message.
    engine = make_engine(make_flavor("default").obj(), make_cq("cq").quota("default", cpu="4").obj())
    held = make_workload("w").queue("lq").request("cpu", "1").reserved_in("cq", "default").obj()
    engine.upsert_workload(held)
    message = 'AdmissionCheck in Rejected state: "ext" (over budget)'
    engine.upsert_workload(replace(held, active=False, rejected_by_checks=message))
    result = engine.schedule(t(1))
    assert [(e.workload, e.reason, e.message) for e in result.evicted] == [
        (key("w"), EvictionReason.DEACTIVATED_DUE_TO_ADMISSION_CHECK, f"Deactivated due to {message}")
    ]
