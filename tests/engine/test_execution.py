"""maximumExecutionTimeSeconds in the engine: deadlines, deactivation, accumulated time.

Kueue's cases are ported under their names: the workload controller's
("admitted workload with max execution time", "... - expired"), ``SyncAdmittedCondition``'s
("reservation lost", "reservation lost with past admitted time (set)" / "(add)") and the
integration specs ("should deactivate the workload when the time expires", "... with multiple
admissions").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.api.v1alpha1 import Workload as ApiWorkload
from kqueue.api.v1alpha1 import parse_object
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.execution import accumulated, admitted_seconds
from kqueue.engine.readiness import PodsReadyConfig, Readiness
from kqueue.engine.types import EvictionReason, Workload

from .builders import admitted_flavors, key, make_cq, make_engine, make_flavor, make_workload, t

F = make_flavor("default").obj()
CQ = make_cq("cq").quota("default", cpu="4").obj()
MAX_EXEC_EXCEEDED = EvictionReason.DEACTIVATED_DUE_TO_MAXIMUM_EXECUTION_TIME_EXCEEDED


def admitted_wl(
    *, max_exec: int | None, past: int = 0, at: float = 0, active: bool = True
) -> Workload:
    b = make_workload("wl").request("cpu", "1")
    if max_exec is not None:
        b = b.max_exec(max_exec)
    if not active:
        b = b.inactive()
    return b.past_exec(past).reserved_in("cq", "default", at=at).obj()


# -- when a workload exceeds its budget ---------------------------------------------------------


@dataclass(frozen=True)
class DeadlineCase:
    name: str
    max_exec: int | None
    admitted_at: float
    now: float
    past: int = 0
    active: bool = True
    want_evicted: bool = False
    # next_deadline() after the cycle at ``now`` (None: nothing to wake up for).
    want_deadline: float | None = None


DEADLINE_CASES = [
    # Kueue: admitted a minute ago with 120s: requeued after one minute.
    DeadlineCase(
        "admitted workload with max execution time",
        max_exec=120, admitted_at=940, now=1000, want_deadline=1060,
    ),
    # Kueue: admitted two minutes ago with 60s: DeactivationTarget set.
    DeadlineCase(
        "admitted workload with max execution time - expired",
        max_exec=60, admitted_at=880, now=1000, want_evicted=True,
    ),
    DeadlineCase("no maximum execution time", max_exec=None, admitted_at=0, now=10**6),
    # Kueue keeps a workload only while its remaining time is > 0.
    DeadlineCase("exactly at the deadline", max_exec=60, admitted_at=0, now=60, want_evicted=True),
    DeadlineCase(
        "one second before the deadline", max_exec=60, admitted_at=0, now=59, want_deadline=60
    ),
    DeadlineCase(
        "accumulated past time counts",
        max_exec=60, past=50, admitted_at=100, now=110, want_evicted=True,
    ),
    DeadlineCase(
        "accumulated past time moves the deadline",
        max_exec=60, past=50, admitted_at=100, now=105, want_deadline=110,
    ),
    # E.g. seen after a restart: the budget was used up before this admission.
    DeadlineCase(
        "accumulated past time beyond the maximum",
        max_exec=60, past=100, admitted_at=100, now=100, want_evicted=True,
    ),
    # spec.active false: drained with reason Deactivated, not timed.
    DeadlineCase(
        "deactivated by its owner", max_exec=60, admitted_at=0, now=100, active=False
    ),
]


@pytest.mark.parametrize("case", DEADLINE_CASES, ids=[c.name for c in DEADLINE_CASES])
def test_deadline(case: DeadlineCase) -> None:
    engine = make_engine(
        F, CQ, admitted_wl(
            max_exec=case.max_exec, past=case.past, at=case.admitted_at, active=case.active
        )
    )
    result = engine.schedule(t(case.now))
    exceeded = [e for e in result.evicted if e.reason == MAX_EXEC_EXCEEDED]
    assert bool(exceeded) == case.want_evicted
    if case.want_evicted:
        (ev,) = exceeded
        assert (ev.workload, ev.cluster_queue, ev.deactivate) == (key("wl"), "cq", True)
        assert (ev.requeue_at, ev.requeue_count) == (None, None)
        # Being evicted: not decided twice.
        assert engine.schedule(t(case.now + 1)).evicted == ()
        assert engine.next_deadline() is None
    else:
        want = None if case.want_deadline is None else t(case.want_deadline)
        assert engine.next_deadline() == want


def test_the_message_gives_the_numbers_and_what_to_do() -> None:
    engine = make_engine(F, CQ, admitted_wl(max_exec=600, past=540, at=1000))
    (ev,) = engine.schedule(t(1061.5)).evicted
    assert ev.message == (
        "The workload is deactivated due to exceeding the maximum execution time: it exceeded "
        "its maximum execution time of 600s; admitted for 601s in total (540s before its last "
        "eviction, 61s since); set spec.active to true to queue it again with a new budget of "
        "600s, or raise the limit first (spec.maximumExecutionTimeSeconds, from the "
        "kqueue.io/max-exec-time-seconds label)"
    )


# -- accumulated time ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AccumulatedCase:
    name: str
    past: int
    admitted_at: float
    released_at: float
    want: int


ACCUMULATED_CASES = [
    # Kueue's SyncAdmittedCondition cases: Admitted=True one second before the release.
    AccumulatedCase("reservation lost", past=0, admitted_at=99, released_at=100, want=1),
    AccumulatedCase(
        "reservation lost with past admitted time (set)",
        past=0, admitted_at=99, released_at=100, want=1,
    ),
    AccumulatedCase(
        "reservation lost with past admitted time (add)",
        past=1, admitted_at=99, released_at=100, want=2,
    ),
    # int32(now.Sub(t).Seconds()) truncates.
    AccumulatedCase(
        "fractions of a second are dropped", past=10, admitted_at=0, released_at=1.9, want=11
    ),
    AccumulatedCase(
        "a release stamped before the admission adds nothing",
        past=5, admitted_at=10, released_at=9, want=5,
    ),
]


@pytest.mark.parametrize("case", ACCUMULATED_CASES, ids=[c.name for c in ACCUMULATED_CASES])
def test_an_eviction_adds_the_admitted_time(case: AccumulatedCase) -> None:
    wl = admitted_wl(max_exec=3600, past=case.past, at=case.admitted_at)
    assert accumulated(wl, t(case.admitted_at), t(case.released_at)) == case.want
    engine = make_engine(F, CQ, wl)
    engine.evicted(key("wl"), now=t(case.released_at))
    pending = engine.pending_workload(key("wl"))
    assert pending is not None
    assert pending.obj.past_execution_seconds == case.want
    assert pending.obj.active


def test_admitted_seconds_are_whole_and_never_negative() -> None:
    assert admitted_seconds(t(0), t(59.999)) == 59
    assert admitted_seconds(t(10), t(0)) == 0


# -- through the engine -------------------------------------------------------------------------


def test_should_deactivate_the_workload_when_the_time_expires() -> None:
    engine = make_engine(F, CQ, make_workload("wl").request("cpu", "1").max_exec(2).obj())
    assert list(admitted_flavors(engine.schedule(t(0)))) == ["wl"]
    assert engine.next_deadline() == t(2)
    assert engine.schedule(t(1)).evicted == ()
    (ev,) = engine.schedule(t(2)).evicted
    assert (ev.reason, ev.deactivate) == (MAX_EXEC_EXCEEDED, True)
    assert str(ev.reason) == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert ev.message.startswith(
        "The workload is deactivated due to exceeding the maximum execution time"
    )
    engine.evicted(key("wl"))
    pending = engine.pending_workload(key("wl"))
    assert pending is not None
    assert not pending.obj.active
    # Deactivated for exceeding it: the accumulated time starts over.
    assert pending.obj.past_execution_seconds == 0
    details = engine.explain(key("wl"))
    assert details is not None and details.message == "The workload is deactivated"
    assert engine.schedule(t(1000)).admitted == ()
    assert engine.next_deadline() is None


def test_should_deactivate_the_workload_when_the_time_expires_with_multiple_admissions() -> None:
    engine = make_engine(F, CQ, make_workload("wl").request("cpu", "1").max_exec(30).obj())
    engine.schedule(t(0))
    # Evicted after 12.5s for another reason (preempted, say): 12 whole seconds are used.
    engine.evicted(key("wl"), now=t(12.5))
    pending = engine.pending_workload(key("wl"))
    assert pending is not None and pending.obj.past_execution_seconds == 12
    assert list(admitted_flavors(engine.schedule(t(100)))) == ["wl"]
    assert engine.next_deadline() == t(118)
    assert engine.schedule(t(117)).evicted == ()
    (ev,) = engine.schedule(t(118)).evicted
    assert ev.reason == MAX_EXEC_EXCEEDED
    assert "admitted for 30s in total (12s before its last eviction, 18s since)" in ev.message


def test_evicted_defaults_to_the_time_of_the_last_cycle() -> None:
    engine = make_engine(F, CQ, make_workload("wl").request("cpu", "1").max_exec(30).obj())
    engine.schedule(t(0))
    engine.schedule(t(7))
    engine.evicted(key("wl"))
    pending = engine.pending_workload(key("wl"))
    assert pending is not None and pending.obj.past_execution_seconds == 7


def test_a_reactivated_workload_gets_its_whole_budget_again() -> None:
    engine = make_engine(F, CQ, make_workload("wl").request("cpu", "1").max_exec(60).obj())
    engine.schedule(t(0))
    engine.schedule(t(60))
    engine.evicted(key("wl"))
    pending = engine.pending_workload(key("wl"))
    assert pending is not None
    # Its owner sets spec.active true again.
    engine.upsert_workload(replace(pending.obj, active=True, generation=1))
    assert list(admitted_flavors(engine.schedule(t(200)))) == ["wl"]
    assert engine.next_deadline() == t(260)


def test_a_release_seen_before_spec_active_false_does_not_readmit() -> None:
    """The controller's order: the eviction is written, then the Job stops and the quota is
    released; spec.active false may land after the release. Meanwhile the workload must not be
    admitted again."""
    wl = make_workload("wl").request("cpu", "1").max_exec(60)
    engine = make_engine(F, CQ, wl.reserved_in("cq", "default", at=0).obj())
    (ev,) = engine.schedule(t(60)).evicted
    assert ev.deactivate
    engine.upsert_workload(make_workload("wl").request("cpu", "1").max_exec(60).obj())
    assert engine.schedule(t(61)).admitted == ()
    details = engine.explain(key("wl"))
    assert details is not None and details.message == "The workload is deactivated"


def test_an_eviction_given_up_is_decided_again() -> None:
    engine = make_engine(F, CQ, admitted_wl(max_exec=60, at=0))
    (first,) = engine.schedule(t(60)).evicted
    # The controller could not write it (the engine no longer counts it as going).
    engine.cache.evicting.discard(key("wl"))
    (again,) = engine.schedule(t(61)).evicted
    assert (again.workload, again.reason) == (first.workload, MAX_EXEC_EXCEEDED)


def test_finished_workloads_are_forgotten() -> None:
    engine = make_engine(F, CQ, admitted_wl(max_exec=60, at=0))
    engine.schedule(t(60))
    engine.finish(key("wl"))
    assert engine.next_deadline() is None
    assert engine.holds_quota(key("wl")) is False


def test_deactivation_goes_before_a_pods_ready_timeout_due_at_the_same_time() -> None:
    """Requeued with a backoff, the workload would only be deactivated at its next admission."""
    engine = make_engine(F, CQ)
    engine.readiness = Readiness(PodsReadyConfig(timeout=timedelta(seconds=60)))
    engine.upsert_workload(admitted_wl(max_exec=60, at=0))
    (ev,) = engine.schedule(t(60)).evicted
    assert (ev.reason, ev.deactivate, ev.requeue_count) == (MAX_EXEC_EXCEEDED, True, None)
    assert engine.readiness.count(key("wl")) == 0


def test_preempted_workloads_accumulate_their_time() -> None:
    """A victim's admitted time counts toward its budget when it is admitted again."""
    cq = make_cq("cq").quota("default", cpu="1").preemption(within="LowerPriority").obj()
    low = make_workload("low").request("cpu", "1").priority(0).max_exec(100)
    engine = make_engine(F, cq, low.reserved_in("cq", "default", at=0).obj())
    engine.upsert_workload(make_workload("high").request("cpu", "1").priority(10).created(5).obj())
    r = engine.schedule(t(40))
    assert [p.victim for p in r.preempted] == [key("low")]
    engine.evicted(key("low"), now=t(41))
    pending = engine.pending_workload(key("low"))
    assert pending is not None and pending.obj.past_execution_seconds == 41


