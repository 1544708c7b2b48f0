"""The engine's own value types.

The engine never sees pydantic API models: ``from_api.py`` turns them into these frozen values once,
at the boundary, as Kueue's cache turns API objects into its own structs. Distinct ``NewType`` ids
keep a flavor name from being passed where a ClusterQueue name is expected, and every amount is an
exact integer (milli-units for cpu, base units otherwise; see ``kqueue.api.quantity``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import IntEnum, StrEnum
from fractions import Fraction
from typing import Literal, NewType

# The API's enumerations, imported so that each value has one definition (kqueue/api/v1alpha1/
# enums.py); the ``X as X`` form re-exports them to the rest of the engine.
from kqueue.api.v1alpha1.enums import BorrowWithinCohortPolicy as BorrowWithinCohortPolicy
from kqueue.api.v1alpha1.enums import FungibilityPolicy as FungibilityPolicy
from kqueue.api.v1alpha1.enums import FungibilityPreference as FungibilityPreference
from kqueue.api.v1alpha1.enums import Preemptibility as Preemptibility
from kqueue.api.v1alpha1.enums import PreemptionOrder as PreemptionOrder
from kqueue.api.v1alpha1.enums import PreemptionPolicy as PreemptionPolicy
from kqueue.api.v1alpha1.enums import QueueingStrategy as QueueingStrategy
from kqueue.api.v1alpha1.enums import StopPolicy as StopPolicy

from .checks import CheckRule

ClusterQueueName = NewType("ClusterQueueName", str)
CohortName = NewType("CohortName", str)
FlavorName = NewType("FlavorName", str)
ResourceName = NewType("ResourceName", str)
PodSetName = NewType("PodSetName", str)
# "namespace/name", as Kueue's workload.Key.
WorkloadKey = NewType("WorkloadKey", str)
# "namespace/name" of a LocalQueue.
LocalQueueKey = NewType("LocalQueueKey", str)

FlavorResource = tuple[FlavorName, ResourceName]
# Amounts per (flavor, resource); missing keys mean zero.
Usage = dict[FlavorResource, int]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Kueue's core/v1 name for the pod-count resource: when a ClusterQueue covers it, every pod set
# is charged its pod count.
PODS = ResourceName("pods")


def workload_key(namespace: str, name: str) -> WorkloadKey:
    return WorkloadKey(f"{namespace}/{name}")


def local_queue_key(namespace: str, name: str) -> LocalQueueKey:
    return LocalQueueKey(f"{namespace}/{name}")


class Mode(IntEnum):
    """How a flavor (or a whole assignment) can be used, ordered by preference.

    Comparisons are plain ``<``: the representative mode of several is their ``min``.
    """

    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


class PendingReason(StrEnum):
    """Reasons on ``QuotaReserved=False`` (Kueue's strings, pinned by docs/contracts.md §1)."""

    NO_MATCHING_FLAVOR = "NoMatchingFlavor"
    WAITING_FOR_QUOTA = "WaitingForQuota"
    EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
    WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"
    MISCONFIGURED = "Misconfigured"
    SUSPENDED = "Suspended"
    # Kueue v0.19: quota fits, but no topology domain would even on empty nodes.
    TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"


class PreemptionReason(StrEnum):
    """Reasons of the ``Preempted`` condition."""

    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"


class EvictionReason(StrEnum):
    """Reasons of the ``Evicted`` condition that the engine decides."""

    PREEMPTED = "Preempted"
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    DEACTIVATED = "Deactivated"
    # Kueue's Deactivated + "DueTo" + cause, when kqueue deactivates the workload itself.
    DEACTIVATED_DUE_TO_MAXIMUM_EXECUTION_TIME_EXCEEDED = (
        "DeactivatedDueToMaximumExecutionTimeExceeded"
    )
    DEACTIVATED_DUE_TO_ADMISSION_CHECK = "DeactivatedDueToAdmissionCheck"


class RequeueReason(StrEnum):
    """Why a head went back to its queue; decides whether it waits for an event (Kueue's)."""

    GENERIC = ""
    FAILED_AFTER_NOMINATION = "FailedAfterNomination"
    NAMESPACE_MISMATCH = "NamespaceMismatch"
    PENDING_PREEMPTION = "PendingPreemption"
    NO_FIT = "NoFit"
    PREEMPTION_NO_CANDIDATES = "PreemptionNoCandidates"


# --- scheduling constraints ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        # core/v1 Taint.ToString(): "key=value:Effect", value part dropped when empty.
        if self.value:
            return f"{self.key}={self.value}:{self.effect}"
        return f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty tolerates every effect
    # tolerationSeconds (NoExecute only): the pod is evicted that long after the taint appears,
    # so the toleration is temporary; None: for as long as the taint stays.
    seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("", "Equal") and self.value == taint.value


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """A node-selector or label-selector requirement."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector; all of ``match_labels`` and ``match_expressions`` must hold."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[SelectorRequirement, ...] = ()


# --- topology-aware scheduling (see tas/topology.py and tas/placement.py) -----------------------------


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A pod set's topologyRequest (Kueue v1beta2 field names, snake_case)."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    pod_set_slice_required_topology: str | None = None
    pod_set_slice_size: int | None = None
    pod_set_group_name: str | None = None
    # podsetSliceRequiredTopologyConstraints (Kueue's TASMultiLayerTopology): (level, size) from
    # the outermost layer in; exclusive with the two single-layer fields above.
    slice_layers: tuple[tuple[str, int], ...] = ()

    def level(self) -> str | None:
        return self.required if self.required is not None else self.preferred

    def layers(self) -> tuple[tuple[str, int], ...]:
        """Every slice layer, outermost first (Kueue's PodSetSliceRequiredTopologyConstraints)."""
        if self.slice_layers:
            return self.slice_layers
        if self.pod_set_slice_required_topology is None:
            return ()
        return ((self.pod_set_slice_required_topology, self.pod_set_slice_size or 0),)


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """Where a pod set's pods go: per domain of ``levels`` (its values there), how many pods.

    As Kueue's: the levels are the Topology's from the top, or just the hostname level when the
    Topology ends with it; domains are sorted by their values.
    """

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]

    def pod_count(self) -> int:
        return sum(n for _, n in self.domains)


# --- cluster objects -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: FlavorName
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    # Tolerations kqueue adds to admitted pods; they also count as tolerating the flavor's taints.
    tolerations: tuple[Toleration, ...] = ()
    # The Topology its nodes are organised in: the flavor is topology-aware.
    topology_name: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    nominal: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: FlavorName
    resources: Mapping[ResourceName, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[ResourceName, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: FungibilityPolicy = FungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FungibilityPolicy = FungibilityPolicy.TRY_NEXT_FLAVOR
    # None behaves as BorrowingOverPreemption (Kueue's nil preference).
    preference: FungibilityPreference | None = None


@dataclass(frozen=True, slots=True)
class ProtectionConfig:
    """Preemption protection (docs/contracts.md §6): per preemption path, the minimum time a
    workload stays admitted before it may be preempted on that path. The Configuration's
    ``preemptionProtection`` and a ClusterQueue's ``spec.preemption.protection`` (for its own
    workloads as victims); None: not set there (a ClusterQueue then takes the Configuration's)."""

    # Guards InClusterQueue preemption.
    within_cluster_queue: timedelta | None = None
    # Guards InCohortReclamation and InCohortReclaimWhileBorrowing.
    reclaim_within_cohort: timedelta | None = None
    # Guards InCohortFairSharing.
    fair_sharing: timedelta | None = None


@dataclass(frozen=True, slots=True)
class PreemptionConfig:
    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    borrow_within_cohort_max_priority_threshold: int | None = None
    preemptible_priority_threshold: int | None = None
    preemption_order: PreemptionOrder = PreemptionOrder.NEWEST
    # spec.preemption.protection: applies to this ClusterQueue's workloads as victims.
    protection: ProtectionConfig = ProtectionConfig()


class FairSharingStrategy(StrEnum):
    """Which constraint a fair-sharing preemption must satisfy (Kueue's rules S2-a, S2-b)."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


@dataclass(frozen=True, slots=True)
class FairSharingConfig:
    """The Configuration's fairSharing: when given to the engine, fair sharing is on."""

    strategies: tuple[FairSharingStrategy, ...] = (
        FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        FairSharingStrategy.LESS_THAN_INITIAL_SHARE,
    )


@dataclass(frozen=True, slots=True)
class ClusterQueueSpec:
    name: ClusterQueueName
    cohort: CohortName | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    # None matches no namespace (Kueue's default); an empty selector matches every namespace.
    namespace_selector: LabelSelector | None = None
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    preemption: PreemptionConfig = PreemptionConfig()
    stop_policy: StopPolicy = StopPolicy.NONE
    # spec.fairSharing.weight (exact; 0 means an infinite share while borrowing).
    fair_weight: Fraction = Fraction(1)
    # spec.admissionScope.admissionMode is UsageBasedAdmissionFairSharing (fairness/usage_ledger.py;
    # effective only while the engine has an AdmissionFairSharingConfig).
    usage_based_admission: bool = False
    # spec.nodeFitGuard: Gangs (True), Disabled (False), unset (None: the Configuration's).
    node_fit_guard: bool | None = None
    # spec.admissionChecksStrategy: checks a workload passes after reserving quota (checks.py).
    admission_checks: tuple[CheckRule, ...] = ()

    def flavor_names(self) -> tuple[FlavorName, ...]:
        seen: dict[FlavorName, None] = {}
        for rg in self.resource_groups:
            for fq in rg.flavors:
                seen.setdefault(fq.name, None)
        return tuple(seen)

    def group_for(self, resource: ResourceName) -> ResourceGroup | None:
        for rg in self.resource_groups:
            if resource in rg.covered_resources:
                return rg
        return None

    def quotas(self) -> dict[FlavorResource, ResourceQuota]:
        out: dict[FlavorResource, ResourceQuota] = {}
        for rg in self.resource_groups:
            for fq in rg.flavors:
                for res, q in fq.resources.items():
                    out[(fq.name, res)] = q
        return out


@dataclass(frozen=True, slots=True)
class CohortSpec:
    name: CohortName
    parent: CohortName | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: Fraction = Fraction(1)

    def quotas(self) -> dict[FlavorResource, ResourceQuota]:
        out: dict[FlavorResource, ResourceQuota] = {}
        for rg in self.resource_groups:
            for fq in rg.flavors:
                for res, q in fq.resources.items():
                    out[(fq.name, res)] = q
        return out


@dataclass(frozen=True, slots=True)
class LocalQueueSpec:
    namespace: str
    name: str
    cluster_queue: ClusterQueueName
    stop_policy: StopPolicy = StopPolicy.NONE
    # spec.fairSharing.weight: divides the decayed usage under admission fair sharing.
    fair_weight: Fraction = Fraction(1)

    @property
    def key(self) -> LocalQueueKey:
        return local_queue_key(self.namespace, self.name)


# --- workloads -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """A container's requests and limits as written (explicit zeros kept), for the checks of
    ``admissibility.py`` and LimitRange defaults."""

    name: str
    requests: Mapping[ResourceName, int] = field(default_factory=dict)
    limits: Mapping[ResourceName, int] = field(default_factory=dict)
    init: bool = False
    # An init container with restartPolicy Always: runs beside the main containers.
    sidecar: bool = False


@dataclass(frozen=True, slots=True)
class PodSet:
    name: PodSetName
    count: int
    # Requests of one pod.
    requests: Mapping[ResourceName, int] = field(default_factory=dict)
    min_count: int | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # requiredDuringSchedulingIgnoredDuringExecution terms (ORed); None when not set.
    required_affinity: tuple[tuple[SelectorRequirement, ...], ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    # The pod's containers and overhead; empty when only ``requests`` is known (then nothing is
    # checked per container and LimitRange defaults cannot apply).
    containers: tuple[ContainerResources, ...] = ()
    overhead: Mapping[ResourceName, int] = field(default_factory=dict)
    topology: TopologyRequest | None = None
    # DRA devices of one pod by quota resource (dra.py), already in ``requests``; kept apart
    # because ``requests`` is recomputed from the containers when LimitRanges apply.
    devices: Mapping[ResourceName, int] = field(default_factory=dict)
    # Why the pod's device claims cannot be counted (dra.ClaimError); the workload is
    # Misconfigured while it is set.
    device_error: str | None = None
    # Extended resources DRA serves (DeviceClass extendedResourceName): counted in ``devices``
    # under their quota name instead of as container requests (dra.extended_resource_devices).
    dra_extended: frozenset[ResourceName] = frozenset()
    # What one pod asks of a node when resource transformations made ``requests`` (quota)
    # differ from it (transformations.py); None: ``requests``.
    node_requests: Mapping[ResourceName, int] | None = None

    @property
    def per_pod_node_requests(self) -> Mapping[ResourceName, int]:
        """What one pod takes on a node: its requests before resource transformations."""
        return self.node_requests if self.node_requests is not None else self.requests


class LimitType(StrEnum):
    """core/v1 LimitType; kqueue reads the two that bound what a pod requests."""

    CONTAINER = "Container"
    POD = "Pod"


@dataclass(frozen=True, slots=True)
class LimitRangeItem:
    """One ``spec.limits`` entry of a LimitRange, with the API server's defaults applied.

    ``maxLimitRequestRatio`` is not kept: Kueue does not check it either (the pods' own
    admission does)."""

    type: LimitType
    max: Mapping[ResourceName, int] = field(default_factory=dict)
    min: Mapping[ResourceName, int] = field(default_factory=dict)
    default: Mapping[ResourceName, int] = field(default_factory=dict)
    default_request: Mapping[ResourceName, int] = field(default_factory=dict)


# Kueue's DelayedTopologyRequestState.
DelayedTopologyState = Literal["Pending", "Ready"]


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    name: PodSetName
    flavors: Mapping[ResourceName, FlavorName]
    # Total of the pod set at ``count`` (not per pod), as Kueue's status.admission.
    resource_usage: Mapping[ResourceName, int]
    count: int
    # With a topology-aware flavor: where the pods go.
    topology: TopologyAssignment | None = None
    # Kueue's delayedTopologyRequest (tas/delayed.py): "Pending" while the placement waits for
    # a ProvisioningRequest check (no ``topology`` yet), "Ready" once the second pass placed it.
    delayed_topology: DelayedTopologyState | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    cluster_queue: ClusterQueueName
    pod_sets: tuple[PodSetAssignment, ...]
    # When quota was reserved (QuotaReserved lastTransitionTime): preemption order uses it.
    reserved_at: datetime = EPOCH
    # When it was admitted (Admitted lastTransitionTime): preemption protection counts from it.
    # None while quota is reserved but the workload is not admitted (it has done no work yet).
    admitted_at: datetime | None = None
    # Two-phase admission (checks.py): the workload holds quota but waits for its admission
    # checks.
    awaiting_checks: bool = False

    @property
    def admitted_since(self) -> datetime | None:
        """When the workload was admitted (None: waiting for its admission checks);
        waitForPodsReady counts from here."""
        if self.awaiting_checks:
            return None
        return self.admitted_at or self.reserved_at

    def usage(self) -> Usage:
        out: Usage = {}
        for ps in self.pod_sets:
            for res, amount in ps.resource_usage.items():
                flavor = ps.flavors.get(res)
                if flavor is None or amount == 0:
                    continue
                fr = (flavor, res)
                out[fr] = out.get(fr, 0) + amount
        return out


@dataclass(frozen=True, slots=True)
class Workload:
    """What the engine knows of a Workload."""

    namespace: str
    name: str
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    uid: str = ""
    creation_time: datetime = EPOCH
    # Kueue orders by creation, or by the eviction time after a PodsReady timeout.
    queue_order_time: datetime | None = None
    # Resolved spec.priority; None means: take priority_class's value (or 0).
    priority: int | None = None
    priority_class: str | None = None
    # Contract extension: preemption priority (never below the scheduling priority).
    preemption_priority: int | None = None
    preemption_priority_class: str | None = None
    # Raw inputs of the preemptibility chain (see preemption/preemptibility.py).
    preemptibility: Preemptibility | None = None
    owner_preemptibility_label: str | None = None
    pod_preemptibility_label: str | None = None
    active: bool = True
    # Requeue backoff: not considered before this time.
    requeue_at: datetime | None = None
    # Set when the workload holds quota (e.g. rebuilt after a restart).
    admission: Admission | None = None
    # Evicted=True while it still holds quota: the eviction is under way (victims of earlier
    # preemptions after a restart), so it is neither evicted again nor counted twice.
    evicting: bool = False
    # Bumped by the adapter on spec changes; lets the queues tell "changed" from "same again".
    generation: int = 0
    # WorkloadSlices: the admitted slice this one replaces (annotation
    # kqueue.io/workload-slice-replacement-for), see slice.py.
    replacement_for: WorkloadKey | None = None
    # status.requeueState.count: PodsReady timeouts so far (see readiness.py).
    requeue_count: int = 0
    # spec.maximumExecutionTimeSeconds (None: no limit) and
    # status.accumulatedPastExecutionTimeSeconds: see execution.py.
    max_execution_seconds: int | None = None
    past_execution_seconds: int = 0
    # A slice that replaces an admitted one starts with the time that one used (its kind's
    # declaration, kqueue.api.integrations: a StatefulSet's budget spans its resizes).
    max_execution_spans_slices: bool = False
    # Annotation kqueue.io/last-checkpoint-time (None: absent or not a timestamp).
    last_checkpoint: datetime | None = None
    # A Rejected admission check's deactivation (DeactivationTarget=True, reason AdmissionCheck):
    # its message; the eviction that follows spec.active false says why (checks.py).
    rejected_by_checks: str | None = None
    # Derived once (the queues and the cache ask for them on every push, pop and lookup).
    _key: WorkloadKey = field(init=False, repr=False, compare=False)
    _local_queue: LocalQueueKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", workload_key(self.namespace, self.name))
        object.__setattr__(self, "_local_queue", local_queue_key(self.namespace, self.queue_name))

    @property
    def key(self) -> WorkloadKey:
        return self._key

    @property
    def local_queue(self) -> LocalQueueKey:
        return self._local_queue

    def order_time(self) -> datetime:
        return self.queue_order_time if self.queue_order_time is not None else self.creation_time

    def can_be_partially_admitted(self) -> bool:
        return any(ps.min_count is not None and ps.count > ps.min_count for ps in self.pod_sets)
