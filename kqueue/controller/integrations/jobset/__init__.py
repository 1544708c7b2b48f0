"""JobSet (framework ``jobset.x-k8s.io/jobset``): one gang Workload per JobSet, one pod set per
replicated Job; suspended while queued, stopped and resumed whole (:mod:`.generic`)."""

from __future__ import annotations

from kqueue.api.integrations.jobset import JOBSET_API_VERSION, JOBSET_KIND
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import registry
from kqueue.controller.integrations.framework import (
    Framework,
    Handler,
    PolicyRule,
    Webhook,
    WebhookContext,
)
from kqueue.controller.integrations.jobset import webhook
from kqueue.controller.integrations.jobset.generic import JobSetIntegration
from kqueue.controller.integrations.registry import register

NAME = "jobset.x-k8s.io/jobset"


def _queue_selector(without_queue_name: bool) -> dict[str, object]:
    if without_queue_name:
        return {}
    return {"matchExpressions": [{"key": c.QUEUE_NAME_LABEL, "operator": "Exists"}]}


def _hooks(ctx: WebhookContext) -> webhook.JobSetWebhooks:
    parents = frozenset(
        (f.api_version, f.kind)
        for f in registry.enabled(ctx.config.integrations.frameworks)
        if f.name != NAME
    )
    return webhook.JobSetWebhooks(
        manage_jobs_without_queue_name=ctx.config.manage_jobs_without_queue_name,
        local_queues=ctx.local_queues,
        parent_kinds=parents,
    )


def _mutate(ctx: WebhookContext) -> Handler:
    return _hooks(ctx).mutate


def _validate(ctx: WebhookContext) -> Handler:
    return _hooks(ctx).validate


_JOBSETS = {"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["v1alpha2"], "resources": ["jobsets"]}

FRAMEWORK = register(
    Framework(
        name=NAME,
        api_version=JOBSET_API_VERSION,
        kind=JOBSET_KIND,
        summary=(
            "one Workload per JobSet, a pod set per replicated Job (replicas x pods); "
            "suspended while queued, stopped and resumed whole"
        ),
        suspendable=True,
        job=JobSetIntegration,
        default_enabled=False,
        webhooks=(
            Webhook(
                name="mjobset.kqueue.io",
                path=webhook.MUTATE_PATH,
                type="mutating",
                rules=({**_JOBSETS, "operations": ["CREATE", "UPDATE"]},),
                handler=_mutate,
                object_selector=_queue_selector,
                reinvocation_policy="Never",
                order=10,
            ),
            Webhook(
                name="vjobset.kqueue.io",
                path=webhook.VALIDATE_PATH,
                type="validating",
                rules=({**_JOBSETS, "operations": ["CREATE", "UPDATE"]},),
                handler=_validate,
                object_selector=_queue_selector,
            ),
        ),
        rbac=(
            PolicyRule(
                ("jobset.x-k8s.io",),
                ("jobsets",),
                ("list", "watch", "patch"),
                "JobSets naming a queue are watched, suspended while queued or evicted, and "
                "resumed with the admission's node labels and tolerations",
            ),
            PolicyRule(
                ("jobset.x-k8s.io",),
                ("jobsets/finalizers",),
                ("update",),
                "a Workload's owner reference to its JobSet blocks the JobSet's deletion, which "
                "OwnerReferencesPermissionEnforcement allows only with update on its finalizers",
            ),
        ),
        simulate=True,
    )
)

__all__ = ["FRAMEWORK", "NAME", "JobSetIntegration"]
