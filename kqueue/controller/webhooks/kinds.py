"""Validating webhook for the kqueue.io kinds: the rules the CRD schema cannot express.

Create: :func:`kqueue.api.v1alpha1.validate`; update: :func:`validate_update` (immutable
fields, a Workload's admission that can be set or cleared but not changed...). Every error names
the field and what is allowed.
"""

from __future__ import annotations

from kqueue.api.v1alpha1 import FieldError as ApiFieldError
from kqueue.api.v1alpha1 import ValidationFailed, parse_object, validate, validate_update
from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict

VALIDATE_PATH = "/validate-kqueue-io-v1alpha1"


def _field_errors(errors: list[ApiFieldError]) -> list[FieldError]:
    out: list[FieldError] = []
    for e in errors:
        message = e.message + (f" (allowed: {e.allowed})" if e.allowed else "")
        out.append(FieldError(e.path or "<object>", message))
    return out


async def validate_kqueue_object(req: AdmissionRequest) -> Verdict:
    if req.operation not in ("CREATE", "UPDATE") or req.object is None:
        return Verdict.allow()
    try:
        new = parse_object(req.object, validate=False)
        old = (
            parse_object(req.old_object, validate=False)
            if req.operation == "UPDATE" and req.old_object is not None
            else None
        )
    except ValidationFailed as exc:
        return Verdict.deny(*_field_errors(exc.errors))
    if (
        old is not None
        and req.sub_resource is None
        and new.metadata.deletion_timestamp is not None
    ):
        return Verdict.allow()  # finalizers going away on a deleted object
    # Both were just read from the request: their types are checked, only the rules are left.
    errors = validate(new, fresh=True) if old is None else validate_update(old, new, fresh=True)
    if errors:
        return Verdict.deny(*_field_errors(errors))
    return Verdict.allow()
