"""Parity with Kueue's scheduler and flavor-assigner table tests.

Each case is a port of a case of Kueue (kubernetes-sigs/kueue) and carries its name:

* ``TestSchedule`` and ``TestLastSchedulingContext`` (``pkg/scheduler/scheduler_test.go``): the
  fixtures are rebuilt with kqueue objects, one scheduling cycle runs (two for
  TestLastSchedulingContext) with ``ClassicalPreemptor``, and the results are compared with
  Kueue's ``wantScheduled`` (admissions written this cycle), ``wantAssignments`` (who holds quota
  afterwards), ``wantPreempted``, ``wantLeft`` and ``wantInadmissibleLeft`` (the queue dumps).
* ``TestAssignFlavors`` (``pkg/scheduler/flavorassigner/flavorassigner_test.go``): the flavor
  assigner runs against a snapshot with the case's usage and Kueue's scripted preemption oracle;
  the representative mode, flavors and modes per resource, borrowing, usage and NoFit reason are
  compared with ``wantRepMode``/``wantAssignment``.

Kueue's fair-sharing cases are in ``test_kueue_parity_fair_scheduling.py``, its TAS cases in
``test_kueue_parity_tas.py``, the admission fair sharing ones in ``test_kueue_parity_afs.py``,
the fungibility cases in ``test_kueue_parity_fungibility.py``, the LimitRange and
requests-above-limits ones in ``test_admissibility.py``. Kueue features kqueue does not
implement (admission checks, MultiKueue, reclaimable pods, workload slices in the assigner) are
not ported.
Where kqueue deliberately disagrees with Kueue (see docs/engine.md "Where kqueue differs from
Kueue"), the case is ``xfail(strict=True)`` with the difference, so a change of either behaviour is
noticed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kqueue.engine.flavor import FlavorAssigner
from kqueue.engine.preemption.seam import PreemptionPossibility
from kqueue.engine.types import (
    ClusterQueueSpec,
    CohortSpec,
    LocalQueueSpec,
    ResourceFlavor,
    SelectorRequirement,
    Toleration,
    Workload,
)
from kqueue.engine.workload import make_info

from .builders import make_flavor, t
from .parity_support import (
    CYCLE,
    NOW,
    Adm,
    ScriptedOracle,
    adm,
    assignment_view,
    build_engine,
    cluster_queue,
    cohort,
    decisions,
    engine_from_manifests,
    fq,
    fr,
    holding,
    kwl,
    lq,
    preempted_keys,
    ps,
    psa,
    psa_of,
    queue_dump,
    reserve,
    scheduled,
    simple,
)

GPU = "example.com/gpu"

# -- TestSchedule's fixtures ---------------------------------------------------------------------

SCHEDULE_FLAVORS = [make_flavor(n).obj() for n in ("default", "on-demand", "spot", "model-a")]

SCHEDULE_CQS = [
    cluster_queue(
        "sales", [fq("default", cpu=("50", "0"))], namespace_in=("sales",), strict_fifo=True
    ),
    cluster_queue(
        "eng-alpha",
        [fq("on-demand", cpu=("50", "50")), fq("spot", cpu=("100", "0"))],
        cohort="eng",
        namespace_in=("eng",),
        strict_fifo=True,
    ),
    cluster_queue(
        "eng-beta",
        [fq("on-demand", cpu=("50", "10")), fq("spot", cpu=("0", "100"))],
        [fq("model-a", {GPU: ("20", "0")})],
        cohort="eng",
        namespace_in=("eng",),
        strict_fifo=True,
        reclaim="Any",
        within="LowerPriority",
    ),
    cluster_queue("flavor-nonexistent-cq", [fq("nonexistent-flavor", cpu="50")], strict_fifo=True),
    cluster_queue(
        "lend-a", [fq("default", cpu=("3", None, "2"))], cohort="lend", namespace_in=("lend",)
    ),
    cluster_queue(
        "lend-b", [fq("default", cpu=("2", None, "2"))], cohort="lend", namespace_in=("lend",)
    ),
]

SCHEDULE_LQS = [
    lq("sales", "main", "sales"),
    lq("sales", "blocked", "eng-alpha"),
    lq("eng-alpha", "main", "eng-alpha"),
    lq("eng-beta", "main", "eng-beta"),
    lq("sales", "flavor-nonexistent-queue", "flavor-nonexistent-cq"),
    lq("sales", "cq-nonexistent-queue", "nonexistent-cq"),
    lq("lend", "lend-a-queue", "lend-a"),
    lq("lend", "lend-b-queue", "lend-b"),
]

SCHEDULE_NAMESPACES = {
    "eng-alpha": {"dep": "eng"},
    "eng-beta": {"dep": "eng"},
    "eng-gamma": {"dep": "eng"},
    "sales": {"dep": "sales"},
    "lend": {"dep": "lend"},
}

Obj = ResourceFlavor | ClusterQueueSpec | CohortSpec | LocalQueueSpec | Workload


@dataclass
class Case:
    """One ported case; ``want_*`` mirror Kueue's fields of the same names."""

    name: str
    workloads: list[Workload]
    want_scheduled: Mapping[str, Adm] = field(default_factory=dict)
    # Keys of Kueue's wantAssignments: every workload holding quota after the cycle.
    want_assignments: Sequence[str] = ()
    want_preempted: set[str] = field(default_factory=set)
    want_left: Mapping[str, list[str]] = field(default_factory=dict)
    want_inadmissible: Mapping[str, list[str]] = field(default_factory=dict)
    additional_cqs: Sequence[ClusterQueueSpec] = ()
    additional_lqs: Sequence[LocalQueueSpec] = ()
    cohorts: Sequence[CohortSpec] = ()
    # Replaces TestSchedule's ClusterQueues (Kueue's cases that redefine them).
    cqs: Sequence[ClusterQueueSpec] | None = None
    admission_error: bool = False
    xfail: str | None = None


def _param(case: Case) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.name, marks=marks)


