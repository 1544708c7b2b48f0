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
verdict copied onto the kqueue Workload. The pod webhook (:mod:`kqueue.controller.webhooks.pod`),
the generic job reconciler and the plain-pod reconciler (through ``IntegrationContext.gang``)
call in here; docs/concepts.md explains the split.

What the 1.36 API does not allow, and what kqueue does instead:

* a PodGroup's ``spec`` is immutable, and a PodGroup whose pods still run cannot be deleted (the
  API server adds the ``scheduling.k8s.io/podgroup-protection`` finalizer, which
  kube-controller-manager lifts once no live pod names the group). And kube-scheduler counts a
  group's bound pods toward its ``minCount``, so pods added to a running gang's group would be
  placed one by one. So the pods of a resizable object (an elastic Job, a StatefulSet) name one
  PodGroup per size: the pod webhook adds the object's ``metadata.generation`` at the pod's
  creation (:func:`size_epoch`), so the pods a scale-up adds name a new group, which kqueue
  creates when the new WorkloadSlice is admitted with ``minCount`` = the pods it adds, and
  kube-scheduler places them all or nothing, while the running pods keep theirs. Every group of
  the object is owned by the Workload (slice) that holds the quota now, so it goes with it.
* ``priorityClassName``/``priority``/``disruptionMode`` (KEP-5710) are served only with the
  ``WorkloadAwarePreemption`` gate on, and no discovery says whether it is: kqueue asks for
  them (:func:`preemption_fields`) on its first PodGroup and reads the answer: v1.36.4 without
  the gate drops them (``disruptionMode`` comes back defaulted to ``Pod``); refused with
  ``Forbidden`` naming them, the group is created again without them. Either way later groups
  are created without them. ``priority`` itself is never written: the API server's priority
  admission resolves it from ``priorityClassName`` and refuses any other value.
* ``schedulingConstraints`` needs the ``TopologyAwareWorkloadScheduling`` gate; kqueue sets
  it only on v1beta1, and only as ``topologyHandOff`` asks (:mod:`kqueue.controller.gang_topology`).

Kubernetes 1.37 drops ``v1alpha2`` for ``scheduling.k8s.io/v1beta1`` (gate ``GenericWorkload``,
beta, default off; ``GangScheduling`` and ``WorkloadAwarePreemption`` are folded into it).
Discovery prefers it (:data:`PODGROUP_VERSIONS`). What changes on it:

* ``minCount`` is mutable. A resizable object's pods name one group for all its sizes (no size
  epoch), and a scale-up raises the group's ``minCount`` to the new admitted count before the
  added pods are released: kube-scheduler counts the bound pods toward it, so the added pods
  are placed all or nothing, into the same group, with no group per generation to clean up.
* ``disruptionMode`` is a union, ``{all: {}}`` (:func:`preemption_fields`), served without any
  other gate, so kube-scheduler's workload-aware preemption evicts a kqueue gang whole or not
  at all.
* kube-scheduler's verdict is the ``PodGroupInitiallyScheduled`` condition.
* kqueue creates no ``scheduling.k8s.io`` Workload: a PodGroup without ``workloadRef`` is a
  complete scheduling unit, the Workload only carries templates for controllers that stamp out
  PodGroups, and kqueue's own Workload already is that template (its pod sets, sized by
  admission). A PodGroup made by a Job's own controller (``Job.spec.scheduling``, gate
  ``WorkloadWithJob``) is the Job's: kqueue leaves it alone (:func:`controlled_by_job`), since the
  Job controller keeps its ``minCount`` equal to ``spec.parallelism``, which kqueue sets to the
  admitted count.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kqueue.api.v1alpha1 import Workload, encode_assignment, set_condition
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.gang_topology import (
    Books,
    TopologyHandOff,
    bound_domains,
    constraint_key,
    followable,
    refuses_constraints,
    scheduling_constraints,
    stored_key,
)
from kqueue.controller.gate import is_gated
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound
from kqueue.controller.resources import WORKLOADS, Resource

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

