"""Every metric kqueue exports, declared once as a table: kind, name, labels, help, buckets.

:class:`kqueue.controller.metrics.Metrics` builds its Prometheus objects from :data:`METRICS`
and records into them by name; ``/metrics`` serves them under the ``kqueue_`` prefix (a
counter's name with ``_total``). Kueue's metrics keep Kueue's names (``kueue_*`` ->
``kqueue_*``), labels and buckets; the last rows are kqueue's own (docs/observability.md lists
both, and tests/controller/test_metrics_parity.py holds the table to that list).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

NAMESPACE = "kqueue"


def _exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    return tuple(start * factor**i for i in range(count))


# Kueue's buckets: attempts take milliseconds to seconds; waits take seconds to hours.
ATTEMPT_BUCKETS = _exponential(0.001, 2, 15)  # 1ms .. ~16s
WAIT_BUCKETS = (1.0, *_exponential(2.5, 2, 13))  # 1s .. ~2.8h
GATE_BUCKETS = _exponential(0.01, 2, 14)  # 10ms .. ~82s

# Kueue's label sets: per ClusterQueue and per LocalQueue (its name and namespace), with the
# workload's priority class (spec.priorityClassRef.name, "" without one) on workload counters.
_CQ_WORKLOAD = ("cluster_queue", "priority_class")
_LQ = ("name", "namespace")
_LQ_WORKLOAD = (*_LQ, "priority_class")
_EVICTION = ("reason", "underlying_cause", "priority_class")
CQ_RESOURCE = ("cohort", "cluster_queue", "flavor", "resource")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its Prometheus kind, name (without ``kqueue_``, and a counter's without
    ``_total``), label names in order, help text, and (histograms only) bucket bounds."""

    kind: type[Counter] | type[Gauge] | type[Histogram]
    name: str
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        # prometheus_client would give a histogram without buckets its own defaults, not Kueue's.
        if (self.kind is Histogram) != bool(self.buckets):
            raise ValueError(
                f"metric {self.name}: buckets are required for a histogram and allowed for no "
                f"other kind (kind {self.kind.__name__}, buckets {self.buckets})"
            )

    @property
    def exposed_name(self) -> str:
        """The name ``/metrics`` serves (a counter's with ``_total``)."""
        return f"{NAMESPACE}_{self.name}" + ("_total" if self.kind is Counter else "")

    def build(self) -> Counter | Gauge | Histogram:
        """The Prometheus object, in no registry (:class:`Metrics` registers it)."""
        if self.kind is Histogram:
            return Histogram(
                self.name, self.help, self.labels, namespace=NAMESPACE, registry=None,
                buckets=self.buckets,
            )
        return self.kind(self.name, self.help, self.labels, namespace=NAMESPACE, registry=None)


