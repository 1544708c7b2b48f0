"""LeaderWorkerSet (framework ``leaderworkerset.x-k8s.io/leaderworkerset``): one gang Workload per
group (a leader and its workers), as Kueue's, so the LeaderWorkerSet is admitted, scaled and
rolled group by group. Its webhook (:mod:`.webhook`) holds every pod with the gate and marks the
templates as the LeaderWorkerSet's; :mod:`.labeller` puts each pod in its group's pod group, which
the pod integration then queues, releases and stops as one gang: the framework needs ``pod``.
"""

from __future__ import annotations

from kqueue.api.integrations.leaderworkerset import INTEGRATION
from kqueue.controller.integrations.framework import (
    Framework,
    IntegrationContext,
    always_queue_label_selector,
    queue_label_webhooks,
)
from kqueue.controller.integrations.leaderworkerset import webhook
from kqueue.controller.integrations.leaderworkerset.labeller import GroupLabeller
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.registry import register

NAME = INTEGRATION.framework


def _install(ctx: IntegrationContext, _reconciler: JobReconciler | None) -> None:
    labeller = GroupLabeller(pods=ctx.pods.store, kube=ctx.kube)
    ctx.pods.add_handler(on_add=labeller.on_pod, on_update=labeller.on_pod)
    ctx.leader_tasks.append(labeller.run)


FRAMEWORK = register(
    Framework(
        declares=INTEGRATION,
        summary=(
            "one gang Workload per group (leader + workers, a pod group `<lws>-<index>`); pods "
            "held by the gate and released group by group; scaling adds or removes groups"
        ),
        suspendable=False,
        install=_install,
        webhooks=queue_label_webhooks(
            short="leaderworkerset",
            rule={
                "apiGroups": ["leaderworkerset.x-k8s.io"],
                "apiVersions": ["v1"],
                "resources": ["leaderworkersets"],
            },
            mutate_path=webhook.MUTATE_PATH,
            validate_path=webhook.VALIDATE_PATH,
            hooks=lambda _ctx: webhook,
            selector=always_queue_label_selector,
        ),
        # Nothing beyond the pod integration's rules and the core pod patch (its pods' group
        # label): the LeaderWorkerSet itself is only seen by the webhooks.
        rbac=(),
    )
)

__all__ = ["FRAMEWORK", "NAME"]
