"""Kubeflow Trainer v2 TrainJob (framework ``trainer.kubeflow.org/trainjob``): one gang Workload
per TrainJob with the pod sets its runtime makes; suspended while queued, stopped and resumed
whole; its pods reached through kqueue's ``spec.runtimePatches`` entry (:mod:`.generic`). The
JobSet the Trainer creates for it is never queued on its own."""

from __future__ import annotations

from kqueue.api.integrations.trainjob import INTEGRATION
from kqueue.controller.integrations.framework import (
    Framework,
    IntegrationContext,
    PolicyRule,
    queue_label_webhooks,
    suspendable_kind_rbac,
)
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.suspension import suspendable_hooks
from kqueue.controller.integrations.trainjob import webhook
from kqueue.controller.integrations.trainjob.generic import (
    CLUSTER_TRAINING_RUNTIMES,
    TRAINING_RUNTIMES,
    RuntimeStores,
    TrainJobIntegration,
)
from kqueue.controller.integrations.trainjob.multikueue import ADAPTER as MULTIKUEUE

NAME = INTEGRATION.framework


def _install(ctx: IntegrationContext, reconciler: JobReconciler | None) -> None:
    # The Workload is built from the TrainJob's runtime: read it from the watched stores.
    if reconciler is not None and isinstance(reconciler.job, TrainJobIntegration):
        reconciler.job.runtimes = RuntimeStores(
            ctx.watched[CLUSTER_TRAINING_RUNTIMES], ctx.watched[TRAINING_RUNTIMES]
        )


_TRAINJOBS = {
    "apiGroups": ["trainer.kubeflow.org"],
    "apiVersions": ["v1alpha1"],
    "resources": ["trainjobs"],
}

FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "one Workload per TrainJob, a pod set per replicated Job of the JobSet its runtime "
            "makes; suspended while queued, stopped and resumed whole; its JobSet is not queued"
        ),
        suspendable=True,
        job=TrainJobIntegration,
        multikueue=MULTIKUEUE,
        install=_install,
        watches=(CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES),
        webhooks=queue_label_webhooks(
            short="trainjob",
            rule={"apiGroups": ["trainer.kubeflow.org"], "apiVersions": ["v1alpha1"], "resources": ["trainjobs"]},
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=suspendable_hooks(webhook.SUSPENDABLE, NAME),
        ),
        rbac=(
            *suspendable_kind_rbac("trainer.kubeflow.org", "trainjobs", "TrainJob", " in kqueue's spec.runtimePatches entry"),
            PolicyRule(
                ("trainer.kubeflow.org",),
                ("clustertrainingruntimes", "trainingruntimes"),
                ("list", "watch"),
                "a TrainJob's pod sets come from the runtime it names",
            ),
        ),
    )
)

__all__ = ["FRAMEWORK", "NAME", "TrainJobIntegration"]
