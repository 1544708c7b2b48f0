"""Kueue's MultiKueue adapter tests (``pkg/controller/jobs/*/*_multikueue_adapter_test.go``),
ported as named table cases against kqueue's adapters (each kind's ``multikueue.py``): the
manager's object in, the worker's copy or the manager's new status out.

Kueue's cases run ``SyncJob`` against fake clients; kqueue's adapter is split into its pure
parts (``remote_object``, ``status_update``, ``managed_problem``), so each case checks the part
its Kueue case exercises. ``WorkloadIdentifierAnnotations`` is kqueue's origin-UID annotation,
always written. "remote X is deleted" runs the controller's delete against a recording client.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

import pytest

from kqueue.api.integrations.trainjob import RUNTIME_PATCH_MANAGER
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME, ORIGIN_LABEL, ORIGIN_UID_ANNOTATION
from kqueue.controller import integrations
from kqueue.controller.admission_checks.multikueue import adapters
from kqueue.controller.admission_checks.multikueue.controller import MultiKueueController
from kqueue.controller.admission_checks.multikueue.remote_writes import RemoteWrites
from kqueue.controller.integrations.derived import multikueue_rbac
from kqueue.controller.integrations.job.multikueue import determine_status
from kqueue.controller.resources import WORKLOADS, Resource
from tests.controller.multikueue_workers import ReachableWorkers

Obj = dict[str, Any]
NS = "ns"
KUEUE = "kueue.x-k8s.io/multikueue"


@dataclass(frozen=True)
class Kind:
    """A dispatchable kind as Kueue's test for it builds its objects."""

    test: str  # the kind as Kueue's case names spell it
    api_version: str
    kind: str
    plural: str
    managed_by: str
    run_policy: bool  # managedBy and suspend under spec.runPolicy
    spec: Obj
    status: Obj  # a status the worker's controller wrote


