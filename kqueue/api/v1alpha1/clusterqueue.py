"""ClusterQueue: quota per flavor and resource, and the policies for using and sharing it.

The resource-group types are shared with Cohort, whose quota works the same way.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict

from kqueue.api.quantity import Quantity
from kqueue.api.v1alpha1.base import Int32, KBase, Name, QuantityValue, ResourceName
from kqueue.api.v1alpha1.meta import Condition, KObject, LabelSelector
from kqueue.api.v1alpha1.protection import PreemptionProtection

QueueingStrategy = Literal["StrictFIFO", "BestEffortFIFO"]
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
NodeFitGuard = Literal["Gangs", "Disabled"]
PreemptionPolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"]
WithinClusterQueuePolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimWithinCohortPolicy = Literal["Never", "LowerPriority", "Any"]
BorrowWithinCohortPolicy = Literal["Never", "LowerPriority"]
FlavorFungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]
FlavorFungibilityPreference = Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"]
PreemptionOrder = Literal["Newest", "Oldest", "LeastWorkLost"]

STOP_POLICY_DESCRIPTION = (
    "Stops new quota reservations when not None: None admits workloads; Hold cancels reservations "
    "of workloads not yet admitted and lets admitted ones run to completion; HoldAndDrain also "
    "evicts the admitted ones."
)


class ResourceQuota(KBase):
    """Quota of one resource in one flavor."""

    name: ResourceName = Field(description="Resource name, e.g. cpu, memory, example.com/gpu.")
    nominal_quota: QuantityValue = Field(
        description="Quantity of the resource this queue can use at any time, guaranteed. Must "
        "not be negative. It should match real capacity (after system components); in a cohort, "
        "the sum over its members is what the cohort can use in total."
    )
    borrowing_limit: QuantityValue | None = Field(
        default=None,
        description="Most this queue may borrow from unused quota of its cohort, on top of "
        "nominalQuota. Unset: no limit. Must not be negative, and must be unset without a cohort "
        "(or, on a Cohort, without a parent).",
    )
    lending_limit: QuantityValue | None = Field(
        default=None,
        description="Most of its unused nominal quota this queue lends to its cohort; it keeps "
        "nominalQuota minus lendingLimit for itself. Unset: lends all of it. Must not be "
        "negative, at most nominalQuota on a ClusterQueue, and unset without a cohort (or, on a "
        "Cohort, without a parent).",
    )

    def nominal(self) -> int:
        """nominalQuota in kqueue's integer units (milli-units for CPU)."""
        return self.nominal_quota.units(self.name)

    def borrowing(self) -> int | None:
        return None if self.borrowing_limit is None else self.borrowing_limit.units(self.name)

    def lending(self) -> int | None:
        return None if self.lending_limit is None else self.lending_limit.units(self.name)


class FlavorQuotas(KBase):
    """The quotas one flavor provides for the resources of its group."""

    name: Name = Field(
        description="Name of a ResourceFlavor. If none exists, the ClusterQueue is inactive."
    )
    resources: list[ResourceQuota] = Field(
        min_length=1,
        max_length=64,
        description="Quota per resource (1 to 64): exactly the group's coveredResources, in the "
        "same order.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class ResourceGroup(KBase):
    """Resources that are assigned the same flavor together, with the flavors that provide them,
    in order of preference."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
                    "message": "flavors must have the same number of resources as the "
                    "coveredResources",
                }
            ]
        }
    )

    covered_resources: list[ResourceName] = Field(
        min_length=1,
        max_length=64,
        description="Resources covered by this group (1 to 64), e.g. cpu and memory. A resource "
        "can be in one group only.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    flavors: list[FlavorQuotas] = Field(
        min_length=1,
        max_length=64,
        description="Flavors providing the group's resources (1 to 64), tried in this order. Each "
        "lists every covered resource in the same order. A flavor can be in one group only.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


RESOURCE_GROUPS_DESCRIPTION = (
    "Groups of resources with the flavors that provide them (at most 16; at most 256 flavors and "
    "256 covered resources in total). Each resource and each flavor can be in one group only."
)


class FlavorFungibility(KBase):
    """Whether to try the next flavor before borrowing or preempting in the current one."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && "
                    "self.whenCanPreempt == 'TryNextFlavor')",
                    "message": "preference can only be set when both whenCanBorrow and "
                    "whenCanPreempt are TryNextFlavor",
                }
            ]
        }
    )

    when_can_borrow: FlavorFungibilityPolicy = Field(
        default="MayStopSearch",
        description="MayStopSearch (default): stop at the first flavor where the workload fits, "
        "even by borrowing. TryNextFlavor: look for a flavor where it fits without borrowing first.",
    )
    when_can_preempt: FlavorFungibilityPolicy = Field(
        default="TryNextFlavor",
        description="TryNextFlavor (default): look for a flavor where the workload fits without "
        "preempting first. MayStopSearch: stop at the first flavor where it fits by preempting.",
    )
    preference: FlavorFungibilityPreference | None = Field(
        default=None,
        description="Which flavor wins when every flavor tried needs borrowing, preemption or "
        "both. BorrowingOverPreemption (the behaviour when unset): the flavor needing the least "
        "borrowing (the lowest cohort level the quota comes from), then the better preemption "
        "mode (fit, then reclaiming from the cohort, then preempting in the ClusterQueue). "
        "PreemptionOverBorrowing: the better preemption mode first, then the least borrowing. "
        "Only with whenCanBorrow and whenCanPreempt both TryNextFlavor.",
    )


