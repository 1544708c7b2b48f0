"""From ``kqueue.io/v1alpha1`` API models to the engine's own types.

The boundary where quantities become exact integers (milli-units for cpu), optional fields get
their Kueue defaults, and a Workload's status is read for what the engine needs: the admission it
holds (and since when), the queue-order timestamp, the requeue backoff, the execution time used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from kqueue.api import config
from kqueue.api import feature_gates as fg
from kqueue.api.integrations.registry import max_exec_time_spans_slices
from kqueue.api.quantity import Quantity, QuantityError, parse_exact, parse_quantity
from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    AdmissionChecksStrategy,
    AdmissionCheckState,
    ClusterQueue,
    Cohort,
    FairSharing,
    LocalQueue,
    LocalQueueFairSharing,
    ResourceFlavor,
)
from kqueue.api.v1alpha1 import LabelSelector as ApiLabelSelector
from kqueue.api.v1alpha1 import ResourceGroup as ApiResourceGroup
from kqueue.api.v1alpha1 import Taint as ApiTaint
from kqueue.api.v1alpha1 import Toleration as ApiToleration
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.base import parse_time
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME as MULTIKUEUE_CONTROLLER
from kqueue.api.v1alpha1.podtemplate import PodSpec as ApiPodSpec
from kqueue.api.v1alpha1.priorityclass import WorkloadPriorityClass
from kqueue.api.v1alpha1.protection import MinAdmitDuration as ApiMinAdmitDuration
from kqueue.api.v1alpha1.protection import PreemptionProtection as ApiPreemptionProtection
from kqueue.api.v1alpha1.protection import duration_of
from kqueue.api.v1alpha1.topology import PodSetTopologyRequest
from kqueue.api.v1alpha1.topology import Topology as ApiTopology
from kqueue.api.v1alpha1.topology import TopologyAssignment as ApiTopologyAssignment
from kqueue.api.v1alpha1.workload import PodSet as ApiPodSet
from kqueue.api.v1alpha1.workload import Workload as ApiWorkload
from kqueue.api.v1alpha1.workload import WorkloadSpec as ApiWorkloadSpec

from . import dra
from . import types as t
from .checks import EVICTED_BY_ADMISSION_CHECK, READY, CheckRule
from .engine import Engine
from .fairness.usage_ledger import AdmissionFairSharingConfig
from .gates import FeatureGates
from .tas import delayed
from .tas.node_fit import ReleasedPod
from .tas.topology import BoundPod, Node, Topology
from .transformations import QuotaResources, Transformation

# A Requeued=False condition without requeueAt waits for the controller (Kueue's backoff rule).
NEVER = datetime.max.replace(tzinfo=UTC)


def _taint(taint: ApiTaint) -> t.Taint:
    return t.Taint(taint.key, taint.value or "", taint.effect)


def toleration(tol: ApiToleration) -> t.Toleration:
    return t.Toleration(
        tol.key or "", tol.operator or "Equal", tol.value or "", tol.effect or "",
        tol.toleration_seconds,
    )



def pod_set_updates(states: Iterable[AdmissionCheckState]) -> list[delayed.PodSetUpdate]:
    """The podSetUpdates of the Ready checks among ``states``, in order (Kueue merges those
    into a pod set before placing it)."""
    return [
        delayed.PodSetUpdate(
            t.PodSetName(u.name),
            dict(u.node_selector),
            tuple(toleration(x) for x in u.tolerations),
        )
        for s in states
        if s.state == READY
        for u in s.pod_set_updates
    ]


def _selector(sel: ApiLabelSelector | None) -> t.LabelSelector | None:
    if sel is None:
        return None
    return t.LabelSelector(
        dict(sel.match_labels),
        tuple(
            t.SelectorRequirement(r.key, r.operator, tuple(r.values))
            for r in sel.match_expressions
        ),
    )


def _groups(groups: Iterable[ApiResourceGroup]) -> tuple[t.ResourceGroup, ...]:
    out: list[t.ResourceGroup] = []
    for rg in groups:
        flavors = tuple(
            t.FlavorQuotas(
                t.FlavorName(fq.name),
                {
                    t.ResourceName(r.name): t.ResourceQuota(r.nominal(), r.borrowing(), r.lending())
                    for r in fq.resources
                },
            )
            for fq in rg.flavors
        )
        out.append(t.ResourceGroup(tuple(t.ResourceName(r) for r in rg.covered_resources), flavors))
    return tuple(out)


def flavor(rf: ResourceFlavor) -> t.ResourceFlavor:
    return t.ResourceFlavor(
        name=t.FlavorName(rf.name),
        node_labels=dict(rf.spec.node_labels),
        node_taints=tuple(_taint(x) for x in rf.spec.node_taints),
        tolerations=tuple(toleration(x) for x in rf.spec.tolerations),
        topology_name=rf.spec.topology_name,
    )


def topology(topo: ApiTopology) -> Topology:
    return Topology(topo.name, tuple(topo.level_keys()))


def _topology_request(tr: PodSetTopologyRequest | None) -> t.TopologyRequest | None:
    if tr is None:
        return None
    return t.TopologyRequest(
        required=tr.required,
        preferred=tr.preferred,
        unconstrained=bool(tr.unconstrained),
        pod_set_slice_required_topology=tr.pod_set_slice_required_topology,
        pod_set_slice_size=tr.pod_set_slice_size,
        pod_set_group_name=tr.pod_set_group_name,
        slice_layers=tuple(
            (layer.topology, layer.size)
            for layer in tr.podset_slice_required_topology_constraints or ()
        ),
    )


def topology_assignment(ta: ApiTopologyAssignment | None) -> t.TopologyAssignment | None:
    if ta is None:
        return None
    return t.TopologyAssignment(
        tuple(ta.levels), tuple((tuple(values), n) for values, n in ta.domains())
    )


def _node_amounts(raw: Any) -> dict[t.ResourceName, int]:
    out: dict[t.ResourceName, int] = {}
    for name, value in (raw or {}).items() if isinstance(raw, Mapping) else ():
        try:
            out[t.ResourceName(str(name))] = parse_quantity(value, str(name))
        except (QuantityError, TypeError, ValueError):
            continue  # an unreadable amount is not kqueue's to judge: count none of it
    return out


def node(doc: Mapping[str, Any]) -> Node:
    """The engine's view of a v1 Node: labels, allocatable, taints, Ready and cordoned."""
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    status = doc.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
        if isinstance(c, Mapping)
    )
    taints = tuple(
        t.Taint(str(x.get("key", "")), str(x.get("value") or ""), str(x.get("effect", "")))
        for x in spec.get("taints") or []
        if isinstance(x, Mapping)
    )
    return Node(
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        allocatable=_node_amounts(status.get("allocatable")),
        taints=taints,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
    )


