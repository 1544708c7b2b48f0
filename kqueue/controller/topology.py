"""Topology-aware scheduling, the controller side: what the engine learns of Topologies, Nodes
and bound Pods, and how released pods are pinned to their assigned domain.

1. Three informers (Kueue's TAS cache controllers): Topologies; Nodes, kept as labels,
   allocatable, taints, Ready and cordoned only; Pods bound to a node and not ended, kept as
   node, requests and the ``kqueue.io/tas`` label only (a watch of every pod in the cluster, so
   each is cut to what the engine reads before it is stored).
2. Their events go to the engine through its public methods; ``rebuild`` feeds a fresh engine.
3. ``pin``: the domains of a pod set's topology assignment as node selectors with the pod
   counts, so :mod:`.integrations.release` can give each released pod one domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from kqueue.api.integrations.declaration import Ranks
from kqueue.api.v1alpha1 import Topology, TopologyAssignment
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import Informer
from kqueue.controller.resources import NODES, PODS, Resource
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.tas.topology import Node as TopologyNode

Obj = dict[str, Any]

# The Warning event on an admitted workload whose assigned node was deleted, is not Ready or
# was cordoned.
NODE_UNAVAILABLE_REASON: Final = "TopologyNodeUnavailable"
TOPOLOGIES: Final = Resource(c.GROUP, c.VERSION, "topologies", namespaced=False)
# Pods on a node that still use its capacity (what kube-scheduler counts).
BOUND_PODS_FIELD_SELECTOR: Final = (
    "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
)


def slim_node(node: Obj) -> Obj:
    """The fields of a Node the engine reads (a node's images and volumes are not kept)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "resourceVersion": meta.get("resourceVersion"),
            "labels": dict(meta.get("labels") or {}),
        },
        "spec": {"taints": spec.get("taints") or [], "unschedulable": spec.get("unschedulable")},
        "status": {
            "allocatable": dict(status.get("allocatable") or {}),
            "conditions": [
                {"type": x.get("type"), "status": x.get("status")}
                for x in status.get("conditions") or []
                if isinstance(x, dict) and x.get("type") == "Ready"
            ],
        },
    }


def _slim_container(ctr: Obj) -> Obj:
    res = ctr.get("resources") or {}
    out: Obj = {"name": ctr.get("name", ""), "resources": {
        k: res[k] for k in ("requests", "limits") if res.get(k)
    }}
    if ctr.get("restartPolicy"):
        out["restartPolicy"] = ctr["restartPolicy"]
    return out


def slim_pod(pod: Obj) -> Obj:
    """The fields of a bound Pod the engine reads: node, requests, phase, the TAS label (and
    whether it is being deleted)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    labels = meta.get("labels") or {}
    out_spec: Obj = {
        "nodeName": spec.get("nodeName"),
        "containers": [_slim_container(x) for x in spec.get("containers") or []],
    }
    if spec.get("initContainers"):
        out_spec["initContainers"] = [_slim_container(x) for x in spec["initContainers"]]
    if spec.get("overhead"):
        out_spec["overhead"] = spec["overhead"]
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "resourceVersion": meta.get("resourceVersion"),
            "labels": {k: v for k, v in labels.items() if k == c.TAS_LABEL},
            # A pod being deleted has stopped for failed-node replacement (node_health.py).
            "deletionTimestamp": meta.get("deletionTimestamp"),
        },
        "spec": out_spec,
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def _pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


class TopologyFeed:
    """The informers of topology-aware scheduling and their path into the engine."""

    def __init__(
        self,
        informer: Callable[..., Informer[Any]],
        engine: Callable[[], Engine],
        changed: Callable[[], None],
        node_lost: Callable[[str, str], None] | None = None,
        node_back: Callable[[str], None] | None = None,
    ) -> None:
        self._engine = engine
        self._changed = changed
        # Told (node name, what happened) when a node goes away, stops being Ready or is
        # cordoned, and (node name) when it is Ready and schedulable again or (re)created, so
        # that workloads placed on it can be told.
        self._node_lost = node_lost
        self._node_back = node_back
        self.topologies: Informer[Topology] = informer(TOPOLOGIES, Topology.model_validate)
        self.nodes: Informer[Obj] = informer(NODES, slim_node)
        self.pods: Informer[Obj] = informer(
            PODS, slim_pod, field_selector=BOUND_PODS_FIELD_SELECTOR
        )

    def informers(self) -> dict[str, Informer[Any]]:
        return {"topologies": self.topologies, "nodes": self.nodes, "boundpods": self.pods}

    def rebuild(self, engine: Engine) -> None:
        for topo in self.topologies.store.objects():
            engine.upsert_topology(from_api.topology(topo))
        for node in self.nodes.store.objects():
            engine.upsert_node(from_api.node(node))
        for pod in self.pods.store.objects():
            self._apply_pod(engine, pod)

    def wire(self) -> None:
        def on_topology(_: str, topo: Topology, *rest: Topology) -> None:
            self._engine().upsert_topology(from_api.topology(rest[-1] if rest else topo))
            self._changed()

        def on_topology_delete(_: str, topo: Topology) -> None:
            self._engine().delete_topology(topo.name)
            self._changed()

        def on_node(_: str, node: Obj, *rest: Obj) -> None:
            new = from_api.node(rest[-1] if rest else node)
            self._engine().upsert_node(new)
            old = from_api.node(node) if rest else None
            if old is not None and _usable(old) and not _usable(new):
                if self._node_lost:
                    what = "is no longer Ready" if not new.ready else "was cordoned"
                    self._node_lost(new.name, what)
            elif (old is None or not _usable(old)) and _usable(new) and self._node_back:
                self._node_back(new.name)
            elif old is not None and _blocking(old) != _blocking(new) and self._node_lost:
                # A NoSchedule/NoExecute taint added or removed: the workloads on the node
                # look at it again (node_health.py, Kueue's TASReplaceNodeOnNodeTaints).
                self._node_lost(new.name, "changed its NoSchedule/NoExecute taints")
            self._changed()

        def on_node_delete(_: str, node: Obj) -> None:
            name = str((node.get("metadata") or {}).get("name"))
            self._engine().delete_node(name)
            if self._node_lost:
                self._node_lost(name, "was deleted")
            self._changed()

        def on_pod(_: str, pod: Obj, *rest: Obj) -> None:
            self._apply_pod(self._engine(), rest[-1] if rest else pod)

        def on_pod_delete(_: str, pod: Obj) -> None:
            self._engine().delete_pod(_pod_key(pod))
            self._changed()

        self.topologies.add_handler(
            on_add=on_topology, on_update=on_topology, on_delete=on_topology_delete
        )
        self.nodes.add_handler(on_add=on_node, on_update=on_node, on_delete=on_node_delete)
        self.pods.add_handler(on_add=on_pod, on_update=on_pod, on_delete=on_pod_delete)

    def _apply_pod(self, engine: Engine, pod: Obj) -> None:
        bound = from_api.bound_pod(pod)
        if bound is None:
            # Ended, or now counted through a topology assignment: no longer node usage.
            engine.delete_pod(_pod_key(pod))
        else:
            engine.upsert_pod(bound)


def _blocking(node: TopologyNode) -> set[str]:
    """The node's taints that keep pods off it or evict them."""
    return {str(x) for x in node.taints if x.effect in ("NoSchedule", "NoExecute")}


