"""The batch Job's MultiKueue adapter (Kueue's job_multikueue_adapter.go): the copy drops the
selector and the labels the Job controller generates (the worker's writes its own), and the
status comes back as Kueue's ``determineStatusUpdate`` decides."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from kqueue.controller.admission_checks.multikueue.adapters import CopyAdapter
from kqueue.controller.resources import JOBS

Obj = dict[str, Any]

# Labels the Job controller writes into a Job's selector and pod template; the worker's Job
# controller writes its own.
GENERATED_LABELS: Final = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)
# The condition Kueue's adapter sets on a suspended manager-side Job whose copy runs: a status
# with a start time but no Suspended condition would block the Job's spec updates (Kubernetes
# 1.36's Job validation).
SUSPENDED: Final = "Suspended"


def _clean(remote: Obj) -> None:
    spec = remote["spec"]
    spec.pop("selector", None)
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    for key in GENERATED_LABELS:
        labels.pop(key, None)


def _suspended(job: Obj) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def _finished(job: Obj) -> bool:
    return any(
        cd.get("type") in ("Complete", "Failed") and cd.get("status") == "True"
        for cd in (job.get("status") or {}).get("conditions") or []
    )


def determine_status(local: Obj, remote: Obj, remote_finished: bool, now: str) -> Obj:
    """Kueue's determineStatusUpdate: the copy's status while the manager's Job runs, while both
    are suspended (an evicted copy's ``active`` going to 0), or once the copy finished; else
    (the manager's Job still suspended, its copy running) the manager's status kept, with a
    ``Suspended=True`` condition added if it has none."""
    remote_status: Obj = remote.get("status") or {}
    if not _suspended(local) or _suspended(remote) or remote_finished or _finished(remote):
        return remote_status
    status: Obj = dict(local.get("status") or {})
    conditions = list(status.get("conditions") or [])
    if any(cd.get("type") == SUSPENDED and cd.get("status") == "True" for cd in conditions):
        return status
    cond = {
        "type": SUSPENDED, "status": "True", "reason": "MultiKueueAdapter",
        "message": "Set by MultiKueue adapter", "lastTransitionTime": now, "lastProbeTime": now,
    }
    conditions = [cd for cd in conditions if cd.get("type") != SUSPENDED] + [cond]
    return {**status, "conditions": conditions}


def _status(local: Obj, remote: Obj, remote_finished: bool) -> Obj | None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = determine_status(local, remote, remote_finished, now)
    return status if status != (local.get("status") or {}) else None


ADAPTER: Final = CopyAdapter(
    "batch/v1", "Job", JOBS, "kubernetes.io/job-controller", clean=_clean, status=_status
)
