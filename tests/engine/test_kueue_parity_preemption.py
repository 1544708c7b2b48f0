"""Parity with Kueue's classical preemption table tests.

Ports of ``TestPreemption`` and ``TestHierarchicalPreemptions`` from Kueue's
``pkg/scheduler/preemption/preemption_test.go`` (kubernetes-sigs/kueue), each carrying its name.
Kueue's tests call ``Preemptor.GetTargets`` with a given flavor assignment on a snapshot of the
admitted workloads, issue the preemptions and compare ``namespace/name:Reason`` with
``wantPreempted``; ``test_get_targets`` does the same with ``ClassicalPreemptor.get_targets`` (the
snapshot must come back unchanged, as Kueue checks). Workloads already being evicted are not
issued again (Kueue's IssuePreemptions skips them), so only new victims are compared.

``test_through_cycle`` runs the same situation through one scheduling cycle, with the incoming
workload pending in its ClusterQueue, wherever the flavor assigner has no choice to make (one
flavor per resource group, every requested resource covered): the cycle must reach the same victims
with the same reasons.

Fair-sharing preemption (``TestFairPreemptions``) is in ``test_kueue_parity_fair_preemption.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pytest

from kqueue.engine.engine import Engine
from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.types import ClusterQueueSpec, CohortSpec, Mode, Workload, WorkloadKey
from kqueue.engine.workload import make_info

from .builders import make_flavor
from .parity_support import (
    CYCLE,
    NOW,
    Obj,
    adm,
    build_engine,
    cluster_queue,
    cohort,
    fq,
    given_assignment,
    key_reasons,
    kwl,
    lq,
    ps,
    reserve,
    simple,
)

IN_CQ = "InClusterQueue"
RECLAIM = "InCohortReclamation"
WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

FLAVORS = [make_flavor(n).obj() for n in ("default", "alpha", "beta")]

_LP = "LowerPriority"
_SHARED_BWC = {"borrow_within": _LP, "max_priority_threshold": 0}

# preemption_test.go TestPreemption: defaultClusterQueues.
DEFAULT_CQS = [
    cluster_queue(
        "standalone",
        [fq("default", cpu="6")],
        [fq("alpha", memory="3Gi"), fq("beta", memory="3Gi")],
        within=_LP,
    ),
    cluster_queue(
        "c1",
        [fq("default", cpu=("6", "6"), memory=("3Gi", "3Gi"))],
        cohort="cohort",
        within=_LP,
        reclaim=_LP,
    ),
    cluster_queue(
        "c2",
        [fq("default", cpu=("6", "6"), memory=("3Gi", "3Gi"))],
        cohort="cohort",
        within="Never",
        reclaim="Any",
    ),
    cluster_queue(
        "d1", [fq("default", cpu="6", memory="3Gi")], cohort="cohort-no-limits", within=_LP, reclaim=_LP
    ),
    cluster_queue(
        "d2",
        [fq("default", cpu="6", memory="3Gi")],
        cohort="cohort-no-limits",
        within="Never",
        reclaim="Any",
    ),
    cluster_queue(
        "l1",
        [fq("default", cpu=("6", "12"), memory=("3Gi", "6Gi"))],
        cohort="legion",
        within=_LP,
        reclaim=_LP,
    ),
    cluster_queue("preventStarvation", [fq("default", cpu="6")], within="LowerOrNewerEqualPriority"),
    cluster_queue(
        "a_standard",
        [fq("default", cpu=("1", "12"))],
        cohort="with_shared_cq",
        within="Never",
        reclaim=_LP,
        **_SHARED_BWC,  # type: ignore[arg-type]
    ),
    cluster_queue(
        "b_standard",
        [fq("default", cpu=("1", "12"))],
        cohort="with_shared_cq",
        within=_LP,
        reclaim="Any",
        **_SHARED_BWC,  # type: ignore[arg-type]
    ),
    cluster_queue(
        "a_best_effort",
        [fq("default", cpu=("1", "12"))],
        cohort="with_shared_cq",
        within="Never",
        reclaim=_LP,
        **_SHARED_BWC,  # type: ignore[arg-type]
    ),
    cluster_queue(
        "b_best_effort",
        [fq("default", cpu=("0", "13"))],
        cohort="with_shared_cq",
        within="Never",
        reclaim=_LP,
        **_SHARED_BWC,  # type: ignore[arg-type]
    ),
    cluster_queue("shared", [fq("default", cpu="10")], cohort="with_shared_cq"),
    cluster_queue(
        "lend1", [fq("default", cpu=("6", None, "4"))], cohort="cohort-lend", within=_LP, reclaim=_LP
    ),
    cluster_queue(
        "lend2", [fq("default", cpu=("6", None, "2"))], cohort="cohort-lend", within=_LP, reclaim=_LP
    ),
    cluster_queue(
        "a", [fq("default", cpu="2", memory="2")], cohort="cohort-three", within=_LP, reclaim="Any"
    ),
    cluster_queue("b", [fq("default", cpu="2", memory="2")], cohort="cohort-three"),
    cluster_queue("c", [fq("default", cpu="2", memory="2")], cohort="cohort-three"),
]

AssignmentSpec = Sequence[tuple[str, int, Mapping[str, tuple[str, Mode]]]]
P, F = Mode.PREEMPT, Mode.FIT

CPU_PREEMPT: AssignmentSpec = [("main", 1, {"cpu": ("default", P)})]


def cpu_and_memory(cpu: Mode = P, memory: Mode = P, flavor: str = "default") -> AssignmentSpec:
    return [("main", 1, {"cpu": (flavor, cpu), "memory": (flavor, memory)})]


@dataclass
class Case:
    """One ported case: Kueue's clusterQueues, cohorts, admitted, incoming, targetCQ, assignment
    and wantPreempted (``namespace/name:Reason``; Kueue's workloads here have no namespace)."""

    name: str
    admitted: list[Workload]
    incoming: Workload
    target: str
    want: set[str]
    assignment: AssignmentSpec = field(default_factory=lambda: CPU_PREEMPT)
    cqs: Sequence[ClusterQueueSpec] = field(default_factory=lambda: DEFAULT_CQS)
    cohorts: Sequence[CohortSpec] = ()
    # Workloads already being evicted (Kueue: an Evicted=True condition).
    evicting: Sequence[str] = ()
    xfail: str | None = None
    cycle_xfail: str | None = None


def held(name: str, cq: str, cpu: str, *, priority: int | None = None, at: float = NOW) -> Workload:
    """Kueue's ``MakeWorkload(name, "").Priority(p).Request(cpu, x).ReserveQuotaAt(
    MakeAdmission(cq).Assignment(cpu, "default", x), at)``."""
    return simple(kwl(name, priority=priority, requests={"cpu": cpu}), cq, "default", at)


def held_res(
    name: str, cq: str, requests: Mapping[str, str], flavor: str = "default", *, priority: int | None = None
) -> Workload:
    return simple(kwl(name, priority=priority, requests=requests), cq, flavor)


def incoming(cpu: str | None = None, *, priority: int | None = None, name: str = "in", **more: str) -> Workload:
    requests = {"cpu": cpu} if cpu is not None else {}
    requests.update(more)
    return kwl(name, priority=priority, requests=requests)


def w(name: str, reason: str) -> str:
    return f"/{name}:{reason}"


PREEMPTION_CASES: list[Case] = [
    # preemption_test.go TestPreemption: "preempt lowest priority"
    Case(
        "preempt lowest priority",
        [held("low", "standalone", "2", priority=-1), held("mid", "standalone", "2"), held("high", "standalone", "2", priority=1)],
        incoming("2", priority=1),
        "standalone",
        {w("low", IN_CQ)},
    ),
    # preemption_test.go TestPreemption: "preempt multiple"
    Case(
        "preempt multiple",
        [held("low", "standalone", "2", priority=-1), held("mid", "standalone", "2"), held("high", "standalone", "2", priority=1)],
        incoming("3", priority=1),
        "standalone",
        {w("low", IN_CQ), w("mid", IN_CQ)},
    ),
    # preemption_test.go TestPreemption: "no preemption for low priority"
    Case(
        "no preemption for low priority",
        [held("low", "standalone", "3", priority=-1), held("mid", "standalone", "3")],
        incoming("1", priority=-1),
        "standalone",
        set(),
    ),
    # preemption_test.go TestPreemption: "not enough low priority workloads"
    Case(
        "not enough low priority workloads",
        [held("low", "standalone", "3", priority=-1), held("mid", "standalone", "3")],
        incoming("4"),
        "standalone",
        set(),
    ),
    # preemption_test.go TestPreemption: "some free quota, preempt low priority"
    Case(
        "some free quota, preempt low priority",
        [held("low", "standalone", "1", priority=-1), held("mid", "standalone", "1"), held("high", "standalone", "3", priority=1)],
        incoming("2", priority=1),
        "standalone",
        {w("low", IN_CQ)},
    ),
    # preemption_test.go TestPreemption: "minimal set excludes low priority"
    Case(
        "minimal set excludes low priority",
        [held("low", "standalone", "1", priority=-1), held("mid", "standalone", "2"), held("high", "standalone", "3", priority=1)],
        incoming("2", priority=1),
        "standalone",
        {w("mid", IN_CQ)},
    ),
    # preemption_test.go TestPreemption: "only preempt workloads using the chosen flavor"
    Case(
        "only preempt workloads using the chosen flavor",
        [
            held_res("low", "standalone", {"memory": "2Gi"}, "alpha", priority=-1),
            held_res("mid", "standalone", {"memory": "1Gi"}, "beta"),
            held_res("high", "standalone", {"memory": "1Gi"}, "beta", priority=1),
        ],
        incoming("1", priority=1, memory="2Gi"),
        "standalone",
        {w("mid", IN_CQ)},
        assignment=[("main", 1, {"cpu": ("default", F), "memory": ("beta", P)})],
    ),
    # preemption_test.go TestPreemption: "reclaim quota from borrower"
    Case(
        "reclaim quota from borrower",
        [held("c1-low", "c1", "3", priority=-1), held("c2-mid", "c2", "3"), held("c2-high", "c2", "6", priority=1)],
        incoming("3", priority=1),
        "c1",
        {w("c2-mid", RECLAIM)},
    ),
    # preemption_test.go TestPreemption: "reclaim quota if workload requests 0 resources for a
    # resource at nominal quota"
    Case(
        "reclaim quota if workload requests 0 resources for a resource at nominal quota",
        [
            held_res("c1-low", "c1", {"cpu": "3", "memory": "3Gi"}, priority=-1),
            held("c2-mid", "c2", "3"),
            held("c2-high", "c2", "6", priority=1),
        ],
        incoming("3", priority=1, memory="0"),
        "c1",
        {w("c2-mid", RECLAIM)},
        assignment=cpu_and_memory(P, F),
    ),
    # preemption_test.go TestPreemption: "no workloads borrowing"
    Case(
        "no workloads borrowing",
        [held("c1-high", "c1", "4", priority=1), held("c2-low-1", "c2", "4", priority=-1)],
        incoming("4", priority=1),
        "c1",
        set(),
    ),
    # preemption_test.go TestPreemption: "not enough workloads borrowing"
    Case(
        "not enough workloads borrowing",
        [
            held("c1-high", "c1", "4", priority=1),
            held("c2-low-1", "c2", "4", priority=-1),
            held("c2-low-2", "c2", "4", priority=-1),
        ],
        incoming("4", priority=1),
        "c1",
        set(),
    ),
    # preemption_test.go TestPreemption: "preempting locally and borrowing other resources in
    # cohort, without cohort candidates"
    Case(
        "preempting locally and borrowing other resources in cohort, without cohort candidates",
        [
            held("c1-low", "c1", "4", priority=-1),
            held("c2-low-1", "c2", "4", priority=-1),
            held("c2-high-2", "c2", "4", priority=1),
        ],
        incoming("4", priority=1, memory="5Gi"),
        "c1",
        {w("c1-low", IN_CQ)},
        assignment=cpu_and_memory(),
    ),
    # preemption_test.go TestPreemption: "preempting locally and borrowing same resource in cohort"
    Case(
        "preempting locally and borrowing same resource in cohort",
        [
            held("c1-med", "c1", "4", priority=0),
            held("c1-low", "c1", "4", priority=-1),
            held("c2-low-1", "c2", "4", priority=-1),
        ],
        incoming("4", priority=1),
        "c1",
        {w("c1-low", IN_CQ)},
    ),
    # preemption_test.go TestPreemption: "preempting locally and borrowing same resource in
    # cohort; no borrowing limit in the cohort"
    Case(
        "preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort",
        [
            held("d1-med", "d1", "4", priority=0),
            held("d1-low", "d1", "4", priority=-1),
            held("d2-low-1", "d2", "4", priority=-1),
        ],
        incoming("4", priority=1),
        "d1",
        {w("d1-low", IN_CQ)},
    ),
    # preemption_test.go TestPreemption: "preempting locally and borrowing other resources in
    # cohort, with cohort candidates"
    Case(
        "preempting locally and borrowing other resources in cohort, with cohort candidates",
        [
            held("c1-med", "c1", "4", priority=0),
            held("c2-low-1", "c2", "5", priority=-1),
            held("c2-low-2", "c2", "1", priority=-1),
            held("c2-low-3", "c2", "1", priority=-1),
        ],
        incoming("2", priority=1, memory="5Gi"),
        "c1",
        {w("c1-med", IN_CQ)},
        assignment=cpu_and_memory(),
    ),
    # preemption_test.go TestPreemption: "preempting locally and not borrowing same resource in
    # 1-queue cohort"
    Case(
        "preempting locally and not borrowing same resource in 1-queue cohort",
        [held("l1-med", "l1", "4", priority=0), held("l1-low", "l1", "2", priority=-1)],
        incoming("4", priority=1),
        "l1",
        {w("l1-med", IN_CQ)},
    ),
    # preemption_test.go TestPreemption: "do not reclaim borrowed quota from same priority for
    # withinCohort=ReclaimFromLowerPriority"
    Case(
        "do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority",
        [held("c1", "c1", "2"), held("c2-1", "c2", "4"), held("c2-2", "c2", "4")],
        incoming("4"),
        "c1",
        set(),
    ),
    # preemption_test.go TestPreemption: "reclaim borrowed quota from same priority for
    # withinCohort=ReclaimFromAny"
    Case(
        "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny",
        [held("c1-1", "c1", "4"), held("c1-2", "c1", "4", priority=1), held("c2", "c2", "2")],
        incoming("4"),
        "c2",
        {w("c1-1", RECLAIM)},
    ),
    # preemption_test.go TestPreemption: "preempt from all ClusterQueues in cohort"
    Case(
        "preempt from all ClusterQueues in cohort",
        [
            held("c1-low", "c1", "3", priority=-1),
            held("c1-mid", "c1", "2"),
            held("c2-low", "c2", "3", priority=-1),
            held("c2-mid", "c2", "4"),
        ],
        incoming("4"),
        "c1",
        {w("c1-low", IN_CQ), w("c2-low", RECLAIM)},
    ),
    # preemption_test.go TestPreemption: "can't preempt workloads in ClusterQueue for
    # withinClusterQueue=Never"
    Case(
        "can't preempt workloads in ClusterQueue for withinClusterQueue=Never",
        [held("c2-low", "c2", "3", priority=-1)],
        incoming("4", priority=1),
        "c2",
        set(),
    ),
    # preemption_test.go TestPreemption: "each podset preempts a different flavor"
    Case(
        "each podset preempts a different flavor",
        [
            held_res("low-alpha", "standalone", {"memory": "2Gi"}, "alpha", priority=-1),
            held_res("low-beta", "standalone", {"memory": "2Gi"}, "beta", priority=-1),
        ],
        kwl("in", pod_sets=[ps("launcher", 1, {"memory": "2Gi"}), ps("workers", 2, {"memory": "1Gi"})]),
        "standalone",
        {w("low-alpha", IN_CQ), w("low-beta", IN_CQ)},
        assignment=[
            ("launcher", 1, {"memory": ("alpha", P)}),
            ("workers", 2, {"memory": ("beta", P)}),
        ],
    ),
    # preemption_test.go TestPreemption: "preempt newer workloads with the same priority"
    Case(
        "preempt newer workloads with the same priority",
        [
            held("wl1", "preventStarvation", "2", priority=2),
            simple(kwl("wl2", priority=1, created=NOW, requests={"cpu": "2"}), "preventStarvation", "default", NOW + 1),
            simple(kwl("wl3", priority=1, created=NOW, requests={"cpu": "2"}), "preventStarvation", "default", NOW),
        ],
        kwl("in", priority=1, created=NOW - 15, pod_sets=[ps("launcher", 1, {"cpu": "2"})]),
        "preventStarvation",
        {w("wl2", IN_CQ)},
        assignment=[("launcher", 1, {"cpu": ("default", P)})],
    ),
    # preemption_test.go TestPreemption: "use BorrowWithinCohort; allow preempting a
    # lower-priority workload from another ClusterQueue while borrowing"
    Case(
        "use BorrowWithinCohort; allow preempting a lower-priority workload from another "
        "ClusterQueue while borrowing",
        [held("a_best_effort_low", "a_best_effort", "10", priority=-1), held("b_best_effort_low", "b_best_effort", "1", priority=-1)],
        incoming("10"),
        "a_standard",
        {w("a_best_effort_low", WHILE_BORROWING)},
    ),
    # preemption_test.go TestPreemption: "use BorrowWithinCohort; don't allow preempting a
    # lower-priority workload with priority above MaxPriorityThreshold, if borrowing is required
    # even after the preemption"
    Case(
        "use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority "
        "above MaxPriorityThreshold, if borrowing is required even after the preemption",
        [held("b_standard", "b_standard", "10", priority=1)],
        incoming("10", priority=2),
        "a_standard",
        set(),
    ),
    # preemption_test.go TestPreemption: "use BorrowWithinCohort; allow preempting a lower-priority
    # workload with priority above MaxPriorityThreshold, if borrowing is not required after the
    # preemption"
    Case(
        "use BorrowWithinCohort; allow preempting a lower-priority workload with priority above "
        "MaxPriorityThreshold, if borrowing is not required after the preemption",
        [held("b_standard", "b_standard", "13", priority=1)],
        incoming("1", priority=2),
        "a_standard",
        {w("b_standard", RECLAIM)},
    ),
    # preemption_test.go TestPreemption: "use BorrowWithinCohort; don't allow for preemption of
    # lower-priority workload from the same ClusterQueue"
    Case(
        "use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the "
        "same ClusterQueue",
        [held("a_standard", "a_standard", "13", priority=1)],
        incoming("1", priority=2),
        "a_standard",
        set(),
    ),
    # preemption_test.go TestPreemption: "use BorrowWithinCohort; only preempt from CQ if no
    # workloads below threshold and already above nominal"
    Case(
        "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already "
        "above nominal",
        [
            held("a_standard_1", "a_standard", "10", priority=1),
            held("a_standard_2", "a_standard", "1", priority=1),
            held("b_standard_1", "b_standard", "1", priority=1),
            held("b_standard_2", "b_standard", "1", priority=2),
        ],
        incoming("1", priority=3),
        "b_standard",
        {w("b_standard_1", IN_CQ)},
    ),
    # preemption_test.go TestPreemption: "use BorrowWithinCohort; preempt from CQ and from other
    # CQs with workloads below threshold"
    Case(
        "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold",
        [
            held("b_standard_high", "b_standard", "10", priority=2),
            held("b_standard_mid", "b_standard", "1", priority=1),
            held("a_best_effort_low", "a_best_effort", "1", priority=-1),
            held("a_best_effort_lower", "a_best_effort", "1", priority=-2),
        ],
        incoming("2", priority=2),
        "b_standard",
        {w("b_standard_mid", IN_CQ), w("a_best_effort_lower", WHILE_BORROWING)},
    ),
    # preemption_test.go TestPreemption: "reclaim quota from lender"
    Case(
        "reclaim quota from lender",
        [
            held("lend1-low", "lend1", "3", priority=-1),
            held("lend2-mid", "lend2", "3"),
            held("lend2-high", "lend2", "4", priority=1),
        ],
        incoming("3", priority=1),
        "lend1",
        {w("lend2-mid", RECLAIM)},
    ),
    # preemption_test.go TestPreemption: "preempt from all ClusterQueues in cohort-lend"
    Case(
        "preempt from all ClusterQueues in cohort-lend",
        [
            held("lend1-low", "lend1", "3", priority=-1),
            held("lend1-mid", "lend1", "2"),
            held("lend2-low", "lend2", "3", priority=-1),
            held("lend2-mid", "lend2", "4"),
        ],
        incoming("4"),
        "lend1",
        {w("lend1-low", IN_CQ), w("lend2-low", RECLAIM)},
    ),
    # preemption_test.go TestPreemption: "cannot preempt from other ClusterQueues if exceeds
    # requestable quota including lending limit"
    Case(
        "cannot preempt from other ClusterQueues if exceeds requestable quota including lending "
        "limit",
        [held("lend2-low", "lend2", "10", priority=-1)],
        incoming("9"),
        "lend1",
        set(),
    ),
]


def _three(memory: bool) -> list[Workload]:
    """Admitted workloads of Kueue's "preemptions from cq when target queue is exhausted ..."."""
    requests = {"cpu": "1", "memory": "1"} if memory else {"cpu": "1"}
    spec = [("a1", "a", -2), ("a2", "a", -2), ("a3", "a", -1), ("b1", "b", 0), ("b2", "b", 0), ("b3", "b", 0)]
    return [held_res(n, cq, requests, priority=p) for n, cq, p in spec]


PREEMPTION_CASES += [
    # preemption_test.go TestPreemption: "preemptions from cq when target queue is exhausted for
    # the single requested resource"
    Case(
        "preemptions from cq when target queue is exhausted for the single requested resource",
        _three(memory=False),
        incoming("2", priority=0),
        "a",
        {w("a1", IN_CQ), w("a2", IN_CQ)},
    ),
    # preemption_test.go TestPreemption: "preemptions from cq when target queue is exhausted for
    # two requested resources"
    Case(
        "preemptions from cq when target queue is exhausted for two requested resources",
        _three(memory=True),
        incoming("2", priority=0, memory="2"),
        "a",
        {w("a1", IN_CQ), w("a2", IN_CQ)},
        assignment=cpu_and_memory(),
    ),
    # preemption_test.go TestPreemption: "preemptions from cq when target queue is exhausted for
    # one requested resource, but not the other"
    Case(
        "preemptions from cq when target queue is exhausted for one requested resource, but not "
        "the other",
        _three(memory=False),
        incoming("2", priority=0, memory="2"),
        "a",
        {w("a1", IN_CQ), w("a2", IN_CQ)},
        assignment=cpu_and_memory(),
    ),
    # preemption_test.go TestPreemption: "allow preemption from other cluster queues if target cq
    # is not exhausted for the requested resource"
    Case(
        "allow preemption from other cluster queues if target cq is not exhausted for the "
        "requested resource",
        [
            held("a1", "a", "1", priority=-1),
            *(held(n, "b", "1", priority=0) for n in ("b1", "b2", "b3", "b4")),
            held("b5", "b", "1", priority=-1),
        ],
        incoming("2"),
        "a",
        {w("a1", IN_CQ), w("b5", RECLAIM)},
    ),
    # preemption_test.go TestPreemption: "long range preemption"
    Case(
        "long range preemption",
        [held("to-be-preempted", "cq-right", "5")],
        incoming("8", name="incoming"),
        "cq-left",
        {w("to-be-preempted", RECLAIM)},
        cqs=[
            cluster_queue("cq-left", [fq("default", cpu="10")], cohort="cohort-left", reclaim="Any"),
            cluster_queue("cq-right", [fq("default", cpu="0")], cohort="cohort-right"),
        ],
        cohorts=[cohort("cohort-left", parent="root"), cohort("cohort-right", parent="root")],
    ),
]

# -- TestHierarchicalPreemptions -----------------------------------------------------------------

_ANY = {"within": _LP, "reclaim": "Any"}
_ANY_BWC = {"within": _LP, "reclaim": "Any", **_SHARED_BWC}
_NO_QUOTA = [fq("default")]


def hq(name: str, parent: str, rg: Sequence[object] = _NO_QUOTA, **policy: object) -> ClusterQueueSpec:
    """A ClusterQueue of Kueue's hierarchical cases: ``MakeFlavorQuotas("default").Obj()`` with no
    resources unless ``rg`` is given."""
    return cluster_queue(name, rg, cohort=parent, **(policy or _ANY))  # type: ignore[arg-type]


def hheld(name: str, cq: str, cpu: str, priority: int) -> Workload:
    """Kueue's ``ReserveQuota`` (no explicit time) of the hierarchical cases."""
    return held(name, cq, cpu, priority=priority)


R_C2 = [cohort("r"), cohort("c", [fq("default", cpu="2")], parent="r")]
R1_C4 = [cohort("r", [fq("default", cpu="1")]), cohort("c", [fq("default", cpu="4")], parent="r")]

HIERARCHICAL_CASES: list[Case] = [
    # preemption_test.go TestHierarchicalPreemptions: "preempt with hierarchical advantage"
    Case(
        "preempt with hierarchical advantage",
        [hheld("admitted2", "q_borrowing", "2", 0)],
        incoming("2", priority=0, name="incoming"),
        "q",
        {w("admitted2", RECLAIM)},
        cqs=[hq("q", "c"), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    # preemption_test.go TestHierarchicalPreemptions: "avoid queues within nominal quota"
    Case(
        "avoid queues within nominal quota",
        [hheld("admitted1", "q_nominal", "2", -10), hheld("admitted2", "q_borrowing", "2", 0)],
        incoming("2", priority=0, name="incoming"),
        "q",
        {w("admitted2", RECLAIM)},
        cqs=[hq("q_nominal", "r", [fq("default", cpu="2")]), hq("q", "c"), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    # preemption_test.go TestHierarchicalPreemptions: "preempt multiple with hierarchical advantage"
    Case(
        "preempt multiple with hierarchical advantage",
        [hheld("admitted1", "q_borrowing", "1", 1), hheld("admitted2", "q_borrowing", "1", 2)],
        incoming("2", priority=0, name="incoming"),
        "q",
        {w("admitted1", RECLAIM), w("admitted2", RECLAIM)},
        cqs=[hq("q", "c"), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    # preemption_test.go TestHierarchicalPreemptions: "preempt in cohort and own CQ"
    Case(
        "preempt in cohort and own CQ",
        [
            hheld("admitted_not_preemptible", "q_same_cohort", "1", 1),
            # Kueue's fixture requests 1 cpu but its admission says 2.
            reserve(kwl("admitted_preemptible", priority=0, requests={"cpu": "1"}), adm("q_same_cohort", cpu=("default", "2"))),
            hheld("admitted_own_queue", "q", "1", -1),
        ],
        incoming("2", priority=1, name="incoming"),
        "q",
        {w("admitted_preemptible", WHILE_BORROWING), w("admitted_own_queue", IN_CQ)},
        cqs=[hq("q", "c", **_ANY_BWC), hq("q_same_cohort", "c")],
        cohorts=[cohort("r"), cohort("c", [fq("default", cpu="3")], parent="r")],
    ),
    # preemption_test.go TestHierarchicalPreemptions: "prefer to preempt hierarchical candidate"
    Case(
        "prefer to preempt hierarchical candidate",
        [hheld("admitted_borrowing", "q_borrowing", "1", 1), hheld("admitted_same_queue", "q", "1", -2)],
        incoming("1", priority=0, name="incoming"),
        "q",
        {w("admitted_borrowing", RECLAIM)},
        cqs=[hq("q", "c"), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    # preemption_test.go TestHierarchicalPreemptions: "forced to preempt priority candidate"
    Case(
        "forced to preempt priority candidate",
        [hheld("admitted_nominal", "q_nominal", "2", -10), hheld("admitted_same_cohort", "q_same_cohort", "2", -1)],
        incoming("2", priority=0, name="incoming"),
        "q",
        {w("admitted_same_cohort", WHILE_BORROWING)},
        cqs=[
            hq("q", "c", **_ANY_BWC),
            hq("q_nominal", "r", [fq("default", cpu="2")]),
            hq("q_same_cohort", "c"),
        ],
        cohorts=R_C2,
    ),
    # preemption_test.go TestHierarchicalPreemptions: "incoming workload fits in CQ nominal quota"
    Case(
        "incoming workload fits in CQ nominal quota",
        [hheld("admitted_borrowing", "q_borrowing", "3", 10), hheld("admitted_same_cohort", "q_same_cohort", "3", 10)],
        incoming("4", priority=0, name="incoming"),
        "q",
        {w("admitted_borrowing", RECLAIM), w("admitted_same_cohort", RECLAIM)},
        cqs=[hq("q", "c", [fq("default", cpu="4")]), hq("q_borrowing", "r"), hq("q_same_cohort", "c")],
        cohorts=R_C2,
    ),
    # preemption_test.go TestHierarchicalPreemptions: "preempt hierarchical and priority
    # candidates"
    Case(
        "preempt hierarchical and priority candidates",
        [
            hheld("admitted_borrowing", "q_borrowing", "2", -1),
            hheld("admitted_same_cohort_preemptible", "q_same_cohort", "1", -1),
            hheld("admitted_borrowing_not_preemptible", "q_borrowing", "2", 1),
        ],
        incoming("3", priority=0, name="incoming"),
        "q",
        {w("admitted_borrowing", RECLAIM), w("admitted_same_cohort_preemptible", WHILE_BORROWING)},
        cqs=[
            hq("q", "c", within=_LP, reclaim=_LP, **_SHARED_BWC),
            hq("q_borrowing", "r"),
            hq("q_same_cohort", "c"),
        ],
        cohorts=R1_C4,
    ),
    # preemption_test.go TestHierarchicalPreemptions: "preempt hierarchical candidates and inside
    # CQ"
    Case(
        "preempt hierarchical candidates and inside CQ",
        [
            hheld("admitted_borrowing", "q_borrowing", "2", -1),
            hheld("admitted_same_queue_preemptible", "q", "1", -1),
            hheld("admitted_borrowing_not_preemptible", "q_borrowing", "2", 1),
        ],
        incoming("3", priority=0, name="incoming"),
        "q",
        {w("admitted_borrowing", RECLAIM), w("admitted_same_queue_preemptible", IN_CQ)},
        cqs=[
            hq("q", "c", within=_LP, reclaim=_LP, **_SHARED_BWC),
            hq("q_borrowing", "r"),
            hq("q_same_cohort", "c"),
        ],
        cohorts=R1_C4,
    ),
    # preemption_test.go TestHierarchicalPreemptions: "reclaim nominal quota from lowest priority
    # workload, excluding non-borrowing"
    Case(
        "reclaim nominal quota from lowest priority workload, excluding non-borrowing",
        [
            hheld("admitted_borrowing_prio_8", "q_borrowing", "1", 8),
            hheld("admitted_borrowing_prio_9", "q_borrowing", "1", 9),
            hheld("admitted_borrowing_prio_10", "q_borrowing", "1", 9),
            hheld("admitted_nominal", "q_nominal", "2", -2),
        ],
        incoming("1", priority=0, name="incoming"),
        "q",
        {w("admitted_borrowing_prio_8", RECLAIM)},
        cqs=[hq("q", "c"), hq("q_borrowing", "r"), hq("q_nominal", "r", [fq("default", cpu="2")])],
        cohorts=[cohort("r"), cohort("c", [fq("default", cpu="3")], parent="r")],
    ),
    # preemption_test.go TestHierarchicalPreemptions: "infeasible preemption all available
    # workloads in pruned subtrees"
    Case(
        "infeasible preemption all available workloads in pruned subtrees",
        [
            hheld("admitted_other_1", "q_other", "1", -10),
            hheld("admitted_other_2", "q_other", "1", -10),
            hheld("admitted_same_cohort", "q_same_cohort", "2", 0),
        ],
        incoming("2", priority=0, name="incoming"),
        "q",
        set(),
        cqs=[hq("q_other", "c_other"), hq("q", "c"), hq("q_same_cohort", "c")],
        cohorts=[
            cohort("r"),
            cohort("c", [fq("default", cpu="2")], parent="r"),
            cohort("c_other", [fq("default", cpu="2")], parent="r"),
        ],
    ),
    # preemption_test.go TestHierarchicalPreemptions: "hiearchical preemption with multiple
    # resources"
    Case(
        "hiearchical preemption with multiple resources",
        [
            held_res("admitted_borrowing", "q_borrowing", {"cpu": "3", "memory": "1Gi"}, priority=0),
            held_res("admitted_same_cohort", "q_same_cohort", {"cpu": "1", "memory": "3Gi"}, priority=-2),
        ],
        incoming("2", priority=-2, name="incoming", memory="1Gi"),
        "q",
        {w("admitted_borrowing", RECLAIM)},
        assignment=cpu_and_memory(),
        cqs=[hq("q", "c"), hq("q_borrowing", "r"), hq("q_same_cohort", "c")],
        cohorts=[
            cohort("r", [fq("default", cpu="3")]),
            cohort("c", [fq("default", cpu="4", memory="4Gi")], parent="r"),
        ],
    ),
    # preemption_test.go TestHierarchicalPreemptions: "prefer to preempt evicted workloads"
    # (the evicted workload is the target; it is not preempted again, so nothing new is issued).
    Case(
        "prefer to preempt evicted workloads",
        [hheld("admitted_borrowing", "q_borrowing", "1", -10), hheld("evicted_same_cohort", "q_same_cohort", "1", -1)],
        incoming("1", priority=0, name="incoming"),
        "q",
        set(),
        cqs=[hq("q", "c", **_ANY_BWC), hq("q_borrowing", "r"), hq("q_same_cohort", "c")],
        cohorts=R_C2,
        evicting=["/evicted_same_cohort"],
    ),
    # preemption_test.go TestHierarchicalPreemptions: "respect lending limits"
    Case(
        "respect lending limits",
        [hheld("admitted_borrowing", "q_borrowing", "4", 0)],
        incoming("5", priority=-2, name="incoming"),
        "q",
        {w("admitted_borrowing", RECLAIM)},
        cqs=[hq("q", "c", [fq("default", cpu=("3", None, "2"))]), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    # preemption_test.go TestHierarchicalPreemptions: "reclaim in complex hierarchy"
    Case(
        "reclaim in complex hierarchy",
        [
            hheld("admitted_borrowing_1", "q1", "4", -6),
            hheld("admitted_borrowing_2", "q1", "4", -5),
            hheld("admitted_borrowing_3", "q2", "4", -9),
            hheld("admitted_borrowing_4", "q2", "4", -10),
            hheld("admitted_borrowing_5", "q3", "4", -4),
            hheld("admitted_borrowing_6", "q3", "3", -3),
            hheld("admitted_borrowing_7", "q4", "2", 4),
            hheld("admitted_borrowing_8", "q4", "3", 2),
        ],
        incoming("7", priority=-2, name="incoming"),
        "q5",
        {w("admitted_borrowing_1", RECLAIM), w("admitted_borrowing_4", RECLAIM)},
        cqs=[
            cluster_queue(n, cohort=co, **_ANY)  # type: ignore[arg-type]
            for n, co in (("q1", "c12"), ("q2", "c23"), ("q3", "c22"), ("q4", "c32"), ("q5", "c31"))
        ],
        cohorts=[
            cohort("r"),
            *(
                cohort(n, [fq("default", cpu="4")], parent=p)
                for n, p in (
                    ("c11", "r"),
                    ("c12", "r"),
                    ("c21", "c11"),
                    ("c22", "c11"),
                    ("c23", "c11"),
                    ("c31", "c21"),
                    ("c32", "c21"),
                )
            ),
        ],
    ),
]

ALL_CASES = PREEMPTION_CASES + HIERARCHICAL_CASES


def _engine(case: Case, *, pending: bool = False) -> Engine:
    objects: list[Obj] = [*FLAVORS, *case.cohorts, *case.cqs, *case.admitted]
    if pending:
        objects += [lq("", "lq", case.target), _queued(case.incoming)]
    engine = build_engine(objects, namespaces={"": {}})
    for key in case.evicting:
        engine.cache.evicting.add(WorkloadKey(key))
    return engine


def _queued(wl: Workload) -> Workload:
    return replace(wl, queue_name="lq")


def _params(cases: Sequence[Case], attr: str) -> list[object]:
    out = []
    for c in cases:
        reason = getattr(c, attr)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(c, id=c.name, marks=marks))
    return out


@pytest.mark.parametrize("case", _params(ALL_CASES, "xfail"))
def test_get_targets(case: Case) -> None:
    engine = _engine(case)
    snapshot = engine.cache.snapshot()
    before = snapshot.state()
    preemptor = ClassicalPreemptor()
    preemptor.oracle(snapshot)
    assignment = given_assignment(case.target, case.assignment, case.incoming)
    targets = preemptor.get_targets(make_info(case.incoming, {}), assignment, snapshot)
    issued = [(tg.workload.key, tg.reason) for tg in targets if tg.workload.key not in snapshot.evicting]
    assert key_reasons(issued) == case.want
    # Kueue: "Snapshot was modified".
    assert snapshot.state() == before


def _cycle_applies(case: Case) -> bool:
    """Whether the flavor assigner has no choice: every requested resource is covered by a
    resource group with a single flavor (then it can only pick the flavor Kueue's test gives)."""
    cq = next(c for c in case.cqs if c.name == case.target)
    for ps_ in case.incoming.pod_sets:
        for res in ps_.requests:
            rg = cq.group_for(res)
            if rg is None or len(rg.flavors) != 1:
                return False
    return True


@pytest.mark.parametrize("case", _params([c for c in ALL_CASES if _cycle_applies(c)], "cycle_xfail"))
def test_through_cycle(case: Case) -> None:
    engine = _engine(case, pending=True)
    result = engine.schedule(CYCLE)
    got = key_reasons((p.victim, p.reason) for p in result.preempted)
    # Kueue's case forces a Preempt assignment; in a cycle the assigner may find that the
    # workload fits (by borrowing) and admit it, which preempts nothing either way.
    assert got == case.want


def test_ported_case_count() -> None:
    """At least 25 preemption cases are ported (the brief's floor)."""
    assert len(ALL_CASES) >= 25
