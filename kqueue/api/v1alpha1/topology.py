"""Topology-aware scheduling: the Topology kind, a pod set's topologyRequest and the
topologyAssignment a pod set is admitted with (Kueue v1beta2's names and shapes).

A Topology lists node labels from the top of the network hierarchy (e.g. block) down to the
bottom (e.g. rack, then ``kubernetes.io/hostname``); a ResourceFlavor naming it in
``spec.topologyName`` makes its quota topology-aware: pods of a pod set admitted with it are
placed in domains of that hierarchy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.base import Int32, KBase
from kqueue.api.v1alpha1.meta import KObject

HOSTNAME_LABEL = "kubernetes.io/hostname"


class TopologyLevel(KBase):
    """One level of a Topology: the node label whose values name its domains."""

    node_label: str = Field(
        min_length=1,
        max_length=316,
        description="Node label of this level (a qualified name, e.g. cloud.provider.com/rack).",
    )


class TopologySpec(KBase):
    """The levels of a Topology."""

    levels: list[TopologyLevel] = Field(
        min_length=1,
        max_length=16,
        description="Levels from the top of the hierarchy (largest domains) to the bottom (1 to "
        "16, node labels unique). Only kubernetes.io/hostname may be the last level and "
        "nowhere else.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class Topology(KObject):
    """A hierarchy of node labels that topology-aware flavors place pods in. Cluster-scoped."""

    KIND: ClassVar[str] = "Topology"
    PLURAL: ClassVar[str] = "topologies"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()

    kind: Literal["Topology"] = Field(default="Topology", description="Kind of this object: Topology.")
    spec: TopologySpec = Field(description="The levels of the Topology.")

    def level_keys(self) -> list[str]:
        return [lv.node_label for lv in self.spec.levels]


class PodsetSliceRequiredTopologyConstraint(KBase):
    """One slice layer of a pod set (Kueue v1beta2 PodsetSliceRequiredTopologyConstraint)."""

    topology: str = Field(
        min_length=1, max_length=63, description="The level (node label) of this layer."
    )
    size: Int32 = Field(ge=1, description="Pods per slice of this layer.")


class PodSetTopologyRequest(KBase):
    """Where the pods of a pod set must or should be placed (Kueue v1beta2 PodSetTopologyRequest)."""

    required: str | None = Field(
        default=None,
        max_length=63,
        description="Level (node label) whose one domain must hold all pods of the pod set. Set "
        "from the kqueue.io/podset-required-topology annotation.",
    )
    preferred: str | None = Field(
        default=None,
        max_length=63,
        description="Level the pods should share one domain of; if none fits, the lowest level "
        "above that fits is used, else the pods spread. Set from the "
        "kqueue.io/podset-preferred-topology annotation.",
    )
    unconstrained: bool | None = Field(
        default=None,
        description="Place the pods anywhere the topology has room, without compactness. Set "
        "from the kqueue.io/podset-unconstrained-topology annotation.",
    )
    pod_set_group_name: str | None = Field(
        default=None,
        max_length=256,
        description="Pod sets of one group are placed together (a leader of one pod with its "
        "workers). Set from the kqueue.io/podset-group-name annotation.",
    )
    pod_set_slice_required_topology: str | None = Field(
        default=None,
        max_length=63,
        description="Level whose one domain must hold each slice of podSetSliceSize pods. Set "
        "from the kqueue.io/podset-slice-required-topology annotation.",
    )
    pod_set_slice_size: Int32 | None = Field(
        default=None,
        ge=1,
        description="Pods per slice; must divide the pod set's count. Set from the "
        "kqueue.io/podset-slice-size annotation.",
    )

    podset_slice_required_topology_constraints: list[PodsetSliceRequiredTopologyConstraint] | None = (
        Field(
            default=None,
            max_length=3,
            description="Slice layers from the outermost in (Kueue's TASMultiLayerTopology): "
            "each slice of a layer's size sits in one domain of its level, and is made of whole "
            "slices of the next layer. Exclusive with podSetSliceRequiredTopology and "
            "podSetSliceSize. Set from the "
            "kqueue.io/podset-slice-required-topology-constraints annotation (a JSON list).",
            json_schema_extra={"x-kubernetes-list-type": "atomic"},
        )
    )

    def level(self) -> str | None:
        return self.required if self.required is not None else self.preferred


def topology_request_from_annotations(
    annotations: Mapping[str, str],
) -> tuple[PodSetTopologyRequest | None, list[tuple[str, str]]]:
    """The request the pod-template annotations ask for, and (annotation, problem) pairs."""
    problems: list[tuple[str, str]] = []
    fields: dict[str, object] = {}
    names = {
        c.PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "required",
        c.PODSET_PREFERRED_TOPOLOGY_ANNOTATION: "preferred",
        c.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "pod_set_slice_required_topology",
        c.PODSET_GROUP_NAME_ANNOTATION: "pod_set_group_name",
    }
    for key, field in names.items():
        if key in annotations:
            fields[field] = annotations[key]
    uncons = annotations.get(c.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
    if uncons is not None:
        if uncons not in ("true", "false"):
            problems.append((c.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION, f"must be true or false, got {uncons!r}"))
        else:
            fields["unconstrained"] = uncons == "true"
    layers = annotations.get(c.PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION)
    if layers is not None:
        parsed = _layers(layers)
        if isinstance(parsed, str):
            problems.append((c.PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION, parsed))
        else:
            fields["podset_slice_required_topology_constraints"] = parsed
    size = annotations.get(c.PODSET_SLICE_SIZE_ANNOTATION)
    if size is not None:
        if not size.isdigit() or int(size) < 1:
            problems.append((c.PODSET_SLICE_SIZE_ANNOTATION, f"must be a positive integer, got {size!r}"))
        else:
            fields["pod_set_slice_size"] = int(size)
    if not fields:
        return None, problems
    return PodSetTopologyRequest.model_validate(fields), problems


def _layers(text: str) -> list[PodsetSliceRequiredTopologyConstraint] | str:
    """The constraints annotation's JSON list, or what is wrong with it."""
    allowed = 'a JSON list of at most 3 {"topology": <level>, "size": <pods>}'
    try:
        raw = json.loads(text)
    except ValueError:
        return f"must be {allowed}, got {text!r}"
    if not isinstance(raw, list) or not raw or len(raw) > 3:
        return f"must be {allowed}, got {text!r}"
    out: list[PodsetSliceRequiredTopologyConstraint] = []
    for item in raw:
        if (
            not isinstance(item, dict)
            or set(item) != {"topology", "size"}
            or not isinstance(item["topology"], str)
            or not item["topology"]
            or not isinstance(item["size"], int)
            or isinstance(item["size"], bool)
            or item["size"] < 1
        ):
            return f"must be {allowed}, got {text!r}"
        out.append(PodsetSliceRequiredTopologyConstraint(topology=item["topology"],
                                                         size=item["size"]))
    return out


