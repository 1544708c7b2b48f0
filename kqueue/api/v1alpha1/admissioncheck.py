"""AdmissionCheck and ProvisioningRequestConfig: the second phase of admission (Kueue v1beta2).

A workload that reserved quota in a ClusterQueue with admission checks is Admitted only once
every check that applies to its flavors is Ready (docs/contracts.md §6, docs/admission-checks.md).
A check is owned by the controller its ``spec.controllerName`` names: kqueue's own
(``kqueue.io/provisioning-request``) or an external one, which writes the check's state into
``Workload.status.admissionChecks``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from kqueue.api.v1alpha1.base import Int32, KBase, Name, PodSetName, Time
from kqueue.api.v1alpha1.clusterqueue import CONDITION_LIST
from kqueue.api.v1alpha1.meta import Condition, KObject, Toleration, find_condition
from kqueue.api.v1alpha1.resourceflavor import TOLERATION_RULES

# The AdmissionCheck condition its controller sets (Kueue's AdmissionCheckActive).
ACTIVE = "Active"

CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]
PodSetMergePolicy = Literal["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"]

_QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class AdmissionCheckParametersReference(KBase):
    """The object holding the check's parameters (for kqueue's ProvisioningRequest check: a
    ProvisioningRequestConfig, apiGroup kqueue.io)."""

    api_group: str | None = Field(
        default=None,
        max_length=253,
        pattern=_DNS_SUBDOMAIN,
        description="API group of the parameters object, e.g. kqueue.io.",
    )
    kind: str | None = Field(
        default=None,
        max_length=63,
        pattern=r"^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$",
        description="Kind of the parameters object, e.g. ProvisioningRequestConfig.",
    )
    name: str | None = Field(
        default=None,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="Name of the parameters object.",
    )


class AdmissionCheckSpec(KBase):
    """Who decides the check, and with what parameters."""

    controller_name: str = Field(
        min_length=1,
        description="Name of the controller that decides this check, e.g. "
        "kqueue.io/provisioning-request. kqueue marks a check of a controller it does not run "
        "and nobody claims inactive (Active=False) until an external controller sets it "
        "Active. Cannot change.",
    )
    parameters: AdmissionCheckParametersReference | None = Field(
        default=None,
        description="The object with the check's parameters, read by its controller. A "
        "reference to a missing object makes the check inactive.",
    )


class AdmissionCheckStatus(KBase):
    """Observed state of an AdmissionCheck."""

    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Active: True when the check's controller runs and its parameters exist; "
        "False (with the reason) makes every ClusterQueue that uses the check inactive.",
        json_schema_extra=CONDITION_LIST,
    )


class AdmissionCheck(KObject):
    """A condition besides quota that a workload must meet to be admitted. Cluster-scoped."""

    KIND: ClassVar[str] = "AdmissionCheck"
    PLURAL: ClassVar[str] = "admissionchecks"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ac",)
    _omit_if_default: ClassVar[frozenset[str]] = frozenset({"status"})

    kind: Literal["AdmissionCheck"] = Field(
        default="AdmissionCheck", description="Kind of this object: AdmissionCheck."
    )
    spec: AdmissionCheckSpec = Field(description="Who decides the check.")
    status: AdmissionCheckStatus = Field(
        default_factory=AdmissionCheckStatus, description="Observed state of the check."
    )

    def condition_active(self) -> Condition | None:
        return find_condition(self.status.conditions, ACTIVE)


class PodSetUpdate(KBase):
    """Changes a check asks for on the pods of one pod set, applied when they are released."""

    name: PodSetName = Field(description="Name of the pod set (one of spec.podSets).")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels added to the pods.")
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Annotations added to the pods."
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="nodeSelector entries added to the pods."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=8,
        description="Tolerations added to the pods (at most 8).",
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": TOLERATION_RULES,
        },
    )


class AdmissionCheckState(KBase):
    """The state of one admission check for one workload (Workload.status.admissionChecks)."""

    name: Name = Field(description="Name of the AdmissionCheck.")
    state: CheckState = Field(
        description="Pending (not decided), Ready (passed), Retry (release the quota and try "
        "again later) or Rejected (the workload is deactivated)."
    )
    last_transition_time: Time | None = Field(
        default=None, description="When the state last changed."
    )
    message: str = Field(
        default="", max_length=32768, description="Why the check is in this state."
    )
    requeue_after_seconds: Int32 | None = Field(
        default=None,
        ge=0,
        description="With Retry: the least time to wait, from lastTransitionTime, before the "
        "workload is queued again.",
    )
    retry_count: Int32 | None = Field(
        default=None, ge=0, description="Times this check went to Retry for the workload."
    )
    pod_set_updates: list[PodSetUpdate] = Field(
        default_factory=list,
        max_length=8,
        description="Changes to the pods of each pod set, applied when they are released.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class ProvisioningRequestRetryStrategy(KBase):
    """How often, and after how long, a failed ProvisioningRequest is tried again."""

    backoff_limit_count: Int32 = Field(
        default=3,
        ge=0,
        description="Most retries; then the workload is deactivated. 0 switches retries off.",
    )
    backoff_base_seconds: Int32 = Field(
        default=60, ge=0, description="Base of the exponential backoff (base * 2^(n-1))."
    )
    backoff_max_seconds: Int32 = Field(
        default=1800, ge=0, description="Longest wait between two attempts."
    )


class ProvisioningRequestPodSetUpdatesNodeSelector(KBase):
    """A nodeSelector entry whose value comes from the ProvisioningRequest's status."""

    key: str = Field(
        min_length=1, max_length=317, pattern=_QUALIFIED_NAME, description="nodeSelector key."
    )
    value_from_provisioning_class_detail: str = Field(
        min_length=1,
        max_length=32768,
        description="Key of status.provisioningClassDetails whose value is used.",
    )