def _replicas(*names: str) -> Obj:
    return {n: {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            for n in names}


KINDS = [
    Kind("jobset", "jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", CONTROLLER_NAME, False,
         {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {}}}]},
         {"restarts": 10, "conditions": [{"type": "Completed", "status": "True"}]}),
    Kind("TrainJob", "trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", KUEUE, False,
         {"runtimeRef": {"name": "torch"}, "trainer": {"numNodes": 2}},
         {"conditions": [{"type": "Complete", "status": "True"}],
          "jobsStatus": [{"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2,
                          "suspended": 0}]}),
    Kind("mpijob", "kubeflow.org/v2beta1", "MPIJob", "mpijobs", KUEUE, True,
         {"mpiReplicaSpecs": _replicas("Launcher", "Worker")},
         {"conditions": [{"type": "Succeeded", "status": "True"}],
          "replicaStatuses": {"Launcher": {"succeeded": 1}}}),
    Kind("rayjob", "ray.io/v1", "RayJob", "rayjobs", KUEUE, False,
         {"entrypoint": "python x.py", "rayClusterSpec": {"headGroupSpec": {}}},
         {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"}),
    Kind("raycluster", "ray.io/v1", "RayCluster", "rayclusters", KUEUE, False,
         {"headGroupSpec": {}, "workerGroupSpecs": [{"groupName": "w", "replicas": 1}]},
         {"state": "ready", "readyWorkerReplicas": 1}),
    *(
        Kind(test, "kubeflow.org/v1", kind, plural, KUEUE, True,
             {field: _replicas(*types)},
             {"conditions": [{"type": "Succeeded", "status": "True"}],
              "replicaStatuses": {types[0]: {"succeeded": 1}}})
        for test, kind, plural, field, types in (
            ("pytorchjob", "PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", ("Master", "Worker")),
            ("tfjob", "TFJob", "tfjobs", "tfReplicaSpecs", ("Chief", "Worker")),
            ("xgboostjob", "XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", ("Master", "Worker")),
            ("PaddleJob", "PaddleJob", "paddlejobs", "paddleReplicaSpecs", ("Master", "Worker")),
            ("jaxjob", "JAXJob", "jaxjobs", "jaxReplicaSpecs", ("Worker",)),
        )
    ),
    Kind("appwrapper", "workload.codeflare.dev/v1beta2", "AppWrapper", "appwrappers",
         CONTROLLER_NAME, False,
         {"components": [{"template": {"apiVersion": "batch/v1", "kind": "Job"}}]},
         {"phase": "Succeeded", "conditions": [{"type": "QuotaReserved", "status": "True"}]}),
]


def _adapter(k: Kind) -> adapters.Adapter:
    a = adapters.adapter_for(k.api_version, k.kind)
    assert a is not None, f"{k.kind} has no MultiKueue adapter"
    return a


def _holder(k: Kind, obj: Obj) -> Obj:
    spec: Obj = obj["spec"]
    return spec.setdefault("runPolicy", {}) if k.run_policy else spec


def _local(k: Kind, *, suspend: bool = True, managed_by: str | None = None) -> Obj:
    obj: Obj = {
        "apiVersion": k.api_version, "kind": k.kind,
        "metadata": {"name": "job1", "namespace": NS, "uid": "uid-1", "resourceVersion": "7",
                     "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {c.QUEUE_NAME_LABEL: "q"},
                     "annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: "true"}},
        "spec": copy.deepcopy(k.spec),
        "status": {},
    }
    holder = _holder(k, obj)
    holder["managedBy"] = k.managed_by if managed_by is None else managed_by
    holder["suspend"] = suspend
    return obj


def _case_ids(template: str) -> list[Any]:
    return [pytest.param(k, id=template.format(kind=k.test)) for k in KINDS]


@pytest.mark.parametrize("k", _case_ids("sync creates missing remote {kind}"))
def test_sync_creates_missing_remote(k: Kind) -> None:
    local = _local(k)
    remote = _adapter(k).remote_object(local, "wl1", "origin1")
    assert (remote["apiVersion"], remote["kind"]) == (k.api_version, k.kind)
    assert remote["metadata"]["name"] == "job1" and remote["metadata"]["namespace"] == NS
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp"):
        assert key not in remote["metadata"]
    assert remote["metadata"]["labels"] == {
        c.QUEUE_NAME_LABEL: "q", c.PREBUILT_WORKLOAD_LABEL: "wl1", ORIGIN_LABEL: "origin1",
    }
    assert "status" not in remote
    want = copy.deepcopy(local["spec"])
    del _holder(k, {"spec": want})["managedBy"]
    assert remote["spec"] == want  # the spec, without managedBy, still suspended
    assert _holder(k, remote)["suspend"] is True
    assert remote["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    # The manager's object is left as it was.
    assert _holder(k, local)["managedBy"] == k.managed_by


@pytest.mark.parametrize(
    "k", _case_ids("sync creates missing remote {kind}, WorkloadIdentifierAnnotations enabled")
)
def test_sync_creates_missing_remote_with_the_origin_uid(k: Kind) -> None:
    remote = _adapter(k).remote_object(_local(k), "wl1", "origin1")
    assert remote["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] == "uid-1"


@pytest.mark.parametrize("k", _case_ids("sync status from remote {kind}"))
def test_sync_status_from_remote(k: Kind) -> None:
    local = _local(k, suspend=False)
    remote = {**_adapter(k).remote_object(local, "wl1", "origin1"), "status": k.status}
    assert _adapter(k).status_update(local, remote, remote_finished=False) == k.status
    # Already copied: nothing to write.
    assert _adapter(k).status_update({**local, "status": k.status}, remote, False) is None


@pytest.mark.parametrize("k", _case_ids("sync status from remote while local {kind} is suspended"))
def test_sync_status_from_remote_while_local_is_suspended(k: Kind) -> None:
    local = _local(k, suspend=True)
    remote = {**_adapter(k).remote_object(local, "wl1", "origin1"), "status": k.status}
    _holder(k, remote)["suspend"] = False
    assert _adapter(k).status_update(local, remote, remote_finished=False) == k.status


@pytest.mark.parametrize("k", _case_ids("job with wrong managedBy is not considered managed"))
def test_wrong_managed_by_is_not_managed(k: Kind) -> None:
    problem = adapters.managed_problem(_adapter(k), _local(k, managed_by="some-other-controller"))
    field = "spec.runPolicy.managedBy" if k.run_policy else "spec.managedBy"
    assert problem is not None
    assert f"{k.kind} {NS}/job1: {field} is 'some-other-controller'" in problem
    assert repr(k.managed_by) in problem


@pytest.mark.parametrize("k", _case_ids("missing {kind} managedBy is not considered managed"))
def test_missing_managed_by_is_not_managed(k: Kind) -> None:
    local = _local(k)
    del _holder(k, local)["managedBy"]
    problem = adapters.managed_problem(_adapter(k), local)
    assert problem is not None and "is None" in problem


@pytest.mark.parametrize("k", _case_ids("job managedBy multikueue ({kind})"))
def test_managed_by_multikueue(k: Kind) -> None:
    a = _adapter(k)
    assert adapters.managed_problem(a, _local(k)) is None
    assert adapters.is_dispatched(a, _local(k))
    assert a.managed_by == k.managed_by


class _Recorder:
    """A worker's API client that records deletions."""

    def __init__(self) -> None:
        self.deleted: list[tuple[str, str, str | None]] = []

    async def delete(self, resource: Resource, name: str, *, namespace: str | None = None,
                     time_limit: float | None = None) -> None:
        self.deleted.append((resource.plural, name, namespace))


@pytest.mark.parametrize("k", _case_ids("remote {kind} is deleted"))
async def test_remote_is_deleted(k: Kind) -> None:
    kube = _Recorder()
    ctrl = MultiKueueController.__new__(MultiKueueController)
    ctrl._remotes = ReachableWorkers({"worker1": kube})  # type: ignore[assignment]
    ctrl.writes = RemoteWrites(wake=lambda _key: None)
    await ctrl._delete_remote("worker1", "wl1", NS, _adapter(k), "job1")
    assert kube.deleted == [(k.plural, "job1", NS), (WORKLOADS.plural, "wl1", NS)]


# -- TrainJob: kqueue's runtime patch stays on the manager ----------------------------------------


def test_sync_creates_remote_trainjob_stripping_kueue_runtime_patch() -> None:
    [k] = [k for k in KINDS if k.kind == "TrainJob"]
    local = _local(k)
    user = {"manager": "example.com/user", "trainingRuntimeSpec": {"x": 1}}
    local["spec"]["runtimePatches"] = [
        user, {"manager": RUNTIME_PATCH_MANAGER, "trainingRuntimeSpec": {"y": 2}},
    ]
    remote = _adapter(k).remote_object(local, "wl1", "origin1")
    assert remote["spec"]["runtimePatches"] == [user]
    assert len(local["spec"]["runtimePatches"]) == 2


# -- batch Job: Kueue's job_multikueue_adapter_test.go, TestMultiKueueAdapter and
# -- TestDetermineStatusUpdate (the elastic cases are not ported: kqueue does not dispatch
# -- elastic Jobs, docs/multikueue.md) ------------------------------------------------------------

JOB = adapters.adapter_for("batch/v1", "Job")
RUNNING = {"type": "SuccessCriteriaMet", "status": "False"}
NOW = "2026-01-01T00:00:00Z"


def _job(*, suspend: bool = True, status: Obj | None = None, managed_by: str | None = CONTROLLER_NAME) -> Obj:
    spec: Obj = {
        "suspend": suspend,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
        "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u-1",
                                             "controller-uid": "u-1", "job-name": "job1",
                                             "batch.kubernetes.io/job-name": "job1", "app": "x"}},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}},
    }
    if managed_by is not None:
        spec["managedBy"] = managed_by
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "job1", "namespace": NS, "uid": "u-1", "resourceVersion": "1"},
            "spec": spec, "status": status or {}}


