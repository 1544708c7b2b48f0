"""Admission webhooks for RayClusters, RayJobs and RayServices (ray.io/v1) that name a queue.

Mutating: suspended while queued, every pod template gated
(:mod:`kqueue.controller.integrations.suspension`). A RayJob's pod templates also get the
``kqueue.io/rayjob-name`` label (how its pods find it), and a ``K8sJobMode`` RayJob without
``spec.submitterPodTemplate`` gets the template KubeRay would use, so its submitter pod is held
and charged like the others (Kueue fills it in on admission instead).

Validating, as Kueue's raycluster and rayjob webhooks: no in-tree autoscaling, at most 8 pod
sets, no worker group named ``head``; a RayJob needs ``spec.rayClusterSpec`` (one with
``spec.clusterSelector`` runs on an existing cluster and is not queued, and may not have both)
and ``spec.shutdownAfterJobFinishes: true`` (otherwise its cluster would keep the quota after
the job ends); annotations a Ray object cannot honour are refused; the queue and priority-class
labels are immutable unless the object stays suspended. A RayCluster a RayJob or a RayService
controls is left alone: it is queued with its parent.

A RayService is held through ``spec.rayClusterConfig.suspend`` (Kueue's rayservice), its pod
templates gated and labelled ``kqueue.io/rayservice-name`` (how its pods find it), and validated
as Kueue's: its ``spec.rayClusterConfig`` as a queued RayCluster's spec.
"""

from __future__ import annotations

from typing import Any, Final

from kqueue.api.integrations.ray import (
    K8S_JOB_MODE,
    RAYCLUSTER_KIND,
    RAYJOB_KIND,
    RAYJOB_NAME_LABEL,
    RAYSERVICE_CLUSTER_FIELD,
    RAYSERVICE_KIND,
    RAYSERVICE_NAME_LABEL,
    cluster_spec_errors,
    default_submitter_template,
    submission_mode,
    uses_existing_cluster,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.suspension import SuspendableKind
from kqueue.controller.webhook_server import FieldError

Obj = dict[str, Any]

RAYCLUSTER_MUTATE_PATH: Final = "/mutate-ray-io-v1-raycluster"
RAYCLUSTER_VALIDATE_PATH: Final = "/validate-ray-io-v1-raycluster"
RAYJOB_MUTATE_PATH: Final = "/mutate-ray-io-v1-rayjob"
RAYJOB_VALIDATE_PATH: Final = "/validate-ray-io-v1-rayjob"
RAYSERVICE_MUTATE_PATH: Final = "/mutate-ray-io-v1-rayservice"
RAYSERVICE_VALIDATE_PATH: Final = "/validate-ray-io-v1-rayservice"
RAYSERVICE_SUSPEND_PATH: Final = ("spec", RAYSERVICE_CLUSTER_FIELD, "suspend")

UNSUPPORTED_ANNOTATIONS: Final = {
    c.ELASTIC_JOB_ANNOTATION: "a Ray object cannot be elastic in kqueue (WorkloadSlices are "
    "for batch Jobs and StatefulSets)",
    c.JOB_MIN_PARALLELISM_ANNOTATION: "partial admission is not supported for Ray objects",
}


def cluster_templates_of(cluster_spec: Obj) -> list[Obj]:
    """The pod templates of a RayClusterSpec (in place: missing ones are created empty)."""
    out = [cluster_spec.setdefault("headGroupSpec", {}).setdefault("template", {})]
    groups = cluster_spec.get("workerGroupSpecs")
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict):
            out.append(group.setdefault("template", {}))
    return out


def raycluster_templates(cluster: Obj) -> list[Obj]:
    return cluster_templates_of(cluster.setdefault("spec", {}))


def rayjob_templates(rayjob: Obj) -> list[Obj]:
    """A RayJob's pod templates, with the submitter's filled in (K8sJobMode) and every one
    labelled with the RayJob's name (in place)."""
    spec = rayjob.setdefault("spec", {})
    cluster = spec.get("rayClusterSpec")
    templates = cluster_templates_of(cluster) if isinstance(cluster, dict) else []
    if submission_mode(rayjob) == K8S_JOB_MODE:
        if not isinstance(spec.get("submitterPodTemplate"), dict):
            spec["submitterPodTemplate"] = default_submitter_template(rayjob)
        submitter = spec["submitterPodTemplate"]
        # KubeRay creates the submitter only once the cluster runs: in the cluster's gang it
        # would be waited for by the pods it waits for.
        submitter.setdefault("metadata", {}).setdefault("annotations", {}).setdefault(
            c.GANG_SCHEDULING_ANNOTATION, "false"
        )
        templates.append(submitter)
    return _named(rayjob, RAYJOB_NAME_LABEL, templates)


