"""The admission-check API: shapes, defaults and validation errors naming object and field."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    ClusterQueue,
    ValidationFailed,
    parse_object,
    validate_update,
)


def _doc(kind: str, spec: dict[str, Any], name: str = "x", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
        **extra,
    }


def _errors(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationFailed) as exc:
        parse_object(doc)
    return [str(e) for e in exc.value.errors]


def test_provisioning_config_defaults_retry_strategy_as_kueue() -> None:
    prc = parse_object(
        _doc("ProvisioningRequestConfig", {"provisioningClassName": "check-capacity.x"})
    )
    assert prc.to_dict()["spec"]["retryStrategy"] == {
        "backoffLimitCount": 3,
        "backoffBaseSeconds": 60,
        "backoffMaxSeconds": 1800,
    }


def test_parameter_longer_than_255_names_the_field() -> None:
    errors = _errors(
        _doc(
            "ProvisioningRequestConfig",
            {"provisioningClassName": "c", "parameters": {"maxRunDurationSeconds": "9" * 256}},
            name="prov",
        )
    )
    assert any(
        "ProvisioningRequestConfig prov" in e and "spec.parameters.maxRunDurationSeconds" in e
        for e in errors
    ), errors


def test_strategy_duplicate_check_names_the_field() -> None:
    spec = {
        "admissionChecksStrategy": {
            "admissionChecks": [{"name": "prov"}, {"name": "prov", "onFlavors": ["a", "a"]}]
        }
    }
    errors = _errors(_doc("ClusterQueue", spec, name="cq"))
    joined = "\n".join(errors)
    assert "ClusterQueue cq" in joined
    assert "spec.admissionChecksStrategy.admissionChecks[1]" in joined
    assert "spec.admissionChecksStrategy.admissionChecks[1].onFlavors[1]" in joined


def test_strategy_checks_for_flavors() -> None:
    cq = parse_object(
        _doc(
            "ClusterQueue",
            {
                "admissionChecksStrategy": {
                    "admissionChecks": [
                        {"name": "all"},
                        {"name": "spot-only", "onFlavors": ["spot"]},
                    ]
                }
            },
        )
    )
    assert isinstance(cq, ClusterQueue)
    strategy = cq.spec.admission_checks_strategy
    assert strategy is not None
    assert strategy.checks_for({"spot"}) == ["all", "spot-only"]
    assert strategy.checks_for({"reserved"}) == ["all"]


def test_controller_name_is_immutable() -> None:
    old = parse_object(_doc("AdmissionCheck", {"controllerName": "a.io/x"}, name="ac"))
    new = parse_object(_doc("AdmissionCheck", {"controllerName": "b.io/y"}, name="ac"))
    assert isinstance(old, AdmissionCheck)
    errors = [str(e) for e in validate_update(old, new)]
    assert any("AdmissionCheck ac" in e and "spec.controllerName" in e for e in errors), errors


def test_workload_check_state_unknown_pod_set_and_bad_state() -> None:
    wl = _doc(
        "Workload",
        {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
        name="w",
        status={
            "admissionChecks": [
                {"name": "prov", "state": "Ready", "message": "",
                 "podSetUpdates": [{"name": "other", "labels": {"a": "b"}}]}
            ]
        },
    )
    wl["metadata"]["namespace"] = "ns"
    errors = _errors(wl)
    assert any("status.admissionChecks[0].podSetUpdates[0].name" in e for e in errors), errors
    wl["status"]["admissionChecks"][0]["state"] = "Done"
    errors = _errors(wl)
    assert any("status.admissionChecks.0.state" in e or "admissionChecks[0].state" in e
               for e in errors), errors
