"""A JobSet as the generic reconciler drives it (Kueue's pkg/controller/jobs/jobset).

One Workload per JobSet, one pod set per replicated Job. Like a batch Job, a JobSet waits
suspended while queued (the webhook suspends it at creation, annotation
``kqueue.io/suspended-by-kqueue``); the JobSet controller then creates its Jobs suspended, so
there are no pods. On admission kqueue resumes it with each pod set's flavor node labels and
tolerations in that replicated Job's pod template (the JobSet controller copies them into its
Jobs when it resumes them); the pods are born behind the ``kqueue.io/admission`` gate and released
by kqueue. On eviction the whole JobSet is suspended again and, once stopped, its templates are
put back as the Workload recorded them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kqueue.api.integrations import PriorityResolver
from kqueue.api.integrations.jobset import (
    JOBSET_API_VERSION,
    JOBSET_KIND,
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_NAME_LABEL,
    finished_condition,
    workload_for_jobset,
)
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease, is_gated
from kqueue.controller.integrations.podtemplate import (
    admitted_template_patch,
    held_template_patch,
    merge,
    restored_template_patch,
)
from kqueue.controller.integrations.suspension import SpecSuspendKind
from kqueue.controller.resources import Resource

Obj = dict[str, Any]

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets")


def _rjobs(obj: Obj) -> list[Obj]:
    return list((obj.get("spec") or {}).get("replicatedJobs") or [])


def _pod_template(rjob: Obj) -> Obj:
    return ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}


def _template_patches(obj: Obj, per_rjob: Mapping[str, Obj | None]) -> list[Obj] | None:
    """replicatedJobs as a merge patch: a list is replaced whole, so every entry is sent, with
    the changed pod templates merged in; None if nothing changes."""
    if not any(per_rjob.values()):
        return None
    out: list[Obj] = []
    for rjob in _rjobs(obj):
        change = per_rjob.get(str(rjob.get("name")))
        if change is None:
            out.append(rjob)
            continue
        new = merge(rjob, {"template": {"spec": {"template": change}}})
        assert new is not None
        out.append(_drop_nulls(new))
    return out


def _drop_nulls(value: Any) -> Any:
    # Inside a replaced list, null means nothing to the API server: leave the key out instead.
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


class JobSetIntegration(SpecSuspendKind):
    resource: Resource = JOBSETS
    api_version = JOBSET_API_VERSION
    kind = JOBSET_KIND

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_jobset(obj, priorities)

    def is_active(self, obj: Obj) -> bool:
        for status in (obj.get("status") or {}).get("replicatedJobsStatus") or []:
            if int(status.get("active") or 0) > 0:
                return True
        return False

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        done = finished_condition(obj)
        if done is None:
            return None
        if done[0] == "Completed":
            return c.FINISHED_SUCCEEDED, done[1] or "JobSet completed"
        return c.FINISHED_FAILED, done[1] or "JobSet failed"

    def owner_of_pod(self, pod: Obj) -> str | None:
        meta = pod.get("metadata") or {}
        name = (meta.get("labels") or {}).get(JOBSET_NAME_LABEL)
        return f"{meta.get('namespace') or 'default'}/{name}" if name else None

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return str(((pod.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_NAME_LABEL) or "")

    def holds_pods(self, obj: Obj) -> bool:
        return all(is_gated(_pod_template(r)) for r in _rjobs(obj))

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        if not self.is_suspended(obj):
            return None
        changes = {
            str(r.get("name")): admitted_template_patch(_pod_template(r), releases[str(r.get("name"))])
            for r in _rjobs(obj)
            if str(r.get("name")) in releases
        }
        spec: Obj = {"suspend": False}
        rjobs = _template_patches(obj, changes)
        if rjobs is not None:
            spec["replicatedJobs"] = rjobs
        return {
            "metadata": {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: None}},
            "spec": spec,
        }

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        # The JobSet's templates may change while it is suspended; its controller copies them
        # into the Jobs when it resumes them.
        if not self.is_suspended(obj) or self.is_active(obj):
            return None
        changes: dict[str, Obj | None] = {}
        for rjob in _rjobs(obj):
            name = str(rjob.get("name"))
            template = _pod_template(rjob)
            pod_set = wl.pod_set(name)
            recorded = pod_set.template.to_dict() if pod_set is not None else None
            changes[name] = merge(held_template_patch(template), restored_template_patch(template, recorded))
        rjobs = _template_patches(obj, changes)
        if rjobs is None:
            return None
        return {
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            "spec": {"replicatedJobs": rjobs},
        }