SCHEDULE_CASES: list[Case] = [
    # scheduler_test.go TestSchedule: "use second flavor when the first has no preemption
    # candidates; WhenCanPreempt: Preempt" (v1beta1 Preempt is v1beta2 MayStopSearch).
    Case(
        "use second flavor when the first has no preemption candidates; WhenCanPreempt: Preempt",
        additional_cqs=[
            cluster_queue(
                "other-alpha",
                [fq("on-demand", cpu=("50", "50")), fq("spot", cpu=("100", "0"))],
                within="LowerPriority",
                when_can_preempt="MayStopSearch",
            )
        ],
        additional_lqs=[lq("eng-alpha", "other", "other-alpha")],
        workloads=[
            reserve(
                kwl("admitted", "eng-alpha", queue="other", requests={"cpu": "50"}),
                adm("other-alpha", cpu=("on-demand", "50")),
            ),
            kwl("new", "eng-alpha", queue="other", requests={"cpu": "20"}),
        ],
        want_scheduled={"eng-alpha/new": adm("other-alpha", cpu=("spot", "20"))},
        want_assignments=["eng-alpha/admitted", "eng-alpha/new"],
    ),
    # scheduler_test.go TestSchedule: "workload fits in single clusterQueue, with check state
    # pending" (kqueue has no admission checks; quota is reserved all the same).
    Case(
        "workload fits in single clusterQueue, with check state pending",
        workloads=[kwl("foo", "sales", queue="main", pod_sets=[ps("one", 10, {"cpu": "1"})])],
        want_scheduled={"sales/foo": adm("sales", psa("one", 10, cpu=("default", "10")))},
        want_assignments=["sales/foo"],
    ),
    # scheduler_test.go TestSchedule: "skip workload with missing or deleted ClusterQueue (NoFit)"
    Case(
        "skip workload with missing or deleted ClusterQueue (NoFit)",
        workloads=[
            kwl(
                "missing-cq-workload",
                "sales",
                queue="non-existent-queue",
                pod_sets=[ps("set", 1, {"cpu": "1"})],
            )
        ],
    ),
    # scheduler_test.go TestSchedule: "error during admission" (the status write fails: the
    # assumed admission is forgotten and the workload is back in its queue).
    Case(
        "error during admission",
        workloads=[kwl("foo", "sales", queue="main", pod_sets=[ps("one", 10, {"cpu": "1"})])],
        admission_error=True,
        want_left={"sales": ["sales/foo"]},
    ),
    # scheduler_test.go TestSchedule: "single clusterQueue full"
    Case(
        "single clusterQueue full",
        workloads=[
            kwl("new", "sales", queue="main", pod_sets=[ps("one", 11, {"cpu": "1"})]),
            reserve(
                kwl("assigned", "sales", pod_sets=[ps("one", 40, {"cpu": "1"})]),
                adm("sales", psa("one", 40, cpu=("default", "40"))),
            ),
        ],
        want_assignments=["sales/assigned"],
        want_left={"sales": ["sales/new"]},
    ),
    # scheduler_test.go TestSchedule: "failed to match clusterQueue selector"
    Case(
        "failed to match clusterQueue selector",
        workloads=[kwl("new", "sales", queue="blocked", pod_sets=[ps("one", 1, {"cpu": "1"})])],
        want_inadmissible={"eng-alpha": ["sales/new"]},
    ),
    # scheduler_test.go TestSchedule: "admit in different cohorts"
    Case(
        "admit in different cohorts",
        workloads=[
            kwl("new", "sales", queue="main", pod_sets=[ps("one", 1, {"cpu": "1"})]),
            kwl("new", "eng-alpha", queue="main", pod_sets=[ps("one", 51, {"cpu": "1"})]),
        ],
        want_scheduled={
            "sales/new": adm("sales", psa("one", 1, cpu=("default", "1"))),
            "eng-alpha/new": adm("eng-alpha", psa("one", 51, cpu=("on-demand", "51"))),
        },
        want_assignments=["sales/new", "eng-alpha/new"],
    ),
    # scheduler_test.go TestSchedule: "admit in same cohort with no borrowing"
    Case(
        "admit in same cohort with no borrowing",
        workloads=[
            kwl("new", "eng-alpha", queue="main", pod_sets=[ps("one", 40, {"cpu": "1"})]),
            kwl("new", "eng-beta", queue="main", pod_sets=[ps("one", 40, {"cpu": "1"})]),
        ],
        want_scheduled={
            "eng-alpha/new": adm("eng-alpha", psa("one", 40, cpu=("on-demand", "40"))),
            "eng-beta/new": adm("eng-beta", psa("one", 40, cpu=("on-demand", "40"))),
        },
        want_assignments=["eng-alpha/new", "eng-beta/new"],
    ),
    # scheduler_test.go TestSchedule: "assign multiple resources and flavors"
    Case(
        "assign multiple resources and flavors",
        workloads=[
            kwl(
                "new",
                "eng-beta",
                queue="main",
                pod_sets=[ps("one", 10, {"cpu": "6", GPU: "1"}), ps("two", 40, {"cpu": "1"})],
            )
        ],
        want_scheduled={
            "eng-beta/new": adm(
                "eng-beta",
                psa_of("one", 10, {"cpu": ("on-demand", "60"), GPU: ("model-a", "10")}),
                psa("two", 40, cpu=("spot", "40")),
            )
        },
        want_assignments=["eng-beta/new"],
    ),
    # scheduler_test.go TestSchedule: "cannot borrow if cohort was assigned and would result in
    # overadmission"
    Case(
        "cannot borrow if cohort was assigned and would result in overadmission",
        workloads=[
            kwl("new", "eng-alpha", queue="main", pod_sets=[ps("one", 45, {"cpu": "1"})]),
            kwl("new", "eng-beta", queue="main", pod_sets=[ps("one", 56, {"cpu": "1"})]),
        ],
        want_scheduled={"eng-alpha/new": adm("eng-alpha", psa("one", 45, cpu=("on-demand", "45")))},
        want_assignments=["eng-alpha/new"],
        want_left={"eng-beta": ["eng-beta/new"]},
    ),
    # scheduler_test.go TestSchedule: "can borrow if cohort was assigned and will not result in
    # overadmission"
    Case(
        "can borrow if cohort was assigned and will not result in overadmission",
        workloads=[
            kwl("new", "eng-alpha", queue="main", pod_sets=[ps("one", 45, {"cpu": "1"})]),
            kwl("new", "eng-beta", queue="main", pod_sets=[ps("one", 55, {"cpu": "1"})]),
        ],
        want_scheduled={
            "eng-alpha/new": adm("eng-alpha", psa("one", 45, cpu=("on-demand", "45"))),
            "eng-beta/new": adm("eng-beta", psa("one", 55, cpu=("on-demand", "55"))),
        },
        want_assignments=["eng-alpha/new", "eng-beta/new"],
    ),
    # scheduler_test.go TestSchedule: "can borrow if needs reclaim from cohort in different flavor"
    Case(
        "can borrow if needs reclaim from cohort in different flavor",
        workloads=[
            kwl("can-reclaim", "eng-alpha", queue="main", requests={"cpu": "100"}),
            kwl("needs-to-borrow", "eng-beta", queue="main", requests={"cpu": "1"}),
            reserve(
                kwl("user-on-demand", "eng-beta", requests={"cpu": "50"}),
                adm("eng-beta", cpu=("on-demand", "50")),
            ),
            reserve(
                kwl("user-spot", "eng-beta", requests={"cpu": "1"}),
                adm("eng-beta", cpu=("spot", "1")),
            ),
        ],
        want_scheduled={"eng-beta/needs-to-borrow": adm("eng-beta", cpu=("on-demand", "1"))},
        want_assignments=["eng-beta/user-spot", "eng-beta/user-on-demand", "eng-beta/needs-to-borrow"],
        want_left={"eng-alpha": ["eng-alpha/can-reclaim"]},
    ),
    # scheduler_test.go TestSchedule: "workload exceeds lending limit when borrow in cohort"
    Case(
        "workload exceeds lending limit when borrow in cohort",
        workloads=[
            reserve(kwl("a", "lend", requests={"cpu": "2"}), adm("lend-b", cpu=("default", "2"))),
            kwl("b", "lend", queue="lend-b-queue", requests={"cpu": "3"}),
        ],
        want_assignments=["lend/a"],
        want_inadmissible={"lend-b": ["lend/b"]},
    ),
    # scheduler_test.go TestSchedule: "lendingLimit should not affect assignments when feature
    # disabled". kqueue has no LendingLimit gate; with the gate off Kueue ignores lendingLimit,
    # which is the same as lend-a and lend-b without one.
    Case(
        "lendingLimit should not affect assignments when feature disabled",
        cqs=[
            *SCHEDULE_CQS[:4],
            cluster_queue("lend-a", [fq("default", cpu="3")], cohort="lend", namespace_in=("lend",)),
            cluster_queue("lend-b", [fq("default", cpu="2")], cohort="lend", namespace_in=("lend",)),
        ],
        workloads=[
            reserve(kwl("a", "lend", requests={"cpu": "2"}), adm("lend-b", cpu=("default", "2"))),
            kwl("b", "lend", queue="lend-b-queue", requests={"cpu": "3"}),
        ],
        want_scheduled={"lend/b": adm("lend-b", cpu=("default", "3"))},
        want_assignments=["lend/a", "lend/b"],
    ),
    # scheduler_test.go TestSchedule: "preempt workloads in ClusterQueue and cohort"
    Case(
        "preempt workloads in ClusterQueue and cohort",
        workloads=[
            kwl("preemptor", "eng-beta", queue="main", requests={"cpu": "20"}),
            reserve(
                kwl("use-all-spot", "eng-alpha", requests={"cpu": "100"}),
                adm("eng-alpha", cpu=("spot", "100")),
            ),
            reserve(
                kwl("low-1", "eng-beta", priority=-1, requests={"cpu": "30"}),
                adm("eng-beta", cpu=("on-demand", "30")),
            ),
            reserve(
                kwl("low-2", "eng-beta", priority=-2, requests={"cpu": "10"}),
                adm("eng-beta", cpu=("on-demand", "10")),
            ),
            reserve(
                kwl("borrower", "eng-alpha", requests={"cpu": "60"}),
                adm("eng-alpha", cpu=("on-demand", "60")),
            ),
        ],
        want_preempted={"eng-alpha/borrower", "eng-beta/low-2"},
        want_assignments=[
            "eng-alpha/use-all-spot",
            "eng-beta/low-1",
            "eng-beta/low-2",
            "eng-alpha/borrower",
        ],
        want_left={"eng-beta": ["eng-beta/preemptor"]},
    ),
    # scheduler_test.go TestSchedule: "multiple CQs need preemption"
    Case(
        "multiple CQs need preemption",
        additional_cqs=[
            cluster_queue("other-alpha", [fq("on-demand", cpu=("50", "50"))], cohort="other"),
            cluster_queue(
                "other-beta",
                [fq("on-demand", cpu=("50", "10"))],
                cohort="other",
                reclaim="Any",
                within="LowerPriority",
            ),
        ],
        additional_lqs=[
            lq("eng-alpha", "other", "other-alpha"),
            lq("eng-beta", "other", "other-beta"),
        ],
        workloads=[
            kwl("preemptor", "eng-beta", queue="other", priority=-1, requests={"cpu": "1"}),
            kwl("pending", "eng-alpha", queue="other", priority=1, requests={"cpu": "1"}),
            reserve(
                kwl("use-all", "eng-alpha", requests={"cpu": "100"}),
                adm("other-alpha", cpu=("on-demand", "100")),
            ),
        ],
        want_preempted={"eng-alpha/use-all"},
        want_assignments=["eng-alpha/use-all"],
        want_left={"other-beta": ["eng-beta/preemptor"]},
        want_inadmissible={"other-alpha": ["eng-alpha/pending"]},
    ),
    # scheduler_test.go TestSchedule: "cannot borrow resource not listed in clusterQueue"
    Case(
        "cannot borrow resource not listed in clusterQueue",
        workloads=[kwl("new", "eng-alpha", queue="main", requests={GPU: "1"})],
        want_left={"eng-alpha": ["eng-alpha/new"]},
    ),
    # scheduler_test.go TestSchedule: "not enough resources to borrow, fallback to next flavor;
    # WhenCanPreempt: TryNextFlavor"
    Case(
        "not enough resources to borrow, fallback to next flavor; WhenCanPreempt: TryNextFlavor",
        workloads=[
            kwl("new", "eng-alpha", queue="main", pod_sets=[ps("one", 60, {"cpu": "1"})]),
            reserve(
                kwl("existing", "eng-beta", pod_sets=[ps("one", 45, {"cpu": "1"})]),
                adm("eng-beta", psa("one", 45, cpu=("on-demand", "45"))),
            ),
        ],
        want_scheduled={"eng-alpha/new": adm("eng-alpha", psa("one", 60, cpu=("spot", "60")))},
        want_assignments=["eng-alpha/new", "eng-beta/existing"],
    ),
    # scheduler_test.go TestSchedule: "workload should not fit in nonexistent clusterQueue"
    Case(
        "workload should not fit in nonexistent clusterQueue",
        workloads=[kwl("foo", "sales", queue="cq-nonexistent-queue", requests={"cpu": "1"})],
    ),
    # scheduler_test.go TestSchedule: "workload should not fit in clusterQueue with nonexistent
    # flavor" (the ClusterQueue is inactive; the workload stays in its queue).
    Case(
        "workload should not fit in clusterQueue with nonexistent flavor",
        workloads=[kwl("foo", "sales", queue="flavor-nonexistent-queue", requests={"cpu": "1"})],
        want_left={"flavor-nonexistent-cq": ["sales/foo"]},
    ),
    # scheduler_test.go TestSchedule: "no overadmission while borrowing"
    Case(
        "no overadmission while borrowing",
        additional_cqs=[
            cluster_queue(
                "eng-gamma",
                [fq("on-demand", cpu=("50", "10")), fq("spot", cpu=("0", "100"))],
                cohort="eng",
                reclaim="Any",
                within="LowerPriority",
            )
        ],
        additional_lqs=[lq("eng-gamma", "main", "eng-gamma")],
        workloads=[
            kwl("new", "eng-beta", queue="main", created=NOW - 2, pod_sets=[ps("one", 50, {"cpu": "1"})]),
            kwl("new-alpha", "eng-alpha", queue="main", created=NOW - 1, pod_sets=[ps("one", 1, {"cpu": "1"})]),
            kwl("new-gamma", "eng-gamma", queue="main", created=NOW, pod_sets=[ps("one", 50, {"cpu": "1"})]),
            reserve(
                kwl(
                    "existing",
                    "eng-gamma",
                    pod_sets=[
                        ps("borrow-on-demand", 51, {"cpu": "1"}),
                        ps("use-all-spot", 100, {"cpu": "1"}),
                    ],
                ),
                adm(
                    "eng-gamma",
                    psa("borrow-on-demand", 51, cpu=("on-demand", "51")),
                    psa("use-all-spot", 100, cpu=("spot", "100")),
                ),
            ),
        ],
        want_scheduled={
            "eng-beta/new": adm("eng-beta", psa("one", 50, cpu=("on-demand", "50"))),
            "eng-alpha/new-alpha": adm("eng-alpha", psa("one", 1, cpu=("on-demand", "1"))),
        },
        want_assignments=["eng-gamma/existing", "eng-beta/new", "eng-alpha/new-alpha"],
        want_inadmissible={"eng-gamma": ["eng-gamma/new-gamma"]},
    ),
    # scheduler_test.go TestSchedule: "partial admission single variable pod set"
    Case(
        "partial admission single variable pod set",
        workloads=[
            kwl("new", "sales", queue="main", pod_sets=[ps("one", 50, {"cpu": "2"}, min_count=20)])
        ],
        want_scheduled={"sales/new": adm("sales", psa("one", 25, cpu=("default", "50")))},
        want_assignments=["sales/new"],
    ),
    # scheduler_test.go TestSchedule: "partial admission single variable pod set, preempt first"
    Case(
        "partial admission single variable pod set, preempt first",
        workloads=[
            kwl(
                "new",
                "eng-beta",
                queue="main",
                priority=4,
                pod_sets=[ps("one", 20, {GPU: "1"}, min_count=10)],
            ),
            reserve(
                kwl("old", "eng-beta", priority=-4, pod_sets=[ps("one", 10, {GPU: "1"})]),
                adm("eng-beta", psa_of("one", 10, {GPU: ("model-a", "10")})),
            ),
        ],
        want_preempted={"eng-beta/old"},
        want_assignments=["eng-beta/old"],
        want_left={"eng-beta": ["eng-beta/new"]},
    ),
    # scheduler_test.go TestSchedule: "partial admission single variable pod set, preempt with
    # partial admission"
    Case(
        "partial admission single variable pod set, preempt with partial admission",
        workloads=[
            kwl(
                "new",
                "eng-beta",
                queue="main",
                priority=4,
                pod_sets=[ps("one", 30, {GPU: "1"}, min_count=10)],
            ),
            reserve(
                kwl("old", "eng-beta", priority=-4, pod_sets=[ps("one", 10, {GPU: "1"})]),
                adm("eng-beta", psa_of("one", 10, {GPU: ("model-a", "10")})),
            ),
        ],
        want_preempted={"eng-beta/old"},
        want_assignments=["eng-beta/old"],
        want_left={"eng-beta": ["eng-beta/new"]},
    ),
    # scheduler_test.go TestSchedule: "partial admission multiple variable pod sets"
    Case(
        "partial admission multiple variable pod sets",
        workloads=[
            kwl(
                "new",
                "sales",
                queue="main",
                pod_sets=[
                    ps("one", 20, {"cpu": "1"}),
                    ps("two", 30, {"cpu": "1"}, min_count=10),
                    ps("three", 15, {"cpu": "1"}, min_count=5),
                ],
            )
        ],
        want_scheduled={
            "sales/new": adm(
                "sales",
                psa("one", 20, cpu=("default", "20")),
                psa("two", 20, cpu=("default", "20")),
                psa("three", 10, cpu=("default", "10")),
            )
        },
        want_assignments=["sales/new"],
    ),
]


