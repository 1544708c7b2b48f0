"""The bad-input table through kqueue's own validation, no cluster: the same field paths.

kqueue objects go through ``parse_object`` and ``validate``/``validate_update`` (what ``kqueue
convert``, ``kqueue simulate`` and the validating webhook use); Jobs through the Job webhook's
handler, called directly. Each must name the field the API server names (or one below it, where
the API server's CEL rule sits on a parent).
"""

from __future__ import annotations

import pytest

from kqueue.api.v1alpha1 import (
    FieldError,
    ValidationFailed,
    parse_object,
    validate,
    validate_update,
)
from kqueue.controller.integrations.job.webhook import JobWebhooks
from kqueue.controller.webhook_server import AdmissionRequest
from tests.reliability.bad_input_cases import (
    CASES,
    Case,
    Layer,
    deep,
    instantiate,
    normalize_path,
)

SUFFIX, NAMESPACE = "x1", "team-a"


def _kqueue_errors(case: Case) -> list[FieldError]:
    body = instantiate(case.body, SUFFIX, NAMESPACE)
    try:
        if not case.is_update:
            return validate(parse_object(body, validate=False))
        old = deep(body)
        if case.old_status is not None:
            old["status"] = instantiate(case.old_status, SUFFIX, NAMESPACE)
        new = deep(old)
        assert case.change is not None
        case.change(new)
        return validate_update(parse_object(old), parse_object(new, validate=False))
    except ValidationFailed as exc:
        return exc.errors


async def _job_errors(case: Case) -> list[str]:
    body = instantiate(case.body, SUFFIX, NAMESPACE)
    old = None
    if case.is_update:
        old, body = body, deep(body)
        assert case.change is not None
        case.change(body)
    req = AdmissionRequest(
        uid="u",
        operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "batch", "version": "v1", "kind": "Job"},
        resource={"group": "batch", "version": "v1", "resource": "jobs"},
        namespace=NAMESPACE,
        name=body["metadata"]["name"],
        object=body,
        old_object=old,
    )
    verdict = await JobWebhooks().validate(req)
    assert not verdict.allowed, f"{case.id}: the Job webhook allowed it"
    return [e.field for e in verdict.errors]


MODELLED = [pytest.param(case, id=case.id) for case in CASES if case.modelled]


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert {case.layer for case in CASES} >= {Layer.SCHEMA, Layer.CEL, Layer.WEBHOOK}
    assert len({case.id for case in CASES}) == len(CASES), "case ids must be unique"


@pytest.mark.parametrize("case", MODELLED)
async def test_kqueue_validation_names_the_same_field(case: Case) -> None:
    want = case.expected_model_path
    assert normalize_path(want).startswith(normalize_path(case.path)), (
        f"{case.id}: the model's path must lie under the API server's"
    )
    if case.kind in ("Job", "Pod"):
        paths = await _job_errors(case)
    else:
        paths = [e.path for e in _kqueue_errors(case)]
    assert paths, f"{case.id}: kqueue's validation accepted it"
    assert want in paths, f"{case.id}: expected {want!r} among {paths}"
