"""Whole-gang placement by kube-scheduler: kqueue decides when, kube-scheduler places all or nothing.

kqueue admits a workload when its quota fits, but quota is not nodes: on a fragmented cluster
kube-scheduler could bind 3 pods of a 4-pod gang and leave the 4th pending while the others hold
quota. Kubernetes 1.36 has the API to hand the placement over (KEP-4671 as refined by KEP-5832):

* a ``scheduling.k8s.io/v1alpha2`` PodGroup with a gang policy (``spec.schedulingPolicy.gang.
  minCount``), served with the ``GenericWorkload`` gate and that API version turned on;
* pods naming it in ``spec.schedulingGroup.podGroupName`` (immutable, set at creation; the
  PodGroup may appear later: until it does kube-scheduler keeps the pods out of its queue);
* kube-scheduler's ``GangScheduling`` plugin, which lets no pod of the group bind before
  ``minCount`` of them have a node, and writes its verdict as the PodGroup's
  ``PodGroupScheduled`` condition.

Here: discovery (``gangScheduling: Auto`` uses the API when the cluster serves it), the group
name a pod gets (one PodGroup per kqueue workload, named after the object that owns the
workload), the PodGroup kqueue creates before it releases the admitted pods, and kube-scheduler's
verdict copied onto the kqueue Workload. The pod webhook (:mod:`kqueue.controller.webhooks.pod`)
and the generic job reconciler call in here; docs/concepts.md explains the split.

What the 1.36 API does not allow, and what kqueue does instead:

* a PodGroup's ``spec`` is immutable, and a PodGroup whose pods still run cannot be deleted (the
  API server adds the ``scheduling.k8s.io/podgroup-protection`` finalizer, which
  kube-controller-manager lifts once no live pod names the group). So when an elastic Job grows,
  the running gang keeps its PodGroup: kqueue moves its ownership to the new slice and records
  the admitted count in :data:`ADMITTED_COUNT_ANNOTATION`; the added pods are placed as they fit
  (the running gang already satisfies minCount). A PodGroup with no running pods is replaced.
* ``priority``/``disruptionMode`` need the ``WorkloadAwarePreemption`` gate and
  ``schedulingConstraints`` the ``TopologyAwareWorkloadScheduling`` gate; kqueue sets neither.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kqueue.api.v1alpha1 import Workload, set_condition
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound
from kqueue.controller.resources import WORKLOADS, Resource

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

PODGROUPS = Resource("scheduling.k8s.io", "v1alpha2", "podgroups")
SCHEDULING_GROUP_FIELD = "spec.schedulingGroup.podGroupName"
# kube-scheduler's condition on the PodGroup; kqueue writes the same type on the Workload.
POD_GROUP_SCHEDULED = "PodGroupScheduled"
GANG_UNSCHEDULABLE_EVENT = "GangUnschedulable"
GANG_SCHEDULED_EVENT = "GangScheduled"
# The count kqueue admitted for the pods of the group (minCount cannot follow an elastic
# scale-up: the spec is immutable).
ADMITTED_COUNT_ANNOTATION = "kqueue.io/admitted-pod-count"
# On a pod (template): "false" keeps the pod out of gang scheduling (no schedulingGroup). Users
# may set it; the Job webhook sets it on Jobs that run in waves (see waves_of_pods).
GANG_SCHEDULING_ANNOTATION = "kqueue.io/gang-scheduling"
# How often the verdict is read again while kube-scheduler has not placed the gang.
RECHECK_S = 3.0

_MAX_NAME = 253
# kube-scheduler's own messages on the pods that wait for the rest of the gang; the pod that
# really did not fit carries the informative one ("0/3 nodes are available: ...").
_WAITING_MESSAGES = ("pod group is unschedulable", "waiting for minCount")

GangMode = Literal["Auto", "Disabled"]


def group_name(kind: str, name: str, uid: str | None = None) -> str:
    """The PodGroup of the workload of object ``kind``/``name``: stable across the object's
    Workloads (an elastic Job's slices, a requeued Workload), as its pods' reference is.

    With the object's ``uid`` (known when it is the pod's direct controller) a recreated object
    of the same name gets another group: the old one may still be terminating, and the API
    server keeps a PodGroup while any live pod names it, so new pods naming it would wait for
    it and it for them."""
    base = f"{kind.lower()}-{name}" + (f"-{uid.replace('-', '')[:8]}" if uid else "")
    if len(base) <= _MAX_NAME:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()[:10]
    return f"{base[: _MAX_NAME - 11].rstrip('-.')}-{digest}"


def opted_out(pod: Obj) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(GANG_SCHEDULING_ANNOTATION) == "false"


def pod_group_of(pod: Obj) -> str | None:
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return str(group) if group else None


def pod_group_manifest(wl: Workload, name: str, min_count: int) -> Obj:
    """The PodGroup for ``min_count`` admitted pods, owned by ``wl`` so it goes with it."""
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": wl.namespace,
            "labels": {c.MANAGED_LABEL: "true"},
            "annotations": {ADMITTED_COUNT_ANNOTATION: str(min_count)},
            "ownerReferences": [_owner_ref(wl)],
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def _owner_ref(wl: Workload) -> Obj:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "Workload",
        "name": wl.name,
        "uid": wl.metadata.uid,
        "controller": True,
    }


def _owned_by(obj: Obj, wl: Workload) -> bool:
    return any(
        r.get("uid") == wl.metadata.uid
        for r in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


def _min_count(obj: Obj) -> int | None:
    gang = ((obj.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
    value = gang.get("minCount")
    return int(value) if value is not None else None


def _condition(obj: Obj, type_: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def unschedulable_detail(pods: Sequence[Obj]) -> str:
    """The most telling reason kube-scheduler gave on the gang's pods (why a pod did not fit)."""
    messages: list[str] = []
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                messages.append(str(cond.get("message") or ""))
    telling = sorted(m for m in messages if m and not any(w in m for w in _WAITING_MESSAGES))
    if telling:
        return telling[0]
    return sorted(messages)[0] if messages else ""


