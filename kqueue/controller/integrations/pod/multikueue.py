"""Plain pods' and pod groups' MultiKueue adapter (Kueue's pod_multikueue_adapter.go).

A Pod has no ``managedBy``: on the manager kqueue holds it itself. Its pods stay behind the
``kqueue.io/admission`` gate once MultiKueue placed the Workload on a worker
(``status.clusterName``; kqueue/controller/integrations/reconciler.py releases nothing then),
so any plain pod or pod group in a queue with a MultiKueue check can be dispatched; a pod that
another object controls (a Deployment's, a StatefulSet's, a leader-and-workers set's) cannot: that
kind has no adapter. A pod group's pods go together: every pod of the group is copied to the
worker, followed and deleted there (:meth:`PodAdapter.members`, :meth:`PodAdapter.remote_names`).

The copy is the manager's pod (its spec, the gate included; its labels and annotations) with the
origin and ``kqueue.io/prebuilt-workload-name`` labels and without kqueue's managed label, so the
worker's pod webhook holds it as a pod created there and the worker's kqueue adopts the named
Workload (already admitted there) and releases it. Its status comes back whole, except that a
gated manager pod keeps its ``PodScheduled=False`` (``SchedulingGated``) condition until the
copy is scheduled: a copied ``Unschedulable`` would make the manager's cluster-autoscaler scale
up for a pod that never runs there.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final

from kqueue.api.integrations import group_name
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.admission_checks.multikueue.adapters import Path, remote_meta
from kqueue.controller.gate import is_gated
from kqueue.controller.integrations.pod.generic import is_plain
from kqueue.controller.kube import Kube
from kqueue.controller.resources import PODS, Resource

Obj = dict[str, Any]

POD_SCHEDULED: Final = "PodScheduled"


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _condition(pod: Obj, type_: str) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def pod_status(local: Obj, remote: Obj, remote_finished: bool) -> Obj | None:
    """Kueue's ``syncLocalPodWithRemote``: the copy's status, but the gated manager pod's own
    ``PodScheduled`` condition while the copy is not scheduled; nothing for a manager pod
    being deleted. None: nothing to write."""
    if _meta(local).get("deletionTimestamp"):
        return None
    status: Obj = copy.deepcopy(remote.get("status") or {})
    here = _condition(local, POD_SCHEDULED)
    there = _condition(remote, POD_SCHEDULED)
    if is_gated(local) and here is not None and (there is None or there.get("status") != "True"):
        conditions = list(status.get("conditions") or [])
        at = [i for i, cd in enumerate(conditions) if cd.get("type") == POD_SCHEDULED]
        if at:
            conditions[at[0]] = here
        else:
            conditions.append(here)
        status["conditions"] = conditions
    return status if status != (local.get("status") or {}) else None


def controlled_problem(local: Obj) -> str | None:
    """A pod another object controls is that object's: not dispatched as a plain pod."""
    meta = _meta(local)
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return (
                f"Pod {meta.get('namespace')}/{meta.get('name')} is controlled by "
                f"{ref.get('kind')} {ref.get('name')}: only plain pods and pod groups are "
                f"dispatched, and {ref.get('kind')} ({ref.get('apiVersion')}) has no MultiKueue "
                "adapter"
            )
    return None


@dataclass(frozen=True)
class PodAdapter:
    """A plain pod, or a pod group's pods together."""

    api_version: str = "v1"
    kind: str = "Pod"
    resource: Resource = PODS
    # No managedBy: the manager's pods are held by kqueue's gate instead.
    managed_by: str = ""
    managed_by_path: Path | None = None
    own_controller: str = ""

    def remote_object(self, local: Obj, workload: str, origin: str) -> Obj:
        meta = remote_meta(local, workload, origin)
        # Held by the worker's pod webhook as a pod created there (gate, label, finalizer).
        meta["labels"].pop(c.MANAGED_LABEL, None)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": copy.deepcopy(local.get("spec") or {}),
        }

    def status_update(self, local: Obj, remote: Obj, remote_finished: bool) -> Obj | None:
        return pod_status(local, remote, remote_finished)

    def dispatch_problem(self, local: Obj) -> str | None:
        return controlled_problem(local)

    async def members(self, kube: Kube, local: Obj) -> list[Obj]:
        """A single pod; or every plain pod of its group, by name."""
        group = group_name(local)
        if group is None:
            return [local]
        namespace = _meta(local).get("namespace") or "default"
        pods = await kube.list(
            PODS, namespace=namespace, label_selector=f"{c.POD_GROUP_NAME_LABEL}={group}"
        )
        return sorted((p for p in pods if is_plain(p)), key=lambda p: str(_meta(p).get("name")))

    async def remote_names(self, kube: Kube, namespace: str, workload: str, name: str) -> list[str]:
        """The worker's pods of the Workload (a pod group's all), by its label."""
        pods = await kube.list(
            PODS, namespace=namespace, label_selector=f"{c.PREBUILT_WORKLOAD_LABEL}={workload}"
        )
        return sorted(str(_meta(p).get("name")) for p in pods)


ADAPTER: Final = PodAdapter()
