"""Released topology-placed pods that wait, unbound, for a node they can no longer get: marked
Failed, so their owner creates them again and kqueue releases them onto the nodes the workload's
topology assignment now names (Kueue v0.19's node controller, TASFailedNodeReplacement with
TASReplaceNodeOnPodTermination: ``markPodsFailed`` in pkg/controller/tas/node_controller.go).

A pod is *pinned* when kqueue released it with a ``kubernetes.io/hostname`` node selector and
kube-scheduler has not bound it: Pending, no ``spec.nodeName``, no scheduling gate, not being
deleted, labelled ``kqueue.io/tas``. kube-scheduler never binds such a pod on a NotReady node
or one tainted against it, and a pod pinned to a node its Workload's assignment no longer names
(it was released before a replacement rewrote the assignment: Kueue's "late pod") would run
beside the pods that replaced it; left alone, the Job waits for it for ever.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Final

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.events import EventRecorder
from kqueue.controller.kube import JSON_PATCH, Kube, KubeError, NotFound
from kqueue.controller.resources import PODS, object_key

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
HOSTNAME: Final = "kubernetes.io/hostname"
# Kueue's TerminatedByKueue / UnschedulableOnAssignedNode / PodTerminatedByKueue, with kqueue's
# name where Kueue's carries its own (as EvictedByKqueue for DisruptionTarget).
TERMINATED_BY_KQUEUE: Final = "TerminatedByKqueue"
UNSCHEDULABLE_ON_ASSIGNED_NODE: Final = "UnschedulableOnAssignedNode"
POD_TERMINATED_REASON: Final = "PodTerminatedByKqueue"
# Why a pinned pod is failed when its node is no longer in the assignment.
NOT_ASSIGNED: Final = "is no longer in its Workload's topology assignment"


def pinned_node(pod: Obj) -> str | None:
    """The node a released, unbound, topology-placed ``pod`` waits for (None: not such a pod)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if (
        c.TAS_LABEL not in (meta.get("labels") or {})
        or meta.get("deletionTimestamp")
        or spec.get("nodeName")
        or spec.get("schedulingGates")
        or (pod.get("status") or {}).get("phase", "Pending") != "Pending"
    ):
        return None
    node = (spec.get("nodeSelector") or {}).get(HOSTNAME)
    return str(node) if node else None


def has_ready_condition(node: Obj | None) -> bool:
    """Whether ``node`` exists and reports a Ready condition (whatever its status). Kueue fails
    pinned pods only then: a deleted node, or one with no Ready condition, is handled as failed
    at once and its pinned pods are left to the owner."""
    if node is None:
        return False
    return any(x.get("type") == "Ready" for x in (node.get("status") or {}).get("conditions") or [])


def terminated_message(node: str, problem: str) -> str:
    return (
        f"Pod terminated by kqueue: it waits, unbound, for node {node} (nodeSelector "
        f"{HOSTNAME}), which {problem}; its owner creates it again and kqueue releases it onto "
        f"a node of the Workload's topology assignment"
    )


async def fail_pod(
    pod: Obj, message: str, *, kube: Kube, events: EventRecorder, now: datetime
) -> bool:
    """Set ``pod``'s phase to Failed with the condition ``TerminatedByKqueue`` (reason
    ``UnschedulableOnAssignedNode``) and a Normal event. The patch first tests the pod's
    resourceVersion, so a pod bound meanwhile is not failed (its update brings it back); False
    when the API server refused it so."""
    meta = pod.get("metadata") or {}
    cond = {
        "type": TERMINATED_BY_KQUEUE,
        "status": "True",
        "reason": UNSCHEDULABLE_ON_ASSIGNED_NODE,
        "message": message,
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    conditions = (pod.get("status") or {}).get("conditions") or []
    ops: list[Obj] = []
    if meta.get("resourceVersion"):
        ops.append({"op": "test", "path": "/metadata/resourceVersion",
                    "value": meta["resourceVersion"]})
    ops.append({"op": "add", "path": "/status/phase", "value": "Failed"})
    ops.append(
        {"op": "add", "path": "/status/conditions/-", "value": cond}
        if conditions
        else {"op": "add", "path": "/status/conditions", "value": [cond]}
    )
    try:
        await kube.patch(PODS, str(meta["name"]), ops, namespace=meta.get("namespace"),
                         subresource="status", content_type=JSON_PATCH)
    except NotFound:
        return True
    except KubeError as exc:
        logger.info("marking pod %s Failed: %s", object_key(pod), exc)
        return False
    events.record(pod, "Normal", POD_TERMINATED_REASON, message)
    logger.info("pod %s marked Failed: %s", object_key(pod), message)
    return True


__all__ = [
    "NOT_ASSIGNED",
    "POD_TERMINATED_REASON",
    "TERMINATED_BY_KQUEUE",
    "UNSCHEDULABLE_ON_ASSIGNED_NODE",
    "fail_pod",
    "has_ready_condition",
    "pinned_node",
    "terminated_message",
]
