"""The plain-Pod webhook: a pod kqueue manages on its own is held at creation.

``mplainpod.kqueue.io`` selects pods that name a queue and do not carry the managed label yet
(a Job's pods carry it from their template), so only pods created on their own get here; the
handler also skips controller-owned pods (but those of pod-based workloads: Argo Workflows,
Tekton, ``kqueue.api.integrations.pod.POD_BASED_OWNERS``). It adds the ``kqueue.io/admission`` gate, the
``kqueue.io/managed`` label (so kqueue's pod informer sees the pod) and the ``kqueue.io/managed``
finalizer, which keeps the pod, and so its accounting, until kqueue has seen it terminate. A pod
of a pod group without a valid ``kqueue.io/pod-group-total-count`` is refused, naming the
annotation and what it allows.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kqueue.api.integrations import IntegrationError, group_name, group_total_count
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import add_gate
from kqueue.controller.integrations.pod.generic import is_plain
from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate--v1-pod-plain"
WEBHOOK_NAME: Final = "mplainpod.kqueue.io"
TOTAL_COUNT_ALLOWED: Final = 'the number of pods in the group, a whole number from 1, e.g. "3"'


def group_errors(pod: Obj) -> list[FieldError]:
    """A pod of a pod group whose ``kqueue.io/pod-group-total-count`` is missing or not a whole
    number above 0: refused at creation, as Kueue's pod webhook refuses it (its group could never
    be admitted)."""
    if group_name(pod) is None:
        return []
    try:
        group_total_count(pod)
    except IntegrationError as err:
        return [FieldError(err.path, f"{err.detail} (allowed: {TOTAL_COUNT_ALLOWED})")]
    return []


async def mutate_plain_pod(req: AdmissionRequest) -> Verdict:
    """Hold a plain pod at creation: gate, managed label, finalizer."""
    pod = req.object or {}
    if req.operation != "CREATE" or not is_plain(pod):
        return Verdict.allow()
    if errors := group_errors(pod):
        return Verdict.deny(*errors)
    out = copy.deepcopy(pod)
    # Null fields are read as empty: the API server reports what is wrong with such a pod.
    out["spec"] = out.get("spec") or {}
    changed = add_gate(out["spec"])
    meta = out["metadata"] = out.get("metadata") or {}
    labels = meta["labels"] = meta.get("labels") or {}
    if labels.get(c.MANAGED_LABEL) != "true":
        labels[c.MANAGED_LABEL] = "true"
        changed = True
    finalizers = meta["finalizers"] = meta.get("finalizers") or []
    if c.MANAGED_FINALIZER not in finalizers:
        finalizers.append(c.MANAGED_FINALIZER)
        changed = True
    return Verdict.patch(out) if changed else Verdict.allow()


