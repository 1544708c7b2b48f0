"""Elastic Jobs (``kqueue.io/elastic-job: "true"``): how a batch Job is read by the
WorkloadSlices machinery (:mod:`kqueue.controller.integrations.slices`), and what happens to a
Job that is not elastic when its size changes under its Workload (:class:`MismatchedWorkload`)."""

from __future__ import annotations

import contextlib
import logging

from kqueue.api.integrations import (
    IntegrationError,
    is_elastic,
    pods_count,
    workload_for_job,
    workload_name_for_job,
)
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.events import EventRecorder
from kqueue.controller.integrations.slices import Obj, Sizing
from kqueue.controller.kube import Kube, NotFound
from kqueue.controller.resources import WORKLOADS

logger = logging.getLogger(__name__)

# Kueue's event reason (jobframework.ReasonDeletedWorkload).
DELETED_WORKLOAD = "DeletedWorkload"


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


class MismatchedWorkload:
    """Kueue's ``ensureOneWorkload`` for a Job that is not elastic (also one annotated elastic
    while the Configuration's ElasticJobsViaWorkloadSlices is false): a Workload whose pod
    count is no longer the Job's ``parallelism`` does not match the Job, and is deleted (event
    ``DeletedWorkload``, Kueue's text). The generic steps then create the Job's Workload for its
    new size, and a Job still running is suspended until that one is admitted, as Kueue stops
    it ("No matching Workload"): its pods go, and it queues again whole.

    A suspended Job whose Workload waits (holds no quota) is not deleted: its Workload is
    updated in place (the generic reconciler's ``_sync_spec``, Kueue's
    ``updateWorkloadToMatchJob``), keeping its place in the queue.

    Not a mismatch: the admitted count (partial admission lowers ``parallelism`` to it while the
    Job runs; with ``minCount`` the check is left out, since the Job's restore and the
    Workload's release may reach the informers in either order), a Workload being evicted, a
    finished Job."""

    def __init__(self, *, kube: Kube, events: EventRecorder, slices: bool) -> None:
        self._kube = kube
        self._events = events
        self._slices = slices

    async def select(self, job: Obj, owned: list[Workload]) -> list[Workload]:
        if is_elastic(job, slices=self._slices) or job_finished(job):
            return owned
        live = [w for w in owned if not w.is_finished]
        if len(live) != 1 or workload_status.is_evicting(live[0]):
            return owned  # several: a lingering earlier incarnation, left to the generic steps
        wl = live[0]
        if (job.get("spec") or {}).get("suspend") and workload_status.waits(wl):
            return owned  # waiting: updated in place by the generic steps, as Kueue does
        pod_set = wl.pod_set(c.DEFAULT_POD_SET_NAME)
        if pod_set is None or pod_set.min_count is not None:
            return owned
        try:
            want = pods_count(job)
        except IntegrationError:
            return owned
        counts = {pod_set.count}
        adm = wl.status.admission
        psa = adm.assignment(c.DEFAULT_POD_SET_NAME) if adm is not None else None
        if psa is not None and psa.count is not None:
            counts.add(psa.count)
        if want in counts:
            return owned
        with contextlib.suppress(NotFound):
            await self._kube.delete(WORKLOADS, wl.name, namespace=wl.namespace)
        key = f"{wl.namespace or 'default'}/{wl.name}"
        self._events.record(job, "Normal", DELETED_WORKLOAD, f"Deleted not matching Workload: {key}")
        logger.info(
            "deleted Workload %s: its Job now has %d pod(s), it was for %d", key, want, pod_set.count
        )
        return [w for w in owned if w is not wl]
