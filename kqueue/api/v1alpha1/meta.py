"""Kubernetes types the kqueue kinds share: object metadata, conditions, selectors, taints.

Only the parts kqueue uses are modelled; :class:`ObjectMeta` keeps every other metadata field
(``managedFields``, ``generateName``...) verbatim so an object read and written back loses nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from kqueue.api.v1alpha1.base import Int64, KBase, Name, Time


class OwnerReference(KBase):
    """An object this one belongs to; it is garbage-collected when its owners are gone."""

    model_config = ConfigDict(extra="allow")

    api_version: str = Field(description="API version of the owner, e.g. batch/v1.")
    kind: str = Field(description="Kind of the owner, e.g. Job.")
    name: str = Field(description="Name of the owner.")
    uid: str = Field(description="UID of the owner: the reference holds only for this incarnation.")
    controller: bool | None = Field(
        default=None, description="True if the owner is the managing controller of this object."
    )
    block_owner_deletion: bool | None = Field(
        default=None,
        description="If true, the owner cannot be deleted in the foreground before this object is.",
    )


class ObjectMeta(KBase):
    """Standard object metadata. Fields kqueue does not model are kept as they are."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(
        min_length=1,
        description="Name of the object, unique among objects of its kind (in its namespace for "
        "namespaced kinds). Must be a lowercase RFC 1123 subdomain.",
    )
    namespace: str | None = Field(
        default=None,
        description="Namespace of a namespaced object (LocalQueue, Workload); empty for "
        "cluster-scoped kinds.",
    )
    uid: str | None = Field(default=None, description="Unique id the API server gives the object.")
    resource_version: str | None = Field(
        default=None,
        description="Opaque version of the object, for optimistic concurrency and watches.",
    )
    generation: Int64 | None = Field(
        default=None,
        description="Sequence number of the desired state (spec), set by the API server.",
    )
    creation_timestamp: Time | None = Field(
        default=None,
        description="When the object was created. Workloads are queued in this order.",
    )
    deletion_timestamp: Time | None = Field(
        default=None,
        description="When deletion was requested; the object goes once its finalizers are removed.",
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Labels: string keys and values for selecting objects."
    )
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Annotations: arbitrary non-identifying metadata."
    )
    owner_references: list[OwnerReference] = Field(
        default_factory=list, description="Objects this one depends on, such as a Workload's Job."
    )
    finalizers: list[str] = Field(
        default_factory=list,
        description="Keys that must be removed before the object is deleted from storage.",
    )

    @property
    def extra(self) -> dict[str, Any]:
        """Metadata fields kqueue does not model, kept for the round trip."""
        return dict(self.__pydantic_extra__ or {})


