"""The chart's optional PrometheusRule and Grafana dashboard ConfigMap: off by default, and when
on, exactly the rule file and dashboard of config/monitoring."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.chart.conftest import CHART, RELEASE_NAMESPACE, ROOT, Helm, find, one

Obj = dict[str, Any]
SOURCE = ROOT / "config" / "monitoring"
SHIPPED = CHART / "files" / "monitoring"
FILES = ("kqueue-alerts.yaml", "kqueue-dashboard.json")


def test_the_chart_ships_config_monitoring_byte_for_byte() -> None:
    for name in FILES:
        assert (SHIPPED / name).read_bytes() == (SOURCE / name).read_bytes(), (
            f"charts/kqueue/files/monitoring/{name} differs from config/monitoring/{name}: "
            f"cp config/monitoring/{name} charts/kqueue/files/monitoring/"
        )


def dashboards(objs: list[Obj]) -> list[Obj]:
    return find(objs, "ConfigMap", "kqueue-grafana-dashboard")


@pytest.mark.parametrize(
    ("case", "values", "want_rule", "want_dashboard"),
    [
        ("default: neither", {}, False, False),
        ("alerts only", {"metrics": {"prometheusRule": {"enabled": True}}}, True, False),
        ("dashboard only", {"metrics": {"grafanaDashboard": {"enabled": True}}}, False, True),
        (
            "both",
            {"metrics": {"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}}},
            True,
            True,
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_each_option_on_and_off(
    helm: Helm, case: str, values: Obj, want_rule: bool, want_dashboard: bool
) -> None:
    objs = helm.template(values)
    assert len(find(objs, "PrometheusRule")) == int(want_rule)
    assert len(dashboards(objs)) == int(want_dashboard)


def test_prometheus_rule_is_the_rule_file(helm: Helm) -> None:
    objs = helm.template(
        {"metrics": {"prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}}}}
    )
    rule = one(objs, "PrometheusRule", "kqueue-alerts")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["spec"] == yaml.safe_load((SOURCE / "kqueue-alerts.yaml").read_text())
    # Prometheus' own templates reach the rule unexpanded by Helm.
    rendered = json.dumps(rule["spec"])
    assert "{{ $labels.cluster_queue }}" in rendered


def test_dashboard_configmap_for_the_grafana_sidecar(helm: Helm) -> None:
    objs = helm.template({"metrics": {"grafanaDashboard": {"enabled": True}}})
    cm = one(objs, "ConfigMap", "kqueue-grafana-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert "annotations" not in cm["metadata"]
    dashboard = json.loads(cm["data"]["kqueue.json"])
    assert dashboard == json.loads((SOURCE / "kqueue-dashboard.json").read_text())
    assert dashboard["uid"] == "kqueue-overview"


def test_dashboard_sidecar_label_namespace_and_annotations(helm: Helm) -> None:
    objs = helm.template(
        {
            "metrics": {
                "grafanaDashboard": {
                    "enabled": True,
                    "sidecarLabel": "dashboards",
                    "sidecarLabelValue": "kqueue",
                    "namespace": "monitoring",
                    "annotations": {"grafana_folder": "Batch"},
                }
            }
        }
    )
    cm = one(objs, "ConfigMap", "kqueue-grafana-dashboard")
    assert cm["metadata"]["labels"]["dashboards"] == "kqueue"
    assert "grafana_dashboard" not in cm["metadata"]["labels"]
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Batch"}


def test_schema_refuses_unknown_monitoring_values(helm: Helm) -> None:
    res = helm.template_raw({"metrics": {"prometheusRule": {"enabled": True, "severity": "x"}}})
    assert res.returncode != 0
    assert "severity" in res.stderr
