"""Kueue manifests read as kqueue's: renamed fields, mapped keys, warnings for what is dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.kueue import convert_workload_object, from_kueue

SAMPLES = Path(__file__).parent / "kueue_samples"


def _items(name: str) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d]
    out: list[dict[str, Any]] = []
    for d in docs:
        out.extend(d["items"] if d.get("kind") == "List" else [d])
    return out


def _by_kind(name: str, kind: str, obj_name: str) -> dict[str, Any]:
    return next(d for d in _items(name) if d["kind"] == kind and d["metadata"]["name"] == obj_name)


def test_v1beta1_cluster_queue_renames_cohort_and_fungibility() -> None:
    out, warnings = from_kueue(_by_kind("v1beta1.yaml", "ClusterQueue", "team-a"))
    assert out["apiVersion"] == "kqueue.io/v1alpha1"
    assert out["spec"]["cohortName"] == "research"
    assert "cohort" not in out["spec"]
    assert out["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "MayStopSearch",
    }
    # v1beta1's plain list of checks is v1beta2's strategy, on all flavors.
    assert warnings == []
    assert "admissionChecks" not in out["spec"]
    assert out["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov-check"}]}


def test_v1beta1_workload_priority_class_becomes_ref_and_keys_are_mapped() -> None:
    out, warnings = from_kueue(_by_kind("v1beta1.yaml", "Workload", "job-train-3f2a1"))
    spec = out["spec"]
    assert spec["priorityClassRef"] == {
        "group": "kqueue.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }
    assert "priorityClassName" not in spec and "priorityClassSource" not in spec
    assert out["metadata"]["annotations"] == {"kqueue.io/elastic-job": "true"}
    # Kueue's own bookkeeping label is dropped without noise.
    assert out["metadata"]["labels"] == {}
    template_labels = spec["podSets"][0]["template"]["metadata"]["labels"]
    assert template_labels == {"kqueue.io/queue-name": "main"}
    assert warnings == []
    assert out["status"]["admissionChecks"][0]["state"] == "Ready"
    # Status (the admission) is carried over: simulate uses it as pre-admitted quota.
    assert out["status"]["admission"]["podSetAssignments"][0]["count"] == 3


def test_v1beta1_pod_priority_source() -> None:
    doc = _by_kind("v1beta1.yaml", "Workload", "job-train-3f2a1")
    doc["spec"]["priorityClassSource"] = "scheduling.k8s.io/priorityclass"
    out, _ = from_kueue(doc)
    assert out["spec"]["priorityClassRef"]["group"] == "scheduling.k8s.io"
    assert out["spec"]["priorityClassRef"]["kind"] == "PriorityClass"


def test_unknown_priority_source_is_reported() -> None:
    doc = _by_kind("v1beta1.yaml", "Workload", "job-train-3f2a1")
    doc["spec"]["priorityClassSource"] = "example.com/other"
    out, warnings = from_kueue(doc)
    assert "priorityClassRef" not in out["spec"]
    assert any(
        w.path == "spec.priorityClassSource" and "example.com/other" in w.message for w in warnings
    )


def test_v1beta1_local_queue_status_rename() -> None:
    out, warnings = from_kueue(_by_kind("v1beta1.yaml", "LocalQueue", "main"))
    assert out["status"]["flavorsUsage"][0]["name"] == "on-demand"
    assert "flavorUsage" not in out["status"]
    assert warnings == []


def test_resource_flavor_drops_kueue_finalizer() -> None:
    out, warnings = from_kueue(_by_kind("v1beta1.yaml", "ResourceFlavor", "spot"))
    assert out["metadata"]["finalizers"] == []
    assert out["spec"]["nodeTaints"][0]["key"] == "spot"
    assert warnings == []


def test_v1beta2_topology_fields_carry_over() -> None:
    rf, rf_warnings = from_kueue(_by_kind("v1beta2.yaml", "ResourceFlavor", "gpu-a100"))
    assert rf["spec"]["topologyName"] == "default"
    assert rf_warnings == []
    cq, cq_warnings = from_kueue(_by_kind("v1beta2.yaml", "ClusterQueue", "gpu-team"))
    assert cq_warnings == []
    assert cq["spec"]["fairSharing"] == {"weight": "2"}
    assert cq["spec"]["stopPolicy"] == "Hold"
    wl, wl_warnings = from_kueue(_by_kind("v1beta2.yaml", "Workload", "pod-group-abc"))
    assert wl["spec"]["priorityClassRef"]["group"] == "kqueue.io"
    assert wl["spec"]["podSets"][0]["topologyRequest"] == {"required": "rack"}
    assert wl_warnings == []


def test_topology_kind_and_v1beta1_assignment() -> None:
    """Kueue's Topology imports as kqueue's; a v1beta1 topologyAssignment (levels + domains)
    becomes v1beta2's compact slices, and unsupported request fields are named."""
    topo, warnings = from_kueue(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]},
        }
    )
    assert topo["apiVersion"] == "kqueue.io/v1alpha1" and warnings == []
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": 3,
                    "topologyRequest": {
                        "required": "rack", "podIndexLabel": "idx",
                        # Multi-layer slices (TASMultiLayerTopology) carry over as they are.
                        "podsetSliceRequiredTopologyConstraints": [
                            {"topology": "kubernetes.io/hostname", "size": 3},
                        ],
                    },
                    "template": {"spec": {"containers": [{"name": "c"}]}},
                }
            ]
        },
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "topologyAssignment": {
                            "levels": ["kubernetes.io/hostname"],
                            "domains": [
                                {"values": ["node-1"], "count": 2},
                                {"values": ["node-2"], "count": 1},
                            ],
                        },
                    }
                ],
            }
        },
    }
    out, warnings = from_kueue(wl)
    assert [w.path for w in warnings] == ["spec.podSets[0].topologyRequest.podIndexLabel"]
    assert out["spec"]["podSets"][0]["topologyRequest"][
        "podsetSliceRequiredTopologyConstraints"
    ] == [{"topology": "kubernetes.io/hostname", "size": 3}]
    ta = out["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert ta == {
        "levels": ["kubernetes.io/hostname"],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "node-", "roots": ["1", "2"]}}],
                "podCounts": {"individual": [2, 1]},
            }
        ],
    }


