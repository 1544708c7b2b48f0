"""Kueue's samples of the training-operator v1 kinds, converted (config/samples/<kind>.yaml), are
admitted by ``kqueue simulate`` with their frameworks enabled, each as one Workload with Kueue's
pod sets; with the frameworks off they are skipped with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kqueue.api.integrations import kubeflow as kf
from kqueue.cli.main import cli

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"


def _simulate(tmp_path: Path, kind: kf.KubeflowKind, frameworks: list[str]) -> tuple[dict[str, dict], str]:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "config.kqueue.io/v1alpha1", "kind": "Configuration",
        "integrations": {"frameworks": frameworks},
    }))
    res = CliRunner().invoke(cli, ["simulate", "-o", "json", str(config), str(SAMPLES / "quickstart.yaml"),
                                   str(SAMPLES / f"{kind.kind.lower()}.yaml")])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["workloads"], res.stderr


@pytest.mark.parametrize("kind", kf.KINDS, ids=lambda k: k.kind)
def test_kueue_s_sample_converted_is_admitted(tmp_path: Path, kind: kf.KubeflowKind) -> None:
    workloads, _ = _simulate(tmp_path, kind, ["batch/job", "pod", kind.framework])
    [(name, wl)] = workloads.items()
    assert name.startswith(f"default/{kind.kind.lower()}-") and wl["state"] == "Admitted"
    [doc] = [d for d in yaml.safe_load_all((SAMPLES / f"{kind.kind.lower()}.yaml").read_text()) if d]
    specs = doc["spec"][kind.replica_specs_field]
    assert [(ps["name"], ps["count"]) for ps in wl["podSets"]] == [
        (kf.pod_set_name(rt), specs[rt].get("replicas", 1)) for rt in kind.replica_types if rt in specs
    ]


def test_with_its_framework_off_it_is_skipped_with_the_reason(tmp_path: Path) -> None:
    workloads, stderr = _simulate(tmp_path, kf.TFJOB, ["batch/job", "pod"])
    assert workloads == {}
    assert "the kubeflow.org/tfjob integration is not enabled" in stderr