def test_job_sync_creates_missing_remote_job() -> None:
    assert JOB is not None
    remote = JOB.remote_object(_job(), "wl1", "origin1")
    assert "managedBy" not in remote["spec"] and "selector" not in remote["spec"]
    assert remote["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert remote["metadata"]["labels"] == {c.PREBUILT_WORKLOAD_LABEL: "wl1", ORIGIN_LABEL: "origin1"}
    assert remote["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] == "u-1"


@pytest.mark.parametrize(
    ("local", "remote", "finished", "want"),
    [
        pytest.param(_job(suspend=False), _job(suspend=False, status={"active": 2}), False,
                     {"active": 2}, id="sync intermediate status from remote job"),
        pytest.param(_job(), _job(status={"active": 2}), False, {"active": 2},
                     id="sync intermediate status from remote suspended job"),
        pytest.param(_job(suspend=False),
                     _job(status={"conditions": [{"type": "Complete", "status": "True"}]}), True,
                     {"conditions": [{"type": "Complete", "status": "True"}]},
                     id="sync final status from remote job"),
        pytest.param(_job(), _job(status={"conditions": [RUNNING]}), False,
                     {"conditions": [RUNNING]},
                     id="RemoteJobInProgress_LocalIsManagedButStillSuspended"),
        pytest.param(_job(suspend=False), _job(status={"conditions": [RUNNING]}), False,
                     {"conditions": [RUNNING]},
                     id="RemoteJobInProgress_LocalIsManagedAndUnsuspended"),
        pytest.param(_job(suspend=False),
                     _job(status={"conditions": [{"type": "Complete", "status": "True"}]}), True,
                     {"conditions": [{"type": "Complete", "status": "True"}]},
                     id="RemoteJobFinished_Completed"),
        pytest.param(_job(suspend=False),
                     _job(suspend=False,
                          status={"conditions": [{"type": "Failed", "status": "True"}]}), True,
                     {"conditions": [{"type": "Failed", "status": "True"}]},
                     id="RemoteJobFinished_Failed"),
        # Kueue's deferred branch: the manager's Job still suspended, its copy running: no
        # start time or active pods here yet, but a Suspended condition (Kubernetes 1.36).
        pytest.param(_job(), _job(suspend=False, status={"active": 1, "startTime": NOW}), False,
                     {"conditions": [{"type": "Suspended", "status": "True",
                                      "reason": "MultiKueueAdapter",
                                      "message": "Set by MultiKueue adapter",
                                      "lastTransitionTime": NOW, "lastProbeTime": NOW}]},
                     id="determineStatusUpdate deferred: local suspended, remote running"),
    ],
)
def test_job_determine_status_update(local: Obj, remote: Obj, finished: bool, want: Obj) -> None:
    assert determine_status(local, remote, finished, NOW) == want


def test_job_deferred_branch_keeps_an_existing_suspended_condition() -> None:
    assert JOB is not None
    cond = {"type": "Suspended", "status": "True", "reason": "JobSuspended"}
    local = _job(status={"conditions": [cond]})
    remote = _job(suspend=False, status={"active": 1})
    assert determine_status(local, remote, False, NOW) == {"conditions": [cond]}
    assert JOB.status_update(local, remote, remote_finished=False) is None


@pytest.mark.parametrize(
    ("managed_by", "problem"),
    [
        pytest.param("parent", "spec.managedBy is 'parent'",
                     id="job with wrong managedBy is not considered managed"),
        pytest.param(CONTROLLER_NAME, None, id="job managedBy multikueue"),
    ],
)
def test_job_is_managed(managed_by: str, problem: str | None) -> None:
    assert JOB is not None
    got = adapters.managed_problem(JOB, _job(managed_by=managed_by))
    assert (got is None) if problem is None else (got is not None and problem in got)


# -- the registry ----------------------------------------------------------------------------------


def test_every_ported_kind_is_dispatchable_and_declared_by_its_framework() -> None:
    by_kind = {(f.api_version, f.kind): f for f in integrations.frameworks()}
    for k in [*KINDS, Kind("job", "batch/v1", "Job", "jobs", CONTROLLER_NAME, False, {}, {})]:
        fw = by_kind[(k.api_version, k.kind)]
        assert fw.multikueue is adapters.adapter_for(k.api_version, k.kind)
        assert f"{k.kind} ({k.api_version})" in adapters.dispatchable_kinds()
        verbs = {(r.resources, r.verbs) for r in multikueue_rbac(fw)}
        assert verbs == {((k.plural,), ("get",)), ((f"{k.plural}/status",), ("update",))}


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("apps/v1", "StatefulSet"), ("apps/v1", "Deployment"),
     ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("ray.io/v1", "RayService"),
     ("sparkoperator.k8s.io/v1beta2", "SparkApplication")],
)
def test_kinds_that_are_not_dispatched(api_version: str, kind: str) -> None:
    assert adapters.adapter_for(api_version, kind) is None
    assert not multikueue_rbac(next(
        f for f in integrations.frameworks() if (f.api_version, f.kind) == (api_version, kind)
    ))