class ProvisioningRequestPodSetUpdates(KBase):
    """Updates of the pods that target the provisioned nodes."""

    node_selector: list[ProvisioningRequestPodSetUpdatesNodeSelector] = Field(
        default_factory=list,
        max_length=8,
        description="nodeSelector entries taken from the ProvisioningRequest's status.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"]},
    )


def _default_retry() -> ProvisioningRequestRetryStrategy:
    return ProvisioningRequestRetryStrategy()


class ProvisioningRequestConfigSpec(KBase):
    """What kind of ProvisioningRequest the check creates."""

    provisioning_class_name: str = Field(
        min_length=1,
        max_length=253,
        pattern=_DNS_SUBDOMAIN,
        description="The ProvisioningRequest's class, e.g. check-capacity.autoscaling.x-k8s.io "
        "or best-effort-atomic-scale-up.autoscaling.x-k8s.io.",
    )
    parameters: dict[str, str] = Field(
        default_factory=dict,
        max_length=100,
        description="Parameters of the class (values at most 255 characters).",
    )
    managed_resources: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Resources the autoscaler provides. Empty: all. Only pod sets requesting one "
        "of them are in the request; with none, the check is Ready at once.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    retry_strategy: ProvisioningRequestRetryStrategy = Field(
        default_factory=_default_retry,
        description="Retries of a failed request (default 3 retries, 60s base, 1800s max).",
        json_schema_extra={
            "default": {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}
        },
    )
    pod_set_updates: ProvisioningRequestPodSetUpdates | None = Field(
        default=None, description="Updates of the pods that target the provisioned nodes."
    )
    pod_set_merge_policy: PodSetMergePolicy | None = Field(
        default=None,
        description="Merge identical pod sets into one PodTemplate of the request: "
        "IdenticalPodTemplates or IdenticalWorkloadSchedulingRequirements.",
    )


class ProvisioningRequestConfig(KObject):
    """Parameters of kqueue's ProvisioningRequest admission check. Cluster-scoped."""

    KIND: ClassVar[str] = "ProvisioningRequestConfig"
    PLURAL: ClassVar[str] = "provisioningrequestconfigs"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("prc",)

    kind: Literal["ProvisioningRequestConfig"] = Field(
        default="ProvisioningRequestConfig",
        description="Kind of this object: ProvisioningRequestConfig.",
    )
    spec: ProvisioningRequestConfigSpec = Field(description="The request to create.")
