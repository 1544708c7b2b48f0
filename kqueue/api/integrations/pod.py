"""v1 Pod -> Workload: a single Pod, or a pod group as one gang Workload (Kueue's pod integration).

A single Pod gets pod set ``main`` with one pod. Pods labelled ``kqueue.io/pod-group-name`` with
the annotation ``kqueue.io/pod-group-total-count`` form one Workload named after the group, with
one pod set per *role*: pods of the same shape (requests, ports, node selector, affinity,
tolerations, runtime class, priority, topology spread, overhead, resource claims) share a pod
set named by the first 8 hex digits of a SHA-256 over that shape, as Kueue's ``getRoleHash``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    annotations_of,
    kept_annotations,
    labels_of,
    owner_reference,
    queue_name,
    workload_labels,
    workload_name,
    workload_spec,
)
from kqueue.api.integrations.declaration import (
    Integration,
    KueueKeys,
    MaxExecTime,
    Ranks,
    Workloads,
)
from kqueue.api.integrations.job import parse_workload
from kqueue.api.quantity import canonical
from kqueue.api.v1alpha1 import PodSet, Workload
from kqueue.api.v1alpha1 import constants as c

POD_API_VERSION: Final = "v1"
POD_KIND: Final = "Pod"
MAX_POD_SETS: Final = 8


# Kueue's "pod-based workloads": controllers whose pods the pod integration queues, each pod (or
# pod group, `kqueue.io/pod-group-name` in the pod template) on its own, although a controller
# owns them. kqueue integrates neither kind, so nothing else queues their pods; their own
# objects (a Workflow, a TaskRun) are never queued. (apiVersion group, kind) of the owner.
POD_BASED_OWNERS: Final = frozenset({("argoproj.io", "Workflow"), ("tekton.dev", "TaskRun")})


def pod_based(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's controlling owner is one of :data:`POD_BASED_OWNERS` (an Argo
    Workflow's step pod, a Tekton TaskRun's pod)."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            group = str(ref.get("apiVersion") or "").partition("/")[0]
            return (group, ref.get("kind")) in POD_BASED_OWNERS
    return False


def group_name(pod: Mapping[str, Any]) -> str | None:
    """The pod group the pod belongs to (label ``kqueue.io/pod-group-name``), if any."""
    return labels_of(pod).get(c.POD_GROUP_NAME_LABEL) or None


def group_total_count(pod: Mapping[str, Any]) -> int:
    """The ``kqueue.io/pod-group-total-count`` annotation: a positive integer."""
    path = f"metadata.annotations[{c.POD_GROUP_TOTAL_COUNT_ANNOTATION}]"
    raw = annotations_of(pod).get(c.POD_GROUP_TOTAL_COUNT_ANNOTATION)
    if raw is None:
        raise IntegrationError(path, "required on pods of a pod group")
    try:
        value = int(raw)
    except ValueError:
        raise IntegrationError(path, f"must be an integer, got {raw!r}") from None
    if value < 1:
        raise IntegrationError(path, f"group total count should be greater than zero, got {value}")
    return value


def _pod_spec(pod: Mapping[str, Any]) -> dict[str, Any]:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        raise IntegrationError("spec", "required")
    return spec


def _requests_shape(container: Mapping[str, Any]) -> dict[str, str] | None:
    requests = (container.get("resources") or {}).get("requests")
    if not requests:
        return None
    return {str(k): canonical(v, str(k)) for k, v in sorted(requests.items())}


def _containers_shape(containers: Any) -> list[dict[str, Any]] | None:
    if not containers:
        return None
    return [
        {
            "ports": c_.get("ports") or None,
            "resources": {"requests": _requests_shape(c_)},
        }
        for c_ in containers
    ]


def role_hash(pod: Mapping[str, Any]) -> str:
    """Kueue's ``getRoleHash``: the pod set a pod of a group belongs to.

    The shape is serialised with sorted keys and nulls for unset fields, as Go's
    ``json.Marshal`` does for Kueue's map of the same fields, so pods with only requests (and
    optionally node selectors) get Kueue's own names; nested structs (affinity, tolerations)
    hash consistently but not necessarily to Kueue's digits.
    """
    spec = _pod_spec(pod)
    shape = {
        "spec": {
            "initContainers": _containers_shape(spec.get("initContainers")),
            "containers": _containers_shape(spec.get("containers")),
            "nodeSelector": spec.get("nodeSelector"),
            "affinity": spec.get("affinity"),
            "tolerations": spec.get("tolerations"),
            "runtimeClassName": spec.get("runtimeClassName"),
            "priority": spec.get("priority"),
            "topologySpreadConstraints": spec.get("topologySpreadConstraints"),
            "overhead": spec.get("overhead"),
            "resourceClaims": spec.get("resourceClaims"),
        }
    }
    text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _template(pod: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue copies only the pod's spec; kqueue also keeps the pod's preemptibility label in
    the template's labels, where the engine's preemptibility chain reads the pods' label."""
    template: dict[str, Any] = {"spec": copy.deepcopy(_pod_spec(pod))}
    label = labels_of(pod).get(c.PREEMPTIBILITY_LABEL)
    if label is not None:
        template["metadata"] = {"labels": {c.PREEMPTIBILITY_LABEL: label}}
    return template


