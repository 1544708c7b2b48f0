"""The MultiKueue controller's parts that need no cluster
(kqueue/controller/admission_checks/multikueue): the check's Active condition (Kueue's
admissioncheck_test.go), kubeconfig problems, the adapters' remote copies and status, the copy
of a Workload, and the garbage collector's idea of an orphan."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api import config as cfgmod
from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    MultiKueueCluster,
    MultiKueueConfig,
    Workload,
    parse_object,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import ORIGIN_LABEL, ORIGIN_UID_ANNOTATION
from kqueue.api.v1alpha1.topology import PodSetTopologyRequest
from kqueue.controller.admission_checks.multikueue import adapters
from kqueue.controller.admission_checks.multikueue.clusters import (
    ConfigProblem,
    RemoteClusters,
    parse_kubeconfig,
)
from kqueue.controller.admission_checks.multikueue.controller import (
    MultiKueueController,
    remote_workload,
)
from kqueue.controller.admission_checks.multikueue.gc import is_orphan
from kqueue.controller.informer import Store

JOB = adapters.adapter_for("batch/v1", "Job")
assert JOB is not None

API = "kqueue.io/v1alpha1"


def _obj(doc: dict[str, Any]) -> Any:
    return parse_object({"apiVersion": API, **doc})


def _cluster(name: str, active: bool | None) -> MultiKueueCluster:
    status: dict[str, Any] = {}
    if active is not None:
        status = {"conditions": [{
            "type": "Active", "status": "True" if active else "False", "reason": "X",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}
    out = _obj({"kind": "MultiKueueCluster", "metadata": {"name": name},
                "spec": {"clusterSource": {"kubeConfig": {"location": f"{name}-s"}}},
                "status": status})
    assert isinstance(out, MultiKueueCluster)
    return out


def _controller(clusters: dict[str, bool | None], config: list[str] | None) -> MultiKueueController:
    configs: Store[MultiKueueConfig] = Store()
    if config is not None:
        configs._put("cfg", _obj({"kind": "MultiKueueConfig", "metadata": {"name": "cfg"},
                                  "spec": {"clusters": config}}), "1")
    mkcs: Store[MultiKueueCluster] = Store()
    for name, active in clusters.items():
        mkcs._put(name, _cluster(name, active), "1")
    remotes = RemoteClusters(clusters=mkcs, kube=None, namespace="kqueue-system", now=None)  # type: ignore[arg-type]
    return MultiKueueController(
        configs=configs, clusters=mkcs, checks=Store(), remotes=remotes, kube=None,  # type: ignore[arg-type]
        events=None, settings=cfgmod.MultiKueue(),  # type: ignore[arg-type]
    )


def _check(parameters: dict[str, str] | None) -> AdmissionCheck:
    spec: dict[str, Any] = {"controllerName": "kqueue.io/multikueue"}
    if parameters is not None:
        spec["parameters"] = parameters
    out = _obj({"kind": "AdmissionCheck", "metadata": {"name": "mk"}, "spec": spec})
    assert isinstance(out, AdmissionCheck)
    return out


CFG = {"apiGroup": "kqueue.io", "kind": "MultiKueueConfig", "name": "cfg"}


@pytest.mark.parametrize(
    ("clusters", "config", "parameters", "want"),
    [
        # Kueue's TestReconcile (admissioncheck_test.go), by name.
        pytest.param({}, None, CFG, ("BadConfig", "MultiKueueConfig cfg"), id="missing config"),
        pytest.param({}, ["w1"], None, ("BadConfig", "spec.parameters is not set"),
                     id="no parameters"),
        pytest.param({}, ["w1"], {**CFG, "kind": "Other"}, ("BadConfig", "kqueue.io/Other"),
                     id="wrong parameters kind"),
        pytest.param({}, ["w1"], CFG, ("NoUsableClusters", "Missing clusters: [w1]"),
                     id="missing cluster"),
        pytest.param({"w1": False}, ["w1"], CFG,
                     ("NoUsableClusters", "Inactive clusters: [w1]"), id="inactive cluster"),
        pytest.param({"w1": None, "w2": False}, ["w1", "w2", "w3"], CFG,
                     ("NoUsableClusters",
                      "Missing clusters: [w3], Inactive clusters: [w1 w2]"),
                     id="missing and inactive cluster"),
        pytest.param({"w1": True}, ["w1"], CFG, None, id="active"),
        pytest.param({"w1": True, "w2": False}, ["w1", "w2", "w3"], CFG, None,
                     id="some active clusters"),
    ],
)
def test_reconcile_admission_check(
    clusters: dict[str, bool | None], config: list[str] | None,
    parameters: dict[str, str] | None, want: tuple[str, str] | None,
) -> None:
    got = _controller(clusters, config).inactive(_check(parameters))
    if want is None:
        assert got is None
    else:
        assert got is not None and got.reason == want[0] and want[1] in got.message


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("a: [unclosed", "kubeconfig is not YAML"),
        ("just: text", "not a kubeconfig (no 'clusters' list)"),
        ("clusters: [{name: c, cluster: {}}]", "kubeconfig cluster 'c' has no server URL"),
    ],
)
def test_malformed_kubeconfigs_are_named(text: str, needle: str) -> None:
    with pytest.raises(ConfigProblem) as info:
        parse_kubeconfig(text, "w1")
    assert needle in str(info.value) and "w1" in str(info.value)


def test_a_kubeconfig_with_a_server_is_accepted() -> None:
    cfg = parse_kubeconfig("clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]", "w1")
    assert cfg["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"


def _local_job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                     "labels": {c.QUEUE_NAME_LABEL: "q"}},
        "spec": {
            "managedBy": "kqueue.io/multikueue", "suspend": True,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u-1",
                                                 "controller-uid": "u-1", "job-name": "j",
                                                 "app": "x"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}},
            **spec,
        },
        "status": {"conditions": [{"type": "Suspended", "status": "True"}]},
    }


def test_job_copy_drops_managed_by_selector_and_generated_labels() -> None:
    remote = JOB.remote_object(_local_job(), "job-j-abc", "mgr")
    assert "managedBy" not in remote["spec"] and "selector" not in remote["spec"]
    assert remote["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert remote["metadata"]["labels"] == {
        c.QUEUE_NAME_LABEL: "q", ORIGIN_LABEL: "mgr", c.PREBUILT_WORKLOAD_LABEL: "job-j-abc"
    }
    assert remote["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] == "u-1"
    assert "uid" not in remote["metadata"] and "resourceVersion" not in remote["metadata"]
    assert remote["spec"]["suspend"] is True


def test_job_status_comes_back_only_when_the_local_job_may_carry_it() -> None:
    a = JOB
    remote = {"status": {"active": 1, "startTime": "2026-01-01T00:00:00Z"}}
    assert a.status_update(_local_job(), remote, remote_finished=False) is None
    assert a.status_update(_local_job(), remote, remote_finished=True) == remote["status"]
    running = _local_job(suspend=False)
    assert a.status_update(running, remote, remote_finished=False) == remote["status"]
    assert a.status_update({**running, "status": remote["status"]}, remote, False) is None


def test_a_job_without_managed_by_cannot_be_dispatched() -> None:
    job = _local_job()
    del job["spec"]["managedBy"]
    problem = adapters.managed_problem(JOB, job)
    assert problem is not None and "Job ns/j: spec.managedBy is None" in problem
    assert adapters.managed_problem(JOB, _local_job()) is None


def test_kinds_without_an_adapter_are_not_dispatchable() -> None:
    assert adapters.adapter_for("jobset.x-k8s.io/v1alpha2", "JobSet") is not None
    # kubeflow.org/v1 MPIJob is the training-operator's, which kqueue does not integrate
    # (kqueue's MPIJob is the MPI operator's v2beta1).
    assert adapters.adapter_for("kubeflow.org/v1", "MPIJob") is None
    assert adapters.adapter_for("apps/v1", "StatefulSet") is None


def _workload(uid: str = "wl-uid", **status: Any) -> Workload:
    return Workload.model_validate({
        "apiVersion": API, "kind": "Workload",
        "metadata": {"name": "job-j", "namespace": "ns", "uid": uid, "resourceVersion": "3",
                     "labels": {"a": "b"}},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}]},
        "status": status,
    })


def test_the_remote_workload_is_the_spec_with_the_origin() -> None:
    wl = _workload(clusterName="w1")
    out = remote_workload(wl, "mgr")
    assert out["metadata"] == {
        "name": "job-j", "namespace": "ns", "labels": {"a": "b", ORIGIN_LABEL: "mgr"},
        "annotations": {ORIGIN_UID_ANNOTATION: "wl-uid"},
    }
    assert out["spec"] == wl.to_dict()["spec"] and "status" not in out


def test_the_remote_workload_carries_the_topology_request_not_a_placement() -> None:
    """Kueue's multikueue/tas "should admit workload which fits in a required topology domain":
    the worker's copy asks for the pod set's topology (required hostname), and the worker
    places it; the manager's admission (delayedTopologyRequest, no placement) stays here."""
    wl = _workload(admission={"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "tas"}, "resourceUsage": {"cpu": "1"}, "count": 1,
         "delayedTopologyRequest": "Pending"}]})
    wl.spec.pod_sets[0].topology_request = PodSetTopologyRequest(
        required="kubernetes.io/hostname"
    )
    out = remote_workload(wl, "mgr")
    (ps,) = out["spec"]["podSets"]
    assert ps["topologyRequest"]["required"] == "kubernetes.io/hostname"
    assert "status" not in out and "topologyAssignment" not in str(out)


@pytest.mark.parametrize(
    ("local", "uid", "cluster", "want"),
    [
        (None, "wl-uid", "w1", True),
        (_workload(), "other-uid", "w1", True),
        (_workload(clusterName="w2"), "wl-uid", "w1", True),
        (_workload(clusterName="w1"), "wl-uid", "w1", False),
        (_workload(), "wl-uid", "w1", False),
        (_workload(conditions=[{"type": "Finished", "status": "True", "reason": "Succeeded",
                                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]),
         "wl-uid", "w1", True),
    ],
    ids=["local gone", "another incarnation", "runs elsewhere", "runs here", "pending",
         "finished"],
)
def test_orphans(local: Workload | None, uid: str, cluster: str, want: bool) -> None:
    assert is_orphan(local, uid, cluster) is want
