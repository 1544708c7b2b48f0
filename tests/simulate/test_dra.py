"""Kueue's DRA samples (site/static/examples/dra/, copied verbatim into kueue_dra/) through
``kqueue convert`` and ``kqueue simulate``: the ResourceClaimTemplate's device request takes
quota under the mapped resource (docs/dra.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

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


def quota_reserved(wl: dict[str, Any]) -> dict[str, Any]:
    [cond] = [c for c in wl["conditions"] if c["type"] == "QuotaReserved"]
    return cond


# Kueue's counter e2e Configuration (test/e2e/config/dra/counter/controller_manager_config.yaml):
# DeviceClass gpu.example.com counted by the `memory` counter its devices consume.
KUEUE_COUNTER_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates:
  KueueDRAIntegration: true
  KueueDRAIntegrationPartitionableDevices: true
resources:
  deviceClassMappings:
  - name: gpu.memory
    deviceClassNames:
    - gpu.example.com
    sources:
    - counter:
        name: memory
        driver: gpu.example.com
        deviceSelector:
          cel:
            expression: "device.driver == 'gpu.example.com'"
"""
# What the example driver publishes for one GPU split in partitions (as a driver would; Kueue's
# sample relies on dra-example-driver): the DeviceClass, and one pool whose devices consume the
# GPU's memory counter. The sample's request has no selector: the largest partition counts.
COUNTER_CLUSTER = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpu}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  sharedCounters:
  - name: gpu-0-counters
    counters: {memory: {value: 80Gi}}
  devices:
  - name: gpu-0-part-0
    consumesCounters:
    - counterSet: gpu-0-counters
      counters: {memory: {value: 20Gi}}
  - name: gpu-0-part-1
    consumesCounters:
    - counterSet: gpu-0-counters
      counters: {memory: {value: 40Gi}}
"""


def test_kueue_counter_sample_counts_the_partition_by_its_memory(tmp_path: Path) -> None:
    """Kueue's sample-dra-counter-*.yaml: each Job's partition counts the largest memory a
    matching device consumes (40Gi) against gpu.memory (800Gi): 20 fit, the 21st waits."""
    config = tmp_path / "config.yaml"
    config.write_text(KUEUE_COUNTER_CONFIG)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(COUNTER_CLUSTER)
    queues = converted(tmp_path, "sample-dra-counter-queues.yaml")
    jobs = converted(tmp_path, "sample-dra-counter-job.yaml")
    out = simulate_json("--config", str(config), queues, str(cluster), *[jobs] * 21)
    usage = out["clusterQueues"]["cluster-queue"]["usage"]["default-flavor"]
    assert usage["gpu.memory"] == "800Gi", usage
    states = sorted(w["state"] for w in out["workloads"].values())
    assert states == ["Admitted"] * 20 + ["Pending"], states
    [waiting] = [w for w in out["workloads"].values() if w["state"] == "Pending"]
    cond = quota_reserved(waiting)
    assert cond["reason"] == "WaitingForQuota" and "gpu.memory" in cond["message"]


def test_kueue_counter_sample_without_published_devices_is_misconfigured(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(KUEUE_COUNTER_CONFIG)
    queues = converted(tmp_path, "sample-dra-counter-queues.yaml")
    jobs = converted(tmp_path, "sample-dra-counter-job.yaml")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(COUNTER_CLUSTER.split("---")[0])  # the DeviceClass, no ResourceSlice
    out = simulate_json("--config", str(config), queues, str(cluster), jobs)
    [wl] = out["workloads"].values()
    cond = quota_reserved(wl)
    assert cond["reason"] == "Misconfigured"
    assert (
        "(ResourceClaimTemplate gpu-partition): devices.requests[0]: insufficient matching"
        in (cond["message"])
    )


# The DeviceClass the extended-resource sample relies on (Kueue's DRA guide: a class whose
# spec.extendedResourceName is example.com/gpu, Kubernetes' DRAExtendedResource), mapped by
# KUEUE_CONFIG to the ClusterQueue's example.com/gpu.
EXTENDED_CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  extendedResourceName: example.com/gpu
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
"""


def test_kueue_extended_resource_sample_counts_the_request_as_dra(tmp_path: Path) -> None:
    """Kueue's sample-dra-extended-resource-job.yaml: ``example.com/gpu: 1`` served by the
    DeviceClass counts 1 of the mapped resource; the ClusterQueue's 8 take 8 Jobs, the 9th
    waits for quota naming it."""
    config = tmp_path / "config.yaml"
    config.write_text(KUEUE_CONFIG)
    cls = tmp_path / "class.yaml"
    cls.write_text(EXTENDED_CLASS)
    queues = converted(tmp_path, "sample-dra-queues.yaml")
    jobs = converted(tmp_path, "sample-dra-extended-resource-job.yaml")
    out = simulate_json("--config", str(config), queues, str(cls), *[jobs] * 9)
    usage = out["clusterQueues"]["cluster-queue"]["usage"]["default-flavor"]
    assert usage["example.com/gpu"] == "8", usage
    waiting = [w for w in out["workloads"].values() if w["state"] != "Admitted"]
    assert len(waiting) == 1
    cond = quota_reserved(waiting[0])
    assert cond["reason"] == "WaitingForQuota" and "example.com/gpu" in cond["message"]


def test_extended_resource_of_a_counter_class_is_misconfigured(tmp_path: Path) -> None:
    """Kueue refuses an extended resource whose DeviceClass is counted by counters (only a
    claim's selectors say which partition): Misconfigured, naming the resource."""
    config = tmp_path / "config.yaml"
    config.write_text(KUEUE_COUNTER_CONFIG)
    cls = tmp_path / "class.yaml"
    cls.write_text(EXTENDED_CLASS)
    queues = converted(tmp_path, "sample-dra-queues.yaml")
    jobs = converted(tmp_path, "sample-dra-extended-resource-job.yaml")
    out = simulate_json("--config", str(config), queues, str(cls), jobs)
    [wl] = out["workloads"].values()
    cond = quota_reserved(wl)
    assert cond["reason"] == "Misconfigured"
    assert "extended resource example.com/gpu resolves to DeviceClass gpu.example.com with " \
        "counters configured" in cond["message"]


def test_explain_sizes_the_claims(tmp_path: Path) -> None:
    """``kqueue explain`` runs the same sizing: a Job of 9 pods, one device each, exceeds the
    ClusterQueue's 8 of the mapped resource (without the mapping the claims take no quota)."""
    config = tmp_path / "config.yaml"
    config.write_text(KUEUE_CONFIG)
    queues = converted(tmp_path, "sample-dra-queues.yaml")
    job = Path(converted(tmp_path, "sample-dra-rct-job.yaml"))
    docs = list(yaml.safe_load_all(job.read_text()))
    spec = docs[1]["spec"]
    docs[1]["metadata"] = {**docs[1]["metadata"], "name": "big"}
    del docs[1]["metadata"]["generateName"]
    spec["parallelism"] = spec["completions"] = 9
    job.write_text(yaml.safe_dump_all(docs))
    args = ("explain", "-o", "json", "-f", queues, "-f", str(job), "default/big")
    sized = json.loads(run_cli(*args, "--config", str(config)).stdout)
    assert sized["state"] == "Pending", sized
    assert "example.com/gpu" in sized["pending"]["message"]
    assert "(9 > 8)" in sized["pending"]["message"]
    unsized = json.loads(run_cli(*args).stdout)
    assert unsized["state"] == "Admitted", unsized
