"""The Configuration's admissionFairSharing (Kueue's shape), and admission fair sharing input
refused with the field named."""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

import pytest

from kqueue.api.config import ConfigurationError, load_configuration
from kqueue.api.config_schema import WEIGHT_PATTERN, configuration_json_schema
from kqueue.api.loader import LoadError, load_text
from kqueue.engine import from_api
from kqueue.engine.fairness.usage_ledger import AdmissionFairSharingConfig
from kqueue.engine.types import ResourceName


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("{}", None, id="absent: off"),
        pytest.param(
            "admissionFairSharing: {usageHalfLifeTime: 1h}",
            AdmissionFairSharingConfig(timedelta(hours=1), timedelta(minutes=5), {}),
            id="sampling interval defaults to 5m",
        ),
        pytest.param(
            "admissionFairSharing: {usageHalfLifeTime: 168h, usageSamplingInterval: 30s, "
            "resourceWeights: {cpu: 1.5, nvidia.com/gpu: '10', memory: 0}}",
            AdmissionFairSharingConfig(
                timedelta(hours=168),
                timedelta(seconds=30),
                {
                    ResourceName("cpu"): Fraction(3, 2),
                    ResourceName("nvidia.com/gpu"): Fraction(10),
                    ResourceName("memory"): Fraction(0),
                },
            ),
            id="weights exact, a YAML float read from its decimal text",
        ),
        pytest.param(
            "admissionFairSharing: {resourceWeights: {cpu: 0.1}}",
            AdmissionFairSharingConfig(
                timedelta(0), timedelta(minutes=5), {ResourceName("cpu"): Fraction(1, 10)}
            ),
            id="0.1 is one tenth, not the binary float",
        ),
    ],
)
def test_admission_fair_sharing_configuration(
    text: str, want: AdmissionFairSharingConfig | None
) -> None:
    assert from_api.admission_fair_sharing(load_configuration(text).admission_fair_sharing) == want


@pytest.mark.parametrize(
    ("text", "want_field", "want_words"),
    [
        pytest.param(
            "admissionFairSharing: {usageSamplingInterval: 0s}",
            "admissionFairSharing.usageSamplingInterval",
            "must be greater than 0",
            id="zero sampling interval",
        ),
        pytest.param(
            "admissionFairSharing: {usageHalfLifeTime: -1m}",
            "admissionFairSharing.usageHalfLifeTime",
            "must be greater than or equal to 0",
            id="negative half-life",
        ),
        pytest.param(
            "admissionFairSharing: {resourceWeights: {cpu: -1}}",
            "admissionFairSharing.resourceWeights.cpu",
            "must be greater than or equal to 0",
            id="negative resource weight",
        ),
        pytest.param(
            "admissionFairSharing: {resourceWeights: {cpu: lots}}",
            "admissionFairSharing.resourceWeights.cpu",
            "is not a number",
            id="non-numeric resource weight",
        ),
        pytest.param(
            "admissionFairSharing: {usageHalfLife: 1h}",
            "admissionFairSharing.usageHalfLife",
            "unknown field",
            id="misspelt field",
        ),
    ],
)
def test_bad_admission_fair_sharing_configuration_names_the_field(
    text: str, want_field: str, want_words: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_configuration(text, source="config.yaml")
    problems = dict(info.value.problems)
    assert want_field in problems, info.value.problems
    assert want_words in problems[want_field]


@pytest.mark.parametrize(
    ("text", "ok"),
    [("1", True), ("1.5", True), (".5", True), ("2e3", True), ("0", True), ("-1", False),
     ("x", False), ("1.5.2", False), ("", False)],
)
def test_weight_pattern_is_the_validator(text: str, ok: bool) -> None:
    """The chart's schema states the same rule as the model for string weights."""
    assert bool(re.match(WEIGHT_PATTERN, text)) == ok
    try:
        load_configuration(f"admissionFairSharing: {{resourceWeights: {{cpu: '{text}'}}}}")
        accepted = True
    except ConfigurationError:
        accepted = False
    assert accepted == ok
    schema = configuration_json_schema()["properties"]["admissionFairSharing"]
    assert "resourceWeights" in str(schema)


_LQ = "apiVersion: kqueue.io/v1alpha1\nkind: LocalQueue\nmetadata: {name: q, namespace: n}\n"


@pytest.mark.parametrize(
    ("spec", "want_path", "want_words"),
    [
        pytest.param("{clusterQueue: cq, fairSharing: {weight: '-1'}}", "spec.fairSharing.weight",
                     "must be greater than or equal to 0", id="negative LocalQueue weight"),
        pytest.param("{clusterQueue: cq, fairSharing: {weight: heavy}}", "spec.fairSharing.weight",
                     "not a quantity", id="non-numeric LocalQueue weight"),
    ],
)
def test_bad_local_queue_weight_names_the_field(spec: str, want_path: str, want_words: str) -> None:
    with pytest.raises(LoadError) as info:
        load_text(_LQ + "spec: " + spec)
    assert want_path in str(info.value) and want_words in str(info.value)


def test_bad_admission_mode_names_the_field() -> None:
    cq = (
        "apiVersion: kqueue.io/v1alpha1\nkind: ClusterQueue\nmetadata: {name: cq}\n"
        "spec: {admissionScope: {admissionMode: ByUsage}}"
    )
    with pytest.raises(LoadError) as info:
        load_text(cq)
    assert "spec.admissionScope.admissionMode" in str(info.value)
    assert "UsageBasedAdmissionFairSharing" in str(info.value)


@pytest.mark.parametrize(("weight", "want"), [("2", "2"), ("0", "0"), ("500m", "1/2"), (None, "1")])
def test_local_queue_weight_reaches_the_engine_exactly(weight: str | None, want: str) -> None:
    fs = "" if weight is None else f", fairSharing: {{weight: '{weight}'}}"
    [obj] = load_text(_LQ + "spec: {clusterQueue: cq" + fs + "}").objects
    assert obj.model is not None
    assert from_api.local_queue(obj.model).fair_weight == Fraction(want)  # type: ignore[arg-type]
