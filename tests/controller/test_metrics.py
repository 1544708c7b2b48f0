"""Metrics exposition (Kueue's names under kqueue_), unit conversion at the edge, probes."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.parser import text_string_to_metric_families

from kqueue import __version__
from kqueue.controller.metric_table import MetricSpec
from kqueue.controller.metrics import (
    Metrics,
    Probes,
    health_app,
    metrics_app,
    serve_app,
    to_prometheus_value,
)


def samples(m: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(m.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m: Metrics, name: str, /, **labels: str) -> float | None:
    return samples(m).get((name, tuple(sorted(labels.items()))))


def test_every_metric_has_kueues_name_under_the_kqueue_prefix() -> None:
    text = Metrics().exposition().decode()
    for name in [
        "kqueue_admission_attempts_total",
        "kqueue_admission_attempt_duration_seconds",
        "kqueue_pending_workloads",
        "kqueue_quota_reserved_workloads_total",
        "kqueue_quota_reserved_wait_time_seconds",
        "kqueue_admitted_workloads_total",
        "kqueue_admission_wait_time_seconds",
        "kqueue_evicted_workloads_total",
        "kqueue_preempted_workloads_total",
        "kqueue_replaced_workload_slices_total",
        "kqueue_reserving_active_workloads",
        "kqueue_admitted_active_workloads",
        "kqueue_cluster_queue_nominal_quota",
        "kqueue_cluster_queue_borrowing_limit",
        "kqueue_cluster_queue_lending_limit",
        "kqueue_cluster_queue_resource_reservation",
        "kqueue_cluster_queue_resource_usage",
        "kqueue_cluster_queue_status",
        "kqueue_pod_scheduling_gate_removal_seconds",
        "kqueue_build_info",
    ]:
        assert f"# HELP {name} " in text, name
    assert "_created" not in text


def test_events_are_counted_with_their_labels() -> None:
    m = Metrics()
    m.admission_attempt("success", 0.003)
    m.admission_attempt("inadmissible", 0.5)
    m.admission_attempt("success", 0.002)
    m.workload_admitted(None, "cq-a", 12.5)
    m.workload_evicted(None, "cq-a", "Preempted")
    m.workload_preempted("cq-b", "InCohortReclamation")
    m.slice_replaced("cq-a")
    m.gate_removal(0.2, cluster_queue="cq-a", is_group=True)
    assert value(m, "kqueue_admission_attempts_total", result="success") == 2
    assert value(m, "kqueue_admission_attempts_total", result="inadmissible") == 1
    assert value(m, "kqueue_admission_attempt_duration_seconds_count", result="success") == 2
    assert value(m, "kqueue_admission_attempt_duration_seconds_sum", result="inadmissible") == 0.5
    cq_a = {"cluster_queue": "cq-a", "priority_class": ""}
    assert value(m, "kqueue_quota_reserved_workloads_total", **cq_a) == 1
    assert value(m, "kqueue_quota_reserved_wait_time_seconds_sum", **cq_a) == 12.5
    assert value(m, "kqueue_admitted_workloads_total", **cq_a) == 1
    assert value(m, "kqueue_admission_wait_time_seconds_sum", **cq_a) == 12.5
    assert (
        value(m, "kqueue_evicted_workloads_total", reason="Preempted", underlying_cause="", **cq_a)
        == 1
    )
    assert (
        value(
            m,
            "kqueue_preempted_workloads_total",
            preempting_cluster_queue="cq-b",
            reason="InCohortReclamation",
        )
        == 1
    )
    assert value(m, "kqueue_replaced_workload_slices_total", cluster_queue="cq-a") == 1
    assert value(
        m, "kqueue_pod_scheduling_gate_removal_seconds_count",
        name="kqueue.io/admission", cluster_queue="cq-a", is_group="true",
    ) == 1
    assert (
        value(
            m,
            "kqueue_build_info",
            version=__version__,
            python=__import__("platform").python_version(),
        )
        == 1
    )


def test_quantities_are_exported_in_base_units_with_cpu_in_cores() -> None:
    m = Metrics()
    m.report_cluster_queue_quotas(
        cohort="research",
        cluster_queue="cq-a",
        flavor="on-demand",
        resource="cpu",
        nominal=1500,  # 1500m
        borrowing_limit=None,
        lending_limit=500,
    )
    m.report_cluster_queue_quotas(
        cohort=None,
        cluster_queue="cq-b",
        flavor="spot",
        resource="memory",
        nominal=64 * 2**30,
        borrowing_limit=0,
        lending_limit=None,
    )
    m.report_cluster_queue_usage(
        cohort="research",
        cluster_queue="cq-a",
        flavor="on-demand",
        resource="cpu",
        reserved=1250,
        used=250,
    )
    cpu = {"cohort": "research", "cluster_queue": "cq-a", "flavor": "on-demand", "resource": "cpu"}
    mem = {"cohort": "", "cluster_queue": "cq-b", "flavor": "spot", "resource": "memory"}
    assert value(m, "kqueue_cluster_queue_nominal_quota", **cpu) == 1.5
    assert value(m, "kqueue_cluster_queue_lending_limit", **cpu) == 0.5
    assert value(m, "kqueue_cluster_queue_borrowing_limit", **cpu) is None  # unlimited: no series
    assert value(m, "kqueue_cluster_queue_resource_reservation", **cpu) == 1.25
    assert value(m, "kqueue_cluster_queue_resource_usage", **cpu) == 0.25
    assert value(m, "kqueue_cluster_queue_nominal_quota", **mem) == 64 * 2**30
    assert value(m, "kqueue_cluster_queue_borrowing_limit", **mem) == 0
    # A limit that is removed later loses its series.
    m.report_cluster_queue_quotas(
        cohort="research",
        cluster_queue="cq-a",
        flavor="on-demand",
        resource="cpu",
        nominal=1500,
        borrowing_limit=None,
        lending_limit=None,
    )
    assert value(m, "kqueue_cluster_queue_lending_limit", **cpu) is None
    assert to_prometheus_value(1, "cpu") == 0.001
    assert to_prometheus_value(3, "nvidia.com/gpu") == 3


def test_queue_state_gauges_and_forgetting_a_deleted_queue() -> None:
    m = Metrics()
    m.report_pending("cq-a", active=3, inadmissible=2)
    m.report_active_workloads("cq-a", reserving=4, admitted=3)
    m.report_cluster_queue_status("cq-a", "pending")
    m.report_cluster_queue_status("cq-a", "active")
    m.report_cluster_queue_usage(
        cohort=None, cluster_queue="cq-a", flavor="f", resource="cpu", reserved=1, used=1
    )
    m.report_pending("cq-b", active=1, inadmissible=0)
    m.report_pending("cq-stopped", active=2, inadmissible=1, queue_active=False)
    assert value(m, "kqueue_pending_workloads", cluster_queue="cq-stopped", status="active") == 0
    assert (
        value(m, "kqueue_pending_workloads", cluster_queue="cq-stopped", status="inadmissible") == 3
    )
    assert value(m, "kqueue_pending_workloads", cluster_queue="cq-a", status="active") == 3
    assert value(m, "kqueue_pending_workloads", cluster_queue="cq-a", status="inadmissible") == 2
    assert value(m, "kqueue_reserving_active_workloads", cluster_queue="cq-a") == 4
    assert value(m, "kqueue_admitted_active_workloads", cluster_queue="cq-a") == 3
    assert value(m, "kqueue_cluster_queue_status", cluster_queue="cq-a", status="active") == 1
    assert value(m, "kqueue_cluster_queue_status", cluster_queue="cq-a", status="pending") == 0
    # Counters and histograms of the queue go too (as Kueue clears them).
    m.workload_admitted(None, "cq-a", 3.0)
    m.workload_evicted(None, "cq-a", "Preempted")
    m.preemption_skips([("cq-a", 2)])
    m.forget_cluster_queue("cq-a")
    left = [labels for (_, labels) in samples(m) if ("cluster_queue", "cq-a") in labels]
    assert left == []
    assert value(m, "kqueue_pending_workloads", cluster_queue="cq-b", status="active") == 1


def test_each_metrics_reports_to_its_own_registry() -> None:
    registry = CollectorRegistry()
    mine, other = Metrics(registry), Metrics()
    assert mine.registry is registry
    mine.admission_attempt("success", 0.01)
    mine.admission_attempt("success", 0.02)
    assert value(mine, "kqueue_admission_attempts_total", result="success") == 2
    assert value(other, "kqueue_admission_attempts_total", result="success") is None


async def test_metrics_and_probe_servers() -> None:
    m = Metrics()
    m.workload_admitted(None, "cq-a", 1.0)
    synced = {"value": False}
    probes = Probes()
    probes.add_liveness_check("loop", lambda: (True, "event loop responsive"))
    probes.add_readiness_check("informers", lambda: (synced["value"], "workloads informer"))

    def broken() -> tuple[bool, str]:
        raise RuntimeError("no idea")

    metrics_runner = await serve_app(metrics_app(m), "127.0.0.1:0")
    health_runner = await serve_app(health_app(probes), "127.0.0.1:0")
    assert metrics_runner is not None and health_runner is not None
    metrics_port = metrics_runner.addresses[0][1]
    health_port = health_runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as resp:
                assert resp.status == 200
                assert resp.headers["Content-Type"].startswith("text/plain")
                assert (
                    'kqueue_admitted_workloads_total{cluster_queue="cq-a",priority_class=""} 1.0' in await resp.text()
                )
            async with session.get(f"http://127.0.0.1:{health_port}/healthz") as resp:
                assert (resp.status, await resp.text()) == (200, "ok")
            async with session.get(f"http://127.0.0.1:{health_port}/readyz") as resp:
                body = await resp.text()
                assert resp.status == 503
                assert "[-]informers failed: workloads informer" in body
            synced["value"] = True
            async with session.get(f"http://127.0.0.1:{health_port}/readyz") as resp:
                assert (resp.status, await resp.text()) == (200, "ok")
            async with session.get(f"http://127.0.0.1:{health_port}/readyz?verbose") as resp:
                assert "[+]informers ok: workloads informer" in await resp.text()
            probes.add_readiness_check("broken", broken)
            async with session.get(f"http://127.0.0.1:{health_port}/readyz") as resp:
                assert resp.status == 503
                assert "[-]broken failed: check raised RuntimeError: no idea" in await resp.text()
    finally:
        await metrics_runner.cleanup()
        await health_runner.cleanup()


async def test_bind_address_zero_disables_a_server() -> None:
    assert await serve_app(health_app(Probes()), "0") is None
    with pytest.raises(ValueError, match="host:port"):
        await serve_app(health_app(Probes()), "localhost")


def test_a_histogram_row_without_buckets_is_refused_naming_the_metric() -> None:
    # prometheus_client would silently give it its own default buckets, not Kueue's.
    with pytest.raises(ValueError, match="metric wait_seconds: buckets are required"):
        MetricSpec(Histogram, "wait_seconds", ("cluster_queue",), "A wait.")
    with pytest.raises(ValueError, match=r"metric waits: buckets are required.*kind Gauge"):
        MetricSpec(Gauge, "waits", ("cluster_queue",), "Waits.", (1.0, 2.0))
