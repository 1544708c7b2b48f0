"""MultiKueueConfig and MultiKueueCluster: one queue in front of many clusters (Kueue v1beta2
shapes, docs/contracts.md §6, docs/multikueue.md).

An AdmissionCheck of controller ``kqueue.io/multikueue`` names a MultiKueueConfig in its
parameters; the config lists the MultiKueueClusters (worker clusters) a workload may be
dispatched to, most preferred first. A MultiKueueCluster says where its kubeconfig is: a Secret
in the controller's namespace (key ``kubeconfig``) or a path on the controller's disk.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field

from kqueue.api.v1alpha1.base import KBase
from kqueue.api.v1alpha1.clusterqueue import CONDITION_LIST
from kqueue.api.v1alpha1.meta import Condition, KObject, find_condition

CONTROLLER_NAME: Final = "kqueue.io/multikueue"
CONFIG_KIND: Final = "MultiKueueConfig"
# The key of a kubeconfig Secret that holds the kubeconfig (Kueue's MultiKueueConfigSecretKey).
SECRET_KEY: Final = "kubeconfig"
# A MultiKueueCluster's condition: whether the manager can reach the worker.
ACTIVE: Final = "Active"
# On every object the manager creates on a worker: which manager made it (Configuration
# multiKueue.origin), so a manager's garbage collector deletes its own orphans only.
ORIGIN_LABEL: Final = "kqueue.io/multikueue-origin"
# On remote objects: the UID of the manager-side object they copy.
ORIGIN_UID_ANNOTATION: Final = "kqueue.io/multikueue-origin-uid"
MAX_CLUSTERS: Final = 20

LocationType = Literal["Secret", "Path"]
QuotaManagement = Literal["Manual", "Automated"]

ClusterName = Annotated[str, Field(min_length=1, max_length=256)]


class KubeConfig(KBase):
    """Where the worker's kubeconfig is."""

    location: str = Field(
        min_length=1,
        max_length=256,
        description="With locationType Secret: the name of a Secret in the controller's "
        "namespace whose key 'kubeconfig' holds the kubeconfig; with Path: a file on the "
        "controller's disk.",
    )
    location_type: LocationType = Field(
        default="Secret",
        description="Secret (default) or Path.",
        json_schema_extra={"default": "Secret"},
    )


class ClusterProfileReference(KBase):
    """A ClusterProfile (sigs.k8s.io cluster inventory API). Kueue's field; kqueue does not
    read ClusterProfiles, and a cluster that names one is inactive (reason
    ClusterProfileNotSupported)."""

    name: str = Field(min_length=1, max_length=256, description="Name of the ClusterProfile.")


class ClusterSource(KBase):
    """How to connect to the worker cluster."""

    kube_config: KubeConfig | None = Field(
        default=None, description="Where the kubeconfig of the worker cluster is."
    )
    cluster_profile_ref: ClusterProfileReference | None = Field(
        default=None, description="A ClusterProfile to connect with (not supported by kqueue)."
    )


class MultiKueueClusterSpec(KBase):
    """The worker cluster to connect to."""

    cluster_source: ClusterSource = Field(description="How to connect to the cluster.")


class MultiKueueClusterStatus(KBase):
    """Observed state of a MultiKueueCluster."""

    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Active: True while the manager is connected to the worker; False with the "
        "reason (BadConfig, ClusterUnreachable...) naming the problem.",
        json_schema_extra=CONDITION_LIST,
    )


class MultiKueueCluster(KObject):
    """A worker cluster of MultiKueue. Cluster-scoped."""

    KIND: ClassVar[str] = "MultiKueueCluster"
    PLURAL: ClassVar[str] = "multikueueclusters"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mkc",)
    _omit_if_default: ClassVar[frozenset[str]] = frozenset({"status"})

    kind: Literal["MultiKueueCluster"] = Field(
        default="MultiKueueCluster", description="Kind of this object: MultiKueueCluster."
    )
    spec: MultiKueueClusterSpec = Field(description="The worker cluster.")
    status: MultiKueueClusterStatus = Field(
        default_factory=MultiKueueClusterStatus, description="Observed state."
    )

    def condition_active(self) -> Condition | None:
        return find_condition(self.status.conditions, ACTIVE)

    @property
    def is_active(self) -> bool:
        cond = self.condition_active()
        return cond is not None and cond.is_true


class MultiKueueConfigSpec(KBase):
    """The worker clusters of a MultiKueue admission check."""

    clusters: list[ClusterName] = Field(
        min_length=1,
        max_length=MAX_CLUSTERS,
        description="Names of MultiKueueClusters workloads may be dispatched to, most "
        "preferred first (the Incremental dispatcher nominates them in this order). Each once.",
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": [
                {
                    "rule": "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0",
                    "message": "must be unique",
                }
            ],
        },
    )
    quota_management: QuotaManagement | None = Field(
        default=None,
        description="Manual (default): the manager's quota is set by hand. Automated is "
        "Kueue's; kqueue does not implement it.",
    )


class MultiKueueConfig(KObject):
    """The parameters of a MultiKueue admission check. Cluster-scoped."""

    KIND: ClassVar[str] = "MultiKueueConfig"
    PLURAL: ClassVar[str] = "multikueueconfigs"
    NAMESPACED: ClassVar[bool] = False
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mkcfg",)

    kind: Literal["MultiKueueConfig"] = Field(
        default="MultiKueueConfig", description="Kind of this object: MultiKueueConfig."
    )
    spec: MultiKueueConfigSpec = Field(description="The worker clusters.")
