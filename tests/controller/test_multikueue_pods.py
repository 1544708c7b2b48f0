"""Plain pods and pod groups under MultiKueue (docs/multikueue.md).

Kueue's ``pkg/controller/jobs/pod/pod_multikueue_adapter_test.go`` (``TestMultiKueueAdapter``)
as named table cases: a manager and a worker are in-process API servers
(tests/controller/fake_apiserver.py); "sync" is what the MultiKueue controller does for an
admitted copy (Kueue's ``SyncJob``: the missing copies made, the existing ones' status copied
back), "delete" its deletion of the remote objects. ``WorkloadIdentifierAnnotations`` is kqueue's
origin-UID annotation, always written next to the prebuilt-workload label.

Then the pod integration on each side: on the manager an admitted Workload placed on a worker
keeps its pods gated, and its eviction keeps them for the next dispatch; on the worker the
copies adopt the prebuilt Workload (never make one) and are released with its admission.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from kqueue.api import config as cfgmod
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import ORIGIN_LABEL, ORIGIN_UID_ANNOTATION
from kqueue.controller.admission_checks.multikueue import adapters
from kqueue.controller.admission_checks.multikueue.controller import MultiKueueController
from kqueue.controller.informer import Store
from kqueue.controller.integrations.pod.multikueue import ADAPTER
from kqueue.controller.resources import PODS, WORKLOADS
from kqueue.controller.workqueue import Requeue
from kqueue.engine import multikueue as mk
from tests.controller.fake_apiserver import FakeCluster, fake_cluster
from tests.controller.fakes import Events
from tests.controller.multikueue_workers import ReachableWorkers
from tests.controller.test_pod_reconciler import NS, Pods, gated, pod

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
WORKER = "worker1"
RUNNING_READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
SCHEDULING_GATED = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}


@pytest.fixture
async def manager() -> AsyncIterator[FakeCluster]:
    async for cl in fake_cluster():
        yield cl


@pytest.fixture
async def worker() -> AsyncIterator[FakeCluster]:
    async for cl in fake_cluster():
        yield cl


# -- Kueue's TestMultiKueueAdapter ----------------------------------------------------------------


def base(name: str = "test-pod", *, status: Obj | None = None, kueue_gate: bool = False) -> Obj:
    """Kueue's ``MakePod(name, ns)``: a plain pod naming a queue (``KueueSchedulingGate``: the
    admission gate)."""
    p: Obj = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                     "labels": {c.QUEUE_NAME_LABEL: "main"}, "annotations": {}},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    }
    if kueue_gate:
        p["spec"]["schedulingGates"] = [{"name": c.ADMISSION_GATE}]
    if status is not None:
        p["status"] = copy.deepcopy(status)
    return p


def group(size: int = 3) -> list[Obj]:
    """Kueue's ``MakePodGroupWrappers(3)``: the pods of one group."""
    pods = [base(f"test-pod-{i}") for i in range(size)]
    for p in pods:
        p["metadata"]["labels"][c.POD_GROUP_NAME_LABEL] = "test-group"
        p["metadata"]["annotations"][c.POD_GROUP_TOTAL_COUNT_ANNOTATION] = str(size)
    return pods


