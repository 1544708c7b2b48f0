"""Parity with Kueue's fair-sharing preemption table tests.

Ports of ``TestFairPreemptions`` (and the outcomes of ``TestFairPreemptionSkipsUnsatisfiableTournament``)
from Kueue's ``pkg/scheduler/preemption/preemption_fair_test.go``, each carrying its name. As in
Kueue, the preemptor's ``GetTargets`` runs with fair sharing on (strategies default to both) on a
snapshot of the admitted workloads, with a given assignment of the incoming workload's cpu to one
flavor in ``Preempt`` mode; the targets are compared as ``namespace/name:Reason`` and the snapshot
must come back unchanged. Workload UIDs are their names, as Kueue's test sets them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

import pytest

from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.types import (
    ClusterQueueSpec,
    CohortSpec,
    FairSharingConfig,
    FairSharingStrategy,
    Mode,
    Workload,
)
from kqueue.engine.workload import make_info

from .builders import make_flavor
from .parity_support import (
    Obj,
    build_engine,
    cluster_queue,
    cohort,
    fq,
    given_assignment,
    key_reasons,
    kwl,
    simple,
)

IN_CQ = "InClusterQueue"
RECLAIM = "InCohortReclamation"
FAIR = "InCohortFairSharing"
LE_FINAL = FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
LT_INITIAL = FairSharingStrategy.LESS_THAN_INITIAL_SHARE


def weighted(spec: ClusterQueueSpec | CohortSpec, weight: str) -> ClusterQueueSpec | CohortSpec:
    """Kueue's ``.FairWeight(resource.MustParse(weight))``."""
    return replace(spec, fair_weight=Fraction(weight))


def cq(name: str, cpu: str, cohort_name: str | None = "all", *, within: str = "Never",
       reclaim: str = "Never", weight: str | None = None, **kw: object) -> ClusterQueueSpec:
    spec = cluster_queue(name, [fq("default", cpu=cpu)], cohort=cohort_name, within=within,
                         reclaim=reclaim, **kw)  # type: ignore[arg-type]
    return spec if weight is None else weighted(spec, weight)  # type: ignore[return-value]


def co(name: str, cpu: str | None = None, *, parent: str | None = None,
       weight: str | None = None) -> CohortSpec:
    spec = cohort(name, [fq("default", cpu=cpu)], parent=parent) if cpu else cohort(name, parent=parent)
    return spec if weight is None else weighted(spec, weight)  # type: ignore[return-value]


# baseCQs: a, b, c with 3 cpu each (LowerPriority within, Any reclaim, borrowWithinCohort
# LowerPriority up to -3), and "preemptible" with 0 cpu.
_BASE_POLICY = {
    "within": "LowerPriority",
    "reclaim": "Any",
    "borrow_within": "LowerPriority",
    "max_priority_threshold": -3,
}
BASE_CQS = [
    cq("a", "3", **_BASE_POLICY),  # type: ignore[arg-type]
    cq("b", "3", **_BASE_POLICY),  # type: ignore[arg-type]
    cq("c", "3", **_BASE_POLICY),  # type: ignore[arg-type]
    cq("preemptible", "0"),
]
_LP_ANY = {"within": "LowerPriority", "reclaim": "Any"}


def unit(name: str, cq_name: str | None = None, *, cpu: str = "1", priority: int | None = None,
         flavor: str = "default") -> Workload:
    """``unitWl.Clone().Name(name)[.Priority(p)][.SimpleReserveQuota(cq, flavor, now)]``."""
    wl = kwl(name, priority=priority, requests={"cpu": cpu})
    return wl if cq_name is None else simple(wl, cq_name, flavor)


def units(cq_name: str, *names: str) -> list[Workload]:
    return [unit(n, cq_name) for n in names]


@dataclass
class Case:
    name: str
    cqs: Sequence[ClusterQueueSpec]
    admitted: list[Workload]
    incoming: Workload
    target: str
    want: set[str] = field(default_factory=set)
    cohorts: Sequence[CohortSpec] = ()
    strategies: tuple[FairSharingStrategy, ...] = ()
    flavors: Sequence[str] = ("default",)
    assignment_flavor: str = "default"


def w(name: str, reason: str) -> str:
    return f"/{name}:{reason}"


