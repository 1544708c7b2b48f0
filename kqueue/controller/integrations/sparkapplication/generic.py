"""A SparkApplication as the generic reconciler drives it (Kueue's
pkg/controller/jobs/sparkapplication, alpha there).

One Workload per SparkApplication, pod sets ``driver`` and ``executor``. It waits suspended
(``spec.suspend``) while queued: the Spark operator runs no spark-submit then. On admission
kqueue resumes it with each pod set's flavor node labels and tolerations in the role's
``nodeSelector`` and ``tolerations`` (what the operator's pod defaulter puts on the pods Spark
creates; Kueue's ``RunWithPodSetsInfo``); its pods are born behind the ``kqueue.io/admission``
gate (the webhook gated ``spec.driver.template`` and ``spec.executor.template``) and released
by kqueue. On eviction it is suspended again (the operator deletes its pods) and, once stopped,
the roles' node selectors and tolerations are put back as the Workload recorded them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kqueue.api.integrations import PriorityResolver
from kqueue.api.integrations.sparkapplication import (
    API_VERSION,
    APP_NAME_LABEL,
    DRIVER,
    EXECUTOR,
    GROUP,
    KIND,
    PLURAL,
    ROLE_LABEL,
    finished_condition,
    state,
    workload_for_sparkapplication,
)
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease, is_gated
from kqueue.controller.integrations.podtemplate import (
    admitted_template_patch,
    restored_template_patch,
)
from kqueue.controller.integrations.suspension import SpecSuspendKind
from kqueue.controller.resources import Resource

Obj = dict[str, Any]

SPARKAPPLICATIONS = Resource(GROUP, "v1beta2", PLURAL)
ROLES = (DRIVER, EXECUTOR)


def _role(obj: Obj, role: str) -> Obj:
    return dict((obj.get("spec") or {}).get(role) or {})


def admitted_role_patch(spec: Mapping[str, Any], release: PodSetRelease) -> Obj | None:
    """The flavors' node labels and tolerations added to a role (keys it sets are kept), and
    the admission checks' labels and annotations: a role carries them as a pod template's spec
    does (:func:`admitted_template_patch` on the role read as one)."""
    patch: Obj = dict((admitted_template_patch({"spec": spec}, release) or {}).get("spec") or {})
    if release.labels:
        patch["labels"] = dict(release.labels)
    if release.annotations:
        patch["annotations"] = dict(release.annotations)
    return patch or None


def restored_role_patch(spec: Mapping[str, Any], recorded: Mapping[str, Any] | None) -> Obj | None:
    """The role's node selector and tolerations back to what its pod set's template recorded."""
    patch = restored_template_patch({"spec": spec}, recorded)
    return patch["spec"] if patch is not None else None


class SparkApplicationIntegration(SpecSuspendKind):
    resource = SPARKAPPLICATIONS
    api_version = API_VERSION
    kind = KIND

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        return workload_for_sparkapplication(obj, priorities)

    def is_active(self, obj: Obj) -> bool:
        """Kueue's ``IsActive`` (RUNNING), and the states in which its driver may still run
        (submitted, ending, or being suspended: the operator is deleting its pods)."""
        return state(obj) in ("RUNNING", "SUBMITTED", "SUCCEEDING", "FAILING", "INVALIDATING", "SUSPENDING")

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        done = finished_condition(obj)
        if done is None:
            return None
        return (c.FINISHED_SUCCEEDED if done[0] == "Succeeded" else c.FINISHED_FAILED), done[1]

    def owner_of_pod(self, pod: Obj) -> str | None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        name = labels.get(APP_NAME_LABEL)
        if not name or labels.get(ROLE_LABEL) not in ROLES:
            return None
        return f"{meta.get('namespace') or 'default'}/{name}"

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        return str(((pod.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL) or "")

    def holds_pods(self, obj: Obj) -> bool:
        return all(is_gated(_role(obj, role).get("template") or {}) for role in ROLES)

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        if not self.is_suspended(obj):
            return None
        spec: Obj = {"suspend": False}
        for role in ROLES:
            if role in releases:
                patch = admitted_role_patch(_role(obj, role), releases[role])
                if patch is not None:
                    spec[role] = patch
        return {"metadata": {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: None}}, "spec": spec}

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        if not self.is_suspended(obj) or self.is_active(obj):
            return None
        spec: Obj = {}
        for role in ROLES:
            recorded = wl.pod_set(role)
            patch = restored_role_patch(_role(obj, role), recorded.template.to_dict() if recorded else None)
            template = _role(obj, role).get("template") or {}
            if not is_gated(template):
                gates = [*((template.get("spec") or {}).get("schedulingGates") or []), {"name": c.ADMISSION_GATE}]
                patch = {**(patch or {}), "template": {"spec": {"schedulingGates": gates}}}
            if patch is not None:
                spec[role] = patch
        if not spec:
            return None
        return {"metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}, "spec": spec}
