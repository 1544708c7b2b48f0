"""Preemption with ClassicalPreemptor: a table of named cases, then multi-cycle behaviours."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kqueue.engine.assignment import Assignment
from kqueue.engine.preemption.classical import Rejection
from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.preemption.seam import PreemptionOracle, Target
from kqueue.engine.snapshot import ClusterQueueSnapshot, Snapshot
from kqueue.engine.types import FlavorResource, PreemptionReason, Workload
from kqueue.engine.workload import WorkloadInfo

from .builders import (
    Obj,
    admitted_flavors,
    key,
    make_cq,
    make_engine,
    make_flavor,
    make_workload,
    pending_reasons,
    preempted,
    t,
    with_preemption,
)

F = make_flavor("default").obj()

IN_CQ = str(PreemptionReason.IN_CLUSTER_QUEUE)
RECLAIM = str(PreemptionReason.IN_COHORT_RECLAMATION)
WHILE_BORROWING = str(PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING)


class CheckedPreemptor(ClassicalPreemptor):
    """Asserts that every simulation leaves the snapshot exactly as it found it."""

    def __init__(self) -> None:
        super().__init__()
        self.simulations = 0

    def get_targets(
        self, wl: WorkloadInfo, assignment: Assignment, snapshot: Snapshot
    ) -> list[Target]:
        before = snapshot.state()
        out = super().get_targets(wl, assignment, snapshot)
        assert snapshot.state() == before
        self.simulations += 1
        return out

    def oracle(self, snapshot: Snapshot) -> PreemptionOracle:
        inner = super().oracle(snapshot)
        outer = self

        class Checked:
            def simulate_preemption(
                self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
            ) -> tuple[object, int]:
                before = snapshot.state()
                out = inner.simulate_preemption(cq, wl, fr, quantity)
                assert snapshot.state() == before
                outer.simulations += 1
                return out

        return Checked()  # type: ignore[return-value]


def wl(name: str, prio: int, cpu: str, *, at: float = 0, queue: str = "cq") -> Workload:
    """An admitted workload of ``cpu`` in flavor default of ``queue``, reserved at ``at``."""
    return (
        make_workload(name).queue(queue).priority(prio).request("cpu", cpu)
        .reserved_in(queue, "default", at=at).obj()
    )


def incoming(name: str, prio: int, cpu: str, *, queue: str = "cq", created: float = 50) -> Workload:
    return make_workload(name).queue(queue).priority(prio).request("cpu", cpu).created(created).obj()


def cohort_of(*cqs: tuple[str, str], within: str = "Never", reclaim: str = "Never") -> list[Obj]:
    """Flavor default and ClusterQueues (name, nominal cpu) in cohort ``c``."""
    out: list[Obj] = [F]
    for name, nominal in cqs:
        cq = make_cq(name).cohort("c").quota("default", cpu=nominal)
        out.append(cq.preemption(within=within, reclaim=reclaim).obj())
    return out


@dataclass
class Case:
    name: str
    objects: list[Obj]
    workloads: list[Workload]
    want_preempted: dict[str, str] = field(default_factory=dict)
    want_pending: dict[str, str] = field(default_factory=dict)
    want_admitted: list[str] = field(default_factory=list)


CQ_LOWER = make_cq("cq").quota("default", cpu="4").preemption(within="LowerPriority").obj()
CQ_NEWER = (
    make_cq("cq").quota("default", cpu="4").preemption(within="LowerOrNewerEqualPriority").obj()
)

CASES = [
    Case(
        "preempt lowest priority",
        [F, CQ_LOWER],
        [wl("a", 1, "2"), wl("b", 2, "2"), incoming("h", 10, "2")],
        want_preempted={"a": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "fits without preemption: nothing is preempted",
        [F, CQ_LOWER],
        [wl("a", 1, "2"), incoming("h", 10, "2")],
        want_admitted=["h"],
    ),
    Case(
        "LowerPriority spares equal priority",
        [F, CQ_LOWER],
        [wl("a", 5, "4"), incoming("h", 5, "2")],
        want_pending={"h": "WaitingForQuota"},
    ),
    Case(
        "LowerOrNewerEqualPriority spares older equal",
        [F, CQ_NEWER],
        [
            make_workload("old").priority(5).request("cpu", "2").created(0)
            .reserved_in("cq", "default", at=60).obj(),
            make_workload("new").priority(5).request("cpu", "2").created(20)
            .reserved_in("cq", "default", at=30).obj(),
            incoming("h", 5, "2", created=10),
        ],
        want_preempted={"new": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "LowerOrNewerEqualPriority: only older equal workloads, nothing to preempt",
        [F, CQ_NEWER],
        [
            make_workload("old").priority(5).request("cpu", "4").created(0)
            .reserved_in("cq", "default").obj(),
            incoming("h", 5, "2", created=10),
        ],
        want_pending={"h": "WaitingForQuota"},
    ),
    Case(
        "withinClusterQueue Never preempts nothing",
        [F, make_cq("cq").quota("default", cpu="4").obj()],
        [wl("a", 1, "4"), incoming("h", 10, "2")],
        want_pending={"h": "WaitingForQuota"},
    ),
    Case(
        "reclaim within cohort from borrower",
        cohort_of(("a", "4"), ("b", "4"), reclaim="Any"),
        [
            wl("b1", 10, "3", queue="b", at=0),
            wl("b2", 10, "3", queue="b", at=5),
            incoming("h", 1, "4", queue="a"),
        ],
        want_preempted={"b2": RECLAIM},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "no reclaim from a ClusterQueue within its nominal quota",
        cohort_of(("a", "4"), ("b", "4"), reclaim="Any"),
        [
            wl("a1", 10, "3", queue="a"),
            wl("b1", 1, "4", queue="b"),
            incoming("h", 20, "3", queue="a"),
        ],
        want_pending={"h": "WaitingForQuota"},
    ),
    Case(
        "reclaimWithinCohort LowerPriority spares a higher-priority borrower",
        cohort_of(("a", "4"), ("b", "4"), reclaim="LowerPriority"),
        [wl("b1", 10, "6", queue="b"), incoming("h", 5, "4", queue="a")],
        want_pending={"h": "WaitingForQuota"},
    ),
    Case(
        "reclaim while borrowing respects maxPriorityThreshold",
        [
            F,
            with_preemption(
                make_cq("a").cohort("c").quota("default", cpu="2").obj(),
                reclaim_within_cohort="LowerPriority",
                borrow_within_cohort="LowerPriority",
                borrow_within_cohort_max_priority_threshold=3,
            ),
            make_cq("b").cohort("c").quota("default", cpu="2").obj(),
            make_cq("c3").cohort("c").quota("default", cpu="4").obj(),
        ],
        [
            wl("b-mid", 5, "3", queue="b", at=10),
            wl("b-low", 1, "3", queue="b", at=0),
            incoming("h", 10, "4", queue="a"),
        ],
        want_preempted={"b-low": WHILE_BORROWING},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "maxPriorityThreshold: nothing below it, no preemption while borrowing",
        [
            F,
            with_preemption(
                make_cq("a").cohort("c").quota("default", cpu="2").obj(),
                reclaim_within_cohort="LowerPriority",
                borrow_within_cohort="LowerPriority",
                borrow_within_cohort_max_priority_threshold=3,
            ),
            make_cq("b").cohort("c").quota("default", cpu="2").obj(),
            make_cq("c3").cohort("c").quota("default", cpu="4").obj(),
        ],
        [wl("b-mid", 5, "6", queue="b"), incoming("h", 10, "4", queue="a")],
        want_pending={"h": "WaitingForQuota"},
    ),
    Case(
        "never preempt non-preemptible",
        [F, CQ_LOWER],
        [
            make_workload("a").priority(1).request("cpu", "4").non_preemptible()
            .reserved_in("cq", "default").obj(),
            incoming("h", 10, "2"),
        ],
        want_pending={"h": "WaitingForQuota"},
    ),
    Case(
        "non-preemptible label on the owner protects, the lower one goes",
        [F, make_cq("cq").quota("default", cpu="4").preemption(within="LowerPriority").obj()],
        [
            make_workload("a").priority(1).request("cpu", "2").owner_label("non-preemptible")
            .reserved_in("cq", "default").obj(),
            wl("b", 2, "2"),
            incoming("h", 10, "2"),
        ],
        want_preempted={"b": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "preemption priority protects a high-preemption-priority low-priority workload",
        [F, CQ_LOWER],
        [
            make_workload("a").priority(1).preemption_priority(20).request("cpu", "2")
            .reserved_in("cq", "default").obj(),
            wl("b", 5, "2"),
            incoming("h", 10, "2"),
        ],
        want_preempted={"b": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "threshold makes low priority preemptible",
        [
            F,
            make_cq("cq").quota("default", cpu="4").preemption(within="LowerPriority", threshold=5)
            .obj(),
        ],
        [wl("mid", 7, "2", at=10), wl("low", 3, "2", at=0), incoming("h", 10, "2")],
        want_preempted={"low": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "threshold protects priorities above it",
        [
            F,
            make_cq("cq").quota("default", cpu="4").preemption(within="LowerPriority", threshold=5)
            .obj(),
        ],
        [wl("mid", 7, "2"), wl("low", 3, "2"), incoming("h", 10, "4")],
        want_pending={"h": "WaitingForQuota"},
    ),
    Case(
        "a preemptible label wins over the threshold",
        [
            F,
            make_cq("cq").quota("default", cpu="4").preemption(within="LowerPriority", threshold=5)
            .obj(),
        ],
        [
            make_workload("mid").priority(7).request("cpu", "2").pod_label("preemptible")
            .reserved_in("cq", "default").obj(),
            wl("low", 3, "2"),
            incoming("h", 10, "4"),
        ],
        want_preempted={"mid": IN_CQ, "low": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "Newest order evicts the most recently admitted",
        [F, CQ_LOWER],
        [wl("early", 1, "2", at=0), wl("late", 1, "2", at=10), incoming("h", 10, "2")],
        want_preempted={"late": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "Oldest order evicts earliest",
        [F, with_preemption(CQ_LOWER, preemption_order="Oldest")],
        [wl("early", 1, "2", at=0), wl("late", 1, "2", at=10), incoming("h", 10, "2")],
        want_preempted={"early": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "order is by priority before admission time",
        [F, with_preemption(CQ_LOWER, preemption_order="Oldest")],
        [wl("early", 2, "2", at=0), wl("late", 1, "2", at=10), incoming("h", 10, "2")],
        want_preempted={"late": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "no eviction when preemptor still would not fit",
        [F, CQ_LOWER],
        [wl("a", 1, "2"), wl("b", 20, "2"), incoming("h", 10, "4")],
        want_pending={"h": "WaitingForQuota"},
    ),
    Case(
        "minimal set",
        [F, make_cq("cq").quota("default", cpu="6").preemption(within="LowerPriority").obj()],
        [wl("a", 1, "1", at=30), wl("b", 2, "3"), wl("c", 3, "2"), incoming("h", 10, "3")],
        want_preempted={"b": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "minimal set adds back what is not needed",
        [F, make_cq("cq").quota("default", cpu="6").preemption(within="LowerPriority").obj()],
        [wl("a", 1, "1"), wl("b", 1, "1"), wl("c", 1, "4"), incoming("h", 10, "4")],
        want_preempted={"c": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "other ClusterQueues' borrowers before the preemptor's own, whatever their priority",
        # a-low has the lower priority, but b-mid borrows a's quota: reclaiming it comes first.
        cohort_of(("a", "4"), ("b", "0"), within="LowerPriority", reclaim="LowerPriority"),
        [wl("a-low", 1, "2", queue="a"), wl("b-mid", 5, "2", queue="b"), incoming("h", 10, "2", queue="a")],
        want_preempted={"b-mid": RECLAIM},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "other ClusterQueues first among equal priorities",
        cohort_of(("a", "4"), ("b", "0"), within="LowerPriority", reclaim="LowerPriority"),
        [wl("a-low", 1, "2", queue="a"), wl("b-low", 1, "2", queue="b"), incoming("h", 10, "2", queue="a")],
        want_preempted={"b-low": RECLAIM},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "candidates only where they free the contested resources",
        [
            F,
            make_flavor("other").obj(),
            make_cq("cq").quota("default", cpu="4").quota("other", cpu="4")
            .preemption(within="LowerPriority").fungibility(preempt="MayStopSearch").obj(),
        ],
        [
            make_workload("on-other").priority(0).request("cpu", "1")
            .reserved_in("cq", "other").obj(),
            wl("on-default", 1, "4"),
            incoming("h", 10, "2"),
        ],
        want_preempted={"on-default": IN_CQ},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
    Case(
        "a non-preemptible preemptor may not borrow what it reclaims",
        cohort_of(("a", "2"), ("b", "2"), reclaim="Any"),
        [
            wl("b1", 1, "2", queue="b"),
            wl("b2", 1, "1", queue="b", at=5),
            make_workload("h").queue("a").priority(10).request("cpu", "2").non_preemptible()
            .created(50).obj(),
        ],
        want_preempted={"b2": RECLAIM},
        want_pending={"h": "WaitingForPreemptedWorkloads"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_preemption(case: Case) -> None:
    preemptor = CheckedPreemptor()
    engine = make_engine(*case.objects, *case.workloads, preemptor=preemptor)
    r = engine.schedule(t(100))
    assert preempted(r) == case.want_preempted
    assert pending_reasons(r) == case.want_pending
    assert sorted(admitted_flavors(r)) == sorted(case.want_admitted)
    engine.cache.check_consistency()


# -- messages and explanations ----------------------------------------------------------------


def test_preempted_message_names_preemptor_reason_and_numbers() -> None:
    engine = make_engine(
        F, CQ_LOWER, wl("a", 1, "3"), incoming("h", 10, "3"), preemptor=ClassicalPreemptor()
    )
    r = engine.schedule(t(100))
    (p,) = r.preempted
    assert p.message.startswith(
        "Preempted to accommodate a workload (UID: h, Key: default/h) due to prioritization in "
        "the ClusterQueue"
    )
    assert "priority 10" in p.message
    assert "lacks cpu 2 in flavor default" in p.message
    assert "preemption priority 1" in p.message
    assert "frees cpu 3 in flavor default" in p.message


def test_explanation_says_why_each_candidate_was_or_was_not_usable() -> None:
    preemptor = ClassicalPreemptor()
    engine = make_engine(
        F,
        make_flavor("other").obj(),
        make_cq("cq").quota("default", cpu="6").quota("other", cpu="1")
        .preemption(within="LowerPriority").obj(),
        wl("low", 1, "2"),
        wl("high", 20, "1"),
        make_workload("guarded").priority(1).request("cpu", "1").non_preemptible()
        .reserved_in("cq", "default").obj(),
        make_workload("elsewhere").priority(1).request("cpu", "1").reserved_in("cq", "other").obj(),
        make_workload("precious").priority(1).preemption_priority(50).request("cpu", "2")
        .reserved_in("cq", "default").obj(),
        incoming("h", 10, "2"),
        preemptor=preemptor,
    )
    r = engine.schedule(t(100))
    assert preempted(r) == {"low": IN_CQ}
    search = preemptor.explain(key("h"))
    assert search is not None
    whys = {n.workload.split("/")[1]: (n.usable, n.why, n.chosen) for n in search.candidates}
    assert whys == {
        "low": (True, "WITHIN_CQ", True),
        "high": (False, Rejection.PRIORITY, False),
        "guarded": (False, Rejection.NON_PREEMPTIBLE, False),
        "elsewhere": (False, Rejection.NOT_USING_CONTESTED, False),
        "precious": (False, Rejection.PRIORITY, False),
    }
    text = "\n".join(search.lines())
    assert "preempting 1 workload(s) with preemption priority at most 1" in text
    assert "preemption priority 50 is not below preemptor priority 10" in text
    assert "non-preemptible (spec.preemptibility)" in text
    assert "does not use the contested resources (default/cpu)" in text


def test_explanation_for_policy_never_and_no_candidates() -> None:
    preemptor = ClassicalPreemptor()
    engine = make_engine(
        *cohort_of(("a", "2"), ("b", "2")),
        wl("b1", 1, "4", queue="b"),
        wl("a1", 1, "1", queue="a"),
        incoming("h", 10, "2", queue="a"),
        preemptor=preemptor,
    )
    r = engine.schedule(t(100))
    assert pending_reasons(r) == {"h": "WaitingForQuota"}
    search = preemptor.explain(key("h"))
    assert search is not None
    assert search.targets == ()
    assert search.message.startswith("no allowed set of preemption candidates frees cpu")
    whys = {n.workload.split("/")[1]: n.why for n in search.candidates}
    assert whys == {"a1": Rejection.POLICY_NEVER, "b1": Rejection.POLICY_NEVER}


# -- delayed preemption -----------------------------------------------------------------------


def test_delayed_waits_for_terminating_victims_and_issues_no_new_preemptions() -> None:
    preemptor = CheckedPreemptor()
    cq = make_cq("cq").quota("default", cpu="6").preemption(within="LowerPriority").obj()
    engine = make_engine(
        F, cq, wl("a", 1, "2"), wl("b", 2, "2"), wl("c", 3, "2"), incoming("h", 10, "2"),
        preemptor=preemptor,
    )
    r1 = engine.schedule(t(1))
    assert preempted(r1) == {"a": IN_CQ}
    # Still terminating: the preemptor keeps waiting for the same victim.
    r2 = engine.schedule(t(2))
    assert r2.preempted == ()
    assert pending_reasons(r2) == {"h": "WaitingForPreemptedWorkloads"}
    # The preemptor grows meanwhile: its victim is no longer enough, yet nothing new is issued.
    engine.upsert_workload(incoming("h", 10, "4"))
    r3 = engine.schedule(t(3))
    assert r3.preempted == ()
    assert pending_reasons(r3) == {"h": "WaitingForQuota"}
    search = preemptor.explain(key("h"))
    assert search is not None and search.waiting_for == (key("a"),)
    assert "no new preemptions" in search.message
    # Once the victim is gone the search starts afresh.
    engine.evicted(key("a"))
    engine.finish(key("a"))
    r4 = engine.schedule(t(4))
    assert preempted(r4) == {"b": IN_CQ}
    engine.finish(key("b"))
    r5 = engine.schedule(t(5))
    assert list(admitted_flavors(r5)) == ["h"]


def test_delayed_different_assignment_only_without_new_preemption() -> None:
    """While its victim terminates, quota freed elsewhere admits the preemptor at once."""
    preemptor = ClassicalPreemptor()
    cq = make_cq("cq").quota("default", cpu="4").preemption(within="LowerPriority").obj()
    engine = make_engine(
        F, cq, wl("a", 1, "2"), wl("b", 20, "2"), incoming("h", 10, "2"), preemptor=preemptor
    )
    assert preempted(engine.schedule(t(1))) == {"a": IN_CQ}
    engine.finish(key("b"))
    r = engine.schedule(t(2))
    assert list(admitted_flavors(r)) == ["h"]
    assert r.preempted == ()


def test_a_preemptor_waits_for_its_chosen_victims_whoever_evicts_them() -> None:
    """p2 chose the same victim as p1 and was skipped; the victim is leaving anyway, so p2 issues
    no new preemptions until it is gone, then searches afresh."""
    preemptor = ClassicalPreemptor()
    engine = make_engine(
        *cohort_of(("a", "2"), ("b", "2"), ("lender", "4"), reclaim="Any"),
        wl("low", 1, "8", queue="lender"),
        incoming("p1", 10, "2", queue="a", created=1),
        incoming("p2", 10, "2", queue="b", created=2),
        preemptor=preemptor,
    )
    r1 = engine.schedule(t(1))
    assert preempted(r1) == {"low": RECLAIM}
    assert pending_reasons(r1) == {"p1": "WaitingForPreemptedWorkloads", "p2": "WaitingForQuota"}
    r2 = engine.schedule(t(2))
    assert r2.preempted == ()
    engine.evicted(key("low"))
    engine.finish(key("low"))
    r3 = engine.schedule(t(3))
    assert sorted(admitted_flavors(r3)) == ["p1", "p2"]


def test_already_evicting_workloads_are_used_first_and_not_preempted_again() -> None:
    preemptor = ClassicalPreemptor()
    cq = make_cq("cq").quota("default", cpu="4").preemption(within="LowerPriority").obj()
    engine = make_engine(
        F, cq, wl("a", 1, "2", at=0), wl("b", 1, "2", at=10), incoming("h", 10, "2"),
        preemptor=preemptor,
    )
    # "a" is drained by someone else (e.g. its LocalQueue stopped): it is leaving anyway.
    engine.cache.evicting.add(key("a"))
    r = engine.schedule(t(1))
    assert r.preempted == ()
    assert pending_reasons(r) == {"h": "WaitingForPreemptedWorkloads"}


def test_evicted_victims_are_requeued_and_resume() -> None:
    preemptor = ClassicalPreemptor()
    engine = make_engine(
        F, CQ_LOWER, wl("a", 1, "4"), incoming("h", 10, "4"), preemptor=preemptor
    )
    assert preempted(engine.schedule(t(1))) == {"a": IN_CQ}
    engine.evicted(key("a"))
    assert list(admitted_flavors(engine.schedule(t(2)))) == ["h"]
    engine.finish(key("h"))
    assert list(admitted_flavors(engine.schedule(t(3)))) == ["a"]


def test_every_simulation_leaves_the_snapshot_unchanged() -> None:
    """snapshot.state() before and after each get_targets and oracle call, over all the cases
    above (CheckedPreemptor asserts it on every call)."""
    total = 0
    for case in CASES:
        preemptor = CheckedPreemptor()
        engine = make_engine(*case.objects, *case.workloads, preemptor=preemptor)
        before = engine.cache.snapshot().state()
        engine.schedule(t(100))
        total += preemptor.simulations
        if case.want_preempted:
            assert preemptor.simulations > 0, case.name
        if not case.want_admitted:
            assert engine.cache.snapshot().state() == before, case.name
    assert total > len(CASES)


def test_explanations_are_dropped_once_the_preemptor_holds_quota() -> None:
    preemptor = ClassicalPreemptor()
    engine = make_engine(F, CQ_LOWER, wl("a", 1, "4"), incoming("h", 10, "4"), preemptor=preemptor)
    engine.schedule(t(1))
    assert engine.explain_preemption(key("h")) is not None
    engine.evicted(key("a"))
    engine.schedule(t(2))
    assert engine.holds_quota(key("h"))
    engine.schedule(t(3))
    assert engine.explain_preemption(key("h")) is None
