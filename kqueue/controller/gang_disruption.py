"""A gang is never left half running after kube-scheduler preempts one of its pods.

kube-scheduler preempts pods on its own, for pods kqueue does not manage. With workload-aware
preemption (Kubernetes 1.37's ``GenericWorkload``, and a PodGroup's ``disruptionMode``) it takes
a kqueue gang whole or not at all, but a cluster without it (a stock cluster, or 1.36's alpha
gates, whose scheduler was seen preempting one pod of a ``disruptionMode: PodGroup`` group) takes
single pods: the rest of the gang runs on without them, holding quota and nodes, and the pod its
Job makes again waits for room the preemptor now holds.

kube-scheduler marks each victim ``DisruptionTarget=True`` with reason ``PreemptionByScheduler``
before it deletes it. When a pod of an admitted workload of more than one pod is so marked, kqueue
evicts the whole workload (reason ``PreemptedByScheduler``, with an event naming the pod): its
integration stops the other pods, its quota is released, and it queues again, to be admitted and
released whole when its pods fit (the node-fit guard, docs/concepts.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from kqueue.api.v1alpha1 import Workload, parse_time
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Conflict, Kube, NotFound
from kqueue.controller.readiness import admitted_pods
from kqueue.controller.resources import WORKLOADS
from kqueue.controller.workqueue import Requeue, WorkQueue, run_workers

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

DISRUPTION_TARGET: Final = "DisruptionTarget"
# k8s.io/api core/v1 PodReasonPreemptionByScheduler: the reason kube-scheduler gives its victims.
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"
PREEMPTED_BY_SCHEDULER: Final = "PreemptedByScheduler"


def preempted_by_scheduler(pod: Obj, since: datetime | None = None) -> bool:
    """Whether kube-scheduler chose ``pod`` as a preemption victim (at or after ``since``)."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (
            cond.get("type") == DISRUPTION_TARGET
            and cond.get("status") == "True"
            and cond.get("reason") == PREEMPTION_BY_SCHEDULER
        ):
            stamp = cond.get("lastTransitionTime")
            return since is None or not stamp or parse_time(str(stamp)) >= since
    return False


def eviction_message(pod: Obj, size: int) -> str:
    name = (pod.get("metadata") or {}).get("name", "?")
    return (
        f"kube-scheduler preempted pod {name}, 1 of the {size} pods admitted together, for a "
        "pod of higher priority: the whole Workload is evicted and queued again, so that its "
        "pods run together or not at all"
    )


class GangDisruptionWatcher:
    """Watches pods; evicts a gang whose pod kube-scheduler preempted."""

    def __init__(
        self,
        *,
        workloads: Store[Workload],
        workloads_of_pod: Callable[[Obj], list[Workload]],
        pods_of: Callable[[Workload], list[Obj]],
        kube: Kube,
        events: EventRecorder,
        now: Now,
    ) -> None:
        self._workloads = workloads
        self._workloads_of_pod = workloads_of_pod
        self._pods_of = pods_of
        self._kube = kube
        self._events = events
        self._now = now
        self.queue: WorkQueue[str] = WorkQueue("gang-disruption")

    def on_pod(self, _key: str, pod: Obj, *rest: Obj) -> None:
        new = rest[-1] if rest else pod
        if not preempted_by_scheduler(new):
            return
        for wl in self._workloads_of_pod(new):
            self.queue.add(wl.key)

    async def run(self) -> None:
        await run_workers(self.queue, self, workers=1)

    async def __call__(self, key: str, /) -> Requeue | None:
        wl = self._workloads.get(key)
        if wl is None or not workload_status.holds_quota(wl) or workload_status.is_evicting(wl):
            return None
        if not wl.is_true(c.ADMITTED):
            return None
        size = admitted_pods(wl)
        if size < 2:
            return None  # one pod is its own gang: its controller makes it again
        # A victim of an earlier admission (still terminating when the workload was admitted
        # again) says nothing about this one: its condition predates this Admitted.
        admitted = wl.condition(c.ADMITTED)
        since = admitted.last_transition_time if admitted is not None else None
        victim = next((p for p in self._pods_of(wl) if preempted_by_scheduler(p, since)), None)
        if victim is None:
            return None
        message = eviction_message(victim, size)
        out = workload_status.evict(wl, PREEMPTED_BY_SCHEDULER, message, self._now())
        if out is None:
            return None
        try:
            await self._kube.replace_status(WORKLOADS, out.to_dict(), namespace=out.namespace)
        except NotFound:
            return None
        except Conflict:
            return Requeue(after=0.2)
        self._events.record(
            wl.to_dict(), "Warning", c.EVICTED, f"{PREEMPTED_BY_SCHEDULER}: {message}"
        )
        logger.info("Workload %s evicted: %s", wl.key, message)
        return None
