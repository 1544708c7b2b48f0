"""Workload: the unit of admission, one or more pod sets admitted together or not at all."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.admissioncheck import AdmissionCheckState
from kqueue.api.v1alpha1.base import (
    Int32,
    KBase,
    Name,
    PodSetName,
    ResourceList,
    ResourceName,
    Time,
)
from kqueue.api.v1alpha1.clusterqueue import CONDITION_LIST
from kqueue.api.v1alpha1.meta import Condition, KObject, find_condition, is_condition_true
from kqueue.api.v1alpha1.podtemplate import PodTemplateSpec, scale
from kqueue.api.v1alpha1.topology import (
    PodSetTopologyRequest,
    TopologyAssignment,
    topology_request_from_annotations,
)

PriorityClassGroup = Literal["kqueue.io", "scheduling.k8s.io"]
PriorityClassKind = Literal["WorkloadPriorityClass", "PriorityClass"]
Preemptibility = Literal["Preemptible", "NonPreemptible"]
DelayedTopologyRequestState = Literal["Pending", "Ready"]


class PriorityClassRef(KBase):
    """A WorkloadPriorityClass (group kqueue.io) or a pod PriorityClass (group scheduling.k8s.io)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "(self.group == 'scheduling.k8s.io') ? self.kind == 'PriorityClass' : true",
                    "message": "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
                },
                {
                    "rule": "(self.group == 'kqueue.io') ? self.kind == 'WorkloadPriorityClass' : true",
                    "message": "only the WorkloadPriorityClass kind is allowed for the kqueue.io group",
                },
            ]
        }
    )

    group: PriorityClassGroup = Field(
        description="API group of the class: kqueue.io for a WorkloadPriorityClass, "
        "scheduling.k8s.io for a pod PriorityClass."
    )
    kind: PriorityClassKind = Field(
        description="Kind of the class: WorkloadPriorityClass (group kqueue.io) or PriorityClass "
        "(group scheduling.k8s.io)."
    )
    name: Name = Field(description="Name of the class.")


class PodSet(KBase):
    """A set of identical pods: a template and how many."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.minCount) ? self.minCount <= self.count : true",
                    "message": "minCount should be positive and less or equal to count",
                }
            ]
        }
    )

    name: PodSetName = Field(
        default=c.DEFAULT_POD_SET_NAME,
        description="Name of the pod set, unique in the workload (default main).",
    )
    template: PodTemplateSpec = Field(
        description="Template of the pods. Requests (or limits, where requests are missing) are "
        "what quota is charged for. nodeSelector and required node affinity on keys of a "
        "flavor's nodeLabels decide which flavors fit.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True, "type": "object"},
    )
    count: Int32 = Field(default=1, ge=0, description="Number of pods (default 1).")
    min_count: Int32 | None = Field(
        default=None,
        ge=1,
        description="Least number of pods the workload accepts (partial admission): if count "
        "does not fit, kqueue admits the most that fit, down to minCount. At most one pod set "
        "may set it; it must not exceed count.",
    )
    topology_request: PodSetTopologyRequest | None = Field(
        default=None,
        description="Where the pods must or should be placed in the Topology of a "
        "topology-aware flavor. Unset: taken from the template's kqueue.io/podset-*-topology, "
        "kqueue.io/podset-slice-size and kqueue.io/podset-group-name annotations.",
    )

    @model_validator(mode="after")
    def _topology_from_annotations(self) -> PodSet:
        # Kueue's jobframework turns the podset-* annotations into the request when it builds
        # the Workload; doing it here covers every integration and hand-written Workloads.
        # Malformed annotations are reported by validation, which reads them again.
        if self.topology_request is None:
            self.topology_request, _ = topology_request_from_annotations(
                self.template.metadata.annotations
            )
        return self

    def pod_requests(self) -> dict[str, int]:
        """Requests of one pod in kqueue's integer units (milli-units for CPU)."""
        return self.template.spec.pod_requests()

    def total_requests(self, count: int | None = None) -> dict[str, int]:
        """Requests of ``count`` pods (default: the pod set's count)."""
        return scale(self.pod_requests(), self.count if count is None else count)


