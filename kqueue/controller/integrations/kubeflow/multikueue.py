"""The training-operator v1 kinds' MultiKueue adapter (Kueue's kubeflowjob_multikueue_adapter.go,
one per kind): the whole spec without ``spec.runPolicy.managedBy``, the status copied back. The
training-operator's webhooks accept only ``kubeflow.org/training-operator`` or
``kueue.x-k8s.io/multikueue`` there (and leave the latter alone), so a manager-side job carries
``kueue.x-k8s.io/multikueue``."""

from __future__ import annotations

from kqueue.api.integrations import kubeflow as api
from kqueue.controller.admission_checks.multikueue.adapters import (
    KUEUE_MULTIKUEUE,
    RUN_POLICY_MANAGED_BY,
    RUN_POLICY_SUSPEND,
    CopyAdapter,
)
from kqueue.controller.resources import Resource


def adapter(kind: api.KubeflowKind) -> CopyAdapter:
    return CopyAdapter(
        api.API_VERSION, kind.kind, Resource(api.GROUP, "v1", kind.plural),
        "kubeflow.org/training-operator",
        managed_by=KUEUE_MULTIKUEUE,
        managed_by_path=RUN_POLICY_MANAGED_BY,
        suspend_path=RUN_POLICY_SUSPEND,
    )
