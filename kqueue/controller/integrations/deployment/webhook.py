"""Admission webhooks for Deployments (apps/v1) that name a queue.

Mutating (create and update), as Kueue's Deployment webhook: the Deployment's queue, priority,
preemption-priority and preemptibility labels are copied into its pod template (and removed
there when the Deployment drops them), and the template is marked
``kqueue.io/suspended-by-parent: deployment``. Each pod its ReplicaSet creates is then held by the
plain-pod webhook and admitted on its own.

Validating: what a Deployment cannot honour is refused naming the field (elastic WorkloadSlices,
partial admission, pod groups: each pod is already its own Workload); the queue and priority-class
labels cannot change while the Deployment has ready pods, and the queue label cannot be removed
(Kueue's rules). A ``kqueue.io/max-exec-time-seconds`` label is allowed but ignored, as Kueue
ignores it, with an admission warning saying so (:func:`max_exec_warnings`).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kqueue.api.integrations.deployment import PROPAGATED_LABELS, template_metadata
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.queue_labels import (
    object_labels,
    propagate_to_template,
    ready_replicas,
    running_label_errors,
    unsupported_annotation_errors,
)
from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate-apps-v1-deployment"
VALIDATE_PATH: Final = "/validate-apps-v1-deployment"

UNSUPPORTED_ANNOTATIONS: Final = {
    c.ELASTIC_JOB_ANNOTATION: "a Deployment cannot be elastic: each of its pods is its own "
    "Workload, so it scales pod by pod without WorkloadSlices",
    c.JOB_MIN_PARALLELISM_ANNOTATION: "partial admission is not supported for Deployments "
    "(each pod is admitted on its own)",
}


async def mutate(req: AdmissionRequest) -> Verdict:
    obj = req.object
    if req.operation not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        return Verdict.allow()
    if not object_labels(obj).get(c.QUEUE_NAME_LABEL):
        return Verdict.allow()  # the label is being removed: the validating webhook says no
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    template = spec.setdefault("template", {}) if isinstance(spec, dict) else None
    if not isinstance(template, dict):
        return Verdict.allow()  # malformed: the API server reports it
    want_labels, want_annotations = template_metadata(obj)
    propagate_to_template(template, want_labels, want_annotations, PROPAGATED_LABELS)
    return Verdict.patch(out) if out != obj else Verdict.allow()


async def validate(req: AdmissionRequest) -> Verdict:
    obj = req.object
    if not isinstance(obj, dict):
        return Verdict.allow()
    errors: list[FieldError] = []
    if object_labels(obj).get(c.QUEUE_NAME_LABEL):
        errors += unsupported_annotation_errors(obj, UNSUPPORTED_ANNOTATIONS)
        template = (obj.get("spec") or {}).get("template") or {}
        t_labels = (template.get("metadata") or {}).get("labels") or {}
        if c.POD_GROUP_NAME_LABEL in t_labels:
            errors.append(
                FieldError(
                    f"spec.template.metadata.labels[{c.POD_GROUP_NAME_LABEL}]",
                    "not supported: a Deployment's pods are each admitted on their own, never "
                    "as a pod group; remove it (use a StatefulSet for a gang)",
                )
            )
    old = req.old_object
    if req.operation == "UPDATE" and isinstance(old, dict):
        errors += running_label_errors(
            old, obj, kind="Deployment", ready=ready_replicas(old), unit="pods", gated=False
        )
    if errors:
        return Verdict.deny(*errors)
    return Verdict.allow(*max_exec_warnings(obj, old if isinstance(old, dict) else None))


def max_exec_warnings(obj: Obj, old: Obj | None) -> list[str]:
    """A warning for a ``kqueue.io/max-exec-time-seconds`` label on a managed Deployment, when
    it is set or changed. Kueue ignores it silently (its Deployment webhook copies only the
    queue and priority labels into the pod template, deployment_webhook.go Default, and each pod
    is its own Workload); kqueue ignores it too, but says so, lest a user count on a limit."""
    labels = object_labels(obj)
    key = c.MAX_EXEC_TIME_SECONDS_LABEL
    value = labels.get(key)
    if value is None or not labels.get(c.QUEUE_NAME_LABEL):
        return []
    if old is not None and object_labels(old).get(key) == value:
        return []
    meta = obj.get("metadata") or {}
    name = f"{meta.get('namespace') or 'default'}/{meta.get('name') or meta.get('generateName')}"
    return [
        f"metadata.labels[{key}]: ignored on Deployment {name}: a Deployment serves until it is "
        "deleted, and each of its pods is its own Workload, which this label does not reach; "
        "no maximum execution time applies (as in Kueue); remove the label"
    ]
