"""RayCluster, RayJob and RayService as the generic reconciler drives them (Kueue's
pkg/controller/jobs/raycluster, rayjob and rayservice).

A RayService's switch is ``spec.rayClusterConfig.suspend`` (Kueue's rayservice): KubeRay copies
that spec into the RayCluster it makes, so the cluster is born suspended, with no pods, and its
pods are found through the ``kqueue.io/rayservice-name`` label its webhook puts in each pod
template. The RayCluster it makes is controlled by the RayService, so it is not queued again.

Both have ``spec.suspend``. Queued, they wait suspended (the webhook suspends them at creation,
annotation ``kqueue.io/suspended-by-kqueue``): KubeRay creates no pods for a suspended RayCluster,
and for a suspended RayJob neither its RayCluster nor its submitter Job. On admission kqueue
resumes the object with each pod set's flavor node labels and tolerations in that group's pod
template (KubeRay copies the RayJob's ``rayClusterSpec`` into the RayCluster it creates, and the
submitter template into the submitter Job); the pods are born behind the ``kqueue.io/admission``
gate and released by kqueue. On eviction the object is suspended again (KubeRay deletes the pods,
and for a RayJob its RayCluster and submitter Job) and, once stopped, its templates are put back
as the Workload recorded them.

A RayJob's pods are reached through the ``kqueue.io/rayjob-name`` label its webhook puts in each
of its pod templates; a RayCluster's through their controlling owner. The RayCluster a RayJob
creates is controlled by the RayJob, so it is queued with it, never on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kqueue.api.integrations import PriorityResolver
from kqueue.api.integrations.ray import (
    HEAD_POD_SET,
    RAY_API_VERSION,
    RAY_GROUP_LABEL,
    RAY_NODE_TYPE_LABEL,
    RAYCLUSTER_KIND,
    RAYJOB_KIND,
    RAYJOB_NAME_LABEL,
    RAYSERVICE_CLUSTER_FIELD,
    RAYSERVICE_KIND,
    RAYSERVICE_NAME_LABEL,
    SUBMITTER_POD_SET,
    rayjob_finished,
    workload_for_raycluster,
    workload_for_rayjob,
    workload_for_rayservice,
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
from kqueue.controller.resources import Resource

Obj = dict[str, Any]

RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters")
RAYJOBS = Resource("ray.io", "v1", "rayjobs")
RAYSERVICES = Resource("ray.io", "v1", "rayservices")


def _annotations(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _drop_nulls(value: Any) -> Any:
    # Inside a replaced list, null means nothing to the API server: leave the key out instead.
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def cluster_templates(cluster_spec: Mapping[str, Any]) -> dict[str, Obj]:
    """Pod set name -> pod template of a RayClusterSpec."""
    out: dict[str, Obj] = {}
    head = cluster_spec.get("headGroupSpec") or {}
    out[HEAD_POD_SET] = head.get("template") or {}
    for group in cluster_spec.get("workerGroupSpecs") or []:
        out[str(group.get("groupName"))] = group.get("template") or {}
    return out


def cluster_spec_patch(cluster_spec: Mapping[str, Any], changes: Mapping[str, Obj | None]) -> Obj | None:
    """A merge patch of a RayClusterSpec with the pod template changes of each pod set: the head
    group is a map (only the change is sent), the worker groups a list (replaced whole, so every
    group is sent with its change merged in). None if nothing changes."""
    if not any(changes.values()):
        return None
    out: Obj = {}
    head_change = changes.get(HEAD_POD_SET)
    if head_change is not None:
        out["headGroupSpec"] = {"template": head_change}
    groups = list(cluster_spec.get("workerGroupSpecs") or [])
    if any(changes.get(str(g.get("groupName"))) for g in groups):
        new_groups = []
        for group in groups:
            change = changes.get(str(group.get("groupName")))
            if change is None:
                new_groups.append(group)
                continue
            merged = merge(group, {"template": change})
            new_groups.append(_drop_nulls(merged))
        out["workerGroupSpecs"] = new_groups
    return out


def _admitted(templates: Mapping[str, Obj], releases: Mapping[str, PodSetRelease]) -> dict[str, Obj | None]:
    return {
        name: admitted_template_patch(template, releases[name])
        for name, template in templates.items()
        if name in releases
    }


def _restored(templates: Mapping[str, Obj], wl: Workload) -> dict[str, Obj | None]:
    out: dict[str, Obj | None] = {}
    for name, template in templates.items():
        pod_set = wl.pod_set(name)
        recorded = pod_set.template.to_dict() if pod_set is not None else None
        out[name] = merge(held_template_patch(template), restored_template_patch(template, recorded))
    return out


class _RayKind:
    """What the Ray kinds share: a suspend switch (``spec.suspend``, or inside the spec field
    ``cluster_field`` names) and the queue label selector."""

    resource: Resource
    api_version = RAY_API_VERSION
    kind: str
    cluster_field: str | None = None

    def label_selector(self, *, without_queue_name: bool = False) -> str | None:
        return None if without_queue_name else c.QUEUE_NAME_LABEL

    def _switch(self, spec: Mapping[str, Any]) -> Mapping[str, Any]:
        return (spec.get(self.cluster_field) or {}) if self.cluster_field else spec

    def _spec(self, suspend: bool, spec: Obj) -> Obj:
        """The spec patch setting the switch, with ``spec`` (for a RayService, a
        ``rayClusterConfig`` patch) merged in."""
        if self.cluster_field is None:
            return {"suspend": suspend, **spec}
        return {self.cluster_field: {"suspend": suspend, **(spec.get(self.cluster_field) or {})}}

    def is_suspended(self, obj: Obj) -> bool:
        return bool(self._switch(obj.get("spec") or {}).get("suspend"))

    def user_suspended(self, obj: Obj) -> bool:
        return self.is_suspended(obj) and c.SUSPENDED_BY_KQUEUE_ANNOTATION not in _annotations(obj)

    def stop_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        if self.is_suspended(obj):
            return None
        return {
            "metadata": {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: "true"}},
            "spec": self._spec(True, {}),
        }

    def _run(self, obj: Obj, spec: Obj) -> Obj:
        return {
            "metadata": {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: None}},
            "spec": self._spec(False, spec),
        }


def _named_by(label: str, name: str, held: dict[str, Obj | None], templates: Mapping[str, Obj]) -> dict[str, Obj | None]:
    """``held`` with ``label: name`` added to each template that lacks it: an object created
    before kqueue's webhooks lacks the label its pods are found by."""
    out = dict(held)
    for key, template in templates.items():
        labels = (template.get("metadata") or {}).get("labels") or {}
        if labels.get(label) != name:
            out[key] = merge(out[key], {"metadata": {"labels": {label: name}}})
    return out


