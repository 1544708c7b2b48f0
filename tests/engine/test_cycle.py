"""The scheduling cycle: entry order, re-checks within a cycle, preemption seam, partial admission."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from kqueue.engine.engine import Engine
from kqueue.engine.preemption.seam import PreemptionPossibility
from kqueue.engine.types import PreemptionReason, RequeueReason, Workload

from .builders import (
    Obj,
    admitted_flavors,
    key,
    make_cq,
    make_engine,
    make_flavor,
    make_workload,
    pending_reasons,
    t,
)
from .fakes import LowerPriorityPreemptor

F = make_flavor("default").obj()


@dataclass
class Case:
    name: str
    objects: list[Obj]
    workloads: list[Workload]
    want_admitted: list[str] = field(default_factory=list)
    want_pending: dict[str, str] = field(default_factory=dict)
    want_messages: dict[str, str] = field(default_factory=dict)


def _cohort_of(*cqs: tuple[str, str]) -> list[Obj]:
    return [F, *(make_cq(n).cohort("c").quota("default", cpu=cpu).obj() for n, cpu in cqs)]


ORDER_CASES = [
    Case(
        "not borrowing before borrowing, even with lower priority and later creation",
        _cohort_of(("a", "4"), ("b", "4")),
        [
            make_workload("borrower").queue("a").priority(100).request("cpu", "6").obj(),
            make_workload("local").queue("b").priority(1).created(5).request("cpu", "4").obj(),
        ],
        want_admitted=["local"],
        want_pending={"borrower": "WaitingForQuota"},
        want_messages={"borrower": "Workload no longer fits after processing another workload"},
    ),
    Case(
        "among borrowers, higher priority first",
        _cohort_of(("a", "0"), ("b", "0"), ("lender", "5")),
        [
            make_workload("low").queue("a").priority(1).request("cpu", "4").obj(),
            make_workload("high").queue("b").priority(10).created(5).request("cpu", "4").obj(),
        ],
        want_admitted=["high"],
        want_pending={"low": "WaitingForQuota"},
    ),
    Case(
        "equal priority: earlier creation first",
        _cohort_of(("a", "0"), ("b", "0"), ("lender", "5")),
        [
            make_workload("late").queue("a").created(9).request("cpu", "4").obj(),
            make_workload("early").queue("b").created(1).request("cpu", "4").obj(),
        ],
        want_admitted=["early"],
        want_pending={"late": "WaitingForQuota"},
    ),
    Case(
        "second entry of the cohort admitted when both fit",
        _cohort_of(("a", "0"), ("b", "0"), ("lender", "8")),
        [
            make_workload("w1").queue("a").request("cpu", "4").obj(),
            make_workload("w2").queue("b").request("cpu", "4").obj(),
        ],
        want_admitted=["w1", "w2"],
    ),
    Case(
        "ClusterQueues in different cohorts do not interfere",
        [F, make_cq("a").quota("default", cpu="4").obj(), make_cq("b").quota("default", cpu="4").obj()],
        [
            make_workload("w1").queue("a").request("cpu", "4").obj(),
            make_workload("w2").queue("b").request("cpu", "4").obj(),
        ],
        want_admitted=["w1", "w2"],
    ),
]


@pytest.mark.parametrize("case", ORDER_CASES, ids=[c.name for c in ORDER_CASES])
def test_cycle_order(case: Case) -> None:
    engine = make_engine(*case.objects, *case.workloads)
    result = engine.schedule(t(100))
    assert sorted(admitted_flavors(result)) == sorted(case.want_admitted)
    assert pending_reasons(result) == case.want_pending
    messages = {p.workload.split("/", 1)[1]: p.message for p in result.pending}
    for name, want in case.want_messages.items():
        assert messages[name] == want


def test_skipped_entry_is_requeued_at_once_and_admitted_when_quota_frees() -> None:
    engine = make_engine(
        *_cohort_of(("a", "4"), ("b", "4")),
        make_workload("borrower").queue("a").request("cpu", "6").obj(),
        make_workload("local").queue("b").request("cpu", "4").obj(),
    )
    r1 = engine.schedule(t(1))
    assert [x.reason for x in r1.requeued] == [RequeueReason.FAILED_AFTER_NOMINATION]
    assert r1.requeued[0].active
    r2 = engine.schedule(t(2))
    # Now it is evaluated alone and needs 2 more: parked until quota frees.
    assert pending_reasons(r2) == {"borrower": "WaitingForQuota"}
    assert not r2.requeued[0].active
    engine.finish(key("local"))
    r3 = engine.schedule(t(3))
    assert list(admitted_flavors(r3)) == ["borrower"]
    assert r3.admitted[0].borrowing == 1


def test_admission_is_assumed_for_the_next_cycle() -> None:
    engine = make_engine(
        F,
        make_cq("cq").quota("default", cpu="4").obj(),
        make_workload("a").request("cpu", "3").obj(),
        make_workload("b").request("cpu", "3").created(1).obj(),
    )
    r1 = engine.schedule(t(1))
    assert list(admitted_flavors(r1)) == ["a"]
    assert engine.usage("cq") == {("default", "cpu"): 3000}
    r2 = engine.schedule(t(2))
    assert pending_reasons(r2) == {"b": "WaitingForQuota"}


def test_forget_rolls_back_an_assumption() -> None:
    engine = make_engine(
        F, make_cq("cq").quota("default", cpu="4").obj(), make_workload("a").request("cpu", "3").obj()
    )
    r1 = engine.schedule(t(1))
    assert r1.admitted[0].admission.reserved_at == t(1)
    engine.forget(key("a"))
    assert engine.usage("cq") == {}
    r2 = engine.schedule(t(2))
    assert list(admitted_flavors(r2)) == ["a"]


def test_confirmed_admission_survives_a_stale_pending_update() -> None:
    wl = make_workload("a").request("cpu", "3")
    engine = make_engine(F, make_cq("cq").quota("default", cpu="4").obj(), wl.obj())
    engine.schedule(t(1))
    # The informer still shows the object without admission: the assumption stays.
    engine.upsert_workload(wl.obj())
    assert engine.holds_quota(key("a"))
    # Confirmed, then the API shows the admission cleared: quota is released.
    engine.upsert_workload(wl.reserved_in("cq", "default").obj())
    engine.upsert_workload(make_workload("a").request("cpu", "3").obj())
    assert not engine.holds_quota(key("a"))
    assert engine.usage("cq") == {}


def test_rebuilt_admissions_hold_quota() -> None:
    engine = make_engine(
        F,
        make_cq("cq").quota("default", cpu="4").obj(),
        make_workload("old").request("cpu", "3").reserved_in("cq", "default").obj(),
        make_workload("new").request("cpu", "3").obj(),
    )
    r = engine.schedule(t(1))
    assert pending_reasons(r) == {"new": "WaitingForQuota"}
    engine.finish(key("old"))
    assert list(admitted_flavors(engine.schedule(t(2)))) == ["new"]


# -- preemption seam --------------------------------------------------------------------------


def _preempt_env() -> tuple[list[Obj], LowerPriorityPreemptor]:
    return [F, make_cq("cq").quota("default", cpu="4").obj()], LowerPriorityPreemptor()


def test_preemption_issues_targets_and_waits_for_them() -> None:
    objs, preemptor = _preempt_env()
    engine = make_engine(
        *objs,
        make_workload("low").priority(1).request("cpu", "3").reserved_in("cq", "default").obj(),
        make_workload("high").priority(10).request("cpu", "3").obj(),
        preemptor=preemptor,
    )
    r1 = engine.schedule(t(1))
    assert [(p.victim, p.preemptor, p.reason) for p in r1.preempted] == [
        (key("low"), key("high"), PreemptionReason.IN_CLUSTER_QUEUE)
    ]
    assert pending_reasons(r1) == {"high": "WaitingForPreemptedWorkloads"}
    assert r1.pending[0].message.endswith(". Pending the preemption of 1 workload(s)")
    assert r1.requeued[0].reason == RequeueReason.PENDING_PREEMPTION
    # While the victim terminates, no new preemption is issued.
    r2 = engine.schedule(t(2))
    assert r2.preempted == ()
    assert pending_reasons(r2) == {"high": "WaitingForPreemptedWorkloads"}
    engine.evicted(key("low"))
    r3 = engine.schedule(t(3))
    assert list(admitted_flavors(r3)) == ["high"]


def test_preemptor_stays_at_the_head_of_a_best_effort_queue() -> None:
    objs, preemptor = _preempt_env()
    engine = make_engine(
        *objs,
        make_workload("low").priority(1).request("cpu", "3").reserved_in("cq", "default").obj(),
        make_workload("high").priority(10).request("cpu", "3").obj(),
        make_workload("mid").priority(5).request("cpu", "1").created(1).obj(),
        preemptor=preemptor,
    )
    engine.schedule(t(1))
    # "mid" would fit in the free 1 cpu, but the preemptor keeps the head.
    r2 = engine.schedule(t(2))
    assert [p.workload for p in r2.pending] == [key("high")]
    assert r2.admitted == ()


def test_no_candidates_pends_waiting_for_quota() -> None:
    objs, preemptor = _preempt_env()
    engine = make_engine(
        *objs,
        make_workload("other").priority(50).request("cpu", "3").reserved_in("cq", "default").obj(),
        make_workload("w").priority(10).request("cpu", "3").obj(),
        preemptor=preemptor,
    )
    r = engine.schedule(t(1))
    assert r.preempted == ()
    assert pending_reasons(r) == {"w": "WaitingForQuota"}
    assert r.requeued[0].reason == RequeueReason.PREEMPTION_NO_CANDIDATES


def _low_in_lender(cqs: list[tuple[str, str]], low_cpu: str, *heads: Workload) -> Engine:
    """A cohort of ``cqs`` where ClusterQueue ``lender`` runs ``low`` (priority 1), and ``heads``
    pend; the preemptor takes lower priorities from the whole cohort."""
    return make_engine(
        *_cohort_of(*cqs),
        make_workload("low").queue("lender").priority(1).request("cpu", low_cpu)
        .reserved_in("lender", "default").obj(),
        *heads,
        preemptor=LowerPriorityPreemptor(cohort_wide=True),
    )


def test_overlapping_targets_are_skipped() -> None:
    engine = _low_in_lender(
        [("a", "4"), ("b", "4"), ("lender", "0")],
        "8",
        make_workload("p1").queue("a").priority(10).request("cpu", "4").obj(),
        make_workload("p2").queue("b").priority(10).created(1).request("cpu", "4").obj(),
    )
    r = engine.schedule(t(1))
    assert [(p.victim, p.preemptor, p.reason) for p in r.preempted] == [
        (key("low"), key("p1"), PreemptionReason.IN_COHORT_RECLAMATION)
    ]
    assert pending_reasons(r) == {
        "p1": "WaitingForPreemptedWorkloads",
        "p2": "WaitingForQuota",
    }
    messages = {p.workload: p.message for p in r.pending}
    assert messages[key("p2")] == "Workload has overlapping preemption targets with another workload"


def test_no_admission_into_quota_a_victim_still_holds() -> None:
    """The victims of a cycle keep their quota until their eviction lands: a later head that fits
    only once they are gone waits, or its cohort would hold more than its quota meanwhile."""
    engine = _low_in_lender(
        [("a", "3"), ("b", "0"), ("d", "0"), ("lender", "3")],
        "4",
        make_workload("p").queue("a").priority(10).request("cpu", "3").obj(),
        make_workload("f1").queue("b").priority(10).created(1).request("cpu", "2").obj(),
        make_workload("f2").queue("d").priority(10).created(2).request("cpu", "1").obj(),
    )
    r1 = engine.schedule(t(1))
    assert [(p.victim, p.preemptor) for p in r1.preempted] == [(key("low"), key("p"))]
    # 2 cpu are free while "low" runs: f1 takes them. f2 would fit once "low" is gone (6 - 3
    # for p - 2 for f1), not before.
    assert list(admitted_flavors(r1)) == ["f1"]
    assert pending_reasons(r1) == {"p": "WaitingForPreemptedWorkloads", "f2": "WaitingForQuota"}
    messages = {p.workload: p.message for p in r1.pending}
    assert messages[key("f2")] == "Workload no longer fits after processing another workload"
    held = engine.cache.snapshot().cohorts["c"].resources.usage
    assert held[("default", "cpu")] == 6000
    engine.evicted(key("low"))
    r2 = engine.schedule(t(2))
    assert sorted(admitted_flavors(r2)) == ["f2", "p"]


# -- partial admission ------------------------------------------------------------------------


@dataclass
class PartialCase:
    name: str
    quota: str
    workload: Workload
    want_counts: tuple[int, ...] | None


PARTIAL_CASES = [
    PartialCase(
        "full count fits: no reduction",
        "10",
        make_workload("a").count(8).min_count(2).request("cpu", "1").obj(),
        (8,),
    ),
    PartialCase(
        "reduced to the largest count that fits",
        "6",
        make_workload("a").count(10).min_count(2).request("cpu", "1").obj(),
        (6,),
    ),
    PartialCase(
        "not even minCount fits",
        "1",
        make_workload("a").count(10).min_count(2).request("cpu", "1").obj(),
        None,
    ),
    PartialCase(
        "without minCount there is no reduction",
        "6",
        make_workload("a").count(10).request("cpu", "1").obj(),
        None,
    ),
    PartialCase(
        "several pod sets shrink proportionally",
        "10",
        make_workload("a")
        .pod_set("driver", 1).request("cpu", "2")
        .pod_set("workers", 10).min_count(4).request("cpu", "1")
        .obj(),
        (1, 8),
    ),
]


@pytest.mark.parametrize("case", PARTIAL_CASES, ids=[c.name for c in PARTIAL_CASES])
def test_partial_admission(case: PartialCase) -> None:
    engine = make_engine(F, make_cq("cq").quota("default", cpu=case.quota).obj(), case.workload)
    r = engine.schedule(t(1))
    if case.want_counts is None:
        assert r.admitted == ()
        assert len(r.pending) == 1
        return
    (admit,) = r.admitted
    assert tuple(ps.count for ps in admit.pod_sets) == case.want_counts
    per_pod = {ps.name: ps.requests for ps in case.workload.pod_sets}
    for ps in admit.pod_sets:
        assert ps.resource_usage == {r: v * ps.count for r, v in per_pod[ps.name].items()}
    assert sum(admit.usage.values()) == sum(
        v for ps in admit.pod_sets for v in ps.resource_usage.values()
    )


def test_partial_admission_reports_the_full_count_when_nothing_fits() -> None:
    engine = make_engine(
        F,
        make_cq("cq").quota("default", cpu="1").obj(),
        make_workload("a").count(10).min_count(2).request("cpu", "1").obj(),
    )
    r = engine.schedule(t(1))
    assert r.pending[0].message == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, "
        "request > maximum capacity (10 > 1)"
    )


def test_a_victim_being_evicted_is_not_preempted_twice() -> None:
    objs, preemptor = _preempt_env()
    low = make_workload("low").priority(1).request("cpu", "3").reserved_in("cq", "default")
    engine = make_engine(
        *objs, low.obj(), make_workload("high").priority(10).request("cpu", "3").obj(),
        preemptor=preemptor,
    )
    assert [p.victim for p in engine.schedule(t(1)).preempted] == [key("low")]
    # The informer shows the victim again (Evicted=True, still holding quota).
    engine.upsert_workload(low.obj())
    assert engine.schedule(t(2)).preempted == ()


def test_eviction_in_progress_survives_a_restart() -> None:
    objs, preemptor = _preempt_env()
    low = make_workload("low").priority(1).request("cpu", "3").reserved_in("cq", "default").obj()
    engine = make_engine(
        *objs, replace(low, evicting=True), make_workload("high").priority(10).request("cpu", "3").obj(),
        preemptor=preemptor,
    )
    r = engine.schedule(t(1))
    assert r.preempted == ()
    assert pending_reasons(r) == {"high": "WaitingForPreemptedWorkloads"}


class _OptimisticPreemptor:
    """The oracle sees candidates, the victim search finds none (a per-resource vs whole-
    workload disagreement)."""

    def oracle(self, snapshot: object) -> object:
        return self

    def simulate_preemption(self, cq: object, wl: object, fr: object, q: int) -> tuple[object, int]:
        return PreemptionPossibility.PREEMPT, 0

    def get_targets(self, wl: object, assignment: object, snapshot: object) -> list[object]:
        return []


def test_flavor_search_resumes_after_the_last_flavor_tried() -> None:
    engine = make_engine(
        make_flavor("a").obj(),
        make_flavor("b").obj(),
        make_cq("cq").fungibility(preempt="MayStopSearch").quota("a", cpu="4").quota("b", cpu="4").obj(),
        make_workload("held").request("cpu", "4").reserved_in("cq", "a").obj(),
        make_workload("w").priority(5).request("cpu", "2").obj(),
        preemptor=_OptimisticPreemptor(),  # type: ignore[arg-type]
    )
    r1 = engine.schedule(t(1))
    assert pending_reasons(r1) == {"w": "WaitingForQuota"}
    # Flavor "b" is left to try: back at once, not parked.
    assert r1.requeued[0].active
    r2 = engine.schedule(t(2))
    assert admitted_flavors(r2) == {"w": {"cpu": "b"}}


def test_flavor_search_starts_over_when_quota_changes() -> None:
    engine = make_engine(
        make_flavor("a").obj(),
        make_flavor("b").obj(),
        make_cq("cq").fungibility(preempt="MayStopSearch").quota("a", cpu="4").quota("b", cpu="4").obj(),
        make_workload("held").request("cpu", "4").reserved_in("cq", "a").obj(),
        make_workload("w").priority(5).request("cpu", "2").obj(),
        preemptor=_OptimisticPreemptor(),  # type: ignore[arg-type]
    )
    engine.schedule(t(1))
    engine.finish(key("held"))
    assert admitted_flavors(engine.schedule(t(2))) == {"w": {"cpu": "a"}}
