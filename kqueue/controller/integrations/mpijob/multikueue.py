"""The MPIJob's MultiKueue adapter (Kueue's mpijob_multikueue_adapter.go): the whole spec without
``spec.runPolicy.managedBy``, the status copied back. The MPI operator's validation accepts only
``kubeflow.org/mpi-operator`` or ``kueue.x-k8s.io/multikueue`` there (and leaves the latter
alone), so a manager-side MPIJob carries ``kueue.x-k8s.io/multikueue``."""

from __future__ import annotations

from typing import Final

from kqueue.controller.admission_checks.multikueue.adapters import (
    KUEUE_MULTIKUEUE,
    RUN_POLICY_MANAGED_BY,
    RUN_POLICY_SUSPEND,
    CopyAdapter,
)
from kqueue.controller.integrations.mpijob.generic import MPIJOBS

ADAPTER: Final = CopyAdapter(
    "kubeflow.org/v2beta1", "MPIJob", MPIJOBS, "kubeflow.org/mpi-operator",
    managed_by=KUEUE_MULTIKUEUE,
    managed_by_path=RUN_POLICY_MANAGED_BY,
    suspend_path=RUN_POLICY_SUSPEND,
)
