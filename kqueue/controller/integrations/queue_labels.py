"""What the integrations' webhooks share about an object's queue labels: the validating checks
(annotations a kind cannot honour; the queue and priority-class labels of a running object, as
Kueue rules for the apps kinds) and, for the apps kinds, copying them into a pod template."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kqueue.api.integrations import IntegrationError, max_exec_time_seconds
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.webhook_server import FieldError

Obj = dict[str, Any]


def object_labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def ready_replicas(obj: Obj) -> int:
    """``status.readyReplicas`` of an apps kind (pods, or groups of pods)."""
    return int((obj.get("status") or {}).get("readyReplicas") or 0)


def propagate_to_template(
    template: Obj,
    want_labels: Mapping[str, str],
    want_annotations: Mapping[str, str],
    propagated: Iterable[str],
) -> None:
    """Set the ``propagated`` label keys of a pod template (in place) to the owner's
    (``want_labels``), removing those the owner no longer has, and add ``want_annotations``."""
    meta = template.setdefault("metadata", {})
    labels = meta["labels"] = dict(meta.get("labels") or {})
    annotations = meta["annotations"] = dict(meta.get("annotations") or {})
    for key in propagated:
        if key in want_labels:
            labels[key] = want_labels[key]
        else:
            labels.pop(key, None)
    annotations.update(want_annotations)


def unsupported_annotation_errors(obj: Obj, unsupported: Mapping[str, str]) -> list[FieldError]:
    """Each annotation of ``obj`` the kind cannot honour (``unsupported``: annotation -> why)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return [
        FieldError(f"metadata.annotations[{key}]", f"not supported: {why}; remove it")
        for key, why in unsupported.items()
        if key in annotations
    ]


def running_label_errors(
    old: Obj, new: Obj, *, kind: str, ready: int, unit: str, gated: bool
) -> list[FieldError]:
    """An update of an apps kind (no suspend switch): the queue label cannot be removed, and the
    queue and priority-class labels cannot change while ``ready`` of its ``unit`` (pods, groups)
    are ready. ``gated``: its pods are held by kqueue's gate, so removing the label would strand
    them."""
    errors: list[FieldError] = []
    held = "its pods are held by kqueue's gate; " if gated else ""
    for key in (c.QUEUE_NAME_LABEL, c.PRIORITY_CLASS_LABEL):
        before, after = object_labels(old).get(key), object_labels(new).get(key)
        if before == after:
            continue
        if key == c.QUEUE_NAME_LABEL and before and not after:
            errors.append(
                FieldError(
                    f"metadata.labels[{key}]",
                    f"cannot be removed from a {kind} kqueue manages (was {before!r}): "
                    f"{held}delete and re-create the {kind} to run it without kqueue",
                )
            )
        elif ready > 0:
            errors.append(
                FieldError(
                    f"metadata.labels[{key}]",
                    f"field is immutable while the {kind} has ready {unit} "
                    f"({ready}): cannot change from {before!r} to {after!r}",
                )
            )
    return errors


def max_exec_label_errors(new: Obj, old: Obj | None) -> list[FieldError]:
    """An invalid ``kqueue.io/max-exec-time-seconds`` label on a kind whose Workload takes it,
    checked on create (``old`` None) or when it changes (Kueue's validateCreateForMaxExecTime):
    kqueue would not build the Workload, so the object is refused naming the label."""
    labels = object_labels(new)
    key = c.MAX_EXEC_TIME_SECONDS_LABEL
    if old is not None and object_labels(old).get(key) == labels.get(key):
        return []
    try:
        max_exec_time_seconds(labels)
    except IntegrationError as exc:
        return [FieldError(exc.path, exc.detail)]
    return []