CASES: list[Case] = [
    Case(
        "reclaim nominal from user using the most",
        BASE_CQS,
        [*units("a", "a1", "a2", "a3"), *units("b", "b1", "b2", "b3", "b4", "b5"), unit("c1", "c")],
        unit("c_incoming"),
        "c",
        {w("b1", RECLAIM)},
    ),
    Case(
        "can reclaim from queue using less, if taking the latest workload from user using the most isn't enough",
        BASE_CQS,
        [unit("a1", "a", cpu="3"), unit("a2", "a"), unit("b1", "b", cpu="2"), unit("b2", "b", cpu="3")],
        unit("c_incoming", cpu="3"),
        "c",
        {w("a1", RECLAIM)},
    ),
    Case(
        "reclaim borrowable quota from user using the most",
        BASE_CQS,
        [*units("a", "a1", "a2", "a3"), *units("b", "b1", "b2", "b3", "b4", "b5"), unit("c1", "c")],
        unit("a_incoming"),
        "a",
        {w("b1", FAIR)},
    ),
    Case(
        "preempt one from each CQ borrowing",
        BASE_CQS,
        [
            unit("a1", "a", cpu="0.5"), unit("a2", "a", cpu="0.5"), unit("a3", "a", cpu="3"),
            unit("b1", "b", cpu="0.5"), unit("b2", "b", cpu="0.5"), unit("b3", "b", cpu="3"),
        ],
        unit("c_incoming", cpu="2"),
        "c",
        {w("a1", RECLAIM), w("b1", RECLAIM)},
    ),
    Case(
        "can't preempt when everyone under nominal",
        BASE_CQS,
        [*units("a", "a1", "a2", "a3"), *units("b", "b1", "b2", "b3"), *units("c", "c1", "c2", "c3")],
        unit("c_incoming"),
        "c",
    ),
    Case(
        "can't preempt when it would switch the imbalance",
        BASE_CQS,
        [*units("a", "a1", "a2", "a3"), *units("b", "b1", "b2", "b3", "b4", "b5")],
        unit("a_incoming", cpu="2"),
        "a",
    ),
    Case(
        "can preempt lower priority workloads from same CQ",
        BASE_CQS,
        [
            unit("a1_low", "a", priority=-1), unit("a2_low", "a", priority=-1),
            *units("a", "a3", "a4"), *units("b", "b1", "b2", "b3", "b4", "b5"),
        ],
        unit("a_incoming", cpu="2"),
        "a",
        {w("a1_low", IN_CQ), w("a2_low", IN_CQ)},
    ),
    Case(
        "can preempt a combination of same CQ and highest user",
        BASE_CQS,
        [
            unit("a_low", "a", priority=-1), *units("a", "a2", "a3"),
            *units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        ],
        unit("a_incoming", cpu="2"),
        "a",
        {w("a_low", IN_CQ), w("b1", FAIR)},
    ),
    Case(
        "preempt huge workload if there is no other option, as long as the target CQ gets a lower share",
        BASE_CQS,
        [unit("b1", "b", cpu="9")],
        unit("a_incoming", cpu="2"),
        "a",
        {w("b1", RECLAIM)},
    ),
    Case(
        "can't preempt huge workload if the incoming is also huge",
        BASE_CQS,
        [unit("a1", "a", cpu="2"), unit("b1", "b", cpu="7")],
        unit("a_incoming", cpu="5"),
        "a",
    ),
    Case(
        "can't preempt 2 smaller workloads if the incoming is huge",
        BASE_CQS,
        [unit("b1", "b", cpu="2"), unit("b2", "b", cpu="2"), unit("b3", "b", cpu="3")],
        unit("a_incoming", cpu="6"),
        "a",
    ),
    Case(
        "preempt from target and others even if over nominal",
        BASE_CQS,
        [
            unit("a1_low", "a", cpu="2", priority=-1), unit("a2_low", "a", cpu="1", priority=-1),
            unit("b1", "b", cpu="3"), unit("b2", "b", cpu="3"),
        ],
        unit("a_incoming", cpu="4"),
        "a",
        {w("a1_low", IN_CQ), w("b1", FAIR)},
    ),
    Case(
        "prefer to preempt workloads that don't make the target CQ have the biggest share",
        BASE_CQS,
        [unit("b1", "b", cpu="2"), unit("b2", "b", cpu="1"), unit("b3", "b", cpu="2"), unit("c1", "c", cpu="1")],
        unit("a_incoming", cpu="3.5"),
        "a",
        # Kueue: it would have been possible to preempt /b1 under rule S2-b, but S2-a was
        # possible first.
        {w("b2", FAIR)},
    ),
    Case(
        "preempt from different cluster queues if the end result has a smaller max share",
        BASE_CQS,
        [
            unit("b1", "b", cpu="2"), unit("b2", "b", cpu="2.5"),
            unit("c1", "c", cpu="2"), unit("c2", "c", cpu="2.5"),
        ],
        unit("a_incoming", cpu="3.5"),
        "a",
        {w("b1", FAIR), w("c1", FAIR)},
    ),
    Case(
        "scenario above does not flap",
        BASE_CQS,
        [unit("a1", "a", cpu="3.5"), unit("b2", "b", cpu="2.5"), unit("c2", "c", cpu="2.5")],
        unit("b_incoming", cpu="2"),
        "b",
    ),
    Case(
        "cannot preempt if it would make the candidate CQ go under nominal after preempting one element",
        BASE_CQS,
        [unit("b1", "b", cpu="3"), unit("b2", "b", cpu="3"), unit("c1", "c", cpu="3")],
        unit("a_incoming", cpu="4"),
        "a",
    ),
    # Kueue: preemption.borrowWithinCohort does not affect fair-sharing preemptions.
    Case(
        "workloads under priority threshold not capriciously preempted",
        BASE_CQS,
        [
            *units("a", "a1", "a2", "a3"), *units("b", "b1", "b2", "b3"),
            *(unit(f"preemptible{i}", "preemptible", priority=-3) for i in (1, 2, 3)),
        ],
        unit("a_incoming", cpu="2"),
        "a",
    ),
    Case(
        "preempt lower priority first, even if big",
        BASE_CQS,
        [unit("a1", "a", cpu="3"), unit("b_low", "b", cpu="5", priority=0), unit("b_high", "b", cpu="1", priority=1)],
        unit("a_incoming", cpu="1"),
        "a",
        {w("b_low", FAIR)},
        strategies=(LT_INITIAL,),
    ),
    Case(
        "preempt workload that doesn't transfer the imbalance, even if high priority",
        BASE_CQS,
        [unit("a1", "a", cpu="3"), unit("b_low", "b", cpu="5", priority=0), unit("b_high", "b", cpu="1", priority=1)],
        unit("a_incoming", cpu="1"),
        "a",
        {w("b_high", FAIR)},
        strategies=(LE_FINAL,),
    ),
    Case(
        "CQ with higher weight can preempt more",
        [cq("a", "3", weight="2", **_LP_ANY), cq("b", "3", **_LP_ANY), cq("c", "3", **_LP_ANY)],
        [*units("a", "a1", "a2", "a3"), *units("b", "b1", "b2", "b3", "b4", "b5", "b6")],
        unit("a_incoming", cpu="2"),
        "a",
        {w("b1", FAIR), w("b2", FAIR)},
    ),
    Case(
        "can preempt anything borrowing from CQ with 0 weight",
        [cq("a", "3", **_LP_ANY), cq("b", "3", weight="0", **_LP_ANY), cq("c", "3", **_LP_ANY)],
        [*units("a", "a1", "a2", "a3"), *units("b", "b1", "b2", "b3", "b4", "b5", "b6")],
        unit("a_incoming", cpu="3"),
        "a",
        {w("b1", FAIR), w("b2", FAIR), w("b3", FAIR)},
    ),
    Case(
        "can't preempt nominal from CQ with 0 weight",
        [cq("a", "3", **_LP_ANY), cq("b", "3", weight="0", **_LP_ANY)],
        [*units("a", "a1", "a2", "a3"), *units("b", "b1", "b2", "b3")],
        unit("a_incoming"),
        "a",
    ),
    Case(
        "can't preempt nominal from Cohort with 0 weight",
        [cq("left-cq", "0", "root", reclaim="Any"), cq("right-cq", "0", "right-cohort", reclaim="Any", weight="0")],
        [unit("right-1", "right-cq")],
        unit("left-1"),
        "left-cq",
        cohorts=[co("right-cohort", "1", parent="root", weight="0")],
    ),
    Case(
        "can preempt within cluster queue when no cohort",
        [cq("a", "1", None, within="LowerPriority")],
        [unit("a1", "a")],
        unit("a_incoming", priority=1000),
        "a",
        {w("a1", IN_CQ)},
    ),
    # Kueue's tree, (usage, quota, subtree quota):
    #                ROOT(20,5,20)
    #             /       |         \
    #       LEFT(5,5,7)  c(5,1,1)   RIGHT(10,5,7)
    #       /       \               /      \
    #     a(0,1,1)    b(5,1,1)   d(5,1,1)    e(5,1,1)
    # a and LEFT weigh 2, e 0.99 (preemptions from e slightly preferred to d).
    Case(
        "hierarchical preemption",
        [
            cq("a", "1", "LEFT", reclaim="Any", weight="2"),
            cq("b", "1", "LEFT"),
            cq("c", "1", "ROOT"),
            cq("d", "1", "RIGHT"),
            cq("e", "1", "RIGHT", weight="0.99"),
        ],
        [unit(f"{q}{i}", q, priority=i) for q in "bcde" for i in range(1, 6)],
        unit("unit", cpu="5"),
        "a",
        {w("b1", FAIR), w("b2", FAIR), w("c1", FAIR), w("c2", FAIR), w("e1", FAIR)},
        cohorts=[co("ROOT", "5"), co("LEFT", "5", parent="ROOT", weight="2"), co("RIGHT", "5", parent="ROOT")],
    ),
    # Kueue: though ClusterQueue b is borrowing, its Cohort is not, so it cannot be preempted.
    Case(
        "borrowing cq in non-borrowing cohort is protected",
        [
            cq("a", "5", "ROOT", reclaim="Any", within="LowerPriority", weight="10"),
            weighted(cluster_queue("b", cohort="RIGHT"), "0.1"),  # type: ignore[list-item]
        ],
        [*(unit(f"a{i}", "a", priority=-1) for i in (1, 2, 3)), unit("b1", "b", priority=-1)],
        unit("unit", cpu="5"),
        "a",
        {w("a1", IN_CQ), w("a2", IN_CQ), w("a3", IN_CQ)},
        cohorts=[co("ROOT"), co("RIGHT", "1", parent="ROOT", weight="0.1")],
    ),
    Case(
        "forced to preempt within clusterqueue because borrowing workload too important",
        [
            cq("a", "5", "ROOT", reclaim="LowerPriority", within="LowerPriority", weight="10"),
            weighted(cluster_queue("b", cohort="RIGHT"), "0.1"),  # type: ignore[list-item]
        ],
        [*(unit(f"a{i}", "a", priority=-1) for i in (1, 2, 3)), unit("b1", "b", cpu="4", priority=100)],
        unit("unit", cpu="4"),
        "a",
        {w("a1", IN_CQ), w("a2", IN_CQ), w("a3", IN_CQ)},
        cohorts=[co("ROOT"), co("RIGHT", "3", parent="ROOT", weight="0.1")],
    ),
    # cq a (under A/AA/AAA) wants capacity, cq b (under B/BB/BBB) uses it, Cohort CCCC provides
    # it; A weighs 1.01 and B 0.99, so the preemption is possible.
    Case(
        "deep preemption",
        [cq("a", "0", "AAA", reclaim="Any"), cq("b", "0", "BBB")],
        [unit("b1", "b")],
        unit("a1"),
        "a",
        {w("b1", FAIR)},
        cohorts=[
            co("ROOT"),
            co("A", parent="ROOT", weight="1.01"), co("AA", parent="A"), co("AAA", parent="AA"),
            co("B", parent="ROOT", weight="0.99"), co("BB", parent="B"), co("BBB", parent="BB"),
            co("C", parent="ROOT"), co("CC", parent="C"), co("CCC", parent="CC"),
            co("CCCC", "1", parent="CCC"),
        ],
    ),
    Case(
        "cq with zero weight can reclaim nominal quota",
        [cq("a", "1", "ROOT", reclaim="Any", weight="0.0"), cq("b", "0", "ROOT", weight="1.0")],
        [unit("b1", "b")],
        unit("a1"),
        "a",
        {w("b1", RECLAIM)},
    ),
    Case(
        "cohort with zero weight can reclaim nominal quota",
        [cq("a", "0", "A", reclaim="Any", weight="0.0"), cq("b", "0", "ROOT", weight="1.0")],
        [unit("b1", "b")],
        unit("a1"),
        "a",
        {w("b1", FAIR)},
        cohorts=[co("A", "1", parent="ROOT", weight="0.0")],
    ),
    # a: 3 premium (nominal), 0 cheap; b: 0 premium, 6 cheap. a uses 2 premium and borrows 5
    # cheap (high share), b borrows 1 premium. a's incoming premium fits within its nominal, so
    # FairSharingPreemptWithinNominal lets it reclaim despite its share.
    Case(
        "nominal first: workload fitting within nominal can preempt despite high aggregate DRS",
        [
            cluster_queue(
                "a", [fq("premium", cpu="3"), fq("cheap", cpu="0")], cohort="all", reclaim="Any",
                when_can_borrow="MayStopSearch", when_can_preempt="MayStopSearch",
            ),
            cluster_queue("b", [fq("premium", cpu="0"), fq("cheap", cpu="6")], cohort="all"),
        ],
        [
            unit("a_prem1", "a", flavor="premium"), unit("a_prem2", "a", flavor="premium"),
            *(unit(f"a_cheap{i}", "a", flavor="cheap") for i in range(1, 6)),
            unit("b_prem1", "b", flavor="premium"),
        ],
        unit("a_incoming"),
        "a",
        {w("b_prem1", RECLAIM)},
        flavors=("premium", "cheap"),
        assignment_flavor="premium",
    ),
    Case(
        "zero weight borrowing preemptor cannot preempt from a borrowing CQ with a non-zero weight",
        [cq("a", "1", reclaim="Any", weight="0"), cq("b", "1", weight="1")],
        [unit("a1", "a"), *units("b", "b1", "b2")],
        unit("a_incoming"),
        "a",
    ),
    Case(
        "zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero weight",
        [cq("a", "1", reclaim="Any", weight="0"), cq("b", "0", weight="0")],
        units("b", "b1", "b2", "b3"),
        unit("a_incoming", cpu="2"),
        "a",
        {w("b1", FAIR)},
        cohorts=[co("all", "3")],
    ),
    Case(
        "non-zero weight borrowing preemptor preempts from a borrowing CQ",
        [cq("a", "1", reclaim="Any", weight="1"), cq("b", "0", weight="1")],
        units("b", "b1", "b2", "b3"),
        unit("a_incoming", cpu="2"),
        "a",
        {w("b1", FAIR)},
        cohorts=[co("all", "3")],
    ),
    # ROOT ── A (weight 0, 1 cpu) ── p (2 cpu, preemptor), y (2 cpu); ROOT ── x (1 cpu).
    # A borrows on a zero weight: no candidate in x passes the first strategy, but once y1 is
    # preempted A stops borrowing and x1 passes the second.
    Case(
        "candidates skipped by the first strategy are still available to the second strategy",
        [cq("p", "2", "A", reclaim="Any", weight="1"), cq("y", "2", "A", weight="1"), cq("x", "1", "ROOT", weight="1")],
        [unit("p1", "p", cpu="2"), unit("y1", "y", cpu="2"), unit("y2", "y", cpu="2"), *units("x", "x1", "x2")],
        unit("p_incoming"),
        "p",
        {w("y1", FAIR), w("x1", FAIR)},
        cohorts=[co("A", "1", parent="ROOT", weight="0")],
    ),
    # TestFairPreemptionSkipsUnsatisfiableTournament: Kueue counts log lines there; the outcome
    # (no target either way) is what is compared here.
    Case(
        "zero weight preemptor: share is +Inf and the tournament is skipped",
        [cq("a", "1", reclaim="Any", weight="0"), cq("b", "1", weight="1")],
        [unit("a1", "a"), *units("b", "b1", "b2")],
        unit("a_incoming"),
        "a",
    ),
    Case(
        "non-zero weight preemptor: share is finite so the tournament runs",
        [cq("a", "1", reclaim="Any", weight="1"), cq("b", "1", weight="1")],
        [unit("a1", "a"), *units("b", "b1", "b2")],
        unit("a_incoming"),
        "a",
    ),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_fair_preemptions(case: Case) -> None:
    objects: list[Obj] = [
        *(make_flavor(f).obj() for f in case.flavors), *case.cohorts, *case.cqs, *case.admitted
    ]
    engine = build_engine(objects, namespaces={"": {}})
    engine.set_fair_sharing(FairSharingConfig(case.strategies) if case.strategies else FairSharingConfig())
    snapshot = engine.cache.snapshot()
    before = snapshot.state()
    preemptor = ClassicalPreemptor()
    preemptor.oracle(snapshot)
    assignment = given_assignment(
        case.target, [("main", 1, {"cpu": (case.assignment_flavor, Mode.PREEMPT)})], case.incoming
    )
    targets = preemptor.get_targets(make_info(case.incoming, {}), assignment, snapshot)
    assert key_reasons((tg.workload.key, tg.reason) for tg in targets) == case.want
    # Kueue: "Snapshot was modified".
    assert snapshot.state() == before


def test_ported_case_count() -> None:
    """Every case of TestFairPreemptions (35) and both of the tournament-skipping test."""
    assert len(CASES) == 37
