"""Reading Kueue manifests as kqueue's.

Kueue (``kueue.x-k8s.io``) is the reference kqueue follows, so most fields carry over unchanged.
This module rewrites what differs, at the level of plain dicts, before the kqueue models validate
the result:

* the group (``kueue.x-k8s.io/*`` -> ``kqueue.io/v1alpha1``);
* v1beta1 field names that v1beta2 renamed (``spec.cohort`` -> ``spec.cohortName``,
  ``priorityClassName``/``priorityClassSource`` -> ``priorityClassRef``, LocalQueue
  ``status.flavorUsage`` -> ``status.flavorsUsage``, Workload
  ``status.accumulatedPastExexcutionTimeSeconds`` -> ``accumulatedPastExecutionTimeSeconds``,
  flavor fungibility ``Borrow``/``Preempt``
  -> ``MayStopSearch``) and the v1alpha1 Cohort's ``spec.parent``;
* Kueue's labels, annotations and scheduling gate to kqueue's (also on Jobs, Pods and objects
  of any other kind, top-level and in their pod templates); renamed fields keep their place, so
  ``kqueue convert`` prints the input's keys in the input's order;
* topology-aware scheduling carries over: the Topology kind, ResourceFlavor ``topologyName``,
  pod set ``topologyRequest`` and the pod-template ``podset-*`` annotations; an admitted pod
  set's v1beta1 ``topologyAssignment`` (levels + domains) becomes v1beta2's compact slices;
* admission checks carry over: AdmissionCheck (Kueue's built-in controller names become
  kqueue's, ``parameters.apiGroup`` kqueue.io), ProvisioningRequestConfig, ClusterQueue
  ``admissionChecksStrategy`` (v1beta1's plain ``admissionChecks`` list becomes a strategy on
  all flavors) and Workload ``status.admissionChecks``;
* MultiKueue carries over: MultiKueueConfig, MultiKueueCluster (v1beta1's ``spec.kubeConfig``
  becomes v1beta2's ``spec.clusterSource.kubeConfig``), the ``kueue.x-k8s.io/multikueue``
  controller and Workload ``status.clusterName``/``nominatedClusterNames``;
* features kqueue does not implement (concurrent admission, MultiKueue's Automated quota
  management...) are dropped with a warning that names the field, never silently.
  ClusterQueue and Cohort ``fairSharing`` (weight, weightedShare) carry over; of their status
  ``fairSharing`` only ``weightedShare`` does. Admission fair sharing carries over whole:
  ClusterQueue ``spec.admissionScope``, LocalQueue ``spec.fairSharing`` (weight) and
  ``status.fairSharing`` (``admissionFairSharingStatus.consumedResources``/``lastUpdate``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final

from kqueue.api.v1alpha1.topology import encode_assignment

KUEUE_GROUP: Final = "kueue.x-k8s.io"
KQUEUE_API_VERSION: Final = "kqueue.io/v1alpha1"
KUEUE_VERSIONS: Final = frozenset({"v1beta1", "v1beta2", "v1alpha1"})
KUEUE_KINDS: Final = frozenset(
    {
        "Topology",
        "ResourceFlavor",
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "WorkloadPriorityClass",
        "Workload",
        "AdmissionCheck",
        "ProvisioningRequestConfig",
        "MultiKueueConfig",
        "MultiKueueCluster",
    }
)

# Kueue's built-in admission-check controllers -> kqueue's (docs/contracts.md §6).
CONTROLLER_NAMES: Final[dict[str, str]] = {
    "kueue.x-k8s.io/provisioning-request": "kqueue.io/provisioning-request",
    "kueue.x-k8s.io/multikueue": "kqueue.io/multikueue",
}

# Kueue label/annotation/gate -> kqueue's. Anything else under kueue.x-k8s.io/ has no meaning
# for kqueue and is reported.
KEY_MAP: Final[dict[str, str]] = {
    "kueue.x-k8s.io/queue-name": "kqueue.io/queue-name",
    "kueue.x-k8s.io/priority-class": "kqueue.io/priority-class",
    "kueue.x-k8s.io/job-min-parallelism": "kqueue.io/job-min-parallelism",
    "kueue.x-k8s.io/pod-group-name": "kqueue.io/pod-group-name",
    "kueue.x-k8s.io/pod-group-total-count": "kqueue.io/pod-group-total-count",
    "kueue.x-k8s.io/pod-group-pod-index-label": "kqueue.io/pod-group-pod-index-label",
    "kueue.x-k8s.io/elastic-job": "kqueue.io/elastic-job",
    "kueue.x-k8s.io/workload-slice-replacement-for": "kqueue.io/workload-slice-replacement-for",
    "kueue.x-k8s.io/max-exec-time-seconds": "kqueue.io/max-exec-time-seconds",
    "kueue.x-k8s.io/managed": "kqueue.io/managed",
    "kueue.x-k8s.io/admission": "kqueue.io/admission",
    "kueue.x-k8s.io/multikueue-origin": "kqueue.io/multikueue-origin",
    "kueue.x-k8s.io/prebuilt-workload-name": "kqueue.io/prebuilt-workload-name",
    # Topology requests of a pod set, on pod templates (Kueue's TAS annotations).
    **{
        f"kueue.x-k8s.io/podset-{name}": f"kqueue.io/podset-{name}"
        for name in (
            "required-topology",
            "preferred-topology",
            "unconstrained-topology",
            "slice-required-topology",
            "slice-required-topology-constraints",
            "slice-size",
            "group-name",
        )
    },
}

# ProvisioningRequest parameters given on a job (Kueue's ProvReqAnnotationPrefix).
_PROVREQ_PREFIX: Final = "provreq.kueue.x-k8s.io/"

# Kueue's own bookkeeping keys: dropped without a warning because kqueue recomputes them.
_SILENT_KEYS: Final = frozenset(
    {
        "kueue.x-k8s.io/job-uid",
        "kueue.x-k8s.io/is-group-workload",
        "kueue.x-k8s.io/pod-group-pod-index",
        "kueue.x-k8s.io/pod-group-serving",
        "kueue.x-k8s.io/resource-in-use",
        # Set by Kueue's Deployment/StatefulSet webhooks on pod templates; kqueue's set their own.
        "kueue.x-k8s.io/suspended-by-parent",
        "kueue.x-k8s.io/workload",
    }
)

# v1beta1 Workload status field that v1beta2 renamed to accumulatedPastExecutionTimeSeconds.
_V1BETA1_ACCUMULATED: Final = "accumulatedPastExexcutionTimeSeconds"

_FUNGIBILITY: Final[dict[str, str]] = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}

_PRIORITY_SOURCES: Final[dict[str, tuple[str, str]]] = {
    "kueue.x-k8s.io/workloadpriorityclass": ("kqueue.io", "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}

# Fields of Kueue features that kqueue does not implement, by kind: (path, what happens).
_UNSUPPORTED: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "ClusterQueue": (("spec", "concurrentAdmissionPolicy"),),
    # v1beta1's deprecated retry delay: Retry's delay is the check's requeueAfterSeconds.
    "AdmissionCheck": (("spec", "retryDelayMinutes"),),
    "Workload": (
        ("status", "resourceRequests"),
        ("status", "schedulingStats"),
    ),
}


# Fields of Kueue's PodSetTopologyRequest that kqueue does not keep in the Workload: where pods
# carry their ranks, which kqueue reads from the kind's integration (declaration.Ranks).
_UNSUPPORTED_TOPOLOGY_REQUEST: Final = frozenset(
    {
        "podIndexLabel",
        "subGroupIndexLabel",
        "subGroupCount",
    }
)


def _v1beta2_assignment(ta: dict[str, Any]) -> dict[str, Any]:
    """v1beta1's ``{levels, domains: [{values, count}]}`` as v1beta2's compact slices."""
    levels = [str(x) for x in ta.get("levels") or []]
    domains = [
        ([str(v) for v in d.get("values") or []], int(d.get("count") or 0))
        for d in ta.get("domains") or []
        if isinstance(d, dict)
    ]
    return encode_assignment(levels, domains).to_dict()


@dataclass(frozen=True)
class ConversionWarning:
    """Something in a Kueue manifest that kqueue does not carry over."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ShapeError(ValueError):
    """A field the conversion has to rewrite is of the wrong type; ``path`` names it.

    Fields kqueue only copies are left for the models to check; the ones rewritten here
    (labels, annotations, finalizers, scheduling gates, pod sets) must have their shape first.
    """

    def __init__(self, path: str, expected: str, got: Any) -> None:
        self.path = path
        self.detail = f"must be {expected}, got {_type_name(got)}"
        super().__init__(f"{path}: {self.detail}")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def rename_key(mapping: dict[str, Any], old: str, new: str) -> None:
    """Rename ``old`` to ``new`` where ``old`` stands, so the output keeps the input's order.

    If both are present ``new`` wins (it is the newer API's field) and ``old`` is removed.
    """
    if old not in mapping:
        return
    if new in mapping:
        del mapping[old]
        return
    items = list(mapping.items())
    mapping.clear()
    for key, value in items:
        mapping[new if key == old else key] = value


