"""WorkloadSlices: delta charging, sticky flavors, finishing the old slice, scale-down."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kqueue.engine.engine import Engine
from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.slice import WORKLOAD_SLICE_REPLACED, FinishSlice
from kqueue.engine.types import FlavorName, PodSetName, ResourceName, Workload, WorkloadKey

from .builders import (
    Obj,
    admitted_flavors,
    key,
    make_cq,
    make_engine,
    make_flavor,
    make_workload,
    pending_reasons,
    preempted,
    t,
)

F = make_flavor("default").obj()
SMALL = make_flavor("small").obj()
LARGE = make_flavor("large").obj()
CPU = (FlavorName("default"), ResourceName("cpu"))


def job(name: str, pods: int, *, flavor: str | None = "default", replaces: str | None = None) -> Workload:
    """A slice of ``pods`` one-cpu pods; admitted in ``cq`` on ``flavor`` unless None."""
    b = make_workload(name).count(pods).request("cpu", "1").created(10)
    wl = (b.reserved_in("cq", flavor) if flavor is not None else b).obj()
    if replaces is not None:
        wl = replace(wl, replacement_for=WorkloadKey(f"default/{replaces}"))
    return wl


def engine_of(*objects: Obj) -> Engine:
    return make_engine(*objects, preemptor=ClassicalPreemptor())


def test_slice_delta_charged_and_old_slice_finished_in_the_same_step() -> None:
    engine = engine_of(
        F,
        make_cq("cq").quota("default", cpu="10").obj(),
        job("job-1", 3),
        make_workload("other").request("cpu", "5").reserved_in("cq", "default").obj(),
        job("job-2", 5, flavor=None, replaces="job-1"),
    )
    # Only 2 cpu are free: the full 5 would not fit, the delta does.
    r = engine.schedule(t(1))
    assert admitted_flavors(r) == {"job-2": {"cpu": "default"}}
    (admit,) = r.admitted
    assert admit.pod_sets[0].count == 5
    assert r.finished == (
        FinishSlice(
            old=key("job-1"),
            new=key("job-2"),
            cluster_queue=admit.cluster_queue,
            message=(
                "Removed to accommodate a workload (UID: job-2, Key: default/job-2) due to "
                "workload slice aggregation"
            ),
        ),
    )
    assert r.finished[0].reason == WORKLOAD_SLICE_REPLACED
    assert not engine.holds_quota(key("job-1"))
    assert engine.usage(admit.cluster_queue) == {CPU: 10_000}
    assert r.preempted == () and r.evicted == ()
    engine.cache.check_consistency()
    # The controller then reports the old slice finished: nothing changes.
    engine.finish(key("job-1"))
    assert engine.usage(admit.cluster_queue) == {CPU: 10_000}


def test_a_slice_that_does_not_fit_even_as_a_delta_pends_and_the_old_one_keeps_running() -> None:
    engine = engine_of(
        F,
        make_cq("cq").quota("default", cpu="6").obj(),
        job("job-1", 3),
        make_workload("other").request("cpu", "2").reserved_in("cq", "default").obj(),
        job("job-2", 5, flavor=None, replaces="job-1"),
    )
    r = engine.schedule(t(1))
    assert pending_reasons(r) == {"job-2": "WaitingForQuota"}
    assert r.finished == ()
    assert engine.holds_quota(key("job-1"))
    (p,) = r.pending
    assert "insufficient unused quota for cpu in flavor default, 1 more needed" in p.message


def sticky_objects(small: str, large: str) -> list[Obj]:
    return [
        SMALL,
        LARGE,
        make_cq("cq").quota("small", cpu=small).quota("large", cpu=large).obj(),
    ]


@pytest.mark.parametrize(
    ("small", "others", "pods", "want_reason", "want_message"),
    [
        (
            "4",
            0,
            6,
            "ExceedsMaxQuota",
            "couldn't assign flavors to pod set main: couldn't change flavor from: small to: "
            "large, insufficient quota for cpu in flavor small, request > maximum capacity "
            "(6 > 4)",
        ),
        (
            "4",
            1,
            4,
            "WaitingForQuota",
            "couldn't assign flavors to pod set main: couldn't change flavor from: small to: "
            "large, insufficient unused quota for cpu in flavor small, 1 more needed",
        ),
    ],
    ids=["beyond the flavor's capacity", "flavor full"],
)
def test_sticky_flavor_pending_message_names_flavor(
    small: str, others: int, pods: int, want_reason: str, want_message: str
) -> None:
    objs: list[Obj] = [*sticky_objects(small, "20"), job("job-1", 3, flavor="small")]
    if others:
        objs.append(
            make_workload("other").request("cpu", str(others)).reserved_in("cq", "small").obj()
        )
    engine = engine_of(*objs, job("job-2", pods, flavor=None, replaces="job-1"))
    r = engine.schedule(t(1))
    assert pending_reasons(r) == {"job-2": want_reason}
    (p,) = r.pending
    assert p.message == want_message
    assert engine.holds_quota(key("job-1"))
    if pods > int(small):
        # An ordinary workload of the same size goes to the large flavor.
        fresh = engine_of(*sticky_objects(small, "20"), job("plain", pods, flavor=None))
        assert admitted_flavors(fresh.schedule(t(1))) == {"plain": {"cpu": "large"}}


def test_sticky_flavor_admits_when_the_old_flavor_has_room() -> None:
    engine = engine_of(
        *sticky_objects("10", "20"),
        job("job-1", 3, flavor="small"),
        job("job-2", 8, flavor=None, replaces="job-1"),
    )
    r = engine.schedule(t(1))
    assert admitted_flavors(r) == {"job-2": {"cpu": "small"}}
    assert [f.old for f in r.finished] == [key("job-1")]


def test_a_slice_whose_old_slice_holds_no_quota_is_an_ordinary_workload() -> None:
    engine = engine_of(
        F, make_cq("cq").quota("default", cpu="4").obj(), job("job-2", 5, flavor=None, replaces="job-1")
    )
    r = engine.schedule(t(1))
    assert pending_reasons(r) == {"job-2": "ExceedsMaxQuota"}
    assert r.finished == ()


def test_the_old_slice_is_never_a_victim_of_its_replacement() -> None:
    """Scale-up that needs preemption: other workloads go, the old slice keeps running."""
    engine = engine_of(
        F,
        make_cq("cq").quota("default", cpu="6").preemption(within="LowerPriority").obj(),
        replace(job("job-1", 3), priority=10),
        make_workload("low").priority(1).request("cpu", "3").reserved_in("cq", "default").obj(),
        replace(job("job-2", 5, flavor=None, replaces="job-1"), priority=10),
    )
    r1 = engine.schedule(t(1))
    assert preempted(r1) == {"low": "InClusterQueue"}
    assert r1.finished == ()
    assert engine.holds_quota(key("job-1"))
    engine.evicted(key("low"))
    engine.finish(key("low"))
    r2 = engine.schedule(t(2))
    assert admitted_flavors(r2) == {"job-2": {"cpu": "default"}}
    assert [f.old for f in r2.finished] == [key("job-1")]
    assert engine.usage(r2.admitted[0].cluster_queue) == {CPU: 5_000}


def test_scale_down_frees_quota() -> None:
    engine = engine_of(
        F,
        make_cq("cq").quota("default", cpu="4").obj(),
        job("elastic", 4),
        make_workload("waiting").request("cpu", "2").created(20).obj(),
    )
    r1 = engine.schedule(t(1))
    assert pending_reasons(r1) == {"waiting": "WaitingForQuota"}
    admission = engine.scale_down(key("elastic"), {PodSetName("main"): 2})
    assert admission is not None
    (ps,) = admission.pod_sets
    assert (ps.count, dict(ps.resource_usage), dict(ps.flavors)) == (
        2, {"cpu": 2_000}, {"cpu": "default"},
    )
    held = engine.admitted_workload(key("elastic"))
    assert held is not None and held.info.pod_sets[0].count == 2
    r2 = engine.schedule(t(2))
    assert admitted_flavors(r2) == {"waiting": {"cpu": "default"}}
    engine.cache.check_consistency()


def test_scale_down_counts_pods_when_the_cluster_queue_covers_them() -> None:
    engine = engine_of(
        F, make_cq("cq").quota("default", cpu="8", pods="8").obj(),
        make_workload("elastic").count(4).request("cpu", "1").obj(),
    )
    engine.schedule(t(1))
    admission = engine.scale_down(key("elastic"), {PodSetName("main"): 1})
    assert admission is not None
    assert dict(admission.pod_sets[0].resource_usage) == {"cpu": 1_000, "pods": 1}


def test_scale_down_refuses_a_scale_up() -> None:
    engine = engine_of(F, make_cq("cq").quota("default", cpu="8").obj(), job("elastic", 2))
    with pytest.raises(ValueError, match="not a scale-down"):
        engine.scale_down(key("elastic"), {PodSetName("main"): 3})
    assert engine.scale_down(key("unknown"), {PodSetName("main"): 1}) is None
