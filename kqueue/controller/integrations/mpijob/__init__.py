"""MPIJob (framework ``kubeflow.org/mpijob``): one gang Workload per MPIJob, pod sets
``launcher`` and ``worker``; suspended while queued (``spec.runPolicy.suspend``), stopped and
resumed whole (:mod:`.generic`)."""

from __future__ import annotations

from kqueue.api.integrations.mpijob import MPIJOB_API_VERSION, MPIJOB_KIND
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.framework import (
    Framework,
    Handler,
    PolicyRule,
    Webhook,
    WebhookContext,
)
from kqueue.controller.integrations.mpijob import webhook
from kqueue.controller.integrations.mpijob.generic import MPIJobIntegration
from kqueue.controller.integrations.registry import register

NAME = "kubeflow.org/mpijob"


def _queue_selector(without_queue_name: bool) -> dict[str, object]:
    if without_queue_name:
        return {}
    return {"matchExpressions": [{"key": c.QUEUE_NAME_LABEL, "operator": "Exists"}]}


def _hooks(ctx: WebhookContext) -> webhook.MPIJobWebhooks:
    return webhook.MPIJobWebhooks(
        manage_jobs_without_queue_name=ctx.config.manage_jobs_without_queue_name,
        local_queues=ctx.local_queues,
    )


def _mutate(ctx: WebhookContext) -> Handler:
    return _hooks(ctx).mutate


def _validate(ctx: WebhookContext) -> Handler:
    return _hooks(ctx).validate


_MPIJOBS = {"apiGroups": ["kubeflow.org"], "apiVersions": ["v2beta1"], "resources": ["mpijobs"]}

FRAMEWORK = register(
    Framework(
        name=NAME,
        api_version=MPIJOB_API_VERSION,
        kind=MPIJOB_KIND,
        summary=(
            "one Workload per MPIJob, pod sets `launcher` and `worker`; suspended while "
            "queued (spec.runPolicy.suspend), stopped and resumed whole"
        ),
        suspendable=True,
        job=MPIJobIntegration,
        default_enabled=False,
        webhooks=(
            Webhook(
                name="mmpijob.kqueue.io",
                path=webhook.MUTATE_PATH,
                type="mutating",
                rules=({**_MPIJOBS, "operations": ["CREATE", "UPDATE"]},),
                handler=_mutate,
                object_selector=_queue_selector,
                reinvocation_policy="Never",
                order=10,
            ),
            Webhook(
                name="vmpijob.kqueue.io",
                path=webhook.VALIDATE_PATH,
                type="validating",
                rules=({**_MPIJOBS, "operations": ["CREATE", "UPDATE"]},),
                handler=_validate,
                object_selector=_queue_selector,
            ),
        ),
        rbac=(
            PolicyRule(
                ("kubeflow.org",),
                ("mpijobs",),
                ("list", "watch", "patch"),
                "MPIJobs naming a queue are watched, suspended while queued or evicted, and "
                "resumed with the admission's node labels and tolerations",
            ),
            PolicyRule(
                ("kubeflow.org",),
                ("mpijobs/finalizers",),
                ("update",),
                "a Workload's owner reference to its MPIJob blocks the MPIJob's deletion, which "
                "OwnerReferencesPermissionEnforcement allows only with update on its finalizers",
            ),
        ),
        simulate=True,
    )
)

__all__ = ["FRAMEWORK", "NAME", "MPIJobIntegration"]
