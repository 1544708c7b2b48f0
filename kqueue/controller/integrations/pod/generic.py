"""Plain Pods as the generic reconciler drives them: a single Pod, or a pod group admitted as one
gang (Kueue's pod integration, a ``GenericJob`` plus ``ComposableJob``).

A Pod labelled ``kqueue.io/queue-name`` with no controlling owner is kqueue's to manage. The pod
webhook (:func:`~kqueue.controller.integrations.pod.webhook.mutate_plain_pod`,
``mplainpod.kqueue.io``) holds it at creation: the ``kqueue.io/admission`` gate, the
``kqueue.io/managed`` label (so kqueue's pod informer sees it) and the ``kqueue.io/managed``
finalizer, which keeps the pod, and so its accounting, until kqueue has seen it terminate.

A Pod has no suspend switch, so it is a composed job (:class:`PodJob`): keyed ``pod:<ns>/<name>``
(a single pod) or ``group:<ns>/<group>``, its members are read from the pod store and the generic
reconciler (:mod:`kqueue.controller.integrations.reconciler`):

1. feeds the group's size to the engine's barrier (``Engine.pods_present``) and, once all pods
   of the group exist (``kqueue.io/pod-group-total-count``), creates the one Workload;
2. admitted: releases the gated pods together through the one release path;
3. evicted: marks each released pod ``DisruptionTarget=True`` (reason ``EvictedByKqueue``) and
   deletes it (a pod still gated never ran and stays, as Kueue's ``podSuspended``); once none
   runs, the quota is released and the Workload requeued (new pods of the group join it);
4. all pods terminated: ``Finished`` (Succeeded when they all succeeded, else Failed);
5. removes the finalizer from pods that terminated, or whose Workload finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kqueue.api.integrations import (
    IntegrationError,
    PriorityResolver,
    group_name,
    group_total_count,
    role_hash,
    workload_for_pod,
    workload_for_pod_group,
)
from kqueue.api.integrations.pod import (
    POD_KIND,
    ExcessPod,
    group_excess,
    group_pods,
    member_pod_set,
    pod_based,
)
from kqueue.api.integrations.registry import INTEGRATIONS, Workloads
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease, is_terminal
from kqueue.controller.informer import Store
from kqueue.controller.integrations.framework import Composed
from kqueue.controller.integrations.owners import BY_OWNER
from kqueue.controller.resources import PODS, Resource
from kqueue.engine.types import WorkloadKey

Obj = dict[str, Any]

# Index on the pod store: ``<namespace>/<group>`` of pods in a group.
BY_GROUP: Final = "pod-group"
SINGLE: Final = "pod:"
GROUP: Final = "group:"


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
    # An Argo Workflow's or a Tekton TaskRun's pod queues on its own (Kueue's pod-based workloads).
    return pod_based(pod) or not any(r.get("controller") for r in meta.get("ownerReferences") or [])


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


def _prebuilt(pods: list[Obj]) -> str | None:
    """The Workload the pods name with ``kqueue.io/prebuilt-workload-name`` (MultiKueue's copies
    on a worker carry it)."""
    for pod in pods:
        name = (_meta(pod).get("labels") or {}).get(c.PREBUILT_WORKLOAD_LABEL)
        if name:
            return str(name)
    return None


def _adoptable(wl: Workload | None, pods: list[Obj]) -> Workload | None:
    """A prebuilt Workload the pods may take: not being deleted, and controlled by nothing
    but one of them (never another object's)."""
    if wl is None or wl.metadata.deletion_timestamp:
        return None
    uids = {str(_meta(p).get("uid") or "") for p in pods}
    if any(ref.controller and ref.uid not in uids for ref in wl.metadata.owner_references):
        return None
    return wl


def _excess(pods: list[Obj], wl: Workload | None) -> list[ExcessPod]:
    """The group's pods beyond its total count, or, once its Workload exists, beyond their pod
    set's count in it (Kueue's FindMatchingWorkloads); pods being deleted already are not
    counted (a pod with a malformed count is reported on its own, by the pod webhook)."""
    live = [p for p in pods if not _meta(p).get("deletionTimestamp")]
    try:
        return group_excess(live, None if wl is None else wl.spec.pod_sets) if live else []
    except IntegrationError:
        return []


class PodJob:
    """A single Pod or a pod group (its members are pods). As a :class:`GenericJob` a pod is
    never suspended and needs no patch to run or stop: it is held by the gate, released by the
    release path and stopped by eviction, as a composed job."""

    resource: Resource = PODS
    api_version = "v1"
    kind = POD_KIND
    requeue_note = "; its pods were deleted: create them again to run"

    def label_selector(self, *, without_queue_name: bool = False) -> str | None:
        # The pod webhook labels the pods it holds; the shared pod informer lists those.
        return f"{c.MANAGED_LABEL}=true"

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_pod(obj, priorities)

    def is_suspended(self, obj: Obj) -> bool:
        return False

    def is_active(self, obj: Obj) -> bool:
        return not is_terminal(obj)

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        return self.finished_members([obj]) if is_terminal(obj) else None

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        return None

    def stop_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        return None

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return role_hash(pod) if group_name(pod) is not None else c.DEFAULT_POD_SET_NAME

    def holds_pods(self, obj: Obj) -> bool:
        return True

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        return None

    def owner_of_pod(self, pod: Obj) -> str | None:
        """The composed job's key: ``group:<ns>/<group>`` or ``pod:<ns>/<name>``."""
        return reconcile_key(pod)

    def user_suspended(self, obj: Obj) -> bool:
        return False

    # -- ComposableJob -------------------------------------------------------------------------

    def compose(self, key: str, members: Store[Obj], workloads: Store[Workload]) -> Composed | None:
        if key.startswith(GROUP):
            namespace, name = key[len(GROUP):].split("/", 1)
            pods = [p for p in members.by_index(BY_GROUP, f"{namespace}/{name}") if is_plain(p)]
            if not pods:
                return None
            barrier = WorkloadKey(f"{namespace}/{name}")
            prebuilt = _prebuilt(pods)
            if prebuilt is not None:
                wl = _adoptable(workloads.get(f"{namespace}/{prebuilt}"), pods)
            else:
                wl = workloads.get(barrier)
                if wl is not None and wl.metadata.deletion_timestamp:
                    wl = None
            try:
                total = group_total_count(pods[0])
            except IntegrationError as exc:
                return Composed(f"Pod group {name}", pods, wl, 0, barrier, invalid=str(exc))
            return Composed(
                f"Pod group {name}", pods, wl, total, barrier, prebuilt=prebuilt,
                excess=_excess(pods, wl),
            )
        namespace, name = key[len(SINGLE):].split("/", 1)
        pod = members.get(f"{namespace}/{name}")
        if pod is None:
            return None  # gone: its Workload follows it (owner reference)
        uid = str(_meta(pod).get("uid") or "")
        owned = [w for w in workloads.by_index(BY_OWNER, uid) if not w.metadata.deletion_timestamp]
        prebuilt = _prebuilt([pod])
        if not owned and prebuilt is not None:
            found = _adoptable(workloads.get(f"{namespace}/{prebuilt}"), [pod])
            owned = [found] if found is not None else []
        return Composed(f"Pod {name}", [pod], owned[-1] if owned else None, 1, prebuilt=prebuilt)

    def workload_for_members(self, live: list[Obj], priorities: PriorityResolver) -> Workload:
        if group_name(live[0]) is None:
            return workload_for_pod(live[0], priorities)
        return workload_for_pod_group(group_pods(live), priorities)

    def finished_members(self, terminated: list[Obj]) -> tuple[str, str]:
        failed = [p for p in terminated if (p.get("status") or {}).get("phase") == "Failed"]
        if failed:
            names = ", ".join(sorted(str(_meta(p).get("name")) for p in failed))
            return c.FINISHED_FAILED, f"Pods failed: {names}"
        return c.FINISHED_SUCCEEDED, "Pods succeeded"

    def member_pod_set(self, wl: Workload, member: Obj) -> str:
        return member_pod_set(member, wl.spec.pod_sets)

    def done_patch(self, member: Obj) -> Obj | None:
        meta = _meta(member)
        finalizers = list(meta.get("finalizers") or [])
        if c.MANAGED_FINALIZER not in finalizers:
            return None
        return {
            "metadata": {
                "finalizers": [f for f in finalizers if f != c.MANAGED_FINALIZER],
                "resourceVersion": meta.get("resourceVersion"),
            }
        }
