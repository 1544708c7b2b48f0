"""RayCluster, RayJob and RayService (ray.io/v1) -> Workload, as Kueue's raycluster, rayjob and
rayservice integrations build them.

A RayCluster is one Workload with the pod set ``head`` (1 pod, the head group's template) and one
pod set per worker group, named after the group, of ``replicas`` pods (default 1; times
``numOfHosts`` when that is above 1). A RayJob's Workload has its ``rayClusterSpec``'s pod sets
and, in ``K8sJobMode`` (KubeRay's default), the pod set ``submitter`` of the one pod that submits
the job; in ``SidecarMode`` the submitter is a container KubeRay adds to the head pod, so the head
pod set is charged for it. The submitter's template is ``spec.submitterPodTemplate``, or the one
KubeRay would use (its default container: the head's image, 500m CPU and 200Mi requests).

A RayService's Workload has the pod sets of its ``spec.rayClusterConfig`` (Kueue's rayservice:
``raycluster.BuildPodSets`` of that spec), and it never finishes: a serving kind, its quota is
freed when it is deleted.

Kueue refuses in-tree autoscaling on a queued RayCluster or RayJob unless it is an elastic job
(WorkloadSlices); kqueue has no elastic Ray, so it refuses autoscaling (:func:`cluster_spec_errors`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    clean_template_metadata,
    owner_workload_name,
    top_level_workload_doc,
)
from kqueue.api.integrations.declaration import Integration, KueueKeys, Workloads
from kqueue.api.integrations.job import parse_workload
from kqueue.api.v1alpha1 import Workload

RAY_GROUP: Final = "ray.io"
RAY_API_VERSION: Final = f"{RAY_GROUP}/v1"
RAYCLUSTER_KIND: Final = "RayCluster"
RAYJOB_KIND: Final = "RayJob"
RAYSERVICE_KIND: Final = "RayService"
# Where a RayService keeps its RayClusterSpec (KubeRay copies it into each RayCluster it makes).
RAYSERVICE_CLUSTER_FIELD: Final = "rayClusterConfig"

# Labels KubeRay puts on the pods of a RayCluster.
RAY_CLUSTER_LABEL: Final = "ray.io/cluster"
RAY_NODE_TYPE_LABEL: Final = "ray.io/node-type"
RAY_GROUP_LABEL: Final = "ray.io/group"
# KubeRay labels a RayJob's pods with the generated RayCluster's name only, so kqueue's webhook
# puts the RayJob's name in each of its pod templates: how a pod finds its RayJob.
RAYJOB_NAME_LABEL: Final = "kqueue.io/rayjob-name"
# Likewise for a RayService: KubeRay names its RayClusters after it with a random suffix.
RAYSERVICE_NAME_LABEL: Final = "kqueue.io/rayservice-name"

HEAD_POD_SET: Final = "head"
SUBMITTER_POD_SET: Final = "submitter"
K8S_JOB_MODE: Final = "K8sJobMode"
SIDECAR_MODE: Final = "SidecarMode"
SUBMITTER_CONTAINER: Final = "ray-job-submitter"
# A Workload holds at most 8 pod sets (Kueue's MaxPodSets).
MAX_POD_SETS: Final = 8

# KubeRay's default submitter container resources (ray-operator/controllers/ray/common/job.go).
SUBMITTER_RESOURCES: Final = {
    "requests": {"cpu": "500m", "memory": "200Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}


def _int(value: Any, path: str, default: int) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise IntegrationError(path, f"must be a non-negative integer, got {value!r}")
    return value


def worker_groups(spec: Mapping[str, Any], path: str) -> list[Mapping[str, Any]]:
    groups = spec.get("workerGroupSpecs") or []
    if not isinstance(groups, list):
        raise IntegrationError(f"{path}.workerGroupSpecs", "must be a list")
    for i, group in enumerate(groups):
        if not isinstance(group, Mapping) or not group.get("groupName"):
            raise IntegrationError(f"{path}.workerGroupSpecs[{i}].groupName", "required")
    return list(groups)


def worker_count(group: Mapping[str, Any], path: str) -> int:
    """Kueue's ``effectiveWorkerCount``: replicas (default 1) times numOfHosts when above 1."""
    replicas = _int(group.get("replicas"), f"{path}.replicas", 1)
    hosts = _int(group.get("numOfHosts"), f"{path}.numOfHosts", 1)
    return replicas * hosts if hosts > 1 else replicas


def _template(group: Mapping[str, Any], path: str) -> dict[str, Any]:
    template = group.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise IntegrationError(f"{path}.template.spec", "required")
    out = copy.deepcopy(template)
    clean_template_metadata(out)
    return out


