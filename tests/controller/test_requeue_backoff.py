"""Requeued after a PodsReady timeout, as Kueue writes it: False (PodsReadyTimeout) while the
requeue backoff runs, True (BackoffFinished) once ``requeueAt`` has passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kqueue.api.v1alpha1 import RequeueState, Workload, parse_object
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.kube import MODIFY_ATTEMPTS, Kube
from kqueue.controller.readiness import ReadinessWatcher
from kqueue.controller.resources import WORKLOADS
from kqueue.controller.workqueue import Requeue
from kqueue.engine import types as t
from kqueue.engine.cycle import Evict
from kqueue.engine.engine import Engine
from kqueue.engine.readiness import PodsReadyConfig
from tests.api.test_validation import workload
from tests.controller.fake_apiserver import FakeCluster

Obj = dict[str, Any]

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEY = "team-a/job-a"
MESSAGE = f"Exceeded the PodsReady timeout {KEY}"
BASE_S = 5


def _admitted() -> Workload:
    wl = parse_object(workload(reserved=True))
    assert isinstance(wl, Workload)
    return wl


def _released(reason: str, *, requeue_at: datetime | None) -> Workload:
    evicted = workload_status.evict(_admitted(), reason, MESSAGE, T0)
    assert evicted is not None
    if requeue_at is not None:
        evicted.status.requeue_state = RequeueState(count=1, requeue_at=requeue_at)
    released = workload_status.release(evicted, T0)
    assert released is not None
    return released


def _requeued(wl: Workload) -> tuple[str, str]:
    cond = wl.condition(c.REQUEUED)
    assert cond is not None
    return cond.status, cond.reason


def test_released_after_a_pods_ready_timeout_is_not_requeued_yet() -> None:
    wl = _released(c.EVICTED_BY_PODS_READY_TIMEOUT, requeue_at=T0 + timedelta(seconds=BASE_S))
    assert _requeued(wl) == ("False", c.EVICTED_BY_PODS_READY_TIMEOUT)
    assert wl.condition(c.REQUEUED).message == MESSAGE  # type: ignore[union-attr]
    # Any other eviction requeues at once, as before.
    preempted = _released(c.EVICTED_BY_PREEMPTION, requeue_at=None)
    assert _requeued(preempted) == ("True", c.EVICTED_BY_PREEMPTION)


def test_backoff_finished_only_once_requeue_at_passed() -> None:
    at = T0 + timedelta(seconds=BASE_S)
    wl = _released(c.EVICTED_BY_PODS_READY_TIMEOUT, requeue_at=at)
    assert workload_status.backoff_end(wl, T0, unwritten=timedelta(0)) == at
    assert workload_status.backoff_finished(wl, at - timedelta(seconds=1)) is None
    done = workload_status.backoff_finished(wl, at)
    assert done is not None
    assert _requeued(done) == ("True", workload_status.BACKOFF_FINISHED)
    assert done.condition(c.REQUEUED).message == workload_status.BACKOFF_FINISHED_MESSAGE  # type: ignore[union-attr]
    assert done.status.requeue_state is not None
    assert (done.status.requeue_state.count, done.status.requeue_state.requeue_at) == (1, None)
    # Once over, nothing more to write.
    assert workload_status.backoff_finished(done, at + timedelta(hours=1)) is None


def test_an_unwritten_requeue_at_lasts_the_given_backoff_from_the_transition() -> None:
    wl = _released(c.EVICTED_BY_PODS_READY_TIMEOUT, requeue_at=None)
    base = timedelta(seconds=BASE_S)
    assert workload_status.backoff_end(wl, T0, unwritten=base) == T0 + base
    assert workload_status.backoff_finished(wl, T0 + base - timedelta(seconds=1), unwritten=base) is None
    assert workload_status.backoff_finished(wl, T0 + base, unwritten=base) is not None


def test_an_admission_declares_the_backoff_over_itself() -> None:
    at = T0 + timedelta(seconds=BASE_S)
    wl = _released(c.EVICTED_BY_PODS_READY_TIMEOUT, requeue_at=at)
    admission = t.Admission(
        t.ClusterQueueName("team-a"),
        (t.PodSetAssignment(t.PodSetName("main"), {}, {}, 2),),
        at,
    )
    admitted = workload_status.admit(wl, admission, at)
    assert _requeued(admitted) == ("True", workload_status.BACKOFF_FINISHED)
    assert admitted.status.requeue_state is not None
    assert admitted.status.requeue_state.requeue_at is None


class _Store:
    def __init__(self, wl: Workload) -> None:
        self.wl = wl

    def get(self, key: str) -> Workload | None:
        return self.wl if key == KEY else None


class _Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, _obj: Obj, type_: str, reason: str, message: str) -> None:
        self.recorded.append((type_, reason, message))


async def test_the_watcher_writes_the_transition_when_the_backoff_ends(
    cluster: FakeCluster,
) -> None:
    at = T0 + timedelta(seconds=BASE_S)
    # The informers' copy is the API server's (its resourceVersion too).
    stored = cluster.server.add(
        WORKLOADS, _released(c.EVICTED_BY_PODS_READY_TIMEOUT, requeue_at=at).to_dict()
    )
    wl = Workload.model_validate(stored)
    now = [T0 + timedelta(seconds=2)]
    events, triggered = _Events(), []
    engine = Engine(pods_ready=PodsReadyConfig(backoff_base_seconds=BASE_S))
    watcher = ReadinessWatcher(
        engine=lambda: engine,
        workloads=_Store(wl),  # type: ignore[arg-type]
        pods=_Store(wl),  # type: ignore[arg-type]
        kube=cluster.kube,
        events=events,  # type: ignore[arg-type]
        trigger=lambda: triggered.append(True),
        now=lambda: now[0],
    )
    # During the backoff: nothing written, the key comes back when it ends.
    assert await watcher(KEY) == Requeue(after=3.0)
    assert cluster.server.writes == [] and events.recorded == []
    now[0] = at
    assert await watcher(KEY) is None
    [put] = cluster.server.requests_to("PUT", WORKLOADS, subresource="status")
    assert put.ok
    done = Workload.model_validate(put.body)
    assert _requeued(done) == ("True", workload_status.BACKOFF_FINISHED)
    assert done.status.requeue_state is not None and done.status.requeue_state.requeue_at is None
    assert events.recorded and events.recorded[0][:2] == ("Normal", c.REQUEUED)
    assert workload_status.BACKOFF_FINISHED_MESSAGE in events.recorded[0][2]
    assert triggered == [True]


async def test_a_failed_requeue_state_write_does_not_stop_the_scheduler(
    cluster: FakeCluster,
) -> None:
    # The after-cycle hook runs inside the scheduler loop: a write that times out (the client
    # timeout is bounded by the leader's renew deadline) is logged, not raised.
    cluster.server.add(WORKLOADS, _admitted().to_dict())
    cluster.server.delay["GET"] = 0.5  # the API server does not answer in time
    watcher = ReadinessWatcher(
        engine=lambda: Engine(),
        workloads=_Store(_admitted()),  # type: ignore[arg-type]
        pods=_Store(_admitted()),  # type: ignore[arg-type]
        kube=Kube(cluster.api, timeout=0.05),
        events=_Events(),  # type: ignore[arg-type]
        trigger=lambda: None,
        now=lambda: T0,
    )
    evict = Evict(
        t.WorkloadKey(KEY), t.ClusterQueueName("team-a"), t.EvictionReason.PODS_READY_TIMEOUT,
        MESSAGE, requeue_at=T0 + timedelta(seconds=BASE_S), requeue_count=1,
    )
    await watcher._write_timeout(evict)
    # Read again after each lost answer (with pauses), then given up: logged, not raised. The
    # fake server records a GET when it starts serving it; on a loaded machine the client's
    # 50 ms can run out before the last one got there, so up to MODIFY_ATTEMPTS are seen.
    assert 2 <= len(cluster.server.requests_to("GET", WORKLOADS)) <= MODIFY_ATTEMPTS
    assert cluster.server.writes == []


def _admitted_for(seconds: int, *, accumulated: int | None, reason: str) -> Workload:
    wl = _released(reason, requeue_at=None)
    doc = wl.to_dict()
    doc["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": []}
    doc["status"]["conditions"] = [
        {"type": c.ADMITTED, "status": "True", "reason": "Admitted", "message": "admitted",
         "lastTransitionTime": (T0 - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")},
        {"type": c.EVICTED, "status": "True", "reason": reason, "message": "evicted",
         "lastTransitionTime": T0.strftime("%Y-%m-%dT%H:%M:%SZ")},
    ]
    if accumulated is not None:
        doc["status"]["accumulatedPastExecutionTimeSeconds"] = accumulated
    out = Workload.model_validate(doc)
    return out


def test_release_adds_the_admitted_time_to_the_accumulated_execution_time() -> None:
    wl = _admitted_for(40, accumulated=15, reason=c.EVICTED_BY_PREEMPTION)
    released = workload_status.release(wl, T0)
    assert released is not None
    assert released.status.accumulated_past_execution_time_seconds == 55


def test_release_after_exceeding_the_maximum_execution_time_starts_the_count_over() -> None:
    wl = _admitted_for(40, accumulated=15, reason=c.EVICTED_BY_MAXIMUM_EXECUTION_TIME)
    released = workload_status.release(wl, T0)
    assert released is not None
    assert released.status.accumulated_past_execution_time_seconds is None
