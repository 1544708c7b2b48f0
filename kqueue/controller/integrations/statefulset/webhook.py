"""Admission webhooks for StatefulSets (apps/v1) that name a queue.

Mutating (create and update): the pod template gets the ``kqueue.io/admission`` gate and the
managed label, so every pod is born held and kqueue's pod informer sees it. Validating, as
Kueue's StatefulSet webhook: partial admission is refused, and so (as for a Job) is an invalid
``kqueue.io/max-exec-time-seconds`` label, which the Workload takes (the StatefulSet is one gang); the
queue and priority-class labels cannot change, nor be removed, while the StatefulSet has ready
pods; nor can the pods' shape (requests, ports, node selector, affinity, tolerations...: what the
admitted Workload was charged for). ``spec.replicas`` may change: that is how it is resized.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kqueue.api.integrations import role_hash
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.queue_labels import (
    max_exec_label_errors,
    object_labels,
    ready_replicas,
    running_label_errors,
    unsupported_annotation_errors,
)
from kqueue.controller.integrations.suspension import gate_templates
from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate-apps-v1-statefulset"
VALIDATE_PATH: Final = "/validate-apps-v1-statefulset"

UNSUPPORTED_ANNOTATIONS: Final = {
    c.JOB_MIN_PARALLELISM_ANNOTATION: "partial admission is not supported for StatefulSets "
    "(all replicas are admitted as one gang)",
}


def _shape(obj: Obj) -> str | None:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec")
    if not isinstance(spec, dict):
        return None
    return role_hash({"spec": spec})


def _pod_spec(obj: Obj) -> Obj:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _changed_path(old: Obj, new: Obj) -> str:
    """The most precise path of a shape change: a container's requests, else the pod spec."""
    before, after = _pod_spec(old), _pod_spec(new)
    for part in ("initContainers", "containers"):
        a, b = before.get(part) or [], after.get(part) or []
        if len(a) != len(b):
            return f"spec.template.spec.{part}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if (x.get("resources") or {}).get("requests") != (y.get("resources") or {}).get("requests"):
                return f"spec.template.spec.{part}[{i}].resources.requests"
    return "spec.template.spec"


async def mutate(req: AdmissionRequest) -> Verdict:
    obj = req.object
    if req.operation not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        return Verdict.allow()
    if not object_labels(obj).get(c.QUEUE_NAME_LABEL):
        return Verdict.allow()  # the label is being removed: the validating webhook says no
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    if not isinstance(spec, dict):
        return Verdict.allow()  # malformed: the API server reports it
    template = spec.setdefault("template", {})
    if not isinstance(template, dict):
        return Verdict.allow()
    changed = gate_templates([template])
    if req.operation == "CREATE" and _gang_opt_out(spec, template):
        changed = True
    return Verdict.patch(out) if changed else Verdict.allow()


def _gang_opt_out(spec: Obj, template: Obj) -> bool:
    """An ordered StatefulSet (``podManagementPolicy: OrderedReady``, the default) keeps its pods
    out of gang scheduling: it creates pod ``n+1`` only once pod ``n`` is ready, so a gang
    sized to its replicas would wait for pods that are never created (see
    :mod:`kqueue.controller.gang`). Set at creation only (the policy is immutable, and a later
    template change would roll the pods); a value the user set stands."""
    if spec.get("podManagementPolicy") == "Parallel":
        return False
    meta = template.setdefault("metadata", {})
    if not isinstance(meta, dict):
        return False
    annotations = meta.get("annotations") or {}
    if c.GANG_SCHEDULING_ANNOTATION in annotations:
        return False
    meta["annotations"] = {**annotations, c.GANG_SCHEDULING_ANNOTATION: "false"}
    return True


async def validate(req: AdmissionRequest) -> Verdict:
    obj = req.object
    if not isinstance(obj, dict):
        return Verdict.allow()
    errors: list[FieldError] = []
    if object_labels(obj).get(c.QUEUE_NAME_LABEL):
        errors += unsupported_annotation_errors(obj, UNSUPPORTED_ANNOTATIONS)
        errors += max_exec_label_errors(obj, req.old_object)
    old = req.old_object
    if req.operation == "UPDATE" and isinstance(old, dict):
        running = ready_replicas(old) > 0
        errors += running_label_errors(
            old, obj, kind="StatefulSet", ready=ready_replicas(old), unit="pods", gated=True
        )
        if object_labels(old).get(c.QUEUE_NAME_LABEL) and running and _shape(old) != _shape(obj):
            errors.append(
                FieldError(
                    _changed_path(old, obj),
                    "the pods' requests, ports, node selector, affinity, tolerations, runtime "
                    "class, priority, topology spread, overhead and resource claims are "
                    f"immutable while the StatefulSet has ready pods ({ready_replicas(old)}): its "
                    "admitted Workload was charged for them; scale it to 0 first",
                )
            )
    return Verdict.deny(*errors) if errors else Verdict.allow()
