"""MultiKueueConfig, MultiKueueCluster and the Workload's MultiKueue status fields: shapes,
defaults and the rules that name the bad field (kqueue/api/v1alpha1/multikueue.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import (
    MultiKueueCluster,
    ValidationFailed,
    Workload,
    parse_object,
    validate_update,
)

API = "kqueue.io/v1alpha1"


def _cluster(source: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "MultiKueueCluster", "metadata": {"name": "w1"},
            "spec": {"clusterSource": source}}


def _config(clusters: list[str]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "MultiKueueConfig", "metadata": {"name": "mk"},
            "spec": {"clusters": clusters}}


def test_kube_config_defaults_to_a_secret() -> None:
    obj = parse_object(_cluster({"kubeConfig": {"location": "w1-secret"}}))
    assert isinstance(obj, MultiKueueCluster)
    kc = obj.spec.cluster_source.kube_config
    assert kc is not None and (kc.location_type, kc.location) == ("Secret", "w1-secret")
    assert not obj.is_active


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param(
            _config(["w1", "w2", "w1"]),
            "MultiKueueConfig mk: spec.clusters[2]: duplicate cluster 'w1'",
            id="config: a cluster twice",
        ),
        pytest.param(
            _config([]), "MultiKueueConfig mk: spec.clusters", id="config: no cluster"
        ),
        pytest.param(
            _config([f"w{i}" for i in range(21)]),
            "MultiKueueConfig mk: spec.clusters",
            id="config: more than 20 clusters",
        ),
        pytest.param(
            _cluster({"kubeConfig": {"location": "Bad_Name"}}),
            "MultiKueueCluster w1: spec.clusterSource.kubeConfig.location: 'Bad_Name' is not a "
            "Secret name",
            id="cluster: a Secret name that cannot exist",
        ),
        pytest.param(
            _cluster({"kubeConfig": {"location": "/x", "locationType": "File"}}),
            "MultiKueueCluster w1: spec.clusterSource.kubeConfig.locationType",
            id="cluster: unknown location type",
        ),
        pytest.param(
            _cluster({}),
            "MultiKueueCluster w1: spec.clusterSource: set exactly one of kubeConfig and "
            "clusterProfileRef",
            id="cluster: no source",
        ),
    ],
)
def test_bad_input_names_object_and_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        parse_object(doc)
    assert message in str(info.value)


def test_a_path_location_is_not_a_secret_name() -> None:
    obj = parse_object(_cluster({"kubeConfig": {"locationType": "Path", "location": "/etc/w1"}}))
    assert isinstance(obj, MultiKueueCluster)


def _workload(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API, "kind": "Workload", "metadata": {"name": "wl", "namespace": "ns"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}]},
        "status": status,
    }


def test_cluster_name_and_nominated_clusters_are_exclusive() -> None:
    with pytest.raises(ValidationFailed) as info:
        parse_object(_workload({"clusterName": "w1", "nominatedClusterNames": ["w2"]}))
    assert "status.nominatedClusterNames: must be empty while status.clusterName is set" in str(
        info.value
    )


def test_cluster_name_can_be_cleared_not_changed() -> None:
    old = Workload.model_validate(_workload({"clusterName": "w1"}))
    changed = Workload.model_validate(_workload({"clusterName": "w2"}))
    cleared = Workload.model_validate(_workload({}))
    assert [e.path for e in validate_update(old, changed)] == ["status.clusterName"]
    assert validate_update(old, cleared) == []
    assert validate_update(cleared, old) == []
