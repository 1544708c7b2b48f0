"""Preemption protection input: the Configuration's ``preemptionProtection`` and a ClusterQueue's
``spec.preemption.protection`` (docs/contracts.md §6), read into the engine's ProtectionConfig,
and bad input refused naming the field."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kqueue.api.config import ConfigurationError, load_configuration
from kqueue.api.v1alpha1 import FieldError, ValidationFailed, parse_object
from kqueue.engine import from_api
from kqueue.engine.types import ProtectionConfig


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("{}", None, id="absent"),
        pytest.param(
            "preemptionProtection: {withinClusterQueue: {minAdmitDuration: 5m}, "
            "reclaimWithinCohort: {minAdmitDuration: 10m}, fairSharing: {minAdmitDuration: 1h}}",
            ProtectionConfig(timedelta(minutes=5), timedelta(minutes=10), timedelta(hours=1)),
            id="the three paths of docs/contracts.md",
        ),
        pytest.param(
            "preemptionProtection: {reclaimWithinCohort: {minAdmitDuration: 1h30m}}",
            ProtectionConfig(None, timedelta(minutes=90), None),
            id="unset paths stay unset",
        ),
        pytest.param(
            "preemptionProtection: {fairSharing: {minAdmitDuration: 0s}}",
            ProtectionConfig(None, None, timedelta(0)),
            id="zero",
        ),
    ],
)
def test_configuration(text: str, want: ProtectionConfig | None) -> None:
    cfg = load_configuration(text)
    assert from_api.preemption_protection(cfg.preemption_protection) == want


@pytest.mark.parametrize(
    ("text", "want_field", "want_words"),
    [
        pytest.param(
            "preemptionProtection: {reclaimWithinCohort: {minAdmitDuration: -5m}}",
            "preemptionProtection.reclaimWithinCohort.minAdmitDuration",
            "must be greater than or equal to 0",
            id="negative",
        ),
        pytest.param(
            "preemptionProtection: {fairSharing: {minAdmitDuration: 10 minutes}}",
            "preemptionProtection.fairSharing.minAdmitDuration",
            "is not a duration",
            id="not a Go duration",
        ),
        pytest.param(
            "preemptionProtection: {withinClusterQueue: {minAdmitDuration: 300}}",
            "preemptionProtection.withinClusterQueue.minAdmitDuration",
            "is not a duration",
            id="a bare number",
        ),
        pytest.param(
            "preemptionProtection: {withinClusterQueue: {}}",
            "preemptionProtection.withinClusterQueue.minAdmitDuration",
            "required",
            id="missing",
        ),
        pytest.param(
            "preemptionProtection: {borrowWithinCohort: {minAdmitDuration: 1m}}",
            "preemptionProtection.borrowWithinCohort",
            "unknown field",
            id="unknown path",
        ),
    ],
)
def test_bad_configuration_names_the_field(text: str, want_field: str, want_words: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_configuration(text, source="config.yaml")
    problems = dict(info.value.problems)
    assert want_field in problems, info.value.problems
    assert want_words in problems[want_field]


def _cluster_queue(protection: object) -> dict[str, Any]:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": {
            "cohortName": "all",
            "preemption": {"reclaimWithinCohort": "Any", "protection": protection},
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [
                    {"name": "cpu", "nominalQuota": "10"},
                ]}],
            }],
        },
    }


def _errors(doc: dict[str, Any]) -> list[FieldError]:
    try:
        parse_object(doc)
    except ValidationFailed as err:
        return err.errors
    return []


def test_cluster_queue_protection_reaches_the_engine() -> None:
    obj = parse_object(_cluster_queue({
        "withinClusterQueue": {"minAdmitDuration": "2m"},
        "fairSharing": {"minAdmitDuration": "0s"},
    }))
    spec = from_api.cluster_queue(obj)  # type: ignore[arg-type]
    assert spec.preemption.protection == ProtectionConfig(
        timedelta(minutes=2), None, timedelta(0)
    )
    # Written back as given.
    assert obj.to_dict()["spec"]["preemption"]["protection"] == {
        "withinClusterQueue": {"minAdmitDuration": "2m"},
        "fairSharing": {"minAdmitDuration": "0s"},
    }


def test_cluster_queue_without_protection_takes_the_configurations() -> None:
    doc = _cluster_queue(None)
    del doc["spec"]["preemption"]["protection"]
    spec = from_api.cluster_queue(parse_object(doc))  # type: ignore[arg-type]
    assert spec.preemption.protection == ProtectionConfig()


@pytest.mark.parametrize(
    ("path", "value", "want_words"),
    [
        pytest.param("reclaimWithinCohort", "-1m", "is negative", id="negative"),
        pytest.param("fairSharing", "an hour", "is not a duration", id="not a Go duration"),
        pytest.param("withinClusterQueue", "1d", "is not a duration", id="days are not a unit"),
        pytest.param("withinClusterQueue", 60, "", id="a number"),
    ],
)
def test_bad_cluster_queue_protection_names_the_field(
    path: str, value: object, want_words: str
) -> None:
    errors = _errors(_cluster_queue({path: {"minAdmitDuration": value}}))
    field = f"spec.preemption.protection.{path}.minAdmitDuration"
    [err] = [e for e in errors if e.path == field]
    assert str(err).startswith(f"ClusterQueue team-a: {field}: ")
    assert want_words in err.message
    if isinstance(value, str):
        assert "at least 0" in err.allowed
