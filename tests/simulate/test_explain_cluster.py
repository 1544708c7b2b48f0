"""kqueue explain against the real local control plane: objects listed from the API server."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.localcluster.cluster import LocalCluster

from .conftest import run_cli

pytestmark = pytest.mark.cluster

API_DIR = Path(__file__).resolve().parents[2] / "api"


def _install_crds(cluster: LocalCluster) -> None:
    docs = [
        doc
        for path in sorted(API_DIR.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
    ]
    # Server-side apply, as tests/cluster/test_crds.py does: the schemas are too large for the
    # annotation a client-side apply keeps.
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs)
    )
    names = [f"crd/{d['metadata']['name']}" for d in docs]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)


def _objects(suffix: str, ns: str) -> list[dict[str, Any]]:
    pod_set = {
        "name": "main",
        "count": 3,
        "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
        },
    }
    return [
        {
            "apiVersion": "kqueue.io/v1alpha1",
            "kind": "ResourceFlavor",
            "metadata": {"name": f"rf-{suffix}"},
        },
        {
            "apiVersion": "kqueue.io/v1alpha1",
            "kind": "ClusterQueue",
            "metadata": {"name": f"cq-{suffix}"},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": f"rf-{suffix}",
                                "resources": [{"name": "cpu", "nominalQuota": "2"}],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kqueue.io/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": ns},
            "spec": {"clusterQueue": f"cq-{suffix}"},
        },
        {
            "apiVersion": "kqueue.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "too-big", "namespace": ns},
            "spec": {"queueName": "main", "podSets": [pod_set]},
        },
        {
            "apiVersion": "kqueue.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "lost", "namespace": ns},
            "spec": {"queueName": "missing", "podSets": [{**pod_set, "count": 1}]},
        },
    ]


async def test_explain_reads_the_live_cluster(
    cluster: LocalCluster, kubeconfig: Path, namespace: str
) -> None:
    await asyncio.to_thread(_install_crds, cluster)
    suffix = uuid.uuid4().hex[:6]
    manifest = yaml.safe_dump_all(_objects(suffix, namespace))
    await asyncio.to_thread(cluster.kubectl, "apply", "-f", "-", input=manifest)
    try:
        result = await asyncio.to_thread(
            run_cli,
            "explain",
            f"{namespace}/too-big",
            "--kubeconfig",
            str(kubeconfig),
            "-o",
            "json",
        )
        assert result.exit_code == 0, result.stdout + result.stderr
        out = json.loads(result.stdout)
        assert out["clusterQueue"] == f"cq-{suffix}"
        assert out["pending"]["reason"] == "ExceedsMaxQuota"
        [short] = out["pending"]["podSets"][0]["shortfalls"]
        assert (short["requested"], short["maxCapacity"]) == ("3", "2")

        text = await asyncio.to_thread(
            run_cli, "explain", f"{namespace}/lost", "--kubeconfig", str(kubeconfig)
        )
        assert text.exit_code == 0, text.stdout + text.stderr
        assert "reason: Misconfigured" in text.stdout
        assert "LocalQueue missing doesn't exist" in text.stdout
        assert f"hint: LocalQueue {namespace}/missing does not exist (LocalQueues in " in (
            text.stdout
        )

        # -n/--namespace, and a name with a typo answered with the closest one.
        by_flag = await asyncio.to_thread(
            run_cli, "explain", "too-big", "-n", namespace, "--kubeconfig", str(kubeconfig)
        )
        assert by_flag.exit_code == 0, by_flag.stdout + by_flag.stderr
        assert by_flag.stdout.startswith(f"Workload {namespace}/too-big: Pending")
        typo = await asyncio.to_thread(
            run_cli, "explain", "too-bgi", "-n", namespace, "--kubeconfig", str(kubeconfig)
        )
        assert typo.exit_code == 1
        assert typo.stdout.strip() == (
            f'workload {namespace}/too-bgi not found; did you mean "{namespace}/too-big"?'
        )
    finally:
        await asyncio.to_thread(
            cluster.kubectl,
            "delete",
            "--ignore-not-found",
            "--wait=false",
            f"clusterqueues.kqueue.io/cq-{suffix}",
            f"resourceflavors.kqueue.io/rf-{suffix}",
        )


async def test_explain_sizes_dra_claims_read_from_the_cluster(
    cluster: LocalCluster, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    """With a Configuration mapping the DeviceClass, explain reads the ResourceClaimTemplates
    from the cluster: 3 pods of one device each exceed a quota of 2 (docs/dra.md)."""
    await asyncio.to_thread(_install_crds, cluster)
    suffix = uuid.uuid4().hex[:6]
    objects = _objects(suffix, namespace)
    gpu = "example.com/gpu"
    objects[1]["spec"]["resourceGroups"] = [{
        "coveredResources": ["cpu", gpu],
        "flavors": [{"name": f"rf-{suffix}", "resources": [
            {"name": "cpu", "nominalQuota": "8"}, {"name": gpu, "nominalQuota": "2"}]}],
    }]
    pod = objects[3]["spec"]["podSets"][0]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    objects.append({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
    })
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "resources": {"deviceClassMappings": [
            {"name": gpu, "deviceClassNames": ["gpu.example.com"]}]},
    }))
    manifest = yaml.safe_dump_all(objects[:4] + objects[5:])
    await asyncio.to_thread(cluster.kubectl, "apply", "-f", "-", input=manifest)
    try:
        result = await asyncio.to_thread(
            run_cli, "explain", f"{namespace}/too-big", "--kubeconfig", str(kubeconfig),
            "--config", str(config), "-o", "json",
        )
        assert result.exit_code == 0, result.stdout + result.stderr
        out = json.loads(result.stdout)
        assert out["pending"]["reason"] == "ExceedsMaxQuota", out
        [short] = out["pending"]["podSets"][0]["shortfalls"]
        assert (short["resource"], short["requested"], short["maxCapacity"]) == (gpu, "3", "2")
    finally:
        await asyncio.to_thread(
            cluster.kubectl, "delete", "--ignore-not-found", "--wait=false",
            f"clusterqueues.kqueue.io/cq-{suffix}", f"resourceflavors.kqueue.io/rf-{suffix}",
        )