# -- property -----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(min_value=1, max_value=120),
    steps=st.lists(
        st.tuples(st.integers(min_value=1, max_value=15), st.booleans()), min_size=1, max_size=40
    ),
)
def test_never_admitted_longer_than_its_budget_plus_one_tick(
    limit: int, steps: list[tuple[int, bool]]
) -> None:
    """Driven every ``tick`` seconds and evicted now and then for other reasons, a workload is
    admitted at most ``limit + tick`` seconds in total, is deactivated once it used its budget,
    and the engine's accumulated time matches the evictions that happened."""
    engine: Engine = make_engine(
        F, CQ, make_workload("wl").request("cpu", "1").max_exec(limit).obj()
    )
    now = 0
    since: int | None = None  # admitted since
    used = 0  # seconds admitted in completed admissions
    deactivated = False
    last_tick = 0  # time since the previous cycle
    for tick, evict in steps:
        result = engine.schedule(t(now))
        for ev in result.evicted:
            assert ev.reason == MAX_EXEC_EXCEEDED
            assert since is not None
            assert limit <= used + (now - since) <= limit + last_tick
            engine.evicted(ev.workload, now=t(now))
            since, used, deactivated = None, 0, True
        if [a.workload for a in result.admitted] == [key("wl")]:
            assert not deactivated
            since = now
        now += tick
        last_tick = tick
        if since is not None and evict and now - since < limit - used:
            # Evicted for another reason before its deadline (never at it: then the engine
            # decides in the next cycle).
            engine.evicted(key("wl"), now=t(now))
            used += now - since
            since = None
            pending = engine.pending_workload(key("wl"))
            assert pending is not None and pending.obj.past_execution_seconds == used
    if since is not None:
        # Still admitted: within budget until the next cycle decides.
        assert used + (now - since) <= limit + last_tick
    if deactivated:
        pending = engine.pending_workload(key("wl"))
        assert pending is not None and not pending.obj.active


