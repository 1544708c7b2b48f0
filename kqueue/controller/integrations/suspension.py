"""Suspended while queued: the mutating-webhook side, shared by every kind with a suspend switch.

* CREATE: the object gets the ``kqueue.io/admission`` gate and the managed label in each of its
  pod templates, and is suspended as kqueue's (``spec.suspend: true`` plus the annotation
  ``kqueue.io/suspended-by-kqueue``), so it has no pods until admitted. An object its user created
  suspended is left suspended without the annotation: it is the user's until resumed.
* UPDATE: a resume (``spec.suspend`` true -> false) by anyone but kqueue becomes queueing: the
  object stays suspended, now by kqueue, and the user is told so. kqueue resumes and drops the
  annotation in one patch, which is how its own resume is told apart.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.admission import AdmissionRequest, Verdict
from kqueue.controller.integrations.gate import add_gate

Obj = dict[str, Any]

QUEUED_WARNING = (
    "spec.suspend: kqueue holds this {kind} suspended until its Workload is admitted "
    "(see `kubectl get workloads -n {namespace}`)"
)


def _annotations(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def suspended(obj: Obj) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))


def gate_templates(templates: Iterable[Obj]) -> bool:
    """The gate and the managed label in each pod template (in place); whether any changed."""
    changed = False
    for template in templates:
        changed |= add_gate(template.setdefault("spec", {}))
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        if labels.get(c.MANAGED_LABEL) != "true":
            labels[c.MANAGED_LABEL] = "true"
            changed = True
    return changed


def hold_suspended(obj: Obj) -> bool:
    """Suspend the object as kqueue's (in place); returns whether it changed anything."""
    spec = obj.setdefault("spec", {})
    meta = obj.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    if spec.get("suspend") and annotations.get(c.SUSPENDED_BY_KQUEUE_ANNOTATION) == "true":
        return False
    spec["suspend"] = True
    meta["annotations"] = {**annotations, c.SUSPENDED_BY_KQUEUE_ANNOTATION: "true"}
    return True


def resumed_by_other(old: Obj, new: Obj, *, started: bool = False) -> bool:
    """A resume kqueue did not make. ``started``: the old object still runs (its controller has
    not reset it since a suspension), so this is not a queued object being resumed."""
    if not suspended(old) or suspended(new) or started:
        return False
    return c.SUSPENDED_BY_KQUEUE_ANNOTATION in _annotations(new) or (
        c.SUSPENDED_BY_KQUEUE_ANNOTATION not in _annotations(old)
    )


def mutate_suspendable(
    req: AdmissionRequest,
    *,
    kind: str,
    pod_templates: Callable[[Obj], Iterable[Obj]],
    started: Callable[[Obj], bool] = lambda _old: False,
) -> Verdict:
    """The mutating webhook of a suspendable kind, for an object kqueue manages."""
    obj = req.object or {}
    if req.operation == "UPDATE":
        old = req.old_object or {}
        if not resumed_by_other(old, obj, started=started(old)):
            return Verdict.allow()
        out = copy.deepcopy(obj)
        hold_suspended(out)
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        return Verdict.patch(out, QUEUED_WARNING.format(kind=kind, namespace=namespace))
    if req.operation != "CREATE":
        return Verdict.allow()
    out = copy.deepcopy(obj)
    gate_templates(pod_templates(out))
    if not suspended(obj):
        hold_suspended(out)
    return Verdict.patch(out) if out != obj else Verdict.allow()
