"""MPIJob (framework ``kubeflow.org/mpijob``): one gang Workload per MPIJob, pod sets
``launcher`` and ``worker``; suspended while queued (``spec.runPolicy.suspend``), stopped and
resumed whole (:mod:`.generic`)."""

from __future__ import annotations

from kqueue.api.integrations.mpijob import INTEGRATION
from kqueue.controller.integrations.framework import (
    Framework,
    queue_label_webhooks,
    suspendable_kind_rbac,
)
from kqueue.controller.integrations.mpijob import webhook
from kqueue.controller.integrations.mpijob.generic import MPIJobIntegration
from kqueue.controller.integrations.mpijob.multikueue import ADAPTER as MULTIKUEUE
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.suspension import suspendable_hooks

NAME = INTEGRATION.framework


FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "one Workload per MPIJob, pod sets `launcher` and `worker`; suspended while "
            "queued (spec.runPolicy.suspend), stopped and resumed whole"
        ),
        suspendable=True,
        job=MPIJobIntegration,
        multikueue=MULTIKUEUE,
        webhooks=queue_label_webhooks(
            short="mpijob",
            rule={"apiGroups": ["kubeflow.org"], "apiVersions": ["v2beta1"], "resources": ["mpijobs"]},
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=suspendable_hooks(webhook.SUSPENDABLE, NAME),
        ),
        rbac=(
            *suspendable_kind_rbac("kubeflow.org", "mpijobs", "MPIJob"),
        ),
    )
)

__all__ = ["FRAMEWORK", "NAME", "MPIJobIntegration"]