def is_kueue(doc: dict[str, Any]) -> bool:
    api_version = str(doc.get("apiVersion", ""))
    return api_version.split("/", 1)[0] == KUEUE_GROUP


def convert_keys(
    mapping: dict[str, Any] | None, path: str, warnings: list[ConversionWarning]
) -> dict[str, Any] | None:
    """Rename Kueue labels or annotations to kqueue's, reporting those with no equivalent."""
    if not mapping:
        return mapping
    if not isinstance(mapping, dict):
        raise ShapeError(path, "a mapping of strings", mapping)
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise ShapeError(path, "a mapping with string keys", key)
        if key in KEY_MAP:
            out[KEY_MAP[key]] = value
        elif key.startswith(_PROVREQ_PREFIX):
            out["provreq.kqueue.io/" + key.removeprefix(_PROVREQ_PREFIX)] = value
        elif key.startswith(KUEUE_GROUP + "/"):
            if key not in _SILENT_KEYS:
                warnings.append(
                    ConversionWarning(
                        f"{path}[{key}]", "Kueue-specific key has no kqueue meaning; dropped"
                    )
                )
        else:
            out[key] = value
    return out


def _convert_metadata(meta: Any, path: str, warnings: list[ConversionWarning]) -> None:
    if not isinstance(meta, dict):
        raise ShapeError(path, "a mapping", meta)
    for field in ("labels", "annotations"):
        if field in meta:
            meta[field] = convert_keys(meta[field], f"{path}.{field}", warnings)
    finalizers = meta.get("finalizers")
    if finalizers and not isinstance(finalizers, list):
        raise ShapeError(f"{path}.finalizers", "a list of strings", finalizers)
    if finalizers:
        # Kueue's finalizers belong to Kueue's controllers; kqueue adds its own where needed.
        kept = [f for f in finalizers if not str(f).startswith(KUEUE_GROUP)]
        if len(kept) != len(finalizers):
            meta["finalizers"] = kept


