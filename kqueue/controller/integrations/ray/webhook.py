"""Admission webhooks for RayClusters and RayJobs (ray.io/v1) that name a queue.

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
labels are immutable unless the object stays suspended. A RayCluster a RayJob controls is left
alone: it is queued with its RayJob.
"""

from __future__ import annotations

from typing import Any, Final

from kqueue.api.integrations.ray import (
    K8S_JOB_MODE,
    RAYCLUSTER_KIND,
    RAYJOB_KIND,
    RAYJOB_NAME_LABEL,
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
    name = str((rayjob.get("metadata") or {}).get("name") or "")
    for template in templates:
        template.setdefault("metadata", {}).setdefault("labels", {})[RAYJOB_NAME_LABEL] = name
    return templates


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
