"""Admission webhooks for TrainJobs (trainer.kubeflow.org/v1alpha1) that name a queue.

Mutating: suspended while queued (:mod:`kqueue.controller.integrations.suspension`). A TrainJob
has no pod template of its own (its runtime has them), so the ``kqueue.io/admission`` gate and the
managed label reach its pods through kqueue's ``spec.runtimePatches`` entry, which the reconciler
writes once the Workload (and so the runtime's replicated Jobs) is known
(:mod:`.generic`). Validating: the queue and priority-class labels cannot change while the
TrainJob runs; annotations a TrainJob cannot honour (elastic WorkloadSlices, partial admission)
are refused naming the annotation.
"""

from __future__ import annotations

from typing import Any, Final

from kqueue.controller.integrations.suspension import SuspendableKind

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
VALIDATE_PATH: Final = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"


def _no_templates(_obj: Obj) -> list[Obj]:
    return []


def _started(old: Obj) -> bool:
    # Jobs still running from before a suspension: the TrainJob is stopping, not queued.
    return any(
        int(s.get("active") or 0) > 0 for s in (old.get("status") or {}).get("jobsStatus") or []
    )


SUSPENDABLE: Final = SuspendableKind(
    kind="TrainJob",
    pod_templates=_no_templates,
    started=_started,
)
