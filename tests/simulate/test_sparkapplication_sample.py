"""Kueue's SparkApplication sample, converted (config/samples/sparkapplication.yaml), is admitted
by ``kqueue simulate`` with its framework enabled as one Workload, pod sets ``driver`` and
``executor`` with the memory Spark asks for; ``kqueue explain`` finds it; with the framework off
it is skipped with the reason."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import run_cli, simulate_json

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
CONFIG = (
    "---\napiVersion: config.kqueue.io/v1alpha1\nkind: Configuration\n"
    "integrations:\n  frameworks: [batch/job, pod, sparkoperator.k8s.io/sparkapplication]\n"
)


def _input() -> str:
    return (SAMPLES / "quickstart.yaml").read_text() + "\n---\n" + (SAMPLES / "sparkapplication.yaml").read_text()


def test_kueue_s_sample_converted_is_admitted_with_its_driver_and_executors() -> None:
    out = simulate_json("-", input=_input() + CONFIG)
    [(key, wl)] = out["workloads"].items()
    assert key.startswith("default/sparkapplication-spark-pi-") and wl["state"] == "Admitted"
    assert [(ps["name"], ps["count"]) for ps in wl["podSets"]] == [("driver", 1), ("executor", 2)]
    result = run_cli("explain", "-f", "-", "spark-pi", input=_input() + CONFIG)
    assert result.exit_code == 0, result.stderr
    # memory: 1g per pod, read as 1Gi: 3Gi for the driver and 2 executors.
    assert "on-demand/memory: 3Gi of nominal" in result.stdout


def test_with_its_framework_off_it_is_skipped_with_the_reason() -> None:
    result = run_cli("simulate", "-", "--output", "json", input=_input())
    assert result.exit_code == 0
    assert json.loads(result.stdout)["workloads"] == {}
    assert "sparkoperator.k8s.io/sparkapplication integration is not enabled" in result.stderr
