"""Queueing: order, StrictFIFO vs BestEffortFIFO, requeue events, LocalQueues, stop policies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from kqueue.engine.engine import Engine
from kqueue.engine.types import (
    ClusterQueueName,
    CohortName,
    EvictionReason,
    FlavorName,
    PendingReason,
)

from .builders import (
    admitted_flavors,
    key,
    make_cohort,
    make_cq,
    make_engine,
    make_flavor,
    make_lq,
    make_workload,
    pending_reasons,
    t,
)

F = make_flavor("default").obj()


def admitted_order(engine: Engine, cycles: int = 10) -> list[str]:
    out: list[str] = []
    for i in range(cycles):
        out.extend(admitted_flavors(engine.schedule(t(100 + i))))
    return out


def test_queue_order_priority_then_time_then_uid() -> None:
    engine = make_engine(
        F,
        make_cq("cq").quota("default", cpu="100").obj(),
        make_workload("old-low").priority(1).created(0).request("cpu", "1").obj(),
        make_workload("new-high").priority(5).created(9).request("cpu", "1").obj(),
        make_workload("mid-b").priority(3).created(4).uid("2").request("cpu", "1").obj(),
        make_workload("mid-a").priority(3).created(4).uid("1").request("cpu", "1").obj(),
        make_workload("mid-early").priority(3).created(3).uid("9").request("cpu", "1").obj(),
    )
    assert admitted_order(engine) == ["new-high", "mid-early", "mid-a", "mid-b", "old-low"]


def test_priority_class_values_order_the_queue_and_can_change() -> None:
    engine = make_engine(
        F,
        make_cq("cq").quota("default", cpu="1").obj(),
        make_workload("held").request("cpu", "1").reserved_in("cq", "default").obj(),
        make_workload("a").priority_class("batch").request("cpu", "1").obj(),
        make_workload("b").priority_class("prod").created(1).request("cpu", "1").obj(),
    )
    engine.upsert_priority_class("batch", 10)
    engine.upsert_priority_class("prod", 20)
    assert engine.explain(key("b")).position_in_cluster_queue == 0  # type: ignore[union-attr]
    engine.upsert_priority_class("batch", 30)
    assert engine.explain(key("a")).position_in_cluster_queue == 0  # type: ignore[union-attr]
    engine.finish(key("held"))
    assert admitted_order(engine, 1) == ["a"]


def _blocked_queue(strict: bool) -> Engine:
    cq = make_cq("cq").quota("default", cpu="10")
    if strict:
        cq = cq.strict_fifo()
    return make_engine(
        F,
        cq.obj(),
        make_workload("held").request("cpu", "8").reserved_in("cq", "default").obj(),
        make_workload("big").created(0).request("cpu", "4").obj(),
        make_workload("small").created(1).request("cpu", "1").obj(),
    )


def test_strict_fifo_blocks_behind_its_head() -> None:
    engine = _blocked_queue(strict=True)
    for i in range(3):
        r = engine.schedule(t(i))
        assert pending_reasons(r) == {"big": "WaitingForQuota"}
        assert r.requeued[0].active
    assert engine.explain(key("small")).position_in_cluster_queue == 1  # type: ignore[union-attr]


def test_best_effort_fifo_parks_the_head_and_moves_on() -> None:
    engine = _blocked_queue(strict=False)
    r1 = engine.schedule(t(1))
    assert pending_reasons(r1) == {"big": "WaitingForQuota"}
    assert not r1.requeued[0].active
    r2 = engine.schedule(t(2))
    assert list(admitted_flavors(r2)) == ["small"]
    # Parked: not reconsidered without an event.
    r3 = engine.schedule(t(3))
    assert r3.pending == () and r3.admitted == ()
    assert engine.pending_counts(ClusterQueueName("cq")) == (0, 1)


EVENTS: dict[str, Callable[[Engine], None]] = {
    "quota freed in the ClusterQueue": lambda e: e.finish(key("held")),
    "quota freed by eviction": lambda e: e.evicted(key("held")),
    "ClusterQueue quota raised": lambda e: e.upsert_cluster_queue(
        make_cq("cq").cohort("c").quota("default", cpu="20").obj()
    ),
    "workload changed": lambda e: e.upsert_workload(
        make_workload("big").queue("cq").request("cpu", "2").obj()
    ),
    "cohort gained a lender": lambda e: e.upsert_cluster_queue(
        make_cq("lender").cohort("c").quota("default", cpu="10").obj()
    ),
    "cohort object with quota": lambda e: e.upsert_cohort(
        make_cohort("c").quota("default", cpu="10").obj()
    ),
    "quota freed elsewhere in the cohort": lambda e: e.finish(key("other")),
}


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_best_effort_requeues_on_events(event: str) -> None:
    engine = make_engine(
        F,
        make_cq("cq").cohort("c").quota("default", cpu="10").obj(),
        make_cq("peer").cohort("c").quota("default", cpu="0").obj(),
        make_workload("held").queue("cq").request("cpu", "5").reserved_in("cq", "default").obj(),
        # "other" borrows 2 of cq's quota.
        make_workload("other").queue("peer").request("cpu", "2").reserved_in("peer", "default").obj(),
        make_workload("big").queue("cq").request("cpu", "4").obj(),
    )
    assert pending_reasons(engine.schedule(t(1))) == {"big": "WaitingForQuota"}
    assert engine.schedule(t(2)).pending == ()
    EVENTS[event](engine)
    assert list(admitted_flavors(engine.schedule(t(5)))) == ["big"]


def test_unrelated_event_does_not_requeue() -> None:
    engine = _blocked_queue(strict=False)
    engine.upsert_cluster_queue(make_cq("elsewhere").quota("default", cpu="1").obj())
    engine.schedule(t(1))
    engine.schedule(t(2))  # admits "small"
    engine.upsert_cluster_queue(make_cq("elsewhere").quota("default", cpu="5").obj())
    assert engine.schedule(t(3)).pending == ()


def test_flavor_change_requeues_its_users() -> None:
    engine = make_engine(
        make_flavor("default").taint("x", "y").obj(),
        make_cq("cq").quota("default", cpu="10").obj(),
        make_workload("a").request("cpu", "1").obj(),
    )
    assert pending_reasons(engine.schedule(t(1))) == {"a": "NoMatchingFlavor"}
    assert engine.schedule(t(2)).pending == ()
    engine.upsert_flavor(make_flavor("default").obj())
    assert list(admitted_flavors(engine.schedule(t(3)))) == ["a"]


def test_namespace_selector() -> None:
    engine = make_engine(
        F,
        make_cq("cq").namespace_selector({"team": "ml"}).quota("default", cpu="10").obj(),
        make_lq("lq", "cq", namespace="research"),
        make_workload("a", namespace="research").request("cpu", "1").obj(),
    )
    r = engine.schedule(t(1))
    assert r.pending[0].reason == PendingReason.MISCONFIGURED
    assert r.pending[0].message == "workload namespace doesn't match ClusterQueue selector"
    assert not r.requeued[0].active
    engine.set_namespace_labels("research", {"team": "ml"})
    assert list(admitted_flavors(engine.schedule(t(2)))) == ["a"]


def test_nil_namespace_selector_matches_nothing() -> None:
    engine = make_engine(
        F,
        make_cq("cq").namespace_selector(None).quota("default", cpu="10").obj(),
        make_workload("a").request("cpu", "1").obj(),
    )
    assert pending_reasons(engine.schedule(t(1))) == {"a": "Misconfigured"}


def test_namespace_selector_expressions() -> None:
    engine = make_engine(
        F,
        make_cq("cq").namespace_expression("team", "In", "ml", "infra").quota("default", cpu="9").obj(),
        make_lq("lq", "cq", namespace="ns"),
        make_workload("a", namespace="ns").request("cpu", "1").obj(),
    )
    engine.set_namespace_labels("ns", {"team": "infra"})
    assert list(admitted_flavors(engine.schedule(t(1)))) == ["a"]


@dataclass
class BlockedCase:
    name: str
    setup: Callable[[], Engine]
    want_reason: PendingReason
    want_message: str


def _engine_with(*objs: object) -> Engine:
    return make_engine(*objs)  # type: ignore[arg-type]


BLOCKED = [
    BlockedCase(
        "inactive workload",
        lambda: make_engine(
            F, make_cq("cq").quota("default", cpu="1").obj(),
            make_workload("a").inactive().request("cpu", "1").obj(),
        ),
        PendingReason.SUSPENDED,
        "The workload is deactivated",
    ),
    BlockedCase(
        "missing LocalQueue",
        lambda: make_engine(
            F, make_cq("cq").quota("default", cpu="1").obj(),
            make_workload("a").queue("nope").request("cpu", "1").obj(),
        ),
        PendingReason.MISCONFIGURED,
        "LocalQueue nope doesn't exist",
    ),
    BlockedCase(
        "no queue name",
        lambda: make_engine(
            F, make_cq("cq").quota("default", cpu="1").obj(),
            make_workload("a").queue("").request("cpu", "1").obj(),
        ),
        PendingReason.MISCONFIGURED,
        "The workload has no queue: spec.queueName is empty; set it (or the "
        "kqueue.io/queue-name label of its job), or create a LocalQueue named \"default\" in "
        "its namespace",
    ),
    BlockedCase(
        "missing ClusterQueue",
        lambda: make_engine(F, make_lq("lq", "ghost"), make_workload("a").request("cpu", "1").obj()),
        PendingReason.MISCONFIGURED,
        "ClusterQueue ghost doesn't exist",
    ),
    BlockedCase(
        "missing flavor",
        lambda: make_engine(
            make_cq("cq").quota("default", cpu="1").obj(), make_workload("a").request("cpu", "1").obj()
        ),
        PendingReason.MISCONFIGURED,
        "ClusterQueue cq is inactive: references missing ResourceFlavor(s): default",
    ),
    BlockedCase(
        "stopped ClusterQueue",
        lambda: make_engine(
            F, make_cq("cq").stop("Hold").quota("default", cpu="1").obj(),
            make_workload("a").request("cpu", "1").obj(),
        ),
        PendingReason.SUSPENDED,
        "ClusterQueue cq is stopped",
    ),
    BlockedCase(
        "stopped LocalQueue",
        lambda: make_engine(
            F, make_cq("cq").quota("default", cpu="1").obj(), make_lq("lq", "cq", stop="Hold"),
            make_workload("a").request("cpu", "1").obj(),
        ),
        PendingReason.SUSPENDED,
        "LocalQueue lq is stopped",
    ),
    BlockedCase(
        "requeue backoff",
        lambda: make_engine(
            F, make_cq("cq").quota("default", cpu="1").obj(),
            make_workload("a").requeue_at(1000).request("cpu", "1").obj(),
        ),
        PendingReason.WAITING_FOR_QUOTA,
        "Waiting for the requeue backoff to expire at 1970-01-01T00:16:40+00:00",
    ),
]


@pytest.mark.parametrize("case", BLOCKED, ids=[c.name for c in BLOCKED])
def test_blocked_workloads_pend_with_a_reason(case: BlockedCase) -> None:
    engine = case.setup()
    assert engine.schedule(t(1)).admitted == ()
    why = engine.explain(key("a"))
    assert why is not None
    assert (why.reason, why.message) == (case.want_reason, case.want_message)


def test_blocked_workloads_are_admitted_once_unblocked() -> None:
    engine = make_engine(
        make_cq("cq").stop("Hold").quota("default", cpu="1").obj(),
        make_lq("lq", "cq", stop="Hold"),
        make_workload("a").inactive().request("cpu", "1").obj(),
    )
    engine.schedule(t(1))
    engine.upsert_flavor(F)
    engine.upsert_cluster_queue(make_cq("cq").quota("default", cpu="1").obj())
    engine.upsert_local_queue(make_lq("lq", "cq"))
    assert engine.schedule(t(2)).admitted == ()
    engine.upsert_workload(make_workload("a").request("cpu", "1").obj())
    assert list(admitted_flavors(engine.schedule(t(3)))) == ["a"]


def test_requeue_backoff_expires_with_the_clock() -> None:
    engine = make_engine(
        F, make_cq("cq").quota("default", cpu="1").obj(),
        make_workload("a").requeue_at(10).request("cpu", "1").obj(),
    )
    assert engine.schedule(t(9)).admitted == ()
    assert list(admitted_flavors(engine.schedule(t(10)))) == ["a"]


def test_hold_and_drain_evicts_holders_once() -> None:
    engine = make_engine(
        F,
        make_cq("cq").quota("default", cpu="4").obj(),
        make_workload("a").request("cpu", "1").reserved_in("cq", "default").obj(),
        make_workload("b").request("cpu", "1").reserved_in("cq", "default").obj(),
    )
    engine.upsert_cluster_queue(make_cq("cq").stop("HoldAndDrain").quota("default", cpu="4").obj())
    r = engine.schedule(t(1))
    assert [(e.workload, e.reason) for e in r.evicted] == [
        (key("a"), EvictionReason.CLUSTER_QUEUE_STOPPED),
        (key("b"), EvictionReason.CLUSTER_QUEUE_STOPPED),
    ]
    assert engine.schedule(t(2)).evicted == ()
    engine.evicted(key("a"))
    assert engine.usage(ClusterQueueName("cq")) == {(FlavorName("default"), "cpu"): 1000}
    why = engine.explain(key("a"))
    assert why is not None and why.reason == PendingReason.SUSPENDED


def test_local_queue_hold_and_drain_and_deactivation_evict() -> None:
    engine = make_engine(
        F,
        make_cq("cq").quota("default", cpu="4").obj(),
        make_lq("lq", "cq"),
        make_lq("other", "cq"),
        make_workload("a").request("cpu", "1").reserved_in("cq", "default").obj(),
        make_workload("b").queue("other").request("cpu", "1").reserved_in("cq", "default").obj(),
    )
    engine.upsert_local_queue(make_lq("lq", "cq", stop="HoldAndDrain"))
    engine.upsert_workload(
        make_workload("b").queue("other").inactive().request("cpu", "1")
        .reserved_in("cq", "default").obj()
    )
    r = engine.schedule(t(1))
    assert [(e.workload, e.reason) for e in r.evicted] == [
        (key("a"), EvictionReason.LOCAL_QUEUE_STOPPED),
        (key("b"), EvictionReason.DEACTIVATED),
    ]


def test_positions_in_local_and_cluster_queue() -> None:
    engine = make_engine(
        F,
        make_cq("cq").quota("default", cpu="1").obj(),
        make_lq("lq", "cq"),
        make_lq("other", "cq"),
        make_workload("held").request("cpu", "1").reserved_in("cq", "default").obj(),
        make_workload("a").created(1).request("cpu", "1").obj(),
        make_workload("x").queue("other").created(2).request("cpu", "1").obj(),
        make_workload("b").created(3).request("cpu", "1").obj(),
    )
    why = engine.explain(key("b"))
    assert why is not None
    assert (why.position_in_cluster_queue, why.position_in_local_queue) == (2, 1)
    assert engine.explain(key("held")) is None


def test_moving_a_local_queue_moves_its_workloads() -> None:
    engine = make_engine(
        F,
        make_cq("small").quota("default", cpu="1").obj(),
        make_cq("big").quota("default", cpu="10").obj(),
        make_lq("lq", "small"),
        make_workload("a").request("cpu", "5").obj(),
    )
    assert pending_reasons(engine.schedule(t(1))) == {"a": "ExceedsMaxQuota"}
    engine.upsert_local_queue(make_lq("lq", "big"))
    r = engine.schedule(t(2))
    assert [a.cluster_queue for a in r.admitted] == ["big"]


def test_cohort_deletion_requeues_and_cuts_borrowing() -> None:
    engine = make_engine(
        F,
        make_cohort("c").quota("default", cpu="5").obj(),
        make_cq("cq").cohort("c").quota("default", cpu="1").obj(),
        make_workload("a").request("cpu", "3").obj(),
    )
    assert list(admitted_flavors(engine.schedule(t(1)))) == ["a"]
    engine.delete_cohort(CohortName("c"))
    engine.upsert_workload(make_workload("b").request("cpu", "3").obj())
    assert pending_reasons(engine.schedule(t(2))) == {"b": "ExceedsMaxQuota"}