def workload_for_pod(
    pod: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
) -> Workload:
    """The Workload for a single Pod (not in a group), owned by and named after the Pod."""
    if pod.get("kind") != POD_KIND:
        raise IntegrationError("kind", f"expected a Pod, got {pod.get('kind')!r}")
    if group_name(pod) is not None:
        raise IntegrationError(
            f"metadata.labels[{c.POD_GROUP_NAME_LABEL}]",
            "the pod belongs to a group: use workload_for_pod_group",
        )
    meta = pod.get("metadata") or {}
    name = str(meta.get("name", ""))
    pod_set = {"name": c.DEFAULT_POD_SET_NAME, "count": 1, "template": _template(pod)}
    wl_meta: dict[str, Any] = {
        "name": workload_name(name, str(meta.get("uid") or ""), POD_KIND, ""),
        "namespace": str(meta.get("namespace") or "default"),
        "ownerReferences": [
            owner_reference(pod, api_version=POD_API_VERSION, kind=POD_KIND, controller=True)
        ],
    }
    copied = workload_labels(labels_of(pod), label_keys_to_copy)
    if copied:
        wl_meta["labels"] = copied
    annotations = kept_annotations(annotations_of(pod))
    if annotations:
        wl_meta["annotations"] = annotations
    doc = {
        "apiVersion": c.API_VERSION,
        "kind": "Workload",
        "metadata": wl_meta,
        "spec": workload_spec(pod, [pod_set], [_pod_spec(pod)], priorities),
    }
    return parse_workload(doc, template_paths=["spec"])


def _runnable_or_succeeded(pod: Mapping[str, Any]) -> bool:
    """Kueue's isPodRunnableOrSucceeded: not Failed, and not deleted before being bound."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
        return False
    return (pod.get("status") or {}).get("phase") != "Failed"


def _active_order(pod: Mapping[str, Any]) -> tuple[bool, bool, str, str]:
    """Kueue's sortActivePods: pods with kqueue's finalizer first, ungated before gated, then
    older first; pods beyond the group's total count are the excess ones."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    gated = any(g.get("name") == c.ADMISSION_GATE for g in spec.get("schedulingGates") or [])
    has_finalizer = c.MANAGED_FINALIZER in (meta.get("finalizers") or [])
    return (not has_finalizer, gated, str(meta.get("creationTimestamp") or ""), str(meta["name"]))


def _split_active(pods: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Any]]:
    """The group's active pods in Kueue's order, cut at the total count: (kept, excess)."""
    if not pods:
        raise IntegrationError("", "a pod group needs at least one pod")
    total = group_total_count(pods[0])
    active = sorted((p for p in pods if _runnable_or_succeeded(p)), key=_active_order)
    return active[:total], active[total:]


