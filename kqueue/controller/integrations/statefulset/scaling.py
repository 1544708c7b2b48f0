"""A StatefulSet's size and stops: WorkloadSlices as for elastic Jobs, scale to 0, eviction.

The generic reconciler asks, per StatefulSet, which of its Workloads to drive
(``workload_hooks``); this hook answers and does what the StatefulSet's lack of a suspend switch
leaves to kqueue:

* **Scale-up** (2 -> 4): a replacement slice for the whole new size, charged only the difference
  on the admitted slice's flavors (:class:`~kqueue.controller.integrations.job.elastic.ElasticSlices`
  with the StatefulSet's :data:`SIZING`). The new pods are born gated and stay so until the
  replacement is admitted; the running pods are never touched.
* **Scale-down** (4 -> 2): the admitted slice shrinks in place; the StatefulSet controller
  removes the surplus pods itself.
* **Scale to 0**: the StatefulSet needs no quota: its Workloads are deleted (Kueue keeps an
  admitted one "on hold" instead). Scaled up again, a new Workload is queued.
* **Eviction**: its released pods are deleted (``DisruptionTarget`` first, as for plain pods).
  The StatefulSet controller recreates them behind the gate, where they wait for the
  readmission; once none of the deleted ones runs, the generic reconciler requeues the Workload.
* **Running while queued** (pods created before kqueue's webhooks held the StatefulSet): once
  its template has the gate, the running pods are deleted and come back held.
"""

from __future__ import annotations

import logging

from kqueue.api.integrations.statefulset import (
    STATEFULSET_KIND,
    replicas,
    workload_for_statefulset,
    workload_name_for_statefulset,
)
from kqueue.api.v1alpha1 import Workload
from kqueue.controller import workload_status
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.gate import is_gated, is_terminal
from kqueue.controller.informer import Store
from kqueue.controller.integrations.eviction import evict_pod
from kqueue.controller.integrations.owners import BY_OWNER
from kqueue.controller.integrations.release import PodReleaser
from kqueue.controller.integrations.slices import ElasticSlices, Obj, Sizing
from kqueue.controller.integrations.statefulset.generic import (
    SCALED_TO_ZERO,
    pod_template,
    scaled_to_zero,
)
from kqueue.controller.kube import Kube, NotFound
from kqueue.controller.resources import WORKLOADS, object_key

logger = logging.getLogger(__name__)

STOPPED_ON_EVICTION = (
    "Workload {key} evicted: deleted {n} running pod(s); the StatefulSet recreates them held by "
    "the admission gate until readmitted"
)
STOPPED_WHILE_QUEUED = (
    "{n} pod(s) were running while Workload {key} is queued (created before kqueue's webhooks "
    "held the StatefulSet); deleted: the StatefulSet recreates them held by the admission gate "
    "until admitted"
)

SIZING = Sizing(
    kind=STATEFULSET_KIND,
    # Every StatefulSet can change size; no annotation asks for it.
    elastic=lambda _sts: True,
    count=replicas,
    current_name=workload_name_for_statefulset,
    replacement=lambda sts, priorities, old: workload_for_statefulset(
        sts, priorities, replacement_for=old
    ),
    finished=lambda _sts: False,
)


class StatefulSetScaling:
    def __init__(
        self,
        *,
        slices: ElasticSlices,
        pods: Store[Obj],
        kube: Kube,
        events: EventRecorder,
        releaser: PodReleaser,
        now: Now,
    ) -> None:
        self._slices = slices
        self._pods = pods
        self._kube = kube
        self._events = events
        self._releaser = releaser
        self._now = now

    async def select(self, sts: Obj, owned: list[Workload]) -> list[Workload]:
        if scaled_to_zero(sts):
            for wl in owned:
                await self._delete(sts, wl)
            return []
        owned = await self._slices.select(sts, owned)
        active = [w for w in owned if not w.is_finished]
        if not active:
            return owned
        wl = active[-1]
        if workload_status.is_evicting(wl):
            await self._stop_pods(sts, wl, STOPPED_ON_EVICTION)
        elif not workload_status.holds_quota(wl) and is_gated(pod_template(sts)):
            # Queued, yet pods run: they were released before kqueue held the StatefulSet (its
            # pods were created before the webhooks, and the template has the gate only now).
            # Stopped, as a Job found running while queued is suspended; they come back gated.
            await self._stop_pods(sts, wl, STOPPED_WHILE_QUEUED)
        return owned

    async def _delete(self, sts: Obj, wl: Workload) -> None:
        try:
            await self._kube.delete(WORKLOADS, wl.name, namespace=wl.namespace)
        except NotFound:
            return
        if workload_status.holds_quota(wl):
            message = f"Scaled to 0: deleted Workload {wl.key}, its quota is free"
        else:
            message = f"Scaled to 0: deleted queued Workload {wl.key}"
        self._events.record(sts, "Normal", SCALED_TO_ZERO, message)
        logger.info("StatefulSet %s scaled to 0: deleted Workload %s", object_key(sts), wl.key)

    async def _stop_pods(self, sts: Obj, wl: Workload, message: str) -> None:
        uid = str((sts.get("metadata") or {}).get("uid") or "")
        running = [
            p
            for p in self._pods.by_index(BY_OWNER, uid)
            if not is_terminal(p)
            and not (p.get("metadata") or {}).get("deletionTimestamp")
            and self._releaser.running(p)
        ]
        for pod in running:
            await evict_pod(pod, wl, kube=self._kube, events=self._events, now=self._now)
        if running:
            self._events.record(
                sts, "Normal", "Stopped", message.format(key=wl.key, n=len(running))
            )


__all__ = ["SIZING", "StatefulSetScaling"]
