"""The engine's honoured Kueue feature gates: off removes the feature from its inputs."""

from __future__ import annotations

from dataclasses import replace

from kqueue.engine.gates import FeatureGates
from kqueue.engine.types import WorkloadKey

from .builders import admitted_flavors, make_cq, make_engine, make_flavor, make_workload, t

F = make_flavor("default").obj()


def test_partial_admission_off_ignores_min_count() -> None:
    objs = (F, make_cq("cq").quota("default", cpu="3").obj(),
            make_workload("w").count(5).min_count(2).request("cpu", "1").obj())
    on = make_engine(*objs).schedule(t(1))
    off = make_engine(*objs, gates=FeatureGates(partial_admission=False)).schedule(t(1))
    assert [a.pod_sets[0].count for a in on.admitted] == [3]
    assert off.admitted == ()
    assert [p.reason for p in off.pending] == ["ExceedsMaxQuota"]


def test_workload_slices_off_admits_a_slice_as_a_workload_of_its_own() -> None:
    old = make_workload("job-1").count(3).request("cpu", "1").reserved_in("cq", "default").obj()
    new = replace(make_workload("job-2").count(5).request("cpu", "1").obj(),
                  replacement_for=WorkloadKey("default/job-1"))
    objs = (F, make_cq("cq").quota("default", cpu="6").obj(), old, new)
    on = make_engine(*objs).schedule(t(1))
    off = make_engine(*objs, gates=FeatureGates(workload_slices=False)).schedule(t(1))
    # As a slice only the delta (2) is charged; as a workload of its own 5 do not fit next to 3.
    assert admitted_flavors(on) == {"job-2": {"cpu": "default"}}
    assert off.admitted == ()
    assert not off.finished