class WorkloadSpec(KBase):
    """Desired state of a Workload."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.priorityClassRef) || has(self.priority)",
                    "message": "priority should not be nil when priorityClassRef is set",
                },
                {
                    "rule": "!has(self.preemptionPriorityClassRef) || has(self.preemptionPriority)",
                    "message": "preemptionPriority should not be nil when "
                    "preemptionPriorityClassRef is set",
                },
                {
                    "rule": "!has(self.preemptionPriority) || self.preemptionPriority >= "
                    "(has(self.priority) ? self.priority : 0)",
                    "message": "preemptionPriority must not be lower than priority",
                },
            ]
        }
    )

    pod_sets: list[PodSet] = Field(
        min_length=1,
        max_length=8,
        description="The pod sets (1 to 8), admitted together or not at all. Cannot change while "
        "the workload holds quota, except that counts may go down (scale-down of an elastic "
        "workload).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    queue_name: Name | None = Field(
        default=None,
        description="The LocalQueue (in the workload's namespace) the workload is submitted to. "
        "Cannot change while the workload holds quota.",
    )
    priority_class_ref: PriorityClassRef | None = Field(
        default=None,
        description="The class the scheduling priority comes from. Requires priority.",
    )
    priority: Int32 | None = Field(
        default=None,
        description="Scheduling priority, resolved from priorityClassRef: higher is admitted "
        "first. Unset: 0.",
    )
    active: bool = Field(
        default=True,
        description="Whether the workload may be admitted (default true). Setting it to false "
        "evicts the workload if it is admitted and keeps it from being admitted.",
    )
    maximum_execution_time_seconds: Int32 | None = Field(
        default=None,
        ge=1,
        description="The most time, in seconds, the workload may be admitted in total (over all "
        "its admissions) before kqueue deactivates it (spec.active false, Evicted reason "
        "DeactivatedDueToMaximumExecutionTimeExceeded). Unset: no limit. Set from the "
        "kqueue.io/max-exec-time-seconds label of the Job. Cannot change while the workload is "
        "admitted.",
    )
    preemption_priority_class_ref: PriorityClassRef | None = Field(
        default=None,
        description="kqueue extension. The class the preemption priority comes from; may change "
        "while the workload runs. Requires preemptionPriority.",
    )
    preemption_priority: Int32 | None = Field(
        default=None,
        description="kqueue extension. Priority used when this workload is a preemption "
        "candidate; never lower than priority. Unset: equal to priority.",
    )
    preemptibility: Preemptibility | None = Field(
        default=None,
        description="kqueue extension. Preemptible or NonPreemptible. A non-preemptible "
        "workload is never a victim and is admitted only within nominal quota. Unset: from the "
        "kqueue.io/preemptibility label of the owner or pods, else from the ClusterQueue's "
        "preemptiblePriorityThreshold, else preemptible.",
    )


class PodSetAssignment(KBase):
    """What one pod set was admitted with."""

    name: PodSetName = Field(
        default=c.DEFAULT_POD_SET_NAME, description="Name of the pod set (one of spec.podSets)."
    )
    flavors: dict[ResourceName, Name] = Field(
        default_factory=dict, description="Flavor assigned to each resource."
    )
    resource_usage: ResourceList = Field(
        default_factory=dict,
        description="Total resources of all pods of the pod set at admission; quota is charged "
        "this much. Does not change when quota is reclaimed.",
    )
    count: Int32 | None = Field(
        default=None,
        ge=0,
        description="Number of pods admitted (less than spec count under partial admission). "
        "Unset: spec.podSets[].count.",
    )
    topology_assignment: TopologyAssignment | None = Field(
        default=None,
        description="With a topology-aware flavor: the domains the pods are placed in and how "
        "many in each (Kueue v1beta2's shape).",
    )
    delayed_topology_request: DelayedTopologyRequestState | None = Field(
        default=None,
        description="Pending: the pod set's flavor has a ProvisioningRequest check, so it holds "
        "quota without a topologyAssignment until every check is Ready; Ready: the second "
        "pass placed it (Kueue's delayedTopologyRequest).",
    )


class Admission(KBase):
    """Where and with what the workload holds quota."""

    cluster_queue: Name = Field(description="The ClusterQueue the workload holds quota in.")
    pod_set_assignments: list[PodSetAssignment] = Field(
        default_factory=list,
        max_length=8,
        description="One assignment per pod set.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    def assignment(self, pod_set: str) -> PodSetAssignment | None:
        for a in self.pod_set_assignments:
            if a.name == pod_set:
                return a
        return None


class RequeueState(KBase):
    """Backoff of a workload evicted for not becoming ready in time."""

    count: Int32 | None = Field(
        default=None, ge=0, description="Times the workload was requeued; reset on reactivation."
    )
    requeue_at: Time | None = Field(
        default=None, description="When the workload goes back to its queue."
    )


class ReclaimablePod(KBase):
    """Pods of a pod set whose quota is no longer needed (they finished)."""

    name: PodSetName = Field(description="Name of the pod set.")
    count: Int32 = Field(ge=0, description="Number of its pods whose quota can be released.")


class UnhealthyNode(KBase):
    """A node that runs or was assigned pods of the workload and can no longer run them."""

    name: str = Field(min_length=1, description="Name of the Node.")


class WorkloadStatus(KBase):
    """Observed state of a Workload."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.clusterName) || !has(self.nominatedClusterNames) || "
                    "size(self.nominatedClusterNames) == 0",
                    "message": "clusterName and nominatedClusterNames are mutually exclusive",
                },
                {
                    "rule": "!has(oldSelf.clusterName) || !has(self.clusterName) || "
                    "oldSelf.clusterName == self.clusterName",
                    "message": "clusterName is immutable once set",
                },
            ]
        }
    )

    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Latest observations (at most 16): QuotaReserved, Admitted, Evicted, "
        "Preempted, Requeued, PodsReady, Finished, DeactivationTarget.",
        json_schema_extra=CONDITION_LIST,
    )
    admission: Admission | None = Field(
        default=None,
        description="Where and with what the workload holds quota. Can be set and cleared, not "
        "changed.",
    )
    requeue_state: RequeueState | None = Field(
        default=None, description="Backoff state after evictions for a PodsReady timeout."
    )
    accumulated_past_execution_time_seconds: Int32 | None = Field(
        default=None,
        ge=0,
        description="Seconds the workload was admitted in its previous admissions (each ended "
        "by an eviction); counts toward spec.maximumExecutionTimeSeconds. Cleared when kqueue "
        "deactivates the workload for exceeding it.",
    )
    reclaimable_pods: list[ReclaimablePod] = Field(
        default_factory=list,
        max_length=8,
        description="Per pod set, pods whose quota can be released early. Counts only go up while "
        "the workload holds quota.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    unhealthy_nodes: list[UnhealthyNode] = Field(
        default_factory=list,
        description="Nodes of the workload's topology assignment that were deleted, are not Ready "
        "or are cordoned, while it is admitted (Kueue's field; set by kqueue, not by users). "
        "A deleted or NotReady node is replaced by another of the same domain, or the workload is "
        "evicted (NodeFailures): see the TopologyNodesReady condition.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    admission_checks: list[AdmissionCheckState] = Field(
        default_factory=list,
        max_length=8,
        description="State of each AdmissionCheck of the workload's ClusterQueue that applies "
        "to its flavors, while it holds quota; the workload is Admitted once all are Ready.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    nominated_cluster_names: list[Annotated[str, Field(max_length=256)]] = Field(
        default_factory=list,
        max_length=20,
        description="MultiKueue: the worker clusters the workload is offered to (set by the "
        "dispatcher, or by an external one). Cleared when status.clusterName is set.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    cluster_name: str | None = Field(
        default=None,
        max_length=256,
        description="MultiKueue: the worker cluster the workload runs on (the first that "
        "admitted it). Cleared when the workload is evicted; cannot change while set.",
    )