class BorrowWithinCohort(KBase):
    """Preemption in other ClusterQueues of the cohort by a workload that needs to borrow."""

    policy: BorrowWithinCohortPolicy = Field(
        default="Never",
        description="Never (default): a borrowing workload does not preempt in the cohort. "
        "LowerPriority: it may preempt lower-priority workloads of other queues in the cohort.",
    )
    max_priority_threshold: Int32 | None = Field(
        default=None,
        description="If set, only workloads with priority at most this value can be preempted by "
        "a borrowing workload.",
    )


class ClusterQueuePreemption(KBase):
    """When a pending workload may preempt admitted ones, and which."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort)"
                    " && self.borrowWithinCohort.policy != 'Never')",
                    "message": "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
                }
            ]
        }
    )

    reclaim_within_cohort: ReclaimWithinCohortPolicy = Field(
        default="Never",
        description="Whether a workload that fits in its queue's nominal quota may preempt "
        "workloads of other queues of the cohort that use more than their nominal quota. Never "
        "(default); LowerPriority: only lower-priority ones; Any: regardless of priority.",
    )
    borrow_within_cohort: BorrowWithinCohort = Field(
        default_factory=BorrowWithinCohort,
        description="Whether a workload that needs to borrow may preempt in other queues of the "
        "cohort. Requires reclaimWithinCohort other than Never.",
        json_schema_extra={"default": {}},
    )
    within_cluster_queue: WithinClusterQueuePolicy = Field(
        default="Never",
        description="Whether a workload that does not fit in its queue's nominal quota may "
        "preempt admitted workloads of the same queue. Never (default); LowerPriority: only lower "
        "priority; LowerOrNewerEqualPriority: lower priority, or equal priority and newer.",
    )
    preemptible_priority_threshold: Int32 | None = Field(
        default=None,
        description="kqueue extension. Workloads of this queue whose preemption priority is at "
        "most this value are preemptible, others not, unless the workload or its owner says "
        "otherwise (spec.preemptibility, the kqueue.io/preemptibility label). Unset: all are "
        "preemptible.",
    )
    preemption_order: PreemptionOrder = Field(
        default="Newest",
        description="kqueue extension. Among otherwise equal candidates, which are evicted first "
        "for this queue's workloads: Newest (default, Kueue's order) the most recently admitted, "
        "Oldest the earliest admitted, LeastWorkLost the one that loses the least work: the "
        "latest of its admission and its kqueue.io/last-checkpoint-time annotation.",
    )
    protection: PreemptionProtection | None = Field(
        default=None,
        description="kqueue extension. A minimum admitted time before this queue's workloads "
        "may be preempted, per path (withinClusterQueue, reclaimWithinCohort, fairSharing, each "
        "{minAdmitDuration}); a path set here overrides the Configuration's "
        "preemptionProtection. A protected workload is not a preemption candidate on that path "
        "until its time is up; the preemptor waits and is retried then.",
    )


class FairSharing(KBase):
    """How a ClusterQueue or Cohort competes for unused quota when fair sharing is on."""

    weight: QuantityValue = Field(
        default_factory=lambda: Quantity(1),
        description="Comparative advantage of this node when competing for unused quota of its "
        "Cohort: its share (usage above nominal quota of its dominant resource, relative to what "
        "the Cohort can lend) is divided by the weight. Admission favours the lowest share, fair "
        "preemption takes from the highest. A quantity, default 1. 0 means an infinite share "
        "while borrowing (always last). Must not be negative (like every quantity, it is rounded "
        "up to a multiple of 10^-9). Used only when the Configuration enables fairSharing.",
        json_schema_extra={"default": 1},
    )


AdmissionMode = Literal["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"]


class AdmissionScope(KBase):
    """How the workloads of a ClusterQueue's LocalQueues are ordered against each other."""

    admission_mode: AdmissionMode = Field(
        description="UsageBasedAdmissionFairSharing: the heads of this ClusterQueue are taken "
        "from the LocalQueue with the lowest weighted, decaying usage first (admission fair "
        "sharing; needs the Configuration's admissionFairSharing). NoAdmissionFairSharing: "
        "priority then creation time, as without admissionScope."
    )


