"""Every rule Kueue's CRD schema (CEL) and webhooks enforce, plus those of kqueue's extensions.

Types, enums, list sizes and name formats are checked when a model is built (pydantic); this
module checks what spans several fields or two versions of an object. Each error names the
object, the field path and what is allowed:

    ClusterQueue team-a: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be
    less than or equal to nominalQuota (10), got 12 (allowed: at most 10)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from pydantic import ValidationError

from kqueue.api.quantity import Quantity
from kqueue.api.v1alpha1.admissioncheck import AdmissionCheck, ProvisioningRequestConfig
from kqueue.api.v1alpha1.base import (
    LABEL_ALLOWED,
    LABEL_VALUE_ALLOWED,
    QUALIFIED_NAME_ALLOWED,
    SUBDOMAIN_ALLOWED,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
)
from kqueue.api.v1alpha1.clusterqueue import ClusterQueue, FairSharing, ResourceGroup
from kqueue.api.v1alpha1.cohort import Cohort
from kqueue.api.v1alpha1.errors import FieldError, ValidationFailed, from_pydantic
from kqueue.api.v1alpha1.localqueue import LocalQueue, LocalQueueFairSharing
from kqueue.api.v1alpha1.meta import Condition, KObject, LabelSelector, Toleration
from kqueue.api.v1alpha1.multikueue import MultiKueueCluster, MultiKueueConfig
from kqueue.api.v1alpha1.podtemplate import Container
from kqueue.api.v1alpha1.resourceflavor import ResourceFlavor
from kqueue.api.v1alpha1.topology import (
    HOSTNAME_LABEL,
    PodSetTopologyRequest,
    Topology,
    topology_request_from_annotations,
)
from kqueue.api.v1alpha1.validation_checks import (
    validate_admission_check_update,
    validate_multikueue_cluster,
    validate_multikueue_config,
    validate_provisioning_config,
    validate_strategy,
    validate_workload_checks,
    validate_workload_cluster_update,
)
from kqueue.api.v1alpha1.workload import Admission, PodSet, PriorityClassRef, Workload

# Kueue's webhook limits on a ClusterQueue as a whole (the per-list limits are in the schema).
MAX_TOTAL_FLAVORS: Final = 256
MAX_TOTAL_COVERED_RESOURCES: Final = 256
MAX_FLAVOR_RESOURCE_COMBINATIONS: Final = 512
# The API server's limit on the total size of an object's annotations.
MAX_ANNOTATIONS_BYTES: Final = 256 * 1024
# kqueue counts pods itself (Kueue's reserved resource name).
RESERVED_RESOURCE: Final = "pods"

_IMMUTABLE: Final = "field is immutable"


class _Errors:
    def __init__(self, obj: KObject) -> None:
        self.obj = obj.ref
        self.items: list[FieldError] = []

    def add(self, path: str, message: str, allowed: str = "") -> None:
        self.items.append(FieldError(path=path, message=message, allowed=allowed, obj=self.obj))


def validate(obj: KObject, *, fresh: bool = False) -> list[FieldError]:
    """Problems of ``obj`` as a new object (create); empty if it is valid.

    Models are checked against their types when built, but not when changed afterwards, so the
    object is first checked again as its manifest (a list grown past its limit, a name set to
    something invalid), then against the rules below. ``fresh`` says ``obj`` was just read from
    a manifest and not changed since (the admission webhook's objects): that read checked the
    types, so the round trip, most of the cost of a check, is skipped.
    """
    if fresh:
        return validate_rules(obj)
    try:
        type(obj).model_validate(obj.to_dict())
    except ValidationError as exc:
        schema_errors = from_pydantic(type(obj), exc, obj.ref)
    else:
        schema_errors = []
    return schema_errors + validate_rules(obj)


def validate_rules(obj: KObject) -> list[FieldError]:
    """Problems of a well-typed ``obj`` beyond its types: the rules that span several fields
    (what Kueue's CEL rules and webhooks check). ``parse_object`` runs these after parsing."""
    errs = _Errors(obj)
    _validate_metadata(obj, errs)
    if isinstance(obj, Topology):
        _validate_topology(obj, errs)
    elif isinstance(obj, ResourceFlavor):
        _validate_resource_flavor(obj, errs)
    elif isinstance(obj, ClusterQueue):
        _validate_cluster_queue(obj, errs)
    elif isinstance(obj, Cohort):
        _validate_cohort(obj, errs)
    elif isinstance(obj, LocalQueue):
        _validate_conditions(obj.status.conditions, "status.conditions", errs)
        _validate_fair_sharing(obj.spec.fair_sharing, errs)
    elif isinstance(obj, Workload):
        _validate_workload(obj, errs)
        validate_workload_checks(obj, errs.add)
        for i, state in enumerate(obj.status.admission_checks):
            for j, update in enumerate(state.pod_set_updates):
                _validate_tolerations(
                    update.tolerations,
                    f"status.admissionChecks[{i}].podSetUpdates[{j}].tolerations",
                    errs,
                )
    elif isinstance(obj, AdmissionCheck):
        _validate_conditions(obj.status.conditions, "status.conditions", errs)
    elif isinstance(obj, ProvisioningRequestConfig):
        validate_provisioning_config(obj, errs.add)
    elif isinstance(obj, MultiKueueConfig):
        validate_multikueue_config(obj, errs.add)
    elif isinstance(obj, MultiKueueCluster):
        _validate_conditions(obj.status.conditions, "status.conditions", errs)
        validate_multikueue_cluster(obj, errs.add)
    return errs.items


def validate_update(old: KObject, new: KObject, *, fresh: bool = False) -> list[FieldError]:
    """Problems of ``new`` replacing ``old`` (update): those of ``new`` and the immutable fields.
    ``fresh``: as for :func:`validate`, about ``new``."""
    items = validate(new, fresh=fresh)
    errs = _Errors(new)
    if type(old) is not type(new):
        errs.add("kind", f"cannot change from {old.KIND} to {new.KIND}", old.KIND)
    else:
        if old.metadata.name != new.metadata.name:
            errs.add("metadata.name", _IMMUTABLE, repr(old.metadata.name))
        if new.NAMESPACED and (old.metadata.namespace or "default") != (
            new.metadata.namespace or "default"
        ):
            errs.add("metadata.namespace", _IMMUTABLE, repr(old.metadata.namespace))
        if isinstance(old, LocalQueue) and isinstance(new, LocalQueue):
            _validate_local_queue_update(old, new, errs)
        elif isinstance(old, Workload) and isinstance(new, Workload):
            _validate_workload_update(old, new, errs)
            validate_workload_cluster_update(old, new, errs.add)
        elif isinstance(old, AdmissionCheck) and isinstance(new, AdmissionCheck):
            validate_admission_check_update(old, new, errs.add)
    return items + errs.items


def check(obj: KObject) -> None:
    """Raise :class:`ValidationFailed` if ``obj`` is invalid."""
    errors = validate(obj)
    if errors:
        raise ValidationFailed(errors)


def check_update(old: KObject, new: KObject) -> None:
    """Raise :class:`ValidationFailed` if ``new`` cannot replace ``old``."""
    errors = validate_update(old, new)
    if errors:
        raise ValidationFailed(errors)


# --- metadata ------------------------------------------------------------------------------------


def _validate_metadata(obj: KObject, errs: _Errors) -> None:
    meta = obj.metadata
    if not is_dns1123_subdomain(meta.name):
        errs.add("metadata.name", f"{meta.name!r} is not a valid name", SUBDOMAIN_ALLOWED)
    if obj.NAMESPACED and meta.namespace and not is_dns1123_label(meta.namespace):
        errs.add(
            "metadata.namespace", f"{meta.namespace!r} is not a valid namespace", LABEL_ALLOWED
        )
    _validate_labels(meta.labels, "metadata.labels", errs)
    size = 0
    for key, value in meta.annotations.items():
        if not is_qualified_name(key):
            errs.add(
                f"metadata.annotations[{key}]", "invalid annotation key", QUALIFIED_NAME_ALLOWED
            )
        size += len(key.encode()) + len(value.encode())
    if size > MAX_ANNOTATIONS_BYTES:
        errs.add(
            "metadata.annotations",
            f"annotations take {size} bytes",
            f"at most {MAX_ANNOTATIONS_BYTES} bytes in total",
        )
    for i, finalizer in enumerate(meta.finalizers):
        if not is_qualified_name(finalizer):
            errs.add(
                f"metadata.finalizers[{i}]",
                f"{finalizer!r} is not a valid finalizer",
                QUALIFIED_NAME_ALLOWED,
            )


def _validate_labels(labels: Mapping[str, str], path: str, errs: _Errors) -> None:
    for key, value in labels.items():
        if not is_qualified_name(key):
            errs.add(f"{path}[{key}]", f"{key!r} is not a valid label key", QUALIFIED_NAME_ALLOWED)
        if not is_label_value(value):
            errs.add(f"{path}[{key}]", f"{value!r} is not a valid label value", LABEL_VALUE_ALLOWED)


def _validate_label_selector(selector: LabelSelector, path: str, errs: _Errors) -> None:
    _validate_labels(selector.match_labels, f"{path}.matchLabels", errs)
    for i, req in enumerate(selector.match_expressions):
        rpath = f"{path}.matchExpressions[{i}]"
        if not is_qualified_name(req.key):
            errs.add(
                f"{rpath}.key", f"{req.key!r} is not a valid label key", QUALIFIED_NAME_ALLOWED
            )
        if req.operator in ("In", "NotIn") and not req.values:
            errs.add(
                f"{rpath}.values",
                f"must be non-empty when operator is {req.operator}",
                "one or more values",
            )
        if req.operator in ("Exists", "DoesNotExist") and req.values:
            errs.add(
                f"{rpath}.values", f"must be empty when operator is {req.operator}", "no values"
            )
        for j, value in enumerate(req.values):
            if not is_label_value(value):
                errs.add(
                    f"{rpath}.values[{j}]",
                    f"{value!r} is not a valid label value",
                    LABEL_VALUE_ALLOWED,
                )


def _validate_conditions(conditions: list[Condition], path: str, errs: _Errors) -> None:
    seen: dict[str, int] = {}
    for i, cond in enumerate(conditions):
        if cond.type in seen:
            errs.add(
                f"{path}[{i}].type",
                f"duplicate condition type {cond.type!r} (also {path}[{seen[cond.type]}])",
                "one condition per type",
            )
        else:
            seen[cond.type] = i


def _validate_unique_names(names: Iterable[str], path: str, what: str, errs: _Errors) -> None:
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            errs.add(
                f"{path}[{i}].name",
                f"duplicate {what} {name!r} (also {path}[{seen[name]}])",
                f"each {what} once",
            )
        else:
            seen[name] = i


# --- ResourceFlavor ------------------------------------------------------------------------------


def _validate_topology(topo: Topology, errs: _Errors) -> None:
    keys = topo.level_keys()
    for i, key in enumerate(keys):
        path = f"spec.levels[{i}].nodeLabel"
        if not is_qualified_name(key):
            errs.add(path, f"{key!r} is not a valid node label key", QUALIFIED_NAME_ALLOWED)
        if key == HOSTNAME_LABEL and i != len(keys) - 1:
            errs.add(
                path,
                f"{HOSTNAME_LABEL} must be the last level (it names single nodes)",
                f"{HOSTNAME_LABEL} only as the last level",
            )
    seen: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key in seen:
            errs.add(
                f"spec.levels[{i}].nodeLabel",
                f"duplicate nodeLabel {key!r} (also spec.levels[{seen[key]}])",
                "each node label once",
            )
        seen.setdefault(key, i)


def _validate_resource_flavor(rf: ResourceFlavor, errs: _Errors) -> None:
    _validate_labels(rf.spec.node_labels, "spec.nodeLabels", errs)
    if rf.spec.topology_name is not None:
        if not is_dns1123_subdomain(rf.spec.topology_name):
            errs.add(
                "spec.topologyName",
                f"{rf.spec.topology_name!r} is not a valid Topology name",
                SUBDOMAIN_ALLOWED,
            )
        if not rf.spec.node_labels:
            # Kueue's rule: without node labels a topology-aware flavor would claim every node.
            errs.add(
                "spec.nodeLabels",
                "at least one nodeLabel is required when topology is set",
                "one or more node labels selecting the flavor's nodes",
            )
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(rf.spec.node_taints):
        path = f"spec.nodeTaints[{i}]"
        if not is_qualified_name(taint.key):
            errs.add(
                f"{path}.key", f"{taint.key!r} is not a valid taint key", QUALIFIED_NAME_ALLOWED
            )
        if taint.value is not None and not is_label_value(taint.value):
            errs.add(
                f"{path}.value", f"{taint.value!r} is not a valid taint value", LABEL_VALUE_ALLOWED
            )
        if (taint.key, taint.effect) in seen:
            errs.add(
                path,
                f"duplicate taint {taint.key}:{taint.effect}",
                "taints unique by key and effect",
            )
        seen.add((taint.key, taint.effect))
    _validate_tolerations(rf.spec.tolerations, "spec.tolerations", errs)


_TOLERATION_OPERATORS: Final = ("Equal", "Exists")
_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _validate_tolerations(
    tolerations: list[Toleration], path: str, errs: _Errors, *, pod: bool = False
) -> None:
    """Kueue's CEL rules on a flavor's tolerations; Kubernetes' rules for a pod's (``pod``),
    which also accept empty strings for operator and effect."""
    operators = ("", *_TOLERATION_OPERATORS) if pod else _TOLERATION_OPERATORS
    effects = ("", *_EFFECTS) if pod else _EFFECTS
    for i, t in enumerate(tolerations):
        tpath = f"{path}[{i}]"
        if t.key and not is_qualified_name(t.key):
            errs.add(f"{tpath}.key", f"{t.key!r} is not a valid taint key", QUALIFIED_NAME_ALLOWED)
        if not t.key and t.operator != "Exists":
            errs.add(
                f"{tpath}.operator",
                "must be Exists when key is empty (which matches all keys)",
                "Exists",
            )
        if t.operator is not None and t.operator not in operators:
            errs.add(
                f"{tpath}.operator", f"unsupported value {t.operator!r}", "Equal (default), Exists"
            )
        if t.operator == "Exists" and t.value:
            errs.add(f"{tpath}.value", "must be empty when operator is Exists", "no value")
        if t.effect is not None and t.effect not in effects:
            errs.add(f"{tpath}.effect", f"unsupported value {t.effect!r}", ", ".join(_EFFECTS))
        if t.toleration_seconds is not None and t.effect != "NoExecute":
            errs.add(
                f"{tpath}.effect", "must be NoExecute when tolerationSeconds is set", "NoExecute"
            )


# --- ClusterQueue and Cohort quotas ---------------------------------------------------------------


def _validate_resource_groups(
    groups: list[ResourceGroup],
    errs: _Errors,
    *,
    has_parent: bool,
    parent_field: str,
    lending_within_nominal: bool,
) -> None:
    covered: dict[str, int] = {}
    flavors: dict[str, str] = {}
    for i, rg in enumerate(groups):
        gpath = f"spec.resourceGroups[{i}]"
        for j, res in enumerate(rg.covered_resources):
            if res in covered:
                where = (
                    "this group" if covered[res] == i else f"spec.resourceGroups[{covered[res]}]"
                )
                errs.add(
                    f"{gpath}.coveredResources[{j}]",
                    f"duplicate resource {res!r}: already covered by {where}",
                    "each resource in one resource group only, once",
                )
            else:
                covered[res] = i
        order = ", ".join(rg.covered_resources)
        combinations = 0
        for j, fq in enumerate(rg.flavors):
            fpath = f"{gpath}.flavors[{j}]"
            if fq.name in flavors:
                errs.add(
                    f"{fpath}.name",
                    f"duplicate flavor {fq.name!r}: already in {flavors[fq.name]}",
                    "each flavor once across all resource groups",
                )
            else:
                flavors[fq.name] = fpath
            combinations += len(fq.resources)
            if len(fq.resources) != len(rg.covered_resources):
                errs.add(
                    f"{fpath}.resources",
                    f"must have the same number of resources as the coveredResources "
                    f"({len(rg.covered_resources)}), got {len(fq.resources)}",
                    f"one entry per covered resource, in order: {order}",
                )
            for k, rq in enumerate(fq.resources):
                rpath = f"{fpath}.resources[{k}]"
                if k < len(rg.covered_resources) and rq.name != rg.covered_resources[k]:
                    errs.add(
                        f"{rpath}.name",
                        f"must match coveredResources[{k}] ({rg.covered_resources[k]!r}), got {rq.name!r}",
                        f"the covered resources in order: {order}",
                    )
                _non_negative(rq.nominal_quota, f"{rpath}.nominalQuota", errs)
                for limit, field in (
                    (rq.borrowing_limit, "borrowingLimit"),
                    (rq.lending_limit, "lendingLimit"),
                ):
                    if limit is None:
                        continue
                    _non_negative(limit, f"{rpath}.{field}", errs)
                    if not has_parent:
                        errs.add(
                            f"{rpath}.{field}",
                            f"must be unset when {parent_field} is empty, got {limit}",
                            f"unset, or set {parent_field}",
                        )
                if (
                    lending_within_nominal
                    and rq.lending_limit is not None
                    and rq.lending_limit > rq.nominal_quota
                ):
                    errs.add(
                        f"{rpath}.lendingLimit",
                        f"must be less than or equal to nominalQuota ({rq.nominal_quota}), "
                        f"got {rq.lending_limit}",
                        f"at most {rq.nominal_quota}",
                    )
        if combinations > MAX_FLAVOR_RESOURCE_COMBINATIONS:
            errs.add(
                gpath,
                f"has {combinations} flavor-resource combinations",
                f"at most {MAX_FLAVOR_RESOURCE_COMBINATIONS} per resource group",
            )
    total_flavors = sum(len(rg.flavors) for rg in groups)
    if total_flavors > MAX_TOTAL_FLAVORS:
        errs.add(
            "spec.resourceGroups",
            f"has {total_flavors} flavors in total",
            f"at most {MAX_TOTAL_FLAVORS} across all resource groups",
        )
    total_covered = sum(len(rg.covered_resources) for rg in groups)
    if total_covered > MAX_TOTAL_COVERED_RESOURCES:
        errs.add(
            "spec.resourceGroups",
            f"has {total_covered} covered resources in total",
            f"at most {MAX_TOTAL_COVERED_RESOURCES} across all resource groups",
        )


def _non_negative(q: Quantity, path: str, errs: _Errors) -> None:
    if q.is_negative():
        errs.add(path, f"must be greater than or equal to 0, got {q}", "a non-negative quantity")


def _validate_cluster_queue(cq: ClusterQueue, errs: _Errors) -> None:
    spec = cq.spec
    _validate_resource_groups(
        spec.resource_groups,
        errs,
        has_parent=bool(spec.cohort_name),
        parent_field="spec.cohortName",
        lending_within_nominal=True,
    )
    if spec.namespace_selector is not None:
        _validate_label_selector(spec.namespace_selector, "spec.namespaceSelector", errs)
    p = spec.preemption
    if p.reclaim_within_cohort == "Never" and p.borrow_within_cohort.policy != "Never":
        errs.add(
            "spec.preemption.borrowWithinCohort.policy",
            f"must be Never when reclaimWithinCohort is Never, got {p.borrow_within_cohort.policy}",
            "Never, or set reclaimWithinCohort to LowerPriority or Any",
        )
    ff = spec.flavor_fungibility
    if ff.preference is not None and (
        ff.when_can_borrow != "TryNextFlavor" or ff.when_can_preempt != "TryNextFlavor"
    ):
        errs.add(
            "spec.flavorFungibility.preference",
            f"preference {ff.preference!r} requires both whenCanBorrow and whenCanPreempt to be "
            f"TryNextFlavor, got whenCanBorrow {ff.when_can_borrow!r} and whenCanPreempt "
            f"{ff.when_can_preempt!r}",
            "unset, or set whenCanBorrow and whenCanPreempt to TryNextFlavor",
        )
    _validate_fair_sharing(spec.fair_sharing, errs)
    validate_strategy(spec.admission_checks_strategy, errs.add)
    _validate_conditions(cq.status.conditions, "status.conditions", errs)
    _validate_unique_names(
        (f.name for f in cq.status.flavors_reservation), "status.flavorsReservation", "flavor", errs
    )
    _validate_unique_names(
        (f.name for f in cq.status.flavors_usage), "status.flavorsUsage", "flavor", errs
    )


def _validate_cohort(cohort: Cohort, errs: _Errors) -> None:
    spec = cohort.spec
    if spec.parent_name is not None and spec.parent_name == cohort.metadata.name:
        errs.add(
            "spec.parentName",
            f"must not be the Cohort itself ({spec.parent_name!r})",
            "the name of another Cohort, or unset",
        )
    # Kueue checks lendingLimit <= nominalQuota only on ClusterQueues: a Cohort's nominal quota is
    # an addition to its members', and it may lend what its subtree provides.
    _validate_resource_groups(
        spec.resource_groups,
        errs,
        has_parent=bool(spec.parent_name),
        parent_field="spec.parentName",
        lending_within_nominal=False,
    )
    _validate_fair_sharing(spec.fair_sharing, errs)


def _validate_fair_sharing(
    fs: FairSharing | LocalQueueFairSharing | None, errs: _Errors
) -> None:
    if fs is None:
        return
    # Kueue also wants a non-zero weight above 10^-9: quantities are rounded up to 1n anyway.
    if fs.weight.is_negative():
        errs.add(
            "spec.fairSharing.weight",
            f"must be greater than or equal to 0, got {fs.weight}",
            "0, or a positive quantity such as 1, 2 or 0.5",
        )


# --- LocalQueue ------------------------------------------------------------------------------------


def _validate_local_queue_update(old: LocalQueue, new: LocalQueue, errs: _Errors) -> None:
    # A CEL transition rule (self == oldSelf) applies only when the field exists in both versions.
    before, after = old.spec.cluster_queue, new.spec.cluster_queue
    if before is not None and after is not None and before != after:
        errs.add(
            "spec.clusterQueue",
            f"{_IMMUTABLE}: cannot change from {before!r} to {after!r}",
            repr(before),
        )


# --- Workload ---------------------------------------------------------------------------------------


def _validate_workload(wl: Workload, errs: _Errors) -> None:
    spec = wl.spec
    _validate_unique_names((ps.name for ps in spec.pod_sets), "spec.podSets", "pod set name", errs)
    min_count_at: int | None = None
    for i, ps in enumerate(spec.pod_sets):
        path = f"spec.podSets[{i}]"
        if ps.min_count is not None:
            if ps.min_count > ps.count:
                errs.add(
                    f"{path}.minCount",
                    f"must be less than or equal to count ({ps.count}), got {ps.min_count}",
                    f"1 to {ps.count}" if ps.count >= 1 else "unset (count is 0)",
                )
            if min_count_at is not None:
                errs.add(
                    f"{path}.minCount",
                    f"at most one pod set can use minCount; spec.podSets[{min_count_at}] already does",
                    "minCount on one pod set only",
                )
            else:
                min_count_at = i
        _validate_pod_set(ps, path, errs)
    _validate_priority(spec.priority_class_ref, spec.priority, "priorityClassRef", "priority", errs)
    _validate_priority(
        spec.preemption_priority_class_ref,
        spec.preemption_priority,
        "preemptionPriorityClassRef",
        "preemptionPriority",
        errs,
    )
    if spec.preemption_priority is not None and spec.preemption_priority < wl.priority_value:
        errs.add(
            "spec.preemptionPriority",
            f"must not be lower than the scheduling priority ({wl.priority_value}), "
            f"got {spec.preemption_priority}",
            f"at least {wl.priority_value}, or unset (equal to the scheduling priority)",
        )
    _validate_workload_status(wl, errs)


def _validate_pod_set(ps: PodSet, path: str, errs: _Errors) -> None:
    spec = ps.template.spec
    tpath = f"{path}.template.spec"
    groups: tuple[tuple[str, list[Container]], ...] = (
        ("initContainers", spec.init_containers),
        ("containers", spec.containers),
    )
    for field, containers in groups:
        for j, container in enumerate(containers):
            if RESERVED_RESOURCE in container.resources.requests:
                errs.add(
                    f"{tpath}.{field}[{j}].resources.requests[{RESERVED_RESOURCE}]",
                    f"the resource name {RESERVED_RESOURCE!r} is reserved: kqueue counts pods itself",
                    "any other resource name",
                )
    _validate_tolerations(spec.tolerations, f"{tpath}.tolerations", errs, pod=True)
    _validate_topology_request(ps, path, errs)


def _validate_topology_request(ps: PodSet, path: str, errs: _Errors) -> None:
    """Kueue's webhook rules on the TAS annotations and on topologyRequest."""
    _, problems = topology_request_from_annotations(ps.template.metadata.annotations)
    for key, problem in problems:
        errs.add(f"{path}.template.metadata.annotations[{key}]", problem)
    tr = ps.topology_request
    if tr is None:
        return
    tpath = f"{path}.topologyRequest"
    modes = [
        name
        for name, set_ in (
            ("required", tr.required is not None),
            ("preferred", tr.preferred is not None),
            ("unconstrained", bool(tr.unconstrained)),
        )
        if set_
    ]
    if len(modes) > 1:
        errs.add(
            tpath,
            f"must not set more than one of required, preferred and unconstrained, got "
            f"{', '.join(modes)}",
            "one of required, preferred, unconstrained",
        )
    for field, value in (
        ("required", tr.required),
        ("preferred", tr.preferred),
        ("podSetSliceRequiredTopology", tr.pod_set_slice_required_topology),
    ):
        if value is not None and not is_qualified_name(value):
            errs.add(f"{tpath}.{field}", f"{value!r} is not a valid node label key",
                     QUALIFIED_NAME_ALLOWED)
    slice_level, size = tr.pod_set_slice_required_topology, tr.pod_set_slice_size
    if slice_level is not None and size is None:
        errs.add(f"{tpath}.podSetSliceSize", "must be set when podSetSliceRequiredTopology is set",
                 "a positive number of pods dividing the pod set's count")
    if size is not None and slice_level is None:
        errs.add(f"{tpath}.podSetSliceRequiredTopology", "must be set when podSetSliceSize is set",
                 "a level of the flavor's Topology")
    if size is not None and ps.count % size != 0:
        errs.add(
            f"{tpath}.podSetSliceSize",
            f"must divide the pod set's count ({ps.count}), got {size}",
            f"a divisor of {ps.count}",
        )
    _validate_slice_layers(tr, ps.count, tpath, errs)


def _validate_slice_layers(
    tr: PodSetTopologyRequest, count: int, tpath: str, errs: _Errors
) -> None:
    """podsetSliceRequiredTopologyConstraints: exclusive with the single-layer fields; the
    outermost size divides the count, each inner size the one above it."""
    layers = tr.podset_slice_required_topology_constraints
    if not layers:
        return
    lpath = f"{tpath}.podsetSliceRequiredTopologyConstraints"
    if tr.pod_set_slice_required_topology is not None or tr.pod_set_slice_size is not None:
        errs.add(lpath, "must not be set with podSetSliceRequiredTopology or podSetSliceSize",
                 "either the constraints or the single-layer fields")
    above = count
    for i, layer in enumerate(layers):
        if not is_qualified_name(layer.topology):
            errs.add(f"{lpath}[{i}].topology", f"{layer.topology!r} is not a valid node label key",
                     QUALIFIED_NAME_ALLOWED)
        if above % layer.size != 0:
            what = "the pod set's count" if i == 0 else "the size of the layer above"
            errs.add(f"{lpath}[{i}].size", f"must divide {what} ({above}), got {layer.size}",
                     f"a divisor of {above}")
        above = layer.size


def _validate_priority(
    ref: PriorityClassRef | None, value: int | None, ref_field: str, value_field: str, errs: _Errors
) -> None:
    if ref is None:
        return
    if value is None:
        errs.add(
            f"spec.{value_field}",
            f"required when {ref_field} is set (the priority resolved from the class)",
            "an integer",
        )
    expected = {"kqueue.io": "WorkloadPriorityClass", "scheduling.k8s.io": "PriorityClass"}[
        ref.group
    ]
    if ref.kind != expected:
        errs.add(
            f"spec.{ref_field}.kind",
            f"only the {expected} kind is allowed for the {ref.group} group, got {ref.kind}",
            expected,
        )


def _validate_workload_status(wl: Workload, errs: _Errors) -> None:
    status = wl.status
    _validate_conditions(status.conditions, "status.conditions", errs)
    counts = {ps.name: ps.count for ps in wl.spec.pod_sets}
    known = ", ".join(counts)
    admission = status.admission
    if admission is not None:
        apath = "status.admission.podSetAssignments"
        _validate_unique_names(
            (a.name for a in admission.pod_set_assignments), apath, "pod set", errs
        )
        if wl.has_quota_reservation and len(admission.pod_set_assignments) != len(wl.spec.pod_sets):
            errs.add(
                apath,
                f"must have one assignment per pod set ({len(wl.spec.pod_sets)}), "
                f"got {len(admission.pod_set_assignments)}",
                f"assignments for: {known}",
            )
        for i, a in enumerate(admission.pod_set_assignments):
            if a.name not in counts:
                errs.add(f"{apath}[{i}].name", f"no pod set named {a.name!r}", known)
            count = a.count if a.count is not None else counts.get(a.name, 0)
            if count > 0:
                for res, q in a.resource_usage.items():
                    if q.units(res) % count:
                        errs.add(
                            f"{apath}[{i}].resourceUsage[{res}]",
                            f"{q} is not a multiple of the pod count {count}",
                            f"a multiple of {count}",
                        )
    rpath = "status.reclaimablePods"
    _validate_unique_names((r.name for r in status.reclaimable_pods), rpath, "pod set", errs)
    for i, r in enumerate(status.reclaimable_pods):
        if r.name not in counts:
            errs.add(f"{rpath}[{i}].name", f"no pod set named {r.name!r}", known)
        elif r.count > counts[r.name]:
            errs.add(
                f"{rpath}[{i}].count",
                f"must be less than or equal to the pod set's count ({counts[r.name]}), got {r.count}",
                f"0 to {counts[r.name]}",
            )


def _validate_workload_update(old: Workload, new: Workload, errs: _Errors) -> None:
    if old.has_quota_reservation:
        _validate_pod_sets_unchanged(old.spec.pod_sets, new.spec.pod_sets, errs)
        _validate_priority_ref_update(
            old.spec.priority_class_ref, new.spec.priority_class_ref, errs
        )
    if old.has_quota_reservation and new.has_quota_reservation:
        before, after = old.spec.queue_name, new.spec.queue_name
        if before is not None and after is not None and before != after:
            errs.add(
                "spec.queueName",
                f"{_IMMUTABLE} while the workload holds quota: cannot change from {before!r} to {after!r}",
                repr(before),
            )
        _validate_reclaimable_update(old, new, errs)
    if old.is_admitted and new.is_admitted:
        # Kueue's CEL rule: the budget of a running workload does not move under it.
        before_max = old.spec.maximum_execution_time_seconds
        after_max = new.spec.maximum_execution_time_seconds
        if before_max != after_max:
            errs.add(
                "spec.maximumExecutionTimeSeconds",
                f"{_IMMUTABLE} while the workload is admitted: cannot change from "
                f"{before_max} to {after_max}",
                f"{'unset' if before_max is None else before_max} until the workload is no "
                "longer admitted",
            )
    if (
        old.status.admission is not None
        and new.status.admission is not None
        and old.status.admission != new.status.admission
        and not _is_scale_down(old.status.admission, new.status.admission)
    ):
        errs.add(
            "status.admission",
            f"{_IMMUTABLE}: an admission can be set or cleared, not changed",
            "the current admission, or none",
        )


def _is_scale_down(old: Admission, new: Admission) -> bool:
    """An elastic workload's scale-down: the same ClusterQueue, pod sets and flavors, with
    counts (and so usage) that only shrink. Any other change of an admission is refused."""
    if old.cluster_queue != new.cluster_queue:
        return False
    if [a.name for a in old.pod_set_assignments] != [a.name for a in new.pod_set_assignments]:
        return False
    for a, b in zip(old.pod_set_assignments, new.pod_set_assignments, strict=True):
        if a.flavors != b.flavors or a.count is None or b.count is None or b.count > a.count:
            return False
    return True


def _validate_pod_sets_unchanged(old: list[PodSet], new: list[PodSet], errs: _Errors) -> None:
    if len(old) != len(new):
        errs.add(
            "spec.podSets",
            f"{_IMMUTABLE} while the workload holds quota: {len(old)} pod sets cannot become {len(new)}",
            f"the same {len(old)} pod sets",
        )
        return
    for i, (a, b) in enumerate(zip(old, new, strict=True)):
        path = f"spec.podSets[{i}]"
        if a.name != b.name:
            errs.add(f"{path}.name", f"{_IMMUTABLE} while the workload holds quota", repr(a.name))
        if a.template != b.template:
            errs.add(
                f"{path}.template",
                f"{_IMMUTABLE} while the workload holds quota",
                "the current template",
            )
        if a.min_count != b.min_count:
            errs.add(
                f"{path}.minCount",
                f"{_IMMUTABLE} while the workload holds quota",
                repr(a.min_count),
            )
        # Scale-down of an elastic workload updates counts in place and frees quota; a count
        # never grows in place (a scale-up is a new workload slice).
        if b.count > a.count:
            errs.add(
                f"{path}.count",
                f"cannot grow while the workload holds quota: {a.count} -> {b.count}",
                f"at most {a.count}",
            )


def _validate_priority_ref_update(
    old: PriorityClassRef | None, new: PriorityClassRef | None, errs: _Errors
) -> None:
    path = "spec.priorityClassRef"
    if (old is None) != (new is None):
        errs.add(
            path,
            f"cannot be {'set' if old is None else 'removed'} while the workload holds quota",
            "unchanged",
        )
        return
    if old is None or new is None:
        return
    if old.group != new.group:
        errs.add(f"{path}.group", f"{_IMMUTABLE} while the workload holds quota", old.group)
    if old.kind != new.kind:
        errs.add(f"{path}.kind", f"{_IMMUTABLE} while the workload holds quota", old.kind)
    # A WorkloadPriorityClass may be swapped (changing priority in place); a pod PriorityClass not.
    if new.group == "scheduling.k8s.io" and old.name != new.name:
        errs.add(
            f"{path}.name",
            f"{_IMMUTABLE} for a scheduling.k8s.io PriorityClass while the workload holds quota",
            repr(old.name),
        )


def _validate_reclaimable_update(old: Workload, new: Workload, errs: _Errors) -> None:
    before = {r.name: r.count for r in old.status.reclaimable_pods}
    after = {r.name: r.count for r in new.status.reclaimable_pods}
    for i, r in enumerate(new.status.reclaimable_pods):
        if r.name in before and r.count < before[r.name]:
            errs.add(
                f"status.reclaimablePods[{i}].count",
                f"cannot decrease while the workload holds quota: {before[r.name]} -> {r.count}",
                f"at least {before[r.name]}",
            )
    for name in before:
        if name not in after:
            errs.add(
                f"status.reclaimablePods[{name}]",
                "cannot be removed while the workload holds quota",
                "keep the entry",
            )
