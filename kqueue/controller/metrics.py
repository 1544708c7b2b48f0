"""Prometheus metrics with Kueue's names (``kueue_*`` -> ``kqueue_*``), and ``/metrics``.

Reconcilers and the scheduler loop report through domain-named methods
(``metrics.admission_attempt("success", 0.004)``), never through raw Prometheus objects, so
names, labels and units are decided here once. Quantities arrive as kqueue's exact integers
(cpu in milli-units, everything else in base units) and are converted to Prometheus numbers
here, at the edge: cpu in cores, memory in bytes, as Kueue exports them.

The probes (``/healthz``, ``/readyz``) live in :mod:`.probes`; ``Probes``, ``health_app`` and
``serve_app`` are imported from here too. What a Workload says (its priority class, eviction
labels, times) is read by :mod:`.metric_labels`.
"""

from __future__ import annotations

import contextlib
import logging
import platform
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import Metric

from kqueue import __version__
from kqueue.api.quantity import is_milli
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.metric_labels import (
    WAIT_FOR_RECOVERY,
    admitted_at,
    api_timestamp,
    eviction_labels,
    execution_time_s,
    priority_class,
    ready_until_evicted_s,
    workload_local_queue,
)
from kqueue.controller.probes import Probes as Probes
from kqueue.controller.probes import health_app as health_app
from kqueue.controller.probes import serve_app as serve_app
from kqueue.controller.workload_status import queued_since
from kqueue.engine.types import (
    ClusterQueueName,
    CohortName,
    LocalQueueKey,
    ResourceName,
    WorkloadKey,
    local_queue_key,
)

if TYPE_CHECKING:
    from kqueue.api.v1alpha1 import ClusterQueue, LocalQueue
    from kqueue.engine.engine import Engine

logger = logging.getLogger(__name__)

NAMESPACE = "kqueue"

# Kueue's Go client exports no "<name>_created" series; keep the exposition the same shape
# (process-wide, but this module is only imported by the controller).
disable_created_metrics()  # type: ignore[no-untyped-call]

AdmissionResult = Literal["success", "inadmissible"]
PendingStatus = Literal["active", "inadmissible"]
ClusterQueueStatus = Literal["pending", "active", "terminating"]
WebhookResult = Literal["allowed", "denied", "error"]
CLUSTER_QUEUE_STATUSES: tuple[ClusterQueueStatus, ...] = ("pending", "active", "terminating")

_RESOURCE_LABELS = ("cohort", "cluster_queue", "flavor", "resource")
# Kueue's label sets: per ClusterQueue and per LocalQueue (its name and namespace), with the
# workload's priority class (spec.priorityClassRef.name, "" without one) on workload counters.
_CQ_WORKLOAD_LABELS = ("cluster_queue", "priority_class")
_LQ = ("name", "namespace")
_LQ_WORKLOAD_LABELS = (*_LQ, "priority_class")
_EVICTION_LABELS = ("reason", "underlying_cause", "priority_class")
LOCAL_QUEUE_ACTIVE_VALUES = ("True", "False", "Unknown")

# Workloads whose first eviction per (reason, cause) was counted by evicted_workloads_once_total;
# bounded, as the record lives only in memory (Kueue keeps it in status.schedulingStats).
_EVICTED_ONCE_MEMORY = 100_000

_M = TypeVar("_M", Counter, Gauge, Histogram)