def bound_pod(doc: Mapping[str, Any]) -> BoundPod | None:
    """A v1 Pod as node usage: None when it is not bound, has ended, or is counted through a
    topology assignment (label kqueue.io/tas)."""
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    node_name = spec.get("nodeName")
    phase = (doc.get("status") or {}).get("phase")
    labels = meta.get("labels") or {}
    if not node_name or phase in ("Succeeded", "Failed") or c.TAS_LABEL in labels:
        return None
    try:
        requests = ApiPodSpec.model_validate(spec).pod_requests()
    except ValidationError:
        requests = {}
    key = f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
    return BoundPod(
        key, str(node_name), {t.ResourceName(r): v for r, v in sorted(requests.items())}
    )


def released_pod(doc: Mapping[str, Any], *, ungated: bool = False) -> ReleasedPod | None:
    """A v1 Pod kqueue manages as the node-fit guard counts it: released (no
    ``kqueue.io/admission`` gate, or ``ungated``: being released now) and not bound yet, not
    ended, not being deleted, and not counted through a topology assignment (as ``bound_pod``).
    None otherwise."""
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    gates = spec.get("schedulingGates") or []
    if (
        spec.get("nodeName")
        or meta.get("deletionTimestamp")
        or (doc.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        or c.TAS_LABEL in (meta.get("labels") or {})
        or (not ungated and any(g.get("name") == c.ADMISSION_GATE for g in gates))
    ):
        return None
    key = f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
    try:
        ps = ApiPodSet.model_validate({"name": "main", "count": 1, "template": {"spec": spec}})
    except ValidationError:
        return None
    return ReleasedPod(key, _pod_set(ps))


def cluster_queue(cq: ClusterQueue) -> t.ClusterQueueSpec:
    spec = cq.spec
    p = spec.preemption
    return t.ClusterQueueSpec(
        name=t.ClusterQueueName(cq.name),
        cohort=t.CohortName(spec.cohort_name) if spec.cohort_name else None,
        resource_groups=_groups(spec.resource_groups),
        queueing_strategy=t.QueueingStrategy(spec.queueing_strategy),
        namespace_selector=_selector(spec.namespace_selector),
        flavor_fungibility=t.FlavorFungibility(
            t.FungibilityPolicy(spec.flavor_fungibility.when_can_borrow),
            t.FungibilityPolicy(spec.flavor_fungibility.when_can_preempt),
            (
                t.FungibilityPreference(spec.flavor_fungibility.preference)
                if spec.flavor_fungibility.preference is not None
                else None
            ),
        ),
        preemption=t.PreemptionConfig(
            within_cluster_queue=t.PreemptionPolicy(p.within_cluster_queue),
            reclaim_within_cohort=t.PreemptionPolicy(p.reclaim_within_cohort),
            borrow_within_cohort=t.BorrowWithinCohortPolicy(p.borrow_within_cohort.policy),
            borrow_within_cohort_max_priority_threshold=p.borrow_within_cohort.max_priority_threshold,
            preemptible_priority_threshold=p.preemptible_priority_threshold,
            preemption_order=t.PreemptionOrder(p.preemption_order),
            protection=_cq_protection(p.protection),
        ),
        stop_policy=t.StopPolicy(spec.stop_policy),
        fair_weight=_weight(spec.fair_sharing),
        usage_based_admission=(
            spec.admission_scope is not None
            and spec.admission_scope.admission_mode == "UsageBasedAdmissionFairSharing"
        ),
        node_fit_guard=(
            None if spec.node_fit_guard is None else spec.node_fit_guard == "Gangs"
        ),
        admission_checks=_check_rules(spec.admission_checks_strategy),
    )


def _check_rules(strategy: AdmissionChecksStrategy | None) -> tuple[CheckRule, ...]:
    if strategy is None:
        return ()
    return tuple(CheckRule(r.name, frozenset(r.on_flavors)) for r in strategy.admission_checks)


def admission_check_inactive(ac: AdmissionCheck) -> str | None:
    """Why an AdmissionCheck cannot be used (None: active): its Active condition, which its
    controller sets (kqueue's own for its built-in controllers, an external one for others)."""
    cond = ac.condition_active()
    if cond is None:
        return (
            f"no controller has marked it Active (controllerName {ac.spec.controller_name})"
        )
    if not cond.is_true:
        return f"{cond.reason}: {cond.message}" if cond.message else cond.reason
    return None


def admission_check_provisions(ac: AdmissionCheck) -> bool:
    """A ProvisioningRequest check: the topology-aware flavors it applies to are placed only
    once it is Ready (delayed topology requests, engine/tas/delayed.py)."""
    return ac.spec.controller_name == c.PROVISIONING_REQUEST_CONTROLLER


def admission_check_delegates(ac: AdmissionCheck) -> bool:
    """A MultiKueue check: the topology-aware pod sets of its ClusterQueues are placed by the
    worker that runs the workload, never by this manager (engine/tas/delayed.py)."""
    return ac.spec.controller_name == MULTIKUEUE_CONTROLLER


def cohort(co: Cohort) -> t.CohortSpec:
    return t.CohortSpec(
        name=t.CohortName(co.name),
        parent=t.CohortName(co.spec.parent_name) if co.spec.parent_name else None,
        resource_groups=_groups(co.spec.resource_groups),
        fair_weight=_weight(co.spec.fair_sharing),
    )


def _weight(fs: FairSharing | LocalQueueFairSharing | None) -> Fraction:
    return Fraction(1) if fs is None else fs.weight.exact


def fair_sharing(cfg: config.FairSharing | None) -> t.FairSharingConfig | None:
    """The Configuration's fairSharing for the engine (None: fair sharing off)."""
    if cfg is None:
        return None
    return t.FairSharingConfig(tuple(t.FairSharingStrategy(s) for s in cfg.preemption_strategies))


def preemption_protection(
    cfg: config.PreemptionProtection | None,
) -> t.ProtectionConfig | None:
    """The Configuration's preemptionProtection for the engine (None: none)."""
    if cfg is None:
        return None

    def of(path: config.MinAdmitDuration | None) -> timedelta | None:
        return path.min_admit_duration if path is not None else None

    return t.ProtectionConfig(
        of(cfg.within_cluster_queue), of(cfg.reclaim_within_cohort), of(cfg.fair_sharing)
    )


def _cq_protection(p: ApiPreemptionProtection | None) -> t.ProtectionConfig:
    """A ClusterQueue's spec.preemption.protection (unset paths: the Configuration's)."""
    if p is None:
        return t.ProtectionConfig()

    def of(path: ApiMinAdmitDuration | None) -> timedelta | None:
        return duration_of(path.min_admit_duration) if path is not None else None

    return t.ProtectionConfig(
        of(p.within_cluster_queue), of(p.reclaim_within_cohort), of(p.fair_sharing)
    )


def local_queue(lq: LocalQueue) -> t.LocalQueueSpec:
    return t.LocalQueueSpec(
        namespace=lq.namespace or "default",
        name=lq.name,
        cluster_queue=t.ClusterQueueName(lq.spec.cluster_queue or ""),
        stop_policy=t.StopPolicy(lq.spec.stop_policy),
        fair_weight=_weight(lq.spec.fair_sharing),
    )


def admission_fair_sharing(
    cfg: config.AdmissionFairSharing | None,
) -> AdmissionFairSharingConfig | None:
    """The Configuration's admissionFairSharing for the engine (None: off)."""
    if cfg is None:
        return None
    return AdmissionFairSharingConfig(
        usage_half_life=cfg.usage_half_life_time,
        usage_sampling_interval=cfg.usage_sampling_interval,
        resource_weights={t.ResourceName(r): Fraction(w) for r, w in cfg.resource_weights.items()},
    )


def feature_gates(cfg: config.Configuration | None) -> FeatureGates:
    """The Configuration's featureGates that the engine honours (Kueue's defaults: all on)."""
    gates = cfg.feature_gates if cfg is not None else {}
    return FeatureGates(
        topology_aware_scheduling=fg.gate(gates, fg.TOPOLOGY_AWARE_SCHEDULING),
        partial_admission=fg.gate(gates, fg.PARTIAL_ADMISSION),
        workload_slices=fg.gate(gates, fg.ELASTIC_JOBS_VIA_WORKLOAD_SLICES),
    )


def quota_resources(cfg: config.Configuration | None) -> QuotaResources:
    """The Configuration's resources.transformations and excludeResourcePrefixes."""
    if cfg is None:
        return QuotaResources()
    res = cfg.resources
    return QuotaResources(
        tuple(res.exclude_resource_prefixes),
        {
            t.ResourceName(tr.input): Transformation(
                t.ResourceName(tr.input),
                tr.strategy == "Replace",
                t.ResourceName(tr.multiply_by) if tr.multiply_by else None,
                {t.ResourceName(r): parse_exact(v) for r, v in tr.outputs.items()},
            )
            for tr in res.transformations
        },
    )


def dra_on(cfg: config.Configuration | None) -> bool:
    """Whether DRA claims are counted (KueueDRAIntegration, Kueue's default on) under the
    Configuration's resources.deviceClassMappings."""
    return fg.gate(cfg.feature_gates if cfg is not None else {}, fg.KUEUE_DRA_INTEGRATION)


def dra_off_claims(cfg: config.Configuration | None) -> dra.DeviceClaims | None:
    """With KueueDRAIntegration off: claims that refuse a pod with ResourceClaims
    (KueueDRARejectWorkloadsWhenDRADisabled, on by default), or None (claims ignored, as when
    no DeviceClass is mapped)."""
    gates = cfg.feature_gates if cfg is not None else {}
    if dra_on(cfg) or not fg.gate(gates, fg.KUEUE_DRA_REJECT_WHEN_DISABLED):
        return None
    return dra.refusing_claims()


def local_queue_usage(
    lq: LocalQueue,
) -> tuple[dict[t.ResourceName, int], datetime | None] | None:
    """The LocalQueue's persisted admission fair sharing usage (nano-units), if any."""
    fs = lq.status.fair_sharing
    afs = fs.admission_fair_sharing_status if fs is not None else None
    if afs is None:
        return None
    consumed = {t.ResourceName(r): q.nanos for r, q in afs.consumed_resources.items() if q.nanos}
    return consumed, afs.last_update


def priority_class(pc: WorkloadPriorityClass) -> tuple[str, int]:
    return pc.name, pc.value


def _amounts(resources: Mapping[str, Quantity]) -> dict[t.ResourceName, int]:
    return {t.ResourceName(r): q.units(r) for r, q in sorted(resources.items())}


def _containers(pod: ApiPodSpec) -> tuple[t.ContainerResources, ...]:
    out = [
        t.ContainerResources(
            c.name,
            _amounts(c.resources.requests),
            _amounts(c.resources.limits),
            init=True,
            sidecar=c.is_sidecar,
        )
        for c in pod.init_containers
    ]
    out.extend(
        t.ContainerResources(c.name, _amounts(c.resources.requests), _amounts(c.resources.limits))
        for c in pod.containers
    )
    return tuple(out)


def _devices(
    pod: ApiPodSpec, claims: dra.DeviceClaims | None
) -> tuple[dict[t.ResourceName, int], str | None]:
    """One pod's DRA devices by quota resource, or why they cannot be counted (dra.py)."""
    resource_claims = (pod.model_extra or {}).get("resourceClaims") or []
    if claims is None or not resource_claims:
        return {}, None
    if claims.refused is not None:
        return {}, claims.refused
    try:
        return dra.pod_devices(resource_claims, claims.templates, claims.classes, claims), None
    except dra.ClaimError as e:
        return {}, str(e)


def _pod_set(ps: ApiPodSet, claims: dra.DeviceClaims | None = None) -> t.PodSet:
    pod = ps.template.spec
    devices, device_error = _devices(pod, claims)
    requests = {t.ResourceName(r): v for r, v in ps.pod_requests().items()}
    kept = requests
    if claims is not None and claims.extended_resources:
        # DRA-backed extended resources move to the devices, under their quota name.
        try:
            kept, backed = dra.extended_resource_devices(requests, claims)
        except dra.ClaimError as e:
            device_error = device_error or str(e)
        else:
            devices = dra.with_devices(devices, backed)
    affinity: tuple[tuple[t.SelectorRequirement, ...], ...] | None = None
    na = pod.affinity.node_affinity if pod.affinity is not None else None
    required = na.required_during_scheduling_ignored_during_execution if na is not None else None
    if required is not None:
        affinity = tuple(
            tuple(
                t.SelectorRequirement(r.key, r.operator, tuple(r.values))
                for r in term.match_expressions
            )
            for term in required.node_selector_terms
        )
    return t.PodSet(
        name=t.PodSetName(ps.name),
        count=ps.count,
        requests=dra.with_devices(kept, devices),
        min_count=ps.min_count,
        node_selector=dict(pod.node_selector),
        required_affinity=affinity,
        tolerations=tuple(toleration(x) for x in pod.tolerations),
        containers=_containers(pod),
        overhead=_amounts(pod.overhead),
        topology=_topology_request(ps.topology_request),
        devices=devices,
        device_error=device_error,
        dra_extended=frozenset(requests.keys() - kept.keys()),
    )


_LIMIT_FIELDS = ("max", "min", "default", "defaultRequest")


class LimitRangeError(ValueError):
    """A LimitRange field kqueue cannot read; ``path`` names it."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.detail = message
        super().__init__(f"{path}: {message}")


def limit_range(obj: Mapping[str, Any]) -> tuple[str, str, tuple[t.LimitRangeItem, ...]]:
    """A core/v1 LimitRange (as a dict) for the engine: (namespace, name, its Container and Pod
    items), with the API server's defaults (SetDefaults_LimitRangeItem: a Container item's
    default limit is its max, its default request the default limit or else the min), so a
    manifest given to ``kqueue simulate`` means what the stored object does. Raises
    LimitRangeError naming the field of a bad quantity."""
    meta = obj.get("metadata") or {}
    items: list[t.LimitRangeItem] = []
    for i, item in enumerate((obj.get("spec") or {}).get("limits") or []):
        kind = item.get("type")
        if kind not in (t.LimitType.CONTAINER, t.LimitType.POD):
            continue  # PersistentVolumeClaim bounds are not about pods
        values: dict[str, dict[t.ResourceName, int]] = {}
        for key in _LIMIT_FIELDS:
            values[key] = {}
            for res, raw in sorted((item.get(key) or {}).items()):
                try:
                    values[key][t.ResourceName(res)] = parse_quantity(raw, res)
                except (QuantityError, TypeError) as exc:
                    raise LimitRangeError(f"spec.limits[{i}].{key}[{res}]", str(exc)) from exc
        if kind == t.LimitType.CONTAINER:
            for res, v in values["max"].items():
                values["default"].setdefault(res, v)
            for res, v in values["default"].items():
                values["defaultRequest"].setdefault(res, v)
            for res, v in values["min"].items():
                values["defaultRequest"].setdefault(res, v)
        items.append(
            t.LimitRangeItem(
                t.LimitType(kind),
                max=values["max"],
                min=values["min"],
                default=values["default"],
                default_request=values["defaultRequest"],
            )
        )
    return str(meta.get("namespace") or "default"), str(meta.get("name") or ""), tuple(items)


def _admission(wl: ApiWorkload) -> t.Admission | None:
    adm = wl.status.admission
    if adm is None:
        return None
    counts = {ps.name: ps.count for ps in wl.spec.pod_sets}
    pod_sets = tuple(
        t.PodSetAssignment(
            name=t.PodSetName(psa.name),
            flavors={t.ResourceName(r): t.FlavorName(f) for r, f in sorted(psa.flavors.items())},
            resource_usage={
                t.ResourceName(r): q.units(r) for r, q in sorted(psa.resource_usage.items())
            },
            count=psa.count if psa.count is not None else counts.get(psa.name, 0),
            topology=topology_assignment(psa.topology_assignment),
            delayed_topology=psa.delayed_topology_request,
        )
        for psa in adm.pod_set_assignments
    )
    reserved_at = wl.quota_reserved_at or wl.metadata.creation_timestamp or t.EPOCH
    admitted = wl.condition(c.ADMITTED)
    awaiting = bool(wl.status.admission_checks) and not (admitted is not None and admitted.is_true)
    return t.Admission(
        t.ClusterQueueName(adm.cluster_queue),
        pod_sets,
        reserved_at,
        # Preemption protection counts from the current Admitted condition.
        admitted_at=admitted.last_transition_time if admitted is not None and admitted.is_true
        else None,
        awaiting_checks=awaiting,
    )


def _queue_order_time(wl: ApiWorkload) -> datetime | None:
    """Kueue's queue-order timestamp: the eviction time after a PodsReady timeout."""
    evicted = wl.condition(c.EVICTED)
    if evicted is not None and evicted.is_true and evicted.reason == c.EVICTED_BY_PODS_READY_TIMEOUT:
        return evicted.last_transition_time
    return None


