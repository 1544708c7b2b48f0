"""An MPIJob as the generic reconciler drives it (Kueue's pkg/controller/jobs/mpijob).

One Workload per MPIJob with the pod sets ``launcher`` and ``worker``. Its suspend switch is
``spec.runPolicy.suspend``: suspended while queued, the MPI operator creates no workers and keeps
the launcher Job suspended. On admission kqueue resumes it with each pod set's flavor node labels
and tolerations in its replica spec's template (the operator copies them into the launcher Job
and the workers it creates); the pods are born behind the ``kqueue.io/admission`` gate and released
by kqueue. On eviction it is suspended again (the operator deletes the workers and suspends the
launcher) and, once stopped, its templates are put back as the Workload recorded them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kqueue.api.integrations import PriorityResolver
from kqueue.api.integrations.mpijob import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    MPIJOB_API_VERSION,
    MPIJOB_KIND,
    REPLICA_TYPES,
    workload_for_mpijob,
)
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease, is_gated
from kqueue.controller.integrations.podtemplate import (
    admitted_template_patch,
    held_template_patch,
    merge,
    restored_template_patch,
)
from kqueue.controller.integrations.runpolicy import RunPolicyJob
from kqueue.controller.resources import Resource

Obj = dict[str, Any]

MPIJOBS = Resource("kubeflow.org", "v2beta1", "mpijobs")


def _specs(obj: Obj) -> dict[str, Obj]:
    return dict((obj.get("spec") or {}).get("mpiReplicaSpecs") or {})


def _templates_patch(obj: Obj, changes: Mapping[str, Obj | None]) -> Obj | None:
    """``spec.mpiReplicaSpecs`` as a merge patch (a map: only changed replica types are sent)."""
    out: Obj = {}
    for replica_type, pod_set in REPLICA_TYPES:
        change = changes.get(pod_set)
        if change is not None and replica_type in _specs(obj):
            out[replica_type] = {"template": change}
    return {"mpiReplicaSpecs": out} if out else None


class MPIJobIntegration(RunPolicyJob):
    resource: Resource = MPIJOBS
    api_version = MPIJOB_API_VERSION
    kind = MPIJOB_KIND

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_mpijob(obj, priorities)

    def owner_of_pod(self, pod: Obj) -> str | None:
        meta = pod.get("metadata") or {}
        name = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
        return f"{meta.get('namespace') or 'default'}/{name}" if name else None

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return str(((pod.get("metadata") or {}).get("labels") or {}).get(JOB_ROLE_LABEL) or "")

    def holds_pods(self, obj: Obj) -> bool:
        return all(is_gated(spec.get("template") or {}) for spec in _specs(obj).values())

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        if not self.is_suspended(obj):
            return None
        specs = _specs(obj)
        changes = {
            pod_set: admitted_template_patch(specs[rt].get("template") or {}, releases[pod_set])
            for rt, pod_set in REPLICA_TYPES
            if rt in specs and pod_set in releases
        }
        spec: Obj = {"runPolicy": {"suspend": False}}
        templates = _templates_patch(obj, changes)
        if templates is not None:
            spec.update(templates)
        return {"metadata": {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: None}}, "spec": spec}

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        if not self.is_suspended(obj) or self.is_active(obj):
            return None
        specs = _specs(obj)
        changes: dict[str, Obj | None] = {}
        for rt, pod_set in REPLICA_TYPES:
            if rt not in specs:
                continue
            template = specs[rt].get("template") or {}
            recorded_set = wl.pod_set(pod_set)
            recorded = recorded_set.template.to_dict() if recorded_set is not None else None
            changes[pod_set] = merge(held_template_patch(template), restored_template_patch(template, recorded))
        templates = _templates_patch(obj, changes)
        if templates is None:
            return None
        return {
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            "spec": templates,
        }
