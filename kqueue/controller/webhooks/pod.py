"""Mutating webhook for Pods kqueue manages: every one is born behind the admission gate.

Its webhook configuration selects pods labelled ``kqueue.io/managed: "true"`` (the Job webhook
puts that label in the pod template), so other pods never reach it. A managed pod created
without the gate (a template made before kqueue was installed, or a pod created directly) gets
it here; the job reconciler releases pods whose workload is admitted.
"""

from __future__ import annotations

import copy

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.admission import AdmissionRequest, Verdict
from kqueue.controller.integrations.gate import add_gate
from kqueue.controller.webhooks.shape import request_shape_errors

MUTATE_PATH = "/mutate--v1-pod"


async def mutate_pod(req: AdmissionRequest) -> Verdict:
    if errors := request_shape_errors(req.object, req.old_object, "Pod"):
        return Verdict.deny(*errors)
    pod = req.object or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if req.operation != "CREATE" or labels.get(c.MANAGED_LABEL) != "true":
        return Verdict.allow()
    out = copy.deepcopy(pod)
    if not add_gate(out.setdefault("spec", {})):
        return Verdict.allow()
    return Verdict.patch(out)
