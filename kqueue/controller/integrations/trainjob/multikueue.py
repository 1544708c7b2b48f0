"""The TrainJob's MultiKueue adapter (Kueue's trainjob_multikueue_adapter.go). Trainer's CRD
accepts only ``trainer.kubeflow.org/trainjob-controller`` or ``kueue.x-k8s.io/multikueue`` in
``spec.managedBy`` (and Trainer leaves the latter alone), so a manager-side TrainJob carries
``kueue.x-k8s.io/multikueue``. The copy drops kqueue's ``spec.runtimePatches`` entry: the worker's
kqueue writes its own with the worker's admission."""

from __future__ import annotations

from typing import Any, Final

from kqueue.api.integrations.trainjob import RUNTIME_PATCH_MANAGER
from kqueue.controller.admission_checks.multikueue.adapters import KUEUE_MULTIKUEUE, CopyAdapter
from kqueue.controller.integrations.trainjob.generic import TRAINJOBS

Obj = dict[str, Any]


def _clean(remote: Obj) -> None:
    spec = remote["spec"]
    if "runtimePatches" in spec:
        spec["runtimePatches"] = [
            p for p in spec["runtimePatches"] or [] if p.get("manager") != RUNTIME_PATCH_MANAGER
        ]


ADAPTER: Final = CopyAdapter(
    "trainer.kubeflow.org/v1alpha1", "TrainJob", TRAINJOBS,
    "trainer.kubeflow.org/trainjob-controller",
    managed_by=KUEUE_MULTIKUEUE, clean=_clean,
)
