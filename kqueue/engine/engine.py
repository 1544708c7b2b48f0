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

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from . import admissibility, transformations
from .cache import Cache
from .cycle import CycleResult, Deferred, Evict, FlavorScans, Pending, run_cycle
from .execution import ExecutionLimits, accumulated
from .explain import PendingDetails
from .fairness.admission import AdmissionFairSharing
from .fairness.dominant_share import Share, share_of
from .fairness.usage_ledger import AdmissionFairSharingConfig, FairUsage, UsageLedger
from .gang import Barrier
from .gates import FeatureGates
from .limitrange import EMPTY as NO_LIMIT_RANGES
from .limitrange import Summary as LimitRangeSummary
from .limitrange import summarize
from .merged_cycles import merge
from .preemption.preemptor import ClassicalPreemptor
from .preemption.report import VictimSearch
from .preemption.seam import Preemptor
from .queue import QueueManager
from .readiness import PodsReadyConfig, Readiness
from .slice import scaled_down
from .snapshot import Inactive
from .tas import delayed
from .tas.fit import delegates_placement
from .tas.follow import follow, with_assignments
from .tas.node_fit import Demand, NodeFitGuard, ReleasedPod, Verdict, host_usage, merged_flavor
from .tas.replacement import NotReplaced, Replaced, placed_on_nodes, replace_all
from .tas.topology import BoundPod, Node, Topology, TopologySnapshot
from .transformations import QuotaResources
from .types import (
    Admission,
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    EvictionReason,
    FairSharingConfig,
    FlavorName,
    LimitRangeItem,
    LocalQueueKey,
    LocalQueueSpec,
    PendingReason,
    PodSetName,
    ProtectionConfig,
    ResourceFlavor,
    ResourceName,
    StopPolicy,
    TopologyAssignment,
    Usage,
    Workload,
    WorkloadKey,
    local_queue_key,
)
from .workload import AdmittedWorkload, WorkloadInfo, WorkloadState, make_info


@dataclass(frozen=True)
class CohortSummary:
    """A cohort as the controller's metrics see it."""

    name: CohortName
    parent: CohortName | None
    subtree_quota: Mapping[tuple[FlavorName, ResourceName], int]
    cluster_queues: tuple[ClusterQueueName, ...]

# Kueue's message while waitForPodsReady.blockAdmission holds admissions back.
BLOCKED_BY_READINESS = "waiting for all admitted workloads to be in PodsReady condition"


