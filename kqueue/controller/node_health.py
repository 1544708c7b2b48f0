"""The nodes under an admitted topology-aware workload: which of them can no longer run its
pods, written on the Workload.

When a node of a workload's topology assignment (hostname level) is deleted, stops being Ready
or is cordoned, the Workload gets ``status.unhealthyNodes`` (Kueue's field) naming it, the
condition ``TopologyNodesReady=False`` (reason ``NodeUnavailable``) saying what happened, to which
pod set and how many pods, and what the user can do, and a Warning event
``TopologyNodeUnavailable``. When the node is back, it leaves the list, and with none left the
condition turns True (reason ``NodesReady``).

Kueue, with its TASFailedNodeReplacement gate, looks for a replacement node in the same domain;
kqueue does not move or re-place running pods: it reports, and the user decides.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from kqueue.api.v1alpha1 import UnhealthyNode, Workload, set_condition
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Conflict, Kube, NotFound
from kqueue.controller.resources import WORKLOADS
from kqueue.controller.topology import NODE_UNAVAILABLE_REASON
from kqueue.controller.workqueue import Requeue
from kqueue.engine import from_api

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"


def node_problem(node: Obj | None) -> str | None:
    """What keeps ``node`` from running pods placed on it (None: nothing)."""
    if node is None:
        return "was deleted"
    view = from_api.node(node)
    if not view.ready:
        return "is not Ready"
    if view.unschedulable:
        return "is cordoned (spec.unschedulable)"
    return None


def placed_nodes(wl: Workload) -> dict[str, list[tuple[str, int]]]:
    """Per node named by ``wl``'s topology assignments: (pod set, pods placed there)."""
    counts: dict[str, dict[str, int]] = {}
    adm = wl.status.admission
    if adm is None:
        return {}
    for psa in adm.pod_set_assignments:
        ta = psa.topology_assignment
        if ta is None or not ta.levels or ta.levels[-1] != HOSTNAME:
            continue  # placed on racks or blocks, not nodes: no node to watch
        for values, pods in ta.domains():
            if values:
                per_set = counts.setdefault(values[-1], {})
                per_set[psa.name] = per_set.get(psa.name, 0) + pods
    return {node: list(per_set.items()) for node, per_set in counts.items()}


def lost_message(node: str, problem: str, pod_sets: Iterable[tuple[str, int]]) -> str:
    placed = ", ".join(f"{n} pod(s) of pod set {ps}" for ps, n in pod_sets)
    return (
        f"Node {node} {problem}; the topology assignment places {placed} there. kqueue does not "
        f"move pods, and a pod recreated for that node is pinned to it again: to be placed on "
        f"nodes that can run it, deactivate the Workload and queue it again (spec.active false, "
        f"then true); or wait for the node to be Ready and schedulable"
    )


class NodeHealth:
    """Reconciles one Workload key: its unhealthy nodes and ``TopologyNodesReady``."""

    def __init__(
        self,
        *,
        workloads: Store[Workload],
        nodes: Store[Obj],
        kube: Kube,
        events: EventRecorder,
        now: Callable[[], datetime],
    ) -> None:
        self._workloads = workloads
        self._nodes = nodes
        self._kube = kube
        self._events = events
        self._now = now

    async def __call__(self, key: str) -> Requeue | None:
        wl = self._workloads.get(key)
        if wl is None or wl.status.admission is None or wl.is_finished:
            return None
        placed = placed_nodes(wl)
        lost = {
            node: problem
            for node in placed
            if (problem := node_problem(self._nodes.get(node))) is not None
        }
        had = {n.name for n in wl.status.unhealthy_nodes}
        cond = wl.condition(c.TOPOLOGY_NODES_READY)
        if not lost and not had and cond is None:
            return None  # never lost a node: no condition to show
        out = wl.model_copy(deep=True)
        # Nodes no longer in the assignment (a new admission) leave the list too.
        out.status.unhealthy_nodes = [UnhealthyNode(name=n) for n in sorted(lost)]
        if lost:
            message = "; ".join(lost_message(n, lost[n], placed[n]) for n in sorted(lost))
            changed = set_condition(
                out.status.conditions, c.TOPOLOGY_NODES_READY, "False", c.NODE_UNAVAILABLE,
                message, self._now(), wl.metadata.generation,
            )
        else:
            changed = set_condition(
                out.status.conditions, c.TOPOLOGY_NODES_READY, "True", c.NODES_READY,
                "Every node of the topology assignment is Ready and schedulable",
                self._now(), wl.metadata.generation,
            )
        if not changed and set(lost) == had:
            return None
        try:
            await self._kube.replace_status(WORKLOADS, out.to_dict(), namespace=out.namespace)
        except NotFound:
            return None
        except Conflict:
            return Requeue(after=0.2)  # the informer brings the newer version
        for node in sorted(set(lost) - had):
            self._events.record(
                wl.to_dict(), "Warning", NODE_UNAVAILABLE_REASON,
                lost_message(node, lost[node], placed[node]),
            )
        if had and not lost:
            logger.info("Workload %s: every node of its topology assignment is back", key)
        return None
