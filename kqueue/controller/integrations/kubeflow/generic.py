"""A training-operator v1 job as the generic reconciler drives it (Kueue's
pkg/controller/jobs/kubeflow/kubeflowjob): PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob.

One Workload per job, one pod set per replica type it has. Its suspend switch is
``spec.runPolicy.suspend``: suspended while queued the training-operator creates no pods; on
admission kqueue resumes it with each pod set's flavor node labels and tolerations in its replica
spec's template, and (a PyTorchJob admitted partially, :mod:`kqueue.api.integrations.kubeflow`)
the Worker ``replicas`` cut to the admitted count. The pods are born behind the
``kqueue.io/admission`` gate and released by kqueue. On eviction it is suspended again (the
operator deletes its pods) and, once stopped, its templates and Worker ``replicas`` are put
back as the Workload recorded them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kqueue.api.integrations import PriorityResolver
from kqueue.api.integrations.kubeflow import (
    API_VERSION,
    GROUP,
    JOB_NAME_LABEL,
    REPLICA_TYPE_LABEL,
    KubeflowKind,
    pod_set_name,
    workload_for,
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



class KubeflowJobIntegration(RunPolicyJob):
    """One training-operator v1 kind; the kind's :class:`KubeflowKind` says what differs."""

    api_version = API_VERSION

    def __init__(self, kind: KubeflowKind) -> None:
        self.declared = kind
        self.kind = kind.kind
        self.resource: Resource = Resource(GROUP, "v1", kind.plural)

    def _specs(self, obj: Obj) -> dict[str, Obj]:
        return dict((obj.get("spec") or {}).get(self.declared.replica_specs_field) or {})

    def _replica_types(self, obj: Obj) -> list[tuple[str, str]]:
        specs = self._specs(obj)
        return [(rt, pod_set_name(rt)) for rt in self.declared.replica_types if rt in specs]

    def _specs_patch(self, changes: Mapping[str, Obj]) -> Obj | None:
        """``spec.<x>ReplicaSpecs`` as a merge patch (a map: only changed types are sent)."""
        return {self.declared.replica_specs_field: dict(changes)} if changes else None

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for(self.declared, obj, priorities)

    def owner_of_pod(self, pod: Obj) -> str | None:
        meta = pod.get("metadata") or {}
        name = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("controller")]
        if not name or (owners and owners[0].get("kind") != self.kind):
            return None
        return f"{meta.get('namespace') or 'default'}/{name}"

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return str(((pod.get("metadata") or {}).get("labels") or {}).get(REPLICA_TYPE_LABEL) or "")

    def holds_pods(self, obj: Obj) -> bool:
        return all(is_gated(spec.get("template") or {}) for spec in self._specs(obj).values())

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        if not self.is_suspended(obj):
            return None
        specs = self._specs(obj)
        changes: dict[str, Obj] = {}
        for rt, pod_set in self._replica_types(obj):
            if pod_set not in releases:
                continue
            change: Obj = {}
            template = admitted_template_patch(specs[rt].get("template") or {}, releases[pod_set])
            if template is not None:
                change["template"] = template
            recorded = wl.pod_set(pod_set)
            # Partial admission (an elastic PyTorchJob's workers): run the admitted count.
            if recorded is not None and recorded.min_count is not None:
                count = releases[pod_set].count
                if count != specs[rt].get("replicas", 1):
                    change["replicas"] = count
            if change:
                changes[rt] = change
        spec: Obj = {"runPolicy": {"suspend": False}}
        replica_specs = self._specs_patch(changes)
        if replica_specs is not None:
            spec.update(replica_specs)
        return {"metadata": {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: None}}, "spec": spec}

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        if not self.is_suspended(obj) or self.is_active(obj):
            return None
        specs = self._specs(obj)
        changes: dict[str, Obj] = {}
        for rt, pod_set in self._replica_types(obj):
            template = specs[rt].get("template") or {}
            recorded_set = wl.pod_set(pod_set)
            recorded = recorded_set.template.to_dict() if recorded_set is not None else None
            change: Obj = {}
            template_change = merge(held_template_patch(template), restored_template_patch(template, recorded))
            if template_change is not None:
                change["template"] = template_change
            if (
                recorded_set is not None
                and recorded_set.min_count is not None
                and specs[rt].get("replicas", 1) != recorded_set.count
            ):
                change["replicas"] = recorded_set.count
            if change:
                changes[rt] = change
        replica_specs = self._specs_patch(changes)
        if replica_specs is None:
            return None
        return {
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            "spec": replica_specs,
        }
