"""The Grafana dashboard's shape: what Grafana needs to import it and lay it out."""

from __future__ import annotations

import json
from typing import Any

from tests.monitoring.test_metric_names import DASHBOARD

Obj = dict[str, Any]


def dashboard() -> Obj:
    doc: Obj = json.loads(DASHBOARD.read_text())
    return doc


def test_identity_and_variables() -> None:
    d = dashboard()
    assert d["uid"] == "kqueue-overview" and d["title"] == "kqueue"
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["cluster_queue"]["includeAll"] and variables["cluster_queue"]["multi"]


def test_panels_have_unique_ids_fit_the_grid_and_use_the_datasource_variable() -> None:
    panels = dashboard()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        covered = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not covered & cells, f"panel {p['title']!r} overlaps another"
        cells |= covered
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and all(t["datasource"] == p["datasource"] for t in p["targets"])
        assert p.get("description"), f"panel {p['title']!r} says what it shows"


def test_the_panels_the_issue_asks_for() -> None:
    exprs = " ".join(t["expr"] for p in dashboard()["panels"] for t in p.get("targets", []))
    for metric in (
        "kqueue_cluster_queue_resource_reservation",  # ClusterQueue usage
        "kqueue_cohort_subtree_resource_reservations",  # cohort usage
        "kqueue_pending_workloads",
        "kqueue_admitted_workloads_total",  # admission rate
        "kqueue_admission_wait_time_seconds_bucket",  # admission latency
        "kqueue_preempted_workloads_total",
        "kqueue_evicted_workloads_total",
        "kqueue_webhook_requests_total",
        "kqueue_leader_election_master_status",
    ):
        assert metric in exprs, metric
