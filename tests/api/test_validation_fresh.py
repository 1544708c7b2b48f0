"""``validate(obj, fresh=True)``, the admission webhook's check of an object it just read, finds
exactly what the full check (manifest round trip plus rules) finds, for every rule case and
update case of test_validation and for the samples."""

from __future__ import annotations

import copy

import pytest

from kqueue.api.v1alpha1 import ValidationFailed, parse_object, validate, validate_update
from tests.api import samples
from tests.api.test_validation import CASES, UPDATE_CASES, Case, UpdateCase

SAMPLES = ["ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass",
           "Workload"]


@pytest.mark.parametrize("kind", SAMPLES)
def test_samples(kind: str) -> None:
    obj = parse_object(samples.load(kind), validate=False)
    assert validate(obj, fresh=True) == validate(obj) == []


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rule_cases(case: Case) -> None:
    doc = case.make()
    case.edit(doc)
    try:
        obj = parse_object(doc, validate=False)
    except ValidationFailed:
        return  # a type error: the webhook denies at the read, before either check
    fresh = validate(obj, fresh=True)
    assert fresh == validate(obj)
    assert case.want_path in [e.path for e in fresh]


@pytest.mark.parametrize("case", UPDATE_CASES, ids=[c.name for c in UPDATE_CASES])
def test_update_cases(case: UpdateCase) -> None:
    before = case.make()
    after = copy.deepcopy(before)
    case.edit(after)
    old, new = parse_object(before, validate=False), parse_object(after, validate=False)
    assert validate_update(old, new, fresh=True) == validate_update(old, new)