class FairSharingStatus(KBase):
    """The fair-sharing state of a ClusterQueue or Cohort."""

    weighted_share: int = Field(
        description="The share of this node, rounded up: the highest, over resources, of usage "
        "above nominal quota per 1000 of what its Cohort can lend, divided by the weight. 0: "
        "within nominal quota. 9223372036854775807 when the weight is 0 and it borrows."
    )


class ResourceUsage(KBase):
    """Quota in use for one resource."""

    name: ResourceName = Field(description="Resource name.")
    total: QuantityValue = Field(
        default_factory=lambda: Quantity(0),
        description="Quota in use, including what is borrowed.",
        json_schema_extra={"default": None},
    )
    borrowed: QuantityValue = Field(
        default_factory=lambda: Quantity(0),
        description="Part of total above nominalQuota, borrowed from the cohort.",
        json_schema_extra={"default": None},
    )


class FlavorUsage(KBase):
    """Quota in use in one flavor."""

    name: Name = Field(description="Flavor name.")
    resources: list[ResourceUsage] = Field(
        default_factory=list,
        max_length=64,
        description="Usage per resource.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


CONDITION_LIST: JsonDict = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


class ClusterQueueStatus(KBase):
    """Observed state of a ClusterQueue."""

    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Latest observations (at most 16): Active says whether the queue admits "
        "workloads.",
        json_schema_extra=CONDITION_LIST,
    )
    flavors_reservation: list[FlavorUsage] = Field(
        default_factory=list,
        max_length=64,
        description="Quota reserved, per flavor, by workloads holding a reservation in this queue.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    flavors_usage: list[FlavorUsage] = Field(
        default_factory=list,
        max_length=64,
        description="Quota used, per flavor, by workloads admitted in this queue.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    pending_workloads: Int32 = Field(
        default=0, description="Workloads waiting for admission in this queue."
    )
    reserving_workloads: Int32 = Field(
        default=0, description="Workloads holding a quota reservation in this queue."
    )
    admitted_workloads: Int32 = Field(
        default=0, description="Workloads admitted in this queue and not finished."
    )
    fair_sharing: FairSharingStatus | None = Field(
        default=None,
        description="Fair-sharing state, when the Configuration enables fair sharing.",
    )


