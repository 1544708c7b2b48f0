"""The generic job reconciler: one object of an integration and its Workload, kept in step.

Per object key, from the informers' stores (never from events, so it is idempotent):

1. No Workload yet: create it (owned by the object, named deterministically), or report on the
   object with a Warning event why it cannot be built.
2. The object finished: ``Finished=True`` (Succeeded/Failed) on the Workload, freeing its quota.
3. Keep the Workload's mutable fields in step (the preemption priority may change while it runs).
4. Evicted: stop the object (suspend), and once its pods are gone release the quota and requeue.
5. Admitted: start the object with its admission (unsuspend, partial parallelism) and release its
   gated pods, adding the flavor's node labels and tolerations, never more than admitted.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from kqueue.api.integrations import IntegrationError, PriorityResolver
from kqueue.api.v1alpha1 import ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workloads as wlstatus
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store, object_key
from kqueue.controller.jobs.base import (
    Integration,
    PodSetRelease,
    is_gated,
    is_terminal,
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
    ) -> None:
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
        return None

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
        try:
            await self._kube.create(WORKLOADS, body, namespace=wl.namespace)
        except Conflict:
            return Requeue(after=0.5)  # exists; our informer has not seen it yet
        ns = wl.namespace or "default"
        self._events.record(obj, "Normal", "CreatedWorkload", f"Created Workload: {ns}/{wl.name}")
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
        """The preemption priority follows the object's label, even while it runs."""
        try:
            desired = self.integration.workload_for(obj, self._priorities())
        except IntegrationError as exc:
            logger.debug("not syncing Workload %s: %s", wl.key, exc)
            return
        want_ref = desired.spec.preemption_priority_class_ref
        want_value = desired.spec.preemption_priority
        if (want_ref, want_value) == (
            wl.spec.preemption_priority_class_ref,
            wl.spec.preemption_priority,
        ):
            return
        patch = {
            "spec": {
                "preemptionPriorityClassRef": want_ref.to_dict() if want_ref else None,
                "preemptionPriority": want_value,
            }
        }
        try:
            await self._kube.patch(WORKLOADS, wl.name, patch, namespace=wl.namespace)
        except KubeError as exc:
            self._events.record(
                obj, "Warning", "ErrWorkloadUpdate", f"Cannot update the preemption priority: {exc}"
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
        admitted_at = wl.quota_reserved_at
        retry = False
        released = 0
        already_running = 0
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
            running = sum(1 for p in members if not is_gated(p))
            already_running += running
            gated = sorted(
                (p for p in members if is_gated(p)),
                key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]),
            )
            # Never more pods released than admitted (partial admission, or extra pods the
            # Job controller has not deleted yet after parallelism went down).
            for pod in gated[: max(release.count - running, 0)]:
                if not await self._release_pod(pod, release):
                    retry = True
                    continue
                released += 1
                if admitted_at is not None:
                    self._metrics.gate_removal(max((now - admitted_at).total_seconds(), 0.0))
        if released and not already_running and patch is None:
            adm = wl.status.admission
            self._events.record(
                obj,
                "Normal",
                "Started",
                f"Admitted by clusterQueue {adm.cluster_queue if adm else '?'}; "
                f"released {released} pod(s)",
            )
        return Requeue() if retry else None

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

    async def _release_pod(self, pod: Obj, release: PodSetRelease) -> bool:
        meta = pod.get("metadata") or {}
        uid, version = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        if self._released.get(uid) == version:
            return True  # released; the informer has not caught up yet
        new = ungate(pod, release)
        if new is None:
            return True
        ops: list[Obj] = []
        gates = pod["spec"].get("schedulingGates") or []
        index = next(i for i, g in enumerate(gates) if g.get("name") == c.ADMISSION_GATE)
        # "test" first: if the gates moved since our informer saw them, the patch fails
        # instead of removing someone else's gate.
        ops.append({"op": "test", "path": f"/spec/schedulingGates/{index}", "value": gates[index]})
        if len(gates) == 1:
            ops.append({"op": "remove", "path": "/spec/schedulingGates"})
        else:
            ops.append({"op": "remove", "path": f"/spec/schedulingGates/{index}"})
        new_spec = new["spec"]
        old_spec = pod["spec"]
        if new_spec.get("nodeSelector") != old_spec.get("nodeSelector"):
            if old_spec.get("nodeSelector"):
                for k, v in sorted(new_spec["nodeSelector"].items()):
                    if k not in old_spec["nodeSelector"]:
                        ops.append(
                            {"op": "add", "path": f"/spec/nodeSelector/{_escape(k)}", "value": v}
                        )
            else:
                ops.append({"op": "add", "path": "/spec/nodeSelector", "value": new_spec["nodeSelector"]})
        if new_spec.get("tolerations") != old_spec.get("tolerations"):
            if old_spec.get("tolerations"):
                for tol in new_spec["tolerations"][len(old_spec["tolerations"]) :]:
                    ops.append({"op": "add", "path": "/spec/tolerations/-", "value": tol})
            else:
                ops.append({"op": "add", "path": "/spec/tolerations", "value": new_spec["tolerations"]})
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


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
