"""AppWrapper (workload.codeflare.dev/v1beta2) -> Workload, as Kueue's appwrapper integration
builds it (pkg/controller/jobs/appwrapper).

An AppWrapper wraps other objects (``spec.components[].template``: a Job, a PyTorchJob, a
Deployment, a LeaderWorkerSet...) and is queued whole: one Workload, one pod set per entry of
its components' ``podSets``, in order. Each entry names a pod template inside its component by a
``path`` rooted at ``template`` (``template.spec.template``, ``template.spec.replicatedJobs[0].
template.spec.template``) and the number of pods made from it (``replicas``, default 1). The pod
sets are named as Kueue names them: ``<appwrapper name>-<index>`` over all components.

A component without ``podSets`` has them filled in from its kind, as the AppWrapper operator's
webhook infers them (its ``InferPodSets``; :func:`infer_pod_sets`). kqueue queues only
AppWrappers whose components it knows: a kind kqueue integrates, or one that makes no pods
(:data:`POD_FREE_KINDS`); anything else is refused naming the component's field
(:func:`component_errors`), since its pods would run unheld.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kqueue.api.integrations.common import (
    IntegrationError,
    PriorityResolver,
    clean_template_metadata,
    owner_workload_name,
    top_level_workload_doc,
)
from kqueue.api.integrations.declaration import Integration, KueueKeys, Ranks, Workloads
from kqueue.api.integrations.job import parse_workload
from kqueue.api.v1alpha1 import Workload

GROUP: Final = "workload.codeflare.dev"
API_VERSION: Final = f"{GROUP}/v1beta2"
KIND: Final = "AppWrapper"
PLURAL: Final = "appwrappers"
# The label the AppWrapper operator puts on every object it creates and on their pod templates.
APPWRAPPER_LABEL: Final = "workload.codeflare.dev/appwrapper"
# The pod-set name kqueue gives each template through the podSetInfos' labels: how a pod finds
# its pod set (the operator labels pods with the AppWrapper's name only).
POD_SET_LABEL: Final = "kqueue.io/appwrapper-pod-set"
# A path's first element: the component's template (the wrapped object).
PATH_ROOT: Final = "template"
# Components that make no pods: wrapped alongside the workload, they need no quota.
POD_FREE_KINDS: Final = frozenset(
    {("v1", "Service"), ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "PersistentVolumeClaim")}
)
# A Workload holds at most 8 pod sets (Kueue's MaxPodSets).
MAX_POD_SETS: Final = 8

_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def parse_path(path: str) -> list[str | int]:
    """The steps of a podSets ``path`` after its root ``template`` (keys and list indexes), as
    the AppWrapper operator reads it; raises ValueError saying what is wrong."""
    if not path.startswith(PATH_ROOT):
        raise ValueError(f"must start with {PATH_ROOT!r}, got {path!r}")
    rest, steps, pos = path[len(PATH_ROOT) :], [], 0
    while pos < len(rest):
        m = _STEP.match(rest, pos)
        if m is None:
            raise ValueError(f"invalid element {rest[pos:]!r} in {path!r}")
        steps.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    return steps


def at_path(component: Mapping[str, Any], path: str) -> Any:
    """The value at a podSets ``path`` in a component; raises ValueError naming what is missing."""
    node: Any = component.get(PATH_ROOT)
    walked = PATH_ROOT
    for step in parse_path(path):
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                raise ValueError(f"{walked} has no element {step}")
            node = node[step]
            walked += f"[{step}]"
        else:
            if not isinstance(node, Mapping) or step not in node:
                raise ValueError(f"{walked} has no field {step!r}")
            node = node[step]
            walked += f".{step}"
    return node


def _count(obj: Mapping[str, Any], path: list[str], default: int = 1) -> int:
    node: Any = obj
    for key in path:
        if not isinstance(node, Mapping) or node.get(key) is None:
            return default
        node = node[key]
    return node if isinstance(node, int) and not isinstance(node, bool) else default


def _job_pods(spec: Mapping[str, Any]) -> int:
    """A Job's pods at once: parallelism (default 1), at most completions."""
    pods = _count(spec, ["parallelism"])
    completions = spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool) and completions < pods:
        pods = completions
    return pods


def _ray_pod_sets(cluster: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"path": f"{prefix}.headGroupSpec.template", "replicas": 1}]
    groups = cluster.get("workerGroupSpecs")
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        if isinstance(group, Mapping) and "template" in group:
            out.append({"path": f"{prefix}.workerGroupSpecs[{i}].template", "replicas": _count(group, ["replicas"])})
    return out


