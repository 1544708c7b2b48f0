"""The RayJob's and RayCluster's MultiKueue adapters (Kueue's rayjob_ and
raycluster_multikueue_adapter.go on ray_multikueue_adapter.go): the whole spec without
``spec.managedBy``, the status copied back. KubeRay's CRDs accept only ``ray.io/kuberay-operator``
or ``kueue.x-k8s.io/multikueue`` there (and KubeRay leaves the latter alone), so a manager-side
RayJob or RayCluster carries ``kueue.x-k8s.io/multikueue``. RayService is not dispatched (its
adapter is not in kqueue yet)."""

from __future__ import annotations

from typing import Final

from kqueue.controller.admission_checks.multikueue.adapters import KUEUE_MULTIKUEUE, CopyAdapter
from kqueue.controller.integrations.ray.generic import RAYCLUSTERS, RAYJOBS

# KubeRay's own controller name (the field's default).
KUBERAY: Final = "ray.io/kuberay-operator"
RAYJOB_ADAPTER: Final = CopyAdapter(
    "ray.io/v1", "RayJob", RAYJOBS, KUBERAY, managed_by=KUEUE_MULTIKUEUE
)
RAYCLUSTER_ADAPTER: Final = CopyAdapter(
    "ray.io/v1", "RayCluster", RAYCLUSTERS, KUBERAY, managed_by=KUEUE_MULTIKUEUE
)