def _requeue_at(wl: ApiWorkload) -> datetime | None:
    at = wl.status.requeue_state.requeue_at if wl.status.requeue_state is not None else None
    requeued = wl.condition(c.REQUEUED)
    if requeued is not None and requeued.status == "False":
        return at if at is not None else NEVER
    return at


def _pod_label(wl: ApiWorkload) -> str | None:
    for ps in wl.spec.pod_sets:
        value = ps.template.metadata.labels.get(c.PREEMPTIBILITY_LABEL)
        if value is not None:
            return value
    return None


def _last_checkpoint(wl: ApiWorkload) -> datetime | None:
    """The annotation kqueue.io/last-checkpoint-time; a job writes it, so a value that is not a
    timestamp is ignored (the work lost then counts from the admission) rather than refused."""
    value = wl.metadata.annotations.get(c.LAST_CHECKPOINT_TIME_ANNOTATION)
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def _replacement_for(wl: ApiWorkload) -> t.WorkloadKey | None:
    """The WorkloadSlice this one replaces (``namespace/name`` annotation)."""
    value = wl.metadata.annotations.get(c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION)
    return t.WorkloadKey(value) if value else None


def workload(
    wl: ApiWorkload,
    *,
    owner_labels: Mapping[str, str] | None = None,
    pod_sets: tuple[t.PodSet, ...] | None = None,
    claims: dra.DeviceClaims | None = None,
) -> t.Workload:
    """The engine's view of ``wl``; ``owner_labels`` are the labels of its top-level owner;
    ``claims`` size its pods' DRA device claims (:func:`workload_pod_sets`).

    ``pod_sets``: the result of :func:`pod_sets` for this very ``wl.spec``, when the caller kept
    it (they depend on the spec alone), so it is not computed again."""
    spec = wl.spec
    admission = _admission(wl)
    return t.Workload(
        namespace=wl.namespace or "default",
        name=wl.name,
        queue_name=spec.queue_name or "",
        pod_sets=pod_sets if pod_sets is not None else workload_pod_sets(spec, claims),
        uid=wl.metadata.uid or "",
        creation_time=wl.metadata.creation_timestamp or t.EPOCH,
        queue_order_time=_queue_order_time(wl),
        priority=spec.priority,
        priority_class=spec.priority_class_ref.name if spec.priority_class_ref else None,
        preemption_priority=spec.preemption_priority,
        preemption_priority_class=(
            spec.preemption_priority_class_ref.name if spec.preemption_priority_class_ref else None
        ),
        preemptibility=t.Preemptibility(spec.preemptibility) if spec.preemptibility else None,
        owner_preemptibility_label=(owner_labels or {}).get(c.PREEMPTIBILITY_LABEL),
        pod_preemptibility_label=_pod_label(wl),
        active=spec.active,
        requeue_at=_requeue_at(wl),
        admission=admission,
        evicting=admission is not None and wl.is_true(c.EVICTED),
        generation=wl.metadata.generation or 0,
        replacement_for=_replacement_for(wl),
        requeue_count=(wl.status.requeue_state.count or 0) if wl.status.requeue_state else 0,
        max_execution_seconds=spec.maximum_execution_time_seconds,
        past_execution_seconds=wl.status.accumulated_past_execution_time_seconds or 0,
        max_execution_spans_slices=max_exec_time_spans_slices(wl),
        last_checkpoint=_last_checkpoint(wl),
        rejected_by_checks=_rejected_by_checks(wl),
    )