# -- the assignment: Kueue v1beta2 TopologyAssignment -------------------------------------------


class TopologyAssignmentSliceLevelIndividualValues(KBase):
    """Values of one level, one per domain of the slice: prefix + root + suffix."""

    prefix: str | None = Field(default=None, description="Common prefix of all values.")
    suffix: str | None = Field(default=None, description="Common suffix of all values.")
    roots: list[str] = Field(
        min_length=1,
        description="The values without prefix and suffix, one per domain.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class TopologyAssignmentSliceLevelValues(KBase):
    """The values of one level in a slice: one for all domains, or one each."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.universal) != has(self.individual)",
                    "message": "exactly one of the fields in [universal individual] must be set",
                }
            ]
        }
    )

    universal: str | None = Field(default=None, description="The value shared by every domain.")
    individual: TopologyAssignmentSliceLevelIndividualValues | None = Field(
        default=None, description="A value per domain."
    )


class TopologyAssignmentSlicePodCounts(KBase):
    """Pods per domain of a slice: one count for all, or one each."""

    universal: Int32 | None = Field(default=None, ge=1, description="Pods in every domain.")
    individual: list[Int32] | None = Field(
        default=None,
        description="Pods in each domain.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class TopologyAssignmentSlice(KBase):
    """A run of domains with their level values and pod counts."""

    domain_count: Int32 = Field(ge=1, description="Number of domains in this slice.")
    values_per_level: list[TopologyAssignmentSliceLevelValues] = Field(
        min_length=1,
        max_length=16,
        description="One entry per level of the assignment.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    pod_counts: TopologyAssignmentSlicePodCounts = Field(description="Pods per domain.")

    def domains(self) -> list[tuple[list[str], int]]:
        """(values from top level down, pod count) per domain."""
        n = self.domain_count
        per_level: list[list[str]] = []
        for lv in self.values_per_level:
            if lv.universal is not None:
                per_level.append([lv.universal] * n)
            elif lv.individual is not None:
                ind = lv.individual
                per_level.append([(ind.prefix or "") + r + (ind.suffix or "") for r in ind.roots])
            else:
                per_level.append([""] * n)
        pc = self.pod_counts
        counts = [pc.universal] * n if pc.universal is not None else list(pc.individual or [])
        return [([vals[i] for vals in per_level], counts[i]) for i in range(min(n, len(counts)))]


class TopologyAssignment(KBase):
    """Where the pods of a pod set go: per domain of the lowest assigned levels, how many."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.slices.all(x, size(x.valuesPerLevel) == size(self.levels))",
                    "message": "valuesPerLevel must have the same length as the number of levels "
                    "in this TopologyAssignment",
                }
            ]
        }
    )

    levels: list[str] = Field(
        min_length=1,
        max_length=16,
        description="Node labels of the assigned levels, from the highest to the lowest.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    slices: list[TopologyAssignmentSlice] = Field(
        default_factory=list,
        description="Runs of domains; the assignment is their union.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )

    def domains(self) -> list[tuple[list[str], int]]:
        return [d for s in self.slices for d in s.domains()]


def _compact(values: list[str]) -> TopologyAssignmentSliceLevelValues:
    """Kueue's fillSingleCompactSliceValues: one universal value, or roots with common affixes."""
    first = values[0]
    if all(v == first for v in values):
        return TopologyAssignmentSliceLevelValues(universal=first)
    prefix = first
    suffix = first
    for v in values[1:]:
        i = 0
        while i < min(len(prefix), len(v)) and prefix[i] == v[i]:
            i += 1
        prefix = prefix[:i]
        j = 0
        while j < min(len(suffix), len(v)) and suffix[len(suffix) - 1 - j] == v[len(v) - 1 - j]:
            j += 1
        suffix = suffix[len(suffix) - j :] if j else ""
    min_len = min(len(v) for v in values)
    if len(prefix) + len(suffix) > min_len:
        prefix = prefix[: min_len - len(suffix)]
    roots = [v[len(prefix) : len(v) - len(suffix)] for v in values]
    return TopologyAssignmentSliceLevelValues(
        individual=TopologyAssignmentSliceLevelIndividualValues(
            prefix=prefix or None, suffix=suffix or None, roots=roots
        )
    )


def encode_assignment(
    levels: list[str], domains: list[tuple[list[str], int]]
) -> TopologyAssignment:
    """The v1beta2 form of ``domains`` (values per level, pod count), as one compact slice."""
    if not domains:
        return TopologyAssignment(levels=levels, slices=[])
    counts = [n for _, n in domains]
    pod_counts = (
        TopologyAssignmentSlicePodCounts(universal=counts[0])
        if all(n == counts[0] for n in counts)
        else TopologyAssignmentSlicePodCounts(individual=counts)
    )
    slice_ = TopologyAssignmentSlice(
        domain_count=len(domains),
        values_per_level=[_compact([vals[i] for vals, _ in domains]) for i in range(len(levels))],
        pod_counts=pod_counts,
    )
    return TopologyAssignment(levels=levels, slices=[slice_])
