"""The shapes the Job and Pod webhooks rely on, checked before any of their logic runs.

The API server decodes a Job or Pod before it calls a webhook, so metadata, labels and
annotations are maps of strings and spec and the pod template are objects. Anything else can
still reach the webhook port (a client talking to it directly); such a request gets a denial
naming the field, never a handler crash.
"""

from __future__ import annotations

from typing import Any

from kqueue.controller.webhook_server import FieldError


def _string_map(value: Any, path: str, errors: list[FieldError]) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        errors.append(FieldError(path, "must be a map of strings to strings"))


def _pod_spec(spec: Any, path: str, errors: list[FieldError]) -> None:
    if not isinstance(spec, dict):
        errors.append(FieldError(path, "must be an object (a pod spec)"))
        return
    gates = spec.get("schedulingGates")
    if gates is not None and (
        not isinstance(gates, list) or not all(isinstance(g, dict) for g in gates)
    ):
        errors.append(FieldError(f"{path}.schedulingGates", "must be a list of objects"))


def shape_errors(obj: Any, kind: str) -> list[FieldError]:
    """What in a Job or Pod (``kind``) does not have the API server's decoded shape."""
    if obj is None:
        return []
    if not isinstance(obj, dict):
        return [FieldError("", f"a {kind} must be an object")]
    errors: list[FieldError] = []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        errors.append(FieldError("metadata", "must be an object"))
    else:
        _string_map(meta.get("labels"), "metadata.labels", errors)
        _string_map(meta.get("annotations"), "metadata.annotations", errors)
    spec = obj.get("spec")
    if kind == "Pod":
        _pod_spec(spec, "spec", errors)
        return errors
    if spec is None:
        return errors
    if not isinstance(spec, dict):
        return [*errors, FieldError("spec", "must be an object (a Job spec)")]
    for field in ("parallelism", "completions"):
        value = spec.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            errors.append(FieldError(f"spec.{field}", "must be an integer"))
    template = spec.get("template")
    if template is None:
        return errors
    if not isinstance(template, dict):
        return [*errors, FieldError("spec.template", "must be an object (a pod template)")]
    template_meta = template.get("metadata")
    if template_meta is not None and not isinstance(template_meta, dict):
        errors.append(FieldError("spec.template.metadata", "must be an object"))
    elif isinstance(template_meta, dict):
        _string_map(template_meta.get("labels"), "spec.template.metadata.labels", errors)
    if "spec" in template:
        _pod_spec(template["spec"], "spec.template.spec", errors)
    return errors


def request_shape_errors(obj: Any, old: Any, kind: str) -> list[FieldError]:
    return shape_errors(obj, kind) + [
        FieldError(f"oldObject.{e.field}" if e.field else "oldObject", e.message)
        for e in shape_errors(old, kind)
    ]
