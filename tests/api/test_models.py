"""Reading and writing every kind: model <-> dict <-> YAML, nothing lost, nothing invented."""

from __future__ import annotations

import copy

import pytest
import yaml

from kqueue.api.v1alpha1 import (
    KINDS,
    ClusterQueue,
    ObjectMeta,
    Quantity,
    ResourceFlavor,
    Workload,
    parse_object,
)
from tests.api import samples


def _sort(value: object) -> object:
    """Compare mappings regardless of key order."""
    if isinstance(value, dict):
        return {k: _sort(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_sort(v) for v in value]
    return value


@pytest.mark.parametrize("kind", sorted(samples.ALL))
def test_dict_round_trip_is_exact(kind: str) -> None:
    doc = samples.load(kind)
    obj = parse_object(doc)
    assert type(obj) is KINDS[kind]
    assert _sort(obj.to_dict()) == _sort(doc)


@pytest.mark.parametrize("kind", sorted(samples.ALL))
def test_yaml_round_trip(kind: str) -> None:
    obj = parse_object(samples.load(kind))
    text = yaml.safe_dump(obj.to_dict(), sort_keys=False)
    again = parse_object(yaml.safe_load(text))
    assert again == obj
    assert yaml.safe_dump(again.to_dict(), sort_keys=False) == text


@pytest.mark.parametrize("kind", sorted(samples.ALL))
def test_model_round_trip(kind: str) -> None:
    obj = parse_object(samples.load(kind))
    assert type(obj).model_validate(obj.to_dict()) == obj
    assert type(obj).model_validate(obj.model_dump()) == obj


def test_unknown_metadata_is_kept() -> None:
    doc = samples.load("ResourceFlavor")
    doc["metadata"]["generateName"] = "spot-"
    doc["metadata"]["deletionGracePeriodSeconds"] = 30
    obj = parse_object(doc)
    out = obj.to_dict()
    assert out["metadata"]["managedFields"] == doc["metadata"]["managedFields"]
    assert out["metadata"]["generateName"] == "spot-"
    assert out["metadata"]["deletionGracePeriodSeconds"] == 30
    assert obj.metadata.extra["generateName"] == "spot-"


def test_unknown_pod_template_fields_are_kept() -> None:
    doc = samples.load("Workload")
    template = copy.deepcopy(doc["spec"]["podSets"][0]["template"])
    obj = parse_object(doc)
    assert isinstance(obj, Workload)
    assert obj.to_dict()["spec"]["podSets"][0]["template"] == template


def test_snake_case_names_are_accepted() -> None:
    cq = ClusterQueue(metadata=ObjectMeta(name="a"), spec={"cohort_name": "x"})  # type: ignore[arg-type]
    assert cq.spec.cohort_name == "x"
    assert cq.to_dict()["spec"]["cohortName"] == "x"


def test_quantities_are_exact_and_canonical() -> None:
    cq = parse_object(samples.load("ClusterQueue"))
    assert isinstance(cq, ClusterQueue)
    cpu = cq.spec.resource_groups[0].flavors[1].resources[0]
    assert cpu.nominal_quota == Quantity("0.5")
    assert cpu.nominal() == 500
    mem = cq.spec.resource_groups[0].flavors[0].resources[1]
    assert mem.nominal() == 160 * 2**30
    assert mem.lending() == 64 * 2**30


def test_empty_fields_are_omitted() -> None:
    rf = ResourceFlavor(metadata=ObjectMeta(name="plain"))
    assert rf.to_dict() == {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "plain"},
        "spec": {},
    }


def test_object_identity() -> None:
    wl = parse_object(samples.load("Workload"))
    assert isinstance(wl, Workload)
    assert wl.ref == "Workload team-a/job-train-3f2a1"
    assert wl.key == "team-a/job-train-3f2a1"
    assert wl.has_quota_reservation and wl.is_admitted and not wl.is_finished
    assert wl.priority_value == 1000
    assert wl.preemption_priority_value == 5000
