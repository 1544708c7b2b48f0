"""Admission webhooks for JobSets (jobset.x-k8s.io/v1alpha2) that name a queue.

Mutating: suspended while queued, every replicated Job's pod template gated
(:mod:`kqueue.controller.integrations.suspension`). Validating: the queue and priority-class
labels cannot change while the JobSet runs; annotations a JobSet cannot honour (elastic
WorkloadSlices, partial admission) are refused naming the annotation, as Kueue's JobSet webhook
refuses what its integration does not support.
"""

from __future__ import annotations

from typing import Any, Final

from kqueue.controller.integrations.suspension import SuspendableKind

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
VALIDATE_PATH: Final = "/validate-jobset-x-k8s-io-v1alpha2-jobset"


def pod_templates(jobset: Obj) -> list[Obj]:
    out: list[Obj] = []
    rjobs = jobset.setdefault("spec", {}).get("replicatedJobs")
    for rjob in rjobs if isinstance(rjobs, list) else []:
        if not isinstance(rjob, dict):
            continue
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        out.append(job_spec.setdefault("template", {}))
    return out


def _started(old: Obj) -> bool:
    # Jobs still running from before a suspension: the JobSet is stopping, not queued.
    return any(
        int(s.get("active") or 0) > 0
        for s in (old.get("status") or {}).get("replicatedJobsStatus") or []
    )


SUSPENDABLE: Final = SuspendableKind(
    kind="JobSet",
    pod_templates=pod_templates,
    started=_started,
)
