"""Prometheus metrics with Kueue's names (``kueue_*`` -> ``kqueue_*``), and the probe servers.

Reconcilers and the scheduler loop report through domain-named methods
(``metrics.admission_attempt("success", 0.004)``), never through raw Prometheus objects, so
names, labels and units are decided here once. Quantities arrive as kqueue's exact integers
(cpu in milli-units, everything else in base units) and are converted to Prometheus numbers
here, at the edge: cpu in cores, memory in bytes, as Kueue exports them.

The module also serves ``/metrics`` and the ``/healthz``/``/readyz`` probes (with checks that
components register, e.g. "informers synced").
"""

from __future__ import annotations

import contextlib
import logging
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

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

from kqueue import __version__
from kqueue.api.config import parse_bind_address
from kqueue.api.quantity import is_milli

logger = logging.getLogger(__name__)

NAMESPACE = "kqueue"

# Kueue's Go client exports no "<name>_created" series; keep the exposition the same shape
# (process-wide, but this module is only imported by the controller).
disable_created_metrics()  # type: ignore[no-untyped-call]

AdmissionResult = Literal["success", "inadmissible"]
PendingStatus = Literal["active", "inadmissible"]
ClusterQueueStatus = Literal["pending", "active", "terminating"]
CLUSTER_QUEUE_STATUSES: tuple[ClusterQueueStatus, ...] = ("pending", "active", "terminating")

_RESOURCE_LABELS = ("cohort", "cluster_queue", "flavor", "resource")


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
            "Workloads that got quota reserved, per ClusterQueue.",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._quota_reserved_wait = Histogram(
            "quota_reserved_wait_time_seconds",
            "Time from creation (or the last requeue) to quota reservation, per ClusterQueue.",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=r,
            buckets=_WAIT_BUCKETS,
        )
        self._admitted = Counter(
            "admitted_workloads",
            "Admitted workloads, per ClusterQueue.",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=r,
        )
        self._admission_wait = Histogram(
            "admission_wait_time_seconds",
            "Time from creation (or the last requeue) to admission, per ClusterQueue.",
            ["cluster_queue"],
            namespace=NAMESPACE,
            registry=r,
            buckets=_WAIT_BUCKETS,
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
            "Evicted workloads, per ClusterQueue and reason (Preempted, PodsReadyTimeout, "
            "ClusterQueueStopped, LocalQueueStopped, Deactivated).",
            ["cluster_queue", "reason"],
            namespace=NAMESPACE,
            registry=r,
        )
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
            ["cluster_queue"],
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
            "removed.",
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
        # Label sets reported per ClusterQueue, so a deleted queue's series can be removed.
        self._resource_series: dict[str, set[tuple[str, ...]]] = {}

    def _resource_gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(name, doc, _RESOURCE_LABELS, namespace=NAMESPACE, registry=self.registry)

    # -- admission -----------------------------------------------------------------------------

    def admission_attempt(self, result: AdmissionResult, duration_s: float) -> None:
        self._admission_attempts.labels(result).inc()
        self._admission_attempt_duration.labels(result).observe(duration_s)

    def quota_reserved(self, cluster_queue: str, wait_s: float) -> None:
        self._quota_reserved.labels(cluster_queue).inc()
        self._quota_reserved_wait.labels(cluster_queue).observe(wait_s)

    def workload_admitted(self, cluster_queue: str, wait_s: float) -> None:
        self._admitted.labels(cluster_queue).inc()
        self._admission_wait.labels(cluster_queue).observe(wait_s)

    def workload_evicted(self, cluster_queue: str, reason: str) -> None:
        self._evicted.labels(cluster_queue, reason).inc()

    def workload_preempted(self, preempting_cluster_queue: str, reason: str) -> None:
        self._preempted.labels(preempting_cluster_queue, reason).inc()

    def slice_replaced(self, cluster_queue: str) -> None:
        self._slices_replaced.labels(cluster_queue).inc()

    def gate_removal(self, duration_s: float) -> None:
        self._gate_removal.observe(duration_s)

    # -- ClusterQueue state --------------------------------------------------------------------

    def report_pending(self, cluster_queue: str, active: int, inadmissible: int) -> None:
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

    def report_cluster_queue_weighted_share(self, cluster_queue: str, share: float) -> None:
        self._cq_weighted_share.labels(cluster_queue).set(share)

    def report_cohort_weighted_share(self, cohort: str, share: float) -> None:
        self._cohort_weighted_share.labels(cohort).set(share)

    def forget_cohort(self, cohort: str) -> None:
        _remove(self._cohort_weighted_share, (cohort,))

    def forget_cluster_queue(self, cluster_queue: str) -> None:
        """Remove every series of a deleted ClusterQueue (otherwise they would linger)."""
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
        for gauge in (self._reserving_active, self._admitted_active, self._cq_weighted_share):
            _remove(gauge, (cluster_queue,))

    def _track(self, cluster_queue: str, labels: tuple[str, ...]) -> None:
        self._resource_series.setdefault(cluster_queue, set()).add(labels)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


