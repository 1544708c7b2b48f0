"""Kubeflow training-operator v1 jobs (frameworks ``kubeflow.org/pytorchjob``, ``tfjob``,
``xgboostjob``, ``paddlejob``, ``jaxjob``): one gang Workload per job, one pod set per replica
type in Kueue's order; suspended while queued (``spec.runPolicy.suspend``), stopped and resumed
whole. One package for the five, as Kueue's kubeflowjob: they differ only in their replica-spec
field and replica types (:class:`kqueue.api.integrations.kubeflow.KubeflowKind`).
"""

from __future__ import annotations

from kqueue.api.integrations import kubeflow as api
from kqueue.api.integrations.declaration import Integration
from kqueue.controller.integrations.framework import (
    Framework,
    queue_label_webhooks,
    suspendable_kind_rbac,
)
from kqueue.controller.integrations.kubeflow import webhook
from kqueue.controller.integrations.kubeflow.generic import KubeflowJobIntegration
from kqueue.controller.integrations.kubeflow.multikueue import adapter
from kqueue.controller.integrations.registry import register
from kqueue.controller.integrations.suspension import suspendable_hooks


def _register(kind: api.KubeflowKind, declares: Integration) -> Framework:
    types = "`, `".join(api.pod_set_name(rt) for rt in kind.replica_types)
    summary = (
        f"one Workload per {kind.kind}, pod sets `{types}` (those it has); suspended while "
        "queued (spec.runPolicy.suspend), stopped and resumed whole"
    )
    if kind is api.PYTORCHJOB:
        summary += "; spec.elasticPolicy.minReplicas is the workers' partial admission"
    return register(
        Framework(
            declares=declares,
            summary=summary,
            suspendable=True,
            job=lambda: KubeflowJobIntegration(kind),
            webhooks=queue_label_webhooks(
                short=kind.kind.lower(),
                rule={"apiGroups": [api.GROUP], "apiVersions": ["v1"], "resources": [kind.plural]},
                mutate_path=webhook.mutate_path(kind),
                validate_path=webhook.validate_path(kind),
                hooks=suspendable_hooks(webhook.suspendable(kind), declares.framework),
            ),
            rbac=suspendable_kind_rbac(api.GROUP, kind.plural, kind.kind),
            multikueue=adapter(kind),
        )
    )


PYTORCHJOB = _register(api.PYTORCHJOB, api.PYTORCHJOB_INTEGRATION)
TFJOB = _register(api.TFJOB, api.TFJOB_INTEGRATION)
XGBOOSTJOB = _register(api.XGBOOSTJOB, api.XGBOOSTJOB_INTEGRATION)
PADDLEJOB = _register(api.PADDLEJOB, api.PADDLEJOB_INTEGRATION)
JAXJOB = _register(api.JAXJOB, api.JAXJOB_INTEGRATION)

__all__ = ["JAXJOB", "PADDLEJOB", "PYTORCHJOB", "TFJOB", "XGBOOSTJOB", "KubeflowJobIntegration"]
