"""AppWrapper (framework ``workload.codeflare.dev/appwrapper``): one gang Workload per
AppWrapper, one pod set per entry of its components' podSets; suspended while queued
(``spec.suspend``), stopped and resumed whole. The objects it wraps (Jobs, PyTorchJobs,
Deployments, LeaderWorkerSets...) are controlled by it, so no other integration queues them
again (:func:`kqueue.controller.integrations.owners.controlled_by`)."""

from __future__ import annotations

from kqueue.api.integrations.appwrapper import GROUP, INTEGRATION, PLURAL
from kqueue.controller.integrations.appwrapper import webhook
from kqueue.controller.integrations.appwrapper.generic import AppWrapperIntegration
from kqueue.controller.integrations.appwrapper.multikueue import ADAPTER as MULTIKUEUE
from kqueue.controller.integrations.framework import (
    Framework,
    queue_label_webhooks,
    suspendable_kind_rbac,
)
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.suspension import suspendable_hooks

NAME = INTEGRATION.framework

FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "one Workload per AppWrapper, a pod set per entry of its components' podSets "
            "(`<name>-<index>`); suspended while queued, resumed with podSetInfos, stopped and "
            "resumed whole; the objects it wraps are not queued again"
        ),
        suspendable=True,
        job=AppWrapperIntegration,
        multikueue=MULTIKUEUE,
        webhooks=queue_label_webhooks(
            short="appwrapper",
            rule={"apiGroups": [GROUP], "apiVersions": ["v1beta2"], "resources": [PLURAL]},
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=suspendable_hooks(webhook.SUSPENDABLE, NAME),
        ),
        rbac=suspendable_kind_rbac(GROUP, PLURAL, "AppWrapper", " (in its components' podSetInfos)"),
    )
)

__all__ = ["FRAMEWORK", "NAME", "AppWrapperIntegration"]