PODGROUPS = Resource("scheduling.k8s.io", "v1alpha2", "podgroups")
PODGROUPS_V1BETA1 = Resource("scheduling.k8s.io", "v1beta1", "podgroups")
# Preferred first: what discovery picks when the cluster serves several.
PODGROUP_VERSIONS = (PODGROUPS_V1BETA1, PODGROUPS)
SCHEDULING_GROUP_FIELD = "spec.schedulingGroup.podGroupName"
# kube-scheduler's condition on a v1alpha2 PodGroup; kqueue writes this type on its Workload
# whichever version the cluster serves.
POD_GROUP_SCHEDULED = "PodGroupScheduled"
# kube-scheduler's condition on a v1beta1 PodGroup (same meaning, renamed in 1.37).
POD_GROUP_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
GANG_UNSCHEDULABLE_EVENT = "GangUnschedulable"
GANG_SCHEDULED_EVENT = "GangScheduled"
# The count kqueue admitted for the whole Workload that owns the group (a group of an elastic
# Job's scale-up has minCount = the pods it added; this says how many run in all).
ADMITTED_COUNT_ANNOTATION = "kqueue.io/admitted-pod-count"
# On a pod (template): "false" keeps the pod out of gang scheduling (no schedulingGroup). Users
# may set it; the Job webhook sets it on Jobs that run in waves (see waves_of_pods).
GANG_SCHEDULING_ANNOTATION = c.GANG_SCHEDULING_ANNOTATION
# How often the verdict is read again while kube-scheduler has not placed the gang.
RECHECK_S = 3.0

_MAX_NAME = 253
# kube-scheduler's own messages on the pods that wait for the rest of the gang; the pod that
# really did not fit carries the informative one ("0/3 nodes are available: ...").
_WAITING_MESSAGES = ("pod group is unschedulable", "waiting for minCount")

GangMode = Literal["Auto", "Disabled"]


def group_name(kind: str, name: str, uid: str | None = None, epoch: str | None = None) -> str:
    """The PodGroup of the workload of object ``kind``/``name``: stable across the object's
    Workloads (a requeued Workload), as its pods' reference is.

    With the object's ``uid`` (known when it is the pod's direct controller) a recreated object
    of the same name gets another group: the old one may still be terminating, and the API
    server keeps a PodGroup while any live pod names it, so new pods naming it would wait for
    it and it for them. With an ``epoch`` (a resizable object's generation, see
    :func:`size_epoch`) each size of the object gets a group of its own."""
    base = (
        f"{kind.lower()}-{name}"
        + (f"-{uid.replace('-', '')[:8]}" if uid else "")
        + (f"-{epoch}" if epoch else "")
    )
    if len(base) <= _MAX_NAME:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()[:10]
    return f"{base[: _MAX_NAME - 11].rstrip('-.')}-{digest}"


async def read_named(kube: Kube, resource: Resource, namespace: str, name: str) -> Obj | None:
    """The object, read fresh from the API server (None if there is none).

    A list by name, not kqueue's cache: the object's controller creates the pods of a scale-up
    as soon as it sees the new size, and a cache that has not seen it yet would put the added
    pods into the running gang's group (where kube-scheduler places them one by one). A list
    needs only the ``list`` verb kqueue already has on every kind it manages. Raises
    :class:`KubeError` if the API server cannot answer."""
    body = await kube.list_page(
        resource, namespace=namespace, query=[("fieldSelector", f"metadata.name={name}")]
    )
    items = body.get("items") or []
    return dict(items[0]) if items else None


def size_epoch(obj: Obj, resizable: Callable[[Obj], bool] | None) -> str | None:
    """``g<generation>`` of a resizable object (an elastic Job, a StatefulSet); None for an
    object that does not change size."""
    if resizable is None or not resizable(obj):
        return None
    return f"g{int((obj.get('metadata') or {}).get('generation') or 0)}"


def opted_out(pod: Obj) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(GANG_SCHEDULING_ANNOTATION) == "false"


def pod_group_of(pod: Obj) -> str | None:
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return str(group) if group else None


def fresh_counts(fresh: Sequence[str], pods: Sequence[Obj], admitted: int) -> dict[str, int] | str:
    """``minCount`` of each group about to be created, or why the pods must wait.

    One new group (the usual case: a first admission, or the pods an elastic scale-up adds): the
    admitted count less the pods already released into other groups (the running part of an
    elastic Job), whether or not all of its pods exist yet: kube-scheduler waits for them.
    None is created (``{}``) when the admission has no room for more pods: the pods an
    elastic scale-up adds wait for the new slice, whose admission sizes their group; a group
    made now, by the slice they do not belong to, would be too small, and could never be
    replaced while they name it.
    Several (the object changed size while its controller was still creating pods, so they name
    two generations): each is sized to its own pods, which needs all admitted pods to exist; a
    group sized to the whole admission would wait forever for pods that name the other."""
    released = [p for p in pods if not is_gated(p)]
    if len(fresh) == 1:
        outside = sum(1 for p in released if pod_group_of(p) != fresh[0])
        return {fresh[0]: admitted - outside} if admitted > outside else {}
    if len(pods) < admitted:
        return (
            f"pods name {len(fresh)} new PodGroups ({', '.join(fresh)}): waiting for all "
            f"{admitted} admitted pods to exist ({len(pods)} do) to size each"
        )
    room = admitted - len(released)
    if room < 1:
        return {}
    return {
        name: max(1, min(room, sum(1 for p in pods if is_gated(p) and pod_group_of(p) == name)))
        for name in fresh
    }


