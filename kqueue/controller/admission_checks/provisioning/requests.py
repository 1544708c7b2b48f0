"""The ProvisioningRequest check's decisions, without I/O (Kueue's
``pkg/controller/admissionchecks/provisioning``): the names of each attempt's objects, the
ProvisioningRequest and PodTemplates to create, and the check state its conditions give.

Each admission attempt of a workload gets its own ProvisioningRequest
``<workload>-<check>-<attempt>`` (attempt = the check's retryCount + 1), with one PodTemplate
per pod set ``ppt-<request>-<podset>``; cluster-autoscaler provisions for it and reports through
the conditions Accepted, Provisioned, Failed, BookingExpired and CapacityRevoked.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from kqueue.api.v1alpha1 import (
    AdmissionCheckState,
    PodSet,
    PodSetUpdate,
    ProvisioningRequestConfig,
    Workload,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.engine.readiness import backoff

Obj = dict[str, Any]

API_GROUP: Final = "autoscaling.x-k8s.io"
API_VERSION: Final = f"{API_GROUP}/v1"
# cluster-autoscaler's pod annotations: the pods consume the capacity of this request.
CONSUME_ANNOTATION: Final = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION: Final = "autoscaling.x-k8s.io/provisioning-class-name"
# Labels on what the check creates: kqueue manages it, for this workload (by UID: names may be
# longer than a label value).
WORKLOAD_UID_LABEL: Final = "kqueue.io/workload-uid"
POD_TEMPLATES_PREFIX: Final = "ppt"
MAX_NAME: Final = 253

# Kueue's messages.
CHECK_INACTIVE_MESSAGE: Final = "the check is not active"
NO_REQUEST_NEEDED: Final = "the provisioning request is not needed"

PROVISIONED: Final = "Provisioned"
FAILED: Final = "Failed"
BOOKING_EXPIRED: Final = "BookingExpired"
CAPACITY_REVOKED: Final = "CapacityRevoked"
ACCEPTED: Final = "Accepted"


def limit_name(full: str) -> str:
    """A name of at most 253 characters: a longer one keeps its start and gets a hash of the
    whole (Kueue's ``limitObjectName``)."""
    if len(full) <= MAX_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:10]
    return f"{full[: MAX_NAME - 11]}-{digest}"


def request_name(workload: str, check: str, attempt: int) -> str:
    return limit_name(f"{workload}-{check}-{attempt}")


def pod_template_name(request: str, pod_set: str) -> str:
    return limit_name(f"{POD_TEMPLATES_PREFIX}-{request}-{pod_set}")


def owned_by(request: Obj, wl: Workload) -> bool:
    """Whether ``request`` was made for ``wl`` (by its UID label): a request of the same name
    made by anyone else is never followed."""
    labels = request.get("metadata", {}).get("labels") or {}
    return bool(wl.metadata.uid) and labels.get(WORKLOAD_UID_LABEL) == wl.metadata.uid


def attempt(state: AdmissionCheckState) -> int:
    """The attempt the check is on: its retries so far, plus one."""
    return (state.retry_count or 0) + 1


def required_pod_sets(wl: Workload, managed: list[str]) -> list[str]:
    """Pod sets with pods that request a managed resource (all, when none is listed) (Kueue's
    ``requiredPodSets`` and ``reqIsNeeded``: a pod set admitted with no pods needs nothing)."""
    n = counts(wl)
    live = [ps for ps in wl.spec.pod_sets if n.get(ps.name, ps.count) > 0]
    if not managed:
        return [ps.name for ps in live]
    wanted = set(managed)
    out = []
    for ps in live:
        spec = ps.template.spec
        containers = [*spec.containers, *spec.init_containers]
        if any(
            wanted & (set(ct.resources.requests) | set(ct.resources.limits)) for ct in containers
        ):
            out.append(ps.name)
    return out


def counts(wl: Workload) -> dict[str, int]:
    """Admitted count per pod set (partial admission counts)."""
    adm = wl.status.admission
    out = {ps.name: ps.count for ps in wl.spec.pod_sets}
    if adm is not None:
        for psa in adm.pod_set_assignments:
            if psa.count is not None:
                out[psa.name] = psa.count
    return out