def _co_cqs() -> list[ClusterQueueSpec]:
    """The three ClusterQueues of Kueue's "two workloads can borrow ..." cases."""
    rg = [fq("default", r1=("10", "10"), r2=("10", "10"))]
    return [
        cluster_queue(n, rg, cohort="co", reclaim="Any", within="LowerPriority")
        for n in ("cq1", "cq2", "cq3")
    ]


_CO_LQS = [lq("sales", f"lq{i}", f"cq{i}") for i in (1, 2, 3)]

SCHEDULE_CASES += [
    # scheduler_test.go TestSchedule: "two workloads can borrow different resources from the same
    # flavor in the same cycle"
    Case(
        "two workloads can borrow different resources from the same flavor in the same cycle",
        additional_cqs=_co_cqs(),
        additional_lqs=_CO_LQS,
        workloads=[
            kwl("wl1", "sales", queue="lq1", priority=-1, requests={"r1": "16"}),
            kwl("wl2", "sales", queue="lq2", priority=-2, requests={"r2": "16"}),
        ],
        want_scheduled={
            "sales/wl1": adm("cq1", psa(r1=("default", "16"))),
            "sales/wl2": adm("cq2", psa(r2=("default", "16"))),
        },
        want_assignments=["sales/wl1", "sales/wl2"],
    ),
    # scheduler_test.go TestSchedule: "two workloads can borrow the same resources from the same
    # flavor in the same cycle if fits in the cohort quota"
    Case(
        "two workloads can borrow the same resources from the same flavor in the same cycle if "
        "fits in the cohort quota",
        additional_cqs=_co_cqs(),
        additional_lqs=_CO_LQS,
        workloads=[
            kwl("wl1", "sales", queue="lq1", priority=-1, requests={"r1": "16"}),
            kwl("wl2", "sales", queue="lq2", priority=-2, requests={"r1": "14"}),
        ],
        want_scheduled={
            "sales/wl1": adm("cq1", psa(r1=("default", "16"))),
            "sales/wl2": adm("cq2", psa(r1=("default", "14"))),
        },
        want_assignments=["sales/wl1", "sales/wl2"],
    ),
    # scheduler_test.go TestSchedule: "only one workload can borrow one resources from the same
    # flavor in the same cycle if cohort quota cannot fit"
    Case(
        "only one workload can borrow one resources from the same flavor in the same cycle if "
        "cohort quota cannot fit",
        additional_cqs=_co_cqs(),
        additional_lqs=_CO_LQS,
        workloads=[
            kwl("wl1", "sales", queue="lq1", priority=-1, requests={"r1": "16"}),
            kwl("wl2", "sales", queue="lq2", priority=-2, requests={"r1": "16"}),
        ],
        want_scheduled={"sales/wl1": adm("cq1", psa(r1=("default", "16")))},
        want_assignments=["sales/wl1"],
        want_left={"cq2": ["sales/wl2"]},
    ),
    # scheduler_test.go TestSchedule: "preemption while borrowing, workload waiting for preemption
    # should not block a borrowing workload in another CQ"
    Case(
        "preemption while borrowing, workload waiting for preemption should not block a borrowing "
        "workload in another CQ",
        additional_cqs=[
            cluster_queue(
                "cq_shared", [fq("default", cpu=("4", "0"))], cohort="preemption-while-borrowing"
            ),
            cluster_queue(
                "cq_a",
                [fq("default", cpu=("0", "3"))],
                cohort="preemption-while-borrowing",
                reclaim="LowerPriority",
                borrow_within="LowerPriority",
            ),
            cluster_queue(
                "cq_b",
                [fq("default", cpu="0")],
                cohort="preemption-while-borrowing",
                reclaim="LowerPriority",
                borrow_within="LowerPriority",
            ),
        ],
        additional_lqs=[lq("eng-alpha", "lq_a", "cq_a"), lq("eng-beta", "lq_b", "cq_b")],
        workloads=[
            kwl("a", "eng-alpha", queue="lq_a", created=NOW + 1, requests={"cpu": "3"}),
            kwl("b", "eng-beta", queue="lq_b", created=NOW + 2, requests={"cpu": "1"}),
            reserve(
                kwl("admitted_a", "eng-alpha", queue="lq_a", requests={"cpu": "2"}),
                adm("cq_a", cpu=("default", "2")),
            ),
        ],
        want_scheduled={"eng-beta/b": adm("cq_b", cpu=("default", "1"))},
        want_assignments=["eng-alpha/admitted_a", "eng-beta/b"],
        want_inadmissible={"cq_a": ["eng-alpha/a"]},
    ),
    # scheduler_test.go TestSchedule: "minimal preemptions when target queue is exhausted"
    Case(
        "minimal preemptions when target queue is exhausted",
        additional_cqs=[
            cluster_queue(
                "other-alpha",
                [fq("on-demand", cpu="2")],
                cohort="other",
                reclaim="Any",
                within="LowerPriority",
            ),
            cluster_queue("other-beta", [fq("on-demand", cpu="2")], cohort="other"),
            cluster_queue("other-gamma", [fq("on-demand", cpu="2")], cohort="other"),
        ],
        additional_lqs=[
            lq("eng-alpha", "other", "other-alpha"),
            lq("eng-beta", "other", "other-beta"),
            lq("eng-gamma", "other", "other-gamma"),
        ],
        workloads=[
            *(
                reserve(
                    kwl(n, "eng-alpha", queue="other", priority=p, requests={"cpu": "1"}),
                    adm("other-alpha", cpu=("on-demand", "1")),
                )
                for n, p in (("a1", -2), ("a2", -2), ("a3", -1))
            ),
            *(
                reserve(
                    kwl(n, "eng-beta", queue="other", priority=0, requests={"cpu": "1"}),
                    adm("other-beta", cpu=("on-demand", "1")),
                )
                for n in ("b1", "b2", "b3")
            ),
            kwl("incoming", "eng-alpha", queue="other", priority=0, requests={"cpu": "2"}),
        ],
        want_preempted={"eng-alpha/a1", "eng-alpha/a2"},
        want_assignments=[
            "eng-alpha/a1",
            "eng-alpha/a2",
            "eng-alpha/a3",
            "eng-beta/b1",
            "eng-beta/b2",
            "eng-beta/b3",
        ],
        want_left={"other-alpha": ["eng-alpha/incoming"]},
    ),
    # scheduler_test.go TestSchedule: "A workload is only eligible to do preemptions if it fits
    # fully within nominal quota"
    Case(
        "A workload is only eligible to do preemptions if it fits fully within nominal quota",
        additional_cqs=[
            cluster_queue(
                "other-alpha",
                [fq("on-demand", cpu="2")],
                cohort="other",
                reclaim="Any",
                within="LowerPriority",
            ),
            cluster_queue("other-beta", [fq("on-demand", cpu="2")], cohort="other"),
        ],
        additional_lqs=[lq("eng-alpha", "other", "other-alpha"), lq("eng-beta", "other", "other-beta")],
        workloads=[
            reserve(
                kwl("a1", "eng-alpha", queue="other", priority=-1, requests={"cpu": "1"}),
                adm("other-alpha", cpu=("on-demand", "1")),
            ),
            reserve(
                kwl("b1", "eng-beta", queue="other", priority=-1, requests={"cpu": "1"}),
                adm("other-beta", cpu=("on-demand", "1")),
            ),
            kwl("incoming", "eng-alpha", queue="other", priority=1, requests={"cpu": "3"}),
        ],
        want_assignments=["eng-alpha/a1", "eng-beta/b1"],
        want_inadmissible={"other-alpha": ["eng-alpha/incoming"]},
    ),
    # scheduler_test.go TestSchedule: "multiple preemptions without borrowing"
    Case(
        "multiple preemptions without borrowing",
        additional_cqs=[
            cluster_queue("other-alpha", [fq("default", cpu="2")], cohort="other", within="LowerPriority"),
            cluster_queue("other-beta", [fq("default", cpu="2")], cohort="other", within="LowerPriority"),
        ],
        additional_lqs=[lq("eng-alpha", "other", "other-alpha"), lq("eng-beta", "other", "other-beta")],
        workloads=[
            reserve(
                kwl("a1", "eng-alpha", queue="other", priority=0, requests={"cpu": "2"}),
                adm("other-alpha", cpu=("default", "2")),
            ),
            reserve(
                kwl("b1", "eng-beta", queue="other", priority=0, requests={"cpu": "2"}),
                adm("other-beta", cpu=("default", "2")),
            ),
            kwl("preemptor", "eng-alpha", queue="other", priority=100, requests={"cpu": "2"}),
            kwl("preemptor", "eng-beta", queue="other", priority=100, requests={"cpu": "2"}),
        ],
        want_preempted={"eng-alpha/a1", "eng-beta/b1"},
        want_assignments=["eng-alpha/a1", "eng-beta/b1"],
        want_left={
            "other-alpha": ["eng-alpha/preemptor"],
            "other-beta": ["eng-beta/preemptor"],
        },
    ),
    # scheduler_test.go TestSchedule: "multiple preemptions preemption possible after earlier
    # workload fits"
    Case(
        "multiple preemptions preemption possible after earlier workload fits",
        additional_cqs=[
            cluster_queue("other-alpha", [fq("default", cpu="1")], cohort="other", within="LowerPriority"),
            cluster_queue("other-beta", [fq("default", cpu="2")], cohort="other", within="LowerPriority"),
        ],
        additional_lqs=[lq("eng-alpha", "other", "other-alpha"), lq("eng-beta", "other", "other-beta")],
        workloads=[
            reserve(
                kwl("b1", "eng-beta", queue="other", priority=0, requests={"cpu": "2"}),
                adm("other-beta", cpu=("default", "2")),
            ),
            kwl("fit", "eng-alpha", queue="other", priority=100, requests={"cpu": "1"}),
            kwl("preemptor", "eng-beta", queue="other", priority=99, requests={"cpu": "2"}),
        ],
        want_scheduled={"eng-alpha/fit": adm("other-alpha", cpu=("default", "1"))},
        want_preempted={"eng-beta/b1"},
        want_assignments=["eng-alpha/fit", "eng-beta/b1"],
        want_left={"other-beta": ["eng-beta/preemptor"]},
    ),
    # scheduler_test.go TestSchedule: "multiple preemptions skip preemption when shared limited
    # resource"
    Case(
        "multiple preemptions skip preemption when shared limited resource",
        additional_cqs=[
            cluster_queue(
                "other-alpha",
                [fq("default", cpu="2")],
                cohort="other",
                within="LowerPriority",
                borrow_within="LowerPriority",
            ),
            cluster_queue(
                "other-beta",
                [fq("default", cpu="2")],
                cohort="other",
                within="LowerPriority",
                borrow_within="LowerPriority",
            ),
            cluster_queue("resource-bank", [fq("default", cpu="1")], cohort="other"),
        ],
        additional_lqs=[lq("eng-alpha", "other", "other-alpha"), lq("eng-beta", "other", "other-beta")],
        workloads=[
            reserve(
                kwl("a1", "eng-alpha", queue="other", priority=0, requests={"cpu": "2"}),
                adm("other-alpha", cpu=("default", "2")),
            ),
            reserve(
                kwl("b1", "eng-beta", queue="other", priority=0, requests={"cpu": "2"}),
                adm("other-beta", cpu=("default", "2")),
            ),
            kwl("preemptor", "eng-alpha", queue="other", priority=100, requests={"cpu": "3"}),
            kwl("pretending-preemptor", "eng-beta", queue="other", priority=99, requests={"cpu": "3"}),
        ],
        want_preempted={"eng-alpha/a1"},
        want_assignments=["eng-alpha/a1", "eng-beta/b1"],
        want_left={
            "other-alpha": ["eng-alpha/preemptor"],
            "other-beta": ["eng-beta/pretending-preemptor"],
        },
    ),
    # scheduler_test.go TestSchedule: "not enough resources"
    Case(
        "not enough resources",
        workloads=[kwl("new", "sales", queue="main", pod_sets=[ps("one", 1, {"cpu": "100"})])],
        want_left={"sales": ["sales/new"]},
    ),
]

