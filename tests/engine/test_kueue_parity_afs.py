"""Parity with Kueue's admission fair sharing scheduler tests.

Ports of ``TestScheduleForAFS`` and ``TestShouldApplyEntryPenalty``
(``pkg/scheduler/scheduler_afs_test.go``), and ``TestFsAdmission``
(``pkg/cache/queue/cluster_queue_test.go``, the head of the queue), each carrying its name. Fixtures are Kueue's: one
ClusterQueue ``cq1`` (8 cpu, 8Gi of flavor ``default``) with ``UsageBasedAdmissionFairSharing``,
LocalQueues ``lq-a``, ``lq-b``, ``lq-c`` (weight 1) and ``lq-zero`` (weight 0), half-life 10s and
sampling interval 1s. ``initialUsage`` is the ledger's consumed usage at ``now``; as in Kueue,
one cycle runs per workload, all at ``now``, and the workloads holding quota afterwards are
compared with Kueue's admitted ``wantWorkloads``.

``deleteQueue``: Kueue's test deletes the LocalQueue from the API client only (its queue manager
keeps it), so its workloads stay queued and only the weight lookup falls back to 1. The port
does the same to the engine: the LocalQueue's admission fair sharing state is forgotten, the
queue itself stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from fractions import Fraction

import pytest

from kqueue.api.quantity import Quantity
from kqueue.engine.engine import Engine
from kqueue.engine.fairness.usage_ledger import AdmissionFairSharingConfig, to_nanos
from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.types import (
    ClusterQueueName,
    ClusterQueueSpec,
    LocalQueueSpec,
    ResourceName,
    Workload,
    local_queue_key,
)

from .builders import make_flavor, q
from .parity_support import NOW, at, cluster_queue, fq, holding, kwl, lq, ps

AFS = AdmissionFairSharingConfig(
    usage_half_life=timedelta(seconds=10), usage_sampling_interval=timedelta(seconds=1)
)


def cq1(afs: bool = True) -> ClusterQueueSpec:
    return replace(
        cluster_queue("cq1", [fq("default", cpu="8", memory="8Gi")]), usage_based_admission=afs
    )


def weighted(name: str, w: str) -> LocalQueueSpec:
    return replace(lq("default", name, "cq1"), fair_weight=Fraction(w))


QUEUES = [weighted("lq-a", "1"), weighted("lq-b", "1"), weighted("lq-c", "1"),
          weighted("lq-zero", "0")]


def one(name: str, queue: str, cpu: str, created: float | None = None) -> Workload:
    return kwl(name, "default", queue=queue, created=created, pod_sets=[ps("one", 1, {"cpu": cpu})])


@dataclass
class Case:
    name: str
    workloads: list[Workload]
    want_admitted: set[str]
    initial_usage: Mapping[str, str] = field(default_factory=dict)  # LocalQueue -> cpu
    afs: bool = True
    delete_queue: str | None = None


CASES = [
    Case(
        "admits workload from less active localqueue",
        initial_usage={"lq-a": "8", "lq-b": "2"},
        workloads=[one("wl-a1", "lq-a", "8", NOW), one("wl-b1", "lq-b", "8", NOW + 1)],
        want_admitted={"default/wl-b1"},
    ),
    Case(
        "does not prioritize a zero-weight localqueue",
        initial_usage={"lq-a": "0", "lq-zero": "0"},
        workloads=[one("wl-z1", "lq-zero", "8", NOW), one("wl-a1", "lq-a", "8", NOW + 1)],
        want_admitted={"default/wl-a1"},
    ),
    Case(
        "admits workload when another LQ is deleted",
        initial_usage={"lq-a": "0", "lq-b": "0"},
        delete_queue="lq-b",
        workloads=[one("wl-a1", "lq-a", "4", NOW), one("wl-b1", "lq-b", "4", NOW)],
        want_admitted={"default/wl-a1", "default/wl-b1"},
    ),
    Case(
        "admits workload even if its localqueue was deleted",
        initial_usage={"lq-a": "0"},
        delete_queue="lq-a",
        workloads=[one("wl-a1", "lq-a", "8", NOW)],
        want_admitted={"default/wl-a1"},
    ),
    Case(
        "without AFS: classic admission decision ignores queue usage",
        afs=False,
        initial_usage={"lq-a": "8", "lq-b": "2"},
        workloads=[one("wl-a1", "lq-a", "8", NOW), one("wl-b1", "lq-b", "8", NOW + 1)],
        want_admitted={"default/wl-a1"},
    ),
    Case(
        "admits one workload from each localqueue when quota is limited",
        initial_usage={"lq-a": "4", "lq-b": "4"},
        workloads=[
            one("wl-a1", "lq-a", "4", NOW),
            one("wl-a2", "lq-a", "4", NOW + 1),
            one("wl-b1", "lq-b", "4", NOW + 2),
            one("wl-b2", "lq-b", "4", NOW + 3),
        ],
        want_admitted={"default/wl-a1", "default/wl-b1"},
    ),
    Case(
        "schedules normally when queues have equal usage",
        initial_usage={"lq-a": "2", "lq-b": "2", "lq-c": "2"},
        workloads=[one("wl-a1", "lq-a", "4"), one("wl-b1", "lq-b", "3"), one("wl-c1", "lq-c", "1")],
        want_admitted={"default/wl-a1", "default/wl-b1", "default/wl-c1"},
    ),
    Case(
        "admits workload from lq-b with uninitialized cache",
        initial_usage={"lq-a": "8"},
        workloads=[one("wl-a1", "lq-a", "8", NOW), one("wl-b1", "lq-b", "8", NOW + 1)],
        want_admitted={"default/wl-b1"},
    ),
]


def build(case: Case) -> Engine:
    engine = Engine(ClassicalPreemptor(), admission_fair_sharing=AFS if case.afs else None)
    engine.upsert_flavor(make_flavor("default").obj())
    engine.upsert_cluster_queue(cq1())
    for spec in QUEUES:
        engine.upsert_local_queue(spec)
    for name, cpu in case.initial_usage.items():
        consumed = {ResourceName("cpu"): to_nanos(q("cpu", cpu), ResourceName("cpu"))}
        engine.seed_local_queue_usage(local_queue_key("default", name), consumed, at(NOW))
    if case.delete_queue is not None and engine.afs is not None:
        engine.afs.forget(local_queue_key("default", case.delete_queue))
    for wl in case.workloads:
        engine.upsert_workload(wl)
    return engine


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_schedule_for_afs(case: Case) -> None:
    engine = build(case)
    for _ in case.workloads:
        engine.schedule(at(NOW))
    assert set(holding(engine)) == case.want_admitted


@dataclass
class PenaltyCase:
    name: str
    afs: bool
    usage_based: bool
    reserved: bool
    want: bool


PENALTY_CASES = [
    PenaltyCase("pushes for a first-pass workload on a usage-based ClusterQueue", True, True, False, True),
    PenaltyCase("skips when no AdmissionFairSharing config is set", False, True, False, False),
    PenaltyCase("skips for a ClusterQueue without usage-based admission mode", True, False, False, False),
    PenaltyCase("skips a second-pass workload that already holds a quota reservation", True, True, True, False),
]


@pytest.mark.parametrize("case", PENALTY_CASES, ids=lambda c: c.name)
def test_should_apply_entry_penalty(case: PenaltyCase) -> None:
    """Kueue's TestShouldApplyEntryPenalty, observed through the engine: after one cycle, does
    the LocalQueue carry a pending entry penalty for the workload? (A workload that already
    holds its reservation is not admitted again, so it is never charged twice.)"""
    engine = Engine(ClassicalPreemptor(), admission_fair_sharing=AFS if case.afs else None)
    engine.upsert_flavor(make_flavor("default").obj())
    engine.upsert_cluster_queue(cq1(case.usage_based))
    engine.upsert_local_queue(weighted("lq", "1"))
    wl = one("wl", "lq", "4", NOW)
    engine.upsert_workload(wl)
    if case.reserved:
        engine.schedule(at(NOW))
        engine.schedule(at(NOW))  # settles the first admission
    engine.schedule(at(NOW))
    lq_key = local_queue_key("default", "lq")
    got = engine.afs is not None and engine.afs.has_penalty(lq_key, wl.key)
    assert got == case.want


# --- Kueue's TestFsAdmission (pkg/cache/queue/cluster_queue_test.go): the head of the queue ---


@dataclass
class HeadCase:
    name: str
    mode: str | None  # spec.admissionScope.admissionMode
    lq_weights: Mapping[str, str]
    workloads: list[tuple[str, str, int]]  # (name, LocalQueue, priority)
    want: str
    # Kueue's ``&config.AdmissionFairSharing{}`` (half-life 0: the seeded usage is read as is).
    config: AdmissionFairSharingConfig | None = field(default_factory=AdmissionFairSharingConfig)
    consumed: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


GPU = "example.com/gpu"

HEAD_CASES = [
    HeadCase(
        "workloads are ordered by LQ usage, instead of priorities",
        "UsageBasedAdmissionFairSharing", {"lqA": "1", "lqB": "1"},
        [("wlA-high", "lqA", 2), ("wlB-low", "lqB", 1)], "wlB-low",
        consumed={"lqA": {"cpu": "2"}, "lqB": {"cpu": "1"}},
    ),
    HeadCase(
        "workloads are ordered by LQ usage with respect to resource weights",
        "UsageBasedAdmissionFairSharing", {"lqA": "1", "lqB": "1"},
        [("wlA-high", "lqA", 2), ("wlB-low", "lqB", 1)], "wlB-low",
        config=AdmissionFairSharingConfig(
            resource_weights={ResourceName("cpu"): Fraction(0), ResourceName(GPU): Fraction(1)}
        ),
        consumed={"lqA": {"cpu": "1", GPU: "10"}, "lqB": {"cpu": "1000", GPU: "1"}},
    ),
    HeadCase(
        "workloads are ordered by LQ usage with respect to LQs' fair sharing weights",
        "UsageBasedAdmissionFairSharing", {"lqA": "1", "lqB": "2"},
        [("wlA-high", "lqA", 2), ("wlB-low", "lqB", 1)], "wlB-low",
        consumed={"lqA": {"cpu": "10"}, "lqB": {"cpu": "6"}},
    ),
    HeadCase(
        "workloads with the same LQ usage are ordered by priority",
        "UsageBasedAdmissionFairSharing", {"lqA": "1"},
        [("wlA-low", "lqA", 1), ("wlA-high", "lqA", 2)], "wlA-high",
        consumed={"lqA": {"cpu": "10"}},
    ),
    HeadCase(
        "workloads with NoFairSharing CQ are ordered by priority",
        "NoAdmissionFairSharing", {"lqA": "1"},
        [("wlA-low", "lqA", 1), ("wlA-high", "lqA", 2)], "wlA-high",
    ),
    HeadCase(
        "workloads with no FS config are ordered by priority",
        "NoAdmissionFairSharing", {"lqA": "1"},
        [("wlA-low", "lqA", 1), ("wlA-high", "lqA", 2)], "wlA-high",
        config=None,
    ),
]


@pytest.mark.parametrize("case", HEAD_CASES, ids=lambda c: c.name)
def test_fs_admission(case: HeadCase) -> None:
    engine = Engine(ClassicalPreemptor(), admission_fair_sharing=case.config)
    spec = replace(
        cluster_queue("cq", [fq("default", cpu="8")]),
        usage_based_admission=case.mode == "UsageBasedAdmissionFairSharing",
    )
    engine.upsert_cluster_queue(spec)
    for name, w in case.lq_weights.items():
        engine.upsert_local_queue(replace(lq("default", name, "cq"), fair_weight=Fraction(w)))
    for name, resources in case.consumed.items():
        consumed = {ResourceName(r): Quantity(v).nanos for r, v in resources.items()}
        engine.seed_local_queue_usage(local_queue_key("default", name), consumed, at(NOW))
    for name, queue, priority in case.workloads:
        engine.upsert_workload(kwl(name, "default", queue=queue, priority=priority))
    head = engine.queued_in_order(ClusterQueueName("cq"))[0]
    assert head.key == f"default/{case.want}"
