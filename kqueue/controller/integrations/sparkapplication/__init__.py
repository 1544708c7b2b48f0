"""SparkApplication (framework ``sparkoperator.k8s.io/sparkapplication``, alpha in Kueue): one
gang Workload per SparkApplication, pod sets ``driver`` and ``executor``; suspended while
queued (``spec.suspend``), stopped and resumed whole (:mod:`.generic`)."""

from __future__ import annotations

from kqueue.api.integrations.sparkapplication import GROUP, INTEGRATION, PLURAL
from kqueue.controller.integrations.framework import (
    Framework,
    queue_label_webhooks,
    suspendable_kind_rbac,
)
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.sparkapplication import webhook
from kqueue.controller.integrations.sparkapplication.generic import SparkApplicationIntegration
from kqueue.controller.integrations.suspension import suspendable_hooks

NAME = INTEGRATION.framework

FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "one Workload per SparkApplication, pod sets `driver` (1) and `executor` "
            "(spec.executor.instances); suspended while queued, stopped and resumed whole"
        ),
        suspendable=True,
        job=SparkApplicationIntegration,
        webhooks=queue_label_webhooks(
            short="sparkapplication",
            rule={"apiGroups": [GROUP], "apiVersions": ["v1beta2"], "resources": [PLURAL]},
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=suspendable_hooks(webhook.SUSPENDABLE, NAME),
        ),
        rbac=suspendable_kind_rbac(GROUP, PLURAL, "SparkApplication", " (in its driver and executor)"),
    )
)

__all__ = ["FRAMEWORK", "NAME", "SparkApplicationIntegration"]