def test_fair_sharing_fields_carry_over() -> None:
    """ClusterQueue and Cohort fairSharing map; only weightedShare of a status does."""
    for kind in ("ClusterQueue", "Cohort"):
        out, warnings = from_kueue(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": kind,
                "metadata": {"name": "x"},
                "spec": {"fairSharing": {"weight": "0.5"}},
                "status": {
                    "fairSharing": {
                        "weightedShare": 250,
                        "admissionFairSharingStatus": {"consumedResources": {}},
                    }
                },
            }
        )
        assert out["spec"]["fairSharing"] == {"weight": "0.5"}
        assert out["status"]["fairSharing"] == {"weightedShare": 250}
        assert [w.path for w in warnings] == ["status.fairSharing.admissionFairSharingStatus"]


def test_v1alpha1_cohort_parent() -> None:
    out, _ = from_kueue(
        {
            "apiVersion": "kueue.x-k8s.io/v1alpha1",
            "kind": "Cohort",
            "metadata": {"name": "child"},
            "spec": {"parent": "root"},
        }
    )
    assert out["spec"] == {"parentName": "root"}


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        (
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadSlice"},
            "no kqueue equivalent",
        ),
        ({"apiVersion": "kueue.x-k8s.io/v9", "kind": "ClusterQueue"}, "unsupported Kueue version"),
    ],
)
def test_unconvertible(doc: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        from_kueue({**doc, "metadata": {"name": "x"}})


def test_jobs_and_pods_get_kqueue_keys_and_gate() -> None:
    job, _ = convert_workload_object(_by_kind("v1beta2.yaml", "Job", "sample"))
    assert job["metadata"]["labels"] == {
        "kqueue.io/queue-name": "gpu",
        "kqueue.io/priority-class": "low",
    }
    pod, _ = convert_workload_object(_by_kind("v1beta2.yaml", "Pod", "worker-0"))
    assert pod["metadata"]["labels"]["kqueue.io/pod-group-name"] == "grp"
    assert pod["metadata"]["annotations"] == {"kqueue.io/pod-group-total-count": "2"}
    assert pod["spec"]["schedulingGates"] == [{"name": "kqueue.io/admission"}]


def test_unknown_kueue_key_warns() -> None:
    pod, warnings = convert_workload_object(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "labels": {"kueue.x-k8s.io/podset": "x"}},
            "spec": {},
        }
    )
    assert pod["metadata"]["labels"] == {}
    assert [w.path for w in warnings] == ["metadata.labels[kueue.x-k8s.io/podset]"]