def group_pods(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods that make up the group's Workload: runnable or succeeded, at most the total
    count (the excess is what Kueue deletes, see :func:`excess_pods`)."""
    return _split_active(pods)[0]


def excess_pods(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The group's active pods beyond its total count, as Kueue's ConstructComposableWorkload
    picks them (:func:`_active_order`: those kqueue already manages, ungated and older ones
    first, keep their place). kqueue deletes them, as Kueue does: the pod webhook named the group's PodGroup on each at creation (an immutable field),
    and kube-scheduler binds no pod of a group while a pod naming it stays gated, so one kept
    would stall the admitted ones for good."""
    return _split_active(pods)[1]


def member_pod_set(pod: Mapping[str, Any], pod_sets: Sequence[PodSet]) -> str:
    """The pod set of a group's Workload a pod counts in: the only one when there is one (so
    that a Workload made elsewhere, a MultiKueue manager's copy, whose hash of nested fields
    differs still holds all of a one-role group's pods), else its role (:func:`role_hash`).

    A released pod's spec is no longer the one its role was hashed from: kqueue's release
    added its flavors' node labels to its nodeSelector (keys it did not set) and their
    tolerations after its own (all the API server lets change on a gated pod). So a pod whose
    hash names no pod set counts in the one whose hash it has with its nodeSelector cut to the
    keys of that pod set's template and its tolerations cut to a leading part."""
    if len(pod_sets) == 1:
        return pod_sets[0].name
    own = role_hash(pod)
    if any(ps.name == own for ps in pod_sets):
        return own
    spec = _pod_spec(pod)
    selector: Mapping[str, Any] = spec.get("nodeSelector") or {}
    tolerations: list[Any] = list(spec.get("tolerations") or [])
    for ps in pod_sets:
        keys = ps.template.spec.node_selector.keys()
        if not keys <= selector.keys():
            continue
        made_with = {k: selector[k] for k in keys} or None
        for kept in range(len(tolerations), -1, -1):
            as_made = {**spec, "nodeSelector": made_with, "tolerations": tolerations[:kept] or None}
            if role_hash({"spec": as_made}) == ps.name:
                return ps.name
    return own


@dataclass(frozen=True)
class ExcessPod:
    """An active pod of a group beyond a count: its pod set's in the group's Workload, or the
    group's total count while there is no Workload (``pod_set`` None)."""

    pod: Mapping[str, Any]
    count: int
    """The pod set's count in the Workload's spec, or the group's total count."""
    active: int
    """The group's active pods counted against ``count`` (this one included)."""
    pod_set: str | None = None


def group_excess(
    pods: Sequence[Mapping[str, Any]], pod_sets: Sequence[PodSet] | None
) -> list[ExcessPod]:
    """The group's excess pods, as Kueue counts them. Before its Workload exists
    (``pod_sets`` None): beyond the group's total count (:func:`excess_pods`). Once it exists,
    Kueue's FindMatchingWorkloads counts per pod set (role) instead: the active pods of each of
    the Workload's pod sets (:func:`member_pod_set`) beyond its count, last in
    :func:`_active_order` within the set, in the Workload's pod set order. So a group of total
    count 3 declared as 1 leader and 2 workers, with 2 leaders and 1 worker active, has one
    excess leader: kept, it would stay behind kqueue's gate naming the group's PodGroup, and
    kube-scheduler would bind none of the gang. A pod of a role the Workload has no pod set
    for is not counted against a pod set (Kueue neither keeps nor deletes it, and rebuilds the
    Workload instead, which kqueue does not); those beyond what the pod sets leave of the
    group's total count are still excess, as before the Workload existed, since one kept gated
    would stall the gang."""
    if pod_sets is None:
        beyond = excess_pods(pods)
        total = group_total_count(pods[0])
        return [ExcessPod(p, total, total + len(beyond)) for p in beyond]
    by_set: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        if _runnable_or_succeeded(pod):
            by_set.setdefault(member_pod_set(pod, pod_sets), []).append(pod)
    excess: list[ExcessPod] = []
    kept = 0
    for ps in pod_sets:
        active = sorted(by_set.pop(ps.name, []), key=_active_order)
        excess.extend(ExcessPod(p, ps.count, len(active), ps.name) for p in active[ps.count:])
        kept += min(len(active), ps.count)
    strays = sorted((p for members in by_set.values() for p in members), key=_active_order)
    if strays:
        total = group_total_count(pods[0])
        room = max(0, total - kept)
        excess.extend(ExcessPod(p, total, kept + len(strays)) for p in strays[room:])
    return excess


def workload_for_pod_group(
    pods: Sequence[Mapping[str, Any]],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
) -> Workload:
    """The one Workload for the pods of a group (all in one namespace, same group label).

    Checks Kueue's: the same queue and total count on every pod, at least ``total`` runnable
    pods, at most 8 roles, and that copied labels agree. Owned by every pod (not as controller).
    """
    if not pods:
        raise IntegrationError("", "a pod group needs at least one pod")
    first = pods[0]
    name = group_name(first)
    if name is None:
        raise IntegrationError(f"metadata.labels[{c.POD_GROUP_NAME_LABEL}]", "required")
    namespace = str((first.get("metadata") or {}).get("namespace") or "default")
    total = group_total_count(first)
    for pod in pods:
        pod_name = (pod.get("metadata") or {}).get("name")
        if group_name(pod) != name:
            raise IntegrationError(
                f"metadata.labels[{c.POD_GROUP_NAME_LABEL}]",
                f"pod {pod_name!r} belongs to group {group_name(pod)!r}, not {name!r}",
            )
        if (pod.get("status") or {}).get("phase") == "Failed":
            continue
        if queue_name(pod) != queue_name(first):
            raise IntegrationError(
                f"metadata.labels[{c.QUEUE_NAME_LABEL}]",
                f"pods {(first.get('metadata') or {}).get('name')!r} and {pod_name!r} have "
                f"different queue names: {queue_name(first)}!={queue_name(pod)}",
            )
        if group_total_count(pod) != total:
            raise IntegrationError(
                f"metadata.annotations[{c.POD_GROUP_TOTAL_COUNT_ANNOTATION}]",
                f"pods {(first.get('metadata') or {}).get('name')!r} and {pod_name!r} have "
                f"different total counts: {total}!={group_total_count(pod)}",
            )
    members = group_pods(pods)
    if len(members) < total:
        raise IntegrationError(
            f"metadata.annotations[{c.POD_GROUP_TOTAL_COUNT_ANNOTATION}]",
            f"{name!r} group has fewer runnable pods than expected: {len(members)} of {total}",
        )

    roles: dict[str, dict[str, Any]] = {}
    for pod in members:
        h = role_hash(pod)
        if h in roles:
            roles[h]["count"] += 1
        else:
            roles[h] = {"name": h, "count": 1, "template": _template(pod)}
    if len(roles) > MAX_POD_SETS:
        raise IntegrationError("spec", "pod group can't include more than 8 roles")
    pod_sets = [roles[h] for h in sorted(roles)]

    copied: dict[str, str] = {}
    for pod in members:
        for key, value in workload_labels(labels_of(pod), label_keys_to_copy).items():
            if copied.setdefault(key, value) != value:
                raise IntegrationError(
                    f"metadata.labels[{key}]", "pods of the group have different label values"
                )
    # Kueue takes the group's labels and priority from the pod being reconciled; the oldest
    # member stands in for it so the result does not depend on the order pods are seen.
    owner = min(members, key=_active_order)
    wl_meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "ownerReferences": [
            owner_reference(p, api_version=POD_API_VERSION, kind=POD_KIND, controller=False)
            for p in sorted(members, key=lambda p: str((p.get("metadata") or {}).get("name")))
        ],
    }
    if copied:
        wl_meta["labels"] = dict(sorted(copied.items()))
    annotations = kept_annotations(annotations_of(owner))
    if annotations:
        wl_meta["annotations"] = annotations
    specs = [_pod_spec(roles[h]["template"]) for h in sorted(roles)]
    doc = {
        "apiVersion": c.API_VERSION,
        "kind": "Workload",
        "metadata": wl_meta,
        "spec": workload_spec(owner, pod_sets, specs, priorities),
    }
    return parse_workload(doc, template_paths=["spec"])


def ranks(pod: Mapping[str, Any], wl: Workload) -> dict[str, Ranks]:
    """A pod group's pods are ranked by the label their annotation
    ``kqueue.io/pod-group-pod-index-label`` names (Kueue's webhook copies that label to its
    pod-group-pod-index label and ranks by it); without it they have no ranks."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    label = annotations.get(c.POD_GROUP_POD_INDEX_LABEL_ANNOTATION)
    if not label:
        return {}
    return {ps.name: Ranks(str(label)) for ps in wl.spec.pod_sets}


INTEGRATION: Final = Integration(
    framework="pod",
    api_version=POD_API_VERSION,
    kind=POD_KIND,
    workloads=Workloads.POD,
    default_enabled=True,
    kueue_keys=KueueKeys.WORKLOAD_OBJECT,
    max_exec_time=MaxExecTime.PODS,
    ranks=ranks,
)