class AdmissionCheckStrategyRule(KBase):
    """One AdmissionCheck of the ClusterQueue, and the flavors it runs for."""

    name: Name = Field(description="Name of an AdmissionCheck.")
    on_flavors: list[Name] = Field(
        default_factory=list,
        max_length=64,
        description="ResourceFlavors the check runs for: a workload is checked when one of its "
        "pod sets is assigned one of them. Empty: every workload of the ClusterQueue.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


class AdmissionChecksStrategy(KBase):
    """The AdmissionChecks a workload must pass after reserving quota (Kueue v1beta2)."""

    admission_checks: list[AdmissionCheckStrategyRule] = Field(
        min_length=1,
        max_length=64,
        description="The checks (1 to 64), by name, each on all or some flavors.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    def checks_for(self, flavors: set[str]) -> list[str]:
        """The checks that apply to a workload assigned ``flavors`` (Kueue's
        admissionChecksForAdmission)."""
        return [
            r.name for r in self.admission_checks
            if not r.on_flavors or flavors.intersection(r.on_flavors)
        ]


class ClusterQueueSpec(KBase):
    """Desired state of a ClusterQueue."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.cohortName) && has(self.resourceGroups) ? "
                    "self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, "
                    "!has(r.borrowingLimit)))) : true",
                    "message": "borrowingLimit must be nil when cohort is empty",
                },
                {
                    "rule": "!has(self.cohortName) && has(self.resourceGroups) ? "
                    "self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, "
                    "!has(r.lendingLimit)))) : true",
                    "message": "lendingLimit must be nil when cohort is empty",
                },
            ]
        }
    )

    resource_groups: list[ResourceGroup] = Field(
        default_factory=list,
        max_length=16,
        description=RESOURCE_GROUPS_DESCRIPTION,
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    cohort_name: Name | None = Field(
        default=None,
        description="Cohort this queue belongs to. Queues of a cohort borrow each other's unused "
        "quota for the flavors and resources they list. Empty: the queue neither borrows nor "
        "lends. The name links queues; a Cohort object of that name is optional.",
    )
    queueing_strategy: QueueingStrategy = Field(
        default="BestEffortFIFO",
        description="Order of admission: BestEffortFIFO (default): by priority then creation "
        "time, but a workload that cannot be admitted does not block newer ones that fit. "
        "StrictFIFO: an older workload that cannot be admitted blocks newer ones.",
    )
    namespace_selector: LabelSelector | None = Field(
        default=None,
        description="Namespaces whose LocalQueues may submit to this queue. Unset (null) selects "
        "no namespace; an empty selector {} selects all namespaces.",
    )
    flavor_fungibility: FlavorFungibility = Field(
        default_factory=FlavorFungibility,
        description="Whether a workload tries the next flavor before borrowing or preempting in "
        "the current one.",
        json_schema_extra={"default": {}},
    )
    preemption: ClusterQueuePreemption = Field(
        default_factory=ClusterQueuePreemption,
        description="Preemption policies of this queue.",
        json_schema_extra={"default": {}},
    )
    stop_policy: StopPolicy = Field(default="None", description=STOP_POLICY_DESCRIPTION)
    fair_sharing: FairSharing | None = Field(
        default=None,
        description="Fair-sharing properties (weight), used when the Configuration enables fair "
        "sharing. Unset: weight 1.",
    )
    admission_scope: AdmissionScope | None = Field(
        default=None,
        description="Admission fair sharing between the LocalQueues of this ClusterQueue "
        "(admissionMode). Unset: no admission fair sharing.",
    )
    node_fit_guard: NodeFitGuard | None = Field(
        default=None,
        description="The node-fit guard for workloads admitted here. Gangs: an admitted "
        "workload's pods are released (2 or more at a time) only when all of them fit on the "
        "nodes' free capacity now; until then it keeps its quota, held, with the numbers in "
        "its NodesFit condition. Disabled: released as soon as admitted. Unset: the "
        "Configuration's nodeFitGuard (Gangs by default).",
    )
    admission_checks_strategy: AdmissionChecksStrategy | None = Field(
        default=None,
        description="AdmissionChecks a workload must pass, after reserving quota, to be "
        "admitted (two-phase admission, docs/admission-checks.md). A check that is missing or "
        "inactive makes the ClusterQueue inactive.",
    )


class ClusterQueue(KObject):
    """Quota per flavor and resource, and the policies for using and sharing it. Cluster-scoped."""

    KIND: ClassVar[str] = "ClusterQueue"
    PLURAL: ClassVar[str] = "clusterqueues"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("cq",)
    _omit_if_default: ClassVar[frozenset[str]] = frozenset({"status"})

    kind: Literal["ClusterQueue"] = Field(
        default="ClusterQueue", description="Kind of this object: ClusterQueue."
    )
    spec: ClusterQueueSpec = Field(
        default_factory=ClusterQueueSpec,
        description="Desired state of the ClusterQueue.",
        json_schema_extra={"default": {}},
    )
    status: ClusterQueueStatus = Field(
        default_factory=ClusterQueueStatus, description="Observed state of the ClusterQueue."
    )

    def flavor_names(self) -> list[str]:
        return [f.name for rg in self.spec.resource_groups for f in rg.flavors]
