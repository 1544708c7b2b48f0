"""Parity with Kueue's flavor-fungibility tests: ``preference`` and the flavor search.

Ports, each carrying its Kueue name, from ``pkg/scheduler/flavorassigner/flavorassigner_test.go``:

* ``TestIsPreferred``: the order of two flavor outcomes under each preference;
* ``TestReclaimBeforePriorityPreemption`` and ``TestHierarchical``: which flavor the assigner
  picks against a scripted preemption oracle;
* the ``TestAssignFlavors`` cases on fungibility not in ``test_kueue_parity_scheduler.py`` (the
  "using deprecated ..." twins of ported cases, which Kueue keeps since v1beta1's
  ``Borrow``/``Preempt`` became ``MayStopSearch``, and the fair-sharing ones);
* ``TestFlavorScanRecordsLastTriedFlavorIdx``: where the next search resumes, for its cases that
  need no topology (the TAS ones wait for topology-aware admission);

and from ``pkg/scheduler/scheduler_test.go`` ``TestSchedule``, the three ``preference`` cases
and the fungibility ones not in ``test_kueue_parity_scheduler.py``, run through a whole cycle with
kqueue's preemptor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pytest

from kqueue.engine.flavor import FlavorAssigner, GranularMode, PreemptionMode, is_preferred
from kqueue.engine.preemption.seam import PreemptionPossibility
from kqueue.engine.types import (
    ClusterQueueSpec,
    FlavorFungibility,
    FungibilityPolicy,
    FungibilityPreference,
)
from kqueue.engine.workload import make_info

from . import test_kueue_parity_scheduler as sched
from .builders import make_flavor
from .parity_support import (
    NOW,
    ScriptedOracle,
    adm,
    build_engine,
    cluster_queue,
    cohort,
    fq,
    fr,
    kwl,
    lq,
    reserve,
)

PP = PreemptionPossibility
PM = PreemptionMode
TNF = FungibilityPolicy.TRY_NEXT_FLAVOR
POB = FungibilityPreference.PREEMPTION_OVER_BORROWING
BOP = FungibilityPreference.BORROWING_OVER_PREEMPTION

# -- TestIsPreferred ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PreferredCase:
    name: str
    a: GranularMode
    b: GranularMode
    config: FlavorFungibility
    want: bool


def _g(mode: PreemptionMode, level: int) -> GranularMode:
    return GranularMode(mode, level)


# Kueue's cases without whenCan* in their config leave them empty; isPreferred never reads them.
_BOTH_TNF = FlavorFungibility(TNF, TNF)

PREFERRED_CASES = [
    PreferredCase(
        "feature gate disabled prioritises preemption",
        _g(PM.FIT, 0), _g(PM.PREEMPT, 0), _BOTH_TNF, True,
    ),
    PreferredCase(
        "explicit BorrowingOverPreemption prioritises borrowing distance",
        _g(PM.PREEMPT, 1), _g(PM.FIT, 2), replace(_BOTH_TNF, preference=BOP), False,
    ),
    PreferredCase(
        "explicit PreemptionOverBorrowing prioritises lower preemption",
        _g(PM.PREEMPT, 1), _g(PM.FIT, 2), replace(_BOTH_TNF, preference=POB), True,
    ),
    PreferredCase(
        "explicit PreemptionOverBorrowing breaks borrowing ties with preemption",
        _g(PM.PREEMPT, 1), _g(PM.FIT, 1), replace(_BOTH_TNF, preference=POB), False,
    ),
    PreferredCase(
        "explicit PreemptionOverBorrowing rejects no-candidate flavor before borrowing comparison",
        _g(PM.NO_CANDIDATES, 1), _g(PM.FIT, 2), replace(_BOTH_TNF, preference=POB), False,
    ),
    PreferredCase(
        "explicit PreemptionOverBorrowing prefers fit over shallower-borrowing no-candidate flavor",
        _g(PM.FIT, 2), _g(PM.NO_CANDIDATES, 1), replace(_BOTH_TNF, preference=POB), True,
    ),
    PreferredCase(
        "no-candidate flavor remains preferable to no-fit flavor",
        _g(PM.NO_CANDIDATES, 1), _g(PM.NO_FIT, 0), FlavorFungibility(), True,
    ),
    PreferredCase(
        "no-fit flavor remains worse than no-candidate flavor",
        _g(PM.NO_FIT, 0), _g(PM.NO_CANDIDATES, 1), FlavorFungibility(), False,
    ),
    PreferredCase(
        "no-candidate flavors retain borrowing preference",
        _g(PM.NO_CANDIDATES, 1), _g(PM.NO_CANDIDATES, 2), FlavorFungibility(preference=POB), True,
    ),
    PreferredCase(
        "no-candidate flavors retain borrowing preference in reverse",
        _g(PM.NO_CANDIDATES, 2), _g(PM.NO_CANDIDATES, 1), FlavorFungibility(preference=POB), False,
    ),
]


@pytest.mark.parametrize("case", PREFERRED_CASES, ids=[c.name for c in PREFERRED_CASES])
def test_is_preferred(case: PreferredCase) -> None:
    assert is_preferred(case.a, case.b, case.config) is case.want


def test_preferences_disagree_only_on_preempting_against_borrowing() -> None:
    """The two preferences order every pair alike except a better mode against less borrowing
    (this is what the setting is for), and unset behaves as BorrowingOverPreemption."""
    modes = [_g(m, level) for m in PM for level in (0, 1, 2)]
    unset, bop, pob = FlavorFungibility(), FlavorFungibility(preference=BOP), FlavorFungibility(
        preference=POB
    )
    viable = (PM.PREEMPT, PM.RECLAIM, PM.FIT)
    for a in modes:
        for b in modes:
            assert is_preferred(a, b, unset) == is_preferred(a, b, bop)
            conflict = (
                a.pmode in viable
                and b.pmode in viable
                and (a.pmode > b.pmode) != (a.borrow < b.borrow)
                and a.pmode != b.pmode
                and a.borrow != b.borrow
            )
            if conflict:
                assert is_preferred(a, b, bop) != is_preferred(a, b, pob)
            else:
                assert is_preferred(a, b, bop) == is_preferred(a, b, pob)


@pytest.mark.parametrize("preference", [None, BOP, POB])
def test_is_preferred_is_a_strict_order(preference: FungibilityPreference | None) -> None:
    """kqueue's: under each preference, "better than" is irreflexive, asymmetric and transitive
    over every mode and borrowing height, so the best flavor does not depend on the order the
    flavors are compared in beyond ties."""
    config = FlavorFungibility(preference=preference)
    modes = [_g(m, level) for m in PM for level in (0, 1, 2)]
    for a in modes:
        assert not is_preferred(a, a, config)
        for b in modes:
            assert not (is_preferred(a, b, config) and is_preferred(b, a, config))
            for c in modes:
                if is_preferred(a, b, config) and is_preferred(b, c, config):
                    assert is_preferred(a, c, config)


# -- TestReclaimBeforePriorityPreemption and TestHierarchical ------------------------------------


@dataclass
class PickCase:
    name: str
    requests: Mapping[str, str]
    want_mode: str
    want_flavors: Mapping[str, str]
    test_usage: Mapping[tuple[str, str], int] = field(default_factory=dict)
    other_usage: Mapping[tuple[str, str], int] = field(default_factory=dict)
    fungibility: FlavorFungibility | None = None
    oracle: Mapping[tuple[str, str], tuple[PreemptionPossibility, int]] = field(
        default_factory=dict
    )
    test_flavors: list[object] | None = None


RECLAIM_FLAVORS = [make_flavor(n).obj() for n in ("uno", "due", "tre")]


def _reclaim_cq(fungibility: FlavorFungibility | None) -> ClusterQueueSpec:
    spec = cluster_queue(
        "test-clusterqueue",
        [fq(n, compute="10", gpu="10") for n in ("uno", "due", "tre")],
        cohort="cohort",
        within="LowerPriority",
        reclaim="LowerPriority",
        when_can_preempt="TryNextFlavor",
    )
    return spec if fungibility is None else replace(spec, flavor_fungibility=fungibility)


RECLAIM_OTHER = cluster_queue(
    "other-clusterqueue", [fq(n, compute="0", gpu="0") for n in ("uno", "due", "tre")],
    cohort="cohort",
)

RECLAIM_CASES = [
    PickCase(
        "Select first flavor which fits",
        {"gpu": "10"}, "FIT", {"gpu": "tre"},
        test_usage={("uno", "gpu"): 1},
        other_usage={("due", "gpu"): 1},
    ),
    PickCase(
        "Select first flavor where gpu reclamation is possible",
        {"gpu": "10"}, "PREEMPT", {"gpu": "due"},
        test_usage={("uno", "gpu"): 1},
        other_usage={("due", "gpu"): 1, ("tre", "gpu"): 1},
        oracle={("uno", "gpu"): (PP.PREEMPT, 0), ("due", "gpu"): (PP.RECLAIM, 0)},
    ),
    PickCase(
        "Select first flavor when flavor fungibility is disabled",
        {"gpu": "10"}, "PREEMPT", {"gpu": "uno"},
        test_usage={("uno", "gpu"): 1},
        other_usage={("due", "gpu"): 1, ("tre", "gpu"): 1},
        fungibility=FlavorFungibility(when_can_preempt=FungibilityPolicy.MAY_STOP_SEARCH),
    ),
    PickCase(
        "Select first flavor when flavor fungibility is disabled; using deprecated "
        "WhenCanPreempt=MayStopSearch",
        {"gpu": "10"}, "PREEMPT", {"gpu": "uno"},
        test_usage={("uno", "gpu"): 1},
        other_usage={("due", "gpu"): 1, ("tre", "gpu"): 1},
        fungibility=FlavorFungibility(when_can_preempt=FungibilityPolicy.MAY_STOP_SEARCH),
    ),
    PickCase(
        "Select first flavor where priority based preemption is possible",
        {"gpu": "10"}, "PREEMPT", {"gpu": "uno"},
        test_usage={("uno", "gpu"): 1, ("due", "gpu"): 1, ("tre", "gpu"): 1},
    ),
    PickCase(
        "Select second flavor where gpu reclamation is possible, as compute Fits",
        {"gpu": "10", "compute": "10"}, "PREEMPT", {"gpu": "tre", "compute": "tre"},
        test_usage={("uno", "gpu"): 1, ("uno", "compute"): 1, ("due", "compute"): 1},
        other_usage={("due", "gpu"): 1, ("tre", "gpu"): 1},
        oracle={
            ("uno", "gpu"): (PP.PREEMPT, 0),
            ("due", "gpu"): (PP.RECLAIM, 0),
            ("tre", "gpu"): (PP.RECLAIM, 0),
        },
    ),
]

HIERARCHY_FLAVORS = [make_flavor(n).obj() for n in ("one", "two", "three")]
HIERARCHY_COHORTS = [
    cohort("three", [fq("three", cpu="4")]),
    cohort("two", [fq("two", cpu="4")], parent="three"),
    cohort("one", [fq("one", cpu="4")], parent="two"),
]
HIERARCHY_OTHER = cluster_queue(
    "other-clusterqueue", [fq(n, cpu="0") for n in ("one", "two", "three")], cohort="two"
)


def _hierarchy_cq(case: PickCase) -> ClusterQueueSpec:
    flavors = case.test_flavors or [fq(n, cpu="0") for n in ("one", "two", "three")]
    spec = cluster_queue(
        "test-clusterqueue",
        flavors,  # type: ignore[arg-type]
        cohort="one",
        within="LowerPriority",
        reclaim="LowerPriority",
        when_can_preempt="TryNextFlavor",
    )
    return spec if case.fungibility is None else replace(spec, flavor_fungibility=case.fungibility)


HIERARCHY_CASES = [
    PickCase(
        "Select the top flavor",
        {"cpu": "4"}, "FIT", {"cpu": "three"},
        test_usage={("one", "cpu"): 4_000},
        other_usage={("two", "cpu"): 4_000},
    ),
    PickCase(
        "Select the first flavor which fits",
        {"cpu": "4"}, "FIT", {"cpu": "two"},
        test_usage={("one", "cpu"): 4_000},
    ),
    PickCase(
        "Select deeper-borrowing flavor that fits when shallower-borrowing flavor has no "
        "preemption candidates",
        {"cpu": "4"}, "FIT", {"cpu": "two"},
        test_flavors=[fq("one", cpu=("4", "0")), fq("two", cpu="0"), fq("three", cpu="0")],
        test_usage={("one", "cpu"): 4_000},
        fungibility=FlavorFungibility(TNF, TNF, POB),
        oracle={("one", "cpu"): (PP.NO_CANDIDATES, 1)},
    ),
]


def _pick(
    case: PickCase,
    objects: list[object],
    test_cq: ClusterQueueSpec,
) -> None:
    engine = build_engine(objects)  # type: ignore[arg-type]
    snapshot = engine.cache.snapshot()
    if case.test_usage:
        snapshot.simulate_usage(
            test_cq.name, {fr(f, r): v for (f, r), v in case.test_usage.items()}
        )
    if case.other_usage:
        snapshot.simulate_usage(
            "other-clusterqueue",  # type: ignore[arg-type]
            {fr(f, r): v for (f, r), v in case.other_usage.items()},
        )
    oracle = ScriptedOracle({fr(f, r): v for (f, r), v in case.oracle.items()})
    info = make_info(kwl("wl", "default", requests=case.requests), {})
    got = FlavorAssigner(info, snapshot.cluster_queues[test_cq.name], snapshot.flavors, oracle)
    assignment = got.assign()
    assert assignment.mode().name == case.want_mode
    [main] = assignment.pod_sets
    assert {str(r): str(c.flavor) for r, c in main.flavors.items()} == case.want_flavors


@pytest.mark.parametrize("case", RECLAIM_CASES, ids=[c.name for c in RECLAIM_CASES])
def test_reclaim_before_priority_preemption(case: PickCase) -> None:
    test_cq = _reclaim_cq(case.fungibility)
    _pick(case, [*RECLAIM_FLAVORS, test_cq, RECLAIM_OTHER], test_cq)


@pytest.mark.parametrize("case", HIERARCHY_CASES, ids=[c.name for c in HIERARCHY_CASES])
def test_hierarchical(case: PickCase) -> None:
    test_cq = _hierarchy_cq(case)
    _pick(case, [*HIERARCHY_FLAVORS, *HIERARCHY_COHORTS, test_cq, HIERARCHY_OTHER], test_cq)


# -- TestAssignFlavors: the fungibility cases not ported beside the others -----------------------


def _twin(name: str, new_name: str) -> sched.AssignCase:
    """Kueue keeps a "using deprecated ..." copy of some cases (same fixture, v1beta1's
    ``Borrow``/``Preempt`` now being ``MayStopSearch``); it is the ported case renamed."""
    [case] = [c for c in sched.ASSIGN_CASES if c.name == name]
    return replace(case, name=new_name)


def _fair(reclaim: str, name: str) -> sched.AssignCase:
    """Kueue's "when borrowing while preemption is needed for flavor one, fair sharing enabled"
    fixture: under fair sharing a borrowing ClusterQueue may preempt when reclaimWithinCohort
    allows it (Any), and cannot with Never, so flavor two is taken."""
    cq = cluster_queue(
        sched.TEST_CQ,
        [fq("one", cpu="0"), fq("two", cpu="12")],
        cohort=sched.COHORT,
        reclaim=reclaim,
        when_can_borrow="MayStopSearch",
        when_can_preempt="MayStopSearch",
    )
    secondary = cluster_queue(sched.SECONDARY, [fq("one", cpu="12")], cohort=sched.COHORT)
    common = dict(
        secondary=secondary,
        secondary_usage={("one", "cpu"): 10_000},
        fair_sharing=True,
    )
    wl = kwl("wl", "default", requests={"cpu": "12"})
    if reclaim == "Any":
        return sched.AssignCase(
            name, wl, cq, "PREEMPT", {"main": {"cpu": ("one", "PREEMPT")}}, {"one/cpu": 12_000},
            want_borrowing=1, oracle={("one", "cpu"): (PP.PREEMPT, 1)},
            **common,  # type: ignore[arg-type]
        )
    return sched.AssignCase(
        name, wl, cq, "FIT", {"main": {"cpu": ("two", "FIT")}}, {"two/cpu": 12_000},
        oracle={("one", "cpu"): (PP.NO_CANDIDATES, 0)},
        **common,  # type: ignore[arg-type]
    )


FAIR = "when borrowing while preemption is needed for flavor one, fair sharing enabled"
DEPRECATED_MSS = "using deprecated WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch"

ASSIGN_CASES = [
    _twin(
        "preempt before try next flavor",
        "preempt before try next flavor; using WhenCanBorrow=MayStopSearch,"
        "WhenCanPreempt=MayStopSearch",
    ),
    _twin(
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=MayStopSearch",
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=MayStopSearch,"
        "WhenCanPreempt=MayStopSearch",
    ),
    _twin(
        "when borrowing while preemption is needed for flavor one, no borrowingLimit; "
        "WhenCanBorrow=MayStopSearch",
        "when borrowing while preemption is needed for flavor one, no borrowingLimit; "
        "WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch",
    ),
    _twin(
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor",
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor,"
        "WhenCanPreempt=MayStopSearch",
    ),
    _twin(
        "cannot preempt in cohort (oracle returns None) for the first flavor, tries the second "
        "flavor (which fits)",
        "cannot preempt in cohort (oracle returns None) for the first flavor, tries the second "
        f"flavor (which fits); {DEPRECATED_MSS}",
    ),
    _fair("Any", f"{FAIR}, reclaimWithinCohort=Any"),
    _fair("Any", f"{FAIR}, reclaimWithinCohort=Any; {DEPRECATED_MSS}"),
    _fair("Never", f"{FAIR}, reclaimWithinCohort=Never"),
    _fair("Never", f"{FAIR}, reclaimWithinCohort=Never; {DEPRECATED_MSS}"),
]


@pytest.mark.parametrize("case", ASSIGN_CASES, ids=[c.name for c in ASSIGN_CASES])
def test_assign_flavors(case: sched.AssignCase) -> None:
    sched.test_assign_flavors(case)


# -- TestFlavorScanRecordsLastTriedFlavorIdx (its cases without topology) ------------------------


@dataclass(frozen=True)
class BookmarkCase:
    name: str
    nominal: str
    spare: str
    request: str
    fungibility: FlavorFungibility
    want_mode: str
    want_tried: int
    usage: Mapping[tuple[str, str], int] = field(default_factory=dict)
    oracle: Mapping[tuple[str, str], tuple[PreemptionPossibility, int]] = field(
        default_factory=dict
    )


MSS = FungibilityPolicy.MAY_STOP_SEARCH

BOOKMARK_CASES = [
    # Kueue's name says "quota and topology": without a topology request only quota decides.
    BookmarkCase(
        "quota and topology both fit on the first flavor: bookmark names it",
        "10", "0", "2", FlavorFungibility(TNF, TNF, POB), "FIT", 0,
    ),
    BookmarkCase(
        "fits only by borrowing: bookmark says start over",
        "1", "20", "2", FlavorFungibility(TNF, TNF, POB), "FIT", -1,
    ),
    BookmarkCase(
        "fits only by borrowing, but WhenCanBorrow is MayStopSearch: bookmark names the first "
        "flavor",
        "1", "20", "2", FlavorFungibility(MSS, TNF, POB), "FIT", 0,
    ),
    BookmarkCase(
        "needs preemption and candidates exist: bookmark names the first flavor",
        "2", "0", "2", FlavorFungibility(MSS, MSS, POB), "PREEMPT", 0,
        usage={("flavor-1", "cpu"): 2_000, ("flavor-2", "cpu"): 2_000},
        oracle={("flavor-1", "cpu"): (PP.PREEMPT, 0), ("flavor-2", "cpu"): (PP.PREEMPT, 0)},
    ),
    BookmarkCase(
        "needs preemption but no candidates: bookmark says start over whatever the policy",
        "2", "0", "2", FlavorFungibility(MSS, MSS, POB), "PREEMPT", -1,
        usage={("flavor-1", "cpu"): 2_000, ("flavor-2", "cpu"): 2_000},
        oracle={
            ("flavor-1", "cpu"): (PP.NO_CANDIDATES, 0),
            ("flavor-2", "cpu"): (PP.NO_CANDIDATES, 0),
        },
    ),
]


@pytest.mark.parametrize("case", BOOKMARK_CASES, ids=[c.name for c in BOOKMARK_CASES])
def test_flavor_scan_records_last_tried_flavor_idx(case: BookmarkCase) -> None:
    cq = replace(
        cluster_queue("cq", [fq("flavor-1", cpu=case.nominal), fq("flavor-2", cpu=case.nominal)],
                      cohort="cohort"),
        flavor_fungibility=case.fungibility,
    )
    sibling = cluster_queue(
        "sibling", [fq("flavor-1", cpu=case.spare), fq("flavor-2", cpu=case.spare)],
        cohort="cohort",
    )
    flavors = [make_flavor("flavor-1").obj(), make_flavor("flavor-2").obj()]
    engine = build_engine([*flavors, cq, sibling])
    snapshot = engine.cache.snapshot()
    if case.usage:
        snapshot.simulate_usage(cq.name, {fr(f, r): v for (f, r), v in case.usage.items()})
    oracle = ScriptedOracle({fr(f, r): v for (f, r), v in case.oracle.items()})
    info = make_info(kwl("wl", "default", requests={"cpu": case.request}), {})
    got = FlavorAssigner(info, snapshot.cluster_queues[cq.name], snapshot.flavors, oracle).assign()
    assert got.mode().name == case.want_mode
    [main] = got.pod_sets
    assert main.flavors["cpu"].tried_index == case.want_tried  # type: ignore[index]


# -- TestSchedule: the preference cases ----------------------------------------------------------

SCHEDULE_CASES = [
    sched.Case(
        "PreemptionOverBorrowing preference: preempt in first flavor instead of borrowing in "
        "second",
        additional_cqs=[
            cluster_queue(
                "pob-cq",
                [fq("on-demand", cpu=("5", "0")), fq("spot", cpu=("0", "5"))],
                cohort="pob-cohort",
                within="LowerPriority",
                when_can_borrow="TryNextFlavor",
                when_can_preempt="TryNextFlavor",
                preference="PreemptionOverBorrowing",
            ),
            cluster_queue(
                "pob-lender", [fq("on-demand", cpu="0"), fq("spot", cpu="5")], cohort="pob-cohort"
            ),
        ],
        additional_lqs=[lq("default", "pob-queue", "pob-cq")],
        workloads=[
            reserve(
                kwl("low-pob", "default", queue="pob-queue", priority=-1, requests={"cpu": "5"}),
                adm("pob-cq", cpu=("on-demand", "5")),
                NOW,
            ),
            kwl("high-pob", "default", queue="pob-queue", priority=0, requests={"cpu": "5"}),
        ],
        want_preempted={"default/low-pob"},
        want_assignments=["default/low-pob"],
        want_left={"pob-cq": ["default/high-pob"]},
    ),
    sched.Case(
        "PreemptionOverBorrowing preference: select fitting second flavor over first flavor with "
        "no preemption candidates",
        cohorts=[
            cohort("nopc-root", [fq("on-demand", cpu="0"), fq("spot", cpu="5")]),
            cohort("nopc-mid", parent="nopc-root"),
        ],
        additional_cqs=[
            cluster_queue(
                "nopc-cq",
                [fq("on-demand", cpu=("5", "0")), fq("spot", cpu="0")],
                cohort="nopc-mid",
                within="LowerPriority",
                when_can_borrow="TryNextFlavor",
                when_can_preempt="TryNextFlavor",
                preference="PreemptionOverBorrowing",
            ),
            cluster_queue(
                "nopc-sibling", [fq("on-demand", cpu="5"), fq("spot", cpu="0")], cohort="nopc-mid"
            ),
        ],
        additional_lqs=[lq("default", "nopc-queue", "nopc-cq")],
        workloads=[
            reserve(
                kwl("admitted-nopc", "default", queue="nopc-queue", priority=0,
                    requests={"cpu": "5"}),
                adm("nopc-cq", cpu=("on-demand", "5")),
                NOW,
            ),
            kwl("pending-nopc", "default", queue="nopc-queue", priority=0, requests={"cpu": "5"}),
        ],
        want_scheduled={"default/pending-nopc": adm("nopc-cq", cpu=("spot", "5"))},
        want_assignments=["default/admitted-nopc", "default/pending-nopc"],
    ),
    sched.Case(
        "BorrowingOverPreemption preference: borrow in second flavor instead of preempting in "
        "first",
        additional_cqs=[
            cluster_queue(
                "bop-cq",
                [fq("on-demand", cpu=("5", "0")), fq("spot", cpu=("0", "5"))],
                cohort="bop-cohort",
                within="LowerPriority",
                when_can_borrow="TryNextFlavor",
                when_can_preempt="TryNextFlavor",
                preference="BorrowingOverPreemption",
            ),
            cluster_queue(
                "bop-lender", [fq("on-demand", cpu="0"), fq("spot", cpu="5")], cohort="bop-cohort"
            ),
        ],
        additional_lqs=[lq("default", "bop-queue", "bop-cq")],
        workloads=[
            reserve(
                kwl("low-bop", "default", queue="bop-queue", priority=-1, requests={"cpu": "5"}),
                adm("bop-cq", cpu=("on-demand", "5")),
                NOW,
            ),
            kwl("high-bop", "default", queue="bop-queue", priority=0, requests={"cpu": "5"}),
        ],
        want_scheduled={"default/high-bop": adm("bop-cq", cpu=("spot", "5"))},
        want_assignments=["default/low-bop", "default/high-bop"],
    ),
]


SCHEDULE_CASES += [
    # Kueue's current name of the case ported as "...; WhenCanPreempt: Preempt" (v1beta1's name
    # for MayStopSearch) in test_kueue_parity_scheduler.py: the same fixture.
    replace(
        next(c for c in sched.SCHEDULE_CASES if c.name.startswith("use second flavor when")),
        name="use second flavor when the first has no preemption candidates; WhenCanPreempt: "
        "MayStopSearch",
    ),
    sched.Case(
        "admit to second flavor when first needs preemption; WhenCanPreempt: TryNextFlavor",
        additional_cqs=[
            cluster_queue(
                "preempt-attempts-cq",
                [fq("on-demand", cpu="1"), fq("spot", cpu="1")],
                within="LowerPriority",
                when_can_preempt="TryNextFlavor",
            )
        ],
        additional_lqs=[lq("eng-alpha", "preempt-attempts-lq", "preempt-attempts-cq")],
        workloads=[
            reserve(
                kwl("blocker", "eng-alpha", queue="preempt-attempts-lq", priority=50,
                    requests={"cpu": "1"}),
                adm("preempt-attempts-cq", cpu=("on-demand", "1")),
                NOW,
            ),
            kwl("test-wl", "eng-alpha", queue="preempt-attempts-lq", priority=100,
                requests={"cpu": "1"}),
        ],
        want_scheduled={"eng-alpha/test-wl": adm("preempt-attempts-cq", cpu=("spot", "1"))},
        want_assignments=["eng-alpha/test-wl", "eng-alpha/blocker"],
    ),
]


@pytest.mark.parametrize("case", SCHEDULE_CASES, ids=[c.name for c in SCHEDULE_CASES])
def test_schedule(case: sched.Case) -> None:
    sched.test_schedule(case)


def test_without_preference_the_same_queue_borrows() -> None:
    """The first TestSchedule case with the preference unset (BorrowingOverPreemption): the
    workload borrows spot instead of preempting, so the preference is what made it preempt."""
    case = SCHEDULE_CASES[0]
    unset = [
        replace(cq, flavor_fungibility=replace(cq.flavor_fungibility, preference=None))
        for cq in case.additional_cqs
    ]
    sched.test_schedule(
        replace(
            case,
            additional_cqs=unset,
            want_scheduled={"default/high-pob": adm("pob-cq", cpu=("spot", "5"))},
            want_preempted=set(),
            want_assignments=["default/low-pob", "default/high-pob"],
            want_left={},
        )
    )


def test_ported_case_counts() -> None:
    assert len(PREFERRED_CASES) == 10  # all of TestIsPreferred
    assert len(RECLAIM_CASES) == 6  # all of TestReclaimBeforePriorityPreemption
    assert len(HIERARCHY_CASES) == 3  # all of TestHierarchical
    assert len(SCHEDULE_CASES) == 5  # TestSchedule's preference and fungibility cases

