"""StatefulSet (framework ``statefulset``): one gang Workload for all replicas, held by the gate
(a StatefulSet has no suspend switch); resized through WorkloadSlices like an elastic Job. Needs
the ``pod`` framework, as Kueue's (which enables it implicitly): an evicted StatefulSet's pods are
stopped as plain pods are, with the pod integration's permissions.

:mod:`.generic` is the generic reconciler's view of a StatefulSet, :mod:`.scaling` its sizes and
stops, :mod:`.webhook` its admission webhooks.
"""

from __future__ import annotations

from kqueue.api.integrations.statefulset import INTEGRATION
from kqueue.controller.integrations.framework import (
    Framework,
    IntegrationContext,
    PolicyRule,
    always_queue_label_selector,
    queue_label_webhooks,
)
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.slices import ElasticSlices
from kqueue.controller.integrations.statefulset import webhook
from kqueue.controller.integrations.statefulset.generic import StatefulSetIntegration
from kqueue.controller.integrations.statefulset.scaling import SIZING, StatefulSetScaling

NAME = INTEGRATION.framework

def _install(ctx: IntegrationContext, reconciler: JobReconciler | None) -> None:
    slices = ElasticSlices(
        engine=ctx.engine,
        workloads=ctx.workloads.store,
        priorities=ctx.priorities,
        kube=ctx.kube,
        events=ctx.events,
        metrics=ctx.metrics,
        now=ctx.now,
        sizing=SIZING,
    )
    scaling = StatefulSetScaling(
        slices=slices,
        pods=ctx.pods.store,
        kube=ctx.kube,
        events=ctx.events,
        releaser=ctx.releaser,
        now=ctx.now,
    )
    if reconciler is not None:
        reconciler.workload_hooks.append(scaling.select)
    ctx.after_cycle.append(slices.after_cycle)


FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "one gang Workload for all replicas (pod set `main`); pods held by the gate and "
            "released on admission; scaling up or down resizes the Workload through "
            "WorkloadSlices (sticky flavor, running pods untouched); scaled to 0 frees the "
            "quota"
        ),
        suspendable=False,
        job=StatefulSetIntegration,
        install=_install,
        resizable=SIZING.elastic,
        webhooks=queue_label_webhooks(
            short="statefulset",
            rule={"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["statefulsets"]},
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=lambda _ctx: webhook,
            selector=always_queue_label_selector,
        ),
        # Stopping its pods (delete, DisruptionTarget) uses the pod integration's rules: the
        # framework needs ``pod``.
        rbac=(
            PolicyRule(
                ("apps",),
                ("statefulsets",),
                ("list", "watch", "patch"),
                "StatefulSets naming a queue are watched; one created before kqueue's webhooks "
                "gets the admission gate in its pod template",
            ),
            PolicyRule(
                ("apps",),
                ("statefulsets/finalizers",),
                ("update",),
                "a Workload's owner reference to its StatefulSet blocks the StatefulSet's "
                "deletion, which OwnerReferencesPermissionEnforcement allows only with update "
                "on its finalizers",
            ),
        ),
    )
)

__all__ = ["FRAMEWORK", "NAME", "StatefulSetIntegration"]