def infer_pod_sets(template: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The ``podSets`` the AppWrapper operator's webhook fills in for a wrapped object of a kind
    it knows (its ``InferPodSets``); None for another kind (its podSets must be given)."""
    kind = (str(template.get("apiVersion") or ""), str(template.get("kind") or ""))
    spec: Mapping[str, Any] = template["spec"] if isinstance(template.get("spec"), Mapping) else {}
    if kind == ("batch/v1", "Job"):
        return [{"path": "template.spec.template", "replicas": _job_pods(spec)}]
    if kind == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        out = []
        rjobs = spec.get("replicatedJobs")
        for i, rjob in enumerate(rjobs if isinstance(rjobs, list) else []):
            if isinstance(rjob, Mapping) and isinstance(rjob.get("template"), Mapping):
                job_spec = rjob["template"].get("spec") or {}
                out.append(
                    {
                        "path": f"template.spec.replicatedJobs[{i}].template.spec.template",
                        "replicas": _count(rjob, ["replicas"]) * _job_pods(job_spec),
                    }
                )
        return out
    if kind == ("kubeflow.org/v1", "PyTorchJob"):
        specs = spec.get("pytorchReplicaSpecs") or {}
        return [
            {"path": f"template.spec.pytorchReplicaSpecs.{rt}.template", "replicas": _count(specs[rt], ["replicas"])}
            for rt in ("Master", "Worker")
            if isinstance(specs.get(rt), Mapping) and "template" in specs[rt]
        ]
    if kind == ("ray.io/v1", "RayCluster"):
        return _ray_pod_sets(spec, "template.spec")
    if kind == ("ray.io/v1", "RayJob"):
        cluster = spec.get("rayClusterSpec")
        return _ray_pod_sets(cluster, "template.spec.rayClusterSpec") if isinstance(cluster, Mapping) else []
    if kind == ("v1", "Pod"):
        return [{"path": "template", "replicas": 1}]
    if kind in (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")):
        return [{"path": "template.spec.template", "replicas": _count(spec, ["replicas"])}]
    return None


# Kinds whose spec alone fixes how many pods each template makes. Not Ray: an autoscaled
# cluster's workers vary between minReplicas and maxReplicas.
_FIXED_SIZE_KINDS: Final = frozenset(
    {
        ("batch/v1", "Job"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("kubeflow.org/v1", "PyTorchJob"),
        ("v1", "Pod"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
    }
)
LWS_KIND: Final = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


def pods_made(template: Mapping[str, Any]) -> dict[str, int] | None:
    """How many pods the wrapped object makes from each of its pod templates (by ``path``),
    for a kind whose spec fixes it; None for another. A LeaderWorkerSet, which the operator
    does not infer podSets for, makes ``replicas`` leaders and ``replicas * (size - 1)``
    workers (its workers' template serves the leaders too when it has no leader template)."""
    kind = (str(template.get("apiVersion") or ""), str(template.get("kind") or ""))
    if kind in _FIXED_SIZE_KINDS:
        return {str(ps["path"]): int(ps["replicas"]) for ps in infer_pod_sets(template) or []}
    if kind != LWS_KIND:
        return None
    spec: Mapping[str, Any] = template["spec"] if isinstance(template.get("spec"), Mapping) else {}
    groups = _count(spec, ["replicas"])
    lwt = spec.get("leaderWorkerTemplate")
    lwt = lwt if isinstance(lwt, Mapping) else {}
    size = _count(lwt, ["size"])
    root = "template.spec.leaderWorkerTemplate"
    if isinstance(lwt.get("leaderTemplate"), Mapping):
        return {f"{root}.leaderTemplate": groups, f"{root}.workerTemplate": groups * (size - 1)}
    return {f"{root}.workerTemplate": groups * size}


def _count_errors(i: int, component: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Declared podSets whose replicas are not the pods the wrapped object makes from that
    template: the Workload would admit a gang that kube-scheduler never places whole (pods
    beyond the count stay gated in its PodGroup, and kube-scheduler binds no pod of a group
    while one is gated; a count above the pods is a minCount never met)."""
    made = pods_made(component[PATH_ROOT])
    declared = component.get("podSets")
    if made is None or not isinstance(declared, list):
        return []
    kind = str(component[PATH_ROOT].get("kind"))
    errors: list[tuple[str, str]] = []
    for j, ps in enumerate(declared):
        if not isinstance(ps, Mapping) or str(ps.get("path")) not in made:
            continue
        replicas = ps.get("replicas", 1)
        want = made[str(ps["path"])]
        if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas != want:
            errors.append(
                (
                    f"spec.components[{i}].podSets[{j}].replicas",
                    f"{replicas}, but the {kind} makes {want} pods from {ps['path']}: its gang "
                    f"would never be placed whole; allowed: {want}",
                )
            )
    return errors


def _old_component(old: Mapping[str, Any], i: int) -> Any:
    components = (old.get("spec") or {}).get("components")
    return components[i] if isinstance(components, list) and i < len(components) else None


def _components(aw: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    components = (aw.get("spec") or {}).get("components")
    if not isinstance(components, list) or not components:
        raise IntegrationError("spec.components", "required: one or more wrapped objects")
    for i, component in enumerate(components):
        if not isinstance(component, Mapping) or not isinstance(component.get(PATH_ROOT), Mapping):
            raise IntegrationError(f"spec.components[{i}].template", "required: the wrapped object")
    return components


def component_pod_sets(component: Mapping[str, Any], path: str) -> Sequence[Mapping[str, Any]]:
    """A component's ``podSets``: its own, else those its kind implies (:func:`infer_pod_sets`)."""
    pod_sets = component.get("podSets")
    if pod_sets is None:
        return infer_pod_sets(component[PATH_ROOT]) or []
    if not isinstance(pod_sets, list):
        raise IntegrationError(f"{path}.podSets", "must be a list")
    return pod_sets


@dataclass(frozen=True)
class WrappedPodSet:
    """One entry of a component's ``podSets``, resolved."""

    name: str
    component: int
    index: int
    """Its index in its component's podSets (the podSetInfos entry the operator reads)."""
    count: int
    template: dict[str, Any]
    field: str
    """Where its template is: ``spec.components[i].template...``."""


def pod_set_name(aw: Mapping[str, Any], index: int) -> str:
    """Kueue's pod set name: ``<appwrapper name>-<index over all components>``, lower case."""
    return f"{(aw.get('metadata') or {}).get('name', '')}-{index}".lower()


def wrapped_pod_sets(aw: Mapping[str, Any]) -> list[WrappedPodSet]:
    """The AppWrapper's pod sets, in order; raises :class:`IntegrationError` naming the field."""
    out: list[WrappedPodSet] = []
    for i, component in enumerate(_components(aw)):
        cpath = f"spec.components[{i}]"
        for j, entry in enumerate(component_pod_sets(component, cpath)):
            epath = f"{cpath}.podSets[{j}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str):
                raise IntegrationError(f"{epath}.path", "required: where the pod template is, e.g. template.spec.template")
            replicas = entry.get("replicas", 1)
            if replicas is None:
                replicas = 1
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise IntegrationError(f"{epath}.replicas", f"must be a non-negative integer, got {replicas!r}")
            try:
                template = at_path(component, entry["path"])
            except ValueError as err:
                raise IntegrationError(f"{epath}.path", str(err)) from None
            if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
                raise IntegrationError(f"{epath}.path", f"{entry['path']} is not a pod template (no spec)")
            pod_template = copy.deepcopy(dict(template))
            clean_template_metadata(pod_template)
            out.append(
                WrappedPodSet(
                    name=pod_set_name(aw, len(out)),
                    component=i,
                    index=j,
                    count=replicas,
                    template=pod_template,
                    field=f"{cpath}.{entry['path']}",
                )
            )
    if len(out) > MAX_POD_SETS:
        raise IntegrationError(
            "spec.components", f"too many pod sets: {len(out)} (a Workload holds at most {MAX_POD_SETS})"
        )
    return out


def component_errors(
    aw: Mapping[str, Any],
    managed_kinds: Iterable[tuple[str, str]],
    *,
    old: Mapping[str, Any] | None = None,
) -> list[tuple[str, str]]:
    """``(field, message)`` of what kqueue cannot queue in an AppWrapper: a wrapped kind it does
    not manage (its pods would run without waiting for quota), an AppWrapper inside an
    AppWrapper, a pod-making kind without podSets, declared replicas that are not the pods the
    wrapped object makes (:func:`pods_made`), pod sets it cannot read.

    With ``old`` (an update), the counts are checked only in the components the update changes:
    an AppWrapper accepted before that check existed is never refused the updates it still
    needs (kqueue's own suspend and resume)."""
    allowed = set(managed_kinds) - {(API_VERSION, KIND)}
    errors: list[tuple[str, str]] = []
    try:
        components = _components(aw)
    except IntegrationError as err:
        return [(err.path, err.detail)]
    for i, component in enumerate(components):
        template = component[PATH_ROOT]
        kind = (str(template.get("apiVersion") or ""), str(template.get("kind") or ""))
        path = f"spec.components[{i}].template"
        if kind in POD_FREE_KINDS:
            if component.get("podSets"):
                errors.append((f"spec.components[{i}].podSets", f"a {kind[1]} makes no pods: remove its podSets"))
            continue
        if kind not in allowed:
            names = ", ".join(sorted(f"{k} ({v})" for v, k in allowed | POD_FREE_KINDS))
            errors.append(
                (
                    f"{path}.kind",
                    f"{kind[1] or '<none>'} ({kind[0] or 'no apiVersion'}) is not a kind kqueue manages: "
                    f"its pods would not wait for the AppWrapper's quota; allowed: {names}",
                )
            )
            continue
        if component.get("podSets") is None and infer_pod_sets(template) is None:
            errors.append(
                (
                    f"spec.components[{i}].podSets",
                    f"required for a {kind[1]}: the path and replicas of each of its pod templates",
                )
            )
        if old is None or _old_component(old, i) != component:
            errors.extend(_count_errors(i, component))
    if errors:
        return errors
    try:
        wrapped_pod_sets(aw)
    except IntegrationError as err:
        errors.append((err.path, err.detail))
    return errors


def managed_kinds() -> frozenset[tuple[str, str]]:
    """The kinds kqueue integrates (``(apiVersion, kind)``): what an AppWrapper may wrap."""
    # The registry lists this module's declaration: read it when called, not on import.
    from kqueue.api.integrations.registry import BY_KIND

    return frozenset(BY_KIND)


def workload_name_for_appwrapper(aw: Mapping[str, Any]) -> str:
    return owner_workload_name(aw, KIND, GROUP)


def workload_for_appwrapper(
    aw: Mapping[str, Any],
    priorities: PriorityResolver,
    *,
    label_keys_to_copy: Iterable[str] = (),
) -> Workload:
    """The Workload kqueue creates for ``aw``; raises :class:`IntegrationError` naming the
    AppWrapper's field."""
    if aw.get("kind") != KIND:
        raise IntegrationError("kind", f"expected an AppWrapper, got {aw.get('kind')!r}")
    errors = component_errors(aw, managed_kinds())
    if errors:
        raise IntegrationError(*errors[0])
    sets = wrapped_pod_sets(aw)
    if not sets:
        raise IntegrationError("spec.components", "no pod sets: none of its components makes pods")
    doc = top_level_workload_doc(
        aw,
        api_version=API_VERSION,
        kind=KIND,
        name=workload_name_for_appwrapper(aw),
        pod_sets=[{"name": s.name, "count": s.count, "template": s.template} for s in sets],
        pod_specs=[s.template["spec"] for s in sets],
        priorities=priorities,
        label_keys_to_copy=label_keys_to_copy,
    )
    return parse_workload(doc, template_paths=[s.field for s in sets])


def _condition_true(aw: Mapping[str, Any], kind: str) -> bool:
    conditions = (aw.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions if isinstance(c, Mapping))


def quota_reserved(aw: Mapping[str, Any]) -> bool:
    """The operator's ``QuotaReserved`` condition: its components are (or may be) deployed
    (Kueue's ``IsActive``)."""
    return _condition_true(aw, "QuotaReserved")


def finished_condition(aw: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(Succeeded|Failed, message)`` from the operator's phase (Kueue's ``Finished``): a Failed
    AppWrapper counts once its components are deleted (``ResourcesDeployed`` no longer true)."""
    phase = (aw.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return "Succeeded", "AppWrapper finished successfully"
    if phase == "Failed" and not _condition_true(aw, "ResourcesDeployed"):
        return "Failed", "AppWrapper failed"
    return None


# Annotations of a component's podSets entry saying where its pods carry their ranks (the
# AppWrapper operator's names, which Kueue reads as podIndexLabel, subGroupIndexLabel and
# subGroupCount).
TAS_POD_INDEX_LABEL_ANNOTATION: Final = "workload.codeflare.dev.appwrapper/tas-pod-index-label"
TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION: Final = (
    "workload.codeflare.dev.appwrapper/tas-sub-group-index-label"
)
TAS_SUB_GROUP_COUNT_ANNOTATION: Final = "workload.codeflare.dev.appwrapper/tas-sub-group-count"


def ranks(aw: Mapping[str, Any], _: Workload) -> dict[str, Ranks]:
    """Per pod set whose podSets entry names a pod index label, its ranks. A sub-group count
    that is not an integer is left out, as Kueue ignores it (its pods then go oldest first)."""
    out: dict[str, Ranks] = {}
    k = 0
    for i, component in enumerate(_components(aw)):
        for entry in component_pod_sets(component, f"spec.components[{i}]"):
            annotations = (entry.get("annotations") if isinstance(entry, Mapping) else None) or {}
            label = annotations.get(TAS_POD_INDEX_LABEL_ANNOTATION)
            if label:
                count = str(annotations.get(TAS_SUB_GROUP_COUNT_ANNOTATION, ""))
                out[pod_set_name(aw, k)] = Ranks(
                    str(label),
                    annotations.get(TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION),
                    int(count) if count.lstrip("-").isdigit() else None,
                )
            k += 1
    return out


INTEGRATION: Final = Integration(
    framework="workload.codeflare.dev/appwrapper",
    api_version=API_VERSION,
    kind=KIND,
    workloads=Workloads.OWN,
    build=workload_for_appwrapper,
    finished=finished_condition,
    operator="appwrapper",
    kueue_keys=KueueKeys.ON_CONVERT,
    ranks=ranks,
)
