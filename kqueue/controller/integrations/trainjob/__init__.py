"""Kubeflow Trainer v2 TrainJob (framework ``trainer.kubeflow.org/trainjob``): one gang Workload
per TrainJob with the pod sets its runtime makes; suspended while queued, stopped and resumed
whole; its pods reached through kqueue's ``spec.runtimePatches`` entry (:mod:`.generic`). The
JobSet the Trainer creates for it is never queued on its own."""

from __future__ import annotations

from kqueue.api.integrations.trainjob import TRAINJOB_API_VERSION, TRAINJOB_KIND
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.framework import (
    Framework,
    Handler,
    IntegrationContext,
    PolicyRule,
    Webhook,
    WebhookContext,
)
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.trainjob import webhook
from kqueue.controller.integrations.trainjob.generic import (
    CLUSTER_TRAINING_RUNTIMES,
    TRAINING_RUNTIMES,
    RuntimeStores,
    TrainJobIntegration,
)

NAME = "trainer.kubeflow.org/trainjob"


def _queue_selector(without_queue_name: bool) -> dict[str, object]:
    if without_queue_name:
        return {}
    return {"matchExpressions": [{"key": c.QUEUE_NAME_LABEL, "operator": "Exists"}]}


def _hooks(ctx: WebhookContext) -> webhook.TrainJobWebhooks:
    return webhook.TrainJobWebhooks(
        manage_jobs_without_queue_name=ctx.config.manage_jobs_without_queue_name,
        local_queues=ctx.local_queues,
    )


def _mutate(ctx: WebhookContext) -> Handler:
    return _hooks(ctx).mutate


def _validate(ctx: WebhookContext) -> Handler:
    return _hooks(ctx).validate


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
        name=NAME,
        api_version=TRAINJOB_API_VERSION,
        kind=TRAINJOB_KIND,
        summary=(
            "one Workload per TrainJob, a pod set per replicated Job of the JobSet its runtime "
            "makes; suspended while queued, stopped and resumed whole; its JobSet is not queued"
        ),
        suspendable=True,
        job=TrainJobIntegration,
        install=_install,
        default_enabled=False,
        watches=(CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES),
        webhooks=(
            Webhook(
                name="mtrainjob.kqueue.io",
                path=webhook.MUTATE_PATH,
                type="mutating",
                rules=({**_TRAINJOBS, "operations": ["CREATE", "UPDATE"]},),
                handler=_mutate,
                object_selector=_queue_selector,
                reinvocation_policy="Never",
                order=10,
            ),
            Webhook(
                name="vtrainjob.kqueue.io",
                path=webhook.VALIDATE_PATH,
                type="validating",
                rules=({**_TRAINJOBS, "operations": ["CREATE", "UPDATE"]},),
                handler=_validate,
                object_selector=_queue_selector,
            ),
        ),
        rbac=(
            PolicyRule(
                ("trainer.kubeflow.org",),
                ("trainjobs",),
                ("list", "watch", "patch"),
                "TrainJobs naming a queue are watched, suspended while queued or evicted, and "
                "resumed with the admission's node labels and tolerations in kqueue's "
                "spec.runtimePatches entry",
            ),
            PolicyRule(
                ("trainer.kubeflow.org",),
                ("trainjobs/finalizers",),
                ("update",),
                "a Workload's owner reference to its TrainJob blocks the TrainJob's deletion, "
                "which OwnerReferencesPermissionEnforcement allows only with update on its "
                "finalizers",
            ),
            PolicyRule(
                ("trainer.kubeflow.org",),
                ("clustertrainingruntimes", "trainingruntimes"),
                ("list", "watch"),
                "a TrainJob's pod sets come from the runtime it names",
            ),
        ),
        simulate=True,
    )
)

__all__ = ["FRAMEWORK", "NAME", "TrainJobIntegration"]