def _usable(node: TopologyNode) -> bool:
    """Whether pods placed on ``node`` can run there (and be placed there again)."""
    return node.ready and not node.unschedulable


def placed_on(ta: TopologyAssignment | None, node: str) -> int:
    """How many pods ``ta`` places on ``node`` (0 unless its lowest level is the hostname)."""
    if ta is None or not ta.levels or ta.levels[-1] != "kubernetes.io/hostname":
        return 0
    return sum(n for values, n in ta.domains() if values and values[-1] == node)


def _index(pod: Obj, label: str, below: int) -> int | None:
    """The non-negative integer ``label`` holds on ``pod``, if below ``below`` (Kueue's
    ReadUIntFromLabelBelowBound)."""
    value = str(((pod.get("metadata") or {}).get("labels") or {}).get(label, ""))
    if not value.isdigit() or int(value) >= below:
        return None
    return int(value)


def pod_rank(pod: Obj, ranks: Ranks, count: int) -> int | None:
    """``pod``'s rank in its pod set of ``count`` pods (Kueue's readRanksForLabels); None when
    it has none: a label missing or out of bounds, a sub-group count that is not positive, or a
    rank outside 0 .. count-1."""
    index = _index(pod, ranks.pod_index_label, count + ranks.offset)
    if index is None:
        return None
    rank = index - ranks.offset
    if ranks.sub_group_index_label is not None:
        if ranks.sub_group_count is None or ranks.sub_group_count <= 0:
            return None
        per_group = count // ranks.sub_group_count
        group = _index(pod, ranks.sub_group_index_label, ranks.sub_group_count)
        if group is None or index >= per_group:
            return None
        rank = index + group * per_group - ranks.offset
    return rank if 0 <= rank < count else None


def ranked_domains(
    domains: Sequence[tuple[Mapping[str, str], int]],
    running: Sequence[Obj],
    gated: Sequence[Obj],
    selector_of: Callable[[Obj], Mapping[str, str]],
    ranks: Ranks | None,
    count: int,
) -> list[int] | None:
    """Per pod of ``gated``, the index in ``domains`` its rank gives it (Kueue's rank-based
    ungating, topology_ungater.go: the domains, in order, take ranks 0, 1, ... as many as they
    hold pods, so consecutive ranks share a domain); None, to pin oldest first, unless the pod
    set has ``ranks``, every pod has a rank (:func:`pod_rank`), the ranks are distinct and
    within the assignment, and every running pod sits in its rank's domain (Kueue's
    readRanksIfAvailable)."""
    if ranks is None:
        return None
    slots = [i for i, (_, n) in enumerate(domains) for _ in range(n)]
    found = [pod_rank(p, ranks, count) for p in (*running, *gated)]
    known = [r for r in found if r is not None]
    if len(known) != len(found) or len(set(known)) != len(known):
        return None
    if any(r >= len(slots) for r in known):
        # The assignment holds fewer pods than the pod set (Kueue falls back as well).
        return None
    for pod, r in zip(running, known, strict=False):
        have = selector_of(pod)
        if any(have.get(k) != v for k, v in domains[slots[r]][0].items()):
            return None
    return [slots[r] for r in known[len(running):]]


def pin(ta: TopologyAssignment | None) -> tuple[tuple[Mapping[str, str], int], ...]:
    """Per domain of ``ta``: the node selector of its level labels, and its pod count."""
    if ta is None:
        return ()
    return tuple(
        ({level: value for level, value in zip(ta.levels, values, strict=False)}, n)
        for values, n in ta.domains()
    )