def test_from_api_reads_the_limit_and_the_accumulated_time_after_a_restart() -> None:
    """A Workload as the API holds it after a restart: admitted 30s ago with 50s used before,
    limit 100s: 20s are left."""
    api = parse_object(
        {
            "apiVersion": "kqueue.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "wl", "namespace": "default"},
            "spec": {
                "queueName": "lq",
                "maximumExecutionTimeSeconds": 100,
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "c", "resources": {"requests": {"cpu": "1"}}}
                                ]
                            }
                        },
                    }
                ],
            },
            "status": {
                "accumulatedPastExecutionTimeSeconds": 50,
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [
                        {"name": "main", "flavors": {"cpu": "default"},
                         "resourceUsage": {"cpu": "1"}, "count": 1}
                    ],
                },
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                     "message": "", "lastTransitionTime": "1970-01-01T00:16:40Z"},
                    {"type": "Admitted", "status": "True", "reason": "Admitted",
                     "message": "", "lastTransitionTime": "1970-01-01T00:16:40Z"},
                ],
            },
        }
    )
    assert isinstance(api, ApiWorkload)
    wl = from_api.workload(api)
    assert (wl.max_execution_seconds, wl.past_execution_seconds) == (100, 50)
    engine = make_engine(F, CQ)
    from_api.apply_workload(engine, api)
    assert engine.schedule(t(1030)).evicted == ()
    assert engine.next_deadline() == t(1050)
    (ev,) = engine.schedule(t(1050)).evicted
    assert ev.reason == MAX_EXEC_EXCEEDED