def _remove(metric: Gauge, labels: tuple[str, ...]) -> None:
    with contextlib.suppress(KeyError):  # never reported: nothing to remove
        metric.remove(*labels)


# -- probes and HTTP servers -------------------------------------------------------------------

CheckResult = tuple[bool, str]
Check = Callable[[], CheckResult]


@dataclass
class Probes:
    """Named health checks behind ``/healthz`` (liveness) and ``/readyz`` (readiness).

    A check returns ``(ok, detail)``; e.g. ``probes.add_readiness_check("informers",
    informer.check)``. ``/readyz`` is 503 until every readiness check passes.
    """

    liveness: dict[str, Check] = field(default_factory=dict)
    readiness: dict[str, Check] = field(default_factory=dict)

    def add_liveness_check(self, name: str, check: Check) -> None:
        self.liveness[name] = check

    def add_readiness_check(self, name: str, check: Check) -> None:
        self.readiness[name] = check

    def evaluate(self, checks: dict[str, Check]) -> tuple[bool, list[str]]:
        ok = True
        lines: list[str] = []
        for name, check in sorted(checks.items()):
            try:
                passed, detail = check()
            except Exception as exc:
                logger.exception("health check %s raised", name)
                passed, detail = False, f"check raised {type(exc).__name__}: {exc}"
            ok = ok and passed
            lines.append(
                f"[{'+' if passed else '-'}]{name} {'ok' if passed else 'failed'}: {detail}"
            )
        return ok, lines

    async def _respond(self, request: web.Request, checks: dict[str, Check]) -> web.Response:
        ok, lines = self.evaluate(checks)
        # Like the API server: terse "ok" when healthy unless ?verbose, details when not.
        if ok and "verbose" not in request.query:
            return web.Response(text="ok")
        verdict = "check passed" if ok else "check failed"
        return web.Response(text="\n".join([*lines, verdict]) + "\n", status=200 if ok else 503)

    async def healthz(self, request: web.Request) -> web.Response:
        return await self._respond(request, self.liveness)

    async def readyz(self, request: web.Request) -> web.Response:
        return await self._respond(request, self.readiness)


def metrics_app(metrics: Metrics) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        return web.Response(
            body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/metrics", handle)
    return app


def health_app(probes: Probes) -> web.Application:
    app = web.Application()
    app.router.add_get("/healthz", probes.healthz)
    app.router.add_get("/readyz", probes.readyz)
    return app


async def serve_app(app: web.Application, bind_address: str) -> web.AppRunner | None:
    """Serve ``app`` on ``bind_address`` (``":8080"``, ``"127.0.0.1:0"``); None when ``"0"``.

    Call ``await runner.cleanup()`` to stop; ``runner.addresses`` tells the bound port.
    """
    parsed = parse_bind_address(bind_address)
    if parsed is None:
        return None
    host, port = parsed
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or None, port).start()
    logger.info(
        "serving %s on %s", sorted(r.canonical for r in app.router.resources()), runner.addresses
    )
    return runner


# The process-wide metrics; reconcilers call e.g. ``metrics.admission_attempt(...)``.
DEFAULT = Metrics()
admission_attempt = DEFAULT.admission_attempt
quota_reserved = DEFAULT.quota_reserved
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
