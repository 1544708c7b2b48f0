"""A WorkloadSlice's maximum execution time: a StatefulSet's scale-up slice starts with the time
the slice it replaces used, so the budget spans the resizes (Kueue keeps one Workload per
StatefulSet); an elastic Job's slice starts its own clock, as in Kueue. Kueue has no test of
either (its StatefulSet is never sliced, and its slices carry no status): these are kqueue's."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from kqueue.api.integrations import PriorityClasses, workload_for_job
from kqueue.api.integrations.statefulset import workload_for_statefulset
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.types import EvictionReason, Workload, WorkloadKey

from .builders import key, make_cq, make_engine, make_flavor, make_workload, t

MAX_EXEC_EXCEEDED = EvictionReason.DEACTIVATED_DUE_TO_MAXIMUM_EXECUTION_TIME_EXCEEDED
LIMIT = 300


def slices(*, spans: bool, past: int = 0) -> tuple[Workload, Workload]:
    """``old`` (2 pods) admitted at 0 with ``past`` seconds from earlier admissions, and
    ``new`` (3 pods) pending to replace it; both limited to LIMIT seconds."""
    old = (
        make_workload("old").count(2).request("cpu", "1").max_exec(LIMIT).past_exec(past)
        .reserved_in("cq", "default", at=0).obj()
    )
    new = make_workload("new").count(3).request("cpu", "1").max_exec(LIMIT).created(1).obj()
    new = replace(new, replacement_for=WorkloadKey("default/old"))
    return (
        replace(old, max_execution_spans_slices=spans),
        replace(new, max_execution_spans_slices=spans),
    )


def engine_of(old: Workload, new: Workload) -> Engine:
    return make_engine(
        make_flavor("default").obj(), make_cq("cq").quota("default", cpu="8").obj(), old, new
    )


def exceeded(engine: Engine, now: float) -> list[WorkloadKey]:
    return [
        e.workload for e in engine.schedule(t(now)).evicted if e.reason == MAX_EXEC_EXCEEDED
    ]


@dataclass(frozen=True)
class Case:
    name: str
    spans: bool
    replaced_at: float
    past: int = 0
    # status.accumulatedPastExecutionTimeSeconds written with the new slice's admission (None:
    # not written, it keeps its own).
    want_written: int | None = None
    want_deadline: float = 0


CASES = [
    Case(
        "statefulset slice admitted 100s replaced: deactivated at the original deadline",
        spans=True, replaced_at=100, want_written=100, want_deadline=LIMIT,
    ),
    Case(
        "statefulset slice carries the time of its earlier admissions too",
        spans=True, replaced_at=100, past=20, want_written=120, want_deadline=LIMIT - 20,
    ),
    # Whole seconds, as Kueue's int32 conversion of an eviction's admitted time: the fraction
    # dropped moves the deadline by less than a second.
    Case(
        "statefulset slice carries whole seconds only",
        spans=True, replaced_at=100.75, want_written=100, want_deadline=LIMIT + 0.75,
    ),
    Case(
        "elastic job slice starts its own clock, as in Kueue",
        spans=False, replaced_at=100, past=20, want_written=None, want_deadline=100 + LIMIT,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_replacement_slice_budget(case: Case) -> None:
    engine = engine_of(*slices(spans=case.spans, past=case.past))
    result = engine.schedule(t(case.replaced_at))
    (admit,) = result.admitted
    assert admit.workload == key("new")
    assert [f.old for f in result.finished] == [key("old")]
    assert admit.past_execution_seconds == case.want_written
    assert type(admit.past_execution_seconds) is (int if case.spans else type(None))
    assert engine.next_deadline() == t(case.want_deadline)
    # Just before the deadline it runs on; at it, it is deactivated.
    assert exceeded(engine, case.want_deadline - 0.5) == []
    assert exceeded(engine, case.want_deadline) == [key("new")]


def test_a_rolled_back_replacement_carries_the_time_once_when_decided_again() -> None:
    old, new = slices(spans=True)
    engine = engine_of(old, new)
    (admit,) = engine.schedule(t(100)).admitted
    assert admit.past_execution_seconds == 100
    # The admission's write failed: the engine forgets it, and the controller's hook gives the
    # old slice, still running in the API, its quota back.
    engine.forget(key("new"))
    engine.upsert_workload(old)
    (again,) = engine.schedule(t(150)).admitted
    assert (again.workload, again.past_execution_seconds) == (key("new"), 150)
    assert engine.next_deadline() == t(LIMIT)


def test_an_event_seen_before_the_admission_is_written_keeps_the_carried_time() -> None:
    old, new = slices(spans=True)
    engine = engine_of(old, new)
    engine.schedule(t(100))
    # The informer delivers the slice as it was before the admission's write (a label change):
    # the assumed admission stays, and so does the time it is written with.
    engine.upsert_workload(replace(new, generation=1))
    admitted = engine.admitted_workload(key("new"))
    assert admitted is not None and admitted.assumed
    assert admitted.info.obj.past_execution_seconds == 100
    assert engine.next_deadline() == t(LIMIT)


def test_an_evicted_carried_slice_adds_its_own_run_to_the_carried_time() -> None:
    engine = engine_of(*slices(spans=True, past=20))
    engine.schedule(t(100))
    engine.evicted(key("new"), now=t(130))
    pending = engine.pending_workload(key("new"))
    assert pending is not None
    # 20 before, 100 in the old slice, 30 in this one.
    assert pending.obj.past_execution_seconds == 150


# -- which kinds carry it: their declaration, read from the Workload's controlling owner -------

PRIORITIES = PriorityClasses()
TEMPLATE: dict[str, Any] = {
    "metadata": {},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
}


def _statefulset() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "team", "uid": "sts-uid", "generation": 2,
                     "labels": {"kqueue.io/queue-name": "lq"}},
        "spec": {"replicas": 3, "template": TEMPLATE},
    }


def _elastic_job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team", "uid": "job-uid", "generation": 2,
                     "labels": {"kqueue.io/queue-name": "lq"},
                     "annotations": {"kqueue.io/elastic-job": "true"}},
        "spec": {"parallelism": 3, "template": {**TEMPLATE, "spec": {
            **TEMPLATE["spec"], "restartPolicy": "Never"}}},
    }


def test_a_statefulset_slice_carries_the_time_and_a_job_slice_does_not() -> None:
    sts = workload_for_statefulset(_statefulset(), PRIORITIES, replacement_for="team/old")
    job = workload_for_job(_elastic_job(), PRIORITIES, replacement_for="team/old")
    assert from_api.workload(sts).max_execution_spans_slices is True
    assert from_api.workload(job).max_execution_spans_slices is False
    # A Workload without a controlling owner (made by hand) starts its own clock.
    orphan = sts.model_copy(deep=True)
    for ref in orphan.metadata.owner_references:
        ref.controller = None
    assert from_api.workload(orphan).max_execution_spans_slices is False
