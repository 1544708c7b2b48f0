"""Gangs and readiness: the pod-group barrier, waitForPodsReady timeouts, backoff, deactivation."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kqueue.api.config import RequeuingStrategy, WaitForPodsReady
from kqueue.engine.gang import Barrier
from kqueue.engine.readiness import PodsReadyConfig, Readiness, backoff
from kqueue.engine.types import EvictionReason
from kqueue.engine.workload import AdmittedWorkload, make_info

from .builders import key, make_workload, t


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


def test_backoff_limit_deactivates() -> None:
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
