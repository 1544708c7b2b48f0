"""Every metric the shipped dashboard and alerts query is one kqueue exports.

The names come from kqueue's metrics registry (``Metrics().registry``, what ``/metrics``
serves), not from a list kept here: renaming or dropping a metric breaks this test until the
dashboard and the alerts follow.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.controller.metrics import Metrics
from tests.monitoring.promql import metric_names

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "config" / "monitoring"
DASHBOARD = MONITORING / "kqueue-dashboard.json"
ALERTS = MONITORING / "kqueue-alerts.yaml"


def exported_series_names() -> set[str]:
    """Every series name kqueue's registry serves: a counter's ``_total``, a histogram's
    ``_bucket``, ``_sum`` and ``_count``, a gauge's own name."""
    names: set[str] = set()
    for family in Metrics().registry.collect():
        if family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        elif family.type == "counter":
            names.add(family.name + "_total")
        else:
            names.add(family.name)
    return names


def dashboard_queries(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every query in the dashboard: panel targets and variable queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            if (key == "expr" and isinstance(value, str)) or (key == "query" and isinstance(value, str) and "templating" in where):
                yield where, value
            elif key == "query" and isinstance(value, dict) and isinstance(value.get("query"), str):
                yield where + ".query", value["query"]
            else:
                title = node.get("title") or node.get("name") or ""
                yield from dashboard_queries(value, f"{where}/{title}.{key}" if title else f"{where}.{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from dashboard_queries(item, f"{where}[{i}]")


def alert_exprs() -> list[tuple[str, str]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [
        (rule.get("alert") or rule.get("record"), rule["expr"])
        for group in doc["groups"]
        for rule in group["rules"]
    ]


def _queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    found = [(f"dashboard {where}", expr) for where, expr in dashboard_queries(dash)]
    found += [(f"alert {name}", expr) for name, expr in alert_exprs()]
    return [(where, expr) for where, expr in found if expr.strip() and expr != "prometheus"]


QUERIES = _queries()


def test_the_dashboard_and_alerts_have_queries() -> None:
    assert sum(w.startswith("dashboard") for w, _ in QUERIES) >= 15
    assert {w for w, _ in QUERIES if w.startswith("alert")} == {
        "alert KqueueWorkloadPendingTooLong",
        "alert KqueueClusterQueueInactive",
        "alert KqueueAdmissionAttemptsFailing",
        "alert KqueueWebhookErrors",
        "alert KqueueLeaderChanges",
        "alert KqueueNoLeader",
    }


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[w for w, _ in QUERIES])
def test_every_queried_metric_is_exported(where: str, expr: str) -> None:
    names = metric_names(expr)
    assert names, f"{where}: no metric found in {expr!r}"
    unknown = sorted(names - exported_series_names())
    assert unknown == [], f"{where}: {unknown} not exported by kqueue (query: {expr})"


@pytest.mark.parametrize(
    ("name", "expr", "want"),
    [
        ("plain", "kqueue_pending_workloads", {"kqueue_pending_workloads"}),
        (
            "matchers and grouping",
            'sum by (cluster_queue) (rate(kqueue_admitted_workloads_total{cluster_queue=~"$cq"}[5m]))',
            {"kqueue_admitted_workloads_total"},
        ),
        (
            "binary with on/group_left",
            "max by (instance) (a_metric * on (instance) group_left b_metric) > bool 1",
            {"a_metric", "b_metric"},
        ),
        ("histogram", "histogram_quantile(0.9, sum by (le) (rate(x_bucket[$__rate_interval])))", {"x_bucket"}),
        ("template variable", "label_values(kqueue_cluster_queue_info, cluster_queue)", {"kqueue_cluster_queue_info"}),
        ("a misspelt metric is found", "time() - kqueue_oldest_pending_workload_timestamp", {"kqueue_oldest_pending_workload_timestamp"}),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v else None,
)
def test_metric_names_of_an_expression(name: str, expr: str, want: set[str]) -> None:
    assert metric_names(expr) == want


def test_a_misspelt_metric_is_not_exported() -> None:
    assert "kqueue_oldest_pending_workload_timestamp" not in exported_series_names()
    assert "kqueue_oldest_pending_workload_timestamp_seconds" in exported_series_names()
