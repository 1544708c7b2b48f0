"""How a job kind is dispatched to a worker: one small adapter per kind (Kueue's
``pkg/controller/jobs/*/*_multikueue_adapter.go``).

The manager's job carries ``spec.managedBy: kqueue.io/multikueue``, so no controller on the
manager runs it; its copy on the worker is the same object without ``managedBy``, labelled with
the manager's origin and with the Workload it belongs to (``kqueue.io/prebuilt-workload-name``:
the worker's kqueue adopts that Workload, already admitted there, instead of making one). The
copy's status comes back to the manager's job. Kinds without an adapter (or without
``spec.managedBy``) cannot be dispatched: their workloads' check is Rejected, naming the kind.
"""

from __future__ import annotations

import copy
from typing import Any, Final, Protocol

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME, ORIGIN_LABEL, ORIGIN_UID_ANNOTATION
from kqueue.controller.resources import JOBS, Resource

Obj = dict[str, Any]

JOBSETS: Final = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets")
# Labels the Job controller writes into a Job's selector and pod template; the worker's Job
# controller writes its own.
_JOB_GENERATED_LABELS: Final = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)


class Adapter(Protocol):
    """One dispatchable kind."""

    api_version: str
    kind: str
    resource: Resource

    def remote_object(self, local: Obj, workload: str, origin: str) -> Obj:
        """The worker's copy of the manager's ``local`` object."""
        ...

    def status_update(self, local: Obj, remote: Obj, remote_finished: bool) -> Obj | None:
        """The status to write on the manager's object from the worker's copy; None: keep it
        (it is suspended here, and a status of a running job would not be valid on it)."""
        ...


def managed_problem(local: Obj) -> str | None:
    """Why the manager's object cannot be dispatched (Kueue's IsJobManagedByKueue); None if
    it can."""
    meta = local.get("metadata") or {}
    managed_by = (local.get("spec") or {}).get("managedBy")
    if managed_by != CONTROLLER_NAME:
        return (
            f"{local.get('kind')} {meta.get('namespace')}/{meta.get('name')}: spec.managedBy is "
            f"{managed_by!r}; set it to {CONTROLLER_NAME!r} so that no controller of the manager "
            "cluster runs it"
        )
    return None


def _remote_meta(local: Obj, workload: str, origin: str) -> Obj:
    meta = local.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    labels[ORIGIN_LABEL] = origin
    labels[c.PREBUILT_WORKLOAD_LABEL] = workload
    annotations = dict(meta.get("annotations") or {})
    annotations[ORIGIN_UID_ANNOTATION] = str(meta.get("uid") or "")
    # Queued on the worker as kqueue's suspension, so the worker's kqueue resumes it once its
    # Workload is admitted there (a user's suspension would be left alone).
    annotations[c.SUSPENDED_BY_KQUEUE_ANNOTATION] = "true"
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "labels": labels,
        "annotations": annotations,
    }


def _suspended(obj: Obj) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))


class BatchJobAdapter:
    api_version = "batch/v1"
    kind = "Job"
    resource = JOBS

    def remote_object(self, local: Obj, workload: str, origin: str) -> Obj:
        spec = copy.deepcopy(local.get("spec") or {})
        spec.pop("managedBy", None)
        spec.pop("selector", None)
        spec["suspend"] = True
        tmeta = (spec.get("template") or {}).get("metadata") or {}
        for key in _JOB_GENERATED_LABELS:
            (tmeta.get("labels") or {}).pop(key, None)
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": _remote_meta(local, workload, origin),
            "spec": spec,
        }

    def status_update(self, local: Obj, remote: Obj, remote_finished: bool) -> Obj | None:
        # Kueue's determineStatusUpdate: the remote status while the local Job runs, or once
        # the remote one finished.
        if _suspended(local) and not remote_finished:
            return None
        status = remote.get("status") or {}
        return status if status != (local.get("status") or {}) else None


class JobSetAdapter:
    api_version = "jobset.x-k8s.io/v1alpha2"
    kind = "JobSet"
    resource = JOBSETS

    def remote_object(self, local: Obj, workload: str, origin: str) -> Obj:
        spec = copy.deepcopy(local.get("spec") or {})
        spec.pop("managedBy", None)
        spec["suspend"] = True
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": _remote_meta(local, workload, origin),
            "spec": spec,
        }

    def status_update(self, local: Obj, remote: Obj, remote_finished: bool) -> Obj | None:
        status = remote.get("status") or {}
        return status if status != (local.get("status") or {}) else None


ADAPTERS: Final[dict[tuple[str, str], Adapter]] = {
    (a.api_version, a.kind): a for a in (BatchJobAdapter(), JobSetAdapter())
}


def adapter_for(api_version: str, kind: str) -> Adapter | None:
    return ADAPTERS.get((api_version, kind))


def dispatchable_kinds() -> list[str]:
    return [f"{a.kind} ({a.api_version})" for a in ADAPTERS.values()]
