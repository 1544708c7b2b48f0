"""Deployment (framework ``deployment``): each pod its own Workload, as Kueue's Deployment
integration, so a rolling update never waits for the whole Deployment.

The Deployment itself is never queued and needs no reconciler: its webhook (:mod:`.webhook`) puts
its queue and priority labels and the ``kqueue.io/suspended-by-parent: deployment`` mark in its pod
template; the ReplicaSet's pods are then held by the plain-pod webhook and admitted, released,
evicted and finished one by one by the pod integration's reconciler, which is why the framework
needs ``pod`` (the Configuration says so when it is missing).
"""

from __future__ import annotations

from kqueue.api.integrations.deployment import INTEGRATION
from kqueue.controller.integrations.deployment import webhook
from kqueue.controller.integrations.framework import (
    Framework,
    always_queue_label_selector,
    queue_label_webhooks,
)
from kqueue.controller.integrations.registry import register

NAME = INTEGRATION.framework


FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "each pod its own Workload (its queue and priority labels copied into the pod "
            "template), so a rolling update proceeds pod by pod"
        ),
        suspendable=False,
        webhooks=queue_label_webhooks(
            short="deployment",
            rule={"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]},
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=lambda _ctx: webhook,
            selector=always_queue_label_selector,
        ),
        # Nothing beyond the pod integration's rules: the Deployment is only seen by the
        # webhooks, never read or written through the API.
        rbac=(),
    )
)

__all__ = ["FRAMEWORK", "NAME"]
