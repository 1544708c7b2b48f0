"""Deployment (framework ``deployment``): each pod its own Workload, as Kueue's Deployment
integration, so a rolling update never waits for the whole Deployment.

The Deployment itself is never queued and needs no reconciler: its webhook (:mod:`.webhook`) puts
its queue and priority labels and the ``kqueue.io/suspended-by-parent: deployment`` mark in its pod
template; the ReplicaSet's pods are then held by the plain-pod webhook and admitted, released,
evicted and finished one by one by the pod integration's reconciler, which is why the framework
needs ``pod`` (the Configuration says so when it is missing).
"""

from __future__ import annotations

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.deployment import webhook
from kqueue.controller.integrations.framework import Framework, Handler, Webhook, WebhookContext
from kqueue.controller.integrations.registry import register

NAME = "deployment"


def _queue_selector(_without_queue_name: bool) -> dict[str, object]:
    # A Deployment queues only when it names a queue: docs/integrations.md.
    return {"matchExpressions": [{"key": c.QUEUE_NAME_LABEL, "operator": "Exists"}]}


def _mutate(_ctx: WebhookContext) -> Handler:
    return webhook.mutate


def _validate(_ctx: WebhookContext) -> Handler:
    return webhook.validate


_DEPLOYMENTS = {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}

FRAMEWORK = register(
    Framework(
        name=NAME,
        api_version="apps/v1",
        kind="Deployment",
        summary=(
            "each pod its own Workload (its queue and priority labels copied into the pod "
            "template), so a rolling update proceeds pod by pod; needs `pod`"
        ),
        suspendable=False,
        default_enabled=False,
        webhooks=(
            Webhook(
                name="mdeployment.kqueue.io",
                path=webhook.MUTATE_PATH,
                type="mutating",
                rules=({**_DEPLOYMENTS, "operations": ["CREATE", "UPDATE"]},),
                handler=_mutate,
                object_selector=_queue_selector,
                reinvocation_policy="Never",
                order=10,
            ),
            Webhook(
                name="vdeployment.kqueue.io",
                path=webhook.VALIDATE_PATH,
                type="validating",
                rules=({**_DEPLOYMENTS, "operations": ["CREATE", "UPDATE"]},),
                handler=_validate,
                object_selector=_queue_selector,
            ),
        ),
        # Nothing beyond the pod integration's rules: the Deployment is only seen by the
        # webhooks, never read or written through the API.
        rbac=(),
        simulate=True,
    )
)

__all__ = ["FRAMEWORK", "NAME"]