def test_a_pod_groups_workload_is_dispatched_from_its_first_pod() -> None:
    from kqueue.api.v1alpha1 import Workload
    from kqueue.controller.admission_checks.multikueue.controller import _controller_owner

    wl = Workload.model_validate({
        "apiVersion": c.API_VERSION, "kind": "Workload",
        "metadata": {"name": "g", "namespace": NS, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": p, "uid": f"u-{p}", "controller": False}
            for p in ("p1", "p2")
        ]},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 2, "template": {
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}]},
    })
    assert _controller_owner(wl) == ("v1", "Pod", "p1")
    pod = adapters.adapter_for("v1", "Pod")
    assert pod is not None and pod.managed_by_path is None


def test_docs_list_every_dispatchable_kind_with_its_managed_by() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "multikueue.md").read_text()
    rows = [line for line in text.splitlines() if line.strip().startswith("| ")]
    for a in adapters.ADAPTERS.values():
        row = [r for r in rows if re.search(rf"\b{a.kind}\b", r) and f"({a.api_version})" in r]
        assert row, f"docs/multikueue.md: no row for {a.kind} ({a.api_version})"
        if a.managed_by_path is None:
            # No managedBy: the row says what holds the manager's object instead.
            assert f"`{c.ADMISSION_GATE}`" in row[0], row[0]
            continue
        field = ".".join(a.managed_by_path)
        assert f"`{field}: {a.managed_by}`" in row[0], row[0]


