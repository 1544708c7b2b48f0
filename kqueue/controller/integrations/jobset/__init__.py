"""JobSet (framework ``jobset.x-k8s.io/jobset``): one gang Workload per JobSet, one pod set per
replicated Job; suspended while queued, stopped and resumed whole (:mod:`.generic`)."""

from __future__ import annotations

from kqueue.api.integrations.jobset import INTEGRATION
from kqueue.controller.integrations.framework import (
    Framework,
    queue_label_webhooks,
    suspendable_kind_rbac,
)
from kqueue.controller.integrations.jobset import webhook
from kqueue.controller.integrations.jobset.generic import JobSetIntegration
from kqueue.controller.integrations.jobset.multikueue import ADAPTER as MULTIKUEUE
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.suspension import suspendable_hooks

NAME = INTEGRATION.framework


FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "one Workload per JobSet, a pod set per replicated Job (replicas x pods); "
            "suspended while queued, stopped and resumed whole"
        ),
        suspendable=True,
        job=JobSetIntegration,
        multikueue=MULTIKUEUE,
        webhooks=queue_label_webhooks(
            short="jobset",
            rule={"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["v1alpha2"], "resources": ["jobsets"]},
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=suspendable_hooks(webhook.SUSPENDABLE, NAME),
        ),
        rbac=(
            *suspendable_kind_rbac("jobset.x-k8s.io", "jobsets", "JobSet"),
        ),
    )
)

__all__ = ["FRAMEWORK", "NAME", "JobSetIntegration"]
