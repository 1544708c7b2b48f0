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
from kqueue.controller.metric_table import METRICS
from kqueue.controller.probes import Probes as Probes
from kqueue.controller.probes import health_app as health_app
from kqueue.controller.probes import serve_app as serve_app
from kqueue.controller.workload_status import queued_since
from kqueue.engine.cycle import Deferred
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

# Kueue's Go client exports no "<name>_created" series; keep the exposition the same shape
# (process-wide, but this module is only imported by the controller).
disable_created_metrics()  # type: ignore[no-untyped-call]

AdmissionResult = Literal["success", "inadmissible"]
PendingStatus = Literal["active", "inadmissible"]
ClusterQueueStatus = Literal["pending", "active", "terminating"]
WebhookResult = Literal["allowed", "denied", "error"]
CLUSTER_QUEUE_STATUSES: tuple[ClusterQueueStatus, ...] = ("pending", "active", "terminating")

LOCAL_QUEUE_ACTIVE_VALUES = ("True", "False", "Unknown")

# The per-flavor gauges of a ClusterQueue, removed together when it leaves a cohort or goes.
_CQ_RESOURCE_GAUGES = (
    "cluster_queue_nominal_quota",
    "cluster_queue_borrowing_limit",
    "cluster_queue_lending_limit",
    "cluster_queue_resource_reservation",
    "cluster_queue_resource_usage",
)

# Workloads whose first eviction per (reason, cause) was counted by evicted_workloads_once_total;
# bounded, as the record lives only in memory (Kueue keeps it in status.schedulingStats).
_EVICTED_ONCE_MEMORY = 100_000

_M = TypeVar("_M", Counter, Gauge, Histogram)
_Metric = Counter | Gauge | Histogram


def to_prometheus_value(amount: int, resource: str) -> float:
    """An exact kqueue amount as a Prometheus number in Kubernetes base units (cpu in cores)."""
    return amount / 1000 if is_milli(resource) else float(amount)


