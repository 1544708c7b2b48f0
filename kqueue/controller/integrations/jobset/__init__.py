"""JobSet (framework ``jobset.x-k8s.io/jobset``): one gang Workload per JobSet, one pod set per
replicated Job; suspended while queued, stopped and resumed whole (:mod:`.generic`)."""

from __future__ import annotations

from kqueue.api.integrations.jobset import INTEGRATION
from kqueue.controller.integrations import registry
from kqueue.controller.integrations.framework import (
    Framework,
    WebhookContext,
    queue_label_webhooks,
    suspendable_kind_rbac,
)
from kqueue.controller.integrations.jobset import webhook
from kqueue.controller.integrations.jobset.generic import JobSetIntegration
from kqueue.controller.integrations.registry import register

NAME = INTEGRATION.framework


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


FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "one Workload per JobSet, a pod set per replicated Job (replicas x pods); "
            "suspended while queued, stopped and resumed whole"
        ),
        suspendable=True,
        job=JobSetIntegration,
        webhooks=queue_label_webhooks(
            short="jobset",
            rule={"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["v1alpha2"], "resources": ["jobsets"]},
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=_hooks,
        ),
        rbac=(
            *suspendable_kind_rbac("jobset.x-k8s.io", "jobsets", "JobSet"),
        ),
    )
)

__all__ = ["FRAMEWORK", "NAME", "JobSetIntegration"]
