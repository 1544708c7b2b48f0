"""Pod templates of a suspended object: gated, given the admission's scheduling directives on
resume, and put back as the Workload recorded them after a stop.

Kueue's ``podset.Merge`` / ``RestorePodSetsInfo``. The API server lets a suspended Job that has
not started (``status.startTime`` unset) change its template's node selector, tolerations,
labels, annotations and scheduling gates (Kubernetes 1.27+), which is what these patches touch.
All functions are pure and return merge-patch fragments for ``template``, or None when nothing
would change.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease, add_gate, same_toleration

Obj = dict[str, Any]


def _spec(template: Mapping[str, Any]) -> Mapping[str, Any]:
    return template.get("spec") or {}


def held_template_patch(template: Mapping[str, Any]) -> Obj | None:
    """The gate and the managed label in a pod template (what the webhooks add at creation)."""
    pod_spec = copy.deepcopy(dict(_spec(template)))
    labels = (template.get("metadata") or {}).get("labels") or {}
    if not add_gate(pod_spec) and labels.get(c.MANAGED_LABEL) == "true":
        return None
    return {
        "metadata": {"labels": {c.MANAGED_LABEL: "true"}},
        "spec": {"schedulingGates": pod_spec["schedulingGates"]},
    }


def admitted_template_patch(template: Mapping[str, Any], release: PodSetRelease) -> Obj | None:
    """The flavors' node labels and tolerations added to a template; keys the template already
    sets are left alone (the flavor was chosen to match them)."""
    spec = _spec(template)
    selector = dict(spec.get("nodeSelector") or {})
    tolerations = [dict(t) for t in spec.get("tolerations") or []]
    patch: Obj = {}
    add = {k: v for k, v in sorted(release.node_selector.items()) if k not in selector}
    if add:
        patch["nodeSelector"] = add
    extra = [dict(t) for t in release.tolerations if not any(same_toleration(t, x) for x in tolerations)]
    if extra:
        # A merge patch replaces a list whole.
        patch["tolerations"] = tolerations + extra
    return {"spec": patch} if patch else None


def restored_template_patch(
    template: Mapping[str, Any], recorded: Mapping[str, Any] | None
) -> Obj | None:
    """Node selector and tolerations back to what the Workload recorded at creation, so the
    next admission (maybe to another flavor) starts from the user's template."""
    if recorded is None:
        return None
    spec, want = _spec(template), _spec(recorded)
    patch: Obj = {}
    selector: Mapping[str, str] = spec.get("nodeSelector") or {}
    want_selector: Mapping[str, str] = want.get("nodeSelector") or {}
    if dict(selector) != dict(want_selector):
        # null deletes a key in a merge patch.
        patch["nodeSelector"] = {
            **{k: None for k in selector if k not in want_selector},
            **dict(want_selector),
        }
    tolerations: Sequence[Obj] = spec.get("tolerations") or []
    want_tolerations: Sequence[Obj] = want.get("tolerations") or []
    if list(tolerations) != list(want_tolerations):
        patch["tolerations"] = [dict(t) for t in want_tolerations] or None
    return {"spec": patch} if patch else None


def merge(*patches: Obj | None) -> Obj | None:
    """Deep-merge merge-patch fragments (later ones win on scalars)."""
    out: Obj = {}
    for patch in patches:
        if patch is not None:
            _merge_into(out, patch)
    return out or None


def _merge_into(out: Obj, patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            _merge_into(out[key], value)
        else:
            out[key] = copy.deepcopy(value) if isinstance(value, (dict, list)) else value