class Metrics:
    """kqueue's metrics in their own registry (so tests and embedders get a clean slate), built
    from the table :data:`~kqueue.controller.metric_table.METRICS`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        # The table's metrics by name, one mapping per kind: a counter and a gauge may share a
        # name (finished_workloads, as Kueue's).
        self._counter: dict[str, Counter] = {}
        self._gauge: dict[str, Gauge] = {}
        self._histogram: dict[str, Histogram] = {}
        stems: dict[str, list[_Metric]] = {}
        for spec in METRICS:
            metric = spec.build()
            if isinstance(metric, Counter):
                self._counter[spec.name] = metric
            elif isinstance(metric, Gauge):
                self._gauge[spec.name] = metric
            else:
                self._histogram[spec.name] = metric
            stems.setdefault(spec.name, []).append(metric)
        # Go's client exports a gauge and a counter of the same stem (finished_workloads and
        # finished_workloads_total); prometheus_client refuses that across two collectors, so
        # one collector serves both.
        for together in stems.values():
            self.registry.register(together[0] if len(together) == 1 else _Together(*together))
        self._gauge["build_info"].labels(__version__, platform.python_version()).set(1)
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
        # Per ClusterQueue: the engine whose queue is read when /metrics is scraped.
        self._queue_sources: dict[str, Engine] = {}

    def webhook_request(self, webhook: str, result: WebhookResult, duration_s: float) -> None:
        self._counter["webhook_requests"].labels(webhook, result).inc()
        self._histogram["webhook_request_duration_seconds"].labels(webhook).observe(duration_s)

    def start_prediction_error(self, cluster_queue: str, error_s: float) -> None:
        """A workload was admitted ``error_s`` after (negative: before) its predicted start."""
        direction = "late" if error_s > 0 else "early"
        metric = self._histogram["start_prediction_error_seconds"]
        self._child(("cq", cluster_queue), metric, cluster_queue, direction).observe(abs(error_s))

    def workload_resync(self, duration_s: float) -> None:
        self._histogram["workload_resync_duration_seconds"].observe(duration_s)

    def workload_resync_repaired(self, was: str, now: str) -> None:
        self._counter["workload_resync_repairs"].labels(was, now).inc()

    def leader_status(self, lease: str, *, leading: bool) -> None:
        self._gauge["leader_election_master_status"].labels(lease).set(1 if leading else 0)

    def _refresh_oldest_pending(self) -> None:
        oldest = self._gauge["oldest_pending_workload_timestamp_seconds"]
        for name, engine in sorted(self._queue_sources.items()):
            # The time each is ordered by in its queue: creation, or the eviction it was
            # requeued after (requeuingStrategy.timestamp), as Kueue orders.
            times = [
                info.order_time().timestamp()
                for info in engine.queued_in_order(ClusterQueueName(name))
            ]
            if times:
                self._child(("cq", name), oldest, name).set(min(times))
            else:
                _remove(oldest, (name,))

    # -- admission -----------------------------------------------------------------------------

    def admission_attempt(self, result: AdmissionResult, duration_s: float) -> None:
        self._counter["admission_attempts"].labels(result).inc()
        self._histogram["admission_attempt_duration_seconds"].labels(result).observe(duration_s)

    def workload_admitted(
        self, wl: Workload | None, cluster_queue: str, wait_s: float, *, admitted: bool = True
    ) -> None:
        """Quota reserved ``wait_s`` after the workload was queued, and admitted in the same step
        unless it waits for admission checks (``admitted`` False: :meth:`checks_passed` counts
        the admission); per ClusterQueue and per its LocalQueue."""
        pc = priority_class(wl)
        cq = ("cq", cluster_queue)
        steps = [("quota_reserved_workloads", "quota_reserved_wait_time_seconds")]
        if admitted:
            steps.append(("admitted_workloads", "admission_wait_time_seconds"))
        for counter, wait in steps:
            self._child(cq, self._counter[counter], cluster_queue, pc).inc()
            self._child(cq, self._histogram[wait], cluster_queue, pc).observe(wait_s)
        if admitted:
            self._cohorts_admitted(cluster_queue, pc)
        lq = workload_local_queue(wl)
        if lq is None:
            return
        owner = ("lq", lq[0] + "/" + lq[1])
        labels = (lq[1], lq[0], pc)
        lq_steps = [("local_queue_quota_reserved_workloads",
                     "local_queue_quota_reserved_wait_time_seconds")]
        if admitted:
            lq_steps.append(
                ("local_queue_admitted_workloads", "local_queue_admission_wait_time_seconds")
            )
        for counter, wait in lq_steps:
            self._child(owner, self._counter[counter], *labels).inc()
            self._child(owner, self._histogram[wait], *labels).observe(wait_s)

    def _cohorts_admitted(self, cluster_queue: str, pc: str) -> None:
        for cohort in self._cq_cohorts.get(cluster_queue, ()):
            subtree = self._counter["cohort_subtree_admitted_workloads"]
            self._child(("cohort", cohort), subtree, cohort, pc).inc()

    def checks_passed(self, wl: Workload) -> None:
        """A workload that waited for admission checks became Admitted: the admission, and the
        time from its quota reservation (Kueue's admission_checks_wait_time_seconds)."""
        adm, admitted = wl.status.admission, wl.condition(c.ADMITTED)
        reserved = wl.quota_reserved_at
        if adm is None or admitted is None or reserved is None:
            return
        checks_s = max((admitted.last_transition_time - reserved).total_seconds(), 0.0)
        queued = queued_since(wl)
        wait_s = max((admitted.last_transition_time - (queued or reserved)).total_seconds(), 0.0)
        pc = priority_class(wl)
        cluster_queue = adm.cluster_queue
        cq = ("cq", cluster_queue)
        self._child(cq, self._counter["admitted_workloads"], cluster_queue, pc).inc()
        self._child(cq, self._histogram["admission_wait_time_seconds"], cluster_queue, pc).observe(
            wait_s
        )
        waited = self._histogram["admission_checks_wait_time_seconds"]
        self._child(cq, waited, cluster_queue, pc).observe(checks_s)
        self._cohorts_admitted(cluster_queue, pc)
        lq = workload_local_queue(wl)
        if lq is None:
            return
        owner = ("lq", lq[0] + "/" + lq[1])
        labels = (lq[1], lq[0], pc)
        self._child(owner, self._counter["local_queue_admitted_workloads"], *labels).inc()
        self._child(
            owner, self._histogram["local_queue_admission_wait_time_seconds"], *labels
        ).observe(wait_s)
        self._child(
            owner, self._histogram["local_queue_admission_checks_wait_time_seconds"], *labels
        ).observe(checks_s)

    def workload_evicted(self, wl: Workload | None, cluster_queue: str, reason: str) -> None:
        """An eviction written with Evicted reason ``reason`` (as kqueue writes it, e.g.
        ``DeactivatedDueToMaximumExecutionTimeExceeded``, exported as Kueue labels it:
        reason ``Deactivated``, underlying cause ``MaximumExecutionTimeExceeded``)."""
        label, cause = eviction_labels(wl, reason)
        pc = priority_class(wl)
        cq = ("cq", cluster_queue)
        self._child(cq, self._counter["evicted_workloads"], cluster_queue, label, cause, pc).inc()
        ran_s = ready_until_evicted_s(wl)
        if ran_s is not None:
            ran = self._histogram["pods_ready_to_evicted_time_seconds"]
            self._child(cq, ran, cluster_queue, label, cause).observe(ran_s)
        lq = workload_local_queue(wl)
        if lq is not None:
            owner = ("lq", lq[0] + "/" + lq[1])
            evicted = self._counter["local_queue_evicted_workloads"]
            self._child(owner, evicted, lq[1], lq[0], label, cause, pc).inc()
        if wl is None or not wl.metadata.uid:
            return
        seen = (wl.metadata.uid, label, cause)
        if seen in self._evicted_once_seen:
            self._evicted_once_seen.move_to_end(seen)
            return
        self._evicted_once_seen[seen] = None
        if len(self._evicted_once_seen) > _EVICTED_ONCE_MEMORY:
            self._evicted_once_seen.popitem(last=False)
        once = self._counter["evicted_workloads_once"]
        self._child(cq, once, cluster_queue, label, cause, pc).inc()

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
        self._histogram["workload_creation_latency_seconds"].labels(job_kind).observe(latency)

    def preemption_skips(self, skips: Iterable[tuple[str, int]]) -> None:
        """A cycle's preemption skips per ClusterQueue it processed (``CycleResult``)."""
        for cluster_queue, count in skips:
            gauge = self._gauge["admission_cycle_preemption_skips"]
            self._child(("cq", cluster_queue), gauge, cluster_queue).set(count)

    def protection_deferred(self, deferred: Iterable[Deferred]) -> None:
        """A cycle's preemptors that wait for a preemption protection (``CycleResult``)."""
        counter = self._counter["preemptions_deferred_by_protection"]
        for d in deferred:
            self._child(("cq", d.cluster_queue), counter, d.cluster_queue).inc()

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
        cq = ("cq", cluster_queue)
        h = self._histogram
        self._child(cq, h["ready_wait_time_seconds"], cluster_queue, pc).observe(ready_s)
        self._child(
            cq, h["admitted_until_ready_wait_time_seconds"], cluster_queue, pc
        ).observe(admitted_s)
        lq = workload_local_queue(wl)
        if lq is not None:
            owner = ("lq", lq[0] + "/" + lq[1])
            self._child(
                owner, h["local_queue_ready_wait_time_seconds"], lq[1], lq[0], pc
            ).observe(ready_s)
            self._child(
                owner, h["local_queue_admitted_until_ready_wait_time_seconds"], lq[1], lq[0], pc
            ).observe(admitted_s)

    def workload_changed(self, old: Workload | None, new: Workload) -> None:
        """A Workload event (the leader's informer): counts the workload once when it finishes,
        with its execution time when it was admitted; times an evicted workload's release."""
        if old is not None and old.status.admission is not None and new.status.admission is None:
            self._released(old, new)
        if (
            new.status.admission_checks and new.is_admitted
            and old is not None and not old.is_admitted
        ):
            self.checks_passed(new)
        if not new.is_finished or (old is not None and old.is_finished):
            return
        done = new.condition(c.FINISHED)
        if done is not None and done.reason == c.WORKLOAD_SLICE_REPLACED:
            return  # its replacement runs on: counted by replaced_workload_slices_total
        pc = priority_class(new)
        execution_s = execution_time_s(new)
        if new.status.admission is not None:
            cluster_queue = new.status.admission.cluster_queue
            cq = ("cq", cluster_queue)
            self._child(cq, self._counter["finished_workloads"], cluster_queue, pc).inc()
            if execution_s is not None:
                executed = self._histogram["execution_time_seconds"]
                self._child(cq, executed, cluster_queue, pc).observe(execution_s)
        lq = workload_local_queue(new)
        if lq is None:
            return
        owner = ("lq", lq[0] + "/" + lq[1])
        finished = self._counter["local_queue_finished_workloads"]
        self._child(owner, finished, lq[1], lq[0], pc).inc()
        if execution_s is not None:
            executed = self._histogram["local_queue_execution_time_seconds"]
            self._child(owner, executed, lq[1], lq[0], pc).observe(execution_s)

    def workload_preempted(self, preempting_cluster_queue: str, reason: str) -> None:
        self._counter["preempted_workloads"].labels(preempting_cluster_queue, reason).inc()

    def slice_replaced(self, cluster_queue: str) -> None:
        self._counter["replaced_workload_slices"].labels(cluster_queue).inc()

    def multikueue_dispatched(self, cluster_queue: str, cluster: str) -> None:
        counter = self._counter["multikueue_workloads_dispatched"]
        self._child(("cq", cluster_queue), counter, cluster_queue, cluster).inc()

    def multikueue_admitted(self, cluster_queue: str, cluster: str) -> None:
        counter = self._counter["multikueue_workloads_admitted"]
        self._child(("cq", cluster_queue), counter, cluster_queue, cluster).inc()

    def gate_removal(
        self, duration_s: float, *, cluster_queue: str = "", is_group: bool = False
    ) -> None:
        """A pod released ``duration_s`` after its workload's admission in ``cluster_queue``."""
        labels = (c.ADMISSION_GATE, cluster_queue, "true" if is_group else "false")
        removal = self._histogram["pod_scheduling_gate_removal_seconds"]
        self._child(("cq", cluster_queue), removal, *labels).observe(duration_s)

    # -- ClusterQueue state --------------------------------------------------------------------

    def report_pending(
        self, cluster_queue: str, active: int, inadmissible: int, *, queue_active: bool = True
    ) -> None:
        """Pending workloads; all 'inadmissible' while the ClusterQueue is not active (Kueue)."""
        if not queue_active:
            active, inadmissible = 0, active + inadmissible
        self._gauge["pending_workloads"].labels(cluster_queue, "active").set(active)
        self._gauge["pending_workloads"].labels(cluster_queue, "inadmissible").set(inadmissible)

    def report_active_workloads(self, cluster_queue: str, reserving: int, admitted: int) -> None:
        self._gauge["reserving_active_workloads"].labels(cluster_queue).set(reserving)
        self._gauge["admitted_active_workloads"].labels(cluster_queue).set(admitted)

    def report_cluster_queue_status(self, cluster_queue: str, status: ClusterQueueStatus) -> None:
        gauge = self._gauge["cluster_queue_status"]
        for candidate in CLUSTER_QUEUE_STATUSES:
            gauge.labels(cluster_queue, candidate).set(1 if candidate == status else 0)

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
        nominal_quota = self._gauge["cluster_queue_nominal_quota"]
        nominal_quota.labels(*labels).set(to_prometheus_value(nominal, resource))
        for gauge, limit in (
            (self._gauge["cluster_queue_borrowing_limit"], borrowing_limit),
            (self._gauge["cluster_queue_lending_limit"], lending_limit),
        ):
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
        for gauge, amount in (
            (self._gauge["cluster_queue_resource_reservation"], reserved),
            (self._gauge["cluster_queue_resource_usage"], used),
        ):
            gauge.labels(*labels).set(to_prometheus_value(amount, resource))

    def report_cluster_queue_weighted_share(
        self, cluster_queue: str, cohort: str, share: float
    ) -> None:
        gauge = self._gauge["cluster_queue_weighted_share"]
        self._child(("cq", cluster_queue), gauge, cluster_queue, cohort).set(share)

    def report_local_queue_admission_fair_sharing_usage(
        self, lq: LocalQueue, cluster_queue: str, usage: float
    ) -> None:
        namespace = lq.namespace or "default"
        gauge = self._gauge["local_queue_admission_fair_sharing_usage"]
        owner = ("lq", local_queue_key(namespace, lq.name))
        self._child(owner, gauge, lq.name, namespace, cluster_queue).set(usage)

    def report_cohort_weighted_share(self, cohort: str, share: float) -> None:
        self._gauge["cohort_weighted_share"].labels(cohort).set(share)

    def forget_cohort(self, cohort: str) -> None:
        _remove(self._gauge["cohort_weighted_share"], (cohort,))

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
        gone = self._histogram["workload_eviction_latency_seconds"]
        self._child(("cq", cluster_queue), gone, cluster_queue, label).observe(max(latency, 0.0))

    def report_cluster_queue(self, cq: ClusterQueue, engine: Engine, *, resources: bool) -> None:
        """Where the ClusterQueue sits in its cohort tree, and (``resources``:
        enableClusterQueueResources) the requests of its pending workloads per resource."""
        name = cq.name
        cohort = cq.spec.cohort_name
        root = engine.root_cohort(CohortName(cohort)) if cohort else None
        labels = (name, cohort or "", root or "")
        before = self._cq_info_labels.get(name)
        if before is not None and before != labels:
            _remove(self._gauge["cluster_queue_info"], before)
            self._drop_other_cohorts(name, cohort or "")
        self._cq_info_labels[name] = labels
        self._child(("cq", name), self._gauge["cluster_queue_info"], *labels).set(1)
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
        gauge = self._gauge["cluster_queue_resource_pending"]
        for name, (engine, covered) in sorted(self._pending_sources.items()):
            pending = engine.pending_requests(ClusterQueueName(name))
            for resource in sorted(covered | set(pending)):
                value = to_prometheus_value(pending.get(ResourceName(resource), 0), resource)
                self._child(("cq", name), gauge, name, resource).set(value)

    def _drop_other_cohorts(self, cluster_queue: str, cohort: str) -> None:
        """The per-flavor series of a ClusterQueue that moved to another cohort: those labelled
        with the old one go (Kueue clears them on such a change too)."""
        series = self._resource_series.get(cluster_queue, set())
        for labels in sorted(x for x in series if x[0] != cohort):
            series.discard(labels)
            for gauge in _CQ_RESOURCE_GAUGES:
                _remove(self._gauge[gauge], labels)

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
                _remove(self._gauge["cohort_info"], before)
            self._cohort_info_labels[co.name] = labels
            self._child(owner, self._gauge["cohort_info"], *labels).set(1)
            members = co.cluster_queues
            reserved: dict[tuple[str, str], int] = {}
            admitted = 0
            for member in members:
                admitted += engine.reserving_count(member)
                for used, amount in engine.usage(member).items():
                    reserved[used] = reserved.get(used, 0) + amount
            active = self._gauge["cohort_subtree_admitted_active_workloads"]
            self._child(owner, active, co.name).set(admitted)
            quota: dict[tuple[str, str], int] = {
                (f, r): amount for (f, r), amount in co.subtree_quota.items()
            }
            frs = self._cohort_frs.setdefault(co.name, set())
            frs |= set(quota) | set(reserved)
            for key in sorted(frs):
                for gauge, amounts in (
                    (self._gauge["cohort_subtree_quota"], quota),
                    (self._gauge["cohort_subtree_resource_reservations"], reserved),
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
        g = self._gauge
        for status, count in (("active", pending), ("inadmissible", parked)):
            self._child(
                owner, g["local_queue_pending_workloads"], name, namespace, status
            ).set(count)
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
        for holders in (
            "local_queue_reserving_active_workloads", "local_queue_admitted_active_workloads"
        ):
            self._child(owner, g[holders], name, namespace).set(holding)
        # A flavor no longer used reads 0 rather than vanishing from the graphs.
        reported = self._lq_resources.setdefault(key, set())
        reported |= set(usage)
        for fr in sorted(reported):
            value = to_prometheus_value(usage.get(fr, 0), fr[1])
            for gauge in ("local_queue_resource_reservation", "local_queue_resource_usage"):
                self._child(owner, g[gauge], name, namespace, *fr).set(value)
        for candidate in LOCAL_QUEUE_ACTIVE_VALUES:
            self._child(owner, g["local_queue_status"], name, namespace, candidate).set(
                1 if candidate == active else 0
            )
        self._child(owner, g["local_queue_finished_workloads"], name, namespace).set(finished)
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
            self._child(("cq", cq), self._gauge["finished_workloads"], cq).set(total)

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
            for gauge in _CQ_RESOURCE_GAUGES:
                _remove(self._gauge[gauge], labels)
        for status in ("active", "inadmissible"):
            _remove(self._gauge["pending_workloads"], (cluster_queue, status))
        for status in CLUSTER_QUEUE_STATUSES:
            _remove(self._gauge["cluster_queue_status"], (cluster_queue, status))
        for gauge in ("reserving_active_workloads", "admitted_active_workloads"):
            _remove(self._gauge[gauge], (cluster_queue,))

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


class _Together:
    """One collector for metrics of the same stem (a gauge and a counter), built with
    ``registry=None``."""

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