def node_selector_of(wl: Workload, pod_set: str, flavors: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The assigned flavors' node labels for ``pod_set`` (what the pods will select)."""
    adm = wl.status.admission
    psa = adm.assignment(pod_set) if adm is not None else None
    out: dict[str, str] = {}
    if psa is not None:
        for flavor in sorted(set(psa.flavors.values())):
            out.update(flavors.get(flavor, {}))
    return out


def _scheduling_key(ps: PodSet) -> Obj:
    """What IdenticalWorkloadSchedulingRequirements compares (Kueue's arePodSetsSimilar): the
    containers' requests, pod overhead resources, nodeSelector, tolerations, affinity and
    resource claims."""
    spec = ps.template.to_dict().get("spec") or {}
    return {
        "containers": [(c.get("resources") or {}).get("requests") for c in spec.get("containers", [])],
        "initContainers": [
            (c.get("resources") or {}).get("requests") for c in spec.get("initContainers", [])
        ],
        **{k: spec.get(k) for k in (
            "resources", "nodeSelector", "tolerations", "affinity", "resourceClaims")},
    }


def _mergeable(policy: str | None, first: PodSet, ps: PodSet) -> bool:
    if policy == "IdenticalPodTemplates":
        return first.template == ps.template
    if policy == "IdenticalWorkloadSchedulingRequirements":
        return _scheduling_key(first) == _scheduling_key(ps)
    return False


def merged_pod_sets(wl: Workload, prc: ProvisioningRequestConfig) -> list[tuple[PodSet, int]]:
    """The pod sets the request asks capacity for, with their admitted counts; with a
    ``podSetMergePolicy`` a pod set like an earlier one adds its count to it (Kueue's
    ``mergePodSets``)."""
    wanted = set(required_pod_sets(wl, prc.spec.managed_resources))
    n = counts(wl)
    policy = prc.spec.pod_set_merge_policy
    out: list[tuple[PodSet, int]] = []
    for ps in wl.spec.pod_sets:
        count = n.get(ps.name, ps.count)
        if ps.name not in wanted or count <= 0:
            continue
        for i, (first, total) in enumerate(out):
            if _mergeable(policy, first, ps):
                out[i] = (first, total + count)
                break
        else:
            out.append((ps, count))
    return out


def tolerations_of(
    wl: Workload, pod_set: str, tolerations: Mapping[str, list[Obj]]
) -> list[Obj]:
    """The assigned flavors' tolerations for ``pod_set``, in flavor order, without repeats."""
    adm = wl.status.admission
    psa = adm.assignment(pod_set) if adm is not None else None
    out: list[Obj] = []
    if psa is not None:
        for flavor in sorted(set(psa.flavors.values())):
            out.extend(t for t in tolerations.get(flavor, []) if t not in out)
    return out


def build(
    wl: Workload,
    check: str,
    number: int,
    prc: ProvisioningRequestConfig,
    flavors: Mapping[str, Mapping[str, str]],
    tolerations: Mapping[str, list[Obj]] | None = None,
) -> tuple[Obj, list[Obj]]:
    """The ProvisioningRequest of attempt ``number`` and its PodTemplates (Kueue's
    ``syncOwnedProvisionRequest`` and ``createPodTemplate``): each template is the pod set's
    with the assigned flavor's node labels as nodeSelector and its tolerations added (the pods
    get both on release, and cluster-autoscaler must provision for the pods as they will be:
    a tainted pool is never chosen for pods that do not tolerate it), and limits standing in
    for missing requests. The request is owned by the Workload, the templates by the request's
    Workload too (deleted with it; cleaned up explicitly on eviction and finish)."""
    name = request_name(wl.name, check, number)
    namespace = wl.namespace or "default"
    labels = {c.MANAGED_LABEL: "true", WORKLOAD_UID_LABEL: wl.metadata.uid or ""}
    owner = {
        "apiVersion": c.API_VERSION,
        "kind": "Workload",
        "name": wl.name,
        "uid": wl.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    templates: list[Obj] = []
    pod_sets: list[Obj] = []
    for ps, count in merged_pod_sets(wl, prc):
        template = copy.deepcopy(ps.template.to_dict())
        spec = template.setdefault("spec", {})
        selector = node_selector_of(wl, ps.name, flavors)
        if selector:
            spec["nodeSelector"] = {**selector, **(spec.get("nodeSelector") or {})}
        added = tolerations_of(wl, ps.name, tolerations or {})
        if added:
            own = spec.get("tolerations") or []
            spec["tolerations"] = own + [t for t in added if t not in own]
        for ct in [*spec.get("containers", []), *spec.get("initContainers", [])]:
            res = ct.setdefault("resources", {})
            limits = res.get("limits") or {}
            requests = res.setdefault("requests", {})
            for k, v in limits.items():
                requests.setdefault(k, v)
        spec.pop("schedulingGates", None)
        pt_name = pod_template_name(name, ps.name)
        templates.append(
            {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {
                    "name": pt_name, "namespace": namespace, "labels": labels,
                    "ownerReferences": [owner],
                },
                "template": template,
            }
        )
        pod_sets.append({"podTemplateRef": {"name": pt_name}, "count": count})
    # The config's parameters, then the workload's provreq.kqueue.io/ annotations (Kueue's
    # passProvReqParams).
    parameters = dict(prc.spec.parameters)
    for key, value in sorted(wl.metadata.annotations.items()):
        if key.startswith(c.PROVREQ_ANNOTATION_PREFIX):
            parameters[key.removeprefix(c.PROVREQ_ANNOTATION_PREFIX)] = value
    request = {
        "apiVersion": API_VERSION,
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": name, "namespace": namespace, "labels": labels, "ownerReferences": [owner],
        },
        "spec": {
            "provisioningClassName": prc.spec.provisioning_class_name,
            "podSets": pod_sets,
            **({"parameters": parameters} if parameters else {}),
        },
    }
    return request, templates


def _merged_into(wl: Workload, pod_set: str, prc: ProvisioningRequestConfig) -> list[str]:
    """The pod set whose template covers ``pod_set`` (itself unless merged), as a list."""
    for first, _ in merged_pod_sets(wl, prc):
        if first.name == pod_set:
            return [pod_set]
    policy = prc.spec.pod_set_merge_policy
    ps = wl.pod_set(pod_set)
    if ps is None or policy is None:
        return []
    return [first.name for first, _ in merged_pod_sets(wl, prc) if _mergeable(policy, first, ps)][:1]


def _condition(pr: Obj, type_: str) -> Obj | None:
    for cond in (pr.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


def pod_set_updates(wl: Workload, pr: Obj, prc: ProvisioningRequestConfig) -> list[PodSetUpdate]:
    """What the released pods get: the annotations cluster-autoscaler reads to let them
    consume the request's capacity, and nodeSelector entries from the request's
    provisioningClassDetails (Kueue's ``podSetUpdates``)."""
    name = pr["metadata"]["name"]
    klass = pr["spec"]["provisioningClassName"]
    details = (pr.get("status") or {}).get("provisioningClassDetails") or {}
    requested = {ps["podTemplateRef"]["name"] for ps in pr["spec"].get("podSets") or []}
    out = []
    # Every pod set the request covers gets the annotations: also those merged into an earlier
    # one's template (Kueue gives them only to the template's own pod set).
    for pod_set in (ps.name for ps in wl.spec.pod_sets):
        if not requested & {pod_template_name(name, p) for p in _merged_into(wl, pod_set, prc)}:
            continue
        selector: dict[str, str] = {}
        if prc.spec.pod_set_updates is not None:
            for entry in prc.spec.pod_set_updates.node_selector:
                value = details.get(entry.value_from_provisioning_class_detail)
                if value is not None:
                    selector[entry.key] = str(value)
        out.append(
            PodSetUpdate(
                name=pod_set,
                annotations={CONSUME_ANNOTATION: name, CLASS_ANNOTATION: klass},
                node_selector=selector,
            )
        )
    return out


def next_state(
    wl: Workload,
    state: AdmissionCheckState,
    pr: Obj,
    prc: ProvisioningRequestConfig,
    now: datetime,
) -> AdmissionCheckState:
    """The check's state as the request's conditions say (Kueue's ``syncCheckStates``).

    Failed, or BookingExpired before admission: Retry with the backoff while attempts are left
    (``retryStrategy.backoffLimitCount``), else Rejected. CapacityRevoked while the workload is
    active: Retry too, so it is evicted, its quota released and requeued, and its next attempt
    asks for new capacity (Kueue rejects, deactivating the workload; the issue that asked for
    this check wants the workload queued again). Provisioned: Ready, with the pods' updates.
    """
    strategy = prc.spec.retry_strategy
    update: dict[str, Any] = {}

    def retry_or_reject(message: str) -> dict[str, Any]:
        if attempt(state) <= strategy.backoff_limit_count:
            wait = backoff(attempt(state), strategy.backoff_base_seconds, strategy.backoff_max_seconds)
            return {
                "state": "Retry",
                "message": message,
                "requeue_after_seconds": int(wait.total_seconds()),
                "retry_count": state.retry_count,
            }
        return {"state": "Rejected", "message": message}

    failed = _condition(pr, FAILED)
    revoked = _condition(pr, CAPACITY_REVOKED)
    expired = _condition(pr, BOOKING_EXPIRED)
    provisioned = _condition(pr, PROVISIONED)
    if failed is not None:
        update = retry_or_reject(f"Retrying after failure: {failed.get('message', '')}")
        if update["state"] == "Rejected":
            update["message"] = failed.get("message", "")
    elif revoked is not None:
        if wl.spec.active and not wl.is_finished:
            update = retry_or_reject(
                f"Capacity revoked: {revoked.get('message', '')}"
            )
    elif expired is not None:
        if not wl.is_admitted:
            update = retry_or_reject(f"Retrying after booking expired: {expired.get('message', '')}")
            if update["state"] == "Rejected":
                update["message"] = expired.get("message", "")
    elif provisioned is not None:
        if state.state != "Ready":
            update = {
                "state": "Ready",
                "message": provisioned.get("message", ""),
                "pod_set_updates": pod_set_updates(wl, pr, prc),
            }
    else:
        pending = (pr.get("status") or {}).get("conditions") or []
        eta = next(
            (x.get("message", "") for x in pending if x.get("type") == PROVISIONED), ""
        )
        update = {"state": "Pending", "message": eta}
    if not update:
        return state
    if update["state"] != state.state:
        update["last_transition_time"] = now
    return state.model_copy(update=update)
