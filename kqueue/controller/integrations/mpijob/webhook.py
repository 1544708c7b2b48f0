"""Admission webhooks for MPIJobs (kubeflow.org/v2beta1) that name a queue.

Mutating: suspended while queued (``spec.runPolicy.suspend``), the launcher's and the workers'
pod templates gated (:mod:`kqueue.controller.integrations.suspension`). Validating: the queue and
priority-class labels cannot change while it runs; annotations an MPIJob cannot honour (elastic
WorkloadSlices, partial admission) are refused naming the annotation.
"""

from __future__ import annotations

from typing import Any, Final

from kqueue.controller.integrations.runpolicy import SUSPEND_PATH, replicas_active
from kqueue.controller.integrations.suspension import SuspendableKind

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate-kubeflow-org-v2beta1-mpijob"
VALIDATE_PATH: Final = "/validate-kubeflow-org-v2beta1-mpijob"


def pod_templates(mpijob: Obj) -> list[Obj]:
    specs = mpijob.setdefault("spec", {}).get("mpiReplicaSpecs")
    out: list[Obj] = []
    for spec in (specs or {}).values() if isinstance(specs, dict) else []:
        if isinstance(spec, dict):
            out.append(spec.setdefault("template", {}))
    return out


SUSPENDABLE: Final = SuspendableKind(
    kind="MPIJob",
    article="an",
    pod_templates=pod_templates,
    started=replicas_active,
    path=SUSPEND_PATH,
)
