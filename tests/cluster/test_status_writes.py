"""A Workload status write without the spec stores, on a real API server, exactly what a write
of the whole object stores: the same object and the same managed fields
(workload_status.status_body, used by the decision writer)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from kqueue.api.v1alpha1 import Workload
from kqueue.controller import workload_status
from kqueue.controller.kube import Kube, new_api_client
from kqueue.controller.resources import WORKLOADS
from kqueue.engine import types as t
from kqueue.localcluster.cluster import LocalCluster
from tests.cluster.test_crds import installed_crds  # noqa: F401 (fixture)

pytestmark = pytest.mark.cluster

NS = "default"
NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def workload(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NS, "labels": {"team": "a"},
                     "annotations": {"note": "kept"}},
        "spec": {
            "queueName": "lq",
            "priority": 3,
            "podSets": [{
                "name": "main",
                "count": 2,
                "template": {"metadata": {"labels": {"app": "x"}}, "spec": {
                    "containers": [{"name": "c", "image": "busybox",
                                    "command": ["sleep", "10"],
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                    "restartPolicy": "Never",
                }},
            }],
        },
    }


ADMISSION = t.Admission(
    cluster_queue=t.ClusterQueueName("cq"),
    pod_sets=(t.PodSetAssignment(
        name=t.PodSetName("main"),
        flavors={t.ResourceName("cpu"): t.FlavorName("f"), t.ResourceName("memory"): t.FlavorName("f")},
        resource_usage={t.ResourceName("cpu"): 2000, t.ResourceName("memory"): 2 * 2**30},
        count=2,
    ),),
)


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what differs between two objects by nature (name, uid, times)."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    for key in ("name", "uid", "resourceVersion", "creationTimestamp"):
        meta.pop(key, None)
    for entry in meta.get("managedFields", []):
        entry.pop("time", None)
    return out


async def test_a_status_write_without_the_spec_stores_what_a_whole_object_write_stores(
    cluster: LocalCluster, installed_crds: Any  # noqa: F811
) -> None:
    api = await new_api_client(str(cluster.kubeconfig_path))
    try:
        kube = Kube(api)
        stored = {}
        for name, body_of in (("whole", Workload.to_dict),
                              ("status-only", workload_status.status_body)):
            created = Workload.model_validate(await kube.create(WORKLOADS, workload(name), NS))
            # Two writes in a row, as an admission and then an eviction are.
            admitted = workload_status.admit(created, ADMISSION, NOW)
            answer = await kube.replace_status(WORKLOADS, body_of(admitted), namespace=NS)
            evicted = workload_status.evict(
                Workload.model_validate(answer), "Preempted", "to make room", NOW,
                preempted_reason="InClusterQueue",
            )
            assert evicted is not None
            answer = await kube.replace_status(WORKLOADS, body_of(evicted), namespace=NS)
            stored[name] = await kube.get(WORKLOADS, name, NS)
            assert comparable(answer) == comparable(stored[name])
        assert "spec" not in workload_status.status_body(admitted)
        assert stored["whole"]["status"]["admission"]["clusterQueue"] == "cq"
        assert comparable(stored["status-only"]) == comparable(stored["whole"])
        assert stored["status-only"]["spec"] == stored["whole"]["spec"]
        assert any(
            e.get("subresource") == "status" for e in stored["whole"]["metadata"]["managedFields"]
        )
    finally:
        await api.close()
