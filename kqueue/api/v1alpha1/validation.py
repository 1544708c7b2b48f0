"""Semantic validation of kqueue.io/v1alpha1 objects (filled in below)."""

from __future__ import annotations

from kqueue.api.v1alpha1.errors import FieldError
from kqueue.api.v1alpha1.meta import KObject


def validate(obj: KObject) -> list[FieldError]:
    return []


def validate_update(old: KObject, new: KObject) -> list[FieldError]:
    return validate(new)