def _kueue_workload(version: str, status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "team-a"},
        "spec": {
            "queueName": "main",
            "maximumExecutionTimeSeconds": 3600,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
        "status": status,
    }


@pytest.mark.parametrize(
    ("version", "status_field"),
    [
        ("v1beta2", "accumulatedPastExecutionTimeSeconds"),
        # v1beta1 spells it "Exexcution"; Kueue's conversion maps it to v1beta2's name.
        ("v1beta1", "accumulatedPastExexcutionTimeSeconds"),
    ],
)
def test_maximum_execution_time_and_accumulated_time_carry_over(
    version: str, status_field: str
) -> None:
    out, warnings = from_kueue(_kueue_workload(version, {status_field: 1800}))
    assert warnings == []
    assert out["spec"]["maximumExecutionTimeSeconds"] == 3600
    assert out["status"] == {"accumulatedPastExecutionTimeSeconds": 1800}


def test_max_exec_time_label_is_mapped() -> None:
    job, warnings = convert_workload_object(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "j",
                "labels": {
                    "kueue.x-k8s.io/queue-name": "main",
                    "kueue.x-k8s.io/max-exec-time-seconds": "600",
                },
            },
            "spec": {"template": {"spec": {"containers": []}}},
        }
    )
    assert warnings == []
    assert job["metadata"]["labels"] == {
        "kqueue.io/queue-name": "main",
        "kqueue.io/max-exec-time-seconds": "600",
    }


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_admission_fair_sharing_fields_carry_over(version: str) -> None:
    """ClusterQueue admissionScope, LocalQueue fairSharing (spec weight, status usage) map
    whole, and the result is a valid kqueue object."""
    from kqueue.api.v1alpha1 import ClusterQueue, LocalQueue

    cq, cq_warnings = from_kueue(
        {
            "apiVersion": f"kueue.x-k8s.io/{version}",
            "kind": "ClusterQueue",
            "metadata": {"name": "shared"},
            "spec": {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}},
        }
    )
    assert cq_warnings == []
    assert ClusterQueue.model_validate(cq).spec.admission_scope is not None
    status = {
        "weightedShare": 0,
        "admissionFairSharingStatus": {
            "consumedResources": {"cpu": "1500m"},
            "lastUpdate": "2024-01-01T00:00:00Z",
        },
    }
    lq, lq_warnings = from_kueue(
        {
            "apiVersion": f"kueue.x-k8s.io/{version}",
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": "team-a"},
            "spec": {"clusterQueue": "shared", "fairSharing": {"weight": "2"}},
            "status": {"fairSharing": status},
        }
    )
    assert lq_warnings == []
    model = LocalQueue.model_validate(lq)
    assert model.spec.fair_sharing is not None and str(model.spec.fair_sharing.weight) == "2"
    assert model.status.fair_sharing is not None
    afs = model.status.fair_sharing.admission_fair_sharing_status
    assert afs is not None and str(afs.consumed_resources["cpu"]) == "1500m"


def test_unhealthy_nodes_and_multikueue_fields_carry_over_others_are_dropped() -> None:
    doc = _by_kind("v1beta1.yaml", "Workload", "job-train-3f2a1")
    doc["status"]["unhealthyNodes"] = [{"name": "node-7"}]
    doc["status"]["nominatedClusterNames"] = ["worker-1"]
    doc["status"]["schedulingStats"] = {"evictions": []}
    out, warnings = from_kueue(doc)
    assert out["status"]["unhealthyNodes"] == [{"name": "node-7"}]
    assert out["status"]["nominatedClusterNames"] == ["worker-1"]
    paths = [w.path for w in warnings]
    assert "status.unhealthyNodes" not in paths
    assert "status.nominatedClusterNames" not in paths
    assert "status.schedulingStats" in paths
