"""The engine facade: owns the cache and the queues, is driven by objects and events.

The controller (or the simulator) upserts and deletes objects as it sees them, calls
``schedule(now)`` and carries out the decisions. An admission is assumed in the cache at once,
so the next cycle already counts it; ``forget`` undoes it when the API write fails. Quota held
by a workload is freed only by ``finish``/``delete_workload``, ``evicted``, or an upsert showing
that the workload no longer holds it.

Determinism: every iteration over a collection is sorted, nothing reads the wall clock and
nothing is random, so the same calls with the same ``now`` give the same decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime

from .cache import Cache
from .cycle import CycleResult, Evict, FlavorScans, Pending, run_cycle
from .explain import PendingDetails
from .preemption import NoPreemption, Preemptor
from .queue import QueueManager
from .types import (
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    EvictionReason,
    FlavorName,
    LocalQueueKey,
    LocalQueueSpec,
    PendingReason,
    ResourceFlavor,
    StopPolicy,
    Usage,
    Workload,
    WorkloadKey,
    local_queue_key,
)
from .workload import AdmittedWorkload, WorkloadInfo, make_info


class Engine:
    def __init__(self, preemptor: Preemptor | None = None) -> None:
        self.cache = Cache()
        self.queues = QueueManager()
        self.preemptor: Preemptor = preemptor if preemptor is not None else NoPreemption()
        self.priority_classes: dict[str, int] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.cycles = 0
        self._last_pending: dict[WorkloadKey, Pending] = {}
        # Workloads holding quota that the engine must evict (stop policies, deactivation).
        self._drain: set[WorkloadKey] = set()
        self._scans = FlavorScans()

    # -- flavors, queues, cohorts ------------------------------------------------------------

    def upsert_flavor(self, flavor: ResourceFlavor) -> None:
        if self.cache.flavors.get(flavor.name) == flavor:
            return
        self.cache.upsert_flavor(flavor)
        self._requeue_flavor_users(flavor.name)

    def delete_flavor(self, name: FlavorName) -> None:
        self.cache.delete_flavor(name)
        self._requeue_flavor_users(name)

    def _requeue_flavor_users(self, name: FlavorName) -> None:
        users = [n for n, s in sorted(self.cache.cluster_queues.items()) if name in s.flavor_names()]
        self._requeue_trees(users)

    def upsert_cluster_queue(self, spec: ClusterQueueSpec) -> None:
        old = self.cache.cluster_queues.get(spec.name)
        if old == spec:
            return
        before = self.cache.tree_members(spec.name) if old is not None else []
        self.cache.upsert_cluster_queue(spec)
        self.queues.upsert_cluster_queue(spec.name, spec.queueing_strategy)
        self._requeue(sorted({*before, *self.cache.tree_members(spec.name)}))
        if spec.stop_policy == StopPolicy.HOLD_AND_DRAIN:
            self._drain.update(w.key for w in self.cache.workloads_in(spec.name))

    def delete_cluster_queue(self, name: ClusterQueueName) -> None:
        before = self.cache.tree_members(name)
        self.cache.delete_cluster_queue(name)
        self.queues.delete_cluster_queue(name)
        self._requeue(before)

    def upsert_cohort(self, spec: CohortSpec) -> None:
        if self.cache.cohorts.get(spec.name) == spec:
            return
        before = self.cache.cohort_members(spec.name)
        self.cache.upsert_cohort(spec)
        self._requeue(sorted({*before, *self.cache.cohort_members(spec.name)}))

    def delete_cohort(self, name: CohortName) -> None:
        before = self.cache.cohort_members(name)
        self.cache.delete_cohort(name)
        self._requeue(sorted({*before, *self.cache.cohort_members(name)}))

    def upsert_local_queue(self, spec: LocalQueueSpec) -> None:
        self.queues.upsert_local_queue(spec)
        if spec.stop_policy == StopPolicy.HOLD_AND_DRAIN:
            self._drain.update(
                k for k, w in sorted(self.cache.workloads.items()) if w.info.local_queue == spec.key
            )

    def delete_local_queue(self, namespace: str, name: str) -> None:
        self.queues.delete_local_queue(local_queue_key(namespace, name))

    def upsert_priority_class(self, name: str, value: int) -> None:
        if self.priority_classes.get(name) == value:
            return
        self.priority_classes[name] = value
        self._reresolve(name)

    def delete_priority_class(self, name: str) -> None:
        if self.priority_classes.pop(name, None) is not None:
            self._reresolve(name)

    def _reresolve(self, class_name: str) -> None:
        """Re-resolve priorities of workloads that take them from ``class_name``."""

        def uses(wl: Workload) -> bool:
            return (wl.priority is None and wl.priority_class == class_name) or (
                wl.preemption_priority is None and wl.preemption_priority_class == class_name
            )

        for key in sorted(self.queues.pending):
            info = self.queues.pending[key]
            if uses(info.obj):
                self.queues.upsert(make_info(info.obj, self.priority_classes))
        for key in sorted(self.cache.workloads):
            aw = self.cache.workloads[key]
            if uses(aw.info.obj):
                info = make_info(aw.info.obj, self.priority_classes)
                self.cache.add_workload(replace(aw, info=info))

    def set_namespace_labels(self, namespace: str, labels: Mapping[str, str]) -> None:
        new = dict(labels)
        if self.namespaces.get(namespace) == new:
            return
        self.namespaces[namespace] = new
        self.queues.queue_inadmissible_in_namespace(namespace)

    def delete_namespace(self, namespace: str) -> None:
        self.namespaces.pop(namespace, None)

    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.namespaces.get(namespace, {})

    # -- workloads ---------------------------------------------------------------------------

    def upsert_workload(self, wl: Workload) -> None:
        """A workload as last seen; with ``admission`` set it holds that quota."""
        info = make_info(wl, self.priority_classes)
        held = self.cache.get(wl.key)
        if wl.admission is not None:
            self._scans.forget(wl.key)
            self.queues.delete(wl.key)
            self._last_pending.pop(wl.key, None)
            self.cache.add_workload(AdmittedWorkload.of(info, wl.admission))
            if wl.evicting:
                self.cache.evicting.add(wl.key)
            if held is not None and held.cluster_queue != wl.admission.cluster_queue:
                self._requeue_trees([held.cluster_queue])
            if self._must_drain(wl.key):
                self._drain.add(wl.key)
            return
        if held is not None:
            if held.assumed:
                # Our admission is not visible yet: keep the assumption, refresh the object.
                self.cache.add_workload(replace(held, info=info))
                return
            # The quota was released (e.g. evicted and the admission cleared).
            self.cache.remove_workload(wl.key)
            self._requeue_trees([held.cluster_queue])
        self.queues.upsert(info)

    def delete_workload(self, key: WorkloadKey) -> None:
        self.finish(key)

    def finish(self, key: WorkloadKey) -> None:
        """The workload finished or is gone: forget it and free its quota."""
        self._scans.forget(key)
        self.queues.delete(key)
        self._last_pending.pop(key, None)
        self._drain.discard(key)
        held = self.cache.remove_workload(key)
        if held is not None:
            self._requeue_trees([held.cluster_queue])

    def evicted(self, key: WorkloadKey, *, requeue_at: datetime | None = None) -> None:
        """The workload was evicted: free its quota; it pends again (after ``requeue_at``)."""
        self._drain.discard(key)
        held = self.cache.remove_workload(key)
        if held is None:
            return
        self._requeue_trees([held.cluster_queue])
        wl = replace(held.info.obj, admission=None, requeue_at=requeue_at)
        self.queues.upsert(make_info(wl, self.priority_classes))

    def forget(self, key: WorkloadKey) -> None:
        """Roll back an assumed admission whose API write failed; the workload pends again."""
        held = self.cache.get(key)
        if held is None or not held.assumed:
            return
        self.cache.remove_workload(key)
        self._requeue_trees([held.cluster_queue])
        self.queues.upsert(held.info)

    def _must_drain(self, key: WorkloadKey) -> bool:
        aw = self.cache.get(key)
        if aw is None:
            return False
        return self._drain_reason(aw) is not None

    def _drain_reason(self, aw: AdmittedWorkload) -> tuple[EvictionReason, str] | None:
        spec = self.cache.cluster_queues.get(aw.cluster_queue)
        if spec is not None and spec.stop_policy == StopPolicy.HOLD_AND_DRAIN:
            return EvictionReason.CLUSTER_QUEUE_STOPPED, "The ClusterQueue is stopped"
        lq = self.queues.local_queues.get(aw.info.local_queue)
        if lq is not None and lq.stop_policy == StopPolicy.HOLD_AND_DRAIN:
            return EvictionReason.LOCAL_QUEUE_STOPPED, "The LocalQueue is stopped"
        if not aw.info.obj.active:
            return EvictionReason.DEACTIVATED, "The workload is deactivated"
        return None

    # -- requeueing on events ----------------------------------------------------------------

    def _requeue_trees(self, cqs: Iterable[ClusterQueueName]) -> None:
        members: set[ClusterQueueName] = set()
        for cq in cqs:
            members.update(self.cache.tree_members(cq))
        self._requeue(sorted(members))

    def _requeue(self, cqs: list[ClusterQueueName]) -> None:
        self.queues.queue_inadmissible(cqs)

    # -- scheduling --------------------------------------------------------------------------

    def schedule(self, now: datetime) -> CycleResult:
        """Run one scheduling cycle at ``now``."""
        self.cycles += 1
        self.queues.advance(now)
        evictions = self._evictions()
        result = run_cycle(
            number=self.cycles,
            now=now,
            cache=self.cache,
            queues=self.queues,
            preemptor=self.preemptor,
            namespace_labels=self._namespace_labels,
            scan=self._scans,
        )
        for admit in result.admitted:
            self._last_pending.pop(admit.workload, None)
        for p in result.pending:
            self._last_pending[p.workload] = p
        if evictions:
            result = replace(result, evicted=tuple(evictions))
        return result

    def _evictions(self) -> list[Evict]:
        out: list[Evict] = []
        for key in sorted(self._drain):
            aw = self.cache.get(key)
            why = None if aw is None else self._drain_reason(aw)
            if aw is None or why is None or key in self.cache.evicting:
                continue
            self.cache.evicting.add(key)
            out.append(Evict(key, aw.cluster_queue, why[0], why[1]))
        self._drain.clear()
        return out

    # -- reading -----------------------------------------------------------------------------

    def explain(self, key: WorkloadKey) -> PendingDetails | None:
        """Why ``key`` is pending (None when it is unknown or holds quota)."""
        info = self.queues.pending.get(key)
        if info is None:
            return None
        in_cq, in_lq = self.queues.positions(key)
        blocked = self.queues.blocked(key)
        if blocked is not None:
            return PendingDetails(blocked.reason, blocked.message)
        cq = self.queues.cluster_queue_of(key)
        if cq is not None:
            inactive = self.cache.inactive(cq)
            if inactive is not None:
                return PendingDetails(
                    inactive.reason, inactive.message, cq,
                    position_in_cluster_queue=in_cq, position_in_local_queue=in_lq,
                )
        last = self._last_pending.get(key)
        if last is not None:
            return replace(
                last.details, position_in_cluster_queue=in_cq, position_in_local_queue=in_lq
            )
        ahead = 0 if in_cq is None else in_cq
        return PendingDetails(
            PendingReason.WAITING_FOR_QUOTA,
            f"Waiting to be considered: {ahead} workload(s) ahead in ClusterQueue {cq}",
            cq,
            position_in_cluster_queue=in_cq,
            position_in_local_queue=in_lq,
        )

    def usage(self, cq: ClusterQueueName) -> Usage:
        return self.cache.usage(cq)

    def reserving(self, cq: ClusterQueueName) -> list[WorkloadKey]:
        return [w.key for w in self.cache.workloads_in(cq)]

    def holds_quota(self, key: WorkloadKey) -> bool:
        return key in self.cache.workloads

    def admitted_workload(self, key: WorkloadKey) -> AdmittedWorkload | None:
        return self.cache.get(key)

    def pending_workload(self, key: WorkloadKey) -> WorkloadInfo | None:
        return self.queues.pending.get(key)

    def pending_counts(self, cq: ClusterQueueName) -> tuple[int, int]:
        """(active, parked) pending workloads of ``cq``."""
        return self.queues.counts(cq)

    def local_queue(self, key: LocalQueueKey) -> LocalQueueSpec | None:
        return self.queues.local_queues.get(key)