def convert_pod_spec_gates(spec: Any, path: str = "spec") -> None:
    if not isinstance(spec, dict):
        raise ShapeError(path, "a mapping", spec)
    gates = spec.get("schedulingGates")
    if gates and not isinstance(gates, list):
        raise ShapeError(f"{path}.schedulingGates", "a list", gates)
    if gates:
        for i, gate in enumerate(gates):
            if not isinstance(gate, dict):
                raise ShapeError(f"{path}.schedulingGates[{i}]", "a mapping", gate)
            name = gate.get("name")
            if isinstance(name, str) and name in KEY_MAP:
                gate["name"] = KEY_MAP[name]


def convert_workload_object(doc: dict[str, Any]) -> tuple[dict[str, Any], list[ConversionWarning]]:
    """Rewrite Kueue labels, annotations and gates on a Job, a Pod or any other object."""
    out = copy.deepcopy(doc)
    warnings: list[ConversionWarning] = []
    _convert_metadata(out.setdefault("metadata", {}), "metadata", warnings)
    spec = out.get("spec") or {}
    if not isinstance(spec, dict):
        raise ShapeError("spec", "a mapping", spec)
    if out.get("kind") == "Pod":
        convert_pod_spec_gates(spec)
    template = spec.get("template")
    if isinstance(template, dict):
        if "metadata" in template:
            _convert_metadata(template["metadata"] or {}, "spec.template.metadata", warnings)
        convert_pod_spec_gates(template.get("spec") or {}, "spec.template.spec")
    return out, warnings


