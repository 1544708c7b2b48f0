"""The batch/v1 Job integration.

A Job labelled ``kqueue.io/queue-name`` is created running, but its pods are born gated (the Job
webhook puts the ``kqueue.io/admission`` gate in ``spec.template``), so nothing is scheduled
until its Workload is admitted. On eviction the Job is suspended: the Job controller deletes its
pods without counting failures. On re-admission it is resumed and the new pods are released.
Partial admission (``kqueue.io/job-min-parallelism``) lowers ``parallelism`` to the admitted
count while it runs and puts it back when the Job is stopped.

A Job the webhook never saw (created before kqueue's webhooks were installed) has no gate in its
template: the reconciler suspends it until its Workload is admitted, and once the Job controller
has reset it (``status.startTime`` cleared), adds the gate and the managed label to its template,
which the API server allows for a suspended Job that has not started.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kqueue.api.integrations import PriorityResolver, pods_count, workload_for_job
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import JOBS, Resource
from kqueue.controller.jobs.base import add_gate, is_gated

Obj = dict[str, Any]

FINISHED_OK_MESSAGE: Final = "Job finished successfully"


def _condition(job: Obj, type_: str) -> Obj | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


class JobIntegration:
    name = "batch/job"
    resource: Resource = JOBS
    api_version = "batch/v1"
    kind = "Job"

    def label_selector(self, *, without_queue_name: bool = False) -> str | None:
        # Listing every Job costs memory in big clusters: only when unlabelled ones count.
        return None if without_queue_name else c.QUEUE_NAME_LABEL

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_job(obj, priorities)

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

    def run_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        spec = obj.get("spec") or {}
        patch: Obj = {}
        if spec.get("suspend"):
            patch["suspend"] = False
        pod_set = wl.pod_set(c.DEFAULT_POD_SET_NAME)
        count = self._admitted_count(obj, wl)
        # Only a partial admission changes parallelism; a full one keeps the user's value.
        if pod_set is not None and pod_set.min_count is not None:
            current = spec.get("parallelism", 1)
            if count < pod_set.count and current != count:
                patch["parallelism"] = count
        return {"spec": patch} if patch else None

    def stop_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        spec = obj.get("spec") or {}
        patch: Obj = {}
        if not spec.get("suspend"):
            patch["suspend"] = True
        pod_set = wl.pod_set(c.DEFAULT_POD_SET_NAME)
        # Restore what the user asked for after a partial admission: the next may fit more.
        if (
            pod_set is not None
            and pod_set.min_count is not None
            and spec.get("parallelism", 1) != pod_set.count
        ):
            patch["parallelism"] = pod_set.count
        return {"spec": patch} if patch else None

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return c.DEFAULT_POD_SET_NAME

    def holds_pods(self, obj: Obj) -> bool:
        template = (obj.get("spec") or {}).get("template") or {}
        return is_gated(template)

    def hold_patch(self, obj: Obj) -> Obj | None:
        spec = obj.get("spec") or {}
        # The template's scheduling fields are mutable only while the Job is suspended and the
        # Job controller has cleared startTime (it does when it suspends the Job).
        if not spec.get("suspend") or (obj.get("status") or {}).get("startTime"):
            return None
        template = spec.get("template") or {}
        pod_spec = copy.deepcopy(template.get("spec") or {})
        labels = (template.get("metadata") or {}).get("labels") or {}
        if not add_gate(pod_spec) and labels.get(c.MANAGED_LABEL) == "true":
            return None
        return {
            # The resourceVersion makes the patch fail if the gates changed meanwhile, rather
            # than overwrite someone else's (a merge patch replaces the whole list).
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            "spec": {
                "template": {
                    "metadata": {"labels": {c.MANAGED_LABEL: "true"}},
                    "spec": {"schedulingGates": pod_spec["schedulingGates"]},
                }
            },
        }