def cluster_pod_sets(spec: Mapping[str, Any], path: str) -> list[tuple[dict[str, Any], str]]:
    """``(pod set, template path)`` of a RayClusterSpec at ``path``: head, then each worker
    group in order."""
    head = spec.get("headGroupSpec")
    if not isinstance(head, Mapping):
        raise IntegrationError(f"{path}.headGroupSpec", "required")
    out = [
        (
            {"name": HEAD_POD_SET, "count": 1, "template": _template(head, f"{path}.headGroupSpec")},
            f"{path}.headGroupSpec.template",
        )
    ]
    for i, group in enumerate(worker_groups(spec, path)):
        gpath = f"{path}.workerGroupSpecs[{i}]"
        out.append(
            (
                {
                    "name": str(group["groupName"]),
                    "count": worker_count(group, gpath),
                    "template": _template(group, gpath),
                },
                f"{gpath}.template",
            )
        )
    return out


def cluster_spec_errors(spec: Mapping[str, Any], path: str) -> list[tuple[str, str]]:
    """``(field, message)`` of what a queued RayClusterSpec cannot have (Kueue's
    ``ValidateCreate``): autoscaling, more pod sets than a Workload holds, a worker group
    named ``head``."""
    errors: list[tuple[str, str]] = []
    if spec.get("enableInTreeAutoscaling") is True:
        errors.append(
            (
                f"{path}.enableInTreeAutoscaling",
                "a RayCluster kqueue queues cannot autoscale: its quota is reserved for the "
                "replicas it was admitted with; set it to false (or remove the queue label)",
            )
        )
    groups = spec.get("workerGroupSpecs") or []
    groups = groups if isinstance(groups, list) else []
    if len(groups) + 1 > MAX_POD_SETS:
        errors.append(
            (
                f"{path}.workerGroupSpecs",
                f"too many worker groups: {len(groups)} (a Workload holds at most "
                f"{MAX_POD_SETS} pod sets: the head and {MAX_POD_SETS - 1} worker groups)",
            )
        )
    for i, group in enumerate(groups):
        if isinstance(group, Mapping) and group.get("groupName") == HEAD_POD_SET:
            errors.append(
                (
                    f"{path}.workerGroupSpecs[{i}].groupName",
                    f"{HEAD_POD_SET!r} is reserved for the head group; rename the worker group",
                )
            )
    return errors


# -- RayCluster -----------------------------------------------------------------------------------


def _workload(
    obj: Mapping[str, Any],
    kind: str,
    sets: list[tuple[dict[str, Any], str]],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str],
) -> Workload:
    """The Workload of a RayCluster or RayJob from its pod sets (each with its template's path)."""
    doc = top_level_workload_doc(
        obj,
        api_version=RAY_API_VERSION,
        kind=kind,
        name=owner_workload_name(obj, kind, RAY_GROUP),
        pod_sets=[s for s, _ in sets],
        pod_specs=[s["template"]["spec"] for s, _ in sets],
        priorities=priorities,
        label_keys_to_copy=label_keys_to_copy,
    )
    return parse_workload(doc, template_paths=[p for _, p in sets])


def workload_name_for_raycluster(cluster: Mapping[str, Any]) -> str:
    return owner_workload_name(cluster, RAYCLUSTER_KIND, RAY_GROUP)


def workload_for_raycluster(
    cluster: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
) -> Workload:
    """The Workload kqueue creates for ``cluster``; raises :class:`IntegrationError` naming the
    RayCluster's field."""
    if cluster.get("kind") != RAYCLUSTER_KIND:
        raise IntegrationError("kind", f"expected a RayCluster, got {cluster.get('kind')!r}")
    spec = cluster.get("spec")
    if not isinstance(spec, Mapping):
        raise IntegrationError("spec", "required")
    return _workload(
        cluster,
        RAYCLUSTER_KIND,
        cluster_pod_sets(spec, "spec"),
        priorities,
        label_keys_to_copy=label_keys_to_copy,
    )


# -- RayJob ---------------------------------------------------------------------------------------


def submission_mode(rayjob: Mapping[str, Any]) -> str:
    """``spec.submissionMode``; K8sJobMode when unset, as the CRD defaults it."""
    return str((rayjob.get("spec") or {}).get("submissionMode") or K8S_JOB_MODE)


