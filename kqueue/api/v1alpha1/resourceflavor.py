"""ResourceFlavor: a kind of node (hardware, pricing, zone) that quota is given for."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, JsonValue

from kqueue.api.v1alpha1.base import KBase
from kqueue.api.v1alpha1.meta import KObject, Taint, Toleration

# Kueue's CEL rules on a flavor's tolerations (the API server checks pods' tolerations itself, but
# these are copied into pods at admission, so they are checked here first).
TOLERATION_RULES: list[JsonValue] = [
    {
        "rule": "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)",
        "message": "operator must be Exists when 'key' is empty, which means 'match all values "
        "and all keys'",
    },
    {
        "rule": "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)",
        "message": "effect must be 'NoExecute' when 'tolerationSeconds' is set",
    },
    {
        "rule": "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])",
        "message": "supported toleration values: 'Equal'(default), 'Exists'",
    },
    {
        "rule": "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)",
        "message": "a value must be empty when 'operator' is 'Exists'",
    },
    {
        "rule": "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', "
        "'NoExecute'])",
        "message": "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
    },
]


class ResourceFlavorSpec(KBase):
    """What distinguishes the nodes of a flavor, and what admitted pods get to land on them."""

    node_labels: dict[str, str] = Field(
        default_factory=dict,
        max_length=8,
        description="Labels of the nodes of this flavor (at most 8). A pod set can be assigned "
        "the flavor only if its nodeSelector and required node affinity agree with these labels; "
        "once admitted, its pods get them as nodeSelector.",
        json_schema_extra={"x-kubernetes-map-type": "atomic"},
    )
    node_taints: list[Taint] = Field(
        default_factory=list,
        max_length=8,
        description="Taints of the nodes of this flavor (at most 8). A pod set that does not "
        "tolerate them (NoSchedule and NoExecute; PreferNoSchedule is ignored) is not assigned "
        "the flavor, unless the flavor's tolerations cover them.",
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', "
                    "'NoExecute'])",
                    "message": "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', "
                    "'NoExecute'",
                }
            ],
        },
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=8,
        description="Tolerations added to the pods admitted with this flavor (at most 8), e.g. "
        "for the taints of spot nodes.",
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": TOLERATION_RULES,
        },
    )


    topology_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="Name of the Topology the nodes of this flavor are organised in. Set: pod "
        "sets admitted with this flavor are placed in the Topology's domains "
        "(topology-aware scheduling), and only pod sets with a topologyRequest (or in a "
        "ClusterQueue whose flavors are all topology-aware) may use it. Cannot change.",
    )


class ResourceFlavor(KObject):
    """A kind of node quota is given for. Cluster-scoped."""

    KIND: ClassVar[str] = "ResourceFlavor"
    PLURAL: ClassVar[str] = "resourceflavors"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("flavor", "flavors", "rf")

    kind: Literal["ResourceFlavor"] = Field(
        default="ResourceFlavor", description="Kind of this object: ResourceFlavor."
    )
    spec: ResourceFlavorSpec = Field(
        default_factory=ResourceFlavorSpec,
        description="The nodes this flavor stands for.",
        json_schema_extra={"default": {}},
    )