METRICS: tuple[MetricSpec, ...] = (
    # -- Kueue's: admission cycles and workloads per ClusterQueue ------------------------------
    MetricSpec(
        Counter, "admission_attempts", ("result",),
        "Admission attempts, by result: 'success' (at least one workload admitted in the "
        "cycle) or 'inadmissible' (none could be).",
    ),
    MetricSpec(
        Histogram, "admission_attempt_duration_seconds", ("result",),
        "Duration of an admission attempt (one scheduling cycle), by result.",
        ATTEMPT_BUCKETS,
    ),
    MetricSpec(
        Gauge, "pending_workloads", ("cluster_queue", "status"),
        "Pending workloads per ClusterQueue: 'active' (in the queue, to be tried) or "
        "'inadmissible' (parked until something changes).",
    ),
    MetricSpec(
        Counter, "quota_reserved_workloads", _CQ_WORKLOAD,
        "Workloads that got quota reserved, per ClusterQueue and priority class.",
    ),
    MetricSpec(
        Histogram, "quota_reserved_wait_time_seconds", _CQ_WORKLOAD,
        "Time from creation (or the last requeue) to quota reservation, per ClusterQueue and "
        "priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Counter, "admitted_workloads", _CQ_WORKLOAD,
        "Admitted workloads, per ClusterQueue and priority class.",
    ),
    MetricSpec(
        Histogram, "admission_wait_time_seconds", _CQ_WORKLOAD,
        "Time from creation (or the last requeue) to admission, per ClusterQueue and priority "
        "class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Histogram, "admission_checks_wait_time_seconds", _CQ_WORKLOAD,
        "Time from quota reservation to admission of workloads with admission checks, per "
        "ClusterQueue and priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Histogram, "ready_wait_time_seconds", _CQ_WORKLOAD,
        "Time from creation (or the last requeue) until the workload's pods were first ready "
        "after its admission (waitForPodsReady), per ClusterQueue and priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Histogram, "admitted_until_ready_wait_time_seconds", _CQ_WORKLOAD,
        "Time from admission until the workload's pods were first ready (waitForPodsReady), "
        "per ClusterQueue and priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Histogram, "execution_time_seconds", _CQ_WORKLOAD,
        "Time a finished workload was admitted, over all its admissions, per ClusterQueue "
        "and priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Gauge, "admission_cycle_preemption_skips", ("cluster_queue",),
        "Workloads of the ClusterQueue that had preemption targets in the last cycle that "
        "considered it but were skipped because another workload of the cycle needed the "
        "same resources.",
    ),
    MetricSpec(
        Gauge, "reserving_active_workloads", ("cluster_queue",),
        "Workloads holding quota, per ClusterQueue.",
    ),
    MetricSpec(
        Gauge, "admitted_active_workloads", ("cluster_queue",),
        "Admitted workloads that have not finished, per ClusterQueue.",
    ),
    MetricSpec(
        Counter, "evicted_workloads", ("cluster_queue", *_EVICTION),
        "Evicted workloads, per ClusterQueue, reason (Preempted, PodsReadyTimeout, "
        "ClusterQueueStopped, LocalQueueStopped, Deactivated), underlying cause (PodsReady"
        "Timeout: WaitForStart or WaitForRecovery; Deactivated: MaximumExecutionTimeExceeded "
        "when kqueue deactivated it; else empty) and priority class.",
    ),
    MetricSpec(
        Counter, "evicted_workloads_once", ("cluster_queue", *_EVICTION),
        "Workloads evicted, counted once per workload and (reason, underlying cause), per "
        "ClusterQueue and priority class.",
    ),
    MetricSpec(
        Histogram, "pods_ready_to_evicted_time_seconds",
        ("cluster_queue", "reason", "underlying_cause"),
        "Time from the workload's pods being ready (PodsReady=True) to its eviction, per "
        "ClusterQueue, reason and underlying cause.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Histogram, "workload_eviction_latency_seconds", ("cluster_queue", "reason"),
        "Time from a workload's eviction (Evicted=True) until its quota was released (it is "
        "pending again), per ClusterQueue and reason.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Histogram, "workload_creation_latency_seconds", ("job_kind",),
        "Time from a job's creation to the creation of its Workload, per job kind.",
        ATTEMPT_BUCKETS,
    ),
    MetricSpec(
        Counter, "preempted_workloads", ("preempting_cluster_queue", "reason"),
        "Workloads preempted, per ClusterQueue of the preemptor and reason (InClusterQueue, "
        "InCohortReclamation, InCohortReclaimWhileBorrowing, InCohortFairSharing).",
    ),
    MetricSpec(
        Counter, "replaced_workload_slices", ("cluster_queue",),
        "Workload slices finished because a scaled-up replacement was admitted.",
    ),
    MetricSpec(
        Counter, "multikueue_workloads_dispatched", ("cluster_queue", "cluster"),
        "MultiKueue: copies of workloads sent to a worker cluster, per ClusterQueue (of the "
        "manager) and worker.",
    ),
    MetricSpec(
        Counter, "multikueue_workloads_admitted", ("cluster_queue", "cluster"),
        "MultiKueue: workloads admitted on a worker cluster (their first copy admitted there), "
        "per ClusterQueue (of the manager) and worker.",
    ),
    MetricSpec(
        Histogram, "pod_scheduling_gate_removal_seconds", ("name", "cluster_queue", "is_group"),
        "Time from a workload's admission until the scheduling gate of one of its pods was "
        "removed, per gate name (kqueue.io/admission), ClusterQueue and whether the pod is "
        "in a pod group.",
        GATE_BUCKETS,
    ),
    # Go's client exports a gauge and a counter of the same stem (finished_workloads and
    # finished_workloads_total); Metrics serves such a pair from one collector.
    MetricSpec(
        Counter, "finished_workloads", _CQ_WORKLOAD,
        "Workloads that finished (Finished=True), per ClusterQueue and priority class.",
    ),
    MetricSpec(
        Gauge, "finished_workloads", ("cluster_queue",),
        "Finished Workloads that still exist, per ClusterQueue (of their LocalQueue).",
    ),
    # Kueue's build labels are Go's; kqueue tells its own version and Python's.
    MetricSpec(
        Gauge, "build_info", ("version", "python"),
        "Always 1; the labels tell the kqueue and Python versions.",
    ),
    # -- Kueue's: ClusterQueue state and quotas -------------------------------------------------
    MetricSpec(
        Gauge, "cluster_queue_info", ("cluster_queue", "parent_cohort", "root_cohort"),
        "Always 1; the labels place the ClusterQueue in its cohort tree (parent_cohort: its "
        "cohort, root_cohort: the root of that tree; empty without a cohort).",
    ),
    MetricSpec(
        Gauge, "cluster_queue_resource_pending", ("cluster_queue", "resource"),
        "Requests of the ClusterQueue's pending workloads (not yet assigned flavors), per "
        "resource (cpu in cores, memory in bytes), summed when /metrics is scraped; with "
        "enableClusterQueueResources.",
    ),
    MetricSpec(
        Gauge, "cluster_queue_nominal_quota", CQ_RESOURCE,
        "Nominal quota of a ClusterQueue, per flavor and resource.",
    ),
    MetricSpec(
        Gauge, "cluster_queue_borrowing_limit", CQ_RESOURCE,
        "Borrowing limit of a ClusterQueue, per flavor and resource (absent: unlimited).",
    ),
    MetricSpec(
        Gauge, "cluster_queue_lending_limit", CQ_RESOURCE,
        "Lending limit of a ClusterQueue, per flavor and resource (absent: unlimited).",
    ),
    MetricSpec(
        Gauge, "cluster_queue_resource_reservation", CQ_RESOURCE,
        "Quota reserved by workloads of a ClusterQueue, per flavor and resource.",
    ),
    MetricSpec(
        Gauge, "cluster_queue_resource_usage", CQ_RESOURCE,
        "Quota used by admitted workloads of a ClusterQueue, per flavor and resource.",
    ),
    MetricSpec(
        Gauge, "cluster_queue_status", ("cluster_queue", "status"),
        "1 for the ClusterQueue's current status (pending, active, terminating), else 0.",
    ),
    # Kueue's weighted-share gauges (fair sharing on): the precise share, +Inf for a weight
    # of 0 that borrows.
    MetricSpec(
        Gauge, "cluster_queue_weighted_share", ("cluster_queue", "cohort"),
        "The ClusterQueue's weighted dominant resource share (fair sharing).",
    ),
    # -- Kueue's: cohorts ------------------------------------------------------------------------
    MetricSpec(
        Gauge, "cohort_info", ("cohort", "parent_cohort", "root_cohort"),
        "Always 1; the labels place the cohort in its tree (parent_cohort: empty for a root).",
    ),
    MetricSpec(
        Gauge, "cohort_subtree_quota", ("cohort", "flavor", "resource"),
        "Quota of the cohort's subtree (its own and its members'), per flavor and resource.",
    ),
    MetricSpec(
        Gauge, "cohort_subtree_resource_reservations", ("cohort", "flavor", "resource"),
        "Quota reserved by the workloads of the cohort's subtree, per flavor and resource.",
    ),
    MetricSpec(
        Counter, "cohort_subtree_admitted_workloads", ("cohort", "priority_class"),
        "Workloads admitted in the cohort's subtree, per priority class.",
    ),
    MetricSpec(
        Gauge, "cohort_subtree_admitted_active_workloads", ("cohort",),
        "Admitted workloads of the cohort's subtree that have not finished.",
    ),
    MetricSpec(
        Gauge, "cohort_weighted_share", ("cohort",),
        "The Cohort's weighted dominant resource share (fair sharing).",
    ),
    # -- Kueue's: per LocalQueue (labels name, namespace) ---------------------------------------
    MetricSpec(
        Gauge, "local_queue_pending_workloads", (*_LQ, "status"),
        "Pending workloads per LocalQueue: 'active' (in the ClusterQueue's queue, to be "
        "tried) or 'inadmissible' (parked until something changes, or the queue is not "
        "active).",
    ),
    # What admission fair sharing orders the LocalQueue by (+Inf for a weight of 0).
    MetricSpec(
        Gauge, "local_queue_admission_fair_sharing_usage", (*_LQ, "cluster_queue"),
        "The LocalQueue's admission fair sharing usage: the resource-weighted sum of its "
        "decayed consumed resources and pending entry penalties, divided by its weight.",
    ),
    MetricSpec(
        Gauge, "local_queue_reserving_active_workloads", _LQ,
        "Workloads of the LocalQueue holding quota.",
    ),
    MetricSpec(
        Gauge, "local_queue_admitted_active_workloads", _LQ,
        "Admitted workloads of the LocalQueue that have not finished.",
    ),
    MetricSpec(
        Gauge, "local_queue_resource_reservation", (*_LQ, "flavor", "resource"),
        "Quota reserved by workloads of the LocalQueue, per flavor and resource (cpu in "
        "cores, memory in bytes).",
    ),
    MetricSpec(
        Gauge, "local_queue_resource_usage", (*_LQ, "flavor", "resource"),
        "Quota used by admitted workloads of the LocalQueue, per flavor and resource.",
    ),
    MetricSpec(
        Gauge, "local_queue_status", (*_LQ, "active"),
        "1 for the LocalQueue's Active condition status ('True', 'False', 'Unknown'), else 0.",
    ),
    MetricSpec(
        Counter, "local_queue_quota_reserved_workloads", _LQ_WORKLOAD,
        "Workloads of the LocalQueue that got quota reserved, per priority class.",
    ),
    MetricSpec(
        Histogram, "local_queue_quota_reserved_wait_time_seconds", _LQ_WORKLOAD,
        "Time from creation (or the last requeue) to quota reservation, per LocalQueue and "
        "priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Counter, "local_queue_admitted_workloads", _LQ_WORKLOAD,
        "Admitted workloads of the LocalQueue, per priority class.",
    ),
    MetricSpec(
        Histogram, "local_queue_admission_wait_time_seconds", _LQ_WORKLOAD,
        "Time from creation (or the last requeue) to admission, per LocalQueue and priority "
        "class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Histogram, "local_queue_admission_checks_wait_time_seconds", _LQ_WORKLOAD,
        "Time from quota reservation to admission of workloads with admission checks, per "
        "LocalQueue and priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Histogram, "local_queue_ready_wait_time_seconds", _LQ_WORKLOAD,
        "Time from creation (or the last requeue) until the workload's pods were first ready "
        "after its admission, per LocalQueue and priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Histogram, "local_queue_admitted_until_ready_wait_time_seconds", _LQ_WORKLOAD,
        "Time from admission until the workload's pods were first ready, per LocalQueue and "
        "priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Counter, "local_queue_evicted_workloads", (*_LQ, *_EVICTION),
        "Evicted workloads of the LocalQueue, per reason, underlying cause and priority class "
        "(values as kqueue_evicted_workloads_total).",
    ),
    MetricSpec(
        Histogram, "local_queue_execution_time_seconds", _LQ_WORKLOAD,
        "Time a finished workload was admitted, over all its admissions, per LocalQueue and "
        "priority class.",
        WAIT_BUCKETS,
    ),
    MetricSpec(
        Gauge, "local_queue_finished_workloads", _LQ,
        "Finished Workloads of the LocalQueue that still exist.",
    ),
    MetricSpec(
        Counter, "local_queue_finished_workloads", _LQ_WORKLOAD,
        "Workloads of the LocalQueue that finished (Finished=True), per priority class.",
    ),
    # -- kqueue's own (the alerts and dashboard of config/monitoring use them) ------------------
    MetricSpec(
        Counter, "webhook_requests", ("webhook", "result"),
        "Admission requests answered by kqueue's webhooks, per webhook path and result: "
        "'allowed', 'denied' (the object was refused), 'error' (the request could not be "
        "read, or the handler failed or timed out; kqueue fails closed).",
    ),
    MetricSpec(
        Histogram, "webhook_request_duration_seconds", ("webhook",),
        "Time kqueue took to answer an admission request, per webhook path.",
        ATTEMPT_BUCKETS,
    ),
    MetricSpec(
        Gauge, "leader_election_master_status", ("name",),
        "1 while this replica holds the leader-election Lease (and schedules), else 0; "
        "label name: the Lease.",
    ),
    MetricSpec(
        Gauge, "oldest_pending_workload_timestamp_seconds", ("cluster_queue",),
        "Unix time since which the longest-waiting pending workload of the ClusterQueue has "
        "waited: the time it is ordered by in the queue (its creation, or the eviction it "
        "was requeued after); no series while none is pending.",
    ),
    MetricSpec(
        Counter, "preemptions_deferred_by_protection", ("cluster_queue",),
        "Scheduling decisions in which a preemptor of the ClusterQueue found no victims because "
        "the workloads that would make room are protected (preemptionProtection): it waits "
        "for the first protection to end.",
    ),
    MetricSpec(
        Counter, "workload_resync_repairs", ("was", "now"),
        "Workloads on which the engine disagreed with the API server's Workload, found and "
        "repaired by the periodic resync, per engine state ('was') and the state the API "
        "implied ('now'). Stays 0 in a healthy process: any increase is a bug to report.",
    ),
    MetricSpec(
        Histogram, "start_prediction_error_seconds", ("cluster_queue", "direction"),
        "At admission, how far the workload's last predicted start (estimatedStartTime) was "
        "from its actual admission, per ClusterQueue; direction 'late' (admitted after the "
        "prediction) or 'early' (before it). Only workloads that had a prediction count.",
        (0.0, *WAIT_BUCKETS),
    ),
    MetricSpec(
        Histogram, "workload_resync_duration_seconds", (),
        "Time one resync of the engine's workloads against the Workload store took.",
        ATTEMPT_BUCKETS,
    ),
)
