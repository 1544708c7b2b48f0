"""Cohort: a node in the tree of ClusterQueues that share quota, with optional quota of its own."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from kqueue.api.v1alpha1.base import KBase, Name
from kqueue.api.v1alpha1.clusterqueue import FairSharing, FairSharingStatus, ResourceGroup
from kqueue.api.v1alpha1.meta import KObject


class CohortSpec(KBase):
    """Desired state of a Cohort."""

    parent_name: Name | None = Field(
        default=None,
        description="Parent Cohort, if any. Unset: this Cohort is the root of its tree. A parent "
        "that does not exist behaves as a Cohort without quota or limits. A cycle disables "
        "admission in every Cohort and ClusterQueue of the cycle until it is removed. Must not "
        "be the Cohort itself.",
    )
    resource_groups: list[ResourceGroup] = Field(
        default_factory=list,
        max_length=16,
        description="Quota the Cohort adds to what its ClusterQueues provide, shared by all of "
        "its subtree (at most 16 groups). borrowingLimit limits what the subtree borrows from "
        "the parent, lendingLimit what it lends to the parent; both need a parentName.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    fair_sharing: FairSharing | None = Field(
        default=None,
        description="Fair-sharing properties (weight) of this Cohort among its siblings, used "
        "when the Configuration enables fair sharing. Unset: weight 1.",
    )


class CohortStatus(KBase):
    """Observed state of a Cohort."""

    fair_sharing: FairSharingStatus | None = Field(
        default=None,
        description="Fair-sharing state, when the Configuration enables fair sharing.",
    )


class Cohort(KObject):
    """A group of ClusterQueues (and child Cohorts) that borrow and lend quota. Cluster-scoped."""

    KIND: ClassVar[str] = "Cohort"
    PLURAL: ClassVar[str] = "cohorts"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()
    _omit_if_default: ClassVar[frozenset[str]] = frozenset({"status"})

    kind: Literal["Cohort"] = Field(default="Cohort", description="Kind of this object: Cohort.")
    spec: CohortSpec = Field(
        default_factory=CohortSpec,
        description="Desired state of the Cohort.",
        json_schema_extra={"default": {}},
    )
    status: CohortStatus = Field(
        default_factory=CohortStatus, description="Observed state of the Cohort."
    )