class KObject(KBase):
    """Common shape of the kqueue.io/v1alpha1 kinds: apiVersion, kind, metadata."""

    KIND: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()

    api_version: Literal["kqueue.io/v1alpha1"] = Field(
        default="kqueue.io/v1alpha1", description="API version of this object: kqueue.io/v1alpha1."
    )
    kind: str = Field(description="Kind of this object.")
    metadata: ObjectMeta = Field(description="Standard object metadata.")

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace

    @property
    def key(self) -> str:
        """``namespace/name`` for namespaced kinds, ``name`` otherwise."""
        if self.NAMESPACED:
            return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"
        return self.metadata.name

    @property
    def ref(self) -> str:
        """How messages name the object: ``Kind ns/name`` or ``Kind name``."""
        return f"{self.KIND} {self.key}"


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(KBase):
    """One aspect of an object's state, as in metav1.Condition."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        description="Type of the condition in CamelCase, e.g. QuotaReserved, Admitted, Evicted.",
    )
    status: ConditionStatus = Field(description="Status of the condition: True, False or Unknown.")
    observed_generation: Int64 | None = Field(
        default=None,
        ge=0,
        description="metadata.generation the condition was set for; older means it may be stale.",
    )
    last_transition_time: Time = Field(
        description="When the status last changed. For QuotaReserved=True, when the quota was taken."
    )
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description="Machine-readable CamelCase reason for the last transition, e.g. Preempted.",
    )
    message: str = Field(
        default="",
        max_length=32768,
        description="Human-readable details. kqueue's messages name the pod set, flavor and "
        "resource with the amounts requested, available and missing.",
    )

    @property
    def is_true(self) -> bool:
        return self.status == "True"


def find_condition(conditions: list[Condition], type_: str) -> Condition | None:
    """The condition of ``type_``, if present."""
    for c in conditions:
        if c.type == type_:
            return c
    return None


def is_condition_true(conditions: list[Condition], type_: str) -> bool:
    c = find_condition(conditions, type_)
    return c is not None and c.status == "True"


def set_condition(
    conditions: list[Condition],
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int | None = None,
) -> bool:
    """Set a condition in place, keeping lastTransitionTime if the status does not change.

    Returns whether anything changed.
    """
    existing = find_condition(conditions, type_)
    if existing is None:
        conditions.append(
            Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=now,
                observed_generation=observed_generation,
            )
        )
        return True
    changed = False
    if existing.status != status:
        existing.status = status
        existing.last_transition_time = now
        changed = True
    for attr, value in (
        ("reason", reason),
        ("message", message),
        ("observed_generation", observed_generation),
    ):
        if getattr(existing, attr) != value:
            setattr(existing, attr, value)
            changed = True
    return changed


class LabelSelectorRequirement(KBase):
    """One requirement of a label selector: a key, an operator and values."""

    key: str = Field(description="Label key the requirement applies to.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the key relates to the values: In, NotIn, Exists or DoesNotExist."
    )
    values: list[str] = Field(
        default_factory=list,
        description="Values for In and NotIn (must not be empty); must be empty for Exists and "
        "DoesNotExist.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )

    def matches(self, labels: dict[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


class LabelSelector(KBase):
    """Selects objects by their labels; all requirements must hold. An empty selector matches
    everything."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    match_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels that must be present with exactly these values.",
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list,
        description="Requirements on labels, all of which must hold.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(KBase):
    """A node taint: pods that do not tolerate it are kept off (or evicted from) the node."""

    key: str = Field(description="Taint key, a qualified name such as example.com/spot.")
    value: str | None = Field(default=None, description="Taint value, a valid label value.")
    effect: TaintEffect = Field(
        description="What the taint does to pods that do not tolerate it: NoSchedule, "
        "PreferNoSchedule or NoExecute."
    )
    time_added: Time | None = Field(
        default=None, description="When the taint was added (NoExecute taints only)."
    )


class Toleration(KBase):
    """Lets a pod schedule onto nodes whose taints it matches."""

    key: str | None = Field(
        default=None,
        description="Taint key to tolerate; empty with operator Exists tolerates every taint.",
    )
    operator: str | None = Field(
        default=None,
        description="Equal (default) matches key and value; Exists matches any value of the key.",
    )
    value: str | None = Field(
        default=None, description="Taint value to match with operator Equal; empty for Exists."
    )
    effect: str | None = Field(
        default=None,
        description="Taint effect to tolerate: NoSchedule, PreferNoSchedule or NoExecute; empty "
        "tolerates all effects.",
    )
    toleration_seconds: Int64 | None = Field(
        default=None,
        description="For NoExecute: how long the pod stays bound after the taint appears; unset "
        "means forever.",
    )

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' matching rule (ToleratesTaint)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in (None, "", "Equal"):
            return (self.value or "") == (taint.value or "")
        return False


__all__ = [
    "Condition",
    "ConditionStatus",
    "KObject",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Name",
    "ObjectMeta",
    "OwnerReference",
    "Taint",
    "TaintEffect",
    "Toleration",
    "find_condition",
    "is_condition_true",
    "set_condition",
]