_GPU_POLICY = {"within": "LowerPriority", "reclaim": "LowerPriority"}

SCHEDULE_CASES += [
    # scheduler_test.go TestSchedule: "prefer reclamation over cq priority based preemption"
    Case(
        "prefer reclamation over cq priority based preemption",
        additional_cqs=[
            cluster_queue(
                "other-alpha",
                [fq("on-demand", gpu="10"), fq("spot", gpu="10")],
                cohort="other",
                **_GPU_POLICY,
            ),
            cluster_queue(
                "other-beta",
                [fq("on-demand", gpu="0"), fq("spot", gpu="0")],
                cohort="other",
                **_GPU_POLICY,
            ),
        ],
        additional_lqs=[lq("eng-alpha", "other", "other-alpha"), lq("eng-beta", "other", "other-beta")],
        workloads=[
            simple(kwl("a1", "eng-alpha", queue="other", priority=50, requests={"gpu": "5"}), "other-alpha", "on-demand"),
            simple(kwl("b1", "eng-beta", queue="other", priority=50, requests={"gpu": "5"}), "other-beta", "spot"),
            kwl("preemptor", "eng-alpha", queue="other", priority=100, requests={"gpu": "6"}),
        ],
        want_preempted={"eng-beta/b1"},
        want_assignments=["eng-alpha/a1", "eng-beta/b1"],
        want_left={"other-alpha": ["eng-alpha/preemptor"]},
    ),
    # scheduler_test.go TestSchedule: "prefer first preemption flavor when second flavor requires
    # both reclaim and cq priority preemption"
    Case(
        "prefer first preemption flavor when second flavor requires both reclaim and cq priority "
        "preemption",
        additional_cqs=[
            cluster_queue(
                "other-alpha",
                [fq("on-demand", gpu="10"), fq("spot", gpu="10")],
                cohort="other",
                **_GPU_POLICY,
            ),
            cluster_queue("other-beta", [fq("on-demand", gpu="0"), fq("spot", gpu="0")], cohort="other"),
        ],
        additional_lqs=[lq("eng-alpha", "other", "other-alpha"), lq("eng-beta", "other", "other-beta")],
        workloads=[
            simple(kwl("a1", "eng-alpha", queue="other", priority=50, requests={"gpu": "5"}), "other-alpha", "on-demand"),
            simple(kwl("a2", "eng-alpha", queue="other", priority=50, requests={"gpu": "5"}), "other-alpha", "spot"),
            simple(kwl("b1", "eng-beta", queue="other", priority=50, requests={"gpu": "5"}), "other-beta", "spot"),
            kwl("preemptor", "eng-alpha", queue="other", priority=100, requests={"gpu": "6"}),
        ],
        want_preempted={"eng-alpha/a1"},
        want_assignments=["eng-alpha/a1", "eng-alpha/a2", "eng-beta/b1"],
        want_left={"other-alpha": ["eng-alpha/preemptor"]},
    ),
    # scheduler_test.go TestSchedule: "prefer first preemption flavor when second flavor also
    # requires cq preemption"
    Case(
        "prefer first preemption flavor when second flavor also requires cq preemption",
        additional_cqs=[
            cluster_queue(
                "other-alpha",
                [fq("on-demand", gpu="10"), fq("spot", gpu="10")],
                cohort="other",
                **_GPU_POLICY,
            ),
            cluster_queue("other-beta", [fq("on-demand", gpu="0"), fq("spot", gpu="0")], cohort="other"),
        ],
        additional_lqs=[lq("eng-alpha", "other", "other-alpha"), lq("eng-beta", "other", "other-beta")],
        workloads=[
            simple(kwl("a1", "eng-alpha", queue="other", priority=50, requests={"gpu": "6"}), "other-alpha", "on-demand"),
            simple(kwl("a2", "eng-alpha", queue="other", priority=50, requests={"gpu": "5"}), "other-alpha", "spot"),
            simple(kwl("b1", "eng-beta", queue="other", priority=9001, requests={"gpu": "5"}), "other-beta", "spot"),
            kwl("preemptor", "eng-alpha", queue="other", priority=100, requests={"gpu": "5"}),
        ],
        want_preempted={"eng-alpha/a1"},
        want_assignments=["eng-alpha/a1", "eng-alpha/a2", "eng-beta/b1"],
        want_left={"other-alpha": ["eng-alpha/preemptor"]},
    ),
    # scheduler_test.go TestSchedule: "workload requiring reclaimation prioritized over wl in
    # another full cq" (Kueue #3405)
    Case(
        "workload requiring reclaimation prioritized over wl in another full cq",
        additional_cqs=[
            cluster_queue("CQ1", [fq("on-demand", gpu="10")], cohort="other"),
            cluster_queue("CQ2", [fq("on-demand", gpu="10")], cohort="other", reclaim="Any"),
            cluster_queue("CQ3", [fq("on-demand", gpu="0")], cohort="other"),
        ],
        additional_lqs=[
            lq("eng-alpha", "lq", "CQ1"),
            lq("eng-beta", "lq", "CQ2"),
            lq("eng-gamma", "lq", "CQ3"),
        ],
        workloads=[
            simple(kwl("Admitted-Workload-1", "eng-alpha", queue="lq", requests={"gpu": "5"}), "CQ1", "on-demand"),
            kwl("WL1", "eng-alpha", queue="lq", created=NOW, requests={"gpu": "10"}),
            kwl("WL2", "eng-beta", queue="lq", created=NOW + 1, requests={"gpu": "10"}),
            simple(kwl("Admitted-Workload-2", "eng-gamma", queue="lq", priority=0, requests={"gpu": "5"}), "CQ3", "on-demand"),
            simple(kwl("Admitted-Workload-3", "eng-gamma", queue="lq", priority=1, requests={"gpu": "5"}), "CQ3", "on-demand"),
        ],
        want_preempted={"eng-gamma/Admitted-Workload-2"},
        want_assignments=[
            "eng-alpha/Admitted-Workload-1",
            "eng-gamma/Admitted-Workload-2",
            "eng-gamma/Admitted-Workload-3",
        ],
        want_left={"CQ2": ["eng-beta/WL2"]},
        want_inadmissible={"CQ1": ["eng-alpha/WL1"]},
    ),
]


def _lending_cqs(reclaim: str) -> list[ClusterQueueSpec]:
    """Kueue's "capacity ... blocked when lending clusterqueue ..." ClusterQueues."""
    return [
        cluster_queue("ClusterQueueA", [fq("on-demand", gpu="2")], cohort="root", reclaim=reclaim),
        cluster_queue("ClusterQueueB", [fq("on-demand", gpu="0")], cohort="root"),
    ]


def _lending_workloads() -> list[Workload]:
    return [
        simple(kwl("a1-admitted", "eng-alpha", queue="lq", requests={"gpu": "1"}), "ClusterQueueA", "on-demand"),
        kwl("a2-pending", "eng-alpha", queue="lq", requests={"gpu": "2"}),
        kwl("b1-pending", "eng-beta", queue="lq", created=NOW, requests={"gpu": "1"}),
    ]


_LENDING_LQS = [lq("eng-alpha", "lq", "ClusterQueueA"), lq("eng-beta", "lq", "ClusterQueueB")]

SCHEDULE_CASES += [
    # scheduler_test.go TestSchedule: "capacity not blocked when lending clusterqueue can reclaim
    # (ReclaimWithinCohort=Any)"
    Case(
        "capacity not blocked when lending clusterqueue can reclaim (ReclaimWithinCohort=Any)",
        additional_cqs=_lending_cqs("Any"),
        additional_lqs=_LENDING_LQS,
        workloads=_lending_workloads(),
        want_scheduled={"eng-beta/b1-pending": adm("ClusterQueueB", psa(gpu=("on-demand", "1")))},
        want_assignments=["eng-alpha/a1-admitted", "eng-beta/b1-pending"],
        want_inadmissible={"ClusterQueueA": ["eng-alpha/a2-pending"]},
    ),
    # scheduler_test.go TestSchedule: "capacity blocked when lending clusterqueue not guaranteed to
    # reclaim (ReclaimWithinCohort=LowerPriority)"
    Case(
        "capacity blocked when lending clusterqueue not guaranteed to reclaim "
        "(ReclaimWithinCohort=LowerPriority)",
        additional_cqs=_lending_cqs("LowerPriority"),
        additional_lqs=_LENDING_LQS,
        workloads=_lending_workloads(),
        want_assignments=["eng-alpha/a1-admitted"],
        want_left={"ClusterQueueB": ["eng-beta/b1-pending"]},
        want_inadmissible={"ClusterQueueA": ["eng-alpha/a2-pending"]},
    ),
    # scheduler_test.go TestSchedule: "capacity blocked when lending clusterqueue not guaranteed to
    # reclaim (ReclaimWithinCohort=Never)"
    Case(
        "capacity blocked when lending clusterqueue not guaranteed to reclaim "
        "(ReclaimWithinCohort=Never)",
        additional_cqs=_lending_cqs("Never"),
        additional_lqs=_LENDING_LQS,
        workloads=_lending_workloads(),
        want_assignments=["eng-alpha/a1-admitted"],
        want_left={"ClusterQueueB": ["eng-beta/b1-pending"]},
        want_inadmissible={"ClusterQueueA": ["eng-alpha/a2-pending"]},
    ),
    # scheduler_test.go TestSchedule: "in a hierarchical cohort, workload borrowing less is
    # scheduled first" (quota at Cohort GUARANTEED, child of ROOT; best-effort borrows from ROOT).
    Case(
        "in a hierarchical cohort, workload borrowing less is scheduled first",
        cohorts=[cohort("root"), cohort("guaranteed", [fq("default", cpu="4")], parent="root")],
        additional_cqs=[
            cluster_queue("guaranteed", [fq("default", cpu="0")], cohort="guaranteed"),
            cluster_queue("best-effort", [fq("default", cpu="0")], cohort="root"),
        ],
        additional_lqs=[
            lq("eng-alpha", "lq-guaranteed", "guaranteed"),
            lq("eng-alpha", "lq-best-effort", "best-effort"),
        ],
        workloads=[
            kwl("guaranteed", "eng-alpha", queue="lq-guaranteed", priority=0, pod_sets=[ps("one", 1, {"cpu": "4"})]),
            kwl("best-effort", "eng-alpha", queue="lq-best-effort", priority=3, pod_sets=[ps("one", 1, {"cpu": "4"})]),
        ],
        want_scheduled={"eng-alpha/guaranteed": adm("guaranteed", psa("one", 1, cpu=("default", "4")))},
        want_assignments=["eng-alpha/guaranteed"],
        want_left={"best-effort": ["eng-alpha/best-effort"]},
    ),
    # scheduler_test.go TestSchedule: "don't assign flavor if there are no candidates for
    # preemption" (v1beta1 Preempt/Borrow are v1beta2 MayStopSearch).
    Case(
        "don't assign flavor if there are no candidates for preemption",
        additional_cqs=[
            cluster_queue(
                "cq1",
                [fq("on-demand", cpu=("0", "1")), fq("spot", cpu=("0", "1"))],
                cohort="cohort",
                within="LowerPriority",
                reclaim="Any",
                borrow_within="LowerPriority",
                when_can_borrow="MayStopSearch",
                when_can_preempt="MayStopSearch",
            ),
            cluster_queue("cq2", [fq("on-demand", cpu="1"), fq("spot", cpu="1")], cohort="cohort"),
        ],
        additional_lqs=[lq("eng-alpha", "lq1", "cq1"), lq("eng-alpha", "lq2", "cq2")],
        workloads=[
            simple(kwl("admitted", "eng-alpha", queue="lq2", priority=0, requests={"cpu": "1"}), "cq2", "on-demand", NOW - 1),
            kwl("new", "eng-alpha", queue="lq1", priority=100, requests={"cpu": "1"}),
        ],
        want_scheduled={"eng-alpha/new": adm("cq1", cpu=("spot", "1"))},
        want_assignments=["eng-alpha/new", "eng-alpha/admitted"],
    ),
]


