"""The nodes under an admitted topology-aware workload: which of them can no longer run its
pods, written on the Workload.

When a node of a workload's topology assignment (hostname level) is deleted, stops being Ready
or is cordoned, the Workload gets ``status.unhealthyNodes`` (Kueue's field) naming it, the
condition ``TopologyNodesReady=False`` (reason ``NodeUnavailable``) saying what happened, to which
pod set and how many pods, and what the user can do, and a Warning event
``TopologyNodeUnavailable``. When the node is back, it leaves the list, and with none left the
condition turns True (reason ``NodesReady``).

A failed node (Kueue's TASFailedNodeReplacement, on by default in Kueue v0.19) is replaced:
deleted, or with no Ready condition, at once; NotReady, once no topology-placed pod still runs on
it (Kueue's TASReplaceNodeOnPodTermination). The engine (kqueue/engine/tas/replacement.py) puts
its pods on other nodes of the same domain; the new topology assignment is written, and the pods
the workload's owner creates again are released onto the new nodes (integrations/release.py pins
each to a domain with room). With no room, or two failed nodes, the workload is evicted with
Kueue's reason ``NodeFailures``. A cordoned node is only reported: its pods keep running.

A Ready node given a NoSchedule or NoExecute taint that a pod set placed on it does not tolerate
(its own tolerations and its flavors') is lost too (Kueue's TASReplaceNodeOnNodeTaints, on by
default in v0.19): reported at once, and replaced, as a NotReady node is, once its
topology-placed pods have stopped (a NoExecute taint evicts them; under a NoSchedule one they
keep running and the node is only reported). A NoExecute taint the pods tolerate only for
their ``tolerationSeconds`` leaves the node healthy while they run; once the taint has evicted
them the node is lost and replaced (Kueue's toleratedTemporarily). The Configuration's featureGates
``TASFailedNodeReplacement: false`` turns replacement off (lost nodes are only reported) and
``TASReplaceNodeOnNodeTaints: false`` leaves taints out.

While replacement is on, a released pod that waits unbound for a NotReady or tainted node of
the assignment, or for a node the assignment no longer names, is marked Failed at once
(pinned_pods.py, Kueue's markPodsFailed), unless the workload is evicted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from kqueue.api.v1alpha1 import (
    ResourceFlavor,
    UnhealthyNode,
    Workload,
    encode_assignment,
    set_condition,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Conflict, Kube, NotFound
from kqueue.controller.pinned_pods import (
    NOT_ASSIGNED,
    fail_pod,
    has_ready_condition,
    pinned_node,
    terminated_message,
)
from kqueue.controller.resources import WORKLOADS
from kqueue.controller.topology import NODE_UNAVAILABLE_REASON
from kqueue.controller.workload_status import evict
from kqueue.controller.workqueue import Requeue
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.tas.replacement import EVICTED_BY_NODE_FAILURES, NotReplaced, Replaced
from kqueue.engine.tas.topology import tolerated, tolerated_for_now
from kqueue.engine.types import Toleration, WorkloadKey

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
# The Normal event of a workload whose failed node's pods were given other nodes.
NODE_REPLACED_REASON = "TopologyNodeReplaced"
NOT_READY = "is not Ready"
# How often a NotReady node is looked at again while the workload's pods on it still run.
WAIT_FOR_PODS_S = 5.0


TAINTED = "has the taint"
# A taint the pods tolerate only for their tolerationSeconds: lost once they are evicted.
TAINTED_FOR_NOW = "has the NoExecute taint"


def node_problem(
    node: Obj | None, tolerations: Iterable[Iterable[Toleration]] | None = None
) -> str | None:
    """What keeps ``node`` from running pods placed on it (None: nothing). ``tolerations``: of
    each pod set placed on it, to look at its taints (None: taints are not looked at)."""
    if node is None:
        return "was deleted"
    view = from_api.node(node)
    if not view.ready:
        return NOT_READY
    if view.unschedulable:
        return "is cordoned (spec.unschedulable)"
    tols_per_pod_set = [tuple(tols) for tols in tolerations or ()]
    for tols in tols_per_pod_set:
        taint = tolerated(view.taints, tols)
        if taint is not None:
            return f"{TAINTED} {taint}, which its pods do not tolerate"
    for tols in tols_per_pod_set:
        taint = tolerated_for_now(view.taints, tols)
        if taint is not None:
            return (
                f"{TAINTED_FOR_NOW} {taint}, which its pods tolerate only for their "
                f"tolerationSeconds, and they were evicted"
            )
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
        f"Node {node} {problem}; the topology assignment places {placed} there. A deleted, "
        f"NotReady or tainted node is replaced by another node of the same domain once its pods "
        f"have "
        f"stopped (the Workload is evicted, reason NodeFailures, when none has room); a "
        f"cordoned node is not: wait for it to be schedulable, or deactivate the Workload and "
        f"queue it again (spec.active false, then true)"
    )


def node_failed(node: Obj | None, pods_running: int, tainted: bool = False) -> bool:
    """Whether ``node`` has failed for replacement (Kueue's node controller): deleted or with no
    Ready condition at once; NotReady, or ``tainted`` (an untolerated NoSchedule/NoExecute
    taint), once ``pods_running`` (topology-placed pods still running on it) is 0. A cordoned,
    Ready node has not failed."""
    if node is None:
        return True
    conds = [x for x in (node.get("status") or {}).get("conditions") or []
             if x.get("type") == "Ready"]
    if not conds:
        return True
    return (conds[0].get("status") != "True" or tainted) and pods_running == 0


def replaced_message(node: str, problem: str, got: dict[str, Replaced]) -> str:
    moved = "; ".join(
        f"{sum(n for _, n in r.moved)} pod(s) of pod set {ps} to "
        + ", ".join(f"{name} ({n})" for name, n in r.moved)
        for ps, r in sorted(got.items())
    )
    return (
        f"Node {node} {problem}; its pods were placed on other nodes of the same domain: "
        f"{moved}. Pods created again for this Workload are released onto those nodes"
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
        engine: Callable[[], Engine] | None = None,
        pods: Store[Obj] | None = None,
        replace: bool = True,
        taints: bool = False,
        flavors: Store[ResourceFlavor] | None = None,
        pods_of: Callable[[Workload], Iterable[Obj]] | None = None,
    ) -> None:
        """``engine`` and ``pods`` (the bound pods) turn on failed-node replacement, unless
        ``replace`` is False (TASFailedNodeReplacement off); without them a lost node is only
        reported. ``taints``: an untolerated taint loses a node (TASReplaceNodeOnNodeTaints);
        what a pod set tolerates includes its ResourceFlavors' tolerations (``flavors``).
        ``pods_of``: a Workload's pods, whole, to fail those pinned to a node they cannot get
        (with replacement on; without it they are left to the owner)."""
        self._workloads = workloads
        self._nodes = nodes
        self._kube = kube
        self._events = events
        self._now = now
        self._engine = engine
        self._pods = pods
        self._replacing = replace and engine is not None
        self._taints = taints
        self._flavors = flavors
        self._pods_of = pods_of

    def _tolerations(self, wl: Workload) -> dict[str, tuple[Toleration, ...]]:
        """Per pod set: what its pods tolerate, its own tolerations and its flavors'."""
        own = {
            ps.name: tuple(from_api.toleration(x) for x in ps.template.spec.tolerations)
            for ps in wl.spec.pod_sets
        }
        adm = wl.status.admission
        out: dict[str, tuple[Toleration, ...]] = {}
        for psa in adm.pod_set_assignments if adm is not None else ():
            added = [
                from_api.toleration(tol)
                for name in sorted(set(psa.flavors.values()))
                if self._flavors is not None and (rf := self._flavors.get(name)) is not None
                for tol in rf.spec.tolerations
            ]
            out[psa.name] = (*own.get(psa.name, ()), *added)
        return out

    def _running_on(self, node: str) -> int:
        """Topology-placed pods bound to ``node`` that have not ended nor are being deleted."""
        if self._pods is None:
            return 0
        return sum(
            1 for p in self._pods.objects()
            if (p.get("spec") or {}).get("nodeName") == node
            and c.TAS_LABEL in ((p.get("metadata") or {}).get("labels") or {})
            and not (p.get("metadata") or {}).get("deletionTimestamp")
        )

    def _pinned_to_fail(
        self, wl: Workload, placed: dict[str, list[tuple[str, int]]], problems: dict[str, str]
    ) -> list[tuple[Obj, str]]:
        """``wl``'s pods pinned to a node they cannot get, with why (Kueue's podsToTerminate):
        the node is NotReady or tainted against them, or the assignment no longer names it.
        Only a node that exists with a Ready condition (Kueue: a deleted node's pinned pods are
        left to the owner), never a cordoned one (kqueue keeps its pods), and not for an
        evicted workload (its owner stops every pod) nor one placed on racks (its pods are not
        pinned to nodes)."""
        if self._pods_of is None or not self._replacing or wl.is_true(c.EVICTED):
            return []
        if wl.status.admission is not None and not placed:
            return []
        out: list[tuple[Obj, str]] = []
        for pod in self._pods_of(wl):
            node = pinned_node(pod)
            if node is None or not has_ready_condition(self._nodes.get(node)):
                continue
            problem = problems.get(node) if node in placed else NOT_ASSIGNED
            if problem is None:
                continue
            if problem.startswith(TAINTED_FOR_NOW):
                problem = problem.split(", which")[0] + (
                    ", which its pods tolerate only for their tolerationSeconds"
                )
            elif problem != NOT_ASSIGNED and not problem.startswith((NOT_READY, TAINTED)):
                continue  # cordoned: its pods keep their node
            out.append((pod, terminated_message(node, problem)))
        return out

    async def _fail_pinned(self, pods: list[tuple[Obj, str]]) -> None:
        for pod, message in pods:
            await fail_pod(pod, message, kube=self._kube, events=self._events, now=self._now())

    async def __call__(self, key: str) -> Requeue | None:
        wl = self._workloads.get(key)
        if wl is None or wl.is_finished:
            return None
        if wl.status.admission is None:
            # Kueue's "late pod" of a workload without admission: it waits for nothing.
            await self._fail_pinned(self._pinned_to_fail(wl, {}, {}))
            return None
        placed = placed_nodes(wl)
        tolerations = self._tolerations(wl) if self._taints else None

        def problem_of(node: str) -> str | None:
            tols = None
            if tolerations is not None:
                tols = [tolerations.get(ps, ()) for ps, _ in placed[node]]
            return node_problem(self._nodes.get(node), tols)

        problems = {node: p for node in placed if (p := problem_of(node)) is not None}
        # Tolerated for tolerationSeconds (Kueue's toleratedTemporarily): healthy while the
        # pods run, lost once the taint has evicted them.
        evicting = {
            n for n, p in problems.items()
            if p.startswith(TAINTED_FOR_NOW) and self._running_on(n) > 0
        }
        lost = {n: p for n, p in problems.items() if n not in evicting}
        to_fail = self._pinned_to_fail(wl, placed, problems)
        had = {n.name for n in wl.status.unhealthy_nodes}
        failed = sorted(
            n
            for n in lost
            if node_failed(
                self._nodes.get(n), self._running_on(n),
                lost[n].startswith((TAINTED, TAINTED_FOR_NOW)),
            )
        )
        if failed and self._engine is not None and self._replacing and not wl.is_true(c.EVICTED):
            got = self._engine().replace_failed_nodes(WorkloadKey(key), failed)
            if isinstance(got, NotReplaced):
                # Evicted: its owner stops every pod, pinned ones too (Kueue fails none).
                return await self._evict(wl, got.reason)
            if got:
                # Held in the engine before the write: a cycle meanwhile must not take them.
                self._engine().claim_replacement(WorkloadKey(key), got)
                await self._fail_pinned(to_fail)
                return await self._replace(wl, failed[0], lost[failed[0]], got)
        await self._fail_pinned(to_fail)
        # A NotReady node whose pods still run: look again (Kueue waits for them to end).
        wait = (
            Requeue(after=WAIT_FOR_PODS_S)
            if evicting
            or (
                self._replacing
                and any(
                    n not in failed and (lost[n] == NOT_READY or lost[n].startswith(TAINTED))
                    for n in lost
                )
            )
            else None
        )
        return await self._report(wl, key, placed, lost, had) or wait

    async def _report(
        self,
        wl: Workload,
        key: str,
        placed: dict[str, list[tuple[str, int]]],
        lost: dict[str, str],
        had: set[str],
    ) -> Requeue | None:
        """``status.unhealthyNodes``, ``TopologyNodesReady`` and the Warning event."""
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

    async def _replace(
        self, wl: Workload, node: str, problem: str, got: dict[str, Replaced]
    ) -> Requeue | None:
        """Write the new topology assignments; the node leaves ``unhealthyNodes``."""
        out = wl.model_copy(deep=True)
        assert out.status.admission is not None  # checked by the caller
        for psa in out.status.admission.pod_set_assignments:
            r = got.get(psa.name)
            if r is not None:
                psa.topology_assignment = encode_assignment(
                    list(r.assignment.levels),
                    [(list(values), n) for values, n in r.assignment.domains],
                )
        out.status.unhealthy_nodes = [u for u in out.status.unhealthy_nodes if u.name != node]
        message = replaced_message(node, problem, got)
        set_condition(
            out.status.conditions, c.TOPOLOGY_NODES_READY, "True", c.NODES_READY, message,
            self._now(), wl.metadata.generation,
        )
        written = await self._write(out)
        if written is None:
            return None  # the Workload is gone: nothing to tell
        if not written:
            return Requeue(after=0.2)
        self._events.record(wl.to_dict(), "Normal", NODE_REPLACED_REASON, message)
        logger.info("Workload %s: %s", wl.key, message)
        return None

    async def _evict(self, wl: Workload, reason: str) -> Requeue | None:
        """Evict with Kueue's ``NodeFailures``; the owner stops the pods, the quota is freed
        and the workload queues again (placed anew)."""
        message = (
            f"{reason}. The Workload is queued again and placed anew once its pods have stopped"
        )
        out = evict(wl, EVICTED_BY_NODE_FAILURES, message, self._now())
        if out is None:
            return None
        written = await self._write(out)
        if written is None:
            return None  # the Workload is gone: nothing to evict (Kueue: not found on patch)
        if not written:
            return Requeue(after=0.2)
        self._events.record(wl.to_dict(), "Warning", c.EVICTED,
                            f"{EVICTED_BY_NODE_FAILURES}: {message}")
        logger.info("Workload %s evicted: %s", wl.key, message)
        return None

    async def _write(self, out: Workload) -> bool | None:
        """Write ``out``'s status; False on a conflict (the informer brings the newer one, and
        the change is computed again on it), None when the Workload is gone. Any other error
        is raised: the work queue retries with backoff, the Workload left as it was."""
        try:
            await self._kube.replace_status(WORKLOADS, out.to_dict(), namespace=out.namespace)
        except NotFound:
            return None
        except Conflict:
            return False
        return True
