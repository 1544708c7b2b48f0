"""JobSet (jobset.x-k8s.io/v1alpha2) -> Workload, as Kueue's JobSet integration builds it.

One Workload per JobSet with one pod set per replicated Job, named after it: ``replicas`` x the
Job template's pods (``parallelism``, fewer if ``completions`` is lower). The pod template is the
replicated Job's; the Workload is owned by the JobSet and named deterministically from it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    clean_template_metadata,
    owner_workload_name,
    top_level_workload_doc,
)
from kqueue.api.integrations.declaration import Integration, Ranks, Workloads
from kqueue.api.integrations.job import COMPLETION_INDEX_LABEL, parse_workload, pods_count
from kqueue.api.v1alpha1 import Workload

JOBSET_GROUP: Final = "jobset.x-k8s.io"
JOBSET_API_VERSION: Final = f"{JOBSET_GROUP}/v1alpha2"
JOBSET_KIND: Final = "JobSet"
# Labels the JobSet controller puts on the Jobs and pods it creates.
JOBSET_NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL: Final = "jobset.sigs.k8s.io/jobset-uid"
REPLICATED_JOB_NAME_LABEL: Final = "jobset.sigs.k8s.io/replicatedjob-name"
# Which child Job of its replicated Job a pod is in (0 .. replicas-1).
JOB_INDEX_LABEL: Final = "jobset.sigs.k8s.io/job-index"


def replicated_jobs(jobset: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = jobset.get("spec") or {}
    rjobs = spec.get("replicatedJobs")
    if not isinstance(rjobs, list) or not rjobs:
        raise IntegrationError("spec.replicatedJobs", "required: at least one replicated Job")
    for i, rjob in enumerate(rjobs):
        if not isinstance(rjob, Mapping) or not rjob.get("name"):
            raise IntegrationError(f"spec.replicatedJobs[{i}].name", "required")
    return list(rjobs)


def _replicas(rjob: Mapping[str, Any], index: int) -> int:
    value = rjob.get("replicas", 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise IntegrationError(
            f"spec.replicatedJobs[{index}].replicas", f"must be a non-negative integer, got {value!r}"
        )
    return value


def pod_set_counts(jobset: Mapping[str, Any]) -> dict[str, int]:
    """Pods per replicated Job: replicas x the Job template's pods."""
    out: dict[str, int] = {}
    for i, rjob in enumerate(replicated_jobs(jobset)):
        job_template = rjob.get("template") or {}
        try:
            per_job = pods_count({"spec": job_template.get("spec") or {}})
        except IntegrationError as exc:
            raise IntegrationError(
                f"spec.replicatedJobs[{i}].template.{exc.path}", exc.detail
            ) from None
        out[str(rjob["name"])] = _replicas(rjob, i) * per_job
    return out


def workload_name_for_jobset(jobset: Mapping[str, Any]) -> str:
    return owner_workload_name(jobset, JOBSET_KIND, JOBSET_GROUP)


def workload_for_jobset(
    jobset: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
) -> Workload:
    """The Workload kqueue creates for ``jobset``; raises :class:`IntegrationError` naming the
    JobSet's field."""
    if jobset.get("kind") != JOBSET_KIND:
        raise IntegrationError("kind", f"expected a JobSet, got {jobset.get('kind')!r}")
    counts = pod_set_counts(jobset)
    pod_sets: list[dict[str, Any]] = []
    pod_specs: list[Mapping[str, Any]] = []
    for i, rjob in enumerate(replicated_jobs(jobset)):
        template = ((rjob.get("template") or {}).get("spec") or {}).get("template")
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            raise IntegrationError(f"spec.replicatedJobs[{i}].template.spec.template.spec", "required")
        pod_template = copy.deepcopy(template)
        clean_template_metadata(pod_template)
        pod_sets.append({"name": str(rjob["name"]), "count": counts[str(rjob["name"])], "template": pod_template})
        pod_specs.append(template["spec"])

    doc = top_level_workload_doc(
        jobset,
        api_version=JOBSET_API_VERSION,
        kind=JOBSET_KIND,
        name=workload_name_for_jobset(jobset),
        pod_sets=pod_sets,
        pod_specs=pod_specs,
        priorities=priorities,
        label_keys_to_copy=label_keys_to_copy,
    )
    return parse_workload(
        doc,
        template_paths=[
            f"spec.replicatedJobs[{i}].template.spec.template" for i in range(len(pod_sets))
        ],
    )


def finished_condition(jobset: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(Completed|Failed, message)`` once the JobSet finished."""
    for cond in (jobset.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Completed", "Failed") and cond.get("status") == "True":
            return str(cond["type"]), str(cond.get("message") or cond.get("reason") or "")
    return None


def ranks(jobset: Mapping[str, Any], _: Workload) -> dict[str, Ranks]:
    """A pod's rank within its replicated Job: its child Job's index times the Job's pods plus
    its completion index (Kueue's JobSet podIndexLabel, subGroupIndexLabel, subGroupCount)."""
    return {
        str(rjob["name"]): Ranks(COMPLETION_INDEX_LABEL, JOB_INDEX_LABEL, _replicas(rjob, i))
        for i, rjob in enumerate(replicated_jobs(jobset))
    }


INTEGRATION: Final = Integration(
    framework="jobset.x-k8s.io/jobset",
    api_version=JOBSET_API_VERSION,
    kind=JOBSET_KIND,
    workloads=Workloads.OWN,
    build=workload_for_jobset,
    finished=finished_condition,
    operator="jobset",
    ranks=ranks,
)
