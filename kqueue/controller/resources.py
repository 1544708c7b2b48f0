"""Where each kind of object the controller reads or writes lives in the API.

A :class:`Resource` is a kind's ``group/version`` and plural name; the client (``kube.py``),
the informers and every reconciler address objects through these constants, so the REST paths
are spelled in one place. No I/O here: everything else in the controller may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kqueue.api.v1alpha1 import constants as c

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """Where a kind of object lives in the API: ``group/version`` and its plural name."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None = None) -> str:
        """``/api/v1/namespaces/ns/configmaps``; all namespaces when ``namespace`` is None."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        return f"{self.collection_path(namespace)}/{name}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


# Kubernetes kinds.
CONFIGMAPS: Final = Resource("", "v1", "configmaps")
SECRETS: Final = Resource("", "v1", "secrets")
PODS: Final = Resource("", "v1", "pods")
NAMESPACES: Final = Resource("", "v1", "namespaces", namespaced=False)
LIMIT_RANGES: Final = Resource("", "v1", "limitranges")
RESOURCE_CLAIM_TEMPLATES: Final = Resource("resource.k8s.io", "v1", "resourceclaimtemplates")
RESOURCE_SLICES: Final = Resource("resource.k8s.io", "v1", "resourceslices", namespaced=False)
DEVICE_CLASSES: Final = Resource("resource.k8s.io", "v1", "deviceclasses", namespaced=False)
NODES: Final = Resource("", "v1", "nodes", namespaced=False)
EVENTS: Final = Resource("", "v1", "events")
JOBS: Final = Resource("batch", "v1", "jobs")
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases")
PRIORITY_CLASSES: Final = Resource("scheduling.k8s.io", "v1", "priorityclasses", namespaced=False)
MUTATING_WEBHOOK_CONFIGURATIONS: Final = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", namespaced=False
)
VALIDATING_WEBHOOK_CONFIGURATIONS: Final = Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", namespaced=False
)

# The kqueue.io kinds.
RESOURCE_FLAVORS: Final = Resource(c.GROUP, c.VERSION, "resourceflavors", namespaced=False)
CLUSTER_QUEUES: Final = Resource(c.GROUP, c.VERSION, "clusterqueues", namespaced=False)
COHORTS: Final = Resource(c.GROUP, c.VERSION, "cohorts", namespaced=False)
WORKLOAD_PRIORITY_CLASSES: Final = Resource(
    c.GROUP, c.VERSION, "workloadpriorityclasses", namespaced=False
)
LOCAL_QUEUES: Final = Resource(c.GROUP, c.VERSION, "localqueues")
WORKLOADS: Final = Resource(c.GROUP, c.VERSION, "workloads")
ADMISSION_CHECKS: Final = Resource(c.GROUP, c.VERSION, "admissionchecks", namespaced=False)
MULTIKUEUE_CONFIGS: Final = Resource(c.GROUP, c.VERSION, "multikueueconfigs", namespaced=False)
MULTIKUEUE_CLUSTERS: Final = Resource(
    c.GROUP, c.VERSION, "multikueueclusters", namespaced=False
)
PROVISIONING_REQUEST_CONFIGS: Final = Resource(
    c.GROUP, c.VERSION, "provisioningrequestconfigs", namespaced=False
)


def object_key(obj: Obj) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)