@dataclass(frozen=True)
class Prepared:
    """Whether the admitted pods may be released now, and if not why (for the log)."""

    ready: bool
    why: str = ""


class GangPlacement:
    """Discovery, PodGroups and verdicts; :attr:`enabled` once the cluster serves the API."""

    def __init__(
        self, *, kube: Kube, events: EventRecorder, now: Now, mode: GangMode = "Auto"
    ) -> None:
        self._kube = kube
        self._events = events
        self._now = now
        self.mode: GangMode = mode
        self.enabled = False

    async def discover(self) -> bool:
        """Use the PodGroup API if configured ``Auto`` and served; log which way it went."""
        if self.mode == "Disabled":
            self.enabled = False
            logger.info(
                "gang scheduling: off (gangScheduling: Disabled); admitted pods are placed one "
                "by one by kube-scheduler"
            )
            return False
        try:
            status, body = await self._kube.request("GET", f"/apis/{PODGROUPS.api_version}")
        except Exception as exc:  # discovery must never stop the manager from starting
            status, body = 0, {"message": str(exc)}
        resources = body.get("resources") or [] if status == 200 else []
        self.enabled = any(r.get("name") == PODGROUPS.plural for r in resources)
        if self.enabled:
            logger.info(
                "gang scheduling: on (gangScheduling: Auto, the cluster serves %s PodGroups): "
                "pods of kqueue workloads get %s, kube-scheduler places each admitted workload "
                "all or nothing",
                PODGROUPS.api_version,
                SCHEDULING_GROUP_FIELD,
            )
        else:
            logger.info(
                "gang scheduling: off (gangScheduling: Auto, but the cluster does not serve %s "
                "PodGroups (HTTP %s); it needs the GenericWorkload and GangScheduling feature "
                "gates and --runtime-config=%s=true): admitted pods are placed one by one",
                PODGROUPS.api_version,
                status or "unreachable",
                PODGROUPS.api_version,
            )
        return self.enabled

    # -- before release ------------------------------------------------------------------------

    async def prepare(self, wl: Workload, pods: Sequence[Obj], admitted: int) -> Prepared:
        """Make the PodGroup of ``wl``'s pods fit the admission before any pod is released.

        ``pods`` are the object's live pods, ``admitted`` the count admitted (partial admission:
        the admitted count, which is what kube-scheduler then places together)."""
        names = sorted({n for p in pods if (n := pod_group_of(p)) is not None})
        if not self.enabled or not names or admitted < 1 or not any(_gated(p) for p in pods):
            return Prepared(True)  # no group, or nothing left to release into it
        for name in names:
            members = [p for p in pods if pod_group_of(p) == name]
            running = any(not _gated(p) for p in members)
            prepared = await self._ensure(wl, name, admitted, running=running)
            if not prepared.ready:
                return prepared
        return Prepared(True)

    async def _ensure(self, wl: Workload, name: str, count: int, *, running: bool) -> Prepared:
        ns = wl.namespace
        try:
            current: Obj | None = await self._kube.get(PODGROUPS, name, ns)
        except NotFound:
            current = None
        if current is None:
            try:
                await self._kube.create(
                    PODGROUPS, pod_group_manifest(wl, name, count), namespace=ns
                )
            except Conflict:
                return Prepared(False, f"PodGroup {ns}/{name} was created meanwhile")
            logger.info(
                "PodGroup %s/%s created for %d pods of Workload %s", ns, name, count, wl.key
            )
            return Prepared(True)
        meta = current.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            # The previous admission's group: it goes once its pods have terminated. If this
            # workload's own (held) pods name it, it never goes on its own: say so.
            if not _owned_by(current, wl):
                self._events.record(
                    wl.to_dict(),
                    "Warning",
                    "PodGroupTerminating",
                    f"PodGroup {ns}/{name}, of an earlier object of the same name, is being "
                    f"deleted; the API server keeps it while live pods name it, and this "
                    f"workload's pods name it too, so they stay held. Delete the held pods (their "
                    f"controller recreates them) or recreate the object under another name",
                )
            return Prepared(
                False, f"PodGroup {ns}/{name} of an earlier admission is still terminating"
            )
        same_count = _min_count(current) == count
        if _owned_by(current, wl) and (same_count or running):
            return Prepared(True)
        if same_count or running:
            # Another Workload of the same object: an elastic Job's new slice (its pods are
            # running, so the group can be neither changed nor replaced), or a requeued
            # incarnation with the same count. The group follows the Workload now holding it.
            patch = {
                "metadata": {
                    "ownerReferences": [_owner_ref(wl)],
                    "annotations": {ADMITTED_COUNT_ANNOTATION: str(count)},
                }
            }
            try:
                await self._kube.patch(PODGROUPS, name, patch, namespace=ns)
            except KubeError as exc:
                return Prepared(False, f"cannot hand PodGroup {ns}/{name} to {wl.key}: {exc}")
            if not same_count:
                self._events.record(
                    wl.to_dict(),
                    "Normal",
                    "PodGroupKept",
                    f"PodGroup {ns}/{name} keeps minCount {_min_count(current)} (its spec is "
                    f"immutable and its pods run); the pods added to reach {count} are placed "
                    f"as they fit",
                )
            return Prepared(True)
        # Nothing of the group runs and the count differs: replace it.
        await self._kube.delete(PODGROUPS, name, namespace=ns)  # a group already gone is fine
        return Prepared(False, f"PodGroup {ns}/{name} is replaced for {count} pods")

    # -- after release -------------------------------------------------------------------------

    async def report(self, wl: Workload, pods: Sequence[Obj]) -> float | None:
        """Copy kube-scheduler's verdict onto the Workload; seconds until it should be read
        again (None once the gang is placed, or without a group)."""
        if not self.enabled:
            return None
        names = sorted({n for p in pods if (n := pod_group_of(p)) is not None})
        if not names:
            return None
        placed = wl.condition(POD_GROUP_SCHEDULED)
        admitted_at = wl.quota_reserved_at
        if (
            placed is not None
            and placed.status == "True"
            and (admitted_at is None or placed.last_transition_time >= admitted_at)
        ):
            return None  # placed since this admission
        name = names[0]
        try:
            group = await self._kube.get(PODGROUPS, name, wl.namespace)
        except KubeError as exc:
            logger.debug("reading PodGroup %s/%s: %s", wl.namespace, name, exc)
            return RECHECK_S
        cond = _condition(group, POD_GROUP_SCHEDULED)
        if cond is None:
            return RECHECK_S
        count = _min_count(group) or 0
        members = [p for p in pods if pod_group_of(p) == name]
        if cond.get("status") == "True":
            await self._write(
                wl,
                "True",
                "Scheduled",
                f"kube-scheduler placed the gang (PodGroup {wl.namespace}/{name}, minCount "
                f"{count}) all together",
                event=("Normal", GANG_SCHEDULED_EVENT),
            )
            return None
        reason = str(cond.get("reason") or "Unschedulable")
        detail = unschedulable_detail(members) or str(cond.get("message") or "")
        message = (
            f"kube-scheduler cannot place the {count} pods of PodGroup {wl.namespace}/{name} "
            f"together, so none is bound: {detail}. They are bound all at once when the nodes "
            f"have room for all of them (free capacity, add nodes, or lower the request)"
        )
        await self._write(wl, "False", reason, message, event=("Warning", GANG_UNSCHEDULABLE_EVENT))
        return RECHECK_S

    async def _write(
        self,
        wl: Workload,
        status: Literal["True", "False"],
        reason: str,
        message: str,
        *,
        event: tuple[Literal["Normal", "Warning"], str],
    ) -> None:
        out = wl.model_copy(deep=True)
        if not set_condition(
            out.status.conditions, POD_GROUP_SCHEDULED, status, reason, message, self._now()
        ):
            return
        try:
            await self._kube.replace_status(WORKLOADS, out.to_dict(), namespace=out.namespace)
        except KubeError as exc:
            logger.debug("writing %s on Workload %s: %s", POD_GROUP_SCHEDULED, wl.key, exc)
            return
        old = wl.condition(POD_GROUP_SCHEDULED)
        if old is None or old.status != status or old.reason != reason:
            self._events.record(wl.to_dict(), event[0], event[1], message)

    # -- eviction ------------------------------------------------------------------------------

    async def forget(self, wl: Workload, pods: Sequence[Obj]) -> None:
        """An evicted gang's PodGroup goes with it (once its pods have terminated); the next
        admission makes a new one for what it admits."""
        if not self.enabled:
            return
        for name in sorted({n for p in pods if (n := pod_group_of(p)) is not None}):
            try:
                group = await self._kube.get(PODGROUPS, name, wl.namespace)
                if _owned_by(group, wl) and not (group.get("metadata") or {}).get(
                    "deletionTimestamp"
                ):
                    await self._kube.delete(PODGROUPS, name, namespace=wl.namespace)
                    logger.info(
                        "PodGroup %s/%s deleted with the eviction of %s", wl.namespace, name, wl.key
                    )
            except NotFound:
                continue
            except KubeError as exc:
                logger.info("deleting PodGroup %s/%s: %s", wl.namespace, name, exc)


def _gated(pod: Obj) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(g.get("name") == c.ADMISSION_GATE for g in gates)
