"""Engine methods the controller reads and undoes through (it never reaches into the parts)."""

from __future__ import annotations

from kqueue.engine.engine import Engine
from kqueue.engine.types import ClusterQueueName, PreemptionReason

from .builders import key, make_cq, make_engine, make_flavor, make_workload, t
from .fakes import LowerPriorityPreemptor

F = make_flavor("default").obj()


def _preempting() -> Engine:
    return make_engine(
        F,
        make_cq("cq").quota("default", cpu="4").obj(),
        make_workload("low").priority(1).request("cpu", "3").reserved_in("cq", "default").obj(),
        make_workload("high").priority(10).request("cpu", "3").obj(),
        preemptor=LowerPriorityPreemptor(),
    )


def test_an_eviction_not_written_is_undone_and_decided_again() -> None:
    engine = _preempting()
    first = engine.schedule(t(1))
    assert [(p.victim, p.reason) for p in first.preempted] == [
        (key("low"), PreemptionReason.IN_CLUSTER_QUEUE)
    ]
    # While the victim counts as going, no cycle preempts it again.
    assert engine.schedule(t(2)).preempted == ()
    engine.undo_eviction(key("low"))
    again = engine.schedule(t(3))
    assert [p.victim for p in again.preempted] == [key("low")]
    assert engine.holds_quota(key("low"))


def test_counts_and_flavor_use_as_the_controller_reads_them() -> None:
    engine = _preempting()
    assert engine.workload_counts() == (1, 1)
    assert sorted(engine.pending_keys()) == [key("high")]
    assert engine.cluster_queue_of(key("high")) == ClusterQueueName("cq")
    assert engine.uses_flavor("default") and not engine.uses_flavor("spot")
    assert engine.inactive_cluster_queues() == frozenset()
    assert engine.pods_ready_config is None


def test_a_queue_naming_a_missing_flavor_is_inactive() -> None:
    engine = make_engine(F, make_cq("cq").quota("spot", cpu="4").obj())
    assert engine.inactive_cluster_queues() == frozenset({ClusterQueueName("cq")})
    inactive = engine.inactive(ClusterQueueName("cq"))
    assert inactive is not None and "spot" in inactive.message
