"""Plain Pods: a single Pod, or a pod group admitted as one gang (Kueue's pod integration).

A Pod labelled ``kqueue.io/queue-name`` with no controlling owner is kqueue's to manage. The pod
webhook (:func:`~kqueue.controller.integrations.pod.webhook.mutate_plain_pod`,
``mplainpod.kqueue.io``) holds it at creation: the ``kqueue.io/admission`` gate, the
``kqueue.io/managed`` label (so kqueue's pod informer sees it) and the ``kqueue.io/managed``
finalizer, which keeps the pod, and so its accounting, until kqueue has seen it terminate.

Per single pod (key ``pod:<ns>/<name>``) or group (key ``group:<ns>/<group>``), the reconciler:

1. Feeds the group's size to the engine's barrier (``Engine.pods_present``) and, once all pods
   of the group exist (``kqueue.io/pod-group-total-count``), creates the one Workload.
2. Admitted: releases the gated pods together through the one release path
   (:mod:`kqueue.controller.integrations.release`: gate removed, the flavors' node labels as
   nodeSelector and their tolerations, never more pods than admitted).
3. Evicted: marks each live pod ``DisruptionTarget=True`` (reason ``EvictedByKqueue``) and deletes
   it; once none runs, the quota is released and the Workload requeued (new pods of the group
   join it).
4. All pods terminated: ``Finished`` (Succeeded when they all succeeded, else Failed).
5. Removes the finalizer from pods that terminated, or whose Workload finished.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from kqueue.api.integrations import (
    IntegrationError,
    PriorityResolver,
    group_name,
    group_total_count,
    role_hash,
    workload_for_pod,
    workload_for_pod_group,
)
from kqueue.api.integrations.pod import POD_KIND, group_pods
from kqueue.api.integrations.registry import INTEGRATIONS, Workloads
from kqueue.api.v1alpha1 import ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.gate import is_terminal
from kqueue.controller.informer import Store
from kqueue.controller.integrations import milestones
from kqueue.controller.integrations.eviction import evict_pod
from kqueue.controller.integrations.owners import BY_OWNER
from kqueue.controller.integrations.release import PodReleaser, pod_set_releases
from kqueue.controller.kube import Conflict, Kube, NotFound
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import PODS, WORKLOADS, object_key
from kqueue.controller.workqueue import Requeue, WorkQueue, run_workers
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey

if TYPE_CHECKING:
    from kqueue.controller.gang import GangPlacement

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

# Index on the pod store: ``<namespace>/<group>`` of pods in a group.
BY_GROUP: Final = "pod-group"
SINGLE: Final = "pod:"
GROUP: Final = "group:"


# -- which pods ----------------------------------------------------------------------------


def _meta(pod: Obj) -> Obj:
    return pod.get("metadata") or {}


# Kinds whose pods the pod integration queues although a child of theirs controls them.
_PARENTS: Final = tuple(i for i in INTEGRATIONS if i.pod_of is not None)


def is_plain(pod: Obj) -> bool:
    """A pod kqueue manages on its own: it names a queue and no controller owns it, or it is a
    pod of a kind whose pods the pod integration queues (each its own Workload, or its pod
    group's: the kind's child owns it, and no integration queues that child, so it is never
    queued twice)."""
    meta = _meta(pod)
    if not (meta.get("labels") or {}).get(c.QUEUE_NAME_LABEL):
        return False
    for parent in _PARENTS:
        if parent.pod_of is not None and parent.pod_of(pod):
            # A pod of a kind queued by pod group, once in its group's pod group (the kind's
            # integration labels it): never before, or it would be queued as a pod of its own.
            return parent.workloads is Workloads.EACH_POD or group_name(pod) is not None
    return not any(r.get("controller") for r in meta.get("ownerReferences") or [])


def group_key(pod: Obj) -> list[str]:
    name = group_name(pod)
    return [f"{_meta(pod).get('namespace') or 'default'}/{name}"] if name else []


def reconcile_key(pod: Obj) -> str | None:
    if not is_plain(pod):
        return None
    namespace = _meta(pod).get("namespace") or "default"
    name = group_name(pod)
    if name:
        return f"{GROUP}{namespace}/{name}"
    return f"{SINGLE}{namespace}/{_meta(pod).get('name')}"


# -- the reconciler --------------------------------------------------------------------------


def _terminal_reason(pods: list[Obj]) -> tuple[str, str]:
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    if failed:
        names = ", ".join(sorted(str(_meta(p).get("name")) for p in failed))
        return c.FINISHED_FAILED, f"Pods failed: {names}"
    return c.FINISHED_SUCCEEDED, "Pods succeeded"


class PodReconciler:
    def __init__(
        self,
        *,
        engine: Callable[[], Engine],
        pods: Store[Obj],
        workloads: Store[Workload],
        flavors: Store[ResourceFlavor],
        priorities: Callable[[], PriorityResolver],
        kube: Kube,
        events: EventRecorder,
        releaser: PodReleaser,
        now: Now,
        metrics: Metrics,
        gang: GangPlacement | None = None,
    ) -> None:
        self._gang = gang
        self._metrics = metrics
        self._engine = engine
        self._pods = pods
        self._workloads = workloads
        self._flavors = flavors
        self._priorities = priorities
        self._kube = kube
        self._events = events
        self._releaser = releaser
        self._now = now
        self.queue: WorkQueue[str] = WorkQueue("jobs/pod")

    def on_pod(self, _key: str, pod: Obj, *rest: Obj) -> None:
        key = reconcile_key(rest[-1] if rest else pod)
        if key is not None:
            self.queue.add(key)

    def on_workload(self, _key: str, wl: Workload, *rest: Workload) -> None:
        new = rest[-1] if rest else wl
        namespace = new.namespace or "default"
        for ref in new.metadata.owner_references:
            if ref.kind != "Pod":
                continue
            pod = self._pods.get(f"{namespace}/{ref.name}")
            key = reconcile_key(pod) if pod is not None else None
            if key is not None:
                self.queue.add(key)

    async def run(self) -> None:
        for key in self._pods:
            pod = self._pods.get(key)
            rkey = reconcile_key(pod) if pod is not None else None
            if rkey is not None:
                self.queue.add(rkey)
        await run_workers(self.queue, self, workers=4)

    async def __call__(self, key: str, /) -> Requeue | None:
        if key.startswith(GROUP):
            namespace, name = key[len(GROUP):].split("/", 1)
            members = [p for p in self._pods.by_index(BY_GROUP, f"{namespace}/{name}") if is_plain(p)]
            return await self._group(namespace, name, members)
        namespace, name = key[len(SINGLE):].split("/", 1)
        pod = self._pods.get(f"{namespace}/{name}")
        if pod is None:
            return None  # gone: its Workload follows it (owner reference)
        uid = str(_meta(pod).get("uid") or "")
        owned = [w for w in self._workloads.by_index(BY_OWNER, uid) if not w.metadata.deletion_timestamp]
        wl = owned[-1] if owned else None
        if wl is None:
            if is_terminal(pod) or _meta(pod).get("deletionTimestamp"):
                await self._drop_finalizers([pod])
                return None
            try:
                created = workload_for_pod(pod, self._priorities())
            except IntegrationError as exc:
                self._events.record(pod, "Warning", "ErrWorkloadCompose", f"Cannot create the Workload: {exc}")
                return None
            return await self._create(created, pod)
        return await self._drive(wl, [pod])

    async def _group(self, namespace: str, name: str, members: list[Obj]) -> Requeue | None:
        key = WorkloadKey(f"{namespace}/{name}")
        wl = self._workloads.get(key)
        if wl is not None and wl.metadata.deletion_timestamp:
            wl = None
        if not members:
            return None
        try:
            total = group_total_count(members[0])
        except IntegrationError as exc:
            self._events.record(members[0], "Warning", "ErrWorkloadCompose", str(exc))
            return None
        live = [p for p in members if not is_terminal(p) and not _meta(p).get("deletionTimestamp")]
        if wl is None or not workload_status.holds_quota(wl):
            # The gang waits for all of its pods: the engine's barrier keeps the Workload out
            # of the cycle until then (a pod deleted before admission closes it again).
            self._engine().pods_present(key, len(live), total)
        if wl is None:
            if len(live) < total:
                if live:
                    newest = max(live, key=lambda p: str(_meta(p).get("creationTimestamp") or ""))
                    self._events.record(
                        newest,
                        "Normal",
                        "WaitingForPodGroup",
                        f"Pod group {name}: {len(live)} of {total} pods exist; the group is "
                        f"queued once all {total} exist",
                    )
                await self._drop_finalizers(p for p in members if is_terminal(p))
                return None
            try:
                created = workload_for_pod_group(group_pods(live), self._priorities())
            except IntegrationError as exc:
                self._events.record(live[0], "Warning", "ErrWorkloadCompose", f"Cannot create the Workload: {exc}")
                return None
            return await self._create(created, live[0])
        return await self._drive(wl, members)

    async def _create(self, wl: Workload, pod: Obj) -> Requeue | None:
        try:
            created = await self._kube.create(WORKLOADS, wl.to_dict(), namespace=wl.namespace)
        except Conflict:
            return Requeue(after=0.5)
        # As every kind's reconciler: the event, and the creation latency by kind (Pod).
        milestones.workload_created(
            pod, POD_KIND, wl, created, events=self._events, metrics=self._metrics
        )
        logger.info("created Workload %s/%s for pod %s", wl.namespace, wl.name, object_key(pod))
        return None

    async def _drive(self, wl: Workload, pods: list[Obj]) -> Requeue | None:
        now = self._now()
        logger.debug(
            "pods of Workload %s: %s", wl.key,
            ", ".join(f"{_meta(p).get('name')}={(p.get('status') or {}).get('phase')}" for p in pods),
        )
        live = [p for p in pods if not is_terminal(p)]
        if wl.is_finished:
            await self._drop_finalizers(pods)
            return None
        if workload_status.is_evicting(wl):
            for pod in live:
                await self._evict_pod(pod, wl)
            if live:
                return None  # their termination brings us back
            await self._release(wl, now)
            await self._drop_finalizers(pods)
            return None
        terminated = [p for p in pods if is_terminal(p)]
        if pods and not live and workload_status.holds_quota(wl):
            reason, message = _terminal_reason(terminated)
            finished = workload_status.finish(wl, reason, message, now)
            if finished is not None:
                await self._kube.replace_status(WORKLOADS, finished.to_dict(), namespace=wl.namespace)
                self._events.record(wl.to_dict(), "Normal", c.FINISHED, message)
            await self._drop_finalizers(pods)
            return None
        if workload_status.holds_quota(wl):
            by_set: dict[str, list[Obj]] = {}
            for pod in live:
                if not _meta(pod).get("deletionTimestamp"):
                    by_set.setdefault(self._pod_set_of(wl, pod), []).append(pod)
            releases = pod_set_releases(wl, self._flavors)
            waiting = [p for ps in by_set.values() for p in ps]
            if self._gang is not None:
                # The PodGroup first (a pod group's pods name it): kube-scheduler must know the
                # gang's size before any pod leaves the gate. Across an eviction the group is
                # kept: the group's new pods name it again, and a PodGroup named by live pods
                # cannot be deleted (the API server's podgroup-protection finalizer).
                admitted = sum(r.count for r in releases.values())
                prepared = await self._gang.prepare(wl, waiting, admitted)
                if not prepared.ready:
                    logger.info("pods of Workload %s held: %s", wl.key, prepared.why)
                    return Requeue(after=1.0)
            result = await self._releaser.release(
                by_set, releases, admitted_at=wl.quota_reserved_at,
                cluster_queue=wl.status.admission.cluster_queue if wl.status.admission else "",
                is_group=any(group_name(p) is not None for p in pods),
            )
            # On the pod the Workload was created for (a group's first), as CreatedWorkload.
            milestones.started(
                pods[0], wl, result, sum(r.count for r in releases.values()), events=self._events
            )
            if not result.complete:
                return Requeue()
            if self._gang is not None:
                recheck = await self._gang.report(wl, waiting)
                if recheck is not None:
                    return Requeue(after=recheck)
            return None
        await self._drop_finalizers(terminated)
        return None

    def _pod_set_of(self, wl: Workload, pod: Obj) -> str:
        if len(wl.spec.pod_sets) == 1:
            return wl.spec.pod_sets[0].name
        return role_hash(pod)

    async def _evict_pod(self, pod: Obj, wl: Workload) -> None:
        await evict_pod(pod, wl, kube=self._kube, events=self._events, now=self._now)

    async def _release(self, wl: Workload, now: datetime) -> None:
        released = workload_status.release(wl, now)
        if released is None:
            return
        try:
            await self._kube.replace_status(WORKLOADS, released.to_dict(), namespace=wl.namespace)
        except NotFound:
            return
        cond = released.condition(c.REQUEUED)
        self._events.record(
            wl.to_dict(), "Normal", c.REQUEUED,
            (cond.message if cond is not None else "Requeued")
            + "; its pods were deleted: create them again to run",
        )

    async def _drop_finalizers(self, pods: Iterable[Obj]) -> None:
        for pod in pods:
            meta = _meta(pod)
            finalizers = list(meta.get("finalizers") or [])
            if c.MANAGED_FINALIZER not in finalizers:
                continue
            patch = {
                "metadata": {
                    "finalizers": [f for f in finalizers if f != c.MANAGED_FINALIZER],
                    "resourceVersion": meta.get("resourceVersion"),
                }
            }
            try:
                await self._kube.patch(PODS, str(meta["name"]), patch, namespace=meta.get("namespace"))
            except NotFound:
                continue
            except Conflict:
                continue  # the pod's newer version comes back through the informer
