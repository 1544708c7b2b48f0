"""The pod template of a Workload pod set, and the resources one of its pods requests.

kqueue reads only what admission needs (container requests and limits, overhead, node selector,
required node affinity, tolerations, priority class). Every other field of the PodTemplateSpec is
kept verbatim (the models allow extra fields) so a Workload read and written back loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field

from kqueue.api.quantity import Quantity
from kqueue.api.v1alpha1.base import KBase, ResourceList
from kqueue.api.v1alpha1.meta import Toleration


class _Open(KBase):
    """A Kubernetes core type of which kqueue models a part: other fields are kept as they are."""

    model_config = ConfigDict(extra="allow")


class ResourceRequirements(_Open):
    """Compute resources of a container."""

    requests: ResourceList = Field(
        default_factory=dict,
        description="Minimum amount of each resource the container needs; this is what quota is "
        "charged for. A resource with a limit but no request requests its limit.",
    )
    limits: ResourceList = Field(
        default_factory=dict, description="Maximum amount of each resource the container may use."
    )

    def effective_requests(self) -> dict[str, Quantity]:
        """Requests, with limits standing in for missing requests (Kubernetes' defaulting)."""
        out = dict(self.limits)
        out.update(self.requests)
        return out


class Container(_Open):
    """A container of the pod template."""

    _omit_if_default: ClassVar[frozenset[str]] = frozenset({"resources"})

    name: str = Field(description="Name of the container, unique within the pod.")
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements, description="Resources the container requests."
    )
    restart_policy: str | None = Field(
        default=None,
        description="For init containers only: Always makes it a sidecar that keeps running "
        "beside the main containers, so its requests add to theirs.",
    )

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == "Always"


class NodeSelectorRequirement(KBase):
    """A requirement on a node label (or field): a key, an operator and values."""

    key: str = Field(description="Node label key the requirement applies to.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = Field(
        description="How the label relates to the values: In, NotIn, Exists, DoesNotExist, Gt or Lt."
    )
    values: list[str] = Field(
        default_factory=list,
        description="Values for In and NotIn, a single integer for Gt and Lt, none otherwise.",
    )

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.key not in labels:
            return self.operator == "NotIn"
        value = labels[self.key]
        if self.operator == "In":
            return value in self.values
        if self.operator == "NotIn":
            return value not in self.values
        try:
            have, bound = int(value), int(self.values[0])
        except (ValueError, IndexError):
            return False
        return have > bound if self.operator == "Gt" else have < bound


class NodeSelectorTerm(KBase):
    """Node requirements that must all hold (terms of a NodeSelector are ORed)."""

    match_expressions: list[NodeSelectorRequirement] = Field(
        default_factory=list, description="Requirements on node labels."
    )
    match_fields: list[NodeSelectorRequirement] = Field(
        default_factory=list, description="Requirements on node fields (metadata.name)."
    )


class NodeSelector(KBase):
    """A set of node selector terms; a node matches if any term matches."""

    node_selector_terms: list[NodeSelectorTerm] = Field(description="The terms, ORed together.")


class NodeAffinity(_Open):
    """Node affinity of the pod. kqueue reads the required part; the preferred part is kept."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = Field(
        default=None,
        description="Nodes the pod must run on. During admission, terms on keys of a flavor's "
        "nodeLabels decide whether the flavor fits the pod set.",
    )


class Affinity(_Open):
    """Scheduling constraints of the pod. kqueue reads node affinity; the rest is kept."""

    node_affinity: NodeAffinity | None = Field(
        default=None, description="Node affinity of the pod."
    )


class PodSpec(_Open):
    """The pod spec of a pod set. Fields kqueue does not read are kept as they are."""

    containers: list[Container] = Field(description="The pod's containers.")
    init_containers: list[Container] = Field(
        default_factory=list,
        description="Containers run in order before the main ones; those with restartPolicy "
        "Always are sidecars that keep running.",
    )
    overhead: ResourceList = Field(
        default_factory=dict,
        description="Resources the pod's runtime uses on top of its containers (RuntimeClass "
        "overhead); charged to quota like requests.",
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="Node labels the pod requires. During admission, keys that a flavor's "
        "nodeLabels also set must match for the flavor to be assigned.",
    )
    affinity: Affinity | None = Field(default=None, description="Scheduling constraints.")
    tolerations: list[Toleration] = Field(
        default_factory=list,
        description="Taints the pod tolerates. A flavor whose nodeTaints are not tolerated "
        "(by these or the flavor's own tolerations) is not assigned.",
    )
    priority_class_name: str | None = Field(
        default=None,
        description="The pod's PriorityClass; the Workload's priority comes from it unless a "
        "WorkloadPriorityClass is given.",
    )

    def pod_requests(self) -> dict[str, int]:
        """Per-pod requests in kqueue's integer units (milli-units for CPU).

        Kubernetes' rule (PodRequests): the larger of the sum over containers (plus sidecars) and
        the peak of any init container (plus the sidecars started before it), then overhead.
        A container's limit stands in for a missing request.
        """
        total: dict[str, int] = {}
        for c in self.containers:
            _add(total, _units(c.resources.effective_requests()))
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for c in self.init_containers:
            reqs = _units(c.resources.effective_requests())
            if c.is_sidecar:
                _add(total, reqs)
                _add(sidecars, reqs)
                during = dict(sidecars)
            else:
                during = dict(reqs)
                _add(during, sidecars)
            _max(init_peak, during)
        _max(total, init_peak)
        _add(total, _units(self.overhead))
        return total


class PodTemplateMeta(_Open):
    """Metadata of the pod template: labels and annotations given to the pods."""

    labels: dict[str, str] = Field(default_factory=dict, description="Labels of the pods.")
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Annotations of the pods."
    )


class PodTemplateSpec(_Open):
    """Template of the pods of a pod set."""

    _omit_if_default: ClassVar[frozenset[str]] = frozenset({"metadata"})

    metadata: PodTemplateMeta = Field(
        default_factory=PodTemplateMeta, description="Labels and annotations of the pods."
    )
    spec: PodSpec = Field(description="Spec of the pods.")


def _units(resources: Mapping[str, Quantity]) -> dict[str, int]:
    return {name: q.units(name) for name, q in resources.items()}


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, 0) + amount


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = max(into.get(name, amount), amount)


def scale(requests: Mapping[str, int], count: int) -> dict[str, int]:
    """Requests of ``count`` pods."""
    return {name: amount * count for name, amount in requests.items()}


def add_requests(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Sum of several request maps."""
    out: dict[str, int] = {}
    for p in parts:
        _add(out, p)
    return out
