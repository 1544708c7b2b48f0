"""Kueue's DRA samples (site/static/examples/dra/, copied verbatim into kueue_dra/) through
``kqueue convert`` and ``kqueue simulate``: the ResourceClaimTemplate's device request takes
quota under the mapped resource (docs/dra.md)."""

from __future__ import annotations

from pathlib import Path

from tests.simulate.conftest import HERE, run_cli, simulate_json

SAMPLES = HERE / "kueue_dra"
# Kueue's Configuration of its DRA guide (site/content/en/docs/tasks/manage/setup_dra.md),
# mapping the sample's DeviceClass to the quota resource of its ClusterQueue.
KUEUE_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: example.com/gpu
    deviceClassNames: [gpu.example.com]
"""


def converted(tmp_path: Path, name: str) -> str:
    result = run_cli("convert", str(SAMPLES / name))
    assert result.exit_code == 0, result.stdout + result.stderr
    out = tmp_path / name
    out.write_text(result.stdout)
    return str(out)


def test_kueue_dra_samples_count_the_claim_against_the_mapped_quota(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(KUEUE_CONFIG)
    files = [
        converted(tmp_path, "sample-dra-queues.yaml"),
        converted(tmp_path, "sample-dra-rct-job.yaml"),
    ]
    # Four copies of the Job: 4 devices of the 8 the ClusterQueue has.
    jobs = files[1]
    out = simulate_json("--config", str(config), files[0], jobs, jobs, jobs, jobs)
    usage = out["clusterQueues"]["cluster-queue"]["usage"]["default-flavor"]
    assert usage["example.com/gpu"] == "4", usage
    assert all(w["state"] == "Admitted" for w in out["workloads"].values())


def test_without_a_mapping_the_claims_take_no_quota(tmp_path: Path) -> None:
    files = [
        converted(tmp_path, "sample-dra-queues.yaml"),
        converted(tmp_path, "sample-dra-rct-job.yaml"),
    ]
    out = simulate_json(*files)
    usage = out["clusterQueues"]["cluster-queue"]["usage"]["default-flavor"]
    assert usage.get("example.com/gpu", "0") == "0", usage


def test_an_unmapped_device_class_is_misconfigured(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(KUEUE_CONFIG.replace("gpu.example.com]", "other.example.com]"))
    files = [
        converted(tmp_path, "sample-dra-queues.yaml"),
        converted(tmp_path, "sample-dra-rct-job.yaml"),
    ]
    out = simulate_json("--config", str(config), *files)
    [wl] = out["workloads"].values()
    [cond] = [c for c in wl["conditions"] if c["type"] == "QuotaReserved"]
    assert cond["reason"] == "Misconfigured"
    assert (
        "ResourceClaimTemplate single-gpu): DeviceClass gpu.example.com is not mapped"
        in (cond["message"])
    )
