"""The JobSet's MultiKueue adapter (Kueue's jobset_multikueue_adapter.go): the whole spec
without ``spec.managedBy`` (any value is allowed, so kqueue's), the status copied back."""

from __future__ import annotations

from typing import Final

from kqueue.controller.admission_checks.multikueue.adapters import CopyAdapter
from kqueue.controller.integrations.jobset.generic import JOBSETS

ADAPTER: Final = CopyAdapter(
    "jobset.x-k8s.io/v1alpha2", "JobSet", JOBSETS, "jobset.sigs.k8s.io/jobset-controller"
)