def _exponential(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


# Kueue's buckets: attempts take milliseconds to seconds; waits take seconds to hours.
_ATTEMPT_BUCKETS = _exponential(0.001, 2, 15)  # 1ms .. ~16s
_WAIT_BUCKETS = [1.0, *_exponential(2.5, 2, 13)]  # 1s .. ~2.8h
_GATE_BUCKETS = _exponential(0.01, 2, 14)  # 10ms .. ~82s


def to_prometheus_value(amount: int, resource: str) -> float:
    """An exact kqueue amount as a Prometheus number in Kubernetes base units (cpu in cores)."""
    return amount / 1000 if is_milli(resource) else float(amount)


class Metrics:
    """kqueue's metrics in their own registry (so tests and embedders get a clean slate)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self._admission_attempts = Counter(
            "admission_attempts",
            "Admission attempts, by result: 'success' (at least one workload admitted in the "
            "cycle) or 'inadmissible' (none could be).",
            ["result"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._admission_attempt_duration = Histogram(
            "admission_attempt_duration_seconds",
            "Duration of an admission attempt (one scheduling cycle), by result.",
            ["result"],
            namespace=NAMESPACE,
            registry=r,
            buckets=_ATTEMPT_BUCKETS,
        )
        self._pending = Gauge(
            "pending_workloads",
            "Pending workloads per ClusterQueue: 'active' (in the queue, to be tried) or "
            "'inadmissible' (parked until something changes).",
            ["cluster_queue", "status"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._quota_reserved = Counter(
            "quota_reserved_workloads",
            "Workloads that got quota reserved, per ClusterQueue and priority class.",
            _CQ_WORKLOAD_LABELS,
            namespace=NAMESPACE,
            registry=r,
        )
        self._quota_reserved_wait = Histogram(
            "quota_reserved_wait_time_seconds",
            "Time from creation (or the last requeue) to quota reservation, per ClusterQueue and "
            "priority class.",
            _CQ_WORKLOAD_LABELS,
            namespace=NAMESPACE,
            registry=r,
            buckets=_WAIT_BUCKETS,
        )
        self._admitted = Counter(
            "admitted_workloads",
            "Admitted workloads, per ClusterQueue and priority class.",
            _CQ_WORKLOAD_LABELS,
            namespace=NAMESPACE,
            registry=r,
        )
        self._admission_wait = Histogram(
            "admission_wait_time_seconds",
            "Time from creation (or the last requeue) to admission, per ClusterQueue and priority "
            "class.",
            _CQ_WORKLOAD_LABELS,
            namespace=NAMESPACE,
            registry=r,
            buckets=_WAIT_BUCKETS,
        )
        self._ready_wait = Histogram(
            "ready_wait_time_seconds",
            "Time from creation (or the last requeue) until the workload's pods were first ready "
            "after its admission (waitForPodsReady), per ClusterQueue and priority class.",
            _CQ_WORKLOAD_LABELS,
            namespace=NAMESPACE,
            registry=r,
            buckets=_WAIT_BUCKETS,
        )
        self._admitted_until_ready = Histogram(
            "admitted_until_ready_wait_time_seconds",
            "Time from admission until the workload's pods were first ready (waitForPodsReady), "
            "per ClusterQueue and priority class.",
            _CQ_WORKLOAD_LABELS,
            namespace=NAMESPACE,
            registry=r,
            buckets=_WAIT_BUCKETS,
        )
        self._finished_total = Counter(
            "finished_workloads",
            "Workloads that finished (Finished=True), per ClusterQueue and priority class.",
            _CQ_WORKLOAD_LABELS,
            namespace=NAMESPACE,
            registry=None,  # registered below, beside the gauge of the same stem
        )
        self._finished_now = Gauge(
            "finished_workloads",
            "Finished Workloads that still exist, per ClusterQueue (of their LocalQueue).",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=None,
        )
        self._execution_time = Histogram(
            "execution_time_seconds",
            "Time a finished workload was admitted, over all its admissions, per ClusterQueue "
            "and priority class.",
            _CQ_WORKLOAD_LABELS,
            namespace=NAMESPACE,
            registry=r,
            buckets=_WAIT_BUCKETS,
        )
        self._preemption_skips = Gauge(
            "admission_cycle_preemption_skips",
            "Workloads of the ClusterQueue that had preemption targets in the last cycle that "
            "considered it but were skipped because another workload of the cycle needed the "
            "same resources.",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._reserving_active = Gauge(
            "reserving_active_workloads",
            "Workloads holding quota, per ClusterQueue.",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._admitted_active = Gauge(
            "admitted_active_workloads",
            "Admitted workloads that have not finished, per ClusterQueue.",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._evicted = Counter(
            "evicted_workloads",
            "Evicted workloads, per ClusterQueue, reason (Preempted, PodsReadyTimeout, "
            "ClusterQueueStopped, LocalQueueStopped, Deactivated), underlying cause (PodsReady"
            "Timeout: WaitForStart or WaitForRecovery; Deactivated: MaximumExecutionTimeExceeded "
            "when kqueue deactivated it; else empty) and priority class.",
            ["cluster_queue", *_EVICTION_LABELS],
            namespace=NAMESPACE,
            registry=r,
        )
        self._evicted_once = Counter(
            "evicted_workloads_once",
            "Workloads evicted, counted once per workload and (reason, underlying cause), per "
            "ClusterQueue and priority class.",
            ["cluster_queue", *_EVICTION_LABELS],
            namespace=NAMESPACE,
            registry=r,
        )
        self._pods_ready_to_evicted = Histogram(
            "pods_ready_to_evicted_time_seconds",
            "Time from the workload's pods being ready (PodsReady=True) to its eviction, per "
            "ClusterQueue, reason and underlying cause.",
            ["cluster_queue", "reason", "underlying_cause"],
            namespace=NAMESPACE,
            registry=r,
            buckets=_WAIT_BUCKETS,
        )
        self._eviction_latency = Histogram(
            "workload_eviction_latency_seconds",
            "Time from a workload's eviction (Evicted=True) until its quota was released (it is "
            "pending again), per ClusterQueue and reason.",
            ["cluster_queue", "reason"],
            namespace=NAMESPACE,
            registry=r,
            buckets=_WAIT_BUCKETS,
        )
        self._cq_info = Gauge(
            "cluster_queue_info",
            "Always 1; the labels place the ClusterQueue in its cohort tree (parent_cohort: its "
            "cohort, root_cohort: the root of that tree; empty without a cohort).",
            ["cluster_queue", "parent_cohort", "root_cohort"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._resource_pending = Gauge(
            "cluster_queue_resource_pending",
            "Requests of the ClusterQueue's pending workloads (not yet assigned flavors), per "
            "resource (cpu in cores, memory in bytes), summed when /metrics is scraped; with "
            "enableClusterQueueResources.",
            ["cluster_queue", "resource"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._creation_latency = Histogram(
            "workload_creation_latency_seconds",
            "Time from a job's creation to the creation of its Workload, per job kind.",
            ["job_kind"],
            namespace=NAMESPACE,
            registry=r,
            buckets=_ATTEMPT_BUCKETS,
        )
        self._cohort_info = Gauge(
            "cohort_info",
            "Always 1; the labels place the cohort in its tree (parent_cohort: empty for a root).",
            ["cohort", "parent_cohort", "root_cohort"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._cohort_quota = Gauge(
            "cohort_subtree_quota",
            "Quota of the cohort's subtree (its own and its members'), per flavor and resource.",
            ["cohort", "flavor", "resource"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._cohort_reservations = Gauge(
            "cohort_subtree_resource_reservations",
            "Quota reserved by the workloads of the cohort's subtree, per flavor and resource.",
            ["cohort", "flavor", "resource"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._cohort_admitted = Counter(
            "cohort_subtree_admitted_workloads",
            "Workloads admitted in the cohort's subtree, per priority class.",
            ["cohort", "priority_class"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._cohort_admitted_active = Gauge(
            "cohort_subtree_admitted_active_workloads",
            "Admitted workloads of the cohort's subtree that have not finished.",
            ["cohort"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._lq_metrics()
        self._preempted = Counter(
            "preempted_workloads",
            "Workloads preempted, per ClusterQueue of the preemptor and reason (InClusterQueue, "
            "InCohortReclamation, InCohortReclaimWhileBorrowing, InCohortFairSharing).",
            ["preempting_cluster_queue", "reason"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._slices_replaced = Counter(
            "replaced_workload_slices",
            "Workload slices finished because a scaled-up replacement was admitted.",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._nominal = self._resource_gauge(
            "cluster_queue_nominal_quota",
            "Nominal quota of a ClusterQueue, per flavor and resource.",
        )
        self._borrowing = self._resource_gauge(
            "cluster_queue_borrowing_limit",
            "Borrowing limit of a ClusterQueue, per flavor and resource (absent: unlimited).",
        )
        self._lending = self._resource_gauge(
            "cluster_queue_lending_limit",
            "Lending limit of a ClusterQueue, per flavor and resource (absent: unlimited).",
        )
        self._reservation = self._resource_gauge(
            "cluster_queue_resource_reservation",
            "Quota reserved by workloads of a ClusterQueue, per flavor and resource.",
        )
        self._usage = self._resource_gauge(
            "cluster_queue_resource_usage",
            "Quota used by admitted workloads of a ClusterQueue, per flavor and resource.",
        )
        self._cq_status = Gauge(
            "cluster_queue_status",
            "1 for the ClusterQueue's current status (pending, active, terminating), else 0.",
            ["cluster_queue", "status"],
            namespace=NAMESPACE,
            registry=r,
        )
        # Kueue's weighted-share gauges (fair sharing on): the precise share, +Inf for a weight
        # of 0 that borrows.
        self._cq_weighted_share = Gauge(
            "cluster_queue_weighted_share",
            "The ClusterQueue's weighted dominant resource share (fair sharing).",
            ["cluster_queue", "cohort"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._cohort_weighted_share = Gauge(
            "cohort_weighted_share",
            "The Cohort's weighted dominant resource share (fair sharing).",
            ["cohort"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._gate_removal = Histogram(
            "pod_scheduling_gate_removal_seconds",
            "Time from a workload's admission until the scheduling gate of one of its pods was "
            "removed, per gate name (kqueue.io/admission), ClusterQueue and whether the pod is "
            "in a pod group.",
            ["name", "cluster_queue", "is_group"],
            namespace=NAMESPACE,
            registry=r,
            buckets=_GATE_BUCKETS,
        )
        self._build_info = Gauge(
            "build_info",
            "Always 1; the labels tell the kqueue and Python versions.",
            ["version", "python"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._build_info.labels(__version__, platform.python_version()).set(1)
        self._operations_metrics()
        # Go's client exports a gauge and a counter of the same stem (finished_workloads and
        # finished_workloads_total); prometheus_client refuses that across two collectors, so
        # one collector serves both.
        r.register(_Together(self._finished_now, self._finished_total, *self._lq_finished_pair))
        # Label sets reported per ClusterQueue, so a deleted queue's series can be removed.
        self._resource_series: dict[str, set[tuple[str, ...]]] = {}
        # Every other labelled series of a queue (("cq", name) or ("lq", "ns/name")), for the
        # same reason.
        self._owned: dict[tuple[str, str], set[tuple[_Metric, tuple[str, ...]]]] = {}
        # Per LocalQueue: its ClusterQueue and how many of its finished Workloads exist.
        self._lq_finished: dict[LocalQueueKey, tuple[str, int]] = {}
        # (workload UID, reason, cause) already counted by evicted_workloads_once.
        self._evicted_once_seen: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        # The cluster_queue_info labels reported per ClusterQueue (they change with its cohort),
        # and the same for cohort_info.
        self._cq_info_labels: dict[str, tuple[str, str, str]] = {}
        self._cohort_info_labels: dict[str, tuple[str, str, str]] = {}
        # Per ClusterQueue: its cohorts, from its own up to the root, as last reported; a cohort
        # on no ClusterQueue's path any more loses its series.
        self._cq_cohorts: dict[str, list[str]] = {}
        # Per cohort: the (flavor, resource) of its subtree series.
        self._cohort_frs: dict[str, set[tuple[str, str]]] = {}
        # Per ClusterQueue with enableClusterQueueResources: the engine and covered resources
        # its pending requests are read from when /metrics is scraped.
        self._pending_sources: dict[str, tuple[Engine, set[str]]] = {}
        # LocalQueue resource series reported last time, to zero the ones no longer used.
        self._lq_resources: dict[LocalQueueKey, set[tuple[str, str]]] = {}

    def _lq_metrics(self) -> None:
        """Kueue's LocalQueue family: per LocalQueue (labels ``name``, ``namespace``)."""
        r = self.registry

        def lq(kind: type[_M], name: str, doc: str, labels: Iterable[str]) -> _M:
            full = f"local_queue_{name}"
            if kind is Histogram:
                return Histogram(  # type: ignore[return-value]
                    full, doc, list(labels), namespace=NAMESPACE, registry=r, buckets=_WAIT_BUCKETS
                )
            return kind(full, doc, list(labels), namespace=NAMESPACE, registry=r)

        self._lq_pending = lq(
            Gauge, "pending_workloads",
            "Pending workloads per LocalQueue: 'active' (in the ClusterQueue's queue, to be "
            "tried) or 'inadmissible' (parked until something changes, or the queue is not "
            "active).",
            (*_LQ, "status"),
        )
        # Kueue's local_queue_admission_fair_sharing_usage: what admission fair sharing orders
        # the LocalQueue by (+Inf for a weight of 0).
        self._lq_afs_usage = lq(
            Gauge, "admission_fair_sharing_usage",
            "The LocalQueue's admission fair sharing usage: the resource-weighted sum of its "
            "decayed consumed resources and pending entry penalties, divided by its weight.",
            (*_LQ, "cluster_queue"),
        )
        self._lq_reserving = lq(
            Gauge, "reserving_active_workloads",
            "Workloads of the LocalQueue holding quota.", _LQ,
        )
        self._lq_admitted_active = lq(
            Gauge, "admitted_active_workloads",
            "Admitted workloads of the LocalQueue that have not finished.", _LQ,
        )
        self._lq_reservation = lq(
            Gauge, "resource_reservation",
            "Quota reserved by workloads of the LocalQueue, per flavor and resource (cpu in "
            "cores, memory in bytes).",
            (*_LQ, "flavor", "resource"),
        )
        self._lq_usage = lq(
            Gauge, "resource_usage",
            "Quota used by admitted workloads of the LocalQueue, per flavor and resource.",
            (*_LQ, "flavor", "resource"),
        )
        self._lq_status = lq(
            Gauge, "status",
            "1 for the LocalQueue's Active condition status ('True', 'False', 'Unknown'), else 0.",
            (*_LQ, "active"),
        )
        self._lq_quota_reserved = lq(
            Counter, "quota_reserved_workloads",
            "Workloads of the LocalQueue that got quota reserved, per priority class.",
            _LQ_WORKLOAD_LABELS,
        )
        self._lq_quota_reserved_wait = lq(
            Histogram, "quota_reserved_wait_time_seconds",
            "Time from creation (or the last requeue) to quota reservation, per LocalQueue and "
            "priority class.",
            _LQ_WORKLOAD_LABELS,
        )
        self._lq_admitted = lq(
            Counter, "admitted_workloads",
            "Admitted workloads of the LocalQueue, per priority class.", _LQ_WORKLOAD_LABELS,
        )
        self._lq_admission_wait = lq(
            Histogram, "admission_wait_time_seconds",
            "Time from creation (or the last requeue) to admission, per LocalQueue and priority "
            "class.",
            _LQ_WORKLOAD_LABELS,
        )
        self._lq_ready_wait = lq(
            Histogram, "ready_wait_time_seconds",
            "Time from creation (or the last requeue) until the workload's pods were first ready "
            "after its admission, per LocalQueue and priority class.",
            _LQ_WORKLOAD_LABELS,
        )
        self._lq_admitted_until_ready = lq(
            Histogram, "admitted_until_ready_wait_time_seconds",
            "Time from admission until the workload's pods were first ready, per LocalQueue and "
            "priority class.",
            _LQ_WORKLOAD_LABELS,
        )
        self._lq_evicted = lq(
            Counter, "evicted_workloads",
            "Evicted workloads of the LocalQueue, per reason, underlying cause and priority class "
            "(values as kqueue_evicted_workloads_total).",
            (*_LQ, *_EVICTION_LABELS),
        )
        self._lq_execution_time = lq(
            Histogram, "execution_time_seconds",
            "Time a finished workload was admitted, over all its admissions, per LocalQueue and "
            "priority class.",
            _LQ_WORKLOAD_LABELS,
        )
        self._lq_finished_pair = (
            Gauge(
                "local_queue_finished_workloads",
                "Finished Workloads of the LocalQueue that still exist.",
                list(_LQ), namespace=NAMESPACE, registry=None,
            ),
            Counter(
                "local_queue_finished_workloads",
                "Workloads of the LocalQueue that finished (Finished=True), per priority class.",
                list(_LQ_WORKLOAD_LABELS), namespace=NAMESPACE, registry=None,
            ),
        )

    def _operations_metrics(self) -> None:
        """kqueue's own metrics beyond Kueue's (the alerts and dashboard of
        ``config/monitoring`` use them): webhook answers, leadership, the longest wait."""
        r = self.registry
        self._webhook_requests = Counter(
            "webhook_requests",
            "Admission requests answered by kqueue's webhooks, per webhook path and result: "
            "'allowed', 'denied' (the object was refused), 'error' (the request could not be "
            "read, or the handler failed or timed out; kqueue fails closed).",
            ["webhook", "result"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._webhook_latency = Histogram(
            "webhook_request_duration_seconds",
            "Time kqueue took to answer an admission request, per webhook path.",
            ["webhook"],
            namespace=NAMESPACE,
            registry=r,
            buckets=_ATTEMPT_BUCKETS,
        )
        self._leader = Gauge(
            "leader_election_master_status",
            "1 while this replica holds the leader-election Lease (and schedules), else 0; "
            "label name: the Lease.",
            ["name"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._oldest_pending = Gauge(
            "oldest_pending_workload_timestamp_seconds",
            "Unix time since which the longest-waiting pending workload of the ClusterQueue has "
            "waited: the time it is ordered by in the queue (its creation, or the eviction it "
            "was requeued after); no series while none is pending.",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._resync_repairs = Counter(
            "workload_resync_repairs",
            "Workloads on which the engine disagreed with the API server's Workload, found and "
            "repaired by the periodic resync, per engine state ('was') and the state the API "
            "implied ('now'). Stays 0 in a healthy process: any increase is a bug to report.",
            ["was", "now"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._resync_duration = Histogram(
            "workload_resync_duration_seconds",
            "Time one resync of the engine's workloads against the Workload store took.",
            [],
            namespace=NAMESPACE,
            registry=r,
            buckets=_ATTEMPT_BUCKETS,
        )
        # Per ClusterQueue: the engine whose queue is read when /metrics is scraped.
        self._queue_sources: dict[str, Engine] = {}

    def webhook_request(self, webhook: str, result: WebhookResult, duration_s: float) -> None:
        self._webhook_requests.labels(webhook, result).inc()
        self._webhook_latency.labels(webhook).observe(duration_s)

    def workload_resync(self, duration_s: float) -> None:
        self._resync_duration.observe(duration_s)

    def workload_resync_repaired(self, was: str, now: str) -> None:
        self._resync_repairs.labels(was, now).inc()

    def leader_status(self, lease: str, *, leading: bool) -> None:
        self._leader.labels(lease).set(1 if leading else 0)

    def _refresh_oldest_pending(self) -> None:
        for name, engine in sorted(self._queue_sources.items()):
            # The time each is ordered by in its queue: creation, or the eviction it was
            # requeued after (requeuingStrategy.timestamp), as Kueue orders.
            times = [
                info.order_time().timestamp()
                for info in engine.queued_in_order(ClusterQueueName(name))
            ]
            if times:
                self._child(("cq", name), self._oldest_pending, name).set(min(times))
            else:
                _remove(self._oldest_pending, (name,))

    def _resource_gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(name, doc, _RESOURCE_LABELS, namespace=NAMESPACE, registry=self.registry)

    # -- admission -----------------------------------------------------------------------------

    def admission_attempt(self, result: AdmissionResult, duration_s: float) -> None:
        self._admission_attempts.labels(result).inc()
        self._admission_attempt_duration.labels(result).observe(duration_s)

    def workload_admitted(self, wl: Workload | None, cluster_queue: str, wait_s: float) -> None:
        """Quota reserved and admitted (one step in kqueue: no admission checks), ``wait_s``
        after the workload was queued; per ClusterQueue and per its LocalQueue."""
        pc = priority_class(wl)
        cq = ("cq", cluster_queue)
        for counter, wait in (
            (self._quota_reserved, self._quota_reserved_wait),
            (self._admitted, self._admission_wait),
        ):
            self._child(cq, counter, cluster_queue, pc).inc()
            self._child(cq, wait, cluster_queue, pc).observe(wait_s)
        for cohort in self._cq_cohorts.get(cluster_queue, ()):
            self._child(("cohort", cohort), self._cohort_admitted, cohort, pc).inc()
        lq = workload_local_queue(wl)
        if lq is None:
            return
        owner = ("lq", lq[0] + "/" + lq[1])
        labels = (lq[1], lq[0], pc)
        for counter, wait in (
            (self._lq_quota_reserved, self._lq_quota_reserved_wait),
            (self._lq_admitted, self._lq_admission_wait),
        ):
            self._child(owner, counter, *labels).inc()
            self._child(owner, wait, *labels).observe(wait_s)

    def workload_evicted(self, wl: Workload | None, cluster_queue: str, reason: str) -> None:
        """An eviction written with Evicted reason ``reason`` (as kqueue writes it, e.g.
        ``DeactivatedDueToMaximumExecutionTimeExceeded``, exported as Kueue labels it:
        reason ``Deactivated``, underlying cause ``MaximumExecutionTimeExceeded``)."""
        label, cause = eviction_labels(wl, reason)
        pc = priority_class(wl)
        self._child(("cq", cluster_queue), self._evicted, cluster_queue, label, cause, pc).inc()
        ran_s = ready_until_evicted_s(wl)
        if ran_s is not None:
            self._child(
                ("cq", cluster_queue), self._pods_ready_to_evicted, cluster_queue, label, cause
            ).observe(ran_s)
        lq = workload_local_queue(wl)
        if lq is not None:
            owner = ("lq", lq[0] + "/" + lq[1])
            self._child(owner, self._lq_evicted, lq[1], lq[0], label, cause, pc).inc()
        if wl is None or not wl.metadata.uid:
            return
        seen = (wl.metadata.uid, label, cause)
        if seen in self._evicted_once_seen:
            self._evicted_once_seen.move_to_end(seen)
            return
        self._evicted_once_seen[seen] = None
        if len(self._evicted_once_seen) > _EVICTED_ONCE_MEMORY:
            self._evicted_once_seen.popitem(last=False)
        self._child(
            ("cq", cluster_queue), self._evicted_once, cluster_queue, label, cause, pc
        ).inc()

    def workload_created(self, job_kind: str, job: Mapping[str, Any], created: Mapping[str, Any]) -> None:
        """The Workload ``created`` (the API's answer) was made for ``job`` (a ``job_kind``):
        observes the time between their creation timestamps, for a job's first generation only
        (a job changed since, e.g. resumed by its user, would count that wait too), as Kueue."""
        meta = job.get("metadata") or {}
        if int(meta.get("generation") or 1) > 1:
            return
        job_created = api_timestamp(meta.get("creationTimestamp"))
        wl_created = api_timestamp((created.get("metadata") or {}).get("creationTimestamp"))
        if job_created is None or wl_created is None:
            return
        latency = max((wl_created - job_created).total_seconds(), 0.0)
        self._creation_latency.labels(job_kind).observe(latency)

    def preemption_skips(self, skips: Iterable[tuple[str, int]]) -> None:
        """A cycle's preemption skips per ClusterQueue it processed (``CycleResult``)."""
        for cluster_queue, count in skips:
            self._child(("cq", cluster_queue), self._preemption_skips, cluster_queue).set(count)

    def pods_ready(self, wl: Workload, now: datetime) -> None:
        """``wl`` (as it was before) is now written PodsReady=True at ``now``: the first time
        since its admission (not a recovery), the time-to-ready histograms observe it."""
        admission = wl.status.admission
        admitted = admitted_at(wl)
        if admission is None or admitted is None:
            return
        before = wl.condition(c.PODS_READY)
        if (
            before is not None
            and before.last_transition_time is not None
            and before.last_transition_time >= admitted
            and (before.is_true or before.reason == WAIT_FOR_RECOVERY)
        ):
            return  # ready before in this admission: a recovery, not a start
        queued = queued_since(wl) or admitted
        ready_s = max((now - queued).total_seconds(), 0.0)
        admitted_s = max((now - admitted).total_seconds(), 0.0)
        cluster_queue = admission.cluster_queue
        pc = priority_class(wl)
        self._child(("cq", cluster_queue), self._ready_wait, cluster_queue, pc).observe(ready_s)
        self._child(
            ("cq", cluster_queue), self._admitted_until_ready, cluster_queue, pc
        ).observe(admitted_s)
        lq = workload_local_queue(wl)
        if lq is not None:
            owner = ("lq", lq[0] + "/" + lq[1])
            self._child(owner, self._lq_ready_wait, lq[1], lq[0], pc).observe(ready_s)
            self._child(
                owner, self._lq_admitted_until_ready, lq[1], lq[0], pc
            ).observe(admitted_s)

    def workload_changed(self, old: Workload | None, new: Workload) -> None:
        """A Workload event (the leader's informer): counts the workload once when it finishes,
        with its execution time when it was admitted; times an evicted workload's release."""
        if old is not None and old.status.admission is not None and new.status.admission is None:
            self._released(old, new)
        if not new.is_finished or (old is not None and old.is_finished):
            return
        done = new.condition(c.FINISHED)
        if done is not None and done.reason == c.WORKLOAD_SLICE_REPLACED:
            return  # its replacement runs on: counted by replaced_workload_slices_total
        pc = priority_class(new)
        execution_s = execution_time_s(new)
        if new.status.admission is not None:
            cluster_queue = new.status.admission.cluster_queue
            self._child(("cq", cluster_queue), self._finished_total, cluster_queue, pc).inc()
            if execution_s is not None:
                self._child(
                    ("cq", cluster_queue), self._execution_time, cluster_queue, pc
                ).observe(execution_s)
        lq = workload_local_queue(new)
        if lq is None:
            return
        owner = ("lq", lq[0] + "/" + lq[1])
        self._child(owner, self._lq_finished_pair[1], lq[1], lq[0], pc).inc()
        if execution_s is not None:
            self._child(owner, self._lq_execution_time, lq[1], lq[0], pc).observe(execution_s)

    def workload_preempted(self, preempting_cluster_queue: str, reason: str) -> None:
        self._preempted.labels(preempting_cluster_queue, reason).inc()

    def slice_replaced(self, cluster_queue: str) -> None:
        self._slices_replaced.labels(cluster_queue).inc()

    def gate_removal(
        self, duration_s: float, *, cluster_queue: str = "", is_group: bool = False
    ) -> None:
        """A pod released ``duration_s`` after its workload's admission in ``cluster_queue``."""
        labels = (c.ADMISSION_GATE, cluster_queue, "true" if is_group else "false")
        self._child(("cq", cluster_queue), self._gate_removal, *labels).observe(duration_s)

    # -- ClusterQueue state --------------------------------------------------------------------

    def report_pending(
        self, cluster_queue: str, active: int, inadmissible: int, *, queue_active: bool = True
    ) -> None:
        """Pending workloads; all 'inadmissible' while the ClusterQueue is not active (Kueue)."""
        if not queue_active:
            active, inadmissible = 0, active + inadmissible
        self._pending.labels(cluster_queue, "active").set(active)
        self._pending.labels(cluster_queue, "inadmissible").set(inadmissible)

    def report_active_workloads(self, cluster_queue: str, reserving: int, admitted: int) -> None:
        self._reserving_active.labels(cluster_queue).set(reserving)
        self._admitted_active.labels(cluster_queue).set(admitted)

    def report_cluster_queue_status(self, cluster_queue: str, status: ClusterQueueStatus) -> None:
        for candidate in CLUSTER_QUEUE_STATUSES:
            self._cq_status.labels(cluster_queue, candidate).set(1 if candidate == status else 0)

    def report_cluster_queue_quotas(
        self,
        *,
        cohort: str | None,
        cluster_queue: str,
        flavor: str,
        resource: str,
        nominal: int,
        borrowing_limit: int | None,
        lending_limit: int | None,
    ) -> None:
        """Quotas in kqueue's exact units; a limit of None (unlimited) has no series."""
        labels = (cohort or "", cluster_queue, flavor, resource)
        self._track(cluster_queue, labels)
        self._nominal.labels(*labels).set(to_prometheus_value(nominal, resource))
        for gauge, limit in ((self._borrowing, borrowing_limit), (self._lending, lending_limit)):
            if limit is None:
                _remove(gauge, labels)
            else:
                gauge.labels(*labels).set(to_prometheus_value(limit, resource))

    def report_cluster_queue_usage(
        self,
        *,
        cohort: str | None,
        cluster_queue: str,
        flavor: str,
        resource: str,
        reserved: int,
        used: int,
    ) -> None:
        """Quota reserved (all workloads holding quota) and used (admitted ones), exact units."""
        labels = (cohort or "", cluster_queue, flavor, resource)
        self._track(cluster_queue, labels)
        self._reservation.labels(*labels).set(to_prometheus_value(reserved, resource))
        self._usage.labels(*labels).set(to_prometheus_value(used, resource))

    def report_cluster_queue_weighted_share(
        self, cluster_queue: str, cohort: str, share: float
    ) -> None:
        self._child(("cq", cluster_queue), self._cq_weighted_share, cluster_queue, cohort).set(share)

    def report_local_queue_admission_fair_sharing_usage(
        self, lq: LocalQueue, cluster_queue: str, usage: float
    ) -> None:
        key = local_queue_key(lq.namespace or "default", lq.name)
        self._child(
            ("lq", key), self._lq_afs_usage, lq.name, lq.namespace or "default", cluster_queue
        ).set(usage)

    def report_cohort_weighted_share(self, cohort: str, share: float) -> None:
        self._cohort_weighted_share.labels(cohort).set(share)

    def forget_cohort(self, cohort: str) -> None:
        _remove(self._cohort_weighted_share, (cohort,))

    def _released(self, old: Workload, new: Workload) -> None:
        evicted = new.condition(c.EVICTED)
        released = new.condition(c.QUOTA_RESERVED)
        if (
            old.status.admission is None
            or evicted is None
            or not evicted.is_true
            or evicted.last_transition_time is None
            or released is None
            or released.is_true
            or released.last_transition_time is None
        ):
            return
        cluster_queue = old.status.admission.cluster_queue
        latency = (released.last_transition_time - evicted.last_transition_time).total_seconds()
        label = eviction_labels(old, evicted.reason)[0]
        self._child(
            ("cq", cluster_queue), self._eviction_latency, cluster_queue, label
        ).observe(max(latency, 0.0))

    def report_cluster_queue(self, cq: ClusterQueue, engine: Engine, *, resources: bool) -> None:
        """Where the ClusterQueue sits in its cohort tree, and (``resources``:
        enableClusterQueueResources) the requests of its pending workloads per resource."""
        name = cq.name
        cohort = cq.spec.cohort_name
        root = engine.root_cohort(CohortName(cohort)) if cohort else None
        labels = (name, cohort or "", root or "")
        before = self._cq_info_labels.get(name)
        if before is not None and before != labels:
            _remove(self._cq_info, before)
            self._drop_other_cohorts(name, cohort or "")
        self._cq_info_labels[name] = labels
        self._child(("cq", name), self._cq_info, *labels).set(1)
        self._report_cohorts(name, engine)
        self._queue_sources[name] = engine
        if not resources:
            self._pending_sources.pop(name, None)
            return
        # Summing every pending workload's requests costs milliseconds per thousand workloads:
        # done when /metrics is scraped, not on every status update.
        covered = {str(r) for rg in cq.spec.resource_groups for r in rg.covered_resources}
        self._pending_sources[name] = (engine, covered)

    def _refresh_pending_resources(self) -> None:
        for name, (engine, covered) in sorted(self._pending_sources.items()):
            pending = engine.pending_requests(ClusterQueueName(name))
            for resource in sorted(covered | set(pending)):
                value = to_prometheus_value(pending.get(ResourceName(resource), 0), resource)
                self._child(("cq", name), self._resource_pending, name, resource).set(value)

    def _drop_other_cohorts(self, cluster_queue: str, cohort: str) -> None:
        """The per-flavor series of a ClusterQueue that moved to another cohort: those labelled
        with the old one go (Kueue clears them on such a change too)."""
        series = self._resource_series.get(cluster_queue, set())
        for labels in sorted(x for x in series if x[0] != cohort):
            series.discard(labels)
            for gauge in (
                self._nominal, self._borrowing, self._lending, self._reservation, self._usage
            ):
                _remove(gauge, labels)

    def _report_cohorts(self, cluster_queue: str, engine: Engine) -> None:
        """The cohorts above ``cluster_queue``: their place, subtree quota and reservations (a
        zero has no series, as Kueue's), and admitted workloads."""
        path = engine.cohorts_above(ClusterQueueName(cluster_queue))
        self._cq_cohorts[cluster_queue] = [co.name for co in path]
        root = path[-1].name if path else ""
        for co in path:
            owner = ("cohort", co.name)
            labels = (co.name, co.parent or "", root)
            before = self._cohort_info_labels.get(co.name)
            if before is not None and before != labels:
                _remove(self._cohort_info, before)
            self._cohort_info_labels[co.name] = labels
            self._child(owner, self._cohort_info, *labels).set(1)
            members = co.cluster_queues
            reserved: dict[tuple[str, str], int] = {}
            admitted = 0
            for member in members:
                admitted += engine.reserving_count(member)
                for used, amount in engine.usage(member).items():
                    reserved[used] = reserved.get(used, 0) + amount
            self._child(owner, self._cohort_admitted_active, co.name).set(admitted)
            quota: dict[tuple[str, str], int] = {
                (f, r): amount for (f, r), amount in co.subtree_quota.items()
            }
            frs = self._cohort_frs.setdefault(co.name, set())
            frs |= set(quota) | set(reserved)
            for key in sorted(frs):
                for gauge, amounts in (
                    (self._cohort_quota, quota), (self._cohort_reservations, reserved)
                ):
                    amount = amounts.get(key, 0)
                    if amount > 0:
                        value = to_prometheus_value(amount, key[1])
                        self._child(owner, gauge, co.name, *key).set(value)
                    else:
                        _remove(gauge, (co.name, *key))
        self._sweep_cohorts()

    def _sweep_cohorts(self) -> None:
        alive = {co for path in self._cq_cohorts.values() for co in path}
        for cohort in sorted(set(self._cohort_frs) - alive):
            self._forget(("cohort", cohort))
            self._cohort_frs.pop(cohort, None)
            self._cohort_info_labels.pop(cohort, None)

    # -- LocalQueue state ----------------------------------------------------------------------

    def report_local_queue(
        self, lq: LocalQueue, active: str, workloads: Iterable[Workload], engine: Engine
    ) -> None:
        """A LocalQueue's gauges from its Workloads (all that name it) and the engine: pending
        (as Kueue: all 'inadmissible' while the queue is not active), reserving and admitted
        counts, quota per flavor and resource, finished Workloads, and its Active status."""
        key = local_queue_key(lq.namespace or "default", lq.name)
        owner = ("lq", key)
        name, namespace = lq.name, lq.namespace or "default"
        pending, parked = engine.local_queue_pending_counts(key)
        if active != "True":
            pending, parked = 0, pending + parked
        self._child(owner, self._lq_pending, name, namespace, "active").set(pending)
        self._child(owner, self._lq_pending, name, namespace, "inadmissible").set(parked)
        holding = 0
        finished = 0
        usage: dict[tuple[str, str], int] = {}
        for wl in workloads:
            if wl.is_finished:
                finished += 1
                continue
            aw = engine.admitted_workload(WorkloadKey(wl.key))
            if aw is None or aw.info.local_queue != key:
                continue
            holding += 1
            for (flavor, resource), amount in aw.usage.items():
                usage[(flavor, resource)] = usage.get((flavor, resource), 0) + amount
        self._child(owner, self._lq_reserving, name, namespace).set(holding)
        self._child(owner, self._lq_admitted_active, name, namespace).set(holding)
        # A flavor no longer used reads 0 rather than vanishing from the graphs.
        reported = self._lq_resources.setdefault(key, set())
        reported |= set(usage)
        for fr in sorted(reported):
            value = to_prometheus_value(usage.get(fr, 0), fr[1])
            for gauge in (self._lq_reservation, self._lq_usage):
                self._child(owner, gauge, name, namespace, *fr).set(value)
        for candidate in LOCAL_QUEUE_ACTIVE_VALUES:
            self._child(owner, self._lq_status, name, namespace, candidate).set(
                1 if candidate == active else 0
            )
        self._child(owner, self._lq_finished_pair[0], name, namespace).set(finished)
        before = self._lq_finished.get(key)
        self._lq_finished[key] = (lq.spec.cluster_queue or "", finished)
        self._report_finished_now({lq.spec.cluster_queue or ""} | ({before[0]} if before else set()))

    def forget_local_queue(self, key: str) -> None:
        """Remove every series of a deleted LocalQueue (``namespace/name``)."""
        self._forget(("lq", key))
        self._lq_resources.pop(LocalQueueKey(key), None)
        before = self._lq_finished.pop(LocalQueueKey(key), None)
        if before is not None:
            self._report_finished_now({before[0]})

    def _report_finished_now(self, cluster_queues: set[str]) -> None:
        for cq in sorted(cluster_queues - {""}):
            total = sum(n for owner, n in self._lq_finished.values() if owner == cq)
            self._child(("cq", cq), self._finished_now, cq).set(total)

    def _child(self, owner: tuple[str, str], metric: _M, *labels: str) -> _M:
        self._owned.setdefault(owner, set()).add((metric, labels))
        return metric.labels(*labels)

    def _forget(self, owner: tuple[str, str]) -> None:
        for metric, labels in self._owned.pop(owner, set()):
            with contextlib.suppress(KeyError):
                metric.remove(*labels)

    def forget_cluster_queue(self, cluster_queue: str) -> None:
        """Remove every series of a deleted ClusterQueue (otherwise they would linger)."""
        self._forget(("cq", cluster_queue))
        self._cq_info_labels.pop(cluster_queue, None)
        self._pending_sources.pop(cluster_queue, None)
        self._queue_sources.pop(cluster_queue, None)
        if self._cq_cohorts.pop(cluster_queue, None) is not None:
            self._sweep_cohorts()
        for labels in self._resource_series.pop(cluster_queue, set()):
            for gauge in (
                self._nominal,
                self._borrowing,
                self._lending,
                self._reservation,
                self._usage,
            ):
                _remove(gauge, labels)
        for status in ("active", "inadmissible"):
            _remove(self._pending, (cluster_queue, status))
        for status in CLUSTER_QUEUE_STATUSES:
            _remove(self._cq_status, (cluster_queue, status))
        for gauge in (self._reserving_active, self._admitted_active):
            _remove(gauge, (cluster_queue,))

    def _track(self, cluster_queue: str, labels: tuple[str, ...]) -> None:
        self._resource_series.setdefault(cluster_queue, set()).add(labels)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        self._refresh_pending_resources()
        self._refresh_oldest_pending()
        return generate_latest(self.registry)


def _remove(metric: Gauge, labels: tuple[str, ...]) -> None:
    with contextlib.suppress(KeyError):  # never reported: nothing to remove
        metric.remove(*labels)


_Metric = Counter | Gauge | Histogram


class _Together:
    """One collector for metrics registered with ``registry=None``."""

    def __init__(self, *metrics: _Metric) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        for m in self._metrics:
            yield from m.collect()


def metrics_app(metrics: Metrics) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        return web.Response(
            body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/metrics", handle)
    return app


# The process-wide metrics; reconcilers call e.g. ``metrics.admission_attempt(...)``.
DEFAULT = Metrics()
admission_attempt = DEFAULT.admission_attempt
workload_admitted = DEFAULT.workload_admitted
workload_evicted = DEFAULT.workload_evicted
workload_preempted = DEFAULT.workload_preempted
slice_replaced = DEFAULT.slice_replaced
gate_removal = DEFAULT.gate_removal
report_pending = DEFAULT.report_pending
report_active_workloads = DEFAULT.report_active_workloads
report_cluster_queue_status = DEFAULT.report_cluster_queue_status
report_cluster_queue_quotas = DEFAULT.report_cluster_queue_quotas
report_cluster_queue_usage = DEFAULT.report_cluster_queue_usage
forget_cluster_queue = DEFAULT.forget_cluster_queue
preemption_skips = DEFAULT.preemption_skips
pods_ready = DEFAULT.pods_ready
workload_changed = DEFAULT.workload_changed
workload_created = DEFAULT.workload_created
report_local_queue = DEFAULT.report_local_queue
report_cluster_queue = DEFAULT.report_cluster_queue
forget_local_queue = DEFAULT.forget_local_queue