def on_worker(p: Obj, *, status: Obj | None = None) -> Obj:
    """Kueue's ``PrebuiltWorkloadLabel("wl1").Label(MultiKueueOriginLabel, "origin1")``: a copy."""
    out = copy.deepcopy(p)
    out["metadata"]["uid"] = f"remote-{p['metadata']['uid']}"
    out["metadata"]["labels"].update({c.PREBUILT_WORKLOAD_LABEL: "wl1", ORIGIN_LABEL: "origin1"})
    out["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] = p["metadata"]["uid"]
    if status is not None:
        out["status"] = copy.deepcopy(status)
    return out


def with_status(p: Obj, status: Obj) -> Obj:
    return {**copy.deepcopy(p), "status": copy.deepcopy(status)}




def controller(manager: FakeCluster, worker: FakeCluster) -> MultiKueueController:
    return MultiKueueController(
        configs=Store(), clusters=Store(), checks=Store(),
        remotes=ReachableWorkers({WORKER: worker.kube}),  # type: ignore[arg-type]
        kube=manager.kube, events=Events(),
        settings=cfgmod.MultiKueue(origin="origin1"),
    )


Operation = Callable[[MultiKueueController, FakeCluster, str], Awaitable[None]]


async def sync_job(ctrl: MultiKueueController, manager: FakeCluster, name: str) -> None:
    """Kueue's ``SyncJob(key, "wl1", "origin1")``: the copy admitted on the worker (the winner),
    its job made there and its status copied back."""
    local = await manager.kube.get(PODS, name, NS)
    wl = Workload.model_validate({
        "apiVersion": c.API_VERSION, "kind": "Workload",
        "metadata": {"name": "wl1", "namespace": NS},
        "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "image": "pause"}]}}}]},
    })
    plan = mk.Plan(winner=WORKER, sync_from=WORKER)
    await ctrl._carry_out(wl, ADAPTER, name, local, plan, {}, NOW)


async def delete_remote(ctrl: MultiKueueController, manager: FakeCluster, name: str) -> None:
    """Kueue's ``DeleteRemoteObject(key)``."""
    await ctrl._delete_remote(WORKER, "wl1", NS, ADAPTER, name)


@dataclass
class Case:
    managers_pods: list[Obj]
    worker_pods: list[Obj]
    operation: Operation
    key: str
    want_managers_pods: list[Obj]
    want_worker_pods: list[Obj] = field(default_factory=list)


CASES = {
    "sync creates missing remote pod": Case(
        [base()], [], sync_job, "test-pod",
        want_managers_pods=[base()], want_worker_pods=[on_worker(base())],
    ),
    "sync status from remote pod": Case(
        [base()], [on_worker(base(), status=RUNNING_READY)], sync_job, "test-pod",
        want_managers_pods=[base(status=RUNNING_READY)],
        want_worker_pods=[on_worker(base(), status=RUNNING_READY)],
    ),
    "keeps SchedulingGated condition on gated manager pod (avoids spurious autoscaler scale-up)":
    Case(
        [base(kueue_gate=True, status={"conditions": [SCHEDULING_GATED]})],
        [on_worker(base(), status={"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})],
        sync_job, "test-pod",
        want_managers_pods=[base(kueue_gate=True, status={
            "phase": "Pending", "conditions": [SCHEDULING_GATED]})],
        want_worker_pods=[on_worker(base(), status={"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})],
    ),
    "overwrites SchedulingGated once the remote pod is scheduled": Case(
        [base(kueue_gate=True, status={"conditions": [SCHEDULING_GATED]})],
        [on_worker(base(), status={"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]})],
        sync_job, "test-pod",
        want_managers_pods=[base(kueue_gate=True, status={"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]})],
        want_worker_pods=[on_worker(base(), status={"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]})],
    ),
    "remote pod is deleted": Case(
        [], [on_worker(base())], delete_remote, "test-pod", want_managers_pods=[],
    ),
    "sync creates missing remote pods of the group": Case(
        group(), [], sync_job, "test-pod-0",
        want_managers_pods=group(), want_worker_pods=[on_worker(p) for p in group()],
    ),
    "sync status from remote pod group": Case(
        group(),
        [on_worker(p) for p in group()[:2]] + [on_worker(group()[2], status=RUNNING_READY)],
        sync_job, "test-pod-0",
        want_managers_pods=[*group()[:2], with_status(group()[2], RUNNING_READY)],
        want_worker_pods=[on_worker(p) for p in group()[:2]]
        + [on_worker(group()[2], status=RUNNING_READY)],
    ),
    "remote pod group is deleted": Case(
        group(), [on_worker(p) for p in group()], delete_remote, "test-pod-0",
        want_managers_pods=group(),
    ),
}


def _compared(p: Obj) -> Obj:
    """What Kueue's case compares (the resourceVersion and the uid the API server assigns a
    new object aside); a status that says nothing counts as none."""
    meta = p["metadata"]
    return {
        "name": meta["name"], "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {}, "spec": p.get("spec") or {},
        "status": p.get("status") or {},
    }


def _pods(cluster: FakeCluster) -> list[Obj]:
    return sorted((_compared(p) for p in cluster.server.objects(PODS)), key=lambda p: p["name"])


@pytest.mark.parametrize("case", [pytest.param(v, id=k) for k, v in CASES.items()])
async def test_multikueue_adapter(case: Case, manager: FakeCluster, worker: FakeCluster) -> None:
    for p in case.managers_pods:
        manager.server.add(PODS, p)
    for p in case.worker_pods:
        worker.server.add(PODS, p)

    await case.operation(controller(manager, worker), manager, case.key)

    assert _pods(manager) == sorted(map(_compared, case.want_managers_pods), key=lambda p: p["name"])
    assert _pods(worker) == sorted(map(_compared, case.want_worker_pods), key=lambda p: p["name"])


async def test_pod_managed_by_multikueue() -> None:
    """Kueue's "pod managedBy multikueue": a pod has no managedBy, so any plain pod is."""
    assert adapters.managed_problem(ADAPTER, base()) is None
    assert not adapters.is_dispatched(ADAPTER, base())  # nothing on the pod says so


def test_a_pod_another_object_controls_is_not_dispatched() -> None:
    """kqueue: a StatefulSet's (Deployment's, LeaderWorkerSet's) pods are that kind's, which
    has no adapter; copied as plain pods they would run on the worker without it."""
    p = base("web-0")
    p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                         "name": "web", "uid": "u", "controller": True}]
    problem = adapters.managed_problem(ADAPTER, p)
    assert problem == (
        f"Pod {NS}/web-0 is controlled by StatefulSet web: only plain pods and pod groups are "
        "dispatched, and StatefulSet (apps/v1) has no MultiKueue adapter"
    )


def test_sync_creates_missing_remote_pod_workload_identifier_annotations_enabled() -> None:
    """Kueue's "sync creates missing remote pod, WorkloadIdentifierAnnotations enabled" (and its
    group case): the copy names the manager's pod by UID; the manager's pod is left as it was.
    kqueue's managed label is not copied: the worker's pod webhook holds the copy."""
    for local in [base(), *group()]:
        local["metadata"]["labels"][c.MANAGED_LABEL] = "true"
        before = copy.deepcopy(local)
        remote = ADAPTER.remote_object(local, "wl1", "origin1")
        assert remote["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] == local["metadata"]["uid"]
        assert c.MANAGED_LABEL not in remote["metadata"]["labels"]
        assert remote["metadata"]["labels"][c.PREBUILT_WORKLOAD_LABEL] == "wl1"
        assert "uid" not in remote["metadata"] and "status" not in remote
        assert local == before


def test_a_terminating_manager_pod_is_not_synced() -> None:
    """Kueue: "Skipping sync since the local pod is terminating"."""
    local = base()
    local["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    assert ADAPTER.status_update(local, on_worker(base(), status=RUNNING_READY), False) is None


# -- the pod integration on the manager and on the worker -----------------------------------------


async def _placed(world: Pods, name: str, cluster: str | None) -> None:
    doc = world.server.get(WORKLOADS, name, NS)
    assert doc is not None
    doc["status"]["clusterName"] = cluster
    world.server.add(WORKLOADS, doc)
    await world.cluster.synced()


async def test_manager_keeps_an_admitted_group_placed_on_a_worker_gated(
    cluster: FakeCluster,
) -> None:
    world = await Pods.start(cluster)
    members = [pod(f"g-{i}", group="g", total=2) for i in range(2)]
    await world.add(*members)
    await world.reconcile(members[0])
    await world.admit("g", 2)
    await _placed(world, "g", WORKER)

    await world.reconcile(members[0])

    assert all(gated(world.server.get(PODS, f"g-{i}", NS)) for i in range(2))
    # Placed nowhere, the same admission releases them (the check is not MultiKueue's).
    await _placed(world, "g", None)
    await world.reconcile(members[0])
    assert not any(gated(world.server.get(PODS, f"g-{i}", NS)) for i in range(2))


async def test_manager_keeps_the_pods_of_a_dispatched_workload_when_it_is_evicted(
    cluster: FakeCluster,
) -> None:
    """The copy was lost on the worker (the check went to Retry): the pods here never ran, so
    they stay, gated, and the Workload is requeued to be dispatched again."""
    world = await Pods.start(cluster)
    solo = pod("solo")
    await world.add(solo)
    await world.reconcile(solo)
    [wl] = world.workloads_in_api()
    name = wl["metadata"]["name"]
    await world.admit(name, 1)
    await _placed(world, name, WORKER)
    running_there = world.server.get(PODS, "solo", NS)
    assert running_there is not None
    running_there["status"] = {"phase": "Running"}  # copied back from the worker
    world.server.add(PODS, running_there)
    await world.set_condition(name, {
        "type": c.EVICTED, "status": "True", "reason": "AdmissionCheck",
        "message": "Workload evicted on worker cluster 'worker1'",
        "lastTransitionTime": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
    })

    await world.reconcile(solo)

    kept = world.server.get(PODS, "solo", NS)
    assert kept is not None and not kept["metadata"].get("deletionTimestamp") and gated(kept)
    requeued = world.server.get(WORKLOADS, name, NS)
    assert requeued is not None and "admission" not in requeued["status"]
    assert "clusterName" not in requeued["status"]


def _prebuilt(name: str, pod_sets: list[tuple[str, int]]) -> Obj:
    """The manager's Workload as MultiKueue copies it to a worker (no owner)."""
    return {
        "apiVersion": c.API_VERSION, "kind": "Workload",
        "metadata": {"name": name, "namespace": NS, "labels": {ORIGIN_LABEL: "origin1"}},
        "spec": {"queueName": "main", "podSets": [
            {"name": ps, "count": n, "template": {"spec": {"containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}
            for ps, n in pod_sets
        ]},
    }


def _copy(p: Obj, workload: str) -> Obj:
    out = copy.deepcopy(p)
    out["metadata"]["labels"].update({c.PREBUILT_WORKLOAD_LABEL: workload, ORIGIN_LABEL: "origin1"})
    return out


async def test_worker_a_copied_pod_adopts_its_prebuilt_workload_and_is_released(
    cluster: FakeCluster,
) -> None:
    world = await Pods.start(cluster)
    solo = _copy(pod("solo"), "pod-solo-abc12")
    await world.add(solo)

    # Its Workload not there yet: the copy waits, and makes none.
    assert await world.reconciler(f"pod:{NS}/solo") == Requeue(after=2.0)
    assert world.workloads_in_api() == []

    world.server.add(WORKLOADS, _prebuilt("pod-solo-abc12", [(c.DEFAULT_POD_SET_NAME, 1)]))
    await cluster.synced()
    await world.admit("pod-solo-abc12", 1)
    await world.reconcile(solo)

    [wl] = world.workloads_in_api()
    assert wl["metadata"]["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "Pod", "name": "solo", "uid": "uid-solo",
        "controller": True, "blockOwnerDeletion": True,
    }]
    assert not gated(world.server.get(PODS, "solo", NS))


async def test_worker_a_copied_pod_group_adopts_its_prebuilt_workload_and_is_released(
    cluster: FakeCluster,
) -> None:
    world = await Pods.start(cluster)
    members = [_copy(pod(f"g-{i}", group="g", total=2), "g") for i in range(2)]
    world.server.add(WORKLOADS, _prebuilt("g", [("main", 2)]))
    await cluster.synced()
    await world.admit("g", 2)
    await world.add(*members)

    await world.reconcile(members[0])

    [wl] = world.workloads_in_api()
    assert sorted(
        (r["uid"], r.get("controller", False)) for r in wl["metadata"]["ownerReferences"]
    ) == [("uid-g-0", False), ("uid-g-1", False)]
    assert not any(gated(world.server.get(PODS, f"g-{i}", NS)) for i in range(2))


async def test_worker_never_takes_a_prebuilt_workload_another_object_controls(
    cluster: FakeCluster,
) -> None:
    world = await Pods.start(cluster)
    taken = _prebuilt("wl1", [(c.DEFAULT_POD_SET_NAME, 1)])
    taken["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u-j", "controller": True}
    ]
    world.server.add(WORKLOADS, taken)
    solo = _copy(pod("solo"), "wl1")
    await world.add(solo)

    assert await world.reconciler(f"pod:{NS}/solo") == Requeue(after=2.0)
    [wl] = world.workloads_in_api()
    assert [r["uid"] for r in wl["metadata"]["ownerReferences"]] == ["u-j"]
    assert gated(world.server.get(PODS, "solo", NS))
