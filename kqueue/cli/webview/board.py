"""What the web view shows, computed from one snapshot of the cluster's objects.

The objects are read the way ``kqueue explain`` and ``kubectl kqueue pending`` read them (the
engine kinds of :mod:`kqueue.cli.cluster`), fed to kqueue's engine until the queues settle
(:func:`kqueue.visibility.state.settled_engine`); then:

1. the cohort tree: roots are cohorts without a parent and ClusterQueues without a cohort; a
   cohort named by a ClusterQueue or a child but never created is shown too (it exists
   implicitly, as in Kueue);
2. per ClusterQueue, per flavor and resource in its own order: quota reserved against nominal
   quota and borrowing limit; per cohort, its subtree's reservations against subtree quota (the
   engine's figures, the same the ``kqueue_cohort_subtree_*`` metrics carry);
3. pending workloads with positions and reasons from :mod:`kqueue.visibility.pending`, and
   their predicted start (the engine run forward, :mod:`kqueue.visibility.estimates`);
4. a workload's explanation from :func:`kqueue.sim.explain.explain`, the one
   ``kqueue explain`` prints.

Pure: no I/O; :mod:`.server` fetches and serves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from kqueue.api.loader import LoadedObject
from kqueue.api.v1alpha1 import ClusterQueue, Workload
from kqueue.cli.explain import explain_with_hints, format_text
from kqueue.cli.kubectl.rows import cluster_cell
from kqueue.engine.engine import Engine
from kqueue.engine.types import (
    ClusterQueueName,
    FlavorName,
    LocalQueueKey,
    ResourceName,
    WorkloadKey,
    local_queue_key,
)
from kqueue.sim.explain import Explanation
from kqueue.sim.scenario import Scenario, build_scenario
from kqueue.visibility import estimates, pending
from kqueue.visibility.state import settled_engine


@dataclass(frozen=True, slots=True)
class Bar:
    """Quota of one flavor and resource: reserved against nominal (and what may be borrowed)."""

    flavor: str
    resource: str
    used: int
    nominal: int
    # How much more than nominal may be used (None: no limit, the cohort's spare quota).
    borrowing_limit: int | None = None

    @property
    def borrowed(self) -> int:
        return max(self.used - self.nominal, 0)

    @property
    def percent(self) -> int:
        """Reserved as a whole percentage of nominal (over 100 while borrowing)."""
        if self.nominal <= 0:
            return 100 if self.used > 0 else 0
        return (self.used * 100) // self.nominal


@dataclass(slots=True)
class Node:
    """A cohort or a ClusterQueue in the tree."""

    kind: str  # "Cohort" | "ClusterQueue"
    name: str
    bars: list[Bar] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)
    pending: int = 0
    admitted: int = 0
    # ClusterQueues: why it admits nothing now ("" while active).
    inactive: str = ""
    # A cohort named by others but never created.
    implicit: bool = False


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    namespace: str
    name: str
    local_queue: str
    cluster_queue: str
    status: str  # Pending | Admitted | Finished
    priority: int
    created: datetime | None
    position: int | None = None
    reason: str = ""
    message: str = ""
    # MultiKueue: the worker cluster it runs on, else "nominated:a,b" (as kubectl kqueue list).
    cluster: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Board:
    """One snapshot of the cluster as the engine sees it."""

    scenario: Scenario
    engine: Engine
    taken_at: datetime

    @classmethod
    def of(cls, objects: Sequence[LoadedObject], taken_at: datetime) -> Board:
        scenario = build_scenario(objects)
        return cls(scenario, settled_engine(scenario), taken_at)

    # -- 1, 2: the tree ---------------------------------------------------------------------

    def tree(self) -> list[Node]:
        parents: dict[str, str | None] = {
            co.name: co.spec.parent_name for co in self.scenario.cohorts
        }
        for cq in self.scenario.cluster_queues:
            if cq.spec.cohort_name and cq.spec.cohort_name not in parents:
                parents[cq.spec.cohort_name] = None
        for named in [p for p in parents.values() if p]:
            parents.setdefault(named, None)
        declared = {co.name for co in self.scenario.cohorts}
        cohorts = {
            name: Node("Cohort", name, implicit=name not in declared) for name in sorted(parents)
        }
        roots: list[Node] = []
        for name in sorted(parents):
            parent = parents[name]
            # A parent cycle is cut where it closes, as the engine does: shown as a root.
            if parent and parent in cohorts and not self._cycles(name, parents):
                cohorts[parent].children.append(cohorts[name])
            else:
                roots.append(cohorts[name])
        for cq in sorted(self.scenario.cluster_queues, key=lambda q: q.name):
            node = self._cluster_queue(cq)
            cohort = cq.spec.cohort_name
            (cohorts[cohort].children if cohort else roots).append(node)
        # Deepest cohorts first, so a parent sums its child cohorts' counts once they are known.
        for co in sorted(cohorts.values(), key=lambda n: -_depth(n.name, parents)):
            self._cohort_bars(co)
            co.pending = sum(c.pending for c in co.children)
            co.admitted = sum(c.admitted for c in co.children)
        return roots

    @staticmethod
    def _cycles(name: str, parents: dict[str, str | None]) -> bool:
        seen = {name}
        parent = parents.get(name)
        while parent:
            if parent in seen:
                return True
            seen.add(parent)
            parent = parents.get(parent)
        return False

    def _cluster_queue(self, cq: ClusterQueue) -> Node:
        name = ClusterQueueName(cq.name)
        usage = self.engine.usage(name)
        bars = [
            Bar(
                flavor=fq.name,
                resource=r.name,
                used=usage.get((FlavorName(fq.name), ResourceName(r.name)), 0),
                nominal=r.nominal(),
                borrowing_limit=r.borrowing(),
            )
            for rg in cq.spec.resource_groups
            for fq in rg.flavors
            for r in fq.resources
        ]
        active, parked = self.engine.pending_counts(name)
        inactive = self.engine.inactive(name)
        return Node(
            "ClusterQueue",
            cq.name,
            bars=bars,
            pending=active + parked,
            admitted=self.engine.reserving_count(name),
            inactive=f"{inactive.reason}: {inactive.message}" if inactive is not None else "",
        )

    def _cohort_bars(self, node: Node) -> None:
        """The cohort's subtree quota and reservations, as the engine sums them."""
        members = _cluster_queues_under(node)
        summary = None
        for cq in members:
            summary = next(
                (s for s in self.engine.cohorts_above(ClusterQueueName(cq)) if s.name == node.name),
                None,
            )
            if summary is not None:
                break
        if summary is None:
            return
        used: dict[tuple[str, str], int] = {}
        for cq in summary.cluster_queues:
            for (flavor, resource), amount in self.engine.usage(cq).items():
                fr = (str(flavor), str(resource))
                used[fr] = used.get(fr, 0) + amount
        quota = {(str(f), str(r)): amount for (f, r), amount in summary.subtree_quota.items()}
        order = [(b.flavor, b.resource) for cq in _nodes_under(node) for b in cq.bars]
        keys = list(dict.fromkeys([*order, *sorted(quota), *sorted(used)]))
        node.bars = [
            Bar(flavor=f, resource=r, used=used.get((f, r), 0), nominal=quota.get((f, r), 0))
            for f, r in keys
        ]

    # -- 3: pending workloads -----------------------------------------------------------------

    def cluster_queue_names(self) -> list[str]:
        return sorted(str(n) for n in self.engine.cluster_queue_names())

    @cached_property
    def starts(self) -> dict[WorkloadKey, datetime]:
        """Predicted start of each pending workload that has one (computed once per snapshot;
        run times from the snapshot's finished Workloads)."""
        history = estimates.history_of(sw.api for sw in self.scenario.workloads)
        fc = estimates.estimate(self.engine, self.taken_at, history)
        return {k: p.start for k, p in fc.predictions.items()}

    def pending_in(self, cluster_queue: str) -> list[pending.PendingWorkload]:
        """UnknownQueue (with the closest name) when there is no such ClusterQueue."""
        return pending.in_cluster_queue(
            self.engine, cluster_queue, limit=None, estimates=self.starts
        )

    def workloads(self, cluster_queue: str | None = None) -> list[WorkloadRow]:
        """Every workload (of ``cluster_queue``), pending ones in queue order first."""
        positions = pending.positions(self.engine, [sw.key for sw in self.scenario.workloads])
        rows: list[WorkloadRow] = []
        for sw in self.scenario.workloads:
            wl = sw.api
            key = sw.key
            cq = self._cluster_queue_of(wl)
            if cluster_queue is not None and cq != cluster_queue:
                continue
            p = positions.get(key)
            if wl.is_finished:
                status = "Finished"
            elif self.engine.holds_quota(WorkloadKey(key)):
                status = "Admitted"
            else:
                status = "Pending"
            details = self.engine.explain(WorkloadKey(key)) if status == "Pending" else None
            reason = str(details.reason) if details is not None else ""
            message = details.message if details is not None else ""
            if status == "Admitted" and wl.status.admission_checks and not wl.is_admitted:
                # Quota reserved, pods held: which admission checks it waits for.
                reason = "AdmissionChecks"
                message = " ".join(f"{s.name}={s.state}" for s in wl.status.admission_checks)
            rows.append(
                WorkloadRow(
                    namespace=wl.namespace or "default",
                    name=wl.name,
                    local_queue=wl.spec.queue_name or "",
                    cluster_queue=cq,
                    status=status,
                    priority=p.priority if p is not None else (wl.spec.priority or 0),
                    created=wl.metadata.creation_timestamp,
                    position=p.position_in_cluster_queue if p is not None else None,
                    reason=reason,
                    message=message,
                    cluster=cluster_cell(
                        wl.status.cluster_name, wl.status.nominated_cluster_names
                    ),
                )
            )
        order = {"Pending": 0, "Admitted": 1, "Finished": 2}
        rows.sort(
            key=lambda r: (
                order[r.status],
                r.cluster_queue,
                r.position if r.position is not None else 1 << 30,
                r.key,
            )
        )
        return rows

    def _cluster_queue_of(self, wl: Workload) -> str:
        if wl.status.admission is not None:
            return wl.status.admission.cluster_queue
        held = self.engine.admitted_workload(WorkloadKey(wl.key))
        if held is not None:
            return str(held.cluster_queue)
        queued = self.engine.cluster_queue_of(WorkloadKey(wl.key))
        if queued is not None:
            return str(queued)
        lq = self.engine.local_queue(_lq_key(wl))
        return str(lq.cluster_queue) if lq is not None else ""

    # -- 4: one workload ----------------------------------------------------------------------

    def explain(self, key: str) -> tuple[Explanation, str]:
        """The explanation of ``key`` (a Workload, or its Job's or Pod's ``namespace/name``)
        and the text ``kqueue explain`` prints for it (with hints)."""
        result, hints = explain_with_hints(self.scenario, key, now=self.taken_at)
        return result, format_text(result, hints)


def _lq_key(wl: Workload) -> LocalQueueKey:
    return local_queue_key(wl.namespace or "default", wl.spec.queue_name or "")


def _depth(cohort: str, parents: dict[str, str | None]) -> int:
    seen = {cohort}
    parent = parents.get(cohort)
    while parent and parent not in seen:
        seen.add(parent)
        parent = parents.get(parent)
    return len(seen)


def _nodes_under(node: Node) -> list[Node]:
    out: list[Node] = []
    for child in node.children:
        if child.kind == "ClusterQueue":
            out.append(child)
        else:
            out.extend(_nodes_under(child))
    return out


def _cluster_queues_under(node: Node) -> list[str]:
    return [n.name for n in _nodes_under(node)]
