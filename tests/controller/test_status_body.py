"""A Workload status write's body is the object as to_dict gives it, less the spec."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kqueue.api.v1alpha1 import Workload
from kqueue.controller import workload_status
from kqueue.engine import types as t

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def workload(**status: Any) -> Workload:
    return Workload.model_validate({
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "resourceVersion": "7", "uid": "u",
                     "labels": {"a": "b"}, "finalizers": ["x"],
                     "managedFields": [{"manager": "m", "operation": "Update",
                                        "fieldsV1": {"f:spec": {}}}]},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 3, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}
        }}]},
        **({"status": status} if status else {}),
    })


ADMISSION = t.Admission(
    cluster_queue=t.ClusterQueueName("cq"),
    pod_sets=(t.PodSetAssignment(
        name=t.PodSetName("main"), flavors={t.ResourceName("cpu"): t.FlavorName("f")},
        resource_usage={t.ResourceName("cpu"): 1500}, count=3,
    ),),
)


@pytest.mark.parametrize(
    "wl",
    [
        pytest.param(workload(), id="no-status"),
        pytest.param(workload_status.admit(workload(), ADMISSION, NOW), id="admitted"),
        pytest.param(
            workload_status.evict(
                workload_status.admit(workload(), ADMISSION, NOW), "Preempted", "room", NOW,
                preempted_reason="InClusterQueue",
            ),
            id="evicted",
        ),
        pytest.param(
            workload_status.pending(workload(), "Pending", "no quota", NOW), id="pending"
        ),
    ],
)
def test_a_status_write_sends_the_object_less_its_spec(wl: Workload | None) -> None:
    assert wl is not None
    whole = wl.to_dict()
    body = workload_status.status_body(wl)
    assert "spec" in whole and "spec" not in body
    del whole["spec"]
    assert body == whole
    assert body["metadata"]["resourceVersion"] == "7"
