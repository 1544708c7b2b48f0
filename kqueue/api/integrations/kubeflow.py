"""Kubeflow training-operator v1 jobs (kubeflow.org/v1) -> Workload, as Kueue's kubeflowjob
package builds them (pkg/controller/jobs/kubeflow/kubeflowjob).

PyTorchJob, TFJob, XGBoostJob, PaddleJob and JAXJob share one shape: a map of replica specs
(``spec.<x>ReplicaSpecs``), each ``replicas`` pods (default 1) of a pod template, and a
``spec.runPolicy`` whose ``suspend`` holds the job. Each kind is one :class:`KubeflowKind`
(its replica-spec field and its replica types in Kueue's pod-set order); one Workload per job,
one pod set per replica type it has, named as Kueue names it (the type in lower case).

The priority class is ``runPolicy.schedulingPolicy.priorityClass``, else the first replica
template's ``priorityClassName`` (Kueue's ``PriorityClass``). A PyTorchJob's
``spec.elasticPolicy`` bounds its workers: ``minReplicas`` below the Worker ``replicas`` makes
the worker pod set partially admissible down to ``minReplicas``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    clean_template_metadata,
    job_status_finished,
    owner_workload_name,
    top_level_workload_doc,
)
from kqueue.api.integrations.declaration import Integration, Ranks, Workloads, same_ranks
from kqueue.api.integrations.job import parse_workload
from kqueue.api.v1alpha1 import Workload

# The pod label by which the training-operator gives each replica its rank (the same label as its
# sibling operator's, set by each operator on its own).
REPLICA_INDEX_LABEL: Final = "training.kubeflow.org/replica-index"

GROUP: Final = "kubeflow.org"
API_VERSION: Final = f"{GROUP}/v1"
# Labels the training-operator puts on every pod of a job.
JOB_NAME_LABEL: Final = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL: Final = "training.kubeflow.org/replica-type"
OPERATOR_NAME_LABEL: Final = "training.kubeflow.org/operator-name"


@dataclass(frozen=True)
class KubeflowKind:
    """One training-operator v1 kind: where its replica specs are and their pod-set order."""

    kind: str
    replica_specs_field: str
    replica_types: tuple[str, ...]
    """Kueue's ``OrderedReplicaTypes``; a job's pod sets are the ones it has, in this order."""

    @property
    def plural(self) -> str:
        return self.kind.lower() + "s"

    @property
    def framework(self) -> str:
        return f"{GROUP}/{self.kind.lower()}"


def pod_set_name(replica_type: str) -> str:
    """Kueue's ``NewPodSetReference``: the replica type in lower case."""
    return replica_type.lower()