def _rejected_by_checks(wl: ApiWorkload) -> str | None:
    target = wl.condition(c.DEACTIVATION_TARGET)
    if target is not None and target.is_true and target.reason == EVICTED_BY_ADMISSION_CHECK:
        return target.message
    return None


def workload_pod_sets(
    spec: ApiWorkloadSpec, claims: dra.DeviceClaims | None = None
) -> tuple[t.PodSet, ...]:
    """The engine's pod sets of a Workload spec; ``claims``: what sizes their DRA device
    claims (None: claims take no quota)."""
    return tuple(_pod_set(ps, claims) for ps in spec.pod_sets)


def apply_workload(
    engine: Engine,
    wl: ApiWorkload,
    *,
    owner_labels: Mapping[str, str] | None = None,
    pod_sets: tuple[t.PodSet, ...] | None = None,
    claims: dra.DeviceClaims | None = None,
) -> t.Workload | None:
    """Feed a Workload to the engine: a finished one frees its quota, others are upserted.
    Returns what was upserted (None for a finished one); ``pod_sets`` and ``claims`` as for
    :func:`workload`."""
    if wl.is_finished:
        engine.finish(t.workload_key(wl.namespace or "default", wl.name))
        return None
    view = workload(wl, owner_labels=owner_labels, pod_sets=pod_sets, claims=claims)
    engine.upsert_workload(view)
    return view
