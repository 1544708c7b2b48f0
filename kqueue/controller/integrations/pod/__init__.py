"""Plain Pods and pod groups (framework ``pod``): held by the gate alone (a Pod has no suspend
switch), released together, deleted on eviction; a composed job the generic reconciler drives
(:mod:`.generic`)."""

from __future__ import annotations

from typing import Any

from kqueue.api.integrations import IntegrationError, group_name, group_total_count
from kqueue.api.integrations.pod import INTEGRATION
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.framework import (
    Framework,
    Handler,
    IntegrationContext,
    PolicyRule,
    Webhook,
    WebhookContext,
)
from kqueue.controller.integrations.pod import webhook
from kqueue.controller.integrations.pod.generic import (
    BY_GROUP,
    PodJob,
    group_key,
    is_plain,
    reconcile_key,
)
from kqueue.controller.integrations.pod.multikueue import ADAPTER as MULTIKUEUE
from kqueue.controller.integrations.pod.webhook import MUTATE_PATH, WEBHOOK_NAME, mutate_plain_pod
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.registry import register

Obj = dict[str, Any]


def _mutate(_ctx: WebhookContext) -> Handler:
    return webhook.mutate_plain_pod


def pod_workload(pod: Obj) -> tuple[str, str] | None:
    """A pod group of more than one pod is one gang: its pods name the PodGroup
    ``pod-group-<group>`` (a single pod, or a group of one, needs no gang)."""
    name = group_name(pod)
    if name is None or not is_plain(pod):
        return None
    try:
        total = group_total_count(pod)
    except IntegrationError:
        return None  # the pod integration's webhook reports it
    return ("Pod", f"group-{name}") if total > 1 else None


def _install(ctx: IntegrationContext, _reconciler: JobReconciler | None) -> None:
    # A pod group's members, by group (PodJob.compose reads them so).
    ctx.pods.store.add_index(BY_GROUP, group_key)


FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "a Pod naming a queue, or a pod group (`kqueue.io/pod-group-name`) admitted as one "
            "gang; held by the scheduling gate (Pods have no suspend switch)"
        ),
        suspendable=False,
        job=PodJob,
        install=_install,
        pod_workload=pod_workload,
        multikueue=MULTIKUEUE,
        webhooks=(
            Webhook(
                name=webhook.WEBHOOK_NAME,
                path=webhook.MUTATE_PATH,
                type="mutating",
                rules=(
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "operations": ["CREATE"],
                    },
                ),
                handler=_mutate,
                # A Job's pods carry the managed label from their template, so only pods created
                # on their own get here; the handler also skips controller-owned pods. It must
                # come before mpod: the managed label it adds routes the pod on to mpod, which
                # re-checks the gate if a later webhook rewrites the pod.
                object_selector=lambda _without_queue_name: {
                    "matchExpressions": [
                        {"key": c.QUEUE_NAME_LABEL, "operator": "Exists"},
                        {"key": c.MANAGED_LABEL, "operator": "DoesNotExist"},
                    ]
                },
                reinvocation_policy="Never",
                order=20,
            ),
        ),
        rbac=(
            PolicyRule(
                ("",),
                ("pods",),
                ("delete",),
                "an evicted plain pod or pod group is stopped by deleting its pods (marked "
                "DisruptionTarget first: pods/status, a core grant)",
            ),
            PolicyRule(
                ("",),
                ("pods/finalizers",),
                ("update",),
                "a Workload's owner reference blocks its pods' deletion (blockOwnerDeletion), "
                "which OwnerReferencesPermissionEnforcement allows only with update on the "
                "owner's finalizers",
            ),
        ),
    )
)

__all__ = [
    "FRAMEWORK",
    "MUTATE_PATH",
    "WEBHOOK_NAME",
    "group_key",
    "mutate_plain_pod",
    "reconcile_key",
]
