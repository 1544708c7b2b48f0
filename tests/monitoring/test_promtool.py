"""The shipped alerts pass `promtool check rules`, and their unit tests pass `promtool test rules`.

promtool is built from Prometheus' Go module on first use (kqueue.localcluster.promtool, cached
in ~/.cache/kqueue like the control plane); if it cannot be built the test fails with the
reason, it never skips. Opt-in (marker ``promtool``): `make test-promtool` runs these, `make
test` does not (building promtool cold costs ~577 CPU-s, more than a cold CI run inside 50
minutes can pay; docs/local-cluster.md, "CI"; tests/fixtures/opt_in.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kqueue.localcluster import build, promtool

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "config" / "monitoring"

pytestmark = pytest.mark.promtool


@pytest.fixture(scope="module")
def promtool_bin() -> Path:
    try:
        return promtool.built() or promtool.ensure_built()
    except build.BuildError as exc:
        pytest.fail(f"promtool could not be built, so the rules cannot be checked: {exc}")


def run(binary: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_check_rules(promtool_bin: Path) -> None:
    res = run(promtool_bin, "check", "rules", "kqueue-alerts.yaml", cwd=MONITORING)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 6 rules found" in res.stdout


def test_promtool_test_rules(promtool_bin: Path) -> None:
    res = run(promtool_bin, "test", "rules", "kqueue-alerts.test.yaml", cwd=MONITORING)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_promtool_unit_tests_catch_a_changed_threshold(promtool_bin: Path, tmp_path: Path) -> None:
    """The unit tests can fail: with the pending threshold at two hours they do."""
    for name in ("kqueue-alerts.yaml", "kqueue-alerts.test.yaml"):
        shutil.copy(MONITORING / name, tmp_path / name)
    rules = tmp_path / "kqueue-alerts.yaml"
    text = rules.read_text()
    assert "> 3600" in text
    rules.write_text(text.replace("> 3600", "> 7200"))
    res = run(promtool_bin, "test", "rules", "kqueue-alerts.test.yaml", cwd=tmp_path)
    assert res.returncode != 0
    assert "KqueueWorkloadPendingTooLong" in res.stdout + res.stderr


def test_promtool_check_rules_refuses_a_broken_expression(
    promtool_bin: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "broken.yaml"
    rules.write_text(
        (MONITORING / "kqueue-alerts.yaml").read_text().replace(
            "sum(kqueue_leader_election_master_status) < 1",
            "sum(kqueue_leader_election_master_status < 1",
        )
    )
    res = run(promtool_bin, "check", "rules", str(rules), cwd=tmp_path)
    assert res.returncode != 0
    assert "KqueueNoLeader" in res.stdout + res.stderr or "parse error" in res.stdout + res.stderr


def test_every_dashboard_query_parses_as_promql(promtool_bin: Path, tmp_path: Path) -> None:
    """The dashboard's queries, with Grafana's variables given values, as recording rules:
    `promtool check rules` parses each expression as Prometheus will."""
    from tests.monitoring.test_metric_names import DASHBOARD, dashboard_queries

    exprs = [
        expr.replace("$__rate_interval", "5m").replace("$cluster_queue", ".*")
        for _, expr in dashboard_queries(json.loads(DASHBOARD.read_text()))
        if expr != "prometheus" and not expr.startswith("label_values(")
    ]
    assert len(exprs) >= 15
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(rules))
    res = run(promtool_bin, "check", "rules", str(path), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout
