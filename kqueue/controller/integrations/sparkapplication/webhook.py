"""Admission webhooks for SparkApplications (sparkoperator.k8s.io/v1beta2) that name a queue.

Mutating: suspended while queued (``spec.suspend``), the driver's and the executors' pod
templates (``spec.driver.template``, ``spec.executor.template``; made with the role's container
when absent, as Kueue does) gated (:mod:`kqueue.controller.integrations.suspension`), the
driver's kept out of the gang (``kqueue.io/gang-scheduling: "false"``): its executors are. Validating,
as Kueue's: only cluster mode, no dynamic allocation, refused naming the field; the queue and
priority-class labels cannot change while it runs; annotations it cannot honour are refused.
"""

from __future__ import annotations

from typing import Any, Final

from kqueue.api.integrations.sparkapplication import (
    CONTAINER_NAMES,
    DRIVER,
    EXECUTOR,
    spec_errors,
    state,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.suspension import SuspendableKind
from kqueue.controller.webhook_server import FieldError

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication"
VALIDATE_PATH: Final = "/validate-sparkoperator-k8s-io-v1beta2-sparkapplication"


def pod_templates(app: Obj) -> list[Obj]:
    spec = app.setdefault("spec", {})
    out = []
    for role in (DRIVER, EXECUTOR):
        role_spec = spec.setdefault(role, {})
        template = role_spec.setdefault("template", {})
        pod = template.setdefault("spec", {})
        if not pod.get("containers"):
            pod["containers"] = [{"name": CONTAINER_NAMES[role]}]
        if role == DRIVER:
            # Spark's driver creates the executors once it runs: in their gang it would be
            # waited for by the pods it creates. The executors are the gang.
            template.setdefault("metadata", {}).setdefault("annotations", {}).setdefault(
                c.GANG_SCHEDULING_ANNOTATION, "false"
            )
        out.append(template)
    return out


def _errors(app: Obj) -> list[FieldError]:
    return [FieldError(path, message) for path, message in spec_errors(app)]


SUSPENDABLE: Final = SuspendableKind(
    kind="SparkApplication",
    pod_templates=pod_templates,
    started=lambda old: state(old) in ("RUNNING", "SUBMITTED"),
    spec_errors=_errors,
)
