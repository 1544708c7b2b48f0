"""KBase's omitempty, decided from a per-class plan on serialized values, leaves out exactly the
fields the model-walking rule (``_omitted_keys``) names, at every level of every sample."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.api.v1alpha1 import KINDS, ObjectMeta, Workload, parse_object
from kqueue.api.v1alpha1.base import KBase, _omitted_keys
from tests.api import samples

SAMPLES = ["ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass",
           "Workload"]


def check_tree(model: KBase, data: Any, by_alias: bool = True) -> int:
    """Compare the dumped keys of ``model`` (and of every model below it) with the reference
    rule; returns how many models were checked."""
    assert isinstance(data, dict)
    omitted = {alias if by_alias else name for name, alias in _omitted_keys(model)}
    checked = 1
    for name, field in type(model).model_fields.items():
        key = (field.alias or name) if by_alias else name
        if key in omitted:
            assert key not in data, f"{type(model).__name__}.{name} should be left out"
            continue
        assert key in data, f"{type(model).__name__}.{name} should be kept"
        checked += _walk(getattr(model, name), data[key], by_alias)
    return checked


def _walk(value: Any, data: Any, by_alias: bool) -> int:
    if isinstance(value, KBase):
        return check_tree(value, data, by_alias)
    if isinstance(value, list | tuple):
        return sum(_walk(v, d, by_alias) for v, d in zip(value, data, strict=True))
    if isinstance(value, dict):
        return sum(_walk(v, data[k], by_alias) for k, v in value.items() if k in data)
    return 0


@pytest.mark.parametrize("kind", SAMPLES)
@pytest.mark.parametrize("by_alias", [True, False], ids=["by alias", "by name"])
def test_samples_omit_what_the_reference_rule_omits(kind: str, by_alias: bool) -> None:
    obj = parse_object(samples.load(kind))
    assert isinstance(obj, tuple(KINDS.values()))
    data = obj.model_dump(mode="json", by_alias=by_alias)
    assert check_tree(obj, data, by_alias) > 1


def test_empty_status_and_template_metadata_are_left_out() -> None:
    wl = parse_object(
        {
            "apiVersion": "kqueue.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "template": {"spec": {"containers": []}}}]},
        }
    )
    out = wl.to_dict()
    assert "status" not in out
    assert "metadata" not in out["spec"]["podSets"][0]["template"]
    assert check_tree(wl, out) > 1


_label = st.from_regex(r"[a-z]{1,5}", fullmatch=True)


@settings(max_examples=100, deadline=None)
@given(
    labels=st.dictionaries(_label, _label, max_size=2),
    annotations=st.dictionaries(_label, _label, max_size=2),
    finalizers=st.lists(_label, max_size=2),
    extra=st.dictionaries(st.sampled_from(["generateName", "selfLink"]), _label, max_size=2),
    generation=st.none() | st.integers(1, 5),
    queue=st.none() | _label,
    priority=st.none() | st.integers(-3, 3),
    with_status=st.booleans(),
)
def test_random_workloads_omit_what_the_reference_rule_omits(
    labels: dict[str, str],
    annotations: dict[str, str],
    finalizers: list[str],
    extra: dict[str, str],
    generation: int | None,
    queue: str | None,
    priority: int | None,
    with_status: bool,
) -> None:
    meta: dict[str, Any] = {"name": "w", "namespace": "ns", "labels": labels,
                            "annotations": annotations, "finalizers": finalizers, **extra}
    if generation is not None:
        meta["generation"] = generation
    spec: dict[str, Any] = {"podSets": [{"name": "main", "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}
    if queue is not None:
        spec["queueName"] = queue
    if priority is not None:
        spec["priority"] = priority
    doc: dict[str, Any] = {"apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
                           "metadata": meta, "spec": spec}
    if with_status:
        doc["status"] = {"conditions": [{"type": "Admitted", "status": "True", "reason": "R",
                                         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    wl = parse_object(doc)
    assert isinstance(wl, Workload)
    assert isinstance(wl.metadata, ObjectMeta)
    assert check_tree(wl, wl.to_dict()) > 1
