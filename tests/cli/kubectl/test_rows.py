"""Table rows from objects as the API server returns them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kqueue.cli.kubectl import rows
from kqueue.visibility.pending import PendingWorkload

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
CREATED = "2026-01-01T00:55:00Z"  # 5m before NOW


def _wl(
    name: str, *, conditions: list[dict[str, Any]] = (), admission: dict[str, Any] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if admission is not None:
        status["admission"] = admission
    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "creationTimestamp": CREATED,
            "ownerReferences": [{"kind": "Job", "name": name.removeprefix("job-")}],
        },
        "spec": {"queueName": "user-queue", "priority": 0},
        "status": status,
    }


ADMITTED = _wl(
    "job-a",
    conditions=[
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
        {"type": "Admitted", "status": "True", "reason": "Admitted"},
    ],
    admission={
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default", "memory": "default"}}],
    },
)
PENDING = _wl(
    "job-b",
    conditions=[
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "old message"}
    ],
)
FINISHED = _wl(
    "job-c",
    conditions=[{"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done"}],
)
QUEUED = PendingWorkload(
    namespace="team",
    name="job-b",
    local_queue="user-queue",
    cluster_queue="cluster-queue",
    priority=0,
    created=datetime(2026, 1, 1, 0, 55, tzinfo=UTC),
    position_in_cluster_queue=3,
    position_in_local_queue=1,
    reason="WaitingForQuota",
    message="insufficient unused quota for cpu in flavor default, 1 more needed",
)


@pytest.mark.parametrize(
    ("wl", "queued", "want"),
    [
        pytest.param(
            ADMITTED,
            {},
            ["job-a", "user-queue", "cluster-queue", "ADMITTED", "", "", "main:default", "5m", ""],
            id="admitted: its ClusterQueue and flavors",
        ),
        pytest.param(
            PENDING,
            {"team/job-b": QUEUED},
            [
                "job-b", "user-queue", "cluster-queue", "PENDING", "1", "WaitingForQuota", "",
                "5m", "<unknown>",
            ],
            id="queued: LocalQueue position and the engine's reason",
        ),
        pytest.param(
            PENDING,
            {"team/job-b": replace(QUEUED, estimated_start=NOW + timedelta(minutes=42))},
            [
                "job-b", "user-queue", "cluster-queue", "PENDING", "1", "WaitingForQuota", "",
                "5m", "42m",
            ],
            id="queued with a predicted start: the ETA column counts down to it",
        ),
        pytest.param(
            PENDING,
            {},
            ["job-b", "user-queue", "cluster-queue", "PENDING", "", "Pending", "", "5m", "<unknown>"],
            id="pending but not queued: the condition's reason",
        ),
        pytest.param(
            FINISHED,
            {},
            ["job-c", "user-queue", "cluster-queue", "FINISHED", "", "Succeeded", "", "5m", ""],
            id="finished: the Finished reason",
        ),
    ],
)
def test_workload_rows(
    wl: dict[str, Any], queued: dict[str, PendingWorkload], want: list[str]
) -> None:
    table = rows.workloads_table(
        [wl], now=NOW, lq_targets={"team/user-queue": "cluster-queue"}, queued=queued
    )
    assert table.headers == (
        "NAME",
        "QUEUE",
        "CLUSTERQUEUE",
        "STATUS",
        "POSITION",
        "REASON",
        "FLAVORS",
        "AGE",
        "ETA",
    )
    assert table.rows == [want]


def test_workload_rows_wide_and_all_namespaces() -> None:
    table = rows.workloads_table(
        [PENDING],
        now=NOW,
        lq_targets={},
        queued={"team/job-b": QUEUED},
        all_namespaces=True,
        wide=True,
    )
    assert table.headers[0] == "NAMESPACE"
    assert table.headers[-5:] == ("CQ POSITION", "PRIORITY", "OWNER", "CLUSTER", "MESSAGE")
    assert table.rows[0][0] == "team"
    assert table.rows[0][-5:] == ["3", "0", "job/b", "", QUEUED.message]


def _on_clusters(wl: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {**wl, "status": {**wl["status"], **status}}


@pytest.mark.parametrize(
    ("wl", "want"),
    [
        pytest.param(
            _on_clusters(ADMITTED, clusterName="worker-1"), "worker-1",
            id="MultiKueue: dispatched, the worker it runs on",
        ),
        pytest.param(
            _on_clusters(ADMITTED, nominatedClusterNames=["worker-1", "worker-2"]),
            "nominated:worker-1,worker-2",
            id="MultiKueue: copies offered to workers, none admitted yet",
        ),
        pytest.param(ADMITTED, "", id="not MultiKueue: none"),
    ],
)
def test_workload_cluster_in_the_wide_view(wl: dict[str, Any], want: str) -> None:
    table = rows.workloads_table([wl], now=NOW, lq_targets={}, queued={}, wide=True)
    assert rows.workload_cluster(wl) == want
    assert table.rows[0][table.headers.index("CLUSTER")] == want


def test_workload_reason_for_a_workload_waiting_aside() -> None:
    table = rows.workloads_table(
        [PENDING],
        now=NOW,
        lq_targets={},
        queued={},
        reasons={"team/job-b": ("Misconfigured", "LocalQueue user-queue doesn't exist")},
    )
    assert table.rows[0][5] == "Misconfigured"


@pytest.mark.parametrize(
    ("wl", "want"),
    [
        pytest.param(ADMITTED, "main:default", id="one flavor for every resource"),
        pytest.param(
            {
                "status": {
                    "admission": {
                        "podSetAssignments": [
                            {"name": "driver", "flavors": {"cpu": "on-demand"}},
                            {
                                "name": "workers",
                                "flavors": {"cpu": "spot", "nvidia.com/gpu": "a100"},
                            },
                        ]
                    }
                }
            },
            "driver:on-demand workers:a100,spot",
            id="pod sets with several flavors",
        ),
        pytest.param(PENDING, "", id="pending: none"),
    ],
)
def test_workload_flavors(wl: dict[str, Any], want: str) -> None:
    assert rows.workload_flavors(wl) == want


CQ = {
    "metadata": {"name": "cluster-queue", "creationTimestamp": CREATED},
    "spec": {
        "cohortName": "org",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "9"},
                            {"name": "memory", "nominalQuota": "36Gi"},
                        ],
                    },
                    {
                        "name": "spot",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "4000m"},
                            {"name": "memory", "nominalQuota": "16Gi"},
                        ],
                    },
                ],
            }
        ],
    },
    "status": {
        "pendingWorkloads": 2,
        "admittedWorkloads": 1,
        "conditions": [{"type": "Active", "status": "True", "reason": "Ready"}],
        "flavorsReservation": [
            {
                "name": "default",
                "resources": [
                    {"name": "cpu", "total": "1500m"},
                    {"name": "memory", "total": "1073741824"},
                ],
            }
        ],
    },
}


def test_cluster_queue_row_shows_usage_against_nominal_in_spec_order() -> None:
    table = rows.cluster_queues_table([CQ], now=NOW)
    assert table.headers == ("NAME", "COHORT", "PENDING", "ADMITTED", "ACTIVE", "USAGE", "AGE")
    assert table.rows == [
        [
            "cluster-queue",
            "org",
            "2",
            "1",
            "True",
            "default/cpu 1500m/9, default/memory 1Gi/36Gi, spot/cpu 0/4, spot/memory 0/16Gi",
            "5m",
        ]
    ]


def test_stopped_cluster_queue_wide() -> None:
    cq = {
        **CQ,
        "spec": {**CQ["spec"], "stopPolicy": "Hold"},
        "status": {
            **CQ["status"],
            "conditions": [{"type": "Active", "status": "False", "reason": "Stopped"}],
        },
    }
    table = rows.cluster_queues_table([cq], now=NOW, wide=True)
    assert table.rows[0][4] == "False"
    assert table.rows[0][-3:] == ["BestEffortFIFO", "Hold", "Stopped"]


def test_local_queue_rows() -> None:
    lq = {
        "metadata": {"name": "user-queue", "namespace": "team", "creationTimestamp": CREATED},
        "spec": {"clusterQueue": "cluster-queue"},
        "status": {"pendingWorkloads": 1, "admittedWorkloads": 2},
    }
    table = rows.local_queues_table([lq], now=NOW, all_namespaces=True)
    assert table.headers == (
        "NAMESPACE",
        "NAME",
        "CLUSTERQUEUE",
        "PENDING",
        "ADMITTED",
        "ACTIVE",
        "AGE",
    )
    assert table.rows == [["team", "user-queue", "cluster-queue", "1", "2", "Unknown", "5m"]]
    assert rows.local_queues_table([lq], now=NOW, wide=True).rows[0][-2:] == ["1", "-"]


def test_local_queue_wide_rows_show_admission_fair_sharing() -> None:
    lq = {
        "metadata": {"name": "user-queue", "namespace": "team", "creationTimestamp": CREATED},
        "spec": {"clusterQueue": "cluster-queue", "fairSharing": {"weight": "2"}},
        "status": {
            "fairSharing": {
                "admissionFairSharingStatus": {
                    "consumedResources": {"cpu": "1500m", "memory": "1Gi"},
                    "lastUpdate": "2024-01-01T00:00:00Z",
                }
            }
        },
    }
    table = rows.local_queues_table([lq], now=NOW, wide=True)
    assert table.headers[-2:] == ("FS WEIGHT", "CONSUMED")
    assert table.rows[0][-2:] == ["2", "cpu=1500m,memory=1Gi"]


def test_resource_flavor_rows() -> None:
    rf = {
        "metadata": {"name": "spot", "creationTimestamp": CREATED},
        "spec": {
            "nodeLabels": {"zone": "a", "instance-type": "spot"},
            "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    table = rows.resource_flavors_table([rf], now=NOW, wide=True)
    assert table.rows == [
        ["spot", "instance-type=spot,zone=a", "5m", "spot=true:NoSchedule", "spot:NoSchedule"]
    ]


def test_pending_rows() -> None:
    soon = replace(QUEUED, name="job-c", estimated_start=NOW + timedelta(minutes=7))
    due = replace(QUEUED, name="job-d", estimated_start=NOW - timedelta(seconds=5))
    table = rows.pending_table([QUEUED, soon, due], now=NOW)
    assert table.headers[-2:] == ("ETA", "MESSAGE")
    assert table.rows == [
        ["3", "1", "team", "job-b", "user-queue", "0", "WaitingForQuota", "5m", "<unknown>",
         QUEUED.message],
        ["3", "1", "team", "job-c", "user-queue", "0", "WaitingForQuota", "5m", "7m",
         QUEUED.message],
        ["3", "1", "team", "job-d", "user-queue", "0", "WaitingForQuota", "5m", "now",
         QUEUED.message],
    ]


def test_workload_waiting_for_admission_checks_shows_their_states() -> None:
    wl = _wl(
        "job-c",
        conditions=[
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
            {"type": "Admitted", "status": "False", "reason": "UnsatisfiedAdmissionChecks"},
        ],
        admission={"clusterQueue": "cluster-queue", "podSetAssignments": []},
    )
    wl["status"]["admissionChecks"] = [
        {"name": "prov", "state": "Pending", "message": "waiting for capacity"},
        {"name": "budget", "state": "Ready", "message": ""},
    ]
    table = rows.workloads_table([wl], now=NOW, lq_targets={}, queued={}, wide=True)
    row = dict(zip(table.headers, table.rows[0], strict=True))
    assert row["STATUS"] == "QUOTARESERVED"
    assert row["REASON"] == "prov=Pending budget=Ready"
    assert row["MESSAGE"] == "prov: waiting for capacity"
