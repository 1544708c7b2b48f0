"""Admission webhooks for LeaderWorkerSets (leaderworkerset.x-k8s.io/v1) that name a queue.

Mutating (create and update), as Kueue's LeaderWorkerSet webhook: the leader and worker pod
templates get the LeaderWorkerSet's queue, priority-class, preemption-priority-class,
preemptibility and ``kqueue.io/max-exec-time-seconds`` labels (removed there when the
LeaderWorkerSet drops them), the parent marker ``kqueue.io/suspended-by-parent: leaderworkerset``, the group size as
``kqueue.io/pod-group-total-count``, and the ``kqueue.io/admission`` gate with the managed label,
so every pod is born held.

Validating, naming the field: an invalid ``kqueue.io/max-exec-time-seconds`` label (on create, or
when it changes), the elastic and partial-admission annotations, a
``kqueue.io/pod-group-name`` label in a template (kqueue names each group's pod group), removing
the queue label, changing the queue or priority-class label while the LeaderWorkerSet has ready
groups, and changing the group size (``spec.leaderWorkerTemplate.size``) while it is managed:
a group's Workload is sized at creation (Kueue's LWSImmutableGroupSize); ``startupPolicy:
LeaderReady`` and exclusive placement, which hold a group's workers until its leader runs.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kqueue.api.integrations import IntegrationError
from kqueue.api.integrations.leaderworkerset import LWS_PROPAGATED_LABELS, size, template_metadata
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.queue_labels import (
    max_exec_label_errors,
    object_labels,
    propagate_to_template,
    ready_replicas,
    running_label_errors,
    unsupported_annotation_errors,
)
from kqueue.controller.integrations.suspension import gate_templates
from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
VALIDATE_PATH: Final = "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"

UNSUPPORTED_ANNOTATIONS: Final = {
    c.ELASTIC_JOB_ANNOTATION: "a LeaderWorkerSet cannot be elastic: it scales group by group, "
    "each group its own Workload",
    c.JOB_MIN_PARALLELISM_ANNOTATION: "partial admission is not supported for LeaderWorkerSets "
    "(each group is admitted whole)",
}
TEMPLATE_PATHS: Final = ("leaderTemplate", "workerTemplate")
EXCLUSIVE_TOPOLOGY_ANNOTATION: Final = "leaderworkerset.sigs.k8s.io/exclusive-topology"


def _templates(obj: Obj) -> dict[str, Obj]:
    lwt = (obj.get("spec") or {}).get("leaderWorkerTemplate") or {}
    return {k: lwt[k] for k in TEMPLATE_PATHS if isinstance(lwt.get(k), dict)}


async def mutate(req: AdmissionRequest) -> Verdict:
    obj = req.object
    if req.operation not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        return Verdict.allow()
    if not object_labels(obj).get(c.QUEUE_NAME_LABEL):
        return Verdict.allow()  # the label is being removed: the validating webhook says no
    try:
        want_labels, want_annotations = template_metadata(obj)
    except IntegrationError:
        return Verdict.allow()  # malformed size: the validating webhook names the field
    out = copy.deepcopy(obj)
    templates = list(_templates(out).values())
    for template in templates:
        propagate_to_template(template, want_labels, want_annotations, LWS_PROPAGATED_LABELS)
    gate_templates(templates)
    return Verdict.patch(out) if out != obj else Verdict.allow()


async def validate(req: AdmissionRequest) -> Verdict:
    obj = req.object
    if not isinstance(obj, dict):
        return Verdict.allow()
    errors: list[FieldError] = []
    managed = bool(object_labels(obj).get(c.QUEUE_NAME_LABEL))
    if managed:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        errors += unsupported_annotation_errors(obj, UNSUPPORTED_ANNOTATIONS)
        errors += max_exec_label_errors(obj, req.old_object)
        for name, template in _templates(obj).items():
            t_labels = (template.get("metadata") or {}).get("labels") or {}
            if c.POD_GROUP_NAME_LABEL in t_labels:
                errors.append(
                    FieldError(
                        f"spec.leaderWorkerTemplate.{name}.metadata.labels[{c.POD_GROUP_NAME_LABEL}]",
                        "not supported: kqueue makes each group of a LeaderWorkerSet its own pod "
                        "group; remove it",
                    )
                )
        try:
            size(obj)
        except IntegrationError as exc:
            errors.append(FieldError(exc.path, exc.detail))
        # Both make the controller create a group's workers only once its leader is ready or
        # scheduled; a gated leader never is, and the group is admitted only once all of its
        # pods exist: it would wait forever.
        if (obj.get("spec") or {}).get("startupPolicy") == "LeaderReady":
            errors.append(
                FieldError(
                    "spec.startupPolicy",
                    "LeaderReady is not supported on a LeaderWorkerSet kqueue queues: each group "
                    "is admitted once all of its pods exist, and its workers would wait for a "
                    "leader held until then; use LeaderCreated",
                )
            )
        if EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations:
            errors.append(
                FieldError(
                    f"metadata.annotations[{EXCLUSIVE_TOPOLOGY_ANNOTATION}]",
                    "not supported on a LeaderWorkerSet kqueue queues: its workers would wait "
                    "for a leader that is held until the whole group exists; remove it",
                )
            )
    old = req.old_object
    if req.operation == "UPDATE" and isinstance(old, dict):
        errors += running_label_errors(
            old, obj, kind="LeaderWorkerSet", ready=ready_replicas(old), unit="groups", gated=True
        )
        if managed and object_labels(old).get(c.QUEUE_NAME_LABEL):
            try:
                before_size, after_size = size(old), size(obj)
            except IntegrationError:
                before_size = after_size = 0
            if before_size != after_size:
                errors.append(
                    FieldError(
                        "spec.leaderWorkerTemplate.size",
                        f"field is immutable while kqueue manages the LeaderWorkerSet: cannot "
                        f"change from {before_size} to {after_size} (each group's Workload is "
                        "sized at creation); change spec.replicas to scale, or re-create it",
                    )
                )
    return Verdict.deny(*errors) if errors else Verdict.allow()
