"""Admission webhooks for training-operator v1 jobs (kubeflow.org/v1) that name a queue.

Mutating: suspended while queued (``spec.runPolicy.suspend``), every replica type's pod template
gated (:mod:`kqueue.controller.integrations.suspension`). Validating: the queue and
priority-class labels cannot change while it runs; a PyTorchJob's ``spec.elasticPolicy`` with
``minReplicas`` above ``maxReplicas`` is refused naming the field; annotations a job cannot
honour (elastic WorkloadSlices, Job partial admission) are refused naming the annotation.
"""

from __future__ import annotations

from typing import Any

from kqueue.api.integrations import IntegrationError
from kqueue.api.integrations.kubeflow import PYTORCHJOB, KubeflowKind, elastic_bounds
from kqueue.controller.integrations.runpolicy import SUSPEND_PATH, replicas_active
from kqueue.controller.integrations.suspension import SuspendableKind
from kqueue.controller.webhook_server import FieldError

Obj = dict[str, Any]


def mutate_path(kind: KubeflowKind) -> str:
    return f"/mutate-kubeflow-org-v1-{kind.kind.lower()}"


def validate_path(kind: KubeflowKind) -> str:
    return f"/validate-kubeflow-org-v1-{kind.kind.lower()}"


def _elastic_errors(obj: Obj) -> list[FieldError]:
    try:
        elastic_bounds(obj)
    except IntegrationError as err:
        return [FieldError(err.path, err.detail)]
    return []


def suspendable(kind: KubeflowKind) -> SuspendableKind:
    def pod_templates(obj: Obj) -> list[Obj]:
        specs = obj.setdefault("spec", {}).get(kind.replica_specs_field)
        out: list[Obj] = []
        for spec in (specs or {}).values() if isinstance(specs, dict) else []:
            if isinstance(spec, dict):
                out.append(spec.setdefault("template", {}))
        return out

    return SuspendableKind(
        kind=kind.kind,
        article="an" if kind.kind[0] in "AEIOUX" else "a",
        pod_templates=pod_templates,
        started=replicas_active,
        path=SUSPEND_PATH,
        spec_errors=_elastic_errors if kind is PYTORCHJOB else lambda _obj: [],
    )
