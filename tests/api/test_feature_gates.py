"""Kueue's featureGates: honoured where kqueue has a switch, each other gate warned about by name."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kqueue.api import feature_gates
from kqueue.api.config import ConfigurationError, parse_configuration
from kqueue.cli.main import cli
from kqueue.cli.run import warn_feature_gates
from kqueue.engine import from_api
from kqueue.engine.gates import FeatureGates

KUEUE_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
admissionFairSharing: {usageHalfLifeTime: 168h}
featureGates:
  AdmissionFairSharing: false
  PartialAdmission: false
  HierarchicalCohorts: true
  TASBalancedPlacement: true
  MultiKueueClusterProfile: true
"""


def test_admission_fair_sharing_off_drops_the_section() -> None:
    on = parse_configuration({"admissionFairSharing": {}})
    off = parse_configuration(
        {"admissionFairSharing": {}, "featureGates": {"AdmissionFairSharing": False}}
    )
    assert on.admission_fair_sharing is not None
    assert off.admission_fair_sharing is None


def test_engine_gates_follow_the_configuration_with_kueue_defaults() -> None:
    assert from_api.feature_gates(None) == FeatureGates()
    cfg = parse_configuration({"featureGates": {
        "TopologyAwareScheduling": False, "ElasticJobsViaWorkloadSlices": False,
    }})
    assert from_api.feature_gates(cfg) == FeatureGates(
        topology_aware_scheduling=False, partial_admission=True, workload_slices=False
    )


def test_gate_values_must_be_booleans() -> None:
    with pytest.raises(ConfigurationError, match=r"featureGates\.PartialAdmission"):
        parse_configuration({"featureGates": {"PartialAdmission": "no"}})


def test_warnings_name_each_gate_kqueue_does_not_honour() -> None:
    got = feature_gates.warnings({
        "AdmissionFairSharing": False,  # honoured
        "HierarchicalCohorts": True,  # what kqueue always does
        "TASBalancedPlacement": True,  # against what kqueue always does
        "MultiKueueClusterProfile": True,  # no equivalent
    })
    assert got == [
        "featureGates.TASBalancedPlacement: kqueue always behaves as if it were false; true "
        "ignored",
        "featureGates.MultiKueueClusterProfile: kqueue has no equivalent of this Kueue feature "
        "gate; ignored",
    ]


def test_convert_keeps_the_gates_and_warns_by_name() -> None:
    res = CliRunner().invoke(cli, ["convert", "-"], input=KUEUE_CONFIG)
    assert res.exit_code == 0, res.output
    assert yaml.safe_load(res.stdout)["featureGates"] == {
        "AdmissionFairSharing": False, "PartialAdmission": False, "HierarchicalCohorts": True,
        "TASBalancedPlacement": True, "MultiKueueClusterProfile": True,
    }
    assert "featureGates.TASBalancedPlacement: kqueue always behaves as if" in res.stderr
    assert "featureGates.MultiKueueClusterProfile: kqueue has no equivalent" in res.stderr
    # Honoured: not a warning, but a note of what it changes.
    [partial] = [line for line in res.stderr.splitlines() if "featureGates.PartialAdmission" in line]
    assert partial.startswith("note: ")
    assert partial.endswith("featureGates.PartialAdmission: false, honoured: pod sets' minCount is ignored")
    assert "featureGates.HierarchicalCohorts" not in res.stderr


@pytest.mark.parametrize("kueue", [True, False], ids=["kueue-config", "kqueue-config"])
def test_simulate_warns_by_name(tmp_path: Path, kueue: bool) -> None:
    config = tmp_path / "config.yaml"
    text = KUEUE_CONFIG if kueue else KUEUE_CONFIG.replace(
        "config.kueue.x-k8s.io/v1beta2", "config.kqueue.io/v1alpha1"
    )
    config.write_text(text)
    cq = tmp_path / "cq.yaml"
    cq.write_text(
        "apiVersion: kqueue.io/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
    )
    res = CliRunner().invoke(cli, ["simulate", str(cq), "--config", str(config), "-o", "json"])
    assert res.exit_code == 0, res.output
    assert res.stderr.count("featureGates.MultiKueueClusterProfile: kqueue has no equivalent") == 1
    assert "featureGates.TASBalancedPlacement" in res.stderr
    assert res.stderr.count(
        "note: featureGates.AdmissionFairSharing: false, honoured: admissionFairSharing is ignored"
    ) == 1


def test_controller_start_up_logs_each_gate(caplog: pytest.LogCaptureFixture) -> None:
    cfg = parse_configuration({"featureGates": {"MultiKueueClusterProfile": True,
                                                "PartialAdmission": False}})
    with caplog.at_level(logging.WARNING, logger="kqueue"):
        warn_feature_gates(cfg, "config.yaml")
    assert [r.getMessage() for r in caplog.records] == [
        "config.yaml: featureGates.MultiKueueClusterProfile: kqueue has no equivalent of this "
        "Kueue feature gate; ignored"
    ]
