"""An AppWrapper as the generic reconciler drives it (Kueue's pkg/controller/jobs/appwrapper).

One Workload per AppWrapper, one pod set per entry of its components' ``podSets``. It waits
suspended (``spec.suspend``) while queued: the AppWrapper operator creates none of its
components then. On admission kqueue resumes it with one ``podSetInfos`` entry per pod set
(the flavors' node labels and tolerations, the admission checks' labels and annotations, and the
``kqueue.io/appwrapper-pod-set`` label), which the operator puts into each pod template of the
objects it creates; their pods are born behind the ``kqueue.io/admission`` gate (the webhook
gated the templates) and released by kqueue. On eviction the AppWrapper is suspended again (the
operator deletes its components) and, once stopped, its ``podSetInfos`` are cleared.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kqueue.api.integrations import PriorityResolver
from kqueue.api.integrations.appwrapper import (
    API_VERSION,
    APPWRAPPER_LABEL,
    GROUP,
    KIND,
    PLURAL,
    POD_SET_LABEL,
    WrappedPodSet,
    at_path,
    finished_condition,
    quota_reserved,
    workload_for_appwrapper,
    wrapped_pod_sets,
)
from kqueue.api.integrations.common import IntegrationError
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease, is_gated
from kqueue.controller.integrations.suspension import SpecSuspendKind, gate_templates
from kqueue.controller.resources import Resource

Obj = dict[str, Any]

APPWRAPPERS = Resource(GROUP, "v1beta2", PLURAL)


def _sets(obj: Obj) -> list[WrappedPodSet]:
    try:
        return wrapped_pod_sets(obj)
    except IntegrationError:
        return []


def _components(obj: Obj) -> list[Obj]:
    return [copy.deepcopy(x) for x in (obj.get("spec") or {}).get("components") or []]


def pod_set_info(pod_set: str, release: PodSetRelease) -> Obj:
    """What the AppWrapper operator puts into the pod template of ``pod_set`` (Kueue's
    ``RunWithPodSetsInfo``: its PodSetInfo as an AppWrapperPodSetInfo)."""
    info: Obj = {"labels": {**dict(release.labels), POD_SET_LABEL: pod_set}}
    if release.annotations:
        info["annotations"] = dict(release.annotations)
    if release.node_selector:
        info["nodeSelector"] = dict(sorted(release.node_selector.items()))
    if release.tolerations:
        info["tolerations"] = [dict(t) for t in release.tolerations]
    return info


def templates_in(components: list[Obj], sets: list[WrappedPodSet]) -> list[Obj]:
    """The pod templates of ``sets`` inside ``components`` (in place, for gating)."""
    out = []
    for s in sets:
        component = components[s.component]
        entries = component.get("podSets") or []
        path = entries[s.index]["path"] if s.index < len(entries) else None
        if path is None:
            continue
        template = at_path(component, path)
        if isinstance(template, dict):
            out.append(template)
    return out


class AppWrapperIntegration(SpecSuspendKind):
    resource = APPWRAPPERS
    api_version = API_VERSION
    kind = KIND

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_appwrapper(obj, priorities)

    def is_active(self, obj: Obj) -> bool:
        return quota_reserved(obj)

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        done = finished_condition(obj)
        if done is None:
            return None
        reason = c.FINISHED_SUCCEEDED if done[0] == "Succeeded" else c.FINISHED_FAILED
        return reason, done[1]

    def owner_of_pod(self, pod: Obj) -> str | None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        name = labels.get(APPWRAPPER_LABEL)
        if not name or POD_SET_LABEL not in labels:
            return None
        return f"{meta.get('namespace') or 'default'}/{name}"

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return str(((pod.get("metadata") or {}).get("labels") or {}).get(POD_SET_LABEL) or "")

    def holds_pods(self, obj: Obj) -> bool:
        sets = _sets(obj)
        return bool(sets) and all(is_gated(s.template) for s in sets)

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        if not self.is_suspended(obj):
            return None
        components = _components(obj)
        infos: dict[int, list[Obj]] = {}
        for s in _sets(obj):
            release = releases.get(s.name) or PodSetRelease(name=s.name, count=s.count)
            infos.setdefault(s.component, []).append(pod_set_info(s.name, release))
        for i, component in enumerate(components):
            if i in infos:
                component["podSetInfos"] = infos[i]
        return {
            "metadata": {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: None}},
            "spec": {"suspend": False, "components": components},
        }

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        """Once stopped: the podSetInfos of the last admission cleared (Kueue's
        ``RestorePodSetsInfo``), and the pod templates gated if the webhook never saw it."""
        if not self.is_suspended(obj) or self.is_active(obj):
            return None
        components = _components(obj)
        changed = False
        for component in components:
            if component.pop("podSetInfos", None):
                changed = True
        changed |= gate_templates(templates_in(components, _sets(obj)))
        if not changed:
            return None
        return {
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            "spec": {"components": components},
        }
