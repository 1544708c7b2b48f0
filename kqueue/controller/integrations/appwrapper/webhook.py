"""Admission webhooks for AppWrappers (workload.codeflare.dev/v1beta2) that name a queue.

Mutating: suspended while queued (``spec.suspend``); each component without ``podSets`` gets
those its kind implies (what the AppWrapper operator's own webhook fills in, which is off in
kqueue's local cluster), and every pod template the podSets name is gated
(:mod:`kqueue.controller.integrations.suspension`). Validating: a component of a kind kqueue
does not manage (its pods would not wait for quota), pod sets kqueue cannot read, or declared
replicas that miscount the wrapped object's pods (checked where a request changes a component)
are refused naming the component's field; the queue and priority-class labels cannot change
while it runs; annotations an AppWrapper cannot honour are refused naming the annotation.
"""

from __future__ import annotations

from typing import Any, Final

from kqueue.api.integrations.appwrapper import (
    PATH_ROOT,
    at_path,
    component_errors,
    infer_pod_sets,
    managed_kinds,
    quota_reserved,
)
from kqueue.controller.integrations.suspension import SuspendableKind
from kqueue.controller.webhook_server import FieldError

Obj = dict[str, Any]

MUTATE_PATH: Final = "/mutate-workload-codeflare-dev-v1beta2-appwrapper"
VALIDATE_PATH: Final = "/validate-workload-codeflare-dev-v1beta2-appwrapper"


def pod_templates(aw: Obj) -> list[Obj]:
    """The pod templates an AppWrapper's podSets name (in place: podSets filled in from the
    component's kind where absent)."""
    out: list[Obj] = []
    components = aw.setdefault("spec", {}).get("components")
    for component in components if isinstance(components, list) else []:
        if not isinstance(component, dict) or not isinstance(component.get(PATH_ROOT), dict):
            continue
        if component.get("podSets") is None:
            inferred = infer_pod_sets(component[PATH_ROOT])
            if inferred is None:
                continue
            component["podSets"] = inferred
        for entry in component.get("podSets") or []:
            try:
                template = at_path(component, str((entry or {}).get("path")))
            except (ValueError, AttributeError):
                continue  # refused by the validating webhook, naming the field
            if isinstance(template, dict):
                out.append(template)
    return out


def spec_errors(aw: Obj, old: Obj | None = None) -> list[FieldError]:
    """What the AppWrapper cannot be queued with; on an update (``old``), the podSets' counts
    only where the update changes a component."""
    return [
        FieldError(path, message)
        for path, message in component_errors(aw, managed_kinds(), old=old)
    ]


SUSPENDABLE: Final = SuspendableKind(
    kind="AppWrapper",
    article="an",
    pod_templates=pod_templates,
    started=quota_reserved,
    spec_errors_since=spec_errors,
)