@pytest.mark.parametrize("case", [_param(c) for c in SCHEDULE_CASES])
def test_schedule(case: Case) -> None:
    cqs = list(case.cqs) if case.cqs is not None else list(SCHEDULE_CQS)
    objects: list[Obj] = [
        *SCHEDULE_FLAVORS,
        *case.cohorts,
        *cqs,
        *case.additional_cqs,
        *SCHEDULE_LQS,
        *case.additional_lqs,
        *case.workloads,
    ]
    engine = build_engine(objects, namespaces=SCHEDULE_NAMESPACES)
    result = engine.schedule(CYCLE)
    got_scheduled = scheduled(result)
    if case.admission_error:
        # Kueue's applyAdmission fails: nothing is recorded as scheduled and the cache forgets.
        for key in list(got_scheduled):
            engine.forget(key)  # type: ignore[arg-type]
        got_scheduled = {}
    assert got_scheduled == {k: a.view() for k, a in case.want_scheduled.items()}
    assert preempted_keys(result) == case.want_preempted
    assert sorted(holding(engine)) == sorted(case.want_assignments)
    left, inadmissible = queue_dump(engine)
    assert left == {k: sorted(v) for k, v in case.want_left.items()}
    assert inadmissible == {k: sorted(v) for k, v in case.want_inadmissible.items()}


# -- TestLastSchedulingContext: two cycles, workloads deleted in between -------------------------

LAST_FLAVORS = [make_flavor("on-demand").obj(), make_flavor("spot").obj()]


def _cohort_trio() -> list[ClusterQueueSpec]:
    """Kueue's clusterQueueCohort (v1beta1 Preempt/Borrow are MayStopSearch)."""
    rg = [fq("on-demand", cpu=("50", "50")), fq("spot", cpu=("100", "0"))]
    common = {"cohort": "cohort", "strict_fifo": True, "within": "Never", "reclaim": "LowerPriority"}
    return [
        cluster_queue("eng-cohort-alpha", rg, when_can_borrow="MayStopSearch", when_can_preempt="MayStopSearch", **common),  # type: ignore[arg-type]
        cluster_queue("eng-cohort-beta", rg, when_can_borrow="MayStopSearch", when_can_preempt="MayStopSearch", **common),  # type: ignore[arg-type]
        cluster_queue("eng-cohort-theta", rg, when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor", **common),  # type: ignore[arg-type]
    ]


LAST_LQS = [
    lq("default", "main", "eng-alpha"),
    lq("default", "main-alpha", "eng-cohort-alpha"),
    lq("default", "main-beta", "eng-cohort-beta"),
    lq("default", "main-theta", "eng-cohort-theta"),
]


@dataclass
class TwoCycleCase:
    name: str
    cqs: list[ClusterQueueSpec]
    admitted: list[Workload]
    workloads: list[Workload]
    delete: list[str]
    want_preempted: set[str]
    want_first: Mapping[str, Adm]
    # Kueue's wantAdmissionsOnSecondSchedule: who holds quota after the second cycle.
    want_second: Mapping[str, Adm]
    xfail: str | None = None


def _held(name: str, cq: str, flavor: str, cpu: str, *, priority: int | None = None, at: float = NOW) -> Workload:
    return simple(kwl(name, "default", priority=priority, requests={"cpu": cpu}), cq, flavor, at)


TWO_CYCLE_CASES = [
    # scheduler_test.go TestLastSchedulingContext: "scheduling on the first flavor is unblocked
    # after some workloads were deleted"
    TwoCycleCase(
        "scheduling on the first flavor is unblocked after some workloads were deleted",
        cqs=[
            cluster_queue(
                "eng-alpha",
                [fq("on-demand", cpu=("50", "50")), fq("spot", cpu=("10", "0"))],
                within="LowerPriority",
                when_can_preempt="MayStopSearch",
            )
        ],
        admitted=[_held("low-1", "eng-alpha", "on-demand", "50")],
        workloads=[kwl("preemptor", "default", queue="main", requests={"cpu": "20"})],
        delete=["default/low-1"],
        want_preempted=set(),
        want_first={},
        want_second={"default/preemptor": adm("eng-alpha", cpu=("on-demand", "20"))},
    ),
    # scheduler_test.go TestLastSchedulingContext: "borrow before next flavor"
    TwoCycleCase(
        "borrow before next flavor",
        cqs=_cohort_trio(),
        admitted=[_held("placeholder", "eng-cohort-alpha", "on-demand", "50")],
        workloads=[
            kwl("borrower", "default", queue="main-alpha", requests={"cpu": "20"}),
            kwl("workload1", "default", queue="main-beta", requests={"cpu": "20"}),
        ],
        delete=[],
        want_preempted=set(),
        want_first={
            "default/workload1": adm("eng-cohort-beta", cpu=("on-demand", "20")),
            "default/borrower": adm("eng-cohort-alpha", cpu=("on-demand", "20")),
        },
        want_second={
            "default/placeholder": adm("eng-cohort-alpha", cpu=("on-demand", "50")),
            "default/workload1": adm("eng-cohort-beta", cpu=("on-demand", "20")),
            "default/borrower": adm("eng-cohort-alpha", cpu=("on-demand", "20")),
        },
    ),
    # scheduler_test.go TestLastSchedulingContext: "borrow after all flavors"
    TwoCycleCase(
        "borrow after all flavors",
        cqs=_cohort_trio(),
        admitted=[
            _held("placeholder", "eng-cohort-alpha", "on-demand", "50"),
            _held("placeholder1", "eng-cohort-theta", "on-demand", "50"),
        ],
        workloads=[kwl("workload", "default", queue="main-theta", requests={"cpu": "20"})],
        delete=[],
        want_preempted=set(),
        want_first={"default/workload": adm("eng-cohort-theta", cpu=("spot", "20"))},
        want_second={
            "default/placeholder": adm("eng-cohort-alpha", cpu=("on-demand", "50")),
            "default/placeholder1": adm("eng-cohort-theta", cpu=("on-demand", "50")),
            "default/workload": adm("eng-cohort-theta", cpu=("spot", "20")),
        },
    ),
    # scheduler_test.go TestLastSchedulingContext: "when the next flavor is full, but can borrow
    # on first"
    TwoCycleCase(
        "when the next flavor is full, but can borrow on first",
        cqs=_cohort_trio(),
        admitted=[
            _held("placeholder", "eng-cohort-alpha", "on-demand", "40"),
            _held("placeholder1", "eng-cohort-theta", "on-demand", "40"),
            _held("placeholder2", "eng-cohort-theta", "spot", "100"),
        ],
        workloads=[kwl("workload", "default", queue="main-theta", requests={"cpu": "20"})],
        delete=[],
        want_preempted=set(),
        want_first={"default/workload": adm("eng-cohort-theta", cpu=("on-demand", "20"))},
        want_second={
            "default/placeholder": adm("eng-cohort-alpha", cpu=("on-demand", "40")),
            "default/placeholder1": adm("eng-cohort-theta", cpu=("on-demand", "40")),
            "default/placeholder2": adm("eng-cohort-theta", cpu=("spot", "100")),
            "default/workload": adm("eng-cohort-theta", cpu=("on-demand", "20")),
        },
    ),
    # scheduler_test.go TestLastSchedulingContext: "when the next flavor is full, but can preempt
    # on first"
    TwoCycleCase(
        "when the next flavor is full, but can preempt on first",
        cqs=_cohort_trio(),
        admitted=[
            _held("placeholder-alpha", "eng-cohort-alpha", "on-demand", "150", priority=-1),
            _held("placeholder-theta-spot", "eng-cohort-theta", "spot", "100"),
        ],
        workloads=[kwl("new", "default", queue="main-theta", requests={"cpu": "20"})],
        delete=["default/placeholder-alpha"],
        want_preempted={"default/placeholder-alpha"},
        want_first={},
        want_second={
            "default/placeholder-theta-spot": adm("eng-cohort-theta", cpu=("spot", "100")),
            "default/new": adm("eng-cohort-theta", cpu=("on-demand", "20")),
        },
    ),
    # scheduler_test.go TestLastSchedulingContext: "TryNextFlavor, but second flavor is full and
    # can preempt on first"
    TwoCycleCase(
        "TryNextFlavor, but second flavor is full and can preempt on first",
        cqs=[
            cluster_queue(
                "eng-cohort-alpha",
                [fq("on-demand", cpu=("0", "60")), fq("spot", cpu=("30", "30"))],
                cohort="cohort",
                within="LowerPriority",
                reclaim="Any",
                when_can_borrow="TryNextFlavor",
                when_can_preempt="TryNextFlavor",
            ),
            cluster_queue(
                "eng-cohort-beta",
                [fq("on-demand", cpu=("30", "30")), fq("spot", cpu=("30", "30"))],
                cohort="cohort",
                within="LowerPriority",
                reclaim="Any",
                when_can_borrow="TryNextFlavor",
                when_can_preempt="TryNextFlavor",
            ),
            cluster_queue("eng-cohort-shared", [fq("on-demand", cpu="30")], cohort="cohort"),
        ],
        admitted=[
            _held("alpha1", "eng-cohort-alpha", "on-demand", "22", at=NOW - 1),
            _held("alpha2", "eng-cohort-alpha", "on-demand", "22"),
            _held("alpha3", "eng-cohort-alpha", "spot", "22"),
            _held("beta1", "eng-cohort-beta", "spot", "22"),
        ],
        workloads=[kwl("new", "default", queue="main-beta", requests={"cpu": "22"})],
        delete=["default/alpha2"],
        want_preempted={"default/alpha2"},
        want_first={},
        want_second={
            "default/alpha1": adm("eng-cohort-alpha", cpu=("on-demand", "22")),
            "default/alpha3": adm("eng-cohort-alpha", cpu=("spot", "22")),
            "default/beta1": adm("eng-cohort-beta", cpu=("spot", "22")),
            "default/new": adm("eng-cohort-beta", cpu=("on-demand", "22")),
        },
    ),
]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c.name,
            marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [],
        )
        for c in TWO_CYCLE_CASES
    ],
)
def test_last_scheduling_context(case: TwoCycleCase) -> None:
    engine = build_engine(
        [*LAST_FLAVORS, *case.cqs, *LAST_LQS, *case.admitted, *case.workloads],
        namespaces={"default": {}},
    )
    first = engine.schedule(CYCLE)
    assert preempted_keys(first) == case.want_preempted
    assert scheduled(first) == {k: a.view() for k, a in case.want_first.items()}
    for key in case.delete:
        # Kueue deletes the workload from the client and the cache and requeues what waited on it.
        engine.delete_workload(key)  # type: ignore[arg-type]
    second = engine.schedule(t(3000))
    assert preempted_keys(second) == set()
    got = holding(engine)
    assert got == {k: a.view() for k, a in case.want_second.items()}


# -- TestAssignFlavors ---------------------------------------------------------------------------

