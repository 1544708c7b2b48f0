"""LocalQueue: a namespace's entry point, submitting its workloads to one ClusterQueue."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from kqueue.api.quantity import Quantity
from kqueue.api.v1alpha1.base import (
    Int32,
    KBase,
    Name,
    QuantityValue,
    ResourceList,
    ResourceName,
    Time,
)
from kqueue.api.v1alpha1.clusterqueue import CONDITION_LIST, STOP_POLICY_DESCRIPTION, StopPolicy
from kqueue.api.v1alpha1.meta import Condition, KObject


class LocalQueueFairSharing(KBase):
    """How a LocalQueue competes with the other LocalQueues of its ClusterQueue."""

    weight: QuantityValue = Field(
        default_factory=lambda: Quantity(1),
        description="Divides this queue's decayed usage when the heads of the ClusterQueue are "
        "ordered: a queue with weight 2 may use twice as much as one with weight 1 before it "
        "comes after it. A quantity, default 1; 0 puts the queue after every queue with a "
        "positive weight. Must not be negative.",
        json_schema_extra={"default": 1},
    )


class LocalQueueSpec(KBase):
    """Desired state of a LocalQueue."""

    cluster_queue: Name | None = Field(
        default=None,
        description="The ClusterQueue this queue submits to. Cannot be changed.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "field is immutable"}
            ]
        },
    )
    stop_policy: StopPolicy = Field(default="None", description=STOP_POLICY_DESCRIPTION)
    fair_sharing: LocalQueueFairSharing | None = Field(
        default=None,
        description="Admission fair sharing properties (weight) of this queue among the "
        "LocalQueues of its ClusterQueue; used when the ClusterQueue's admissionScope is "
        "UsageBasedAdmissionFairSharing and the Configuration sets admissionFairSharing. "
        "Unset: weight 1.",
    )


class LocalQueueAdmissionFairSharingStatus(KBase):
    """The decayed usage admission fair sharing orders this queue by."""

    consumed_resources: ResourceList = Field(
        default_factory=dict,
        description="Usage of this queue's admitted workloads over time, per resource, with "
        "exponential decay (usageHalfLifeTime), sampled every usageSamplingInterval and on "
        "admission. Exact to 10^-9 (rounded down, as Kueue).",
    )
    last_update: Time = Field(description="When consumedResources was last computed.")


class LocalQueueFairSharingStatus(KBase):
    """Fair-sharing state of a LocalQueue."""

    weighted_share: int = Field(
        default=0,
        description="Kept for Kueue compatibility (always 0: LocalQueues hold no quota).",
    )
    admission_fair_sharing_status: LocalQueueAdmissionFairSharingStatus | None = Field(
        default=None,
        description="Admission fair sharing usage, when the ClusterQueue uses it.",
    )


class LocalQueueResourceUsage(KBase):
    """Quota in use for one resource."""

    name: ResourceName = Field(description="Resource name.")
    total: QuantityValue = Field(
        default_factory=lambda: Quantity(0),
        description="Quota in use.",
        json_schema_extra={"default": None},
    )


class LocalQueueFlavorUsage(KBase):
    """Quota in use in one flavor."""

    name: Name = Field(description="Flavor name.")
    resources: list[LocalQueueResourceUsage] = Field(
        default_factory=list,
        max_length=16,
        description="Usage per resource.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class LocalQueueStatus(KBase):
    """Observed state of a LocalQueue."""

    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Latest observations (at most 16): Active says whether the queue can submit "
        "workloads to an active ClusterQueue.",
        json_schema_extra=CONDITION_LIST,
    )
    pending_workloads: Int32 = Field(
        default=0, description="Workloads of this queue not yet admitted."
    )
    reserving_workloads: Int32 = Field(
        default=0, description="Workloads of this queue holding a quota reservation, not finished."
    )
    admitted_workloads: Int32 = Field(
        default=0, description="Workloads of this queue admitted and not finished."
    )
    flavors_reservation: list[LocalQueueFlavorUsage] = Field(
        default_factory=list,
        max_length=16,
        description="Quota reserved, per flavor, by this queue's workloads.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    flavors_usage: list[LocalQueueFlavorUsage] = Field(
        default_factory=list,
        max_length=16,
        description="Quota used, per flavor, by this queue's admitted workloads.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    fair_sharing: LocalQueueFairSharingStatus | None = Field(
        default=None,
        description="Admission fair sharing state, when its ClusterQueue uses it.",
    )


class LocalQueue(KObject):
    """A namespace's queue: workloads labelled kqueue.io/queue-name with its name are submitted
    to its ClusterQueue. Namespaced."""

    KIND: ClassVar[str] = "LocalQueue"
    PLURAL: ClassVar[str] = "localqueues"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("queue", "queues", "lq")
    _omit_if_default: ClassVar[frozenset[str]] = frozenset({"status"})

    kind: Literal["LocalQueue"] = Field(
        default="LocalQueue", description="Kind of this object: LocalQueue."
    )
    spec: LocalQueueSpec = Field(
        default_factory=LocalQueueSpec,
        description="Desired state of the LocalQueue.",
        json_schema_extra={"default": {}},
    )
    status: LocalQueueStatus = Field(
        default_factory=LocalQueueStatus, description="Observed state of the LocalQueue."
    )
