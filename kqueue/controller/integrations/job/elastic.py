"""Elastic Jobs (``kqueue.io/elastic-job: "true"``): how a batch Job is read by the
WorkloadSlices machinery (:mod:`kqueue.controller.integrations.slices`)."""

from __future__ import annotations

from kqueue.api.integrations import (
    is_elastic,
    pods_count,
    workload_for_job,
    workload_name_for_job,
)
from kqueue.controller.integrations.slices import Obj, Sizing


def job_finished(job: Obj) -> bool:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return True
    return False


JOB_SIZING = Sizing(
    kind="Job",
    elastic=is_elastic,
    count=pods_count,
    current_name=workload_name_for_job,
    replacement=lambda job, priorities, old: workload_for_job(
        job, priorities, replacement_for=old
    ),
    finished=job_finished,
)
