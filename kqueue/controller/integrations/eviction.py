"""Stopping the pods of an evicted Workload one by one, for every kind held by the gate alone
(plain pods and pod groups, a StatefulSet's pods): a kind without a suspend switch is stopped by
deleting its running pods, each marked first with why."""

from __future__ import annotations

import logging
from typing import Any, Final

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.kube import JSON_PATCH, Kube, KubeError, NotFound
from kqueue.controller.resources import PODS, object_key

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

DISRUPTION_TARGET: Final = "DisruptionTarget"
EVICTED_BY_KQUEUE: Final = "EvictedByKqueue"


async def evict_pod(
    pod: Obj, wl: Workload, *, kube: Kube, events: EventRecorder, now: Now
) -> None:
    """Stop one pod of an evicted Workload: ``DisruptionTarget=True`` (reason
    ``EvictedByKqueue``, so its controller and its user see why), then delete it."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return
    evicted = wl.condition(c.EVICTED)
    why = f"{evicted.reason}: {evicted.message}" if evicted is not None else "Evicted"
    conditions = (pod.get("status") or {}).get("conditions") or []
    if not any(x.get("type") == DISRUPTION_TARGET for x in conditions):
        cond = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": EVICTED_BY_KQUEUE,
            "message": f"Evicted by kqueue: {why}",
            "lastTransitionTime": now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        op = (
            {"op": "add", "path": "/status/conditions/-", "value": cond}
            if conditions
            else {"op": "add", "path": "/status/conditions", "value": [cond]}
        )
        try:
            await kube.patch(
                PODS, str(meta["name"]), [op], namespace=meta.get("namespace"),
                subresource="status", content_type=JSON_PATCH,
            )
        except NotFound:
            return
        except KubeError as exc:
            logger.info("DisruptionTarget on pod %s: %s", object_key(pod), exc)
    try:
        await kube.delete(PODS, str(meta["name"]), namespace=meta.get("namespace"))
    except NotFound:
        return
    events.record(pod, "Normal", "Stopped", f"Deleted by kqueue: {why}")
    logger.info("deleted pod %s of evicted Workload %s: %s", object_key(pod), wl.key, why)


__all__ = ["DISRUPTION_TARGET", "EVICTED_BY_KQUEUE", "evict_pod"]
