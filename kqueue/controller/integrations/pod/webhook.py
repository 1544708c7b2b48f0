"""The plain-Pod webhook: a pod kqueue manages on its own is held at creation.

``mplainpod.kqueue.io`` selects pods that name a queue and do not carry the managed label yet
(a Job's pods carry it from their template), so only pods created on their own get here; the
handler also skips controller-owned pods. It adds the ``kqueue.io/admission`` gate, the
``kqueue.io/managed`` label (so kqueue's pod informer sees the pod) and the ``kqueue.io/managed``
finalizer, which keeps the pod, and so its accounting, until kqueue has seen it terminate.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.admission import AdmissionRequest, Verdict
from kqueue.controller.gate import add_gate
from kqueue.controller.integrations.pod.reconciler import is_plain

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate--v1-pod-plain"
WEBHOOK_NAME: Final = "mplainpod.kqueue.io"


async def mutate_plain_pod(req: AdmissionRequest) -> Verdict:
    """Hold a plain pod at creation: gate, managed label, finalizer."""
    pod = req.object or {}
    if req.operation != "CREATE" or not is_plain(pod):
        return Verdict.allow()
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


