"""Gangs and readiness: the pod-group barrier, waitForPodsReady timeouts, backoff, deactivation."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from kqueue.api.config import RequeuingStrategy, WaitForPodsReady
from kqueue.engine.engine import Engine
from kqueue.engine.gang import Barrier
from kqueue.engine.readiness import PodsReadyConfig, Readiness, backoff
from kqueue.engine.types import EvictionReason, PendingReason, Workload
from kqueue.engine.workload import AdmittedWorkload, make_info

from .builders import (
    admitted_flavors,
    key,
    make_cq,
    make_engine,
    make_flavor,
    make_workload,
    t,
)


def admitted(name: str, at: float = 0) -> AdmittedWorkload:
    wl = make_workload(name).request("cpu", "1").reserved_in("cq", "default", at=at).obj()
    assert wl.admission is not None
    return AdmittedWorkload.of(make_info(wl, {}), wl.admission)


# -- backoff ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "seconds"),
    [(1, 60), (2, 120), (3, 240), (4, 480), (5, 960), (6, 1920), (7, 3600), (20, 3600)],
)
def test_backoff_doubles_from_the_base_and_is_capped(count: int, seconds: int) -> None:
    assert backoff(count, 60, 3600) == timedelta(seconds=seconds)


def test_config_from_the_controller_configuration() -> None:
    assert PodsReadyConfig.from_config(WaitForPodsReady()) is None
    cfg = PodsReadyConfig.from_config(
        WaitForPodsReady(
            enable=True,
            timeout=timedelta(minutes=2),
            requeuing_strategy=RequeuingStrategy(
                backoff_base_seconds=10, backoff_max_seconds=100, backoff_limit_count=3
            ),
        )
    )
    assert cfg == PodsReadyConfig(
        timeout=timedelta(minutes=2),
        backoff_base_seconds=10,
        backoff_max_seconds=100,
        backoff_limit_count=3,
        block_admission=True,
    )


# -- timers -----------------------------------------------------------------------------------


def test_timeout_counts_from_admission_and_stops_when_ready() -> None:
    r = Readiness(PodsReadyConfig(timeout=timedelta(seconds=300)))
    a, b = admitted("a", at=0), admitted("b", at=100)
    wls = {a.key: a, b.key: b}
    assert r.next_deadline(wls, set()) == t(300)
    r.pods_ready(a.key, True, t(10))
    assert r.next_deadline(wls, set()) == t(400)
    assert r.expired(wls, set(), t(399)) == []
    (timeout,) = r.expired(wls, set(), t(400))
    assert timeout.workload == key("b")
    assert timeout.reason == EvictionReason.PODS_READY_TIMEOUT
    assert timeout.message == "Exceeded the PodsReady timeout default/b"
    assert (timeout.requeue_count, timeout.requeue_at, timeout.deactivate) == (1, t(460), False)


def test_recovery_timeout_after_pods_stop_being_ready() -> None:
    r = Readiness(
        PodsReadyConfig(timeout=timedelta(seconds=300), recovery_timeout=timedelta(seconds=30))
    )
    a = admitted("a")
    wls = {a.key: a}
    r.pods_ready(a.key, True, t(10))
    assert r.next_deadline(wls, set()) is None
    r.pods_ready(a.key, False, t(1000))
    assert r.next_deadline(wls, set()) == t(1030)
    r.pods_ready(a.key, True, t(1020))
    assert r.next_deadline(wls, set()) is None


def test_no_recovery_timeout_means_no_eviction_after_being_ready() -> None:
    r = Readiness(PodsReadyConfig(timeout=timedelta(seconds=300)))
    a = admitted("a")
    r.pods_ready(a.key, True, t(10))
    r.pods_ready(a.key, False, t(20))
    assert r.expired({a.key: a}, set(), t(10_000)) == []


def test_disabled_never_times_out() -> None:
    r = Readiness(None)
    a = admitted("a")
    assert r.expired({a.key: a}, set(), t(10_000)) == []
    assert r.next_deadline({a.key: a}, set()) is None


def test_workloads_being_evicted_do_not_time_out() -> None:
    r = Readiness(PodsReadyConfig(timeout=timedelta(seconds=1)))
    a = admitted("a")
    assert r.expired({a.key: a}, {a.key}, t(100)) == []


def test_backoff_limit_counts_timeouts_then_deactivates() -> None:
    r = Readiness(PodsReadyConfig(timeout=timedelta(seconds=10), backoff_limit_count=2))
    a = admitted("a")
    wls = {a.key: a}
    seen = []
    for now in (10, 20, 30):
        (timeout,) = r.expired(wls, set(), t(now))
        seen.append((timeout.reason, timeout.requeue_count, timeout.deactivate))
        r.after_eviction(a.key)
    assert seen == [
        (EvictionReason.PODS_READY_TIMEOUT, 1, False),
        (EvictionReason.PODS_READY_TIMEOUT, 2, False),
        (EvictionReason.DEACTIVATED, 2, True),
    ]


def test_an_undone_timeout_is_decided_again_with_the_same_count() -> None:
    # The eviction of a decided timeout was never written: the next decision must not count
    # it, or a workload is deactivated before backoffLimitCount requeues really happened.
    r = Readiness(PodsReadyConfig(timeout=timedelta(seconds=10), backoff_limit_count=1))
    a = admitted("a")
    wls = {a.key: a}
    (first,) = r.expired(wls, set(), t(10))
    assert (first.requeue_count, first.deactivate) == (1, False)
    r.undo_timeout(a.key, first.requeue_count, first.deactivate)
    assert r.count(a.key) == 0
    # Nothing to requeue with: no eviction happened.
    assert r.after_eviction(a.key) is None
    (again,) = r.expired(wls, set(), t(11))
    assert (again.reason, again.requeue_count, again.deactivate) == (
        EvictionReason.PODS_READY_TIMEOUT, 1, False
    )
    assert r.count(a.key) == 1
    r.after_eviction(a.key)
    # The limit is reached only by evictions that happened; undoing a deactivation leaves the
    # count as it was.
    (deactivated,) = r.expired(wls, set(), t(30))
    assert (deactivated.requeue_count, deactivated.deactivate) == (1, True)
    r.undo_timeout(a.key, deactivated.requeue_count, deactivated.deactivate)
    assert r.count(a.key) == 1
    assert r.after_eviction(a.key) is None


def test_undoing_a_timeout_keeps_a_count_learnt_since() -> None:
    r = Readiness(PodsReadyConfig(timeout=timedelta(seconds=10)))
    a = admitted("a")
    (timeout,) = r.expired({a.key: a}, set(), t(10))
    r.known_count(a.key, 3)  # the Workload's status says more requeues happened
    r.undo_timeout(a.key, timeout.requeue_count, timeout.deactivate)
    assert r.count(a.key) == 3


# -- the barrier ------------------------------------------------------------------------------


def test_barrier_gates_until_the_group_is_complete() -> None:
    barrier = Barrier()
    info = make_info(make_workload("g").obj(), {})
    assert barrier.gate(info) is None
    assert barrier.set(info.key, 2, 4)
    blocked = barrier.gate(info)
    assert blocked is not None
    assert blocked.message == "Waiting for all pods of the group to be created: 2 of 4 pods exist"
    assert not barrier.set(info.key, 3, 4)
    assert barrier.set(info.key, 4, 4)
    assert barrier.gate(info) is None


# -- through the engine -----------------------------------------------------------------------

F = make_flavor("default").obj()
CQ = make_cq("cq").quota("default", cpu="4").obj()


def ready_engine(config: PodsReadyConfig, *workloads: Workload) -> Engine:
    engine = make_engine(F, CQ)
    engine.readiness = Readiness(config)
    for wl in workloads:
        engine.upsert_workload(wl)
    return engine


def test_pods_ready_timeout_evicts_and_requeues_with_backoff_60s_120s_capped() -> None:
    cfg = PodsReadyConfig(
        timeout=timedelta(seconds=300), backoff_max_seconds=200, block_admission=False
    )
    engine = ready_engine(cfg, make_workload("w").request("cpu", "2").obj())
    assert list(admitted_flavors(engine.schedule(t(1)))) == ["w"]
    assert engine.next_deadline() == t(301)
    assert engine.schedule(t(300)).evicted == ()
    waits = []
    now = 301.0
    for attempt in range(1, 5):
        r = engine.schedule(t(now))
        (ev,) = r.evicted
        assert (ev.workload, ev.reason, ev.deactivate) == (
            key("w"), EvictionReason.PODS_READY_TIMEOUT, False
        )
        assert ev.message == "Exceeded the PodsReady timeout default/w"
        assert ev.requeue_count == attempt
        assert ev.requeue_at is not None
        waits.append((ev.requeue_at - t(now)).total_seconds())
        # No second eviction while the first is under way.
        assert engine.schedule(t(now + 1)).evicted == ()
        engine.evicted(key("w"))
        details = engine.explain(key("w"))
        assert details is not None and "requeue backoff" in details.message
        assert engine.next_deadline() == ev.requeue_at
        back = (ev.requeue_at - t(0)).total_seconds()
        assert engine.schedule(t(back - 1)).admitted == ()
        assert list(admitted_flavors(engine.schedule(t(back)))) == ["w"]
        now = back + 300
    assert waits == [60, 120, 200, 200]


def test_ready_pods_stop_the_timer() -> None:
    cfg = PodsReadyConfig(timeout=timedelta(seconds=300))
    engine = ready_engine(cfg, make_workload("w").request("cpu", "2").obj())
    engine.schedule(t(1))
    engine.pods_ready(key("w"), True, t(100))
    assert engine.next_deadline() is None
    assert engine.schedule(t(10_000)).evicted == ()


def test_limit_deactivated() -> None:
    """backoffLimitCount reached: the workload is evicted as Deactivated and stays out."""
    cfg = PodsReadyConfig(timeout=timedelta(seconds=10), backoff_limit_count=1)
    engine = ready_engine(cfg, make_workload("w").request("cpu", "2").obj())
    engine.schedule(t(0))
    (first,) = engine.schedule(t(10)).evicted
    assert (first.reason, first.requeue_count) == (EvictionReason.PODS_READY_TIMEOUT, 1)
    engine.evicted(key("w"))
    assert list(admitted_flavors(engine.schedule(t(70)))) == ["w"]
    (second,) = engine.schedule(t(80)).evicted
    assert (second.reason, second.deactivate, second.requeue_at) == (
        EvictionReason.DEACTIVATED, True, None
    )
    assert second.message == (
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    )
    engine.evicted(key("w"))
    details = engine.explain(key("w"))
    assert details is not None and details.message == "The workload is deactivated"
    assert engine.schedule(t(10_000)).admitted == ()


def test_requeue_count_survives_a_restart() -> None:
    cfg = PodsReadyConfig(timeout=timedelta(seconds=10), backoff_limit_count=2)
    wl = make_workload("w").request("cpu", "2").reserved_in("cq", "default").obj()
    engine = ready_engine(cfg, replace(wl, requeue_count=2))
    (ev,) = engine.schedule(t(10)).evicted
    assert ev.reason == EvictionReason.DEACTIVATED


def test_block_admission_waits_for_ready_pods() -> None:
    cfg = PodsReadyConfig(timeout=timedelta(seconds=300), block_admission=True)
    engine = ready_engine(
        cfg,
        make_workload("a").request("cpu", "1").created(1).obj(),
        make_workload("b").request("cpu", "1").created(2).obj(),
    )
    assert list(admitted_flavors(engine.schedule(t(1)))) == ["a"]
    r = engine.schedule(t(2))
    assert r.admitted == ()
    assert [p.message for p in r.pending] == [
        "waiting for all admitted workloads to be in PodsReady condition"
    ]
    engine.pods_ready(key("a"), True, t(3))
    assert list(admitted_flavors(engine.schedule(t(4)))) == ["b"]


def test_barrier_holds_a_pod_group_until_all_its_pods_exist() -> None:
    engine = make_engine(F, CQ)
    engine.pods_present(key("group"), 2, 3)
    engine.upsert_workload(make_workload("group").count(3).request("cpu", "1").obj())
    r = engine.schedule(t(1))
    assert r.admitted == ()
    details = engine.explain(key("group"))
    assert details is not None
    assert (details.reason, details.message) == (
        PendingReason.SUSPENDED,
        "Waiting for all pods of the group to be created: 2 of 3 pods exist",
    )
    engine.pods_present(key("group"), 3, 3)
    assert list(admitted_flavors(engine.schedule(t(2)))) == ["group"]


def test_gangs_are_admitted_whole_or_not_at_all() -> None:
    engine = make_engine(
        F, CQ, make_workload("gang").pod_set("workers", 3).request("cpu", "1")
        .pod_set("driver", 2).request("cpu", "1").obj()
    )
    r = engine.schedule(t(1))
    assert r.admitted == ()
    assert engine.usage(CQ.name) == {}


def test_readiness_starts_over_after_an_eviction_seen_as_an_update() -> None:
    """Pods that were ready before an eviction say nothing about the next admission."""
    cfg = PodsReadyConfig(timeout=timedelta(seconds=100), block_admission=False)
    wl = make_workload("w").request("cpu", "2")
    engine = ready_engine(cfg, wl.obj())
    engine.schedule(t(0))
    engine.pods_ready(key("w"), True, t(10))
    engine.upsert_workload(wl.reserved_in("cq", "default", at=0).obj())
    # Evicted elsewhere (e.g. preempted): the update shows the admission cleared.
    engine.upsert_workload(make_workload("w").request("cpu", "2").obj())
    assert list(admitted_flavors(engine.schedule(t(200)))) == ["w"]
    assert engine.next_deadline() == t(300)