def scheduled_condition(resource: Resource) -> str:
    """The type of kube-scheduler's verdict on a PodGroup of ``resource``'s version."""
    return POD_GROUP_SCHEDULED if resource.version == "v1alpha2" else POD_GROUP_INITIALLY_SCHEDULED


def mutable_min_count(resource: Resource) -> bool:
    """Whether a PodGroup of ``resource``'s version may change its ``minCount`` (v1beta1)."""
    return resource.version != "v1alpha2"


def job_owns_group(group: Obj, pod: Obj) -> bool:
    """Whether ``group`` is the PodGroup the pod's own Job controller made for it (gate
    ``WorkloadWithJob``): the group's controller is the Job that controls the pod. (The Job
    controller also puts an owner reference to the group in the pod template, but v1.37.2's
    pod creation drops template owner references, so the group itself is what says it.)"""

    def controller(obj: Obj) -> Obj:
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        return next((r for r in refs if r.get("controller")), {})

    owner, job = controller(group), controller(pod)
    return (
        owner.get("kind") == "Job"
        and str(owner.get("apiVersion") or "batch/v1") == "batch/v1"
        and job.get("kind") == "Job"
        and bool(owner.get("uid"))
        and owner.get("uid") == job.get("uid")
    )


def controlled_by_job(group: Obj) -> bool:
    """A PodGroup whose controller is a Job (made by the Job controller, not by kqueue)."""
    refs = (group.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") and r.get("kind") == "Job" for r in refs)


def preemption_fields(wl: Workload, resource: Resource = PODGROUPS) -> Obj:
    """The PodGroup's workload-aware preemption fields (gate ``WorkloadAwarePreemption``).

    ``disruptionMode: PodGroup``: kqueue admits and evicts a workload whole, so kube-scheduler
    must not preempt one pod of it and leave the rest running. ``priorityClassName``: the
    workload's PriorityClass when its priority comes from one (``scheduling.k8s.io``); a
    kqueue WorkloadPriorityClass has no PriorityClass of that name, and ``priority`` cannot be
    given without one (the priority admission plugin resolves it from the class, the global
    default or 0, and refuses any other value), so such a group gets kube-scheduler's default.
    On v1beta1 ``disruptionMode`` is a union: ``{all: {}}`` says the same."""
    fields: Obj = {
        "disruptionMode": "PodGroup" if resource.version == "v1alpha2" else {"all": {}}
    }
    ref = wl.spec.priority_class_ref
    if ref is not None and ref.group == "scheduling.k8s.io" and ref.name:
        fields["priorityClassName"] = ref.name
    return fields


_PREEMPTION_FIELDS = ("spec.disruptionMode", "spec.priorityClassName", "spec.priority")


def refuses_preemption_fields(exc: KubeError) -> bool:
    """The API server's answer when ``WorkloadAwarePreemption`` is off: Forbidden, naming the
    fields."""
    return exc.status == 422 and any(f in exc.message for f in _PREEMPTION_FIELDS)


def pod_group_manifest(
    wl: Workload,
    name: str,
    min_count: int,
    admitted: int | None = None,
    resource: Resource = PODGROUPS,
) -> Obj:
    """The PodGroup for ``min_count`` pods of ``wl`` (``admitted`` in all, recorded in
    :data:`ADMITTED_COUNT_ANNOTATION`), owned by ``wl`` so it goes with it."""
    return {
        "apiVersion": resource.api_version,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": wl.namespace,
            "labels": {c.MANAGED_LABEL: "true"},
            "annotations": {
                ADMITTED_COUNT_ANNOTATION: str(admitted if admitted is not None else min_count)
            },
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


def resized_verdict(cond: Obj, group: Obj, members: Sequence[Obj]) -> Obj | None:
    """kube-scheduler's verdict on a group it placed once, for the pods it has now.

    v1beta1's ``PodGroupInitiallyScheduled`` stays True after the group's first placement, so
    after a scale-up raised ``minCount`` it no longer says whether the added pods are placed:
    the group is placed while at least ``minCount`` of its pods are bound; short of that, the
    pods say why (``PodScheduled=False`` on one of them), or there is no verdict yet (None)."""
    bound = sum(1 for p in members if (p.get("spec") or {}).get("nodeName"))
    if bound >= (_min_count(group) or 0):
        return cond
    refused = [
        c_
        for p in members
        for c_ in (p.get("status") or {}).get("conditions") or []
        if c_.get("type") == "PodScheduled" and c_.get("status") == "False"
    ]
    if not refused:
        return None
    return {"status": "False", "reason": str(refused[0].get("reason") or "Unschedulable")}


@dataclass(frozen=True)
class Prepared:
    """Whether the admitted pods may be released now, and if not why (for the log)."""

    ready: bool
    why: str = ""


class GangPlacement:
    """Discovery, PodGroups and verdicts; :attr:`enabled` once the cluster serves the API."""

    def __init__(
        self,
        *,
        kube: Kube,
        events: EventRecorder,
        now: Now,
        mode: GangMode = "Auto",
        topology: TopologyHandOff = "NodeSelector",
    ) -> None:
        self._kube = kube
        self._events = events
        self._now = now
        self.mode: GangMode = mode
        self.topology: TopologyHandOff = topology
        # Whether the API server keeps schedulingConstraints (gate TopologyAwareWorkloadScheduling;
        # None: not known yet, learnt from the first PodGroup kqueue gives one).
        self.topology_constraints: bool | None = None
        self.enabled = False
        # The PodGroup version the cluster serves (the preferred one, see PODGROUP_VERSIONS).
        self.pod_groups: Resource = PODGROUPS
        # Whether the API server takes the workload-aware preemption fields (None: not known
        # yet; learnt from the first PodGroup kqueue creates).
        self.workload_preemption: bool | None = None

    async def discover(self) -> bool:
        """Use the PodGroup API if configured ``Auto`` and served; log which way it went."""
        if self.mode == "Disabled":
            self.enabled = False
            logger.info(
                "gang scheduling: off (gangScheduling: Disabled); admitted pods are placed one "
                "by one by kube-scheduler"
            )
            return False
        statuses: list[str] = []
        self.enabled = False
        for resource in PODGROUP_VERSIONS:
            try:
                status, body = await self._kube.request("GET", f"/apis/{resource.api_version}")
            except Exception as exc:  # discovery must never stop the manager from starting
                status, body = 0, {"message": str(exc)}
            resources = body.get("resources") or [] if status == 200 else []
            if any(r.get("name") == resource.plural for r in resources):
                self.enabled, self.pod_groups = True, resource
                break
            statuses.append(f"{resource.api_version}: HTTP {status or 'unreachable'}")
        if self.enabled:
            if mutable_min_count(self.pod_groups):
                self._learn_preemption(
                    True, f"{self.pod_groups.api_version} serves them with GenericWorkload alone"
                )
            logger.info(
                "gang scheduling: on (gangScheduling: Auto, the cluster serves %s PodGroups): "
                "pods of kqueue workloads get %s, kube-scheduler places each admitted workload "
                "all or nothing%s",
                self.pod_groups.api_version,
                SCHEDULING_GROUP_FIELD,
                "; an elastic scale-up raises its group's minCount"
                if mutable_min_count(self.pod_groups)
                else "; an elastic scale-up gets a group of its own",
            )
        else:
            logger.info(
                "gang scheduling: off (gangScheduling: Auto, but the cluster does not serve PodGroups "
                "(%s); on 1.37 it needs the GenericWorkload feature gate and "
                "--runtime-config=%s=true, on 1.36 GenericWorkload, GangScheduling and "
                "--runtime-config=%s=true): admitted pods are placed one by one",
                "; ".join(statuses),
                PODGROUPS_V1BETA1.api_version,
                PODGROUPS.api_version,
            )
        return self.enabled

    async def read_group(self, namespace: str, name: str) -> Obj | None:
        """The PodGroup ``namespace/name`` in the served version (None: none, or no API)."""
        if not self.enabled:
            return None
        try:
            return await self._kube.get(self.pod_groups, name, namespace)
        except NotFound:
            return None

    @property
    def per_size_groups(self) -> bool:
        """Whether each size of a resizable object gets a group of its own (the served
        PodGroup's ``minCount`` is immutable)."""
        return not mutable_min_count(self.pod_groups)

    # -- before release ------------------------------------------------------------------------

    async def prepare(self, wl: Workload, pods: Sequence[Obj], admitted: int) -> Prepared:
        """Make the PodGroups of ``wl``'s pods fit the admission before any pod is released.

        ``pods`` are the object's live pods, ``admitted`` the count admitted (partial admission:
        the admitted count, which is what kube-scheduler then places together). Groups that
        exist are handed to ``wl`` (an elastic Job's new slice now holds the running pods);
        a group no PodGroup exists for yet is created for the gated pods about to join it.
        Pods kept out of the gang (:func:`opted_out`, e.g. a Spark driver, which must run before
        its executors exist) are not looked at: ``admitted`` does not count them either, and a
        released one is in no other group of the object's."""
        pods = [p for p in pods if not opted_out(p)]
        names = sorted({n for p in pods if (n := pod_group_of(p)) is not None})
        if not self.enabled or not names or admitted < 1 or not any(is_gated(p) for p in pods):
            return Prepared(True)  # no group, or nothing left to release into it
        fresh: list[str] = []
        for name in names:
            members = [p for p in pods if pod_group_of(p) == name]
            try:
                current: Obj | None = await self._kube.get(self.pod_groups, name, wl.namespace)
            except NotFound:
                current = None
            if current is not None and controlled_by_job(current):
                # The Job controller's group (Job.spec.scheduling): it sizes it itself.
                continue
            if current is None:
                if any(is_gated(p) for p in members):
                    fresh.append(name)
                continue
            outside = sum(1 for p in pods if not is_gated(p) and pod_group_of(p) != name)
            prepared = await self._keep(wl, current, members, admitted, outside)
            if not prepared.ready:
                return prepared
        if not fresh:
            return Prepared(True)
        counts = fresh_counts(fresh, pods, admitted)
        if isinstance(counts, str):
            return Prepared(False, counts)
        for name, count in counts.items():
            prepared = await self._create(wl, name, count, admitted)
            if not prepared.ready:
                return prepared
        return Prepared(True)

    async def _create(
        self, wl: Workload, name: str, count: int, admitted: int, *, with_class: bool = True
    ) -> Prepared:
        ns = wl.namespace
        doc = pod_group_manifest(wl, name, count, admitted, self.pod_groups)
        if self.workload_preemption is not False:
            doc["spec"].update(preemption_fields(wl, self.pod_groups))
            if not with_class:
                doc["spec"].pop("priorityClassName", None)
        key = self.constraint(wl)
        if key is not None:
            doc["spec"]["schedulingConstraints"] = scheduling_constraints(key)
        try:
            created = await self._kube.create(self.pod_groups, doc, namespace=ns)
        except Conflict:
            return Prepared(False, f"PodGroup {ns}/{name} was created meanwhile")
        except KubeError as exc:
            if key is not None and refuses_constraints(exc):
                self._learn_topology(False, f"the API server refuses it: {exc.message}")
                return await self._create(wl, name, count, admitted, with_class=with_class)
            if with_class and "priorityClassName" in doc["spec"] and (
                "priorityclass" in exc.message.lower()
            ):
                # The Workload's PriorityClass is gone (deleted since it was resolved): the
                # group gets kube-scheduler's default priority rather than no group at all.
                logger.info("PodGroup %s/%s without priorityClassName: %s", ns, name, exc)
                return await self._create(wl, name, count, admitted, with_class=False)
            if self.workload_preemption is not None or not refuses_preemption_fields(exc):
                raise
            self._learn_preemption(False, f"the API server refuses them: {exc.message}")
            return await self._create(wl, name, count, admitted, with_class=with_class)
        if key is not None and self.topology_constraints is None:
            kept_key = stored_key(created)
            self._learn_topology(
                kept_key == key,
                "the API server keeps it"
                if kept_key == key
                else f"the API server dropped it (stored key {kept_key!r})",
            )
        if self.workload_preemption is None and "disruptionMode" in doc["spec"]:
            # With the gate off, v1.36.4 drops the fields it does not serve and defaults
            # disruptionMode to Pod: what it stored says whether it took them.
            kept = (created.get("spec") or {}).get("disruptionMode") == "PodGroup"
            self._learn_preemption(
                kept,
                "the API server keeps them"
                if kept
                else "the API server dropped them (stored disruptionMode "
                f"{(created.get('spec') or {}).get('disruptionMode')!r})",
            )
        logger.info(
            "PodGroup %s/%s created for %d pods of Workload %s (%d admitted)",
            ns,
            name,
            count,
            wl.key,
            admitted,
        )
        return Prepared(True)

    def constraint(self, wl: Workload) -> str | None:
        """The ``schedulingConstraints.topology`` key ``wl``'s new PodGroup gets (None: none)."""
        if (
            self.topology == "NodeSelector"
            or not mutable_min_count(self.pod_groups)
            or self.topology_constraints is False
        ):
            return None
        return constraint_key(wl)

    def unpinned(self, wl: Workload) -> bool:
        """Whether ``wl``'s pods are released without their TAS domain's node selector:
        ``topologyHandOff: Constraint``, and the API server keeps the constraint that takes its
        place, and the assignment can follow the binding (``followable``). Otherwise (gate off,
        no group, a spread request, slices, a Topology without the hostname level) they are
        pinned as always."""
        return (
            self.enabled
            and self.topology == "Constraint"
            and self.topology_constraints is True
            and self.constraint(wl) is not None
            and followable(wl)
        )

    async def follow_binding(
        self,
        wl: Workload,
        pods_by_set: Mapping[str, Sequence[Obj]],
        books: Books | None = None,
    ) -> None:
        """``topologyHandOff: Constraint``: once kube-scheduler has bound every pod of a pod set,
        its topology assignment is rewritten to the hosts they are bound on, so kqueue's books
        (quota placement, the node-fit guard, failed-node replacement) name where the gang runs,
        not the domain kqueue would have pinned it to. With ``books`` the engine decides the
        rewrite (``Engine.follow_binding``): a binding onto hosts other unpinned gangs are
        booked on (admitted, not bound there) re-books them elsewhere, and their Workloads are
        written too (kqueue/engine/tas/follow.py says why re-booking)."""
        adm = wl.status.admission
        if adm is None or not self.unpinned(wl):
            return
        out = wl.model_copy(deep=True)
        assert out.status.admission is not None
        moved: list[str] = []
        for psa in out.status.admission.pod_set_assignments:
            ta = psa.topology_assignment
            count = psa.count if psa.count is not None else 0
            bound = (
                bound_domains(ta, count, pods_by_set.get(psa.name, ())) if ta is not None else None
            )
            if ta is None or bound is None:
                continue
            psa.topology_assignment = encode_assignment(list(ta.levels), bound)
            moved.append(f"{psa.name}: {', '.join(f'{v[0]} {n}' for v, n in bound)}")
        if not moved:
            return
        rebooked = books.follow(out) if books is not None else []
        try:
            await self._kube.replace_status(WORKLOADS, out.to_dict(), namespace=out.namespace)
        except KubeError as exc:
            logger.debug("following the binding of %s: %s", wl.key, exc)
            return
        message = (
            "kube-scheduler placed the gang inside the PodGroup's topology constraint; the "
            f"topology assignment now names the hosts it is bound on ({'; '.join(moved)})"
        )
        self._events.record(wl.to_dict(), "Normal", "TopologyAssignmentFollowed", message)
        logger.info("Workload %s: %s", wl.key, message)
        for other in rebooked:
            await self._rebooked(other, wl.key)

    async def _rebooked(self, other: Workload, by: str) -> None:
        """Write ``other``'s re-booked assignment (its pods are not pinned: kube-scheduler
        places them wherever its constraint finds room). A conflict (the Workload changed since
        it was read) reads it again and applies the re-booked topology assignments to what it
        holds now, as the other status writes do (``Kube.modify_status``)."""
        try:
            written = await self._kube.modify_status(
                WORKLOADS, other.name, rebooking(other), namespace=other.namespace
            )
        except KubeError as exc:
            # The engine holds the new booking until the Workload is seen again.
            logger.info("re-booking %s: %s", other.key, exc)
            return
        if written is None:
            # Gone, or no longer admitted as it was re-booked: nothing to re-book.
            logger.info("re-booking %s: its admission changed meanwhile", other.key)
            return
        assert other.status.admission is not None
        where = "; ".join(
            f"{psa.name}: {', '.join(f'{v[-1]} {n}' for v, n in psa.topology_assignment.domains())}"
            for psa in other.status.admission.pod_set_assignments
            if psa.topology_assignment is not None
        )
        message = (
            f"Workload {by} was bound on hosts this workload was booked on (its pods are not "
            f"pinned, and not bound where it was booked); its topology assignment now names "
            f"free room ({where}) until it follows where kube-scheduler binds it"
        )
        self._events.record(other.to_dict(), "Normal", "TopologyAssignmentRebooked", message)
        logger.info("Workload %s: %s", other.key, message)

    def _learn_topology(self, on: bool, why: str) -> None:
        self.topology_constraints = on
        logger.info(
            "topology hand-off: %s (topologyHandOff: %s; PodGroup schedulingConstraints: %s%s)",
            "on" if on else "off",
            self.topology,
            why,
            "" if on else "; it needs the TopologyAwareWorkloadScheduling feature gate: "
            "TAS pods are pinned by node selector only",
        )

    def _learn_preemption(self, on: bool, why: str) -> None:
        self.workload_preemption = on
        if on:
            logger.info(
                "workload-aware preemption: on (PodGroup disruptionMode and priorityClassName: "
                "%s): kube-scheduler preempts kqueue's gangs whole",
                why,
            )
        else:
            logger.info(
                "workload-aware preemption: off (PodGroup disruptionMode and priorityClassName: "
                "%s; they need the WorkloadAwarePreemption feature gate): PodGroups are created "
                "without them",
                why,
            )

    async def _keep(
        self, wl: Workload, current: Obj, members: Sequence[Obj], admitted: int, outside: int = 0
    ) -> Prepared:
        """An existing group of the object: kept (handed to ``wl``), resized on v1beta1, or
        waited for while an earlier admission's group is still terminating. ``admitted`` is
        the whole admission, ``outside`` its pods already released into other groups."""
        ns = wl.namespace
        meta = current.get("metadata") or {}
        name = str(meta.get("name"))
        running = any(not is_gated(p) for p in members)
        joining = sum(1 for p in members if is_gated(p))
        if meta.get("deletionTimestamp"):
            if not joining:
                return Prepared(True)  # its pods are going too; nothing of this admission joins
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
        min_count = _min_count(current) or 0
        recorded = (meta.get("annotations") or {}).get(ADMITTED_COUNT_ANNOTATION)
        if _owned_by(current, wl) and recorded == str(admitted):
            return Prepared(True)  # made (or handed over) for this admission
        if mutable_min_count(self.pod_groups) and joining:
            return await self._resize(wl, current, admitted, admitted - outside)
        # The group stays, whatever its size: its spec is immutable, and it cannot be replaced
        # while any live pod (a held one too) names it. Its pods run (an elastic Job's earlier
        # size, now held by the new slice; a replacement pod joins its running gang), or a
        # requeued incarnation's pods name it again. It follows the Workload holding the quota.
        patch = {
            "metadata": {
                "ownerReferences": [_owner_ref(wl)],
                "annotations": {ADMITTED_COUNT_ANNOTATION: str(admitted)},
            }
        }
        try:
            await self._kube.patch(self.pod_groups, name, patch, namespace=ns)
        except KubeError as exc:
            return Prepared(False, f"cannot hand PodGroup {ns}/{name} to {wl.key}: {exc}")
        if running and joining:
            self._events.record(
                wl.to_dict(),
                "Normal",
                "PodGroupKept",
                f"PodGroup {ns}/{name} keeps minCount {min_count} (its spec is immutable and "
                f"its pods run); {joining} pod(s) joining it are placed as they fit",
            )
        elif joining and min_count > joining:
            # Released anyway: kube-scheduler keeps them pending, and waitForPodsReady (when
            # on) evicts and requeues the workload; holding them would hold the quota forever.
            self._events.record(
                wl.to_dict(),
                "Warning",
                "PodGroupTooLarge",
                f"PodGroup {ns}/{name} (from an earlier admission) asks for minCount "
                f"{min_count}, but only {joining} pod(s) of this admission name it, so "
                f"kube-scheduler will not place them; its spec is immutable and the API server "
                f"keeps it while these pods name it. Delete the object's pods, or the object, "
                f"to start over",
            )
        return Prepared(True)

    async def _resize(self, wl: Workload, current: Obj, admitted: int, room: int) -> Prepared:
        """v1beta1: the object's one group takes this admission's size in place (an elastic
        scale-up, a requeued workload's pods) and follows the Workload holding the quota.

        ``minCount`` becomes ``room``, the pods of the group this admission lets run, whether or not they
        all exist yet (kube-scheduler waits for them); it counts the bound ones, so the joining
        pods are placed all together or not at all."""
        ns = wl.namespace
        name = str((current.get("metadata") or {}).get("name"))
        want = max(1, room)
        before = _min_count(current) or 0
        patch: Obj = {
            "metadata": {
                "ownerReferences": [_owner_ref(wl)],
                "annotations": {ADMITTED_COUNT_ANNOTATION: str(admitted)},
            }
        }
        if before != want:
            patch["spec"] = {"schedulingPolicy": {"gang": {"minCount": want}}}
        try:
            await self._kube.patch(self.pod_groups, name, patch, namespace=ns)
        except KubeError as exc:
            return Prepared(False, f"cannot resize PodGroup {ns}/{name} for {wl.key}: {exc}")
        if before != want:
            self._events.record(
                wl.to_dict(),
                "Normal",
                "PodGroupResized",
                f"PodGroup {ns}/{name} minCount {before} -> {want} ({admitted} admitted): "
                f"kube-scheduler places the joining pods together with the running ones",
            )
            logger.info("PodGroup %s/%s minCount %d -> %d for %s", ns, name, before, want, wl.key)
        return Prepared(True)

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
        # An elastic Job's pods name one group per size: the gang is placed when every group
        # is; the first group kube-scheduler could not place is the one reported.
        verdicts: list[tuple[str, Obj, Obj]] = []
        for name in names:
            try:
                group = await self._kube.get(self.pod_groups, name, wl.namespace)
            except KubeError as exc:
                logger.debug("reading PodGroup %s/%s: %s", wl.namespace, name, exc)
                return RECHECK_S
            cond = _condition(group, scheduled_condition(self.pod_groups))
            if (
                cond is not None
                and cond.get("status") == "True"
                and mutable_min_count(self.pod_groups)
            ):
                cond = resized_verdict(cond, group, [p for p in pods if pod_group_of(p) == name])
            if cond is None:
                return RECHECK_S
            verdicts.append((name, group, cond))
        failing = [v for v in verdicts if v[2].get("status") != "True"]
        if not failing:
            groups = ", ".join(
                f"{wl.namespace}/{name} (minCount {_min_count(group) or 0})"
                for name, group, _ in verdicts
            )
            await self._write(
                wl,
                "True",
                "Scheduled",
                f"kube-scheduler placed the gang all together (PodGroup {groups})",
                event=("Normal", GANG_SCHEDULED_EVENT),
            )
            return None
        name, group, cond = failing[0]
        count = _min_count(group) or 0
        members = [p for p in pods if pod_group_of(p) == name]
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
                group = await self._kube.get(self.pod_groups, name, wl.namespace)
                if _owned_by(group, wl) and not (group.get("metadata") or {}).get(
                    "deletionTimestamp"
                ):
                    await self._kube.delete(self.pod_groups, name, namespace=wl.namespace)
                    logger.info(
                        "PodGroup %s/%s deleted with the eviction of %s", wl.namespace, name, wl.key
                    )
            except NotFound:
                continue
            except KubeError as exc:
                logger.info("deleting PodGroup %s/%s: %s", wl.namespace, name, exc)


def rebooking(rebooked: Workload) -> Callable[[Obj], Obj | None]:
    """The change that puts ``rebooked``'s topology assignments into a Workload as read again:
    only while it is still admitted in the same ClusterQueue with the same pod sets (otherwise
    its booking was released or replaced meanwhile, and None: nothing to write). Idempotent."""
    assert rebooked.status.admission is not None
    admission = rebooked.to_dict()["status"]["admission"]
    wanted = {
        psa["name"]: psa["topologyAssignment"]
        for psa in admission["podSetAssignments"]
        if psa.get("topologyAssignment") is not None
    }

    def change(obj: Obj) -> Obj | None:
        current = (obj.get("status") or {}).get("admission")
        if current is None or current.get("clusterQueue") != admission["clusterQueue"]:
            return None
        assignments = current.get("podSetAssignments") or []
        if {psa.get("name") for psa in assignments} != {
            psa["name"] for psa in admission["podSetAssignments"]
        }:
            return None
        for psa in assignments:
            if psa["name"] in wanted:
                psa["topologyAssignment"] = wanted[psa["name"]]
        return obj

    return change