ASSIGN_FLAVORS = {
    f.name: f
    for f in [
        make_flavor("default").obj(),
        make_flavor("one").label("type", "one").obj(),
        make_flavor("two").label("type", "two").obj(),
        make_flavor("b_one").label("b_type", "one").obj(),
        make_flavor("b_two").label("b_type", "two").obj(),
        make_flavor("tainted").taint("instance", "spot", "NoSchedule").obj(),
        make_flavor("taint_and_toleration")
        .taint("instance", "spot", "NoSchedule")
        .toleration("instance", "spot", "NoSchedule")
        .obj(),
        make_flavor("label-x-a").label("x", "a").obj(),
        make_flavor("label-xy-b").label("x", "b").label("y", "k").obj(),
    ]
}

PP = PreemptionPossibility


@dataclass
class AssignCase:
    name: str
    workload: Workload
    cq: ClusterQueueSpec
    # Kueue's wantRepMode and the compared parts of wantAssignment.
    want_mode: str
    want_flavors: Mapping[str, Mapping[str, tuple[str, str]]]
    want_usage: Mapping[str, int] = field(default_factory=dict)
    want_borrowing: int = 0
    want_no_fit_reason: str | None = None
    cq_usage: Mapping[tuple[str, str], int] = field(default_factory=dict)
    secondary: ClusterQueueSpec | None = None
    secondary_usage: Mapping[tuple[str, str], int] = field(default_factory=dict)
    oracle: Mapping[tuple[str, str], tuple[PreemptionPossibility, int]] = field(default_factory=dict)
    # Kueue's enableFairSharing.
    fair_sharing: bool = False
    xfail: str | None = None


def _pod(*sets: tuple[str, int, Mapping[str, str]]) -> Workload:
    return kwl("wl", "default", pod_sets=[ps(n, c, r) for n, c, r in sets])


def _main(requests: Mapping[str, str], count: int = 1) -> Workload:
    return kwl("wl", "default", pod_sets=[ps("main", count, requests)])


def _with(wl: Workload, index: int = 0, **changes: object) -> Workload:
    """``wl`` with node selector, affinity or tolerations set on its pod set ``index``."""
    sets = list(wl.pod_sets)
    sets[index] = replace(sets[index], **changes)  # type: ignore[arg-type]
    return replace(wl, pod_sets=tuple(sets))


def _tol() -> tuple[Toleration, ...]:
    return (Toleration("instance", "Equal", "spot", "NoSchedule"),)


def _affinity(
    *terms: Sequence[tuple[str, str, tuple[str, ...]]],
) -> tuple[tuple[SelectorRequirement, ...], ...]:
    return tuple(tuple(SelectorRequirement(k, op, v) for k, op, v in term) for term in terms)


TEST_CQ = "test-clusterqueue"
SECONDARY = "test-secondary-clusterqueue"
COHORT = "test-cohort"

M = 1024 * 1024
G = 1024 * M

