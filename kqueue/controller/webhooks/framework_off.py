"""A queue label on a kind whose integration is off: told to the user, never refused.

An integration that is not in ``integrations.frameworks`` has no webhooks and no reconciler, so an
object labelled ``kqueue.io/queue-name`` while its kind's framework is off runs at once,
outside any quota, and nothing said so (only ``kqueue simulate`` did). This webhook
(``vintegrationoff.kqueue.io``) is routed the kinds of every registered integration that is off,
for objects carrying the queue label, with ``failurePolicy: Ignore`` (a report must never block
an object kqueue does not manage). On creation, or when the label is added or changed, it
answers with an admission warning (``kubectl`` prints it) and records a Warning event
``IntegrationDisabled`` on the object (``kubectl describe`` shows it, also for objects an
operator creates), both naming the object, the label and the Configuration field to change.

An object controlled by an object of an enabled integration (the child
object its operator creates) is queued with its parent and not reported. Plain pods are not
routed here: the pods of Jobs and other owners may carry a queue label copied
from their templates, and the owner, not the pod, is what would be queued.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.events import EventRecorder
from kqueue.controller.integrations import registry
from kqueue.controller.integrations.framework import Framework
from kqueue.controller.webhook_server import AdmissionRequest, Handler, Verdict

Obj = dict[str, Any]

VALIDATE_PATH: Final = "/validate-integration-off"
NAME: Final = "vintegrationoff.kqueue.io"
REASON: Final = "IntegrationDisabled"


def off_frameworks(enabled: Iterable[str]) -> list[Framework]:
    """The registered integrations that are off and have a kind a user labels (plain pods are
    never routed here: ``Integration.reported_when_off``)."""
    on = set(enabled)
    return [
        f for f in registry.frameworks() if f.name not in on and f.declares.reported_when_off
    ]


def rules(frameworks: Iterable[Framework]) -> list[Obj]:
    """The rules of the off integrations' validating webhooks (their kinds, CREATE and UPDATE)."""
    out: list[Obj] = []
    for fw in frameworks:
        for hook in fw.webhooks:
            if hook.type == "validating":
                out.extend(dict(r) for r in hook.rules)
    return out


def message(obj: Obj, framework: Framework, enabled: Iterable[str]) -> str:
    meta = obj.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(c.QUEUE_NAME_LABEL)
    name = meta.get("name") or meta.get("generateName") or "<generated>"
    target = f"{meta['namespace']}/{name}" if meta.get("namespace") else str(name)
    return (
        f"{framework.kind} {target} has the label {c.QUEUE_NAME_LABEL}={queue}, but kqueue's "
        f"{framework.name} integration is off, so kqueue does not queue it: it runs without "
        "waiting for quota. To queue it, add "
        f'"{framework.name}" to the Configuration\'s integrations.frameworks (chart value '
        f"config.integrations.frameworks; now: {', '.join(enabled) or 'none'}); otherwise "
        f"remove the label"
    )


def reporter(enabled: list[str], events: EventRecorder | None) -> Handler:
    by_kind = {(f.api_version, f.kind): f for f in off_frameworks(enabled)}
    # An object another enabled integration's object controls is queued with it (its
    # operator created it and copied the queue label onto it).
    parents = {(f.api_version, f.kind) for f in registry.enabled(enabled)}

    async def handle(req: AdmissionRequest) -> Verdict:
        obj = req.object
        if req.operation not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
            return Verdict.allow()
        labels = (obj.get("metadata") or {}).get("labels") or {}
        queue = labels.get(c.QUEUE_NAME_LABEL)
        if not queue:
            return Verdict.allow()
        if req.operation == "UPDATE":
            old_labels = ((req.old_object or {}).get("metadata") or {}).get("labels") or {}
            if old_labels.get(c.QUEUE_NAME_LABEL) == queue:
                return Verdict.allow()  # told already when the label was set
        group, version = req.kind.get("group") or "", req.kind.get("version") or ""
        api_version = f"{group}/{version}" if group else str(version)
        framework = by_kind.get((api_version, str(req.kind.get("kind") or "")))
        if framework is None:
            return Verdict.allow()
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("controller") and (ref.get("apiVersion"), ref.get("kind")) in parents:
                return Verdict.allow()
        # The request's namespace when the manifest left it out (kubectl -n).
        meta = {**(obj.get("metadata") or {}), "namespace": (obj.get("metadata") or {}).get("namespace") or req.namespace}
        obj = {**obj, "metadata": meta}
        text = message(obj, framework, enabled)
        if events is not None and not req.dry_run:
            events.record(obj, "Warning", REASON, text)
        return Verdict.allow(text)

    return handle


__all__ = ["NAME", "REASON", "VALIDATE_PATH", "off_frameworks", "reporter", "rules"]
