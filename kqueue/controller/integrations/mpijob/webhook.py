"""Admission webhooks for MPIJobs (kubeflow.org/v2beta1) that name a queue.

Mutating: suspended while queued (``spec.runPolicy.suspend``), the launcher's and the workers'
pod templates gated (:mod:`kqueue.controller.integrations.suspension`). Validating: the queue and
priority-class labels cannot change while it runs; annotations an MPIJob cannot honour (elastic
WorkloadSlices, partial admission) are refused naming the annotation.
"""

from __future__ import annotations

from typing import Any, Final

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.mpijob.generic import SUSPEND_PATH
from kqueue.controller.integrations.suspension import (
    SuspendableWebhooks,
    mutate_suspendable,
    validate_suspendable,
)
from kqueue.controller.webhook_server import AdmissionRequest, Verdict

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate-kubeflow-org-v2beta1-mpijob"
VALIDATE_PATH: Final = "/validate-kubeflow-org-v2beta1-mpijob"

UNSUPPORTED_ANNOTATIONS: Final = {
    c.ELASTIC_JOB_ANNOTATION: "an MPIJob cannot be elastic (WorkloadSlices are for batch Jobs)",
    c.JOB_MIN_PARALLELISM_ANNOTATION: "partial admission is not supported for MPIJobs",
}



def pod_templates(mpijob: Obj) -> list[Obj]:
    specs = mpijob.setdefault("spec", {}).get("mpiReplicaSpecs")
    out: list[Obj] = []
    for spec in (specs or {}).values() if isinstance(specs, dict) else []:
        if isinstance(spec, dict):
            out.append(spec.setdefault("template", {}))
    return out


def _started(old: Obj) -> bool:
    statuses = (old.get("status") or {}).get("replicaStatuses") or {}
    return any(int((s or {}).get("active") or 0) > 0 for s in statuses.values())


class MPIJobWebhooks(SuspendableWebhooks):
    async def mutate(self, req: AdmissionRequest) -> Verdict:
        obj = req.object
        if not isinstance(obj, dict) or not self._manages(obj):
            return Verdict.allow()
        return mutate_suspendable(
            req, kind="MPIJob", pod_templates=pod_templates, started=_started, path=SUSPEND_PATH
        )

    async def validate(self, req: AdmissionRequest) -> Verdict:
        obj = req.object
        if not isinstance(obj, dict) or not self._manages(obj):
            return Verdict.allow()
        return validate_suspendable(
            req,
            kind="MPIJob",
            unsupported=UNSUPPORTED_ANNOTATIONS,
            local_queues=self._local_queues, path=SUSPEND_PATH,
        )