def _named(obj: Obj, label: str, templates: list[Obj]) -> list[Obj]:
    """``templates``, each labelled ``label: <the object's name>`` (in place)."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    for template in templates:
        template.setdefault("metadata", {}).setdefault("labels", {})[label] = name
    return templates


def rayservice_templates(service: Obj) -> list[Obj]:
    """A RayService's pod templates (its ``spec.rayClusterConfig``'s), each labelled with the
    RayService's name (in place)."""
    cluster = service.setdefault("spec", {}).get(RAYSERVICE_CLUSTER_FIELD)
    templates = cluster_templates_of(cluster) if isinstance(cluster, dict) else []
    return _named(service, RAYSERVICE_NAME_LABEL, templates)


def _service_started(old: Obj) -> bool:
    conditions = (old.get("status") or {}).get("conditions") or []
    return any(k.get("type") == "Ready" and k.get("status") == "True" for k in conditions)


def rayservice_errors(service: Obj) -> list[FieldError]:
    path = f"spec.{RAYSERVICE_CLUSTER_FIELD}"
    cluster = (service.get("spec") or {}).get(RAYSERVICE_CLUSTER_FIELD)
    if not isinstance(cluster, dict):
        return [FieldError(path, "required for a RayService kqueue queues (its pod sets come from it)")]
    return _errors(cluster_spec_errors(cluster, path))


def _cluster_started(old: Obj) -> bool:
    state = (old.get("status") or {}).get("state")
    return bool(state) and state != "suspended"


def _job_started(old: Obj) -> bool:
    return ((old.get("status") or {}).get("jobDeploymentStatus") or "") not in ("", "Suspended")


def _errors(pairs: list[tuple[str, str]]) -> list[FieldError]:
    return [FieldError(path, message) for path, message in pairs]


def rayjob_errors(rayjob: Obj) -> list[FieldError]:
    spec = rayjob.get("spec") or {}
    has_cluster = isinstance(spec.get("rayClusterSpec"), dict)
    if spec.get("clusterSelector") and has_cluster:
        return [
            FieldError(
                "spec.clusterSelector",
                "a RayJob kqueue queues cannot also use an existing cluster: remove "
                "spec.clusterSelector (or spec.rayClusterSpec to run on the existing cluster "
                "without queueing)",
            )
        ]
    if not has_cluster:
        return [
            FieldError(
                "spec.rayClusterSpec",
                "required for a RayJob kqueue queues (its pod sets come from it)",
            )
        ]
    errors: list[FieldError] = []
    if spec.get("shutdownAfterJobFinishes") is not True:
        errors.append(
            FieldError(
                "spec.shutdownAfterJobFinishes",
                "must be true for a RayJob kqueue queues: otherwise its RayCluster keeps the "
                "queue's quota after the job ends",
            )
        )
    errors += _errors(cluster_spec_errors(spec["rayClusterSpec"], "spec.rayClusterSpec"))
    return errors


def _raycluster_errors(obj: Obj) -> list[FieldError]:
    spec = obj.get("spec")
    return _errors(cluster_spec_errors(spec, "spec")) if isinstance(spec, dict) else []


def _on_existing_cluster(obj: Obj) -> bool:
    # On an existing cluster: it needs no quota of its own (Kueue's Skip), unless it also has a
    # rayClusterSpec, which the validation refuses.
    spec = obj.get("spec") or {}
    return uses_existing_cluster(obj) and not isinstance(spec.get("rayClusterSpec"), dict)


RAYCLUSTER: Final = SuspendableKind(
    kind=RAYCLUSTER_KIND,
    pod_templates=raycluster_templates,
    started=_cluster_started,
    spec_errors=_raycluster_errors,
    unsupported=UNSUPPORTED_ANNOTATIONS,
)
RAYJOB: Final = SuspendableKind(
    kind=RAYJOB_KIND,
    pod_templates=rayjob_templates,
    started=_job_started,
    spec_errors=rayjob_errors,
    skip=_on_existing_cluster,
    unsupported=UNSUPPORTED_ANNOTATIONS,
)
RAYSERVICE: Final = SuspendableKind(
    kind=RAYSERVICE_KIND,
    pod_templates=rayservice_templates,
    started=_service_started,
    path=RAYSERVICE_SUSPEND_PATH,
    spec_errors=rayservice_errors,
    unsupported=UNSUPPORTED_ANNOTATIONS,
)
