"""The generic job reconciler: one object of an integration and its Workload, kept in step.

Per object key, from the informers' stores (never from events, so it is idempotent):

1. No Workload yet: create it (owned by the object, named deterministically), or report on the
   object with a Warning event why it cannot be built.
2. The object finished: ``Finished=True`` (Succeeded/Failed) on the Workload, freeing its quota.
3. Keep the Workload's mutable fields in step (the preemption priority may change while it runs).
4. Evicted: stop the object (suspend), and once its pods are gone release the quota and requeue.
5. Admitted: start the object with its admission (unsuspend, partial parallelism) and release its
   gated pods, adding the flavor's node labels and tolerations, never more than admitted. Pods
   are released concurrently: at most ``releases_per_job`` requests in flight per object, and
   ``releases_in_flight`` across all objects (the client's QPS limit applies on top).
6. Not admitted, but running with pods that are not gated (it was created before kqueue's
   webhooks were installed): stop it until it is admitted, and gate its future pods.

Objects without a queue label are managed only with ``manageJobsWithoutQueueName``, in the
namespaces ``managedJobsNamespaceSelector`` selects: their Workload is submitted to the
namespace's LocalQueue named ``default`` if there is one, and stays pending otherwise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from kqueue.api.integrations import IntegrationError, PriorityResolver, queue_name
from kqueue.api.v1alpha1 import LocalQueue, ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workloads as wlstatus
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store, object_key
from kqueue.controller.jobs.base import (
    DEFAULT_LOCAL_QUEUE,
    NAMESPACE_NAME_LABEL,
    Integration,
    Management,
    PodSetRelease,
    is_gated,
    is_terminal,
    release_ops,
    ungate,
)
from kqueue.controller.kube import (
    JSON_PATCH,
    PODS,
    WORKLOADS,
    Conflict,
    Kube,
    KubeError,
    NotFound,
)
from kqueue.controller.metrics import Metrics
from kqueue.controller.scheduler import Now
from kqueue.controller.workqueue import Requeue

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

# Index names on the shared stores.
BY_OWNER = "owner-uid"

# Pod releases in flight: per object, so one large Job does not take every slot, and in all,
# so many Jobs admitted at once do not open hundreds of connections to the API server.
RELEASES_PER_JOB = 16
RELEASES_IN_FLIGHT = 64
# How often an object without a queue is looked at again, so a LocalQueue named "default"
# created later is found (LocalQueue events do not reach the job reconcilers).
NO_QUEUE_RECHECK_S = 10.0

STOPPED_BEFORE_ADMISSION = (
    "{kind} started before kqueue admitted it (its pods are not held by the {gate} scheduling "
    "gate: it was created before kqueue's webhooks were installed, or they did not select it); "
    "suspended until admitted"
)


def owner_uids(obj: Obj | Workload) -> list[str]:
    refs = (
        [r.model_dump(by_alias=True) for r in obj.metadata.owner_references]
        if isinstance(obj, Workload)
        else (obj.get("metadata") or {}).get("ownerReferences") or []
    )
    return [str(r.get("uid")) for r in refs if r.get("controller") and r.get("uid")]


class JobReconciler:
    def __init__(
        self,
        *,
        integration: Integration,
        objects: Store[Obj],
        workloads: Store[Workload],
        pods: Store[Obj],
        flavors: Store[ResourceFlavor],
        priorities: Callable[[], PriorityResolver],
        kube: Kube,
        events: EventRecorder,
        metrics: Metrics,
        now: Now,
        management: Management | None = None,
        namespaces: Store[Obj] | None = None,
        local_queues: Store[LocalQueue] | None = None,
        releases_per_job: int = RELEASES_PER_JOB,
        releases_in_flight: int = RELEASES_IN_FLIGHT,
    ) -> None:
        if releases_per_job < 1 or releases_in_flight < 1:
            raise ValueError(
                f"releases_per_job ({releases_per_job}) and releases_in_flight "
                f"({releases_in_flight}) must be at least 1"
            )
        self.integration = integration
        self._objects = objects
        self._workloads = workloads
        self._pods = pods
        self._flavors = flavors
        self._priorities = priorities
        self._kube = kube
        self._events = events
        self._metrics = metrics
        self._now = now
        self._management = management if management is not None else Management()
        self._namespaces = namespaces
        self._local_queues = local_queues
        self._releases_per_job = releases_per_job
        self._release_slots = asyncio.Semaphore(releases_in_flight)
        # Pods released by us, by UID, with the resourceVersion we saw before releasing:
        # until the informer shows a newer version, the pod is not released again (client-go's
        # "expectations"), which spares a request bound to fail.
        self._released: dict[str, str] = {}
        # Extension point: kinds with several Workloads per object (an elastic Job's slices)
        # narrow the object's Workloads to the one the steps below work with.
        self.workload_hooks: list[Callable[[Obj, list[Workload]], Awaitable[list[Workload]]]] = []

    async def __call__(self, key: str, /) -> Requeue | None:
        obj = self._objects.get(key)
        if obj is None:
            return None  # gone: its Workload goes with it (owner reference, garbage collector)
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        uid = str(meta.get("uid") or "")
        owned = [w for w in self._workloads.by_index(BY_OWNER, uid) if not w.metadata.deletion_timestamp]
        # An object with a Workload stays ours even if it no longer matches (its namespace
        # left managedJobsNamespaceSelector): its Workload still has to finish and free quota.
        if not owned and not self._manages(obj):
            return None
        for hook in self.workload_hooks:
            owned = await hook(obj, owned)
        finished = self.integration.finished(obj)
        if not owned:
            if finished is None:
                return await self._create_workload(obj)
            return None
        # Several Workloads for one object only happen if a previous incarnation's lingers;
        # work with the one that is not finished (the newest if all are).
        active = [w for w in owned if not w.is_finished]
        if not active:
            return None
        wl = active[-1]
        now = self._now()
        if finished is not None:
            await self._write(wlstatus.finish(wl, finished[0], finished[1], now))
            self._events.record(wl.to_dict(), "Normal", c.FINISHED, finished[1])
            return None
        await self._sync_spec(obj, wl)
        if wlstatus.is_evicting(wl):
            return await self._stop(obj, wl, now)
        if wlstatus.holds_quota(wl):
            return await self._run(obj, wl, now)
        await self._hold(obj, wl)
        if self._queue_name(obj) is None:
            return Requeue(after=NO_QUEUE_RECHECK_S)
        return None

    # -- which objects, which queue ------------------------------------------------------------

    def _manages(self, obj: Obj) -> bool:
        """Labelled objects always; unlabelled ones per manageJobsWithoutQueueName."""
        if queue_name(obj) is not None:
            return True
        ns = _namespace(obj) or "default"
        known = self._namespaces.get(ns) if self._namespaces is not None else None
        # A namespace the informer has not seen yet: its name label is all the API server
        # guarantees, which is what the default selector reads.
        labels = ((known or {}).get("metadata") or {}).get("labels") or {NAMESPACE_NAME_LABEL: ns}
        return self._management.manages_unlabelled(labels)

    def _queue_name(self, obj: Obj) -> str | None:
        """The object's queue label; else the namespace's LocalQueue ``default``, if any."""
        named = queue_name(obj)
        if named is not None or self._local_queues is None:
            return named
        ns = _namespace(obj) or "default"
        if self._local_queues.get_by_name(DEFAULT_LOCAL_QUEUE, ns) is not None:
            return DEFAULT_LOCAL_QUEUE
        return None

    def _report_no_queue(self, obj: Obj) -> None:
        ns = _namespace(obj) or "default"
        kind = self.integration.kind
        self._events.record(
            obj,
            "Warning",
            "NoQueueName",
            f"{kind} has no {c.QUEUE_NAME_LABEL} label and namespace {ns} has no LocalQueue "
            f"named {DEFAULT_LOCAL_QUEUE!r}, so its Workload cannot be admitted and its pods stay "
            f"held. Create LocalQueue {DEFAULT_LOCAL_QUEUE!r} in {ns}, or suspend the {kind} "
            f"(spec.suspend: true), set the {c.QUEUE_NAME_LABEL} label and resume it.",
        )

    # -- steps ---------------------------------------------------------------------------------

    async def _create_workload(self, obj: Obj) -> Requeue | None:
        try:
            wl = self.integration.workload_for(obj, self._priorities())
        except IntegrationError as exc:
            # Kueue's reason; the user fixes the object (or creates the missing priority
            # class), which triggers this again.
            self._events.record(
                obj, "Warning", "ErrWorkloadCompose", f"Cannot create the Workload: {exc}"
            )
            return None
        self._warn_on_bad_labels(obj)
        body = wl.to_dict()
        queue = self._queue_name(obj)
        if queue is not None:
            body["spec"]["queueName"] = queue
        try:
            await self._kube.create(WORKLOADS, body, namespace=wl.namespace)
        except Conflict:
            return Requeue(after=0.5)  # exists; our informer has not seen it yet
        ns = wl.namespace or "default"
        self._events.record(obj, "Normal", "CreatedWorkload", f"Created Workload: {ns}/{wl.name}")
        if queue is None:
            self._report_no_queue(obj)
        logger.info("created Workload %s/%s for %s %s", ns, wl.name, self.integration.kind, object_key(obj))
        return None

    def _warn_on_bad_labels(self, obj: Obj) -> None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        value = labels.get(c.PREEMPTIBILITY_LABEL)
        if value is not None and value not in c.PREEMPTIBILITY_LABEL_VALUES:
            self._events.record(
                obj,
                "Warning",
                "InvalidPreemptibility",
                f"label {c.PREEMPTIBILITY_LABEL}={value!r} is ignored: use "
                f"{c.PREEMPTIBLE_LABEL_VALUE!r} or {c.NON_PREEMPTIBLE_LABEL_VALUE!r}",
            )

    async def _sync_spec(self, obj: Obj, wl: Workload) -> None:
        """The preemption priority follows the object's label, even while it runs; the queue
        follows it (or a LocalQueue ``default`` created since) while the Workload waits."""
        try:
            desired = self.integration.workload_for(obj, self._priorities())
        except IntegrationError as exc:
            logger.debug("not syncing Workload %s: %s", wl.key, exc)
            return
        want_ref = desired.spec.preemption_priority_class_ref
        want_value = desired.spec.preemption_priority
        spec: Obj = {}
        if (want_ref, want_value) != (
            wl.spec.preemption_priority_class_ref,
            wl.spec.preemption_priority,
        ):
            spec["preemptionPriorityClassRef"] = want_ref.to_dict() if want_ref else None
            spec["preemptionPriority"] = want_value
        want_queue = self._queue_name(obj)
        # Kueue moves a waiting Workload when its job's queue label changes; an admitted one
        # keeps its queue (the API rejects the change while it holds quota).
        if (
            want_queue is not None
            and want_queue != wl.spec.queue_name
            and not wl.has_quota_reservation
            and wl.status.admission is None
        ):
            spec["queueName"] = want_queue
        if not spec:
            return
        patch = {"spec": spec}
        try:
            await self._kube.patch(WORKLOADS, wl.name, patch, namespace=wl.namespace)
        except KubeError as exc:
            self._events.record(
                obj, "Warning", "ErrWorkloadUpdate", f"Cannot update the Workload's spec: {exc}"
            )

    async def _stop(self, obj: Obj, wl: Workload, now: datetime) -> Requeue | None:
        patch = self.integration.stop_patch(obj, wl)
        if patch is not None:
            evicted = wl.condition(c.EVICTED)
            await self._kube.patch(
                self.integration.resource, _name(obj), patch, namespace=_namespace(obj)
            )
            self._events.record(
                obj, "Normal", "Stopped", evicted.message if evicted else "Evicted"
            )
            return None  # the Job's update (and its pods' deletion) brings us back
        if self.integration.is_active(obj) or self._running_pods(obj):
            return None  # pods still terminating; their events bring us back
        released = wlstatus.release(wl, now)
        if released is None:
            return None
        await self._write(released)
        cond = released.condition(c.REQUEUED)
        self._events.record(
            wl.to_dict(), "Normal", c.REQUEUED, cond.message if cond is not None else "Requeued"
        )
        return None

    async def _run(self, obj: Obj, wl: Workload, now: datetime) -> Requeue | None:
        patch = self.integration.run_patch(obj, wl)
        if patch is not None:
            await self._kube.patch(
                self.integration.resource, _name(obj), patch, namespace=_namespace(obj)
            )
            adm = wl.status.admission
            self._events.record(
                obj,
                "Normal",
                "Started",
                f"Admitted by clusterQueue {adm.cluster_queue if adm else '?'}",
            )
        releases = self._releases(wl)
        already_running = 0
        todo: list[tuple[Obj, PodSetRelease]] = []
        pods = self._pods.by_index(BY_OWNER, str((obj.get("metadata") or {}).get("uid") or ""))
        by_set: dict[str, list[Obj]] = {}
        for pod in pods:
            if (pod.get("metadata") or {}).get("deletionTimestamp") or is_terminal(pod):
                continue
            by_set.setdefault(self.integration.pod_set_of(obj, pod), []).append(pod)
        for set_name, members in sorted(by_set.items()):
            release = releases.get(set_name)
            if release is None:
                continue
            # A pod we released counts as released even while our informer still shows it
            # gated: otherwise a newer pod sorted before it would take its place, one too many.
            running = sum(1 for p in members if not is_gated(p) or self._releasing(p))
            already_running += running
            gated = sorted(
                (p for p in members if is_gated(p) and not self._releasing(p)),
                key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]),
            )
            # Never more pods released than admitted (partial admission, or extra pods the
            # Job controller has not deleted yet after parallelism went down).
            todo += [(pod, release) for pod in gated[: max(release.count - running, 0)]]
        released = await self._release_all(todo, wl.quota_reserved_at)
        if released and not already_running and patch is None:
            adm = wl.status.admission
            self._events.record(
                obj,
                "Normal",
                "Started",
                f"Admitted by clusterQueue {adm.cluster_queue if adm else '?'}; "
                f"released {released} pod(s)",
            )
        if released < len(todo):
            # Retried with the key's backoff: the pods still gated are released next time.
            logger.warning(
                "%s %s: released %d of %d pods; retrying the rest",
                self.integration.kind,
                object_key(obj),
                released,
                len(todo),
            )
            return Requeue()
        return None

    async def _release_all(
        self, todo: Sequence[tuple[Obj, PodSetRelease]], admitted_at: datetime | None
    ) -> int:
        """Release the pods concurrently, within the per-object and global bounds; returns how
        many were released. Every release runs to its end before an unexpected error (not an
        API answer) is raised, so none is left in flight."""
        per_object = asyncio.Semaphore(self._releases_per_job)

        async def one(pod: Obj, release: PodSetRelease) -> bool:
            async with per_object, self._release_slots:
                if not await self._release_pod(pod, release):
                    return False
            if admitted_at is not None:
                waited = (self._now() - admitted_at).total_seconds()
                self._metrics.gate_removal(max(waited, 0.0))
            return True

        results = await asyncio.gather(*(one(p, r) for p, r in todo), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return sum(1 for result in results if result)

    async def _hold(self, obj: Obj, wl: Workload) -> None:
        """Stop an object that runs without an admission, and gate its future pods.

        The normal case is a running object whose pods are born gated: nothing to do. One whose
        template carries no gate was never seen by the webhook (created before kqueue's webhooks
        were installed, or when they did not select it); its pods run unchecked, so, like
        Kueue, it is suspended (the Job controller deletes its pods without counting a
        failure) until its Workload is admitted. A Workload admitted in an earlier life of
        kqueue holds quota and never gets here.
        """
        if self.integration.holds_pods(obj):
            return
        kind = self.integration.kind
        if not self.integration.is_suspended(obj):
            patch = self.integration.stop_patch(obj, wl)
            if patch is None:
                return
            await self._kube.patch(
                self.integration.resource, _name(obj), patch, namespace=_namespace(obj)
            )
            message = STOPPED_BEFORE_ADMISSION.format(kind=kind, gate=c.ADMISSION_GATE)
            self._events.record(obj, "Normal", "Stopped", message)
            logger.info("suspended %s %s: %s", kind, object_key(obj), message)
            return
        patch = self.integration.hold_patch(obj)
        if patch is None:
            return  # not reset by its controller yet: its update brings us back
        try:
            await self._kube.patch(
                self.integration.resource, _name(obj), patch, namespace=_namespace(obj)
            )
        except Conflict:
            return  # changed meanwhile: its update brings us back
        except KubeError as exc:
            # Admission still works: its pods then start ungated, without the flavor's node
            # labels and tolerations.
            self._events.record(
                obj,
                "Warning",
                "ErrGateTemplate",
                f"Cannot add the {c.ADMISSION_GATE} scheduling gate to spec.template: {exc}",
            )
            return
        logger.info("%s %s: gated its pod template", kind, object_key(obj))

    def _releases(self, wl: Workload) -> dict[str, PodSetRelease]:
        out: dict[str, PodSetRelease] = {}
        adm = wl.status.admission
        if adm is None:
            return out
        for psa in adm.pod_set_assignments:
            node_selector: dict[str, str] = {}
            tolerations: list[Obj] = []
            for flavor_name in sorted(set(psa.flavors.values())):
                flavor = self._flavors.get(flavor_name)
                if flavor is None:
                    continue
                node_selector.update(flavor.spec.node_labels)
                tolerations += [t.to_dict() for t in flavor.spec.tolerations]
            pod_set = wl.pod_set(psa.name)
            count = psa.count if psa.count is not None else (pod_set.count if pod_set else 0)
            out[psa.name] = PodSetRelease(psa.name, count, node_selector, tolerations)
        return out

    def _releasing(self, pod: Obj) -> bool:
        """Released by us; the informer has not shown it since."""
        meta = pod.get("metadata") or {}
        return self._released.get(str(meta.get("uid") or "")) == str(
            meta.get("resourceVersion") or ""
        )

    async def _release_pod(self, pod: Obj, release: PodSetRelease) -> bool:
        meta = pod.get("metadata") or {}
        uid, version = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        if self._released.get(uid) == version:
            return True  # released; the informer has not caught up yet
        new = ungate(pod, release)
        if new is None:
            return True
        ops = release_ops(pod, new)
        try:
            await self._kube.patch(
                PODS, _name(pod), ops, namespace=_namespace(pod), content_type=JSON_PATCH
            )
        except NotFound:
            return True
        except KubeError as exc:
            if exc.status == 422:
                # The "test" failed: the pod changed since our informer saw it. Its update
                # event brings this Job back with the current pod.
                logger.debug("pod %s changed before its release: %s", object_key(pod), exc)
                return True
            logger.info("releasing pod %s: %s", object_key(pod), exc)
            return False
        if len(self._released) > 50_000:
            self._released.clear()
        self._released[uid] = version
        return True

    def _running_pods(self, obj: Obj) -> list[Obj]:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        return [p for p in self._pods.by_index(BY_OWNER, uid) if not is_terminal(p)]

    async def _write(self, wl: Workload | None) -> None:
        if wl is None:
            return
        await self._kube.replace_status(WORKLOADS, wl.to_dict(), namespace=wl.namespace)


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _namespace(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("namespace")

