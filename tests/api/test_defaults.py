"""Defaults are Kueue's, and the models and the CRD schemas apply the same ones."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api import crds
from kqueue.api.v1alpha1 import (
    KINDS,
    ClusterQueue,
    LocalQueue,
    Workload,
    parse_object,
)

MINIMAL: dict[str, dict[str, Any]] = {
    "ResourceFlavor": {"metadata": {"name": "rf"}},
    "Cohort": {"metadata": {"name": "c"}},
    "ClusterQueue": {"metadata": {"name": "cq"}},
    "LocalQueue": {"metadata": {"name": "lq", "namespace": "ns"}},
    "WorkloadPriorityClass": {"metadata": {"name": "p"}, "value": 1},
    "Workload": {
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": [{"template": {"spec": {"containers": [{"name": "c"}]}}}]},
    },
}


def _minimal(kind: str) -> dict[str, Any]:
    return {"apiVersion": "kqueue.io/v1alpha1", "kind": kind, **copy.deepcopy(MINIMAL[kind])}


def _apply_defaults(value: Any, node: dict[str, Any]) -> Any:
    """Structural defaulting as the API server does it: missing fields with a default get it,
    and defaulted objects are defaulted in turn."""
    if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
        return value
    if isinstance(value, dict) and "properties" in node:
        for key, child in node["properties"].items():
            if key not in value and "default" in child:
                value[key] = copy.deepcopy(child["default"])
            if key in value:
                value[key] = _apply_defaults(value[key], child)
    elif isinstance(value, list) and "items" in node:
        value = [_apply_defaults(v, node["items"]) for v in value]
    return value


@pytest.mark.parametrize("kind", list(MINIMAL))
def test_models_and_schema_default_alike(kind: str) -> None:
    schema = crds.openapi_schema(KINDS[kind])
    by_schema = _apply_defaults(_minimal(kind), schema)
    by_model = parse_object(_minimal(kind)).to_dict()
    assert by_schema == by_model


def test_cluster_queue_defaults() -> None:
    cq = parse_object(_minimal("ClusterQueue"))
    assert isinstance(cq, ClusterQueue)
    assert cq.spec.to_dict() == {
        "queueingStrategy": "BestEffortFIFO",
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {
            "reclaimWithinCohort": "Never",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": "Never",
            "preemptionOrder": "Newest",
        },
        "stopPolicy": "None",
    }
    assert cq.spec.cohort_name is None
    assert cq.spec.preemption.preemptible_priority_threshold is None


def test_namespace_selector_null_matches_nothing_empty_matches_all() -> None:
    # Kueue: a nil namespaceSelector selects no namespace, an empty one ({}) selects all.
    cq = parse_object(_minimal("ClusterQueue"))
    assert isinstance(cq, ClusterQueue)
    assert cq.spec.namespace_selector is None
    doc = _minimal("ClusterQueue")
    doc["spec"] = {"namespaceSelector": {}}
    cq = parse_object(doc)
    assert isinstance(cq, ClusterQueue)
    assert cq.spec.namespace_selector is not None
    assert cq.spec.namespace_selector.matches({"any": "labels"})
    assert cq.spec.namespace_selector.matches({})
    assert cq.to_dict()["spec"]["namespaceSelector"] == {}


def test_local_queue_defaults() -> None:
    lq = parse_object(_minimal("LocalQueue"))
    assert isinstance(lq, LocalQueue)
    assert lq.spec.stop_policy == "None"
    assert lq.spec.cluster_queue is None


def test_workload_defaults() -> None:
    wl = parse_object(_minimal("Workload"))
    assert isinstance(wl, Workload)
    (ps,) = wl.spec.pod_sets
    assert ps.name == "main"
    assert ps.count == 1
    assert ps.min_count is None
    assert wl.spec.active is True
    assert wl.spec.priority is None and wl.priority_value == 0
    assert wl.spec.preemption_priority is None and wl.preemption_priority_value == 0
    assert wl.spec.preemptibility is None


def test_preemption_priority_defaults_to_scheduling_priority() -> None:
    doc = _minimal("Workload")
    doc["spec"]["priority"] = 7
    wl = parse_object(doc)
    assert isinstance(wl, Workload)
    assert wl.preemption_priority_value == 7


def test_status_is_omitted_until_something_is_observed() -> None:
    for kind in ("ClusterQueue", "LocalQueue", "Workload", "Cohort"):
        assert "status" not in parse_object(_minimal(kind)).to_dict()