class Workload(KObject):
    """Pod sets admitted together or not at all. Namespaced. Usually created by kqueue for a Job
    or a group of Pods."""

    KIND: ClassVar[str] = "Workload"
    PLURAL: ClassVar[str] = "workloads"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("wl",)
    _omit_if_default: ClassVar[frozenset[str]] = frozenset({"status"})

    kind: Literal["Workload"] = Field(
        default="Workload", description="Kind of this object: Workload."
    )
    spec: WorkloadSpec = Field(description="Desired state of the Workload.")
    status: WorkloadStatus = Field(
        default_factory=WorkloadStatus, description="Observed state of the Workload."
    )

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.status.conditions, type_)

    def is_true(self, type_: str) -> bool:
        return is_condition_true(self.status.conditions, type_)

    @property
    def has_quota_reservation(self) -> bool:
        return self.is_true(c.QUOTA_RESERVED)

    @property
    def is_admitted(self) -> bool:
        return self.is_true(c.ADMITTED)

    @property
    def is_finished(self) -> bool:
        return self.is_true(c.FINISHED)

    @property
    def priority_value(self) -> int:
        """Scheduling priority (0 when unset)."""
        return self.spec.priority or 0

    @property
    def preemption_priority_value(self) -> int:
        """Preemption priority (the scheduling priority when unset)."""
        if self.spec.preemption_priority is None:
            return self.priority_value
        return self.spec.preemption_priority

    @property
    def quota_reserved_at(self) -> datetime | None:
        """When the current reservation was made (QuotaReserved=True lastTransitionTime)."""
        cond = self.condition(c.QUOTA_RESERVED)
        return cond.last_transition_time if cond is not None and cond.is_true else None

    def admission_check(self, name: str) -> AdmissionCheckState | None:
        return next((s for s in self.status.admission_checks if s.name == name), None)

    def pod_set(self, name: str) -> PodSet | None:
        for ps in self.spec.pod_sets:
            if ps.name == name:
                return ps
        return None
