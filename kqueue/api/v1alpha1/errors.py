"""Validation errors in one format, whether pydantic or kqueue's own rules found them.

A :class:`FieldError` names the object (``Kind ns/name``), the field in Kubernetes' path syntax
(``spec.resourceGroups[0].flavors[1].resources[0].nominalQuota``, map keys as
``requests[cpu]``), what is wrong, and what is allowed.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, replace
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class FieldError:
    """One invalid field."""

    path: str
    message: str
    allowed: str = ""
    obj: str = ""

    def __str__(self) -> str:
        where = f"{self.obj}: " if self.obj else ""
        text = f"{where}{self.path or '<object>'}: {self.message}"
        if self.allowed:
            text += f" (allowed: {self.allowed})"
        return text

    def for_object(self, obj: str) -> FieldError:
        return replace(self, obj=obj)


class ValidationFailed(ValueError):
    """An object is invalid; ``errors`` lists every problem found."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors) or "invalid object")


def field_path(*parts: str | int) -> str:
    """Join parts into a Kubernetes field path: names with '.', indexes as [i]."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif out:
            out += f".{p}"
        else:
            out = p
    return out


# --- pydantic errors -> FieldError --------------------------------------------------------------


def _unwrap(annotation: Any) -> Any:
    """Strip Annotated and Optional to the type that governs the next path element."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _find_field(model: type[BaseModel], key: str) -> tuple[str, Any] | None:
    for name, f in model.model_fields.items():
        if key in (name, f.alias):
            return f.alias or name, f.annotation
    return None


def _known_fields(model: type[BaseModel]) -> str:
    return ", ".join(sorted(f.alias or n for n, f in model.model_fields.items()))


def _walk(model: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[str, type[BaseModel] | None]:
    """The Kubernetes path of ``loc`` and the model holding its last element."""
    path = ""
    current: Any = model
    parent: type[BaseModel] | None = None
    for item in loc:
        if item == "[key]":  # pydantic's marker for an invalid dict key: the key is the field
            continue
        current = _unwrap(current)
        origin = get_origin(current)
        if isinstance(current, type) and issubclass(current, BaseModel) and isinstance(item, str):
            parent = current
            found = _find_field(current, item)
            alias, current = found if found is not None else (item, None)
            path = f"{path}.{alias}" if path else alias
        elif origin is list and isinstance(item, int):
            path += f"[{item}]"
            current = get_args(current)[0] if get_args(current) else None
            parent = None
        elif origin is dict and isinstance(item, str):
            path += f"[{item}]"
            args = get_args(current)
            current = args[1] if len(args) == 2 else None
            parent = None
        else:
            path += f"[{item}]" if isinstance(item, int) else (f".{item}" if path else str(item))
            current = None
            parent = None
    return path, parent


def _got(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _count(value: Any, actual: Any) -> str:
    if isinstance(actual, int):
        return f", got {actual}"
    if isinstance(value, dict | list):
        return f", got {len(value)}"
    return ""


def _describe(err: Any, parent: type[BaseModel] | None) -> tuple[str, str]:
    """Message and allowed values for one pydantic error."""
    kind: str = err["type"]
    ctx: dict[str, Any] = err.get("ctx") or {}
    value = err.get("input")
    if "allowed" in ctx:
        return str(err["msg"]), str(ctx["allowed"])
    if kind == "missing":
        return "required field is missing", ""
    if kind == "extra_forbidden":
        return "unknown field", _known_fields(parent) if parent is not None else ""
    if kind in ("literal_error", "enum"):
        return f"unsupported value {_got(value)}", str(ctx.get("expected", ""))
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer, got {_got(value)}", "an integer"
    if kind in ("string_type",):
        return f"must be a string, got {_got(value)}", "a string"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, got {_got(value)}", "true or false"
    if kind == "list_type":
        return f"must be a list, got {_got(value)}", "a list"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be an object (a mapping), got {_got(value)}", "an object"
    if kind in ("too_short", "too_long"):
        least = kind == "too_short"
        n = ctx.get("min_length" if least else "max_length")
        got = _count(value, ctx.get("actual_length"))
        bound = f"at least {n}" if least else f"at most {n}"
        return f"must have {bound} {'entry' if n == 1 else 'entries'}{got}", bound
    if kind == "string_too_short":
        n = ctx.get("min_length")
        return ("must not be empty" if n == 1 else f"must be at least {n} characters"), (
            f"at least {n} characters"
        )
    if kind == "string_too_long":
        n = ctx.get("max_length")
        return f"must be at most {n} characters", f"at most {n} characters"
    if kind == "string_pattern_mismatch":
        return f"{_got(value)} does not match the required format", f"pattern {ctx.get('pattern')}"
    if kind == "greater_than_equal":
        return f"must be greater than or equal to {ctx.get('ge')}, got {_got(value)}", (
            f">= {ctx.get('ge')}"
        )
    if kind == "less_than_equal":
        return f"must be less than or equal to {ctx.get('le')}, got {_got(value)}", (
            f"<= {ctx.get('le')}"
        )
    return str(err["msg"]), ""


def from_pydantic(model: type[BaseModel], exc: ValidationError, obj: str = "") -> list[FieldError]:
    """Turn pydantic's errors for ``model`` into FieldErrors with Kubernetes paths."""
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        path, parent = _walk(model, tuple(err["loc"]))
        message, allowed = _describe(err, parent)
        out.append(FieldError(path=path, message=message, allowed=allowed, obj=obj))
    return out
