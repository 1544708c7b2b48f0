"""The Kubeflow run policy, shared by the kinds that share it: MPIJob (kubeflow.org/v2beta1) and
the training-operator v1 jobs. Suspended through ``spec.runPolicy.suspend``, running while a
replica type reports active pods, finished on a Succeeded or Failed JobStatus condition."""

from __future__ import annotations

from typing import Any

from kqueue.api.integrations.common import job_status_finished
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.suspension import SpecSuspendKind

Obj = dict[str, Any]

SUSPEND_PATH = ("spec", "runPolicy", "suspend")


def replicas_active(obj: Obj) -> bool:
    """Pods of some replica type still run (``status.replicaStatuses[*].active``)."""
    statuses = (obj.get("status") or {}).get("replicaStatuses") or {}
    return any(int((s or {}).get("active") or 0) > 0 for s in statuses.values())


class RunPolicyJob(SpecSuspendKind):
    """The generic-reconciler methods every run-policy kind has the same way (its suspend switch
    is ``spec.runPolicy.suspend``)."""

    kind: str
    suspend_path = SUSPEND_PATH

    def is_active(self, obj: Obj) -> bool:
        return replicas_active(obj)

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        done = job_status_finished(obj)
        if done is None:
            return None
        if done[0] == "Succeeded":
            return c.FINISHED_SUCCEEDED, done[1] or f"{self.kind} succeeded"
        return c.FINISHED_FAILED, done[1] or f"{self.kind} failed"
