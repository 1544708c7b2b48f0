"""WorkloadReader: reusing an unchanged spec gives exactly the model a full read gives."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.api.v1alpha1 import Workload, parse_object
from kqueue.controller.workload_reader import WorkloadReader

Obj = dict[str, Any]


def workload(
    *,
    uid: str = "u1",
    rv: str = "1",
    cpu: str = "1",
    count: int = 1,
    priority: int | None = None,
    annotations: dict[str, str] | None = None,
    conditions: list[Obj] | None = None,
    admitted: bool = False,
) -> Obj:
    template: Obj = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    spec: Obj = {"queueName": "lq", "podSets": [{"name": "main", "count": count, "template": template}]}
    if priority is not None:
        spec["priority"] = priority
    status: Obj = {"conditions": conditions or []}
    if admitted:
        status["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": cpu}}
            ],
        }
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": rv,
            "generation": 1,
            "managedFields": [{"manager": "m", "operation": "Update", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": spec,
        "status": status,
    }


def condition(type_: str, status: str) -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": "Because",
        "message": f"{type_} is {status}",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def full(doc: Obj) -> Workload:
    wl = parse_object(copy.deepcopy(doc), validate=False)
    assert isinstance(wl, Workload)
    return wl


def test_status_change_reuses_the_spec_model() -> None:
    reader = WorkloadReader()
    first = reader(workload())
    second = reader(workload(rv="2", conditions=[condition("QuotaReserved", "True")], admitted=True))
    assert reader.reused == 1
    assert second.spec is first.spec
    assert second == full(workload(rv="2", conditions=[condition("QuotaReserved", "True")], admitted=True))


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"cpu": "2"}, id="request changed"),
        pytest.param({"count": 3}, id="count changed"),
        pytest.param({"priority": 5}, id="priority set"),
        pytest.param({"annotations": {"kqueue.io/podset-required-topology": "rack"}},
                     id="template annotation (topology request) set"),
        pytest.param({"uid": "u2"}, id="recreated under the same name"),
    ],
)
def test_a_changed_spec_or_object_is_read_in_full(changed: Obj) -> None:
    reader = WorkloadReader()
    first = reader(workload())
    doc = workload(rv="2", **changed)
    second = reader(doc)
    assert reader.reused == 0
    assert second.spec is not first.spec
    assert second == full(doc)


def test_forget_drops_the_remembered_spec() -> None:
    reader = WorkloadReader()
    reader(workload())
    reader.forget("ns/w")
    assert len(reader) == 0
    reader(workload(rv="2"))
    assert reader.reused == 0


def test_a_bad_status_still_fails_with_the_field_named() -> None:
    reader = WorkloadReader()
    reader(workload())
    bad = workload(rv="2")
    bad["status"]["conditions"] = [{"type": "QuotaReserved"}]
    with pytest.raises(ValueError, match=r"status\.conditions"):
        reader(bad)


_specs = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from(["1", "500m", "2"]),
        "count": st.integers(1, 3),
        "priority": st.none() | st.integers(-5, 5),
        "annotations": st.none()
        | st.just({"kqueue.io/podset-preferred-topology": "block"}),
    }
)
_statuses = st.fixed_dictionaries(
    {
        "conditions": st.lists(
            st.sampled_from(
                [condition("QuotaReserved", "True"), condition("Admitted", "True"),
                 condition("Finished", "True"), condition("QuotaReserved", "False")]
            ),
            max_size=3,
            unique_by=lambda c: c["type"],
        ),
        "admitted": st.booleans(),
    }
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["u1", "u2"]), _specs, _statuses), min_size=1, max_size=8))
def test_every_event_reads_as_a_full_read(events: list[tuple[str, Obj, Obj]]) -> None:
    """Property: over any sequence of versions of one Workload, the reader's model equals a full
    read of the same dict, field for field and as written back."""
    reader = WorkloadReader()
    for n, (uid, spec, status) in enumerate(events):
        doc = workload(uid=uid, rv=str(n + 1), **spec, **status)
        got = reader(copy.deepcopy(doc))
        want = full(doc)
        assert got == want
        assert got.to_dict() == want.to_dict()
