"""batch/v1 Job (framework ``batch/job``): suspended while queued, resumed on admission, its pods
released from the gate; elastic Jobs grow and shrink through WorkloadSlices (:mod:`.elastic`)."""

from __future__ import annotations

from functools import partial

from kqueue.api import feature_gates as fg
from kqueue.api.config import Configuration
from kqueue.api.integrations.job import INTEGRATION, is_elastic
from kqueue.controller.integrations import registry
from kqueue.controller.integrations.framework import (
    Framework,
    IntegrationContext,
    PolicyRule,
    WebhookContext,
    queue_label_webhooks,
)
from kqueue.controller.integrations.job import webhook
from kqueue.controller.integrations.job.elastic import JOB_SIZING, MismatchedWorkload
from kqueue.controller.integrations.job.generic import JobIntegration
from kqueue.controller.integrations.job.multikueue import ADAPTER as MULTIKUEUE
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.slices import ElasticSlices


def _hooks(ctx: WebhookContext) -> webhook.JobWebhooks:
    parents = frozenset(
        (f.api_version, f.kind)
        for f in registry.enabled(ctx.config.integrations.frameworks)
        if f.name != INTEGRATION.framework
    )
    return webhook.JobWebhooks(
        manage_jobs_without_queue_name=ctx.config.manage_jobs_without_queue_name,
        local_queues=ctx.local_queues,
        parent_kinds=parents,
        slices=_slices(ctx.config),
        topology=fg.gate(ctx.config.feature_gates, fg.TOPOLOGY_AWARE_SCHEDULING),
    )


def _slices(config: Configuration) -> bool:
    return fg.gate(config.feature_gates, fg.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)


def _install(ctx: IntegrationContext, reconciler: JobReconciler | None) -> None:
    if not _slices(ctx.config):
        # Kueue with the gate off: no slices; a Job whose size changed under its Workload
        # gets a new one (the only rule then, also for an annotated Job).
        if reconciler is not None:
            reconciler.workload_hooks.append(
                MismatchedWorkload(kube=ctx.kube, events=ctx.events, slices=False).select
            )
        return
    elastic = ElasticSlices(
        engine=ctx.engine,
        workloads=ctx.workloads.store,
        priorities=ctx.priorities,
        kube=ctx.kube,
        events=ctx.events,
        metrics=ctx.metrics,
        now=ctx.now,
        sizing=JOB_SIZING,
    )
    if reconciler is not None:
        reconciler.workload_hooks.append(elastic.select)
        reconciler.workload_hooks.append(
            MismatchedWorkload(kube=ctx.kube, events=ctx.events, slices=True).select
        )
    ctx.after_cycle.append(elastic.after_cycle)


FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "one Workload per Job (pod set `main`); suspended while queued, resumed on "
            "admission; partial admission; elastic Jobs through WorkloadSlices"
        ),
        suspendable=True,
        job=JobIntegration,
        configured_job=lambda config: JobIntegration(slices=_slices(config)),
        install=_install,
        resizable=JOB_SIZING.elastic,
        configured_resizable=lambda config: partial(is_elastic, slices=_slices(config)),
        multikueue=MULTIKUEUE,
        webhooks=queue_label_webhooks(
            short="batch-job",
            rule={"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]},
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=_hooks,
        ),
        rbac=(
            PolicyRule(
                ("batch",),
                ("jobs",),
                ("list", "watch", "patch"),
                "Jobs naming a queue are watched, suspended while queued or evicted, and "
                "resumed with the admission's node labels, tolerations and parallelism",
            ),
            PolicyRule(
                ("batch",),
                ("jobs/finalizers",),
                ("update",),
                "a Workload's owner reference to its Job blocks the Job's deletion "
                "(blockOwnerDeletion), which OwnerReferencesPermissionEnforcement allows only "
                "with update on the owner's finalizers",
            ),
        ),
    )
)

__all__ = ["FRAMEWORK", "JobIntegration"]