class _Worker:
    """A worker's API client for the garbage collector: every kind lists one orphan of this
    manager, but MPIJobs are not served and TrainJobs may not be listed."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def list(self, resource: Resource, *, label_selector: str) -> list[Obj]:
        from kqueue.controller.kube import KubeError, NotFound

        assert label_selector == f"{ORIGIN_LABEL}=origin1"
        if resource.plural == "mpijobs":
            raise NotFound(what="list mpijobs", status=404, body={})
        if resource.plural == "trainjobs":
            raise KubeError(what="list trainjobs", status=403, body={"reason": "Forbidden"})
        if resource.plural == WORKLOADS.plural:
            return []
        return [{"metadata": {"name": f"gone-{resource.plural}", "namespace": NS,
                              "labels": {c.PREBUILT_WORKLOAD_LABEL: "wl-gone"}}}]

    async def delete(self, resource: Resource, name: str, *, namespace: str | None = None) -> None:
        self.deleted.append(resource.plural)


async def test_the_garbage_collector_lists_every_dispatchable_kind() -> None:
    from kqueue.controller.admission_checks.multikueue.gc import GarbageCollector
    from kqueue.controller.informer import Store

    worker = _Worker()
    gc = GarbageCollector(remotes=ReachableWorkers({"worker1": worker}),  # type: ignore[arg-type]
                          workloads=Store(), origin="origin1", interval=0)
    await gc.collect("worker1", worker)  # type: ignore[arg-type]
    want = [a.resource.plural for a in adapters.ADAPTERS.values()
            if a.resource.plural not in ("mpijobs", "trainjobs")]
    assert worker.deleted == want and "appwrappers" in want
