"""MPIJob (kubeflow.org/v2beta1) -> Workload, as Kueue's MPIJob integration builds it.

One Workload per MPIJob with the pod sets ``launcher`` then ``worker`` (Kueue's order), each of
``replicas`` pods (default 1) with the replica spec's pod template.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    clean_template_metadata,
    job_status_finished,
    owner_workload_name,
    top_level_workload_doc,
)
from kqueue.api.integrations.declaration import Integration, Ranks, Workloads
from kqueue.api.integrations.job import parse_workload
from kqueue.api.v1alpha1 import Workload

# The pod label by which the MPI operator gives each replica its rank (the same label as its
# sibling operator's, set by each operator on its own).
REPLICA_INDEX_LABEL: Final = "training.kubeflow.org/replica-index"

MPIJOB_GROUP: Final = "kubeflow.org"
MPIJOB_API_VERSION: Final = f"{MPIJOB_GROUP}/v2beta1"
MPIJOB_KIND: Final = "MPIJob"
# Labels the MPI operator puts on the launcher's and the workers' pods.
JOB_NAME_LABEL: Final = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL: Final = "training.kubeflow.org/job-role"
# A pod's index within its replica type: its rank (Kueue's podIndexLabel for the Kubeflow kinds
# and MPIJob; the training operators and mpi-operator set it).
# Replica types in Kueue's pod-set order, and the pod set each becomes.
REPLICA_TYPES: Final = (("Launcher", "launcher"), ("Worker", "worker"))


def replica_specs(mpijob: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """``(replica type, pod set name, replica spec)`` of the replica types the MPIJob has."""
    specs = (mpijob.get("spec") or {}).get("mpiReplicaSpecs")
    if not isinstance(specs, Mapping) or not specs:
        raise IntegrationError("spec.mpiReplicaSpecs", "required: Launcher and Worker")
    out = []
    for replica_type, pod_set in REPLICA_TYPES:
        spec = specs.get(replica_type)
        if spec is None:
            continue
        if not isinstance(spec, Mapping):
            raise IntegrationError(f"spec.mpiReplicaSpecs.{replica_type}", "must be an object")
        out.append((replica_type, pod_set, spec))
    if not out:
        raise IntegrationError("spec.mpiReplicaSpecs", "required: Launcher and Worker")
    return out


def _replicas(spec: Mapping[str, Any], replica_type: str) -> int:
    value = spec.get("replicas", 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise IntegrationError(
            f"spec.mpiReplicaSpecs.{replica_type}.replicas",
            f"must be a non-negative integer, got {value!r}",
        )
    return value


def workload_name_for_mpijob(mpijob: Mapping[str, Any]) -> str:
    return owner_workload_name(mpijob, MPIJOB_KIND, MPIJOB_GROUP)


def workload_for_mpijob(mpijob: Mapping[str, Any], priorities: PriorityResolver) -> Workload:
    """The Workload kqueue creates for ``mpijob``; raises :class:`IntegrationError` naming the
    MPIJob's field."""
    if mpijob.get("kind") != MPIJOB_KIND:
        raise IntegrationError("kind", f"expected an MPIJob, got {mpijob.get('kind')!r}")
    pod_sets: list[dict[str, Any]] = []
    pod_specs: list[Mapping[str, Any]] = []
    paths: list[str] = []
    for replica_type, name, spec in replica_specs(mpijob):
        template = spec.get("template")
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            raise IntegrationError(f"spec.mpiReplicaSpecs.{replica_type}.template.spec", "required")
        pod_template = copy.deepcopy(template)
        clean_template_metadata(pod_template)
        pod_sets.append({"name": name, "count": _replicas(spec, replica_type), "template": pod_template})
        pod_specs.append(template["spec"])
        paths.append(f"spec.mpiReplicaSpecs.{replica_type}.template")
    doc = top_level_workload_doc(
        mpijob,
        api_version=MPIJOB_API_VERSION,
        kind=MPIJOB_KIND,
        name=workload_name_for_mpijob(mpijob),
        pod_sets=pod_sets,
        pod_specs=pod_specs,
        priorities=priorities,
    )
    return parse_workload(doc, template_paths=paths)


def ranks(mpijob: Mapping[str, Any], wl: Workload) -> dict[str, Ranks]:
    """Ranks from the replica index; with ``runLauncherAsWorker`` the launcher is rank 0 of
    the hostfile and the workers' indexes start after it (Kueue's MPIJob webhook gives them
    the pod-index offset 1)."""
    offset = 1 if (mpijob.get("spec") or {}).get("runLauncherAsWorker") is True else 0
    return {
        ps.name: Ranks(REPLICA_INDEX_LABEL, offset=offset if ps.name == "worker" else 0)
        for ps in wl.spec.pod_sets
    }


INTEGRATION: Final = Integration(
    framework="kubeflow.org/mpijob",
    api_version=MPIJOB_API_VERSION,
    kind=MPIJOB_KIND,
    workloads=Workloads.OWN,
    build=workload_for_mpijob,
    finished=job_status_finished,
    operator="mpi-operator",
    ranks=ranks,
)