class Engine:
    def __init__(
        self,
        preemptor: Preemptor | None = None,
        *,
        pods_ready: PodsReadyConfig | None = None,
        fair_sharing: FairSharingConfig | None = None,
        admission_fair_sharing: AdmissionFairSharingConfig | None = None,
        node_fit_guard: bool = True,
        preemption_protection: ProtectionConfig | None = None,
        gates: FeatureGates | None = None,
        quota_resources: QuotaResources | None = None,
    ) -> None:
        self.gates = gates if gates is not None else FeatureGates()
        # Resource transformations and excluded prefixes (transformations.py).
        self.quota_resources = quota_resources if quota_resources is not None else QuotaResources()
        self.cache = Cache()
        # The node-fit guard (tas/node_fit.py): on for every ClusterQueue that does not say.
        self.node_fit_default = node_fit_guard
        self.node_fit_guard = NodeFitGuard()
        self.cache.fair_sharing = fair_sharing
        # The Configuration's preemptionProtection (preemption/protection.py).
        self.cache.protection = preemption_protection
        # Preemptors waiting for a protection to end: when to retry each, in which ClusterQueue,
        # and the quota each holds back until then.
        self._protection_wakes: dict[WorkloadKey, tuple[datetime, ClusterQueueName]] = {}
        self._protection_holds: dict[WorkloadKey, Deferred] = {}
        self.queues = QueueManager()
        # The one place that picks the default: Kueue's classical preemption (with its
        # fair-sharing search when fair sharing is on). Callers pass one only to replace it.
        self.preemptor: Preemptor = preemptor if preemptor is not None else ClassicalPreemptor()
        self.priority_classes: dict[str, int] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        # LimitRanges by namespace and name, and their summary per namespace (limitrange.py).
        self.limit_ranges: dict[str, dict[str, tuple[LimitRangeItem, ...]]] = {}
        self._limit_summaries: dict[str, LimitRangeSummary] = {}
        self.cycles = 0
        self._last_pending: dict[WorkloadKey, Pending] = {}
        # Workloads holding quota that the engine must evict (stop policies, deactivation).
        self._drain: set[WorkloadKey] = set()
        self._scans = FlavorScans()
        # waitForPodsReady (readiness.py), maximum execution times (execution.py) and the
        # pod-group barrier (gang.py).
        self.readiness = Readiness(pods_ready)
        self.execution = ExecutionLimits()
        # The ``now`` of the last cycle: when an eviction it decided completes, unless the
        # caller says otherwise (see ``evicted``).
        self._last_now: datetime | None = None
        self.barrier = Barrier()
        self.queues.gates.append(self.barrier.gate)
        # Admission fair sharing (fairness/admission.py): its ledger is None while the
        # Configuration has none.
        self.admission_fairness = AdmissionFairSharing(
            self.cache, self.queues, admission_fair_sharing
        )

    # -- flavors, queues, cohorts ------------------------------------------------------------

    def upsert_flavor(self, flavor: ResourceFlavor) -> None:
        flavor = self.gates.flavor(flavor)
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

    # -- topology-aware scheduling: Topologies, nodes, bound pods ---------------------------

    def upsert_topology(self, topology: Topology) -> None:
        if self.cache.nodes.upsert_topology(topology):
            self._requeue_topology_users()

    def delete_topology(self, name: str) -> None:
        if self.cache.nodes.delete_topology(name):
            self._requeue_topology_users()

    def upsert_node(self, node: Node) -> None:
        """A node as last seen (labels, allocatable, taints, readiness)."""
        if self.cache.nodes.upsert_node(node):
            self._requeue_topology_users()

    def delete_node(self, name: str) -> None:
        if self.cache.nodes.delete_node(name):
            self._requeue_topology_users()

    def upsert_pod(self, pod: BoundPod) -> None:
        """A pod bound to a node whose requests are not counted through a topology assignment
        (any pod not released by kqueue with one); it takes that node's capacity."""
        self.cache.nodes.upsert_pod(pod)

    def delete_pod(self, key: str) -> None:
        """The pod ended or is gone: its node's capacity is free again."""
        if self.cache.nodes.delete_pod(key):
            self._requeue_topology_users()

    # -- the node-fit guard --------------------------------------------------------------------

    def upsert_released_pod(self, pod: ReleasedPod) -> None:
        """A pod kqueue released that is not bound yet: the guard counts it as taking room."""
        self.node_fit_guard.released.upsert(pod)

    def delete_released_pod(self, key: str) -> bool:
        """The pod was bound (now a bound pod), ended or is gone; whether it was counted."""
        return self.node_fit_guard.released.delete(key)

    def node_fit_generation(self) -> tuple[int, int, int]:
        """Changes whenever what the guard reads changes (nodes, bound pods, released pods,
        workloads holding topology assignments): a workload held at one generation needs no new
        check until it moves."""
        return (
            self.cache.nodes.generation,
            self.node_fit_guard.released.generation,
            self.cache.topology_usage_generation,
        )

    def node_fit(self, key: WorkloadKey, pending: Mapping[PodSetName, int]) -> Verdict | None:
        """Whether the ``pending`` pods (per pod set: admitted, not released yet) of the admitted
        workload ``key`` fit on the nodes now; None when the guard does not apply: not admitted,
        the guard off for its ClusterQueue, fewer than two pods to release (one pod is bound
        whole or not at all), or pod sets a topology assignment already placed."""
        aw = self.cache.get(key)
        if aw is None:
            return None
        spec = self.cache.cluster_queues.get(aw.cluster_queue)
        on = spec.node_fit_guard if spec is not None else None
        if not (self.node_fit_default if on is None else on):
            return None
        by_name = {ps.name: ps for ps in aw.info.pod_sets}
        demands: list[Demand] = []
        for psa in aw.admission.pod_sets:
            ps = by_name.get(psa.name)
            n = min(pending.get(psa.name, 0), psa.count)
            if ps is None or n <= 0 or psa.topology is not None:
                continue
            flavors = [
                self.cache.flavors.get(f) or ResourceFlavor(f)
                for f in sorted(set(psa.flavors.values()))
            ]
            demands.append(Demand(ps, n, merged_flavor(flavors)))
        if sum(d.count for d in demands) < 2:
            return None
        # TAS-placed pods are counted through their assignments, not as bound pods.
        assigned = host_usage(self.cache.topology_usage()) if self.cache.topology_trees() else {}
        return self.node_fit_guard.check(self.cache.nodes, demands, assigned)

    def replace_failed_nodes(
        self, key: WorkloadKey, failed: Iterable[str]
    ) -> dict[str, Replaced] | NotReplaced | None:
        """Kueue's TASFailedNodeReplacement for the admitted workload ``key`` (tas/replacement.py):
        per pod set placed on a ``failed`` node, its new assignment; or why it is evicted; None
        when no pod set of it is placed on those nodes."""
        aw = self.cache.get(key)
        if aw is None:
            return None
        trees = self.cache.topology_trees()
        placed = placed_on_nodes(trees, aw, set(failed))
        if not placed:
            return None
        return replace_all(trees, self.cache.topology_usage(), placed, sorted(set(failed)))

    def claim_replacement(self, key: WorkloadKey, got: Mapping[str, Replaced]) -> None:
        """Hold ``got``'s new domains for the admitted workload ``key`` at once, before its new
        topology assignment reaches the API and comes back: a cycle that runs meanwhile must not
        place another workload there (Kueue records the second pass's claim in the cycle's
        snapshot). The Workload as written replaces this when it is fed again."""
        aw = self.cache.get(key)
        if aw is None:
            return
        self.cache.add_workload(
            with_assignments(aw, {PodSetName(n): r.assignment for n, r in got.items()})
        )

    def follow_binding(
        self,
        key: WorkloadKey,
        bound: Mapping[PodSetName, TopologyAssignment],
        movable: Callable[[WorkloadKey], bool],
    ) -> dict[WorkloadKey, dict[PodSetName, TopologyAssignment]]:
        """``topologyHandOff: Constraint``: the admitted workload ``key``'s pod sets are bound
        where ``bound`` says. The new assignments to write: its own and, for the hosts it takes
        that others are booked on beyond their room, those of the ``movable`` ones (pods not
        pinned, so their booking is a guess) re-booked elsewhere (tas/follow.py). All are held
        in the cache at once, as ``claim_replacement`` does, so a cycle that runs before they
        come back from the API counts no host twice."""
        moved = follow(
            self.cache.topology_trees(),
            self.cache.topology_usage(),
            self.cache.workloads,
            key,
            bound,
            movable,
        )
        for k in sorted(moved):
            held = self.cache.get(k)
            if held is not None:
                self.cache.add_workload(with_assignments(held, moved[k]))
        if moved:
            # The domain the gang left may be free now: workloads that did not fit try again.
            self._requeue_topology_users()
        return moved

    def topology_nodes(self) -> tuple[int, int, int]:
        """(Topologies, nodes, bound pods) known, for status and metrics."""
        n = self.cache.nodes
        return len(n.topologies), len(n.nodes), len(n.pods)

    def _requeue_topology_users(self) -> None:
        tas = {name for name, f in self.cache.flavors.items() if f.topology_name}
        users = [
            n for n, s in sorted(self.cache.cluster_queues.items())
            if any(f in tas for f in s.flavor_names())
        ]
        self._requeue_trees(users)

    def upsert_admission_check(
        self, name: str, inactive: str | None, *, provisions: bool = False,
        delegates: bool = False,
    ) -> None:
        """An AdmissionCheck and why it is inactive (None: active); ClusterQueues that use it
        are inactive while it is missing or inactive (checks.py). ``provisions``: a
        ProvisioningRequest check, whose topology-aware flavors are placed only once the
        checks are Ready (tas/delayed.py, :meth:`place_delayed`). ``delegates``: a MultiKueue
        check, whose ClusterQueues' topology-aware pod sets the workers place, never this
        engine."""
        checks = self.cache.admission_checks
        kinds = ((self.cache.provisioning_checks, provisions),
                 (self.cache.multikueue_checks, delegates))
        if name in checks and checks[name] == inactive and all(
            (name in names) == wanted for names, wanted in kinds
        ):
            return
        checks[name] = inactive
        for names, wanted in kinds:
            if wanted:
                names.add(name)
            else:
                names.discard(name)
        self._requeue_check_users(name)

    def delete_admission_check(self, name: str) -> None:
        self.cache.provisioning_checks.discard(name)
        self.cache.multikueue_checks.discard(name)
        if name in self.cache.admission_checks:
            del self.cache.admission_checks[name]
            self._requeue_check_users(name)

    def place_delayed(
        self, key: WorkloadKey, updates: Sequence[delayed.PodSetUpdate] = ()
    ) -> Admission | str | None:
        """Kueue's second scheduling pass for a delayed topology request: the pod sets of the
        workload ``key`` (holding quota, every check Ready: the caller's to know) that wait
        with ``delayedTopologyRequest: Pending`` are placed on the nodes as they are now. The
        new admission (held at once, as :meth:`claim_replacement`, so that a cycle running
        before it is written does not take its nodes); or why it does not fit (the workload
        keeps its reservation, the caller retries after ``delayed.retry_delay``); None when
        nothing waits. The quota is not fitted again: the reservation
        holds it. waitForPodsReady's admission block does not apply (Kueue's second pass
        skips it: the workload waiting is the one being placed). Behind a MultiKueue check
        the pod sets are marked Ready without a placement: the worker placed them."""
        aw = self.cache.get(key)
        if aw is None or not delayed.has_pending(aw.admission):
            return None
        spec = self.cache.cluster_queues.get(aw.admission.cluster_queue)
        delegated = spec is not None and delegates_placement(spec, self.cache.multikueue_checks)
        trees = self.cache.topology_trees()
        got = delayed.second_pass(
            aw, TopologySnapshot(trees, (), self.cache.topology_usage()), delegated=delegated,
            updates=updates,
        )
        if isinstance(got, Admission):
            self.cache.add_workload(replace(aw, admission=got))
        return got

    def _requeue_check_users(self, name: str) -> None:
        self._requeue_trees(
            cq.name for cq in self.cache.cluster_queues.values()
            if any(r.name == name for r in cq.admission_checks)
        )

    def upsert_cluster_queue(self, spec: ClusterQueueSpec) -> None:
        old = self.cache.cluster_queues.get(spec.name)
        if old == spec:
            return
        before = self.cache.tree_members(spec.name) if old is not None else []
        self.cache.upsert_cluster_queue(spec)
        self.queues.upsert_cluster_queue(spec.name, spec.queueing_strategy)
        self._update_fair_order(spec.name)
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
        key = local_queue_key(namespace, name)
        self.queues.delete_local_queue(key)
        self.admission_fairness.forget_local_queue(key)

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

    def set_limit_range(self, namespace: str, name: str, items: Iterable[LimitRangeItem]) -> None:
        """A LimitRange as last seen: its defaults change what the namespace's pending
        workloads request, its bounds whether they can run (admissibility.py)."""
        new = tuple(items)
        if self.limit_ranges.get(namespace, {}).get(name) == new:
            return
        self.limit_ranges.setdefault(namespace, {})[name] = new
        self._limit_ranges_changed(namespace)

    def delete_limit_range(self, namespace: str, name: str) -> None:
        ranges = self.limit_ranges.get(namespace, {})
        if ranges.pop(name, None) is None:
            return
        if not ranges:
            del self.limit_ranges[namespace]
        self._limit_ranges_changed(namespace)

    def limit_range_summary(self, namespace: str) -> LimitRangeSummary:
        return self._limit_summaries.get(namespace, NO_LIMIT_RANGES)

    def _limit_ranges_changed(self, namespace: str) -> None:
        ranges = self.limit_ranges.get(namespace, {})
        summary = summarize(ranges[n] for n in sorted(ranges)) if ranges else NO_LIMIT_RANGES
        if summary == self.limit_range_summary(namespace):
            return
        if ranges:
            self._limit_summaries[namespace] = summary
        else:
            self._limit_summaries.pop(namespace, None)
        # Pending workloads of the namespace request what the new defaults give them, and those
        # set aside (Misconfigured among them) are tried again.
        for key in sorted(self.queues.pending):
            info = self.queues.pending[key]
            if info.obj.namespace == namespace:
                adjusted = transformations.apply(
                    admissibility.adjust(info.obj, summary), self.quota_resources
                )
                if adjusted != info.obj:
                    self.queues.upsert(make_info(adjusted, self.priority_classes))
        self.queues.queue_inadmissible_in_namespace(namespace)

    def _misconfiguration(self, info: WorkloadInfo) -> str | None:
        return admissibility.misconfiguration(
            info.obj, self.limit_range_summary(info.obj.namespace)
        )

    # -- workloads ---------------------------------------------------------------------------

    def upsert_workload(self, wl: Workload) -> None:
        """A workload as last seen; with ``admission`` set it holds that quota."""
        wl = self.gates.workload(wl)
        wl = admissibility.adjust(wl, self.limit_range_summary(wl.namespace))
        wl = transformations.apply(wl, self.quota_resources)
        info = make_info(wl, self.priority_classes)
        held = self.cache.get(wl.key)
        self.readiness.known_count(wl.key, wl.requeue_count)
        if wl.admission is not None:
            self.admission_fairness.confirmed(wl.key)
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
                # Our admission is not visible yet: keep the assumption, refresh the object,
                # but not its accumulated time, which the admission's write sets (a slice's
                # carried time, slice.py).
                past = held.info.obj.past_execution_seconds
                if wl.past_execution_seconds != past:
                    info = make_info(
                        replace(wl, past_execution_seconds=past), self.priority_classes
                    )
                self.cache.add_workload(replace(held, info=info))
                return
            # The quota was released (e.g. evicted and the admission cleared).
            self.cache.remove_workload(wl.key)
            self.readiness.after_eviction(wl.key)
            self._requeue_trees([held.cluster_queue])
            if self.execution.after_eviction(wl.key) and wl.active:
                # Deactivated for its maximum execution time, and the release arrived before
                # spec.active false: it must not be admitted again meanwhile.
                info = make_info(replace(wl, active=False), self.priority_classes)
        self.queues.upsert(info)

    def delete_workload(self, key: WorkloadKey) -> None:
        self.finish(key)

    def finish(self, key: WorkloadKey) -> None:
        """The workload finished or is gone: forget it and free its quota."""
        self._scans.forget(key)
        self.queues.delete(key)
        self._last_pending.pop(key, None)
        self._drain.discard(key)
        self._forget_extras(key)
        held = self.cache.remove_workload(key)
        if held is not None:
            self._requeue_trees([held.cluster_queue])

    def _forget_extras(self, key: WorkloadKey) -> None:
        self._drop_protection_wait(key)
        self.admission_fairness.confirmed(key)
        self.readiness.forget(key)
        self.execution.forget(key)
        self.barrier.forget(key)
        if isinstance(self.preemptor, ClassicalPreemptor):
            self.preemptor.forget(key)

    def evicted(
        self,
        key: WorkloadKey,
        *,
        requeue_at: datetime | None = None,
        now: datetime | None = None,
    ) -> None:
        """The workload was evicted: free its quota; it pends again (after ``requeue_at``).

        After a PodsReady timeout the engine's own backoff applies when ``requeue_at`` is not
        given, the workload is ordered by its eviction time, and a deactivated one stays out.
        The time it was admitted, up to ``now`` (default: the last cycle's), adds to its
        accumulated execution time; a workload deactivated for exceeding its maximum execution
        time stays out and starts over with none (execution.py).
        """
        self._drain.discard(key)
        self.admission_fairness.confirmed(key)
        after = self.readiness.after_eviction(key)
        exceeded = self.execution.after_eviction(key)
        held = self.cache.remove_workload(key)
        if held is None:
            return
        self._requeue_trees([held.cluster_queue])
        wl = replace(held.info.obj, admission=None, requeue_at=requeue_at)
        released_at = now if now is not None else self._last_now
        if exceeded:
            wl = replace(wl, active=False, past_execution_seconds=0)
        elif released_at is not None:
            wl = replace(
                wl,
                past_execution_seconds=accumulated(
                    wl, held.admission.admitted_since, released_at
                ),
            )
        if after is not None:
            wl = replace(
                wl,
                requeue_at=requeue_at or after.requeue_at,
                queue_order_time=after.queue_order_time or wl.queue_order_time,
                requeue_count=self.readiness.count(key),
                active=wl.active and not after.deactivate,
            )
        self.queues.upsert(make_info(wl, self.priority_classes))

    def forget(self, key: WorkloadKey) -> None:
        """Roll back an assumed admission whose API write failed; the workload pends again."""
        held = self.cache.get(key)
        if held is None or not held.assumed:
            return
        self.admission_fairness.roll_back(key)
        self.cache.remove_workload(key)
        self._requeue_trees([held.cluster_queue])
        self.queues.upsert(held.info)

    def confirm(self, key: WorkloadKey) -> None:
        """The API has the admission this engine assumed (its write was answered): the
        workload holds quota from now on as any admitted one does, so a later observation
        without the admission means it was released, not that the write is still on its way.

        Without this, an admission whose own watch event was never seen (a relist that began
        after the workload had been admitted, evicted and released) stayed assumed for good,
        holding its quota in the engine and never queued again."""
        held = self.cache.get(key)
        if held is None or not held.assumed:
            return
        self.admission_fairness.confirmed(key)  # in the API: charged for good
        self.cache.add_workload(replace(held, assumed=False))

    def state(self, key: WorkloadKey) -> WorkloadState:
        """What the engine holds of a workload: the view the controller converges with the
        API (``WorkloadState``)."""
        held = self.cache.get(key)
        if held is not None:
            if key in self.cache.evicting:
                return WorkloadState.EVICTING
            return WorkloadState.RESERVING if held.assumed else WorkloadState.ADMITTED
        if key in self.queues.pending:
            return WorkloadState.PENDING
        return WorkloadState.ABSENT

    def workload_keys(self) -> set[WorkloadKey]:
        """Every workload the engine holds, pending or holding quota."""
        return set(self.cache.workloads) | set(self.queues.pending)

    def undo_eviction(
        self, key: WorkloadKey, *, requeue_count: int | None = None, deactivate: bool = False
    ) -> None:
        """Roll back an eviction a cycle decided whose API write was given up (``forget`` is
        the same for admissions): the workload no longer counts as going, so a later cycle
        decides again. ``requeue_count``/``deactivate``: the PodsReady timeout the eviction
        carried, taken back so that deciding it again is the same requeue, not the next."""
        self.cache.evicting.discard(key)
        if requeue_count is not None:
            self.readiness.undo_timeout(key, requeue_count, deactivate)

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
            rejected = aw.info.obj.rejected_by_checks
            if rejected is not None:
                return EvictionReason.DEACTIVATED_DUE_TO_ADMISSION_CHECK, (
                    f"Deactivated due to {rejected}"
                )
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

    def schedule(self, now: datetime, *, admissions: int = 1) -> CycleResult:
        """Run scheduling cycles at ``now``: one, or more while they admit (see merged_cycles.py).

        With ``admissions > 1`` cycles follow one another as long as the last one admitted
        something, nothing replaced a workload slice, and fewer than ``admissions`` workloads
        were admitted so far; the result is the merge of those cycles (``result.cycles``), the
        same decisions as that many calls with ``admissions=1`` at the same ``now``. A busy
        ClusterQueue then admits as many heads per call as its writes can take, not one.
        """
        results: list[CycleResult] = []
        fresh: dict[WorkloadKey, AdmittedWorkload] | None = None
        admitted = 0
        while True:
            result = self._cycle(now, fresh)
            results.append(result)
            admitted += len(result.admitted)
            if not result.admitted or result.finished or admitted >= admissions:
                break
            # Only what this cycle admitted can reach a deadline at the same ``now`` that the
            # earlier checks did not see (the others were checked at this ``now`` already).
            fresh = {
                a.workload: aw for a in result.admitted
                if (aw := self.cache.get(a.workload)) is not None
            }
        return results[0] if len(results) == 1 else merge(results)

    def _cycle(
        self, now: datetime, fresh: Mapping[WorkloadKey, AdmittedWorkload] | None
    ) -> CycleResult:
        """One cycle; ``fresh``: the only workloads that may have reached a deadline since the
        last cycle at this same ``now`` (None: check all)."""
        self.cycles += 1
        self._last_now = now
        self.queues.advance(now)
        self.admission_fairness.settle(now)
        self.sample_fair_usage(now)
        evictions = self._evictions()
        evictions += self._timeouts(now, fresh)
        self._wake_protected(now)
        result = run_cycle(
            number=self.cycles,
            now=now,
            cache=self.cache,
            queues=self.queues,
            preemptor=self.preemptor,
            namespace_labels=self._namespace_labels,
            scan=self._scans,
            admission_gate=self._admission_gate(),
            misconfigured=self._misconfiguration,
            held=self._protection_holds,
        )
        for admit in result.admitted:
            self._last_pending.pop(admit.workload, None)
            self.admission_fairness.charge(admit.workload, admit.cluster_queue, now)
        for done in result.finished:
            self._forget_extras(done.old)
        for admit in result.admitted:
            self._drop_protection_wait(admit.workload)
        result = self._protection_waits(result, now)
        for p in result.pending:
            self._last_pending[p.workload] = p
        if evictions:
            result = replace(result, evicted=tuple(evictions))
        return result

    def _wake_protected(self, now: datetime) -> None:
        """Preemptors whose wait for a protection is over go back to their queues: nothing
        else would wake a workload parked as inadmissible. Considered again, one still waiting
        holds its quota back anew."""
        due = sorted(k for k, (at, _) in self._protection_wakes.items() if at <= now)
        cqs = {self._protection_wakes[k][1] for k in due}
        for key in due:
            # Its hold ends too: held at most until the wake, a preemptor that is never
            # considered again (deactivated, say) holds nothing for good.
            self._drop_protection_wait(key)
        if cqs:
            self._requeue_trees(sorted(cqs))

    def _protection_waits(self, result: CycleResult, now: datetime) -> CycleResult:
        """The pending preemptors that wait for a protection to end: their message names the
        protected workloads and when the first protection ends, the engine wakes then, and
        the quota they wait for stays held back meanwhile."""
        if not isinstance(self.preemptor, ClassicalPreemptor):
            return result
        deferred = {d.workload: d for d in result.protection_deferred}
        pending: list[Pending] = []
        for p in result.pending:
            d = deferred.get(p.workload)
            wait = self.preemptor.protection_wait(p.workload) if d is not None else None
            if d is None or wait is None:
                self._drop_protection_wait(p.workload)
                pending.append(p)
                continue
            self._protection_wakes[p.workload] = (wait.until, d.cluster_queue)
            self._protection_holds[p.workload] = d
            note = wait.message(now)
            message = f"{p.message}; {note}" if p.message else note
            pending.append(replace(p, message=message, details=replace(p.details, message=message)))
        if not deferred:
            return result
        return replace(result, pending=tuple(pending))

    def _drop_protection_wait(self, key: WorkloadKey) -> None:
        self._protection_wakes.pop(key, None)
        self._protection_holds.pop(key, None)

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

    def _timeouts(
        self, now: datetime, only: Mapping[WorkloadKey, AdmittedWorkload] | None = None
    ) -> list[Evict]:
        """Maximum execution times exceeded (execution.py) and PodsReady timeouts (readiness.py)
        due by ``now``. The first go first: a workload past its budget is deactivated rather than
        requeued with a backoff only to be deactivated at its next admission."""
        out: list[Evict] = []
        workloads = self.cache.workloads if only is None else only
        for x in self.execution.expired(workloads, self.cache.evicting, now):
            aw = self.cache.get(x.workload)
            assert aw is not None
            self.cache.evicting.add(x.workload)
            out.append(
                Evict(
                    x.workload, aw.cluster_queue,
                    EvictionReason.DEACTIVATED_DUE_TO_MAXIMUM_EXECUTION_TIME_EXCEEDED, x.message,
                    deactivate=True,
                )
            )
        for t in self.readiness.expired(workloads, self.cache.evicting, now):
            aw = self.cache.get(t.workload)
            assert aw is not None
            self.cache.evicting.add(t.workload)
            out.append(
                Evict(
                    t.workload, aw.cluster_queue, t.reason, t.message,
                    requeue_at=t.requeue_at, requeue_count=t.requeue_count,
                    deactivate=t.deactivate,
                )
            )
        return out

    def _admission_gate(self) -> Callable[[], str | None] | None:
        cfg = self.readiness.config
        if cfg is None or not cfg.block_admission:
            return None

        def gate() -> str | None:
            if self.readiness.all_ready(self.cache.workloads, self.cache.evicting):
                return None
            return BLOCKED_BY_READINESS

        return gate

    # -- gangs, readiness, slices ------------------------------------------------------------

    def pods_present(self, key: WorkloadKey, present: int, total: int) -> None:
        """How many pods of a pod group exist out of its declared total (the barrier)."""
        if self.barrier.set(key, present, total):
            self.queues.replace(key)

    def pods_ready(self, key: WorkloadKey, ready: bool, now: datetime) -> None:
        """Whether all pods of the admitted workload ``key`` are ready (PodsReady), as of ``now``."""
        self.readiness.pods_ready(key, ready, now)

    def next_deadline(self) -> datetime | None:
        """The earliest time at which ``schedule`` may decide something new without any event:
        a PodsReady timeout, a maximum execution time, the end of a requeue backoff, or the end
        of a preemption protection a preemptor waits for."""
        times = [
            self.readiness.next_deadline(self.cache.workloads, self.cache.evicting),
            self.execution.next_deadline(self.cache.workloads, self.cache.evicting),
            self.queues.next_backoff(),
            self.admission_fairness.next_sample(),
            min((at for at, _ in self._protection_wakes.values()), default=None),
        ]
        present = [x for x in times if x is not None]
        return min(present) if present else None

    def scale_down(self, key: WorkloadKey, counts: Mapping[PodSetName, int]) -> Admission | None:
        """Shrink an admitted workload in place (WorkloadSlices): returns the new admission to
        write, and frees the difference at once. None when ``key`` holds no quota."""
        held = self.cache.get(key)
        if held is None:
            return None
        wl, admission = scaled_down(held.info.obj, held.admission, counts)
        evicting = key in self.cache.evicting
        self.cache.remove_workload(key)
        self.cache.add_workload(
            AdmittedWorkload.of(make_info(wl, self.priority_classes), admission, held.assumed)
        )
        if evicting:
            self.cache.evicting.add(key)
        self._requeue_trees([held.cluster_queue])
        return admission

    def explain_preemption(self, key: WorkloadKey) -> VictimSearch | None:
        """The last victim search for ``key``: every candidate and why it was (not) usable."""
        if isinstance(self.preemptor, ClassicalPreemptor):
            return self.preemptor.explain(key)
        return None

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
        usages = self.admission_fairness.waiting_usages(cq) if cq is not None else ()
        last = self._last_pending.get(key)
        if last is None and cq is not None and cq in self.queues.queues:
            # Parked with its equivalence class: the verdict of the head that parked it.
            head = self.queues.queues[cq].parked_by(key)
            last = self._last_pending.get(head) if head is not None else None
        if last is not None:
            return replace(
                last.details,
                position_in_cluster_queue=in_cq,
                position_in_local_queue=in_lq,
                local_queue_usages=usages,
            )
        ahead = 0 if in_cq is None else in_cq
        return PendingDetails(
            PendingReason.WAITING_FOR_QUOTA,
            f"Waiting to be considered: {ahead} workload(s) ahead in ClusterQueue {cq}",
            cq,
            position_in_cluster_queue=in_cq,
            position_in_local_queue=in_lq,
            local_queue_usages=usages,
        )

    def usage(self, cq: ClusterQueueName) -> Usage:
        return self.cache.usage(cq)

    def reserving(self, cq: ClusterQueueName) -> list[WorkloadKey]:
        return [w.key for w in self.cache.workloads_in(cq)]

    def reserving_count(self, cq: ClusterQueueName) -> int:
        """How many workloads hold quota in ``cq``: ``len(reserving(cq))`` without the list."""
        return self.cache.count_in(cq)

    def holds_quota(self, key: WorkloadKey) -> bool:
        return key in self.cache.workloads

    def admitted_workload(self, key: WorkloadKey) -> AdmittedWorkload | None:
        return self.cache.get(key)

    def pending_workload(self, key: WorkloadKey) -> WorkloadInfo | None:
        return self.queues.pending.get(key)

    def pending_counts(self, cq: ClusterQueueName) -> tuple[int, int]:
        """(active, parked) pending workloads of ``cq``."""
        return self.queues.counts(cq)

    def pending_requests(self, cq: ClusterQueueName) -> dict[ResourceName, int]:
        """Requests of all pending workloads queued in ``cq`` (active and parked), per resource."""
        q = self.queues.queues.get(cq)
        out: dict[ResourceName, int] = {}
        for info in q.infos() if q is not None else ():
            for requests in info.total_requests():
                for resource, amount in requests.items():
                    out[resource] = out.get(resource, 0) + amount
        return out

    def cohorts_above(self, cq: ClusterQueueName) -> list[CohortSummary]:
        """The cohorts from ``cq``'s own up to its root, each with its parent, subtree quota
        and the ClusterQueues in its subtree (for metrics); [] without a cohort."""
        node = self.cache.cluster_queue_node(cq)
        out: list[CohortSummary] = []
        for co in node.path_to_root() if node is not None else []:
            out.append(
                CohortSummary(
                    name=CohortName(co.name),
                    parent=CohortName(co.parent.name) if co.parent is not None else None,
                    subtree_quota=dict(co.resources.subtree_quota),
                    cluster_queues=tuple(
                        ClusterQueueName(m.name) for m in co.subtree_cluster_queues()
                    ),
                )
            )
        return out

    def root_cohort(self, cohort: CohortName | None) -> CohortName | None:
        """The root of ``cohort``'s tree (itself without a parent); None without a cohort. A
        parent cycle (refused by the cohorts' status) stops where it closes."""
        seen: set[CohortName] = set()
        while cohort is not None and cohort not in seen:
            seen.add(cohort)
            spec = self.cache.cohorts.get(cohort)
            if spec is None or spec.parent is None:
                return cohort
            cohort = spec.parent
        return cohort

    def local_queue_pending_counts(self, key: LocalQueueKey) -> tuple[int, int]:
        """(active, parked) pending workloads of LocalQueue ``key`` in its ClusterQueue's queue."""
        return self.queues.local_queue_counts(key)

    def local_queue(self, key: LocalQueueKey) -> LocalQueueSpec | None:
        return self.queues.local_queues.get(key)

    def cluster_queue_names(self) -> frozenset[ClusterQueueName]:
        """Every ClusterQueue the engine knows (for readers that name one, e.g. visibility)."""
        return frozenset(self.cache.cluster_queues)

    def queued_in_order(self, cq: ClusterQueueName) -> list[WorkloadInfo]:
        """The pending workloads of ``cq`` in the order its heads are taken (parked ones too).

        O(n log n) per call: for readers (the visibility API, ``kubectl kqueue pending``),
        never for the scheduling cycle.
        """
        queue = self.queues.queues.get(cq)
        return queue.ordered() if queue is not None else []

    def workload_counts(self) -> tuple[int, int]:
        """(workloads holding quota, pending workloads)."""
        return len(self.cache.workloads), len(self.queues.pending)

    def pending_keys(self) -> Iterator[WorkloadKey]:
        """Every pending workload, in no particular order."""
        return iter(self.queues.pending)

    def cluster_queue_of(self, key: WorkloadKey) -> ClusterQueueName | None:
        """The ClusterQueue a pending workload is queued in (None when blocked or unknown)."""
        return self.queues.cluster_queue_of(key)

    def admission_checks_for(self, admission: Admission) -> list[str]:
        """The AdmissionChecks a workload with ``admission`` must pass to be admitted."""
        return self.cache.admission_checks_for(admission.cluster_queue, admission.pod_sets)

    def inactive(self, cq: ClusterQueueName) -> Inactive | None:
        """Why ``cq`` cannot admit now, if it cannot (Kueue's ClusterQueue Active=False)."""
        return self.cache.inactive(cq)

    def inactive_cluster_queues(self) -> frozenset[ClusterQueueName]:
        return frozenset(
            cq for cq in self.cache.cluster_queues if self.cache.inactive(cq) is not None
        )

    def local_queue_specs(self) -> frozenset[LocalQueueSpec]:
        return frozenset(self.queues.local_queues.values())

    def uses_flavor(self, flavor: str) -> bool:
        """Whether any workload holding quota holds some of ``flavor``."""
        return any(
            any(str(f) == flavor for f, _ in aw.usage) for aw in self.cache.workloads.values()
        )

    @property
    def pods_ready_config(self) -> PodsReadyConfig | None:
        """waitForPodsReady, when enabled."""
        return self.readiness.config

    def is_pods_ready(self, key: WorkloadKey) -> bool:
        """Whether the admitted workload's pods were last reported all ready."""
        return self.readiness.is_ready(key)

    # -- admission fair sharing (fairness/admission.py) --------------------------------------

    @property
    def afs(self) -> UsageLedger | None:
        """Admission fair sharing's usage ledger; None while it is off."""
        return self.admission_fairness.ledger

    @property
    def admission_fair_sharing(self) -> AdmissionFairSharingConfig | None:
        return self.admission_fairness.config

    def set_admission_fair_sharing(self, config: AdmissionFairSharingConfig | None) -> None:
        """Turn admission fair sharing on (the Configuration's admissionFairSharing) or off."""
        if self.admission_fairness.configure(config):
            for name in sorted(self.cache.cluster_queues):
                self._update_fair_order(name)

    def uses_admission_fair_sharing(self, cq: ClusterQueueName) -> bool:
        """Whether ``cq`` orders its heads by LocalQueue usage now: its admissionScope asks for
        it and the Configuration enables it."""
        return self.admission_fairness.applies_to(cq)

    def _update_fair_order(self, cq: ClusterQueueName) -> None:
        self.queues.set_fair_order(cq, self.admission_fairness.order_for(cq))

    def seed_local_queue_usage(
        self,
        key: LocalQueueKey,
        consumed: Mapping[ResourceName, int],
        last_update: datetime | None,
    ) -> None:
        """The LocalQueue's persisted ``status.fairSharing.admissionFairSharingStatus``
        (``consumed`` in nano-units), folded in once (after a restart, or a simulation's input).
        ``last_update`` None: the decay clock starts at the next cycle."""
        self.admission_fairness.seed(key, consumed, last_update)

    def local_queue_fair_usage(self, key: LocalQueueKey) -> FairUsage:
        """The weighted usage admission fair sharing orders ``key`` by (0 when unknown)."""
        return self.admission_fairness.usage(key)

    def local_queue_consumed(
        self, key: LocalQueueKey
    ) -> tuple[dict[ResourceName, int], datetime] | None:
        """``(consumedResources in nano-units, lastUpdate)`` for the LocalQueue's status; None
        while it has no sample yet or admission fair sharing is off."""
        return self.admission_fairness.consumed(key)

    def sample_fair_usage(self, now: datetime) -> list[LocalQueueKey]:
        """Decay the usage of every LocalQueue due for a sample; returns those sampled, for
        their status (fairness/admission.py)."""
        return self.admission_fairness.sample(now)

    # -- fair sharing ------------------------------------------------------------------------

    @property
    def fair_sharing(self) -> FairSharingConfig | None:
        return self.cache.fair_sharing

    def set_fair_sharing(self, config: FairSharingConfig | None) -> None:
        """Turn fair sharing on (the Configuration's fairSharing) or off (None)."""
        if config == self.cache.fair_sharing:
            return
        self.cache.fair_sharing = config
        self._requeue(sorted(self.cache.cluster_queues))

    def cluster_queue_share(self, name: ClusterQueueName) -> Share | None:
        """The ClusterQueue's weighted share now (its status ``fairSharing.weightedShare`` is
        ``.rounded()``, the metric ``.precise()``); None when fair sharing is off or the
        ClusterQueue is unknown."""
        if self.cache.fair_sharing is None:
            return None
        node = self.cache.cluster_queue_node(name)
        return None if node is None else share_of(node)

    def cohort_share(self, name: CohortName) -> Share | None:
        """The Cohort's weighted share now (status and metric as for ClusterQueues); None when
        fair sharing is off or the Cohort is unknown."""
        if self.cache.fair_sharing is None:
            return None
        node = self.cache.cohort_node(name)
        return None if node is None else share_of(node)
