"""A batch/v1 Job as the generic reconciler drives it (Kueue's pkg/controller/jobs/job).

A Job labelled ``kqueue.io/queue-name`` waits suspended while its Workload is queued: the Job
webhook suspends it at creation (annotation ``kqueue.io/suspended-by-kqueue``) and puts the
``kqueue.io/admission`` gate in ``spec.template``. Suspended, it has no pods, its
``activeDeadlineSeconds`` does not run and it uses no namespace ResourceQuota. On admission it
is resumed with the assigned flavors' node labels and tolerations in its template; its pods are
still born gated and released together by kqueue. On eviction it is suspended again (the Job
controller deletes its pods without counting failures) and, once reset, its template goes back
to what the Workload recorded. Partial admission (``kqueue.io/job-min-parallelism``) lowers
``parallelism`` to the admitted count while it runs and puts it back when the Job is stopped.

A Job its user created suspended (no annotation) is the user's: kqueue queues it once the user
resumes it. A Job the webhook never saw (created before kqueue's webhooks were installed) has no
gate in its template: the reconciler suspends it until its Workload is admitted and, once the
Job controller has reset it (``status.startTime`` cleared), gates its template.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kqueue.api.integrations import PriorityResolver, pods_count, workload_for_job
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease, is_gated
from kqueue.controller.integrations.podtemplate import (
    admitted_template_patch,
    held_template_patch,
    merge,
    restored_template_patch,
)
from kqueue.controller.resources import JOBS, Resource

Obj = dict[str, Any]

FINISHED_OK_MESSAGE: Final = "Job finished successfully"


def _condition(job: Obj, type_: str) -> Obj | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


def _annotations(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _started(job: Obj) -> bool:
    return bool((job.get("status") or {}).get("startTime"))


class JobIntegration:
    resource: Resource = JOBS
    api_version = "batch/v1"
    kind = "Job"

    def __init__(self, *, slices: bool = True) -> None:
        # The Configuration's ElasticJobsViaWorkloadSlices gate: off, an elastic-job annotation
        # has no effect and the Workload is named as any Job's (no generation).
        self.slices = slices

    def label_selector(self, *, without_queue_name: bool = False) -> str | None:
        # Listing every Job costs memory in big clusters: only when unlabelled ones count.
        return None if without_queue_name else c.QUEUE_NAME_LABEL

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_job(obj, priorities, slices=self.slices)

    def is_suspended(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("suspend"))

    def is_active(self, obj: Obj) -> bool:
        status = obj.get("status") or {}
        return int(status.get("active") or 0) > 0 or int(status.get("terminating") or 0) > 0

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        # Complete/Failed (not SuccessCriteriaMet/FailureTarget): the Job controller sets them
        # once every pod has terminated, so the quota is not freed under running pods.
        if _condition(obj, "Complete") is not None:
            return c.FINISHED_SUCCEEDED, FINISHED_OK_MESSAGE
        failed = _condition(obj, "Failed")
        if failed is not None:
            return c.FINISHED_FAILED, str(failed.get("message") or failed.get("reason") or "Job failed")
        return None

    def _admitted_count(self, obj: Obj, wl: Workload) -> int:
        adm = wl.status.admission
        assignment = adm.assignment(c.DEFAULT_POD_SET_NAME) if adm is not None else None
        if assignment is not None and assignment.count is not None:
            return assignment.count
        return pods_count(obj)

    def owner_of_pod(self, pod: Obj) -> str | None:
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Job":
                return f"{meta.get('namespace') or 'default'}/{ref.get('name')}"
        return None

    def user_suspended(self, obj: Obj) -> bool:
        return self.is_suspended(obj) and c.SUSPENDED_BY_KQUEUE_ANNOTATION not in _annotations(obj)

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        spec = obj.get("spec") or {}
        patch: Obj = {}
        out: Obj = {}
        if spec.get("suspend"):
            patch["suspend"] = False
            out["metadata"] = {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: None}}
            release = releases.get(c.DEFAULT_POD_SET_NAME)
            # The template may change only while the Job is suspended and not started, which
            # is the state kqueue resumes it from; pods are then born with the directives.
            if release is not None and not _started(obj):
                template = admitted_template_patch(spec.get("template") or {}, release)
                if template is not None:
                    patch["template"] = template
        pod_set = wl.pod_set(c.DEFAULT_POD_SET_NAME)
        count = self._admitted_count(obj, wl)
        # Only a partial admission changes parallelism; a full one keeps the user's value.
        if pod_set is not None and pod_set.min_count is not None:
            current = spec.get("parallelism", 1)
            if count < pod_set.count and current != count:
                patch["parallelism"] = count
        if not patch:
            return None
        return {**out, "spec": patch}

    def stop_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        spec = obj.get("spec") or {}
        patch: Obj = {}
        out: Obj = {}
        if not spec.get("suspend"):
            patch["suspend"] = True
            out["metadata"] = {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: "true"}}
        pod_set = wl.pod_set(c.DEFAULT_POD_SET_NAME)
        # Restore what the user asked for after a partial admission: the next may fit more.
        if (
            pod_set is not None
            and pod_set.min_count is not None
            and spec.get("parallelism", 1) != pod_set.count
        ):
            patch["parallelism"] = pod_set.count
        if not patch:
            return None
        return {**out, "spec": patch}

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return c.DEFAULT_POD_SET_NAME

    def holds_pods(self, obj: Obj) -> bool:
        template = (obj.get("spec") or {}).get("template") or {}
        return is_gated(template)

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        spec = obj.get("spec") or {}
        # The template's scheduling fields are mutable only while the Job is suspended and the
        # Job controller has cleared startTime (it does when it suspends the Job).
        if not spec.get("suspend") or _started(obj):
            return None
        template = spec.get("template") or {}
        pod_set = wl.pod_set(c.DEFAULT_POD_SET_NAME)
        recorded = pod_set.template.to_dict() if pod_set is not None else None
        changes = merge(held_template_patch(template), restored_template_patch(template, recorded))
        if changes is None:
            return None
        return {
            # The resourceVersion makes the patch fail if the template changed meanwhile, rather
            # than overwrite someone else's (a merge patch replaces a whole list).
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            "spec": {"template": changes},
        }
