"""The generic job reconciler: one object of an integration and its Workload, kept in step.

Per object key, from the informers' stores (never from events, so it is idempotent):

1. No Workload yet: create it (owned by the object, named deterministically), or report on the
   object with a Warning event why it cannot be built. An object its user created suspended is
   left alone until the user resumes it (the webhook then hands the suspension to kqueue).
2. The object finished: ``Finished=True`` (Succeeded/Failed) on the Workload, freeing its quota.
3. Keep the Workload's mutable fields in step (the preemption priority may change while it runs).
4. Evicted: stop the object (suspend, marked as kqueue's), and once its pods are gone release
   the quota and requeue.
5. Admitted: start the object with its admission (resume, the flavors' node labels and
   tolerations written into its pod templates, partial counts) and release its gated pods
   through the one release path (:mod:`.release`), never more than admitted.
6. Queued: the object waits suspended (no pods, no deadline running, no namespace quota used),
   its pod templates gated and as the Workload recorded them. One found running (created before
   kqueue's webhooks were installed, or by a kqueue that held queued work by the gate alone) is
   suspended.

Kueue's ``JobReconciler`` (pkg/controller/jobframework/reconciler.go), for any kind through its
:class:`~kqueue.controller.integrations.framework.GenericJob`.

A kind whose objects act as one job (a :class:`~kqueue.controller.integrations.framework.
ComposableJob`: plain pods and pod groups) goes through the same steps on its members: the
Workload once all members exist (the engine's barrier holds it until then), finished when all
are terminal, stopped by evicting (deleting) the members, started by releasing them; no patch
holds or resumes it (its members are gated), and each member is let go once done. Its
Workload's spec is not kept in step (step 3): a pod's labels are not reread once it is queued.

Objects without a queue label are managed only with ``manageJobsWithoutQueueName``, in the
namespaces ``managedJobsNamespaceSelector`` selects: their Workload is submitted to the
namespace's LocalQueue named ``default`` if there is one, and stays pending otherwise.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kqueue.api.integrations import IntegrationError, PriorityResolver, queue_name
from kqueue.api.integrations import registry as integration_registry
from kqueue.api.integrations.common import owner_reference
from kqueue.api.integrations.matching import pod_set_changes
from kqueue.api.integrations.pod import ExcessPod
from kqueue.api.v1alpha1 import LocalQueue, ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.admission_checks.multikueue import adapters as multikueue
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.gang_topology import Books, booked_where_bound
from kqueue.controller.gate import PodSetRelease, is_gated, is_terminal
from kqueue.controller.informer import Store
from kqueue.controller.integrations import milestones
from kqueue.controller.integrations.eviction import evict_pod
from kqueue.controller.integrations.framework import ComposableJob, Composed, GenericJob
from kqueue.controller.integrations.management import (
    DEFAULT_LOCAL_QUEUE,
    NAMESPACE_NAME_LABEL,
    Management,
)
from kqueue.controller.integrations.owners import (
    BY_OWNER,
    controlled_by,
    object_index_key,
    pods_of_workload,
)
from kqueue.controller.integrations.release import PodReleaser, pod_set_releases
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import WORKLOADS, object_key
from kqueue.controller.workqueue import Requeue
from kqueue.engine.engine import Engine

if TYPE_CHECKING:
    from kqueue.controller.gang import GangPlacement
    from kqueue.controller.node_fit import NodeFitHold

logger = logging.getLogger(__name__)

Obj = dict[str, Any]


# How often an object without a queue is looked at again, so a LocalQueue named "default"
# created later is found (LocalQueue events do not reach the job reconcilers).
NO_QUEUE_RECHECK_S = 10.0
# How often a job whose prebuilt Workload does not exist yet looks for it again (Workload
# events reach the reconciler through owner references, which it does not have yet).
PREBUILT_RECHECK_S = 2.0

STOPPED_BEFORE_ADMISSION = (
    "{kind} started before kqueue admitted it (its pods are not held by the {gate} scheduling "
    "gate: it was created before kqueue's webhooks were installed, or they did not select it); "
    "suspended until admitted"
)
SUSPENDED_WHILE_QUEUED = (
    "{kind} was running while its Workload is queued; suspended until admitted, so it has no "
    "pods, its deadline does not run and it uses no namespace quota"
)
USER_SUSPENDED = (
    "{kind} was created suspended (spec.suspend: true), so kqueue leaves it to its user: set "
    "spec.suspend to false to queue it; kqueue then holds it suspended until it is admitted"
)


class JobReconciler:
    def __init__(
        self,
        *,
        job: GenericJob,
        objects: Store[Obj],
        workloads: Store[Workload],
        pods: Store[Obj],
        flavors: Store[ResourceFlavor],
        priorities: Callable[[], PriorityResolver],
        kube: Kube,
        events: EventRecorder,
        releaser: PodReleaser,
        now: Now,
        management: Management | None = None,
        namespaces: Store[Obj] | None = None,
        local_queues: Store[LocalQueue] | None = None,
        parent_kinds: frozenset[tuple[str, str]] = frozenset(),
        metrics: Metrics | None = None,
        gang: GangPlacement | None = None,
        engine: Callable[[], Engine] | None = None,
        node_fit: NodeFitHold | None = None,
    ) -> None:
        self._metrics = metrics if metrics is not None else Metrics()
        self.job = job
        # How MultiKueue dispatches the kind, if it can: a manager-side object runs on a worker.
        self._multikueue = multikueue.adapter_for(job.api_version, job.kind)
        # A composable kind (pod groups): ``objects`` is the store of its members.
        self.composable = job if isinstance(job, ComposableJob) else None
        if self.composable is not None and engine is None:
            raise ValueError(f"{job.kind}: a composable kind needs the engine (its group barrier)")
        self._engine = engine
        self._gang = gang
        self._node_fit = node_fit
        # Reconciles the object of a key again (its work queue's add): the node-fit guard wakes
        # held workloads through it when capacity frees.
        self.requeue: Callable[[str], None] | None = None
        self._parent_kinds = parent_kinds
        self._objects = objects
        self._workloads = workloads
        self._pods = pods
        self._flavors = flavors
        self._priorities = priorities
        self._kube = kube
        self._events = events
        self._releaser = releaser
        self._now = now
        # Pod UID -> the WaitingBeyondAdmittedCount message it was last given (see _tell_held).
        self._told_held: dict[str, str] = {}
        self._management = management if management is not None else Management()
        self._namespaces = namespaces
        self._local_queues = local_queues
        # Extension point: kinds with several Workloads per object (an elastic Job's slices)
        # narrow the object's Workloads to the one the steps below work with.
        self.workload_hooks: list[Callable[[Obj, list[Workload]], Awaitable[list[Workload]]]] = []

    async def __call__(self, key: str, /) -> Requeue | None:
        if self.composable is not None:
            return await self._reconcile_composed(self.composable, key)
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
        finished = self.job.finished(obj)
        if not owned and c.PREBUILT_WORKLOAD_LABEL in (meta.get("labels") or {}):
            prebuilt = await self._adopt_prebuilt(obj)
            if prebuilt is None:
                return Requeue(after=PREBUILT_RECHECK_S)  # waits for its Workload
            owned = [prebuilt]
        if not owned:
            if finished is not None:
                return None
            if self.job.user_suspended(obj):
                message = USER_SUSPENDED.format(kind=self.job.kind)
                self._events.record(obj, "Normal", "SuspendedByUser", message)
                return None
            return await self._create_workload(obj)
        # Several Workloads for one object only happen if a previous incarnation's lingers;
        # work with the one that is not finished (the newest if all are).
        active = [w for w in owned if not w.is_finished]
        if not active:
            return None
        wl = active[-1]
        now = self._now()
        if finished is not None:
            await self._write(workload_status.finish(wl, finished[0], finished[1], now))
            self._events.record(wl.to_dict(), "Normal", c.FINISHED, finished[1])
            return None
        if await self._sync_spec(obj, wl):
            return None  # the Workload's update brings the object back, with the new spec
        if workload_status.is_evicting(wl):
            return await self._stop(obj, wl, now)
        if workload_status.may_run(wl):
            return await self._run(obj, wl, now, key)
        await self._hold(obj, wl)  # queued, or holding quota while its admission checks run
        if self._queue_name(obj) is None:
            return Requeue(after=NO_QUEUE_RECHECK_S)
        return None

    async def _adopt_prebuilt(self, obj: Obj) -> Workload | None:
        """The Workload the object's ``kqueue.io/prebuilt-workload-name`` names, made its
        controlled child (Kueue's prebuilt workloads: a MultiKueue worker's copy of the
        manager's Workload, docs/multikueue.md); None while it does not exist."""
        meta = obj.get("metadata") or {}
        name = str((meta.get("labels") or {})[c.PREBUILT_WORKLOAD_LABEL])
        ns = _namespace(obj) or "default"
        wl = self._workloads.get(f"{ns}/{name}")
        if wl is None or wl.metadata.deletion_timestamp:
            return None
        if any(ref.controller for ref in wl.metadata.owner_references):
            return None  # another object's Workload: never taken over
        ref = owner_reference(
            obj, api_version=self.job.api_version, kind=self.job.kind, controller=True
        )
        patch = {"metadata": {"ownerReferences": [ref]}}
        try:
            written = await self._kube.patch(WORKLOADS, name, patch, namespace=ns)
        except NotFound:
            return None
        return Workload.model_validate(written)

    async def _reconcile_composed(self, job: ComposableJob, key: str) -> Requeue | None:
        """The same steps for a job made of several objects (:class:`ComposableJob`): created
        once all members exist, finished when all are terminal, stopped by evicting the
        members, started by releasing them; each member let go once it is done."""
        composed = job.compose(key, self._objects, self._workloads)
        if composed is None:
            return None
        members = composed.members
        if composed.invalid is not None:
            self._events.record(members[0], "Warning", "ErrWorkloadCompose", composed.invalid)
            return None
        wl = composed.workload
        if composed.excess:
            await self._delete_excess(job, composed)
            gone = {_name(dict(e.pod)) for e in composed.excess}
            members = [p for p in members if _name(p) not in gone]
        live = [p for p in members if not is_terminal(p) and not _deleting(p)]
        if composed.prebuilt is not None:
            # A MultiKueue worker's copies: they take the manager's Workload, copied here.
            if wl is None:
                return Requeue(after=PREBUILT_RECHECK_S)  # waits for its Workload
            adopted = await self._adopt_members(
                job, wl, [p for p in members if not _deleting(p)],
                controller=composed.barrier is None,
            )
            if adopted is None:
                return Requeue(after=PREBUILT_RECHECK_S)  # changed meanwhile: read again
            wl = adopted
        waits = wl is None or not workload_status.holds_quota(wl)
        if composed.barrier is not None and waits and self._engine is not None:
            # The gang waits for all of its members: the engine's barrier keeps the Workload
            # out of the cycle until then (a member deleted before admission closes it again).
            self._engine().pods_present(composed.barrier, len(live), composed.total)
        if wl is None:
            if len(live) < composed.total:
                if live and composed.barrier is not None:
                    newest = max(live, key=lambda p: str(_meta(p).get("creationTimestamp") or ""))
                    self._events.record(
                        newest,
                        "Normal",
                        "WaitingForPodGroup",
                        f"{composed.name}: {len(live)} of {composed.total} pods exist; the group "
                        f"is queued once all {composed.total} exist",
                    )
                await self._let_go(job, [p for p in members if p not in live])
                return None
            return await self._create_workload(
                live[0], build=lambda: job.workload_for_members(live, self._priorities())
            )
        now = self._now()
        if wl.is_finished:
            await self._let_go(job, members)
            return None
        running = [p for p in members if not is_terminal(p)]
        if workload_status.is_evicting(wl) and _dispatched_away(wl):
            # MultiKueue's: the copies on the workers go with the eviction; the members here
            # never ran (gated), so they stay, and are dispatched again once readmitted.
            await self._requeue(wl, now)
            return None
        if workload_status.is_evicting(wl):
            # As Kueue's pod Stop (``podSuspended``): a member still behind kqueue's gate never
            # ran, so it stays, gated, for the Workload's next admission (a MultiKueue pod
            # evicted before it was dispatched, a pod whose admission check went to Retry);
            # only the released members are stopped.
            kept = [p for p in running if is_gated(p) and not _deleting(p)]
            stopping = [p for p in running if p not in kept]
            for member in stopping:
                await evict_pod(member, wl, kube=self._kube, events=self._events, now=self._now)
            if stopping:
                return None  # their termination brings us back
            await self._requeue(wl, now, note=job.requeue_note if len(kept) < len(members) else "")
            await self._let_go(job, [p for p in members if p not in kept])
            return None
        terminated = [p for p in members if is_terminal(p)]
        if not running and workload_status.holds_quota(wl):
            reason, message = job.finished_members(terminated)
            finished = workload_status.finish(wl, reason, message, now)
            if finished is not None:
                await self._write(finished)
                self._events.record(wl.to_dict(), "Normal", c.FINISHED, message)
            await self._let_go(job, members)
            return None
        if workload_status.may_run(wl) and wl.status.cluster_name is not None:
            # MultiKueue placed it on a worker cluster (before its check turned Ready): the
            # copies run there, and the members here stay gated (Kueue: a composable job with a
            # MultiKueue check skips local execution).
            return None
        if workload_status.may_run(wl):
            by_set: dict[str, list[Obj]] = {}
            for member in running:
                if not _deleting(member):
                    by_set.setdefault(job.member_pod_set(wl, member), []).append(member)
            # On the member the Workload was created for (a group's first), as CreatedWorkload.
            return await self._release_pods(
                members[0], wl, by_set, pod_set_releases(wl, self._flavors),
                is_group=composed.barrier is not None, key=key,
            )
        await self._let_go(job, terminated)
        return None

    def _tell_held(self, wl: Workload, held: tuple[tuple[Obj, str, int], ...]) -> None:
        """A ``WaitingBeyondAdmittedCount`` event on each pod kept gated because its pod set's
        admitted count already runs or is released, once per pod and message: the reconciler
        runs on every pod change. (A pod being deleted is not counted: a Job's replacement for
        it is released at once.)"""
        for pod, set_name, count in held:
            uid = str(_meta(pod).get("uid") or "")
            message = held_message(wl.key, set_name, count)
            if self._told_held.get(uid) == message:
                continue
            if len(self._told_held) >= _TOLD_HELD_MAX:
                self._told_held.clear()  # bounded: at worst a pod is told once more
            self._told_held[uid] = message
            self._events.record(pod, "Normal", WAITING_BEYOND_ADMITTED_COUNT, message)

    async def _delete_excess(self, job: ComposableJob, composed: Composed) -> None:
        """Kueue's removeExcessPods: each member beyond the group's total count (or, once the
        Workload exists, beyond its pod set's count) is let go (kqueue's finalizer off) and
        deleted, with an ``ExcessPodDeleted`` event on it. Kept, a gated one would name the
        group's PodGroup (set at its creation, immutable) and kube-scheduler would bind none
        of the admitted pods."""
        for excess in composed.excess:
            member = dict(excess.pod)
            await self._let_go(job, [member])
            try:
                await self._kube.delete(job.resource, _name(member), namespace=_namespace(member))
            except NotFound:
                continue
            message = excess_message(composed.name, excess)
            self._events.record(member, "Normal", EXCESS_POD_DELETED, message)
            logger.info("%s/%s: %s", _namespace(member), _name(member), message)

    async def _adopt_members(
        self, job: ComposableJob, wl: Workload, members: list[Obj], *, controller: bool
    ) -> Workload | None:
        """The prebuilt Workload owned by each member too (as the Workload kqueue makes for them
        would be: a single pod controls it, a group's pods own it together), so its events reach
        them and it goes with them; None if it changed meanwhile."""
        have = {ref.uid for ref in wl.metadata.owner_references}
        new = [
            owner_reference(m, api_version=job.api_version, kind=job.kind, controller=controller)
            for m in members
            if str(_meta(m).get("uid") or "") not in have
        ]
        if not new:
            return wl
        refs = wl.to_dict()["metadata"].get("ownerReferences") or []
        patch = {
            "metadata": {
                "ownerReferences": [*refs, *new],
                "resourceVersion": wl.metadata.resource_version,
            }
        }
        try:
            written = await self._kube.patch(WORKLOADS, wl.name, patch, namespace=wl.namespace)
        except (NotFound, Conflict):
            return None
        return Workload.model_validate(written)

    async def _let_go(self, job: ComposableJob, members: list[Obj]) -> None:
        for member in members:
            patch = job.done_patch(member)
            if patch is None:
                continue
            try:
                await self._kube.patch(
                    job.resource, _name(member), patch, namespace=_namespace(member)
                )
            except (NotFound, Conflict):
                continue  # gone, or its newer version comes back through the informer

    # -- which objects, which queue ------------------------------------------------------------

    def _manages(self, obj: Obj) -> bool:
        """Labelled objects always; unlabelled ones per manageJobsWithoutQueueName; never one
        that another integration's object controls (it is queued as part of that object)."""
        if controlled_by(obj, self._parent_kinds):
            return False
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
        kind = self.job.kind
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

    async def _create_workload(
        self, obj: Obj, *, build: Callable[[], Workload] | None = None
    ) -> Requeue | None:
        """The Workload of ``obj`` (or what ``build`` makes: a composed job's, reported on
        ``obj``, its first member)."""
        try:
            wl = build() if build is not None else self.job.workload_for(obj, self._priorities())
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
            created = await self._kube.create(WORKLOADS, body, namespace=wl.namespace)
        except Conflict:
            return Requeue(after=0.5)  # exists; our informer has not seen it yet
        milestones.workload_created(
            obj, self.job.kind, wl, created, events=self._events, metrics=self._metrics
        )
        ns = wl.namespace or "default"
        if queue is None:
            self._report_no_queue(obj)
        logger.info("created Workload %s/%s for %s %s", ns, wl.name, self.job.kind, object_key(obj))
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

    async def _sync_spec(self, obj: Obj, wl: Workload) -> bool:
        """The preemption priority follows the object's label, even while it runs; the queue
        follows it (or a LocalQueue ``default`` created since) while the Workload waits, and so
        do the pod sets while the object is suspended (:func:`pod_set_changes`). True if the
        pod sets were updated: the caller leaves the rest to the update's reconcile."""
        try:
            desired = self.job.workload_for(obj, self._priorities())
        except IntegrationError as exc:
            logger.debug("not syncing Workload %s: %s", wl.key, exc)
            return False
        want_ref = desired.spec.preemption_priority_class_ref
        want_value = desired.spec.preemption_priority
        spec: Obj = {}
        if (want_ref, want_value) != (
            wl.spec.preemption_priority_class_ref,
            wl.spec.preemption_priority,
        ):
            spec["preemptionPriorityClassRef"] = want_ref.to_dict() if want_ref else None
            spec["preemptionPriority"] = want_value
        waiting = workload_status.waits(wl)
        want_queue = self._queue_name(obj)
        # Kueue moves a waiting Workload when its job's queue label changes; an admitted one
        # keeps its queue (the API rejects the change while it holds quota).
        if want_queue is not None and want_queue != wl.spec.queue_name and waiting:
            spec["queueName"] = want_queue
        # Kueue: the maximum execution time follows the label while the Workload waits.
        want_max = desired.spec.maximum_execution_time_seconds
        if want_max != wl.spec.maximum_execution_time_seconds and waiting:
            spec["maximumExecutionTimeSeconds"] = want_max
        # Kueue's updateWorkloadToMatchJob: a suspended object changed while its Workload waits
        # (a Job's resources, another kind's replicas) gets its Workload updated in place, keeping
        # its place in the queue.
        changes = (
            pod_set_changes(desired.spec.pod_sets, wl.spec.pod_sets)
            if waiting and self.job.is_suspended(obj)
            else []
        )
        if changes:
            spec["podSets"] = [ps.to_dict() for ps in desired.spec.pod_sets]
        if not spec:
            return False
        patch: Obj = {"spec": spec}
        if changes:
            # Never over a Workload admitted meanwhile (the API refuses new pod sets once it
            # holds quota; an older read must not win either).
            patch["metadata"] = {"resourceVersion": wl.metadata.resource_version}
        try:
            await self._kube.patch(WORKLOADS, wl.name, patch, namespace=wl.namespace)
        except Conflict:
            return bool(changes)  # changed meanwhile: its update brings us back
        except KubeError as exc:
            self._events.record(
                obj, "Warning", "ErrWorkloadUpdate", f"Cannot update the Workload's spec: {exc}"
            )
            return False
        if changes:
            key = f"{wl.namespace or 'default'}/{wl.name}"
            self._events.record(
                obj,
                "Normal",
                UPDATED_WORKLOAD,
                f"Updated not matching Workload for suspended job: {key} ({'; '.join(changes)})",
            )
            logger.info("updated Workload %s to match its %s: %s", key, self.job.kind, changes)
        return bool(changes)

    async def _remake_children(self, obj: Obj) -> None:
        """Delete the children its operator made from the object's spec before a run or stop
        patch and will not update (a kind's optional ``children_to_remake``): the operator
        makes them again from the patched spec."""
        remake = getattr(self.job, "children_to_remake", None)
        if remake is None:
            return
        for resource, name in remake(obj):
            with contextlib.suppress(NotFound):
                await self._kube.delete(resource, name, namespace=_namespace(obj))

    async def _stop(self, obj: Obj, wl: Workload, now: datetime) -> Requeue | None:
        patch = self.job.stop_patch(obj, wl)
        if patch is not None:
            evicted = wl.condition(c.EVICTED)
            await self._kube.patch(
                self.job.resource, _name(obj), patch, namespace=_namespace(obj)
            )
            await self._remake_children(obj)
            self._events.record(
                obj, "Normal", "Stopped", evicted.message if evicted else "Evicted"
            )
            if self._gang is not None:
                await self._gang.forget(wl, self._pods_of(obj))
            return None  # the Job's update (and its pods' deletion) brings us back
        # A MultiKueue job's pods run on a worker: its status (copied from there, and no longer
        # if the worker is lost) says nothing of pods here, and there are none to wait for.
        if not self._dispatched(obj) and (self.job.is_active(obj) or self._running_pods(obj)):
            return None  # pods still terminating; their events bring us back
        await self._requeue(wl, now)
        return None

    def _dispatched(self, obj: Obj) -> bool:
        """A MultiKueue manager-side object (the kind's ``managedBy`` value): it runs on a
        worker cluster, so it has no pods here."""
        return self._multikueue is not None and multikueue.is_dispatched(self._multikueue, obj)

    async def _requeue(self, wl: Workload, now: datetime, *, note: str = "") -> None:
        """The stopped object's quota released, its Workload requeued (``note`` for the user)."""
        released = workload_status.release(wl, now)
        if released is None:
            return
        try:
            await self._write(released)
        except NotFound:
            return
        cond = released.condition(c.REQUEUED)
        self._events.record(
            wl.to_dict(), "Normal", c.REQUEUED,
            (cond.message if cond is not None else "Requeued") + note,
        )

    async def _run(self, obj: Obj, wl: Workload, now: datetime, key: str) -> Requeue | None:
        releases = pod_set_releases(wl, self._flavors)
        patch = self.job.run_patch(obj, wl, releases)
        adm = wl.status.admission
        cq = adm.cluster_queue if adm else "?"
        if patch is not None:
            await self._kube.patch(self.job.resource, _name(obj), patch, namespace=_namespace(obj))
            await self._remake_children(obj)
            self._events.record(
                obj,
                "Normal",
                "Resumed",
                f"Admitted by clusterQueue {cq}: resumed with the assigned flavors' node labels "
                f"and tolerations; its pods are released as they are created",
            )
        if self._dispatched(obj):
            return None  # runs on a worker cluster: no pods here to release or fit
        by_set: dict[str, list[Obj]] = {}
        for pod in self._pods_of(obj):
            if (pod.get("metadata") or {}).get("deletionTimestamp") or is_terminal(pod):
                continue
            by_set.setdefault(self.job.pod_set_of(obj, pod), []).append(pod)
        return await self._release_pods(obj, wl, by_set, releases, key=key)

    async def _release_pods(
        self,
        obj: Obj,
        wl: Workload,
        by_set: dict[str, list[Obj]],
        releases: dict[str, PodSetRelease],
        *,
        is_group: bool = False,
        key: str,
    ) -> Requeue | None:
        """Release the admitted Workload's live pods (by pod set), the PodGroup first; report
        ``Started`` on ``obj``. The node-fit guard before both: a gang whose pods do not all fit
        on the nodes now is neither handed to kube-scheduler nor released."""
        if not await self._nodes_fit(wl, by_set, releases, key):
            return None  # held; the guard reconciles it again when capacity frees
        # Where the pods carry their ranks, as the kind's integration declares it.
        rank_labels = integration_registry.ranks(self.job.api_version, self.job.kind, obj, wl)
        releases = {n: replace(r, ranks=rank_labels.get(n)) for n, r in releases.items()}
        if self._gang is not None:
            # The PodGroup first: kube-scheduler must know the gang's size before any of its
            # pods leaves the gate, or it would place them one by one. Across an eviction of a
            # composed job the group is kept: its new pods name it again, and a PodGroup named
            # by live pods cannot be deleted (the API server's podgroup-protection finalizer).
            live = [p for members in by_set.values() for p in members]
            # Pod sets kept out of the gang (kqueue.io/gang-scheduling: "false" on their
            # template, e.g. a RayJob's submitter, created only once its cluster runs) are not
            # counted toward its minCount: they never name the group.
            in_gang = sum(
                r.count
                for name, r in releases.items()
                if (ps := wl.pod_set(name)) is None
                or (ps.template.metadata.annotations or {}).get(c.GANG_SCHEDULING_ANNOTATION)
                != "false"
            )
            prepared = await self._gang.prepare(wl, live, in_gang)
            if not prepared.ready:
                logger.info("%s %s: pods held: %s", self.job.kind, object_key(obj), prepared.why)
                return Requeue(after=1.0)
            if self._gang.unpinned(wl):
                # topologyHandOff: Constraint: the PodGroup's topology key keeps the gang in one
                # domain, and kube-scheduler picks which (kqueue/controller/gang_topology.py).
                releases = {n: replace(r, domains=()) for n, r in releases.items()}
        result = await self._releaser.release(
            by_set, releases, admitted_at=wl.quota_reserved_at,
            cluster_queue=wl.status.admission.cluster_queue if wl.status.admission else "",
            is_group=is_group,
        )
        admitted = sum(r.count for r in releases.values())
        milestones.started(obj, wl, result, admitted, events=self._events)
        self._tell_held(wl, result.held)
        if not result.complete:
            # Retried with the key's backoff: the pods still gated are released next time.
            logger.warning(
                "%s %s: released %d of %d pods; retrying the rest",
                self.job.kind,
                object_key(obj),
                result.released,
                result.wanted,
            )
            return Requeue()
        if self._gang is not None:
            recheck = await self._gang.report(wl, [p for ps in by_set.values() for p in ps])
            if recheck is not None:
                return Requeue(after=recheck)
            await self._gang.follow_binding(wl, by_set, self._books())
        return None

    def _books(self) -> Books | None:
        """The engine's books for a followed binding (``topologyHandOff: Constraint``): a
        Workload's booking may be moved while its pods are unpinned and not all bound where it
        names (a gang bound elsewhere and not followed yet is re-booked too: until its own
        follow, room it no longer takes must not show as free)."""
        if self._engine is None or self._gang is None:
            return None
        gang = self._gang

        def movable(other: Workload) -> bool:
            return gang.unpinned(other) and not booked_where_bound(
                other, pods_of_workload(self._pods, other)
            )

        return Books(self._engine(), self._workloads.get, movable)

    async def _nodes_fit(
        self,
        wl: Workload,
        by_set: dict[str, list[Obj]],
        releases: dict[str, PodSetRelease],
        key: str,
    ) -> bool:
        if self._node_fit is None or self.requeue is None:
            return True
        pending: dict[str, int] = {}
        about: list[Obj] = []
        for name, release in releases.items():
            members = by_set.get(name, [])
            running = sum(1 for p in members if self._releaser.running(p))
            pending[name] = max(release.count - running, 0)
            about += [p for p in members if not self._releaser.running(p)][: pending[name]]
        requeue = self.requeue
        return await self._node_fit.admit(wl, pending, about, lambda: requeue(key))

    async def _hold(self, obj: Obj, wl: Workload) -> None:
        """Keep a queued object suspended, its future pods gated, its templates as recorded.

        The normal case is an object the webhook suspended at creation: nothing to do. One
        found running is suspended (its controller deletes its pods without counting a failure)
        until its Workload is admitted: it was created before kqueue's webhooks were installed,
        or by a kqueue that held queued work by the gate alone. A Workload admitted in an
        earlier life of kqueue holds quota and never gets here. Once its controller has reset
        it, its pod templates get the gate (if the webhook never saw it) and lose the
        scheduling directives of an earlier admission.
        """
        kind = self.job.kind
        if not self.job.is_suspended(obj):
            patch = self.job.stop_patch(obj, wl)
            if patch is None:
                return
            await self._kube.patch(self.job.resource, _name(obj), patch, namespace=_namespace(obj))
            if self.job.holds_pods(obj):
                message = SUSPENDED_WHILE_QUEUED.format(kind=kind)
            else:
                message = STOPPED_BEFORE_ADMISSION.format(kind=kind, gate=c.ADMISSION_GATE)
            self._events.record(obj, "Normal", "Stopped", message)
            logger.info("suspended %s %s: %s", kind, object_key(obj), message)
            return
        patch = self.job.hold_patch(obj, wl)
        if patch is None:
            return  # not reset by its controller yet: its update brings us back
        try:
            await self._kube.patch(
                self.job.resource, _name(obj), patch, namespace=_namespace(obj)
            )
        except Conflict:
            return  # changed meanwhile: its update brings us back
        except KubeError as exc:
            if exc.transient:
                raise  # no answer or a passing refusal: the work queue retries
            # Admission still works: its pods then start ungated (without the flavor's node
            # labels and tolerations), or with an earlier flavor's node labels.
            self._events.record(
                obj,
                "Warning",
                "ErrGateTemplate",
                f"Cannot prepare the pod template for queueing (the {c.ADMISSION_GATE} "
                f"scheduling gate, and the node labels and tolerations it had before its last "
                f"admission): {exc}",
            )
            return
        logger.info("%s %s: pod template held and restored", kind, object_key(obj))

    def _pods_of(self, obj: Obj) -> list[Obj]:
        """The object's pods: claimed by the integration (its index key), or controlled by it."""
        claimed = self._pods.by_index(BY_OWNER, object_index_key(self.job.kind, object_key(obj)))
        if claimed:
            return claimed
        return self._pods.by_index(BY_OWNER, str((obj.get("metadata") or {}).get("uid") or ""))

    def _running_pods(self, obj: Obj) -> list[Obj]:
        """Pods that may run: not terminal, and released (or being released). A pod still
        behind the gate never ran; a kind without a suspend switch (a StatefulSet) creates
        its pods again, gated, as soon as the stopped ones are deleted."""
        return [
            p for p in self._pods_of(obj) if not is_terminal(p) and self._releaser.running(p)
        ]

    async def _write(self, wl: Workload | None) -> None:
        if wl is None:
            return
        await self._kube.replace_status(WORKLOADS, wl.to_dict(), namespace=wl.namespace)


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _dispatched_away(wl: Workload) -> bool:
    """Placed, or offered, by MultiKueue to worker clusters (its pods run there, not here)."""
    return wl.status.cluster_name is not None or bool(wl.status.nominated_cluster_names)


EXCESS_POD_DELETED = "ExcessPodDeleted"
# Kueue's reason when a suspended job's Workload is updated to match it.
UPDATED_WORKLOAD = "UpdatedWorkload"
WAITING_BEYOND_ADMITTED_COUNT = "WaitingBeyondAdmittedCount"
_TOLD_HELD_MAX = 4096


def held_message(workload: str, pod_set: str, count: int) -> str:
    """Why a pod stays gated although its Workload is admitted."""
    return (
        f"Workload {workload} is admitted with {count} pod(s) in pod set {pod_set}, and that "
        f"many already run or are released: this pod stays behind kqueue's gate, out of "
        f"kube-scheduler's queue, until one of them ends or the workload is admitted with more"
    )


def excess_message(group: str, excess: ExcessPod) -> str:
    """Why a pod of a group was deleted (the ``ExcessPodDeleted`` event on it): beyond the
    group's total count, or, once the Workload exists, beyond its pod set's count there."""
    beyond = excess.active - excess.count
    if excess.pod_set is None:
        counted = (
            f"{group} declares total count {excess.count} "
            f"({c.POD_GROUP_TOTAL_COUNT_ANNOTATION}) and has {excess.active} active pods"
        )
        remedy = "Raise the total count to run more pods"
    else:
        counted = (
            f"{group}: pod set {excess.pod_set} (this pod's role) of its Workload has count "
            f"{excess.count}, and the group has {excess.active} active pods of that role"
        )
        remedy = "Each role runs at most its pod set's count in this Workload"
    return (
        f"{counted}: this pod, among the {beyond} last in Kueue's order (pods kqueue already "
        f"manages, ungated and older ones first), is beyond it and is deleted, as Kueue does "
        f"(kept, it would name the group's PodGroup and kube-scheduler would bind none of the "
        f"admitted pods). {remedy}"
    )


def _deleting(obj: Obj) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _namespace(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("namespace")

