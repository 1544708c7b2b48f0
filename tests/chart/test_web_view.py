"""The chart's webView option: off by default; on, the controller serves it on the chart's port
with a ClusterIP Service in front."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.conftest import Helm, find, one
from tests.chart.test_render import config_of, container

Obj = dict[str, Any]


@pytest.mark.parametrize(
    ("case", "values", "want_address", "want_port"),
    [
        ("default: off", {}, "0", None),
        ("on", {"webView": {"enabled": True}}, ":8083", 8083),
        ("on, other port", {"webView": {"enabled": True, "port": 9000}}, ":9000", 9000),
        ("port alone does not turn it on", {"webView": {"port": 9000}}, "0", None),
    ],
    ids=lambda v: v if isinstance(v, str) and not v.startswith(":") and v != "0" else None,
)
def test_web_view_on_and_off(
    helm: Helm, case: str, values: Obj, want_address: str, want_port: int | None
) -> None:
    objs = helm.template(values)
    assert config_of(objs)["webView"] == {"bindAddress": want_address}
    ports = {p["name"]: p["containerPort"] for p in container(objs)["ports"]}
    services = find(objs, "Service", "kqueue-web-view")
    if want_port is None:
        assert "web-view" not in ports
        assert services == []
        return
    assert ports["web-view"] == want_port
    svc = one(objs, "Service", "kqueue-web-view")
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [
        {"name": "http-web-view", "port": want_port, "targetPort": "web-view", "protocol": "TCP"}
    ]
    pod_labels = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels.get(k) == v for k, v in svc["spec"]["selector"].items())
