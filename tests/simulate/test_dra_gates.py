"""Kueue's DRA feature gates set to false, through ``kqueue simulate`` and ``kqueue convert`` on
Kueue's DRA samples (as Kueue v0.19 does with each gate off; docs/dra.md):

* ``KueueDRAIntegration: false``: claims take no quota; with
  ``KueueDRARejectWorkloadsWhenDRADisabled`` (on by default) a workload with claims is
  ``Misconfigured`` with Kueue's message, without it the claims are ignored;
* ``KueueDRAIntegrationExtendedResource: false``: an extended resource a DeviceClass serves is a
  plain container request, counted under its own name, not the class's mapping;
* ``KueueDRAIntegrationPartitionableDevices: false``: counter sources are refused (Kueue's
  configuration validation)."""

from __future__ import annotations

from pathlib import Path

from tests.simulate.conftest import run_cli, simulate_json
from tests.simulate.test_dra import (
    EXTENDED_CLASS,
    KUEUE_CONFIG,
    KUEUE_COUNTER_CONFIG,
    converted,
    quota_reserved,
)


def _config(tmp_path: Path, text: str, gates: dict[str, bool]) -> str:
    lines = "".join(f"  {k}: {str(v).lower()}\n" for k, v in gates.items())
    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.yaml"
    if lines:
        text = text.replace("kind: Configuration\n", f"kind: Configuration\nfeatureGates:\n{lines}", 1)
    path.write_text(text)
    return str(path)


def test_dra_off_refuses_a_workload_with_claims_with_kueue_s_message(tmp_path: Path) -> None:
    config = _config(tmp_path, KUEUE_CONFIG, {"KueueDRAIntegration": False})
    queues = converted(tmp_path, "sample-dra-queues.yaml")
    jobs = converted(tmp_path, "sample-dra-rct-job.yaml")
    result = run_cli("simulate", "-o", "json", "--config", config, queues, jobs)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert (
        "featureGates.KueueDRAIntegration: false, honoured: DRA device claims take no quota; "
        "a workload with ResourceClaims is Misconfigured"
    ) in result.stderr
    out = simulate_json("--config", config, queues, jobs)
    [wl] = out["workloads"].values()
    cond = quota_reserved(wl)
    assert cond["reason"] == "Misconfigured"
    assert (
        "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled"
        in cond["message"]
    )


def test_dra_off_without_rejection_ignores_the_claims(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        KUEUE_CONFIG,
        {"KueueDRAIntegration": False, "KueueDRARejectWorkloadsWhenDRADisabled": False},
    )
    queues = converted(tmp_path, "sample-dra-queues.yaml")
    jobs = converted(tmp_path, "sample-dra-rct-job.yaml")
    # Nine Jobs of one device each: with claims counted only 8 would fit.
    out = simulate_json("--config", config, queues, *[jobs] * 9)
    usage = out["clusterQueues"]["cluster-queue"]["usage"]["default-flavor"]
    assert usage.get("example.com/gpu", "0") == "0", usage
    assert all(w["state"] == "Admitted" for w in out["workloads"].values())


# The class serving example.com/gpu mapped to a quota name the ClusterQueue has no quota for:
# counted as DRA the Job cannot be admitted, counted as its container request it can.
OTHER_NAME_CONFIG = KUEUE_CONFIG.replace("- name: example.com/gpu", "- name: vendor.com/gpu")


def test_extended_resource_off_counts_the_request_under_its_own_name(tmp_path: Path) -> None:
    cls = tmp_path / "class.yaml"
    cls.write_text(EXTENDED_CLASS)
    queues = converted(tmp_path, "sample-dra-queues.yaml")
    jobs = converted(tmp_path, "sample-dra-extended-resource-job.yaml")
    on = simulate_json("--config", _config(tmp_path, OTHER_NAME_CONFIG, {}), queues, str(cls), jobs)
    [pending] = on["workloads"].values()
    assert pending["state"] != "Admitted"
    assert "vendor.com/gpu" in quota_reserved(pending)["message"]
    off = simulate_json(
        "--config",
        _config(tmp_path, OTHER_NAME_CONFIG, {"KueueDRAIntegrationExtendedResource": False}),
        queues, str(cls), jobs,
    )
    [admitted] = off["workloads"].values()
    assert admitted["state"] == "Admitted", admitted
    usage = off["clusterQueues"]["cluster-queue"]["usage"]["default-flavor"]
    assert usage["example.com/gpu"] == "1", usage


def test_partitionable_devices_off_refuses_counter_sources(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        KUEUE_COUNTER_CONFIG.replace(
            "KueueDRAIntegrationPartitionableDevices: true", "KueueDRAIntegrationPartitionableDevices: false"
        ),
        {},
    )
    queues = converted(tmp_path, "sample-dra-queues.yaml")
    result = run_cli("simulate", "--config", config, queues)
    assert result.exit_code != 0
    assert (
        "resources.deviceClassMappings[0].sources[0].counter: counter sources require "
        "KueueDRAIntegrationPartitionableDevices to be enabled"
    ) in result.stdout + result.stderr


def test_convert_says_which_gates_are_honoured_off(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        KUEUE_CONFIG,
        {"KueueDRAIntegration": False, "KueueDRAIntegrationExtendedResource": False},
    )
    result = run_cli("convert", config)
    assert result.exit_code == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 2, result.stderr
    assert "KueueDRAIntegration: false, honoured" in notes[0]
    assert "KueueDRAIntegrationExtendedResource: false, honoured" in notes[1]
    assert "warning" not in result.stderr
