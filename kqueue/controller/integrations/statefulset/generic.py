"""A StatefulSet as the generic reconciler drives it (Kueue's pkg/controller/jobs/statefulset).

A StatefulSet has no suspend switch: its pods are held by the ``kqueue.io/admission`` gate that
the webhook puts in its pod template (with the managed label, so kqueue's pod informer sees
them). To the generic reconciler it is therefore always "suspended": queued, nothing is patched
on it; admitted, its gated pods are released through the one release path (the flavor's node
labels and tolerations go on each pod, never on the template, so the template never changes
and never triggers a rolling update). A StatefulSet never finishes; its Workload goes when the
StatefulSet is deleted (owner reference) or scaled to 0 (:mod:`.scaling`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kqueue.api.integrations import IntegrationError, PriorityResolver
from kqueue.api.integrations.statefulset import (
    APPS_API_VERSION,
    STATEFULSET_KIND,
    replicas,
    workload_for_statefulset,
)
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease, is_gated
from kqueue.controller.integrations.podtemplate import held_template_patch
from kqueue.controller.resources import Resource

Obj = dict[str, Any]

STATEFULSETS = Resource("apps", "v1", "statefulsets")
SCALED_TO_ZERO = "ScaledToZero"


def pod_template(sts: Obj) -> Obj:
    return (sts.get("spec") or {}).get("template") or {}


def scaled_to_zero(sts: Obj) -> bool:
    try:
        return replicas(sts) == 0
    except IntegrationError:
        return False


class StatefulSetIntegration:
    resource: Resource = STATEFULSETS
    api_version = APPS_API_VERSION
    kind = STATEFULSET_KIND

    def label_selector(self, *, without_queue_name: bool = False) -> str | None:
        # Serving workloads queue only when they name a queue (docs/integrations.md).
        return c.QUEUE_NAME_LABEL

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_statefulset(obj, priorities)

    def is_suspended(self, obj: Obj) -> bool:
        # Held by the gate: nothing to suspend, nothing to resume.
        return True

    def user_suspended(self, obj: Obj) -> bool:
        return False

    def is_active(self, obj: Obj) -> bool:
        # Whether it still runs is read from its pods (the reconciler's released pods): the
        # StatefulSet's own counts include the gated pods it recreates at once.
        return False

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        # A StatefulSet never finishes. Scaled to 0 it needs no Workload: this keeps the
        # reconciler from creating one (the scaling hook has deleted the old ones).
        if scaled_to_zero(obj):
            return c.FINISHED_SUCCEEDED, "StatefulSet scaled to 0"
        return None

    def owner_of_pod(self, pod: Obj) -> str | None:
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if (
                ref.get("controller")
                and ref.get("kind") == STATEFULSET_KIND
                and ref.get("apiVersion") == APPS_API_VERSION
            ):
                return f"{meta.get('namespace') or 'default'}/{ref.get('name')}"
        return None

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return c.DEFAULT_POD_SET_NAME

    def holds_pods(self, obj: Obj) -> bool:
        return is_gated(pod_template(obj))

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        return None  # its pods are released one by one, with the flavor's directives

    def stop_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        return None  # its running pods are deleted (:mod:`.scaling`); it recreates them gated

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        """The gate and managed label in a template that lacks them (a StatefulSet created
        before kqueue's webhooks were installed): its next pods are held."""
        patch = held_template_patch(pod_template(obj))
        if patch is None:
            return None
        return {
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            "spec": {"template": patch},
        }