def replica_specs(kind: KubeflowKind, obj: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(replica type, replica spec)`` of the replica types the job has, in Kueue's order."""
    field = f"spec.{kind.replica_specs_field}"
    specs = (obj.get("spec") or {}).get(kind.replica_specs_field)
    allowed = ", ".join(kind.replica_types)
    if not isinstance(specs, Mapping) or not specs:
        raise IntegrationError(field, f"required: one or more of {allowed}")
    unknown = sorted(set(specs) - set(kind.replica_types))
    if unknown:
        raise IntegrationError(f"{field}.{unknown[0]}", f"unknown replica type (allowed: {allowed})")
    out = []
    for replica_type in kind.replica_types:
        spec = specs.get(replica_type)
        if spec is None:
            continue
        if not isinstance(spec, Mapping):
            raise IntegrationError(f"{field}.{replica_type}", "must be an object")
        out.append((replica_type, spec))
    return out


def replicas(kind: KubeflowKind, spec: Mapping[str, Any], replica_type: str) -> int:
    value = spec.get("replicas", 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise IntegrationError(
            f"spec.{kind.replica_specs_field}.{replica_type}.replicas",
            f"must be a non-negative integer, got {value!r}",
        )
    return value


def elastic_bounds(obj: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """``spec.elasticPolicy`` ``(minReplicas, maxReplicas)`` of a PyTorchJob, checked."""
    policy = (obj.get("spec") or {}).get("elasticPolicy")
    if policy is None:
        return None, None
    if not isinstance(policy, Mapping):
        raise IntegrationError("spec.elasticPolicy", "must be an object")
    bounds: list[int | None] = []
    for key in ("minReplicas", "maxReplicas"):
        value = policy.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise IntegrationError(f"spec.elasticPolicy.{key}", f"must be a positive integer, got {value!r}")
        bounds.append(value)
    low, high = bounds
    if low is not None and high is not None and low > high:
        raise IntegrationError(
            "spec.elasticPolicy.minReplicas",
            f"must not exceed spec.elasticPolicy.maxReplicas ({low} > {high})",
        )
    return low, high


def _priority_specs(obj: Mapping[str, Any], templates: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pod specs whose ``priorityClassName`` names the priority: the run policy's
    scheduling policy first (Kueue reads it before the templates)."""
    policy = ((obj.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}
    name = policy.get("priorityClass") if isinstance(policy, Mapping) else None
    return [{"priorityClassName": name}, *templates] if name else templates


def workload_name(kind: KubeflowKind, obj: Mapping[str, Any]) -> str:
    return owner_workload_name(obj, kind.kind, GROUP)


def workload_for(kind: KubeflowKind, obj: Mapping[str, Any], priorities: PriorityResolver) -> Workload:
    """The Workload kqueue creates for a job of ``kind``; raises :class:`IntegrationError`
    naming the job's field."""
    if obj.get("kind") != kind.kind:
        raise IntegrationError("kind", f"expected a {kind.kind}, got {obj.get('kind')!r}")
    low, high = elastic_bounds(obj) if kind.kind == PYTORCHJOB.kind else (None, None)
    pod_sets: list[dict[str, Any]] = []
    pod_specs: list[Mapping[str, Any]] = []
    paths: list[str] = []
    for replica_type, spec in replica_specs(kind, obj):
        path = f"spec.{kind.replica_specs_field}.{replica_type}"
        template = spec.get("template")
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            raise IntegrationError(f"{path}.template.spec", "required")
        count = replicas(kind, spec, replica_type)
        pod_template = copy.deepcopy(template)
        clean_template_metadata(pod_template)
        pod_set: dict[str, Any] = {"name": pod_set_name(replica_type), "count": count, "template": pod_template}
        if replica_type == "Worker" and (low is not None or high is not None):
            if high is not None and count > high:
                raise IntegrationError(
                    f"{path}.replicas", f"must not exceed spec.elasticPolicy.maxReplicas ({count} > {high})"
                )
            if low is not None and low < count:
                pod_set["minCount"] = low
        pod_sets.append(pod_set)
        pod_specs.append(template["spec"])
        paths.append(f"{path}.template")
    doc = top_level_workload_doc(
        obj,
        api_version=API_VERSION,
        kind=kind.kind,
        name=workload_name(kind, obj),
        pod_sets=pod_sets,
        pod_specs=_priority_specs(obj, pod_specs),
        priorities=priorities,
    )
    return parse_workload(doc, template_paths=paths)


def declare(kind: KubeflowKind) -> Integration:
    """The kind's :class:`Integration` (framework ``kubeflow.org/<kind>``, Kueue's name)."""

    def build(obj: Mapping[str, Any], priorities: PriorityResolver, **_: Any) -> Workload:
        return workload_for(kind, obj, priorities)

    return Integration(
        framework=kind.framework,
        api_version=API_VERSION,
        kind=kind.kind,
        workloads=Workloads.OWN,
        build=build,
        finished=job_status_finished,
        operator="training-operator",
        ranks=same_ranks(Ranks(REPLICA_INDEX_LABEL)),
    )


# The five kinds, each with Kueue's OrderedReplicaTypes.
PYTORCHJOB: Final = KubeflowKind("PyTorchJob", "pytorchReplicaSpecs", ("Master", "Worker"))
TFJOB: Final = KubeflowKind("TFJob", "tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator"))
XGBOOSTJOB: Final = KubeflowKind("XGBoostJob", "xgbReplicaSpecs", ("Master", "Worker"))
PADDLEJOB: Final = KubeflowKind("PaddleJob", "paddleReplicaSpecs", ("Master", "Worker"))
JAXJOB: Final = KubeflowKind("JAXJob", "jaxReplicaSpecs", ("Worker",))
KINDS: Final = (PYTORCHJOB, TFJOB, XGBOOSTJOB, PADDLEJOB, JAXJOB)

PYTORCHJOB_INTEGRATION: Final = declare(PYTORCHJOB)
TFJOB_INTEGRATION: Final = declare(TFJOB)
XGBOOSTJOB_INTEGRATION: Final = declare(XGBOOSTJOB)
PADDLEJOB_INTEGRATION: Final = declare(PADDLEJOB)
JAXJOB_INTEGRATION: Final = declare(JAXJOB)
INTEGRATIONS: Final = (
    PYTORCHJOB_INTEGRATION,
    TFJOB_INTEGRATION,
    XGBOOSTJOB_INTEGRATION,
    PADDLEJOB_INTEGRATION,
    JAXJOB_INTEGRATION,
)
