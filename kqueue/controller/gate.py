"""The ``kqueue.io/admission`` scheduling gate: pure helpers on pods and pod specs.

Every pod of a managed workload is born behind the gate (the webhooks add it) and released by
:mod:`kqueue.controller.integrations.release` once its workload is admitted: gate removed, the
assigned flavors' node labels added as nodeSelector and their tolerations added (a
:class:`PodSetRelease`), the only changes the API server allows on a gated pod's scheduling
fields. The module imports nothing of the integrations, so the gang placement and readiness
read the gate as the integrations do.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kqueue.api.integrations.declaration import Ranks
from kqueue.api.v1alpha1 import constants as c

Obj = dict[str, Any]


@dataclass(frozen=True)
class PodSetRelease:
    """What an admitted pod set's pods get when released: node labels and tolerations."""

    name: str
    count: int
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Obj, ...] = ()
    # Topology-aware flavors: per assigned domain, its node selector and pod count; each
    # released pod is pinned to one domain that still has room.
    domains: tuple[tuple[Mapping[str, str], int], ...] = ()
    # Labels the released pods get (kqueue.io/tas on topology-placed pods, and those of the
    # admission checks' podSetUpdates).
    labels: Mapping[str, str] = field(default_factory=dict)
    # Annotations of the admission checks' podSetUpdates (e.g. the ProvisioningRequest the
    # pods consume, for cluster-autoscaler).
    annotations: Mapping[str, str] = field(default_factory=dict)
    # Where its pods carry their ranks (its integration's declaration): each is pinned to its
    # rank's domain, as Kueue's ungater does; None pins them oldest first.
    ranks: Ranks | None = None


def is_gated(pod: Obj) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(g.get("name") == c.ADMISSION_GATE for g in gates)


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def add_gate(pod_spec: Obj) -> bool:
    """Add the admission gate to a pod spec; returns whether it changed anything."""
    gates = pod_spec.setdefault("schedulingGates", [])
    if any(g.get("name") == c.ADMISSION_GATE for g in gates):
        return False
    gates.append({"name": c.ADMISSION_GATE})
    return True


def _toleration_key(t: Obj) -> tuple[Any, ...]:
    # An unset operator means Equal: the same toleration written two ways is one toleration.
    return (
        t.get("key"),
        t.get("operator") or "Equal",
        t.get("value"),
        t.get("effect"),
        t.get("tolerationSeconds"),
    )


def same_toleration(a: Obj, b: Obj) -> bool:
    return _toleration_key(a) == _toleration_key(b)


def ungate(pod: Obj, release: PodSetRelease) -> Obj | None:
    """The pod released: gate removed, node labels and tolerations added; None if not gated.

    The API server allows exactly these changes on a gated pod (adding nodeSelector entries and
    tolerations), which is why they are made in the same update that removes the gate. A
    nodeSelector key the pod already sets is left alone: the flavor was chosen to match it.
    """
    if not is_gated(pod):
        return None
    out = copy.deepcopy(pod)
    spec = out.setdefault("spec", {})
    spec["schedulingGates"] = [
        g for g in spec.get("schedulingGates") or [] if g.get("name") != c.ADMISSION_GATE
    ]
    if not spec["schedulingGates"]:
        del spec["schedulingGates"]
    if release.node_selector:
        selector = spec.setdefault("nodeSelector", {})
        for k, v in sorted(release.node_selector.items()):
            selector.setdefault(k, v)
    if release.tolerations:
        tolerations = spec.setdefault("tolerations", [])
        for tol in release.tolerations:
            if not any(same_toleration(tol, t) for t in tolerations):
                tolerations.append(dict(tol))
    if release.labels:
        labels = out.setdefault("metadata", {}).setdefault("labels", {})
        labels.update(release.labels)
    if release.annotations:
        annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
        annotations.update(release.annotations)
    return out



def release_ops(pod: Obj, new: Obj) -> list[Obj]:
    """The JSON patch that turns gated ``pod`` into ``new``, its :func:`ungate` result.

    It starts with a "test" of the admission gate, so a patch built from a stale copy of the pod
    fails (422) instead of removing someone else's gate; selector entries and tolerations are
    added, never rewritten.
    """
    old_spec, new_spec = pod["spec"], new["spec"]
    gates = old_spec.get("schedulingGates") or []
    index = next(i for i, g in enumerate(gates) if g.get("name") == c.ADMISSION_GATE)
    ops: list[Obj] = [
        {"op": "test", "path": f"/spec/schedulingGates/{index}", "value": gates[index]},
        {"op": "remove", "path": "/spec/schedulingGates" + ("" if len(gates) == 1 else f"/{index}")},
    ]
    if new_spec.get("nodeSelector") != old_spec.get("nodeSelector"):
        if old_spec.get("nodeSelector"):
            ops += [
                {"op": "add", "path": f"/spec/nodeSelector/{_escape(k)}", "value": v}
                for k, v in sorted(new_spec["nodeSelector"].items())
                if k not in old_spec["nodeSelector"]
            ]
        else:
            ops.append({"op": "add", "path": "/spec/nodeSelector", "value": new_spec["nodeSelector"]})
    if new_spec.get("tolerations") != old_spec.get("tolerations"):
        if old_spec.get("tolerations"):
            ops += [
                {"op": "add", "path": "/spec/tolerations/-", "value": tol}
                for tol in new_spec["tolerations"][len(old_spec["tolerations"]) :]
            ]
        else:
            ops.append({"op": "add", "path": "/spec/tolerations", "value": new_spec["tolerations"]})
    for field_name in ("labels", "annotations"):
        old_map = (pod.get("metadata") or {}).get(field_name) or {}
        new_map = (new.get("metadata") or {}).get(field_name) or {}
        if new_map == old_map:
            continue
        if old_map:
            ops += [
                {"op": "add", "path": f"/metadata/{field_name}/{_escape(k)}", "value": v}
                for k, v in sorted(new_map.items())
                if old_map.get(k) != v
            ]
        else:
            ops.append({"op": "add", "path": f"/metadata/{field_name}", "value": new_map})
    return ops


def _escape(token: str) -> str:
    """A JSON pointer token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")
