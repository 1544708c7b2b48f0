"""The Configuration's fairSharing (Kueue's config v1beta2 shape) and the weights it uses."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kqueue.api.config import ConfigurationError, load_configuration
from kqueue.api.loader import load_text
from kqueue.api.v1alpha1 import Cohort
from kqueue.engine import from_api
from kqueue.engine.types import FairSharingConfig, FairSharingStrategy

LE, LT = FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, FairSharingStrategy.LESS_THAN_INITIAL_SHARE


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("{}", None, id="absent: off"),
        pytest.param("fairSharing: {}", FairSharingConfig((LE, LT)), id="present: both strategies"),
        pytest.param(
            "fairSharing: {preemptionStrategies: [LessThanInitialShare]}",
            FairSharingConfig((LT,)),
            id="only LessThanInitialShare",
        ),
        pytest.param(
            "fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare]}",
            FairSharingConfig((LE,)),
            id="only LessThanOrEqualToFinalShare",
        ),
    ],
)
def test_fair_sharing_configuration(text: str, want: FairSharingConfig | None) -> None:
    assert from_api.fair_sharing(load_configuration(text).fair_sharing) == want


@pytest.mark.parametrize(
    ("text", "want_field", "want_words"),
    [
        pytest.param(
            "fairSharing: {preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]}",
            "fairSharing.preemptionStrategies",
            "allowed lists are",
            id="strategies in the wrong order",
        ),
        pytest.param(
            "fairSharing: {preemptionStrategies: []}",
            "fairSharing.preemptionStrategies",
            "unsupported list []",
            id="no strategy",
        ),
        pytest.param(
            "fairSharing: {preemptionStrategies: [Fairest]}",
            "fairSharing.preemptionStrategies[0]",
            "'Fairest'",
            id="unknown strategy",
        ),
        pytest.param(
            "fairSharing: {enable: true}",
            "fairSharing.enable",
            "unknown field",
            id="Kueue v1beta1's enable",
        ),
    ],
)
def test_bad_fair_sharing_configuration_names_the_field(text: str, want_field: str, want_words: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_configuration(text, source="config.yaml")
    problems = dict(info.value.problems)
    assert want_field in problems, info.value.problems
    assert want_words in problems[want_field]


@pytest.mark.parametrize(
    ("weight", "want"),
    [("2", "2"), ("0", "0"), ("0.5", "1/2"), ("1500m", "3/2"), (None, "1")],
)
def test_weights_reach_the_engine_exactly(weight: str | None, want: str) -> None:
    fs = "" if weight is None else f"\n  fairSharing: {{weight: \"{weight}\"}}"
    loaded = load_text(
        "apiVersion: kqueue.io/v1alpha1\nkind: Cohort\nmetadata: {name: c}\nspec:" + (fs or " {}")
    )
    [obj] = loaded.objects
    assert isinstance(obj.model, Cohort)
    assert from_api.cohort(obj.model).fair_weight == Fraction(want)