def default_submitter_template(rayjob: Mapping[str, Any]) -> dict[str, Any]:
    """The submitter pod template KubeRay uses when ``spec.submitterPodTemplate`` is unset: its
    default container with the head's image (KubeRay adds the command and environment)."""
    cluster = (rayjob.get("spec") or {}).get("rayClusterSpec") or {}
    head = ((cluster.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    containers = head.get("containers") or [{}]
    image = containers[0].get("image") if isinstance(containers[0], Mapping) else None
    container: dict[str, Any] = {"name": SUBMITTER_CONTAINER, "resources": copy.deepcopy(SUBMITTER_RESOURCES)}
    if image:
        container["image"] = image
    return {"spec": {"containers": [container], "restartPolicy": "Never"}}


def submitter_template(rayjob: Mapping[str, Any]) -> dict[str, Any]:
    template = (rayjob.get("spec") or {}).get("submitterPodTemplate")
    if template is None:
        return default_submitter_template(rayjob)
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise IntegrationError("spec.submitterPodTemplate.spec", "required")
    out = copy.deepcopy(template)
    clean_template_metadata(out)
    return out


def uses_existing_cluster(rayjob: Mapping[str, Any]) -> bool:
    """A RayJob with ``spec.clusterSelector`` runs on a RayCluster that exists already: it
    needs no quota of its own and is not queued (Kueue's ``Skip``)."""
    return bool((rayjob.get("spec") or {}).get("clusterSelector"))


def rayjob_pod_sets(rayjob: Mapping[str, Any]) -> list[tuple[dict[str, Any], str]]:
    cluster = (rayjob.get("spec") or {}).get("rayClusterSpec")
    if not isinstance(cluster, Mapping):
        raise IntegrationError(
            "spec.rayClusterSpec", "required (a RayJob with spec.clusterSelector is not queued)"
        )
    sets = cluster_pod_sets(cluster, "spec.rayClusterSpec")
    mode = submission_mode(rayjob)
    if mode == K8S_JOB_MODE:
        sets.append(
            (
                {"name": SUBMITTER_POD_SET, "count": 1, "template": submitter_template(rayjob)},
                "spec.submitterPodTemplate",
            )
        )
    elif mode == SIDECAR_MODE:
        # KubeRay adds the submitter container to the head pod, with its default resources.
        head = sets[0][0]["template"]["spec"]
        head["containers"] = [
            *(head.get("containers") or []),
            {"name": SUBMITTER_CONTAINER, "resources": copy.deepcopy(SUBMITTER_RESOURCES)},
        ]
    return sets


def workload_name_for_rayjob(rayjob: Mapping[str, Any]) -> str:
    return owner_workload_name(rayjob, RAYJOB_KIND, RAY_GROUP)


def workload_for_rayjob(
    rayjob: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
) -> Workload:
    """The Workload kqueue creates for ``rayjob``; raises :class:`IntegrationError` naming the
    RayJob's field."""
    if rayjob.get("kind") != RAYJOB_KIND:
        raise IntegrationError("kind", f"expected a RayJob, got {rayjob.get('kind')!r}")
    return _workload(
        rayjob, RAYJOB_KIND, rayjob_pod_sets(rayjob), priorities, label_keys_to_copy=label_keys_to_copy
    )


def rayjob_finished(rayjob: Mapping[str, Any]) -> tuple[bool, str] | None:
    """``(succeeded, message)`` once KubeRay says the RayJob's deployment is Complete or Failed
    (Kueue's ``Finished``: success is the Ray job's status SUCCEEDED)."""
    status = rayjob.get("status") or {}
    if status.get("jobDeploymentStatus") not in ("Complete", "Failed"):
        return None
    return status.get("jobStatus") == "SUCCEEDED", str(status.get("message") or "")


def rayjob_finished_condition(rayjob: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(Complete|Failed, message)``: the RayJob's final deployment status, for the simulator."""
    done = rayjob_finished(rayjob)
    if done is None:
        return None
    return str((rayjob.get("status") or {}).get("jobDeploymentStatus")), done[1]


# -- RayService -----------------------------------------------------------------------------------


def workload_name_for_rayservice(service: Mapping[str, Any]) -> str:
    return owner_workload_name(service, RAYSERVICE_KIND, RAY_GROUP)


def workload_for_rayservice(
    service: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
) -> Workload:
    """The Workload kqueue creates for ``service``: the pod sets of its ``spec.rayClusterConfig``;
    raises :class:`IntegrationError` naming the RayService's field."""
    if service.get("kind") != RAYSERVICE_KIND:
        raise IntegrationError("kind", f"expected a RayService, got {service.get('kind')!r}")
    path = f"spec.{RAYSERVICE_CLUSTER_FIELD}"
    cluster = (service.get("spec") or {}).get(RAYSERVICE_CLUSTER_FIELD)
    if not isinstance(cluster, Mapping):
        raise IntegrationError(path, "required (the RayService's pod sets come from it)")
    return _workload(
        service,
        RAYSERVICE_KIND,
        cluster_pod_sets(cluster, path),
        priorities,
        label_keys_to_copy=label_keys_to_copy,
    )


def never_finished(_obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """A RayCluster or a RayService never finishes (Kueue's ``Finished``: a long-running
    service): its Workload goes when it is deleted."""
    return None


RAYJOB: Final = Integration(
    framework="ray.io/rayjob",
    api_version=RAY_API_VERSION,
    kind=RAYJOB_KIND,
    workloads=Workloads.OWN,
    build=workload_for_rayjob,
    finished=rayjob_finished_condition,
    operator="kuberay",
    kueue_keys=KueueKeys.ON_CONVERT,
)
RAYCLUSTER: Final = Integration(
    framework="ray.io/raycluster",
    api_version=RAY_API_VERSION,
    kind=RAYCLUSTER_KIND,
    workloads=Workloads.OWN,
    build=workload_for_raycluster,
    finished=never_finished,
    operator="kuberay",
    kueue_keys=KueueKeys.ON_CONVERT,
)
RAYSERVICE: Final = Integration(
    framework="ray.io/rayservice",
    api_version=RAY_API_VERSION,
    kind=RAYSERVICE_KIND,
    workloads=Workloads.OWN,
    build=workload_for_rayservice,
    finished=never_finished,
    operator="kuberay",
    kueue_keys=KueueKeys.ON_CONVERT,
)