ASSIGN_CASES: list[AssignCase] = [
    # flavorassigner_test.go TestAssignFlavors: "single flavor, fits"
    AssignCase(
        "single flavor, fits",
        _main({"cpu": "1", "memory": "1Mi"}),
        cluster_queue(TEST_CQ, [fq("default", cpu="1", memory="2Mi")]),
        "FIT",
        {"main": {"cpu": ("default", "FIT"), "memory": ("default", "FIT")}},
        {"default/cpu": 1000, "default/memory": M},
    ),
    # flavorassigner_test.go TestAssignFlavors: "single flavor, fits tainted flavor"
    AssignCase(
        "single flavor, fits tainted flavor",
        _with(_main({"cpu": "1"}), tolerations=_tol()),
        cluster_queue(TEST_CQ, [fq("tainted", cpu="4")]),
        "FIT",
        {"main": {"cpu": ("tainted", "FIT")}},
        {"tainted/cpu": 1000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "single flavor, fits tainted flavor with toleration"
    AssignCase(
        "single flavor, fits tainted flavor with toleration",
        _main({"cpu": "1"}),
        cluster_queue(TEST_CQ, [fq("taint_and_toleration", cpu="4")]),
        "FIT",
        {"main": {"cpu": ("taint_and_toleration", "FIT")}},
        {"taint_and_toleration/cpu": 1000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "single flavor, used resources, doesn't fit"
    AssignCase(
        "single flavor, used resources, doesn't fit",
        _main({"cpu": "2"}),
        cluster_queue(TEST_CQ, [fq("default", cpu="4")]),
        "PREEMPT",
        {"main": {"cpu": ("default", "PREEMPT")}},
        {"default/cpu": 2000},
        cq_usage={("default", "cpu"): 3000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple resource groups, fits"
    AssignCase(
        "multiple resource groups, fits",
        _main({"cpu": "3", "memory": "10Mi"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", cpu="2"), fq("two", cpu="4")],
            [fq("b_one", memory="1Gi"), fq("b_two", memory="5Gi")],
        ),
        "FIT",
        {"main": {"cpu": ("two", "FIT"), "memory": ("b_one", "FIT")}},
        {"two/cpu": 3000, "b_one/memory": 10 * M},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple resource groups, one could fit with
    # preemption, other doesn't fit"
    AssignCase(
        "multiple resource groups, one could fit with preemption, other doesn't fit",
        _main({"cpu": "3", "memory": "10Mi"}),
        cluster_queue(TEST_CQ, [fq("one", cpu="3")], [fq("b_one", memory="1Mi")]),
        "NO_FIT",
        {"main": {}},
        want_no_fit_reason="ExceedsMaxQuota",
        cq_usage={("one", "cpu"): 1000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple resource groups with multiple resources,
    # fits"
    AssignCase(
        "multiple resource groups with multiple resources, fits",
        _main({"cpu": "3", "memory": "10Mi", GPU: "3"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", cpu="2", memory="1Gi"), fq("two", cpu="4", memory="15Mi")],
            [fq("b_one", {GPU: "4"}), fq("b_two", {GPU: "2"})],
        ),
        "FIT",
        {"main": {"cpu": ("two", "FIT"), "memory": ("two", "FIT"), GPU: ("b_one", "FIT")}},
        {"two/cpu": 3000, "two/memory": 10 * M, f"b_one/{GPU}": 3},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple resource groups with multiple resources,
    # fits with different modes"
    AssignCase(
        "multiple resource groups with multiple resources, fits with different modes",
        _main({"cpu": "3", "memory": "10Mi", GPU: "3"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", cpu="2", memory="1Gi"), fq("two", cpu="4", memory="15Mi")],
            [fq("b_one", {GPU: "4"})],
            cohort=COHORT,
        ),
        "PREEMPT",
        {"main": {"cpu": ("two", "FIT"), "memory": ("two", "PREEMPT"), GPU: ("b_one", "PREEMPT")}},
        {"two/cpu": 3000, "two/memory": 10 * M, f"b_one/{GPU}": 3},
        want_borrowing=1,
        cq_usage={("two", "memory"): 10 * M},
        secondary=cluster_queue(SECONDARY, [fq("b_one", {GPU: "0"})], cohort=COHORT),
        secondary_usage={("b_one", GPU): 2},
        oracle={("two", "memory"): (PP.PREEMPT, 1)},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple resources in a group, doesn't fit"
    AssignCase(
        "multiple resources in a group, doesn't fit",
        _main({"cpu": "3", "memory": "10Mi"}),
        cluster_queue(TEST_CQ, [fq("one", cpu="2", memory="1Gi"), fq("two", cpu="4", memory="5Mi")]),
        "NO_FIT",
        {"main": {}},
        want_no_fit_reason="ExceedsMaxQuota",
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple flavors, fits while skipping tainted
    # flavor"
    AssignCase(
        "multiple flavors, fits while skipping tainted flavor",
        _main({"cpu": "3"}),
        cluster_queue(TEST_CQ, [fq("tainted", cpu="4"), fq("two", cpu="4")]),
        "FIT",
        {"main": {"cpu": ("two", "FIT")}},
        {"two/cpu": 3000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple flavors, fits a node selector"
    AssignCase(
        "multiple flavors, fits a node selector",
        _with(
            _main({"cpu": "1"}),
            node_selector={"type": "two", "ignored1": "foo"},
            required_affinity=_affinity([("ignored2", "In", ("bar",))]),
        ),
        cluster_queue(TEST_CQ, [fq("one", cpu="4"), fq("two", cpu="4")]),
        "FIT",
        {"main": {"cpu": ("two", "FIT")}},
        {"two/cpu": 1000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple flavors, fits with node affinity"
    AssignCase(
        "multiple flavors, fits with node affinity",
        _with(
            _main({"cpu": "1", "memory": "1Mi"}),
            node_selector={"ignored1": "foo"},
            required_affinity=_affinity([("type", "In", ("two",))]),
        ),
        cluster_queue(TEST_CQ, [fq("one", cpu="4", memory="1Gi"), fq("two", cpu="4", memory="1Gi")]),
        "FIT",
        {"main": {"cpu": ("two", "FIT"), "memory": ("two", "FIT")}},
        {"two/cpu": 1000, "two/memory": M},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple flavors, node affinity fits any flavor"
    AssignCase(
        "multiple flavors, node affinity fits any flavor",
        _with(
            _main({"cpu": "1"}),
            required_affinity=_affinity(
                [("ignored2", "In", ("bar",))], [("cpuType", "In", ("two",))]
            ),
        ),
        cluster_queue(TEST_CQ, [fq("one", cpu="4"), fq("two", cpu="4")]),
        "FIT",
        {"main": {"cpu": ("one", "FIT")}},
        {"one/cpu": 1000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple flavors with different label keys,
    # selector only uses flavor's own keys"
    AssignCase(
        "multiple flavors with different label keys, selector only uses flavor's own keys",
        _with(_main({"cpu": "1"}), node_selector={"x": "a", "y": "g"}),
        cluster_queue(TEST_CQ, [fq("label-x-a", cpu="4"), fq("label-xy-b", cpu="4")]),
        "FIT",
        {"main": {"cpu": ("label-x-a", "FIT")}},
        {"label-x-a/cpu": 1000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "labelless flavor in group with labeled flavor,
    # workload uses labeled selector"
    AssignCase(
        "labelless flavor in group with labeled flavor, workload uses labeled selector",
        _with(_main({"cpu": "1"}), node_selector={"type": "two"}),
        cluster_queue(TEST_CQ, [fq("default", cpu="4"), fq("two", cpu="4")]),
        "FIT",
        {"main": {"cpu": ("default", "FIT")}},
        {"default/cpu": 1000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple flavors, doesn't fit node affinity"
    AssignCase(
        "multiple flavors, doesn't fit node affinity",
        _with(_main({"cpu": "1"}), required_affinity=_affinity([("type", "In", ("three",))])),
        cluster_queue(TEST_CQ, [fq("one", cpu="4"), fq("two", cpu="4")]),
        "NO_FIT",
        {"main": {}},
        want_no_fit_reason="NoMatchingFlavor",
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple specs, fit different flavors"
    AssignCase(
        "multiple specs, fit different flavors",
        _pod(("driver", 1, {"cpu": "5"}), ("worker", 1, {"cpu": "3"})),
        cluster_queue(TEST_CQ, [fq("one", cpu="4"), fq("two", cpu="10")]),
        "FIT",
        {"driver": {"cpu": ("two", "FIT")}, "worker": {"cpu": ("one", "FIT")}},
        {"one/cpu": 3000, "two/cpu": 5000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multiple specs, fits borrowing"
    AssignCase(
        "multiple specs, fits borrowing",
        _pod(("driver", 1, {"cpu": "4", "memory": "1Gi"}), ("worker", 1, {"cpu": "6", "memory": "4Gi"})),
        cluster_queue(TEST_CQ, [fq("default", cpu=("2", "98"), memory="2Gi")], cohort=COHORT),
        "FIT",
        {
            "driver": {"cpu": ("default", "FIT"), "memory": ("default", "FIT")},
            "worker": {"cpu": ("default", "FIT"), "memory": ("default", "FIT")},
        },
        {"default/cpu": 10_000, "default/memory": 5 * G},
        want_borrowing=1,
        secondary=cluster_queue(SECONDARY, [fq("default", cpu="198", memory="198Gi")], cohort=COHORT),
    ),
    # flavorassigner_test.go TestAssignFlavors: "not enough space to borrow"
    AssignCase(
        "not enough space to borrow",
        _main({"cpu": "2"}),
        cluster_queue(TEST_CQ, [fq("one", cpu="1")], cohort=COHORT),
        "NO_FIT",
        {"main": {}},
        want_no_fit_reason="ExceedsMaxQuota",
        secondary=cluster_queue(SECONDARY, [fq("one", cpu=("10", None, "0"))], cohort=COHORT),
        secondary_usage={("one", "cpu"): 9000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "past max, but can preempt in ClusterQueue"
    AssignCase(
        "past max, but can preempt in ClusterQueue",
        _main({"cpu": "2"}),
        cluster_queue(TEST_CQ, [fq("one", cpu=("2", "8"))], cohort=COHORT),
        "PREEMPT",
        {"main": {"cpu": ("one", "PREEMPT")}},
        {"one/cpu": 2000},
        want_borrowing=1,
        cq_usage={("one", "cpu"): 9000},
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="98")], cohort=COHORT),
        secondary_usage={("one", "cpu"): 9000},
        oracle={("one", "cpu"): (PP.PREEMPT, 1)},
    ),
    # flavorassigner_test.go TestAssignFlavors: "past min, but can preempt in ClusterQueue"
    AssignCase(
        "past min, but can preempt in ClusterQueue",
        _main({"cpu": "2"}),
        cluster_queue(TEST_CQ, [fq("one", cpu="2")]),
        "PREEMPT",
        {"main": {"cpu": ("one", "PREEMPT")}},
        {"one/cpu": 2000},
        cq_usage={("one", "cpu"): 1000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "past min, but can preempt in cohort and
    # ClusterQueue"
    AssignCase(
        "past min, but can preempt in cohort and ClusterQueue",
        _main({"cpu": "2"}),
        cluster_queue(TEST_CQ, [fq("one", cpu="3")], cohort=COHORT),
        "PREEMPT",
        {"main": {"cpu": ("one", "PREEMPT")}},
        {"one/cpu": 2000},
        want_borrowing=1,
        cq_usage={("one", "cpu"): 2000},
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="7")], cohort=COHORT),
        secondary_usage={("one", "cpu"): 8000},
        oracle={("one", "cpu"): (PP.PREEMPT, 1)},
    ),
    # flavorassigner_test.go TestAssignFlavors: "can only preempt flavors that match affinity"
    AssignCase(
        "can only preempt flavors that match affinity",
        _with(_main({"cpu": "2"}), node_selector={"type": "two"}),
        cluster_queue(TEST_CQ, [fq("one", cpu="4"), fq("two", cpu="4")]),
        "PREEMPT",
        {"main": {"cpu": ("two", "PREEMPT")}},
        {"two/cpu": 2000},
        cq_usage={("one", "cpu"): 3000, ("two", "cpu"): 3000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "each podset requires preemption on a different
    # flavor"
    AssignCase(
        "each podset requires preemption on a different flavor",
        _with(
            kwl(
                "wl",
                "default",
                pod_sets=[ps("launcher", 1, {"cpu": "2"}), ps("workers", 10, {"cpu": "1"})],
            ),
            1,
            tolerations=_tol(),
        ),
        cluster_queue(TEST_CQ, [fq("one", cpu="4"), fq("tainted", cpu="10")]),
        "PREEMPT",
        {"launcher": {"cpu": ("one", "PREEMPT")}, "workers": {"cpu": ("tainted", "PREEMPT")}},
        {"one/cpu": 2000, "tainted/cpu": 10_000},
        cq_usage={("one", "cpu"): 3000, ("tainted", "cpu"): 3000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "resource not listed in clusterQueue"
    AssignCase(
        "resource not listed in clusterQueue",
        _main({GPU: "2"}),
        cluster_queue(TEST_CQ, [fq("one", cpu="4")]),
        "NO_FIT",
        {"main": {}},
        want_no_fit_reason="NoMatchingFlavor",
    ),
    # flavorassigner_test.go TestAssignFlavors: "zero resource request not in clusterQueue should
    # succeed"
    AssignCase(
        "zero resource request not in clusterQueue should succeed",
        _main({"cpu": "1", GPU: "0"}),
        cluster_queue(TEST_CQ, [fq("default", cpu="4")]),
        "FIT",
        {"main": {"cpu": ("default", "FIT")}},
        {"default/cpu": 1000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "num pods fit"
    AssignCase(
        "num pods fit",
        _main({"cpu": "1"}, count=3),
        cluster_queue(TEST_CQ, [fq("default", pods="3", cpu="10")]),
        "FIT",
        {"main": {"cpu": ("default", "FIT"), "pods": ("default", "FIT")}},
        {"default/cpu": 3000, "default/pods": 3},
    ),
    # flavorassigner_test.go TestAssignFlavors: "num pods don't fit"
    AssignCase(
        "num pods don't fit",
        _main({"cpu": "1"}, count=3),
        cluster_queue(TEST_CQ, [fq("default", pods="2", cpu="10")]),
        "NO_FIT",
        {"main": {}},
        want_no_fit_reason="ExceedsMaxQuota",
    ),
    # flavorassigner_test.go TestAssignFlavors: "preempt before try next flavor"
    AssignCase(
        "preempt before try next flavor",
        _main({"cpu": "9"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", pods="10", cpu="10"), fq("two", pods="10", cpu="10")],
            when_can_borrow="MayStopSearch",
            when_can_preempt="MayStopSearch",
        ),
        "PREEMPT",
        {"main": {"cpu": ("one", "PREEMPT"), "pods": ("one", "FIT")}},
        {"one/cpu": 9000, "one/pods": 1},
        cq_usage={("one", "cpu"): 2000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "preempt try next flavor"
    AssignCase(
        "preempt try next flavor",
        _main({"cpu": "9"}),
        cluster_queue(TEST_CQ, [fq("one", pods="10", cpu="10"), fq("two", pods="10", cpu="10")]),
        "FIT",
        {"main": {"cpu": ("two", "FIT"), "pods": ("two", "FIT")}},
        {"two/cpu": 9000, "two/pods": 1},
        cq_usage={("one", "cpu"): 2000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "borrow try next flavor, found the first flavor"
    AssignCase(
        "borrow try next flavor, found the first flavor",
        _main({"cpu": "9"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", pods="10", cpu=("10", "1")), fq("two", pods="10", cpu="1")],
            cohort=COHORT,
            when_can_borrow="TryNextFlavor",
            when_can_preempt="TryNextFlavor",
        ),
        "FIT",
        {"main": {"cpu": ("one", "FIT"), "pods": ("one", "FIT")}},
        {"one/cpu": 9000, "one/pods": 1},
        want_borrowing=1,
        cq_usage={("one", "cpu"): 2000},
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="1")], cohort=COHORT),
    ),
    # flavorassigner_test.go TestAssignFlavors: "borrow try next flavor, found the second flavor"
    AssignCase(
        "borrow try next flavor, found the second flavor",
        _main({"cpu": "9"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", pods="10", cpu=("10", "1")), fq("two", pods="10", cpu="10")],
            cohort=COHORT,
            when_can_borrow="TryNextFlavor",
            when_can_preempt="TryNextFlavor",
        ),
        "FIT",
        {"main": {"cpu": ("two", "FIT"), "pods": ("two", "FIT")}},
        {"two/cpu": 9000, "two/pods": 1},
        cq_usage={("one", "cpu"): 2000},
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="1")], cohort=COHORT),
    ),
    # flavorassigner_test.go TestAssignFlavors: "borrow before try next flavor"
    AssignCase(
        "borrow before try next flavor",
        _main({"cpu": "9"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", pods="10", cpu=("10", "1")), fq("two", pods="10", cpu="10")],
            cohort=COHORT,
        ),
        "FIT",
        {"main": {"cpu": ("one", "FIT"), "pods": ("one", "FIT")}},
        {"one/cpu": 9000, "one/pods": 1},
        want_borrowing=1,
        cq_usage={("one", "cpu"): 2000},
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="1")], cohort=COHORT),
    ),
    # flavorassigner_test.go TestAssignFlavors: "when borrowing while preemption is needed for
    # flavor one; WhenCanBorrow=MayStopSearch"
    AssignCase(
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=MayStopSearch",
        _main({"cpu": "12"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", cpu=("0", "12")), fq("two", cpu="12")],
            cohort=COHORT,
            reclaim="LowerPriority",
            borrow_within="LowerPriority",
            when_can_borrow="MayStopSearch",
            when_can_preempt="MayStopSearch",
        ),
        "PREEMPT",
        {"main": {"cpu": ("one", "PREEMPT")}},
        {"one/cpu": 12_000},
        want_borrowing=1,
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="12")], cohort=COHORT),
        secondary_usage={("one", "cpu"): 10_000},
        oracle={("one", "cpu"): (PP.PREEMPT, 1)},
    ),
    # flavorassigner_test.go TestAssignFlavors: "when borrowing while preemption is needed for
    # flavor one, no borrowingLimit; WhenCanBorrow=MayStopSearch"
    AssignCase(
        "when borrowing while preemption is needed for flavor one, no borrowingLimit; "
        "WhenCanBorrow=MayStopSearch",
        _main({"cpu": "12"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", cpu="0"), fq("two", cpu="12")],
            cohort=COHORT,
            reclaim="LowerPriority",
            borrow_within="LowerPriority",
            when_can_borrow="MayStopSearch",
            when_can_preempt="MayStopSearch",
        ),
        "PREEMPT",
        {"main": {"cpu": ("one", "PREEMPT")}},
        {"one/cpu": 12_000},
        want_borrowing=1,
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="12")], cohort=COHORT),
        secondary_usage={("one", "cpu"): 10_000},
        oracle={("one", "cpu"): (PP.PREEMPT, 1)},
    ),
    # flavorassigner_test.go TestAssignFlavors: "when borrowing while preemption is needed for
    # flavor one; WhenCanBorrow=TryNextFlavor"
    AssignCase(
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor",
        _main({"cpu": "12"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", cpu=("0", "12")), fq("two", cpu="12")],
            cohort=COHORT,
            reclaim="LowerPriority",
            borrow_within="LowerPriority",
            when_can_borrow="TryNextFlavor",
            when_can_preempt="MayStopSearch",
        ),
        "FIT",
        {"main": {"cpu": ("two", "FIT")}},
        {"two/cpu": 12_000},
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="12")], cohort=COHORT),
    ),
    # flavorassigner_test.go TestAssignFlavors: "when borrowing while preemption is needed, but
    # borrowingLimit exceeds the quota available in the cohort"
    AssignCase(
        "when borrowing while preemption is needed, but borrowingLimit exceeds the quota "
        "available in the cohort",
        _main({"cpu": "12"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", cpu=("0", "12"))],
            cohort=COHORT,
            reclaim="LowerPriority",
            borrow_within="LowerPriority",
        ),
        "NO_FIT",
        {"main": {}},
        want_no_fit_reason="ExceedsMaxQuota",
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="11")], cohort=COHORT),
        secondary_usage={("one", "cpu"): 10_000},
    ),
    # flavorassigner_test.go TestAssignFlavors: "lend try next flavor, found the second flavor"
    AssignCase(
        "lend try next flavor, found the second flavor",
        _main({"cpu": "9"}),
        cluster_queue(
            TEST_CQ,
            [
                fq("one", pods="10", cpu=("10", None, "1")),
                fq("two", pods="10", cpu=("10", None, "0")),
            ],
            cohort=COHORT,
            when_can_borrow="TryNextFlavor",
            when_can_preempt="TryNextFlavor",
        ),
        "FIT",
        {"main": {"cpu": ("two", "FIT"), "pods": ("two", "FIT")}},
        {"two/cpu": 9000, "two/pods": 1},
        cq_usage={("one", "cpu"): 2000},
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="1")], cohort=COHORT),
    ),
    # flavorassigner_test.go TestAssignFlavors: "lend try next flavor, found the first flavor"
    AssignCase(
        "lend try next flavor, found the first flavor",
        _main({"cpu": "9"}),
        cluster_queue(
            TEST_CQ,
            [
                fq("one", pods="10", cpu=("10", None, "1")),
                fq("two", pods="10", cpu=("1", None, "0")),
            ],
            cohort=COHORT,
            when_can_borrow="TryNextFlavor",
            when_can_preempt="TryNextFlavor",
        ),
        "FIT",
        {"main": {"cpu": ("one", "FIT"), "pods": ("one", "FIT")}},
        {"one/cpu": 9000, "one/pods": 1},
        want_borrowing=1,
        cq_usage={("one", "cpu"): 2000},
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="1")], cohort=COHORT),
    ),
    # flavorassigner_test.go TestAssignFlavors: "cannot preempt in cohort (oracle returns None)
    # for the first flavor, tries the second flavor (which fits)"
    AssignCase(
        "cannot preempt in cohort (oracle returns None) for the first flavor, tries the second "
        "flavor (which fits)",
        _main({"cpu": "2"}),
        cluster_queue(
            TEST_CQ,
            [fq("one", cpu=("0", "2")), fq("two", cpu=("0", "2"))],
            cohort=COHORT,
            reclaim="LowerPriority",
            borrow_within="LowerPriority",
            when_can_borrow="MayStopSearch",
            when_can_preempt="MayStopSearch",
        ),
        "FIT",
        {"main": {"cpu": ("two", "FIT")}},
        {"two/cpu": 2000},
        want_borrowing=1,
        secondary=cluster_queue(SECONDARY, [fq("one", cpu="2"), fq("two", cpu="2")], cohort=COHORT),
        secondary_usage={("one", "cpu"): 2000},
        oracle={("one", "cpu"): (PP.NO_CANDIDATES, 0)},
    ),
    # flavorassigner_test.go TestAssignFlavors: "quota exhausted, but can preempt in cohort and
    # ClusterQueue"
    AssignCase(
        "quota exhausted, but can preempt in cohort and ClusterQueue",
        _main({"cpu": "9"}),
        cluster_queue(TEST_CQ, [fq("one", pods="10", cpu=("10", None, "0"))], cohort=COHORT),
        "PREEMPT",
        {"main": {"cpu": ("one", "PREEMPT"), "pods": ("one", "FIT")}},
        {"one/cpu": 9000, "one/pods": 1},
        want_borrowing=1,
        cq_usage={("one", "cpu"): 2000},
        secondary=cluster_queue(SECONDARY, [fq("one", pods="0", cpu="0")], cohort=COHORT),
        oracle={("one", "cpu"): (PP.PREEMPT, 1)},
    ),
    # flavorassigner_test.go TestAssignFlavors: "multi-podset, one fits and another fails, fitting
    # podset attempts skipped in resolveNoFitReason"
    AssignCase(
        "multi-podset, one fits and another fails, fitting podset attempts skipped in "
        "resolveNoFitReason",
        kwl(
            "wl",
            "default",
            pod_sets=[ps("fitting-podset", 1, {"cpu": "1"}), ps("blocking-podset", 1, {"cpu": "5"})],
        ),
        cluster_queue(TEST_CQ, [fq("one", cpu="2"), fq("two", cpu="2")]),
        "NO_FIT",
        {"fitting-podset": {"cpu": ("one", "FIT")}, "blocking-podset": {}},
        {"one/cpu": 1000},
        want_no_fit_reason="ExceedsMaxQuota",
    ),
]

# Kueue's "fitting-podset" has nodeSelector type=one; set it after construction.
ASSIGN_CASES[-1].workload = _with(ASSIGN_CASES[-1].workload, node_selector={"type": "one"})


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c.name,
            marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [],
        )
        for c in ASSIGN_CASES
    ],
)
def test_assign_flavors(case: AssignCase) -> None:
    objects: list[Obj] = [*ASSIGN_FLAVORS.values(), case.cq]
    if case.secondary is not None:
        objects.append(case.secondary)
    engine = build_engine(objects)
    snapshot = engine.cache.snapshot()
    if case.cq_usage:
        snapshot.simulate_usage(case.cq.name, {fr(f, r): v for (f, r), v in case.cq_usage.items()})
    if case.secondary is not None and case.secondary_usage:
        snapshot.simulate_usage(
            case.secondary.name, {fr(f, r): v for (f, r), v in case.secondary_usage.items()}
        )
    oracle = ScriptedOracle({fr(f, r): v for (f, r), v in case.oracle.items()})
    info = make_info(case.workload, {})
    assigner = FlavorAssigner(
        info,
        snapshot.cluster_queues[case.cq.name],
        snapshot.flavors,
        oracle,
        fair_sharing=case.fair_sharing,
    )
    got = assigner.assign()
    view = assignment_view(got)
    want_pod_sets = {
        name: {r: (f, mode) for r, (f, mode) in flavors.items()}
        for name, flavors in case.want_flavors.items()
    }
    assert view == {
        "mode": case.want_mode,
        "borrowing": case.want_borrowing,
        "pod_sets": want_pod_sets,
        "usage": dict(sorted(case.want_usage.items())),
    }
    if case.want_no_fit_reason is not None:
        assert str(got.no_fit_reason) == case.want_no_fit_reason


def test_ported_case_count() -> None:
    """At least 30 scheduler/flavor-assignment cases are ported (the brief's floor)."""
    assert len(SCHEDULE_CASES) + len(TWO_CYCLE_CASES) + len(ASSIGN_CASES) >= 30


# -- End-to-end scenarios written as Kueue manifests ---------------------------------------------

SCENARIOS_DIR = Path(__file__).parent / "kueue_scenarios"
SCENARIO_START = datetime(2025, 1, 1, 1, 0, tzinfo=UTC)


@dataclass
class Step:
    """One cycle: the decisions Kueue makes, then what the cluster does before the next cycle."""

    admitted: Mapping[str, Mapping[str, tuple[int, Mapping[str, str]]]] = field(default_factory=dict)
    preempted: Mapping[str, str] = field(default_factory=dict)
    # Reasons of QuotaReserved=False for the workloads listed (kqueue's reasons are Kueue's).
    pending: Mapping[str, str] = field(default_factory=dict)
    finish: Sequence[str] = ()
    evicted: Sequence[str] = ()


SCENARIOS: dict[str, list[Step]] = {
    # lend-b keeps nothing for itself (nominal 2 - lendingLimit 2) and reaches the 4 cpu the two
    # ClusterQueues lend to the cohort; "a" holds 2 of them, so "b" (3) does not fit but could once
    # quota is freed: Kueue leaves it inadmissible (TestSchedule "workload exceeds lending limit
    # when borrow in cohort") with its flavor assigner's NoFitReason WaitingForQuota, not
    # ExceedsMaxQuota (3 <= 4). Once "a" finishes, 4 cpu are free and "b" is admitted.
    "lending-limit.yaml": [
        Step(pending={"lend/b": "WaitingForQuota"}, finish=["lend/a"]),
        Step(admitted={"lend/b": {"main": (1, {"cpu": "default"})}}),
    ],
    # Both heads need the 4 cpu of Cohort "guaranteed"; Kueue orders entries by borrowing height
    # before priority, so "guaranteed" (borrowing within its own cohort) goes before "best-effort"
    # (priority 3, borrowing across the root), which no longer fits (TestSchedule "in a
    # hierarchical cohort, workload borrowing less is scheduled first"). When "guaranteed"
    # finishes, nothing stops "best-effort" from borrowing the 4 cpu through the root.
    "hierarchical-cohort.yaml": [
        Step(
            admitted={"eng-alpha/guaranteed": {"one": (1, {"cpu": "default"})}},
            pending={"eng-alpha/best-effort": "WaitingForQuota"},
            finish=["eng-alpha/guaranteed"],
        ),
        Step(admitted={"eng-alpha/best-effort": {"one": (1, {"cpu": "default"})}}),
    ],
    # "in" (priority 1 from WorkloadPriorityClass "high") needs 2 of the 6 full cpu. Lower
    # priority candidates are low (1 cpu) and mid (2 cpu); Kueue removes them lowest first until
    # "in" fits (low, then mid), then adds back what is not needed (low): only mid is preempted
    # (TestPreemption "minimal set excludes low priority"), reason InClusterQueue. The preemptor
    # waits for its victim, and is admitted once mid is evicted.
    "priority-preemption.yaml": [
        Step(
            preempted={"team/mid": "InClusterQueue"},
            pending={"team/in": "WaitingForPreemptedWorkloads"},
            evicted=["team/mid"],
        ),
        Step(admitted={"team/in": {"main": (1, {"cpu": "default"})}}),
    ],
    # "single" (50 x 2 cpu, minCount 20) does not fit in 50 cpu; Kueue's binary search admits the
    # largest count that fits, 25 (TestSchedule "partial admission single variable pod set").
    # StrictFIFO considers one head per cycle; after "single" finishes, "multiple" (20 + 30 + 15
    # pods of 1 cpu, minCount 10 on "two") needs 35 cpu for its fixed pod sets, so "two" gets the
    # 15 left: Kueue's PodSetReducer searches the smallest reduction step that fits
    # (30 - 20 * step / 20 <= 15), as in TestSchedule "partial admission multiple variable pod
    # sets".
    "partial-admission.yaml": [
        Step(admitted={"sales/single": {"one": (25, {"cpu": "default"})}}, finish=["sales/single"]),
        Step(
            admitted={
                "sales/multiple": {
                    "one": (20, {"cpu": "default"}),
                    "two": (15, {"cpu": "default"}),
                    "three": (15, {"cpu": "default"}),
                }
            }
        ),
    ],
    # eng-cohort-beta tries on-demand first: its 30 nominal are lent to eng-cohort-alpha, which
    # borrows 44 of the cohort's 60; reclaiming needs one of alpha's on-demand workloads, the most
    # recently admitted (alpha2), reason InCohortReclamation (beta stays within its nominal).
    # TryNextFlavor also tries spot, which would need borrowing beta may not do while preempting.
    # Kueue keeps on-demand and preempts alpha2 (TestLastSchedulingContext "TryNextFlavor, but
    # second flavor is full and can preempt on first"); once alpha2 is gone "new" gets on-demand.
    "flavor-fungibility.yaml": [
        Step(
            preempted={"default/alpha2": "InCohortReclamation"},
            pending={"default/new": "WaitingForPreemptedWorkloads"},
            evicted=["default/alpha2"],
        ),
        Step(admitted={"default/new": {"main": (1, {"cpu": "on-demand"})}}),
    ],
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_kueue_manifest_scenario(scenario: str) -> None:
    text = (SCENARIOS_DIR / scenario).read_text()
    engine = engine_from_manifests(text, scenario)
    for i, step in enumerate(SCENARIOS[scenario]):
        result = engine.schedule(SCENARIO_START + timedelta(minutes=i))
        got = decisions(result)
        assert got == {"admitted": step.admitted, "preempted": step.preempted}, f"cycle {i + 1}"
        reasons = {str(p.workload): str(p.reason) for p in result.pending}
        for key, reason in step.pending.items():
            assert reasons.get(key) == reason, f"cycle {i + 1}: {key}"
        for key in step.finish:
            engine.finish(key)  # type: ignore[arg-type]
        for key in step.evicted:
            engine.evicted(key)  # type: ignore[arg-type]


def test_every_scenario_file_is_checked() -> None:
    assert sorted(p.name for p in SCENARIOS_DIR.glob("*.yaml")) == sorted(SCENARIOS)