def convert_any_object(doc: dict[str, Any]) -> tuple[dict[str, Any], list[ConversionWarning]]:
    """Rewrite Kueue's keys on an object of any other kind (any kind with pod templates).

    Kueue reads its labels and annotations on the top-level object, and its topology
    annotations on pod templates, wherever the kind nests them (as deep as
    ``spec.replicatedJobs[].template.spec.template``): every ``metadata`` of a template (a
    mapping with ``metadata`` and ``spec``) under ``spec`` is rewritten, and the admission gate
    in every pod spec.
    """
    out = copy.deepcopy(doc)
    warnings: list[ConversionWarning] = []
    if isinstance(out.get("metadata"), dict):
        _convert_metadata(out["metadata"], "metadata", warnings)
    spec = out.get("spec")
    if isinstance(spec, dict | list):
        _convert_templates(spec, "spec", warnings)
    return out, warnings


def _convert_templates(node: Any, path: str, warnings: list[ConversionWarning]) -> None:
    if isinstance(node, list):
        for i, item in enumerate(node):
            _convert_templates(item, f"{path}[{i}]", warnings)
        return
    if not isinstance(node, dict):
        return
    if isinstance(node.get("metadata"), dict) and isinstance(node.get("spec"), dict):
        _convert_metadata(node["metadata"], f"{path}.metadata", warnings)
    if isinstance(node.get("containers"), list):
        convert_pod_spec_gates(node, path)
    for key, value in node.items():
        if key != "metadata" and isinstance(value, dict | list):
            _convert_templates(value, f"{path}.{key}", warnings)


def from_kueue(doc: dict[str, Any]) -> tuple[dict[str, Any], list[ConversionWarning]]:
    """Turn one Kueue object (v1beta1, v1beta2, or the v1alpha1 Cohort) into its kqueue dict."""
    api_version = str(doc.get("apiVersion", ""))
    kind = str(doc.get("kind", ""))
    group, _, version = api_version.partition("/")
    if group != KUEUE_GROUP:
        raise ValueError(f"apiVersion {api_version!r} is not a Kueue API version")
    if version not in KUEUE_VERSIONS:
        raise ValueError(
            f"apiVersion {api_version!r}: unsupported Kueue version; allowed: "
            + ", ".join(f"{KUEUE_GROUP}/{v}" for v in sorted(KUEUE_VERSIONS))
        )
    if kind not in KUEUE_KINDS:
        raise ValueError(
            f"kind {kind!r} of {api_version} has no kqueue equivalent; allowed kinds: "
            + ", ".join(sorted(KUEUE_KINDS))
        )
    out = copy.deepcopy(doc)
    warnings: list[ConversionWarning] = []
    out["apiVersion"] = KQUEUE_API_VERSION
    _convert_metadata(out.setdefault("metadata", {}), "metadata", warnings)

    for section, field in _UNSUPPORTED.get(kind, ()):
        part = out.get(section)
        if isinstance(part, dict) and field in part:
            part.pop(field)
            warnings.append(
                ConversionWarning(f"{section}.{field}", "not supported by kqueue; ignored")
            )

    spec = out.get("spec")
    if isinstance(spec, dict):
        _convert_spec(kind, spec, warnings)
    status = out.get("status")
    if isinstance(status, dict):
        _convert_status(kind, status, warnings)
    return out, warnings