def _pod_owner_by_label(pod: Obj, label: str) -> str | None:
    meta = pod.get("metadata") or {}
    name = (meta.get("labels") or {}).get(label)
    return f"{meta.get('namespace') or 'default'}/{name}" if name else None


def _guarded(obj: Obj, spec: Obj | None) -> Obj | None:
    """A hold patch: only against the version it was computed from."""
    if spec is None:
        return None
    return {"metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}, "spec": spec}


class RayClusterIntegration(_RayKind):
    resource: Resource = RAYCLUSTERS
    kind = RAYCLUSTER_KIND

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_raycluster(obj, priorities)

    def is_active(self, obj: Obj) -> bool:
        # KubeRay sets state "suspended" once a suspended RayCluster has no pods left; a
        # RayCluster it has not reconciled yet (no state) has none either.
        state = (obj.get("status") or {}).get("state")
        return bool(state) and state != "suspended"

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        # A RayCluster never finishes (Kueue's): its Workload goes when it is deleted.
        return None

    def owner_of_pod(self, pod: Obj) -> str | None:
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == RAYCLUSTER_KIND and ref.get("apiVersion") == RAY_API_VERSION:
                return f"{meta.get('namespace') or 'default'}/{ref.get('name')}"
        return None

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return cluster_pod_set_of(pod)

    def holds_pods(self, obj: Obj) -> bool:
        return all(is_gated(t) for t in cluster_templates(obj.get("spec") or {}).values())

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        if not self.is_suspended(obj):
            return None
        spec = obj.get("spec") or {}
        patch = cluster_spec_patch(spec, _admitted(cluster_templates(spec), releases))
        return self._run(obj, patch or {})

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        if not self.is_suspended(obj) or self.is_active(obj):
            return None
        spec = obj.get("spec") or {}
        return _guarded(obj, cluster_spec_patch(spec, _restored(cluster_templates(spec), wl)))


def cluster_pod_set_of(pod: Obj) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(RAY_NODE_TYPE_LABEL) == "head":
        return HEAD_POD_SET
    return str(labels.get(RAY_GROUP_LABEL) or "")


class RayJobIntegration(_RayKind):
    resource: Resource = RAYJOBS
    kind = RAYJOB_KIND

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_rayjob(obj, priorities)

    def is_active(self, obj: Obj) -> bool:
        # Kueue's: no pods while KubeRay has not started it (New) or once it is Suspended.
        status = (obj.get("status") or {}).get("jobDeploymentStatus") or ""
        return status not in ("", "Suspended")

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        done = rayjob_finished(obj)
        if done is None:
            return None
        succeeded, message = done
        if succeeded:
            return c.FINISHED_SUCCEEDED, message or "RayJob succeeded"
        return c.FINISHED_FAILED, message or "RayJob failed"

    def owner_of_pod(self, pod: Obj) -> str | None:
        return _pod_owner_by_label(pod, RAYJOB_NAME_LABEL)

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if RAY_NODE_TYPE_LABEL not in labels:
            return SUBMITTER_POD_SET  # the submitter Job's pod is no Ray node
        return cluster_pod_set_of(pod)

    def holds_pods(self, obj: Obj) -> bool:
        return all(is_gated(t) for t in rayjob_templates(obj).values())

    def _spec_patch(self, obj: Obj, changes: Callable[[Mapping[str, Obj]], dict[str, Obj | None]]) -> Obj | None:
        spec = obj.get("spec") or {}
        cluster = spec.get("rayClusterSpec") or {}
        out: Obj = {}
        cluster_patch = cluster_spec_patch(cluster, changes(cluster_templates(cluster)))
        if cluster_patch is not None:
            out["rayClusterSpec"] = cluster_patch
        submitter = spec.get("submitterPodTemplate")
        if isinstance(submitter, dict):
            change = changes({SUBMITTER_POD_SET: submitter}).get(SUBMITTER_POD_SET)
            if change is not None:
                out["submitterPodTemplate"] = change
        return out or None

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        if not self.is_suspended(obj):
            return None
        return self._run(obj, self._spec_patch(obj, lambda t: _admitted(t, releases)) or {})

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        if not self.is_suspended(obj) or self.is_active(obj):
            return None
        name = str((obj.get("metadata") or {}).get("name") or "")
        return _guarded(
            obj, self._spec_patch(obj, lambda t: _named_by(RAYJOB_NAME_LABEL, name, _restored(t, wl), t))
        )


def rayjob_templates(obj: Obj) -> dict[str, Obj]:
    """Pod set name -> pod template of a RayJob (the submitter's only when the RayJob has one:
    the webhook gives every queued K8sJobMode RayJob one)."""
    spec = obj.get("spec") or {}
    out = cluster_templates(spec.get("rayClusterSpec") or {})
    submitter = spec.get("submitterPodTemplate")
    if isinstance(submitter, dict):
        out[SUBMITTER_POD_SET] = submitter
    return out


class RayServiceIntegration(_RayKind):
    resource: Resource = RAYSERVICES
    kind = RAYSERVICE_KIND
    cluster_field = RAYSERVICE_CLUSTER_FIELD

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_rayservice(obj, priorities)

    def _cluster(self, obj: Obj) -> Obj:
        return (obj.get("spec") or {}).get(RAYSERVICE_CLUSTER_FIELD) or {}

    def is_active(self, obj: Obj) -> bool:
        # Kueue's IsActive: the RayService's Ready condition (its RayCluster serves).
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(k.get("type") == "Ready" and k.get("status") == "True" for k in conditions)

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        # A serving kind never finishes (Kueue's): its Workload goes when it is deleted.
        return None

    def owner_of_pod(self, pod: Obj) -> str | None:
        return _pod_owner_by_label(pod, RAYSERVICE_NAME_LABEL)

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return cluster_pod_set_of(pod)

    def holds_pods(self, obj: Obj) -> bool:
        return all(is_gated(t) for t in cluster_templates(self._cluster(obj)).values())

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        if not self.is_suspended(obj):
            return None
        cluster = self._cluster(obj)
        patch = cluster_spec_patch(cluster, _admitted(cluster_templates(cluster), releases))
        return self._run(obj, {RAYSERVICE_CLUSTER_FIELD: patch or {}})

    def children_to_remake(self, obj: Obj) -> list[tuple[Resource, str]]:
        """The RayClusters KubeRay made from the spec before a run or stop patch. KubeRay
        (v1.5.1) does not carry a changed ``rayClusterConfig`` into a RayCluster it made (it
        would prepare a new one only once the current one serves, and a held one has no head
        pod to serve from), so kqueue deletes them: KubeRay makes the RayCluster named in the
        RayService's status again, from the admitted (or suspended) spec."""
        status = obj.get("status") or {}
        names = [
            str((status.get(part) or {}).get("rayClusterName") or "")
            for part in ("pendingServiceStatus", "activeServiceStatus")
        ]
        return [(RAYCLUSTERS, name) for name in names if name]

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        if not self.is_suspended(obj) or self.is_active(obj):
            return None
        name = str((obj.get("metadata") or {}).get("name") or "")
        cluster = self._cluster(obj)
        templates = cluster_templates(cluster)
        patch = cluster_spec_patch(cluster, _named_by(RAYSERVICE_NAME_LABEL, name, _restored(templates, wl), templates))
        return _guarded(obj, None if patch is None else {RAYSERVICE_CLUSTER_FIELD: patch})