def _convert_spec(kind: str, spec: dict[str, Any], warnings: list[ConversionWarning]) -> None:
    if kind == "AdmissionCheck":
        name = spec.get("controllerName")
        if isinstance(name, str) and name in CONTROLLER_NAMES:
            spec["controllerName"] = CONTROLLER_NAMES[name]
        params = spec.get("parameters")
        if isinstance(params, dict) and params.get("apiGroup") == KUEUE_GROUP:
            params["apiGroup"] = "kqueue.io"
    if kind == "MultiKueueCluster" and "clusterSource" not in spec:
        # v1beta1 has kubeConfig (and clusterProfileRef) in the spec; v1beta2 under
        # clusterSource.
        source = {k: spec.pop(k) for k in ("kubeConfig", "clusterProfileRef") if k in spec}
        if source:
            spec["clusterSource"] = source
    if kind == "MultiKueueConfig" and spec.get("quotaManagement") == "Automated":
        spec.pop("quotaManagement")
        warnings.append(
            ConversionWarning(
                "spec.quotaManagement",
                "Automated quota management is not supported by kqueue; Manual is used",
            )
        )
    if kind == "ClusterQueue":
        rename_key(spec, "cohort", "cohortName")
        # v1beta1's plain list of check names is v1beta2's strategy on all flavors.
        checks = spec.get("admissionChecks")
        if isinstance(checks, list):
            if "admissionChecksStrategy" not in spec and checks:
                items = list(spec.items())
                spec.clear()
                for key, value in items:
                    if key == "admissionChecks":
                        spec["admissionChecksStrategy"] = {
                            "admissionChecks": [{"name": str(n)} for n in checks]
                        }
                    else:
                        spec[key] = value
            else:
                spec.pop("admissionChecks")
        fungibility = spec.get("flavorFungibility")
        if isinstance(fungibility, dict):
            for key in ("whenCanBorrow", "whenCanPreempt"):
                value = fungibility.get(key)
                if isinstance(value, str) and value in _FUNGIBILITY:
                    fungibility[key] = _FUNGIBILITY[value]
    elif kind == "Cohort":
        rename_key(spec, "parent", "parentName")  # v1alpha1
    elif kind == "Workload":
        source = spec.pop("priorityClassSource", None)
        name = spec.get("priorityClassName")
        if name and "priorityClassRef" not in spec:
            rename_key(spec, "priorityClassName", "priorityClassRef")
            group_kind = _PRIORITY_SOURCES.get(str(source or ""))
            if group_kind is None:
                warnings.append(
                    ConversionWarning(
                        "spec.priorityClassSource",
                        f"unknown source {source!r}; priority class {name!r} dropped (allowed: "
                        + ", ".join(sorted(_PRIORITY_SOURCES))
                        + ")",
                    )
                )
                spec.pop("priorityClassRef")
            else:
                spec["priorityClassRef"] = {
                    "group": group_kind[0],
                    "kind": group_kind[1],
                    "name": name,
                }
        else:
            spec.pop("priorityClassName", None)
        ref = spec.get("priorityClassRef")
        if isinstance(ref, dict) and ref.get("group") == KUEUE_GROUP:
            ref["group"] = "kqueue.io"
        pod_sets = spec.get("podSets")
        for i, pod_set in enumerate(pod_sets if isinstance(pod_sets, list) else []):
            if not isinstance(pod_set, dict):
                continue
            request = pod_set.get("topologyRequest")
            if isinstance(request, dict):
                for key in sorted(k for k in request if k in _UNSUPPORTED_TOPOLOGY_REQUEST):
                    request.pop(key)
                    warnings.append(
                        ConversionWarning(
                            f"spec.podSets[{i}].topologyRequest.{key}",
                            "ignored: kqueue reads where pods carry their ranks from the "
                            "integration of the Workload's owner (docs/topology.md)",
                        )
                    )
            template = pod_set.get("template")
            if isinstance(template, dict) and "metadata" in template:
                _convert_metadata(
                    template["metadata"] or {},
                    f"spec.podSets[{i}].template.metadata",
                    warnings,
                )


def _convert_status(kind: str, status: dict[str, Any], warnings: list[ConversionWarning]) -> None:
    fair = status.get("fairSharing")
    if kind in ("ClusterQueue", "Cohort") and isinstance(fair, dict):
        # v1beta1 also has admissionFairSharingStatus here; only LocalQueues carry that usage.
        for key in sorted(k for k in fair if k != "weightedShare"):
            fair.pop(key)
            warnings.append(
                ConversionWarning(f"status.fairSharing.{key}", "not supported by kqueue; ignored")
            )
    if kind == "LocalQueue":
        rename_key(status, "flavorUsage", "flavorsUsage")
    if kind == "Workload":
        if _V1BETA1_ACCUMULATED in status:
            # v1beta1's misspelt name; v1beta2 (and kqueue) spell it correctly.
            accumulated = status.pop(_V1BETA1_ACCUMULATED)
            status.setdefault("accumulatedPastExecutionTimeSeconds", accumulated)
        admission = status.get("admission")
        if isinstance(admission, dict):
            assignments = admission.get("podSetAssignments")
            for psa in assignments if isinstance(assignments, list) else []:
                ta = psa.get("topologyAssignment") if isinstance(psa, dict) else None
                if isinstance(ta, dict) and "domains" in ta:
                    psa["topologyAssignment"] = _v1beta2_assignment(ta)
