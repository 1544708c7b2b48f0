"""The MultiKueue controller's sync against in-process API servers (a manager and two
workers, tests/controller/fake_apiserver.py): what it counts
(``kqueue_multikueue_workloads_dispatched_total`` per copy sent, ``..._admitted_total`` once per
admission on a worker, Kueue's ReportMultiKueueWorkloadDispatched/Admitted) and the check's
message on the way. The real thing across control planes: tests/controller_e2e/test_multikueue.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from kqueue.api import config as cfgmod
from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    AdmissionCheckState,
    MultiKueueCluster,
    MultiKueueConfig,
    Workload,
    parse_object,
)
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME
from kqueue.controller.admission_checks.multikueue.controller import MultiKueueController
from kqueue.controller.informer import Store
from kqueue.controller.kube import Kube
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import JOBS, WORKLOADS
from tests.controller.fake_apiserver import FakeCluster, fake_cluster
from tests.controller.multikueue_workers import ReachableWorkers
from tests.controller.test_metrics import value

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
T = "2026-01-01T12:00:00Z"
WORKERS = ("w1", "w2")




class _Events:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def record(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.messages.append(message)


@pytest.fixture
async def manager() -> AsyncIterator[FakeCluster]:
    async for c in fake_cluster():
        yield c


@pytest.fixture
async def w1() -> AsyncIterator[FakeCluster]:
    async for c in fake_cluster():
        yield c


@pytest.fixture
async def w2() -> AsyncIterator[FakeCluster]:
    async for c in fake_cluster():
        yield c


def _admitted_status() -> Obj:
    return {
        "conditions": [
            {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": T}
            for t in ("QuotaReserved", "Admitted")
        ],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
    }


async def _setup(manager: FakeCluster) -> tuple[Workload, AdmissionCheck]:
    job = await manager.kube.create(JOBS, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"managedBy": CONTROLLER_NAME, "suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}},
    }, namespace="ns")
    await manager.kube.create(WORKLOADS, {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "job-j", "namespace": "ns", "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": "j",
            "uid": job["metadata"]["uid"], "controller": True}]},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}]},
    }, namespace="ns")

    def reserve(obj: Obj) -> Obj:
        status = _admitted_status()
        status["conditions"] = status["conditions"][:1]
        return {**obj, "status": status}

    await manager.kube.modify_status(WORKLOADS, "job-j", reserve, namespace="ns")
    check = parse_object({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "AdmissionCheck", "metadata": {"name": "mk"},
        "spec": {"controllerName": CONTROLLER_NAME, "parameters": {
            "apiGroup": "kqueue.io", "kind": "MultiKueueConfig", "name": "cfg"}},
    })
    assert isinstance(check, AdmissionCheck)
    return await _read(manager), check


async def _read(cluster: FakeCluster) -> Workload:
    return Workload.model_validate(await cluster.kube.get(WORKLOADS, "job-j", "ns"))


def _controller(manager: FakeCluster, workers: dict[str, Kube], metrics: Metrics,
                events: _Events) -> MultiKueueController:
    configs: Store[MultiKueueConfig] = Store()
    cfg = parse_object({"apiVersion": "kqueue.io/v1alpha1", "kind": "MultiKueueConfig",
                        "metadata": {"name": "cfg"}, "spec": {"clusters": list(WORKERS)}})
    configs._put("cfg", cfg, "1")
    return MultiKueueController(
        configs=configs, clusters=Store[MultiKueueCluster](), checks=Store(),
        remotes=ReachableWorkers(workers),  # type: ignore[arg-type]
        kube=manager.kube, events=events,  # type: ignore[arg-type]
        settings=cfgmod.MultiKueue(), metrics=metrics,
    )


async def test_dispatched_per_copy_and_admitted_once_per_admission(
    manager: FakeCluster, w1: FakeCluster, w2: FakeCluster
) -> None:
    metrics, events = Metrics(), _Events()
    mkc = _controller(manager, {"w1": w1.kube, "w2": w2.kube}, metrics, events)
    wl, check = await _setup(manager)
    state = AdmissionCheckState(name="mk", state="Pending", message="", last_transition_time=NOW)

    synced = await mkc.sync(wl, check, state, NOW)
    # A copy on each worker (AllAtOnce), each counted; the check says where it went.
    for worker in (w1, w2):
        assert (await worker.kube.get(WORKLOADS, "job-j", "ns"))["spec"]["queueName"] == "q"
    for name in WORKERS:
        assert value(metrics, "kqueue_multikueue_workloads_dispatched_total",
                     cluster_queue="cq", cluster=name) == 1.0
    assert value(metrics, "kqueue_multikueue_workloads_admitted_total",
                 cluster_queue="cq", cluster="w2") is None
    assert (synced.state.state, synced.state.message) == (
        "Pending", "Dispatched to worker clusters 'w1', 'w2'; the first to admit the workload runs it"
    )
    assert (await _read(manager)).status.nominated_cluster_names == list(WORKERS)

    # w2 admits its copy: it wins, once.
    await w2.kube.modify_status(
        WORKLOADS, "job-j", lambda o: {**o, "status": _admitted_status()}, namespace="ns"
    )
    synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
    assert synced.state.state == "Ready"
    assert (await _read(manager)).status.cluster_name == "w2"
    synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
    assert synced.state.state == "Ready"
    assert value(metrics, "kqueue_multikueue_workloads_admitted_total",
                 cluster_queue="cq", cluster="w2") == 1.0
    assert value(metrics, "kqueue_multikueue_workloads_admitted_total",
                 cluster_queue="cq", cluster="w1") is None
    # Nothing more was dispatched; the copy on w1 went, the job went to w2.
    assert value(metrics, "kqueue_multikueue_workloads_dispatched_total",
                 cluster_queue="cq", cluster="w1") == 1.0
    assert w1.server.objects(WORKLOADS) == []
    assert (await w2.kube.get(JOBS, "j", "ns"))["spec"].get("managedBy") is None
    assert "Dispatched to worker cluster 'w2'" in events.messages


async def test_copies_go_to_every_worker_at_once(
    manager: FakeCluster, w1: FakeCluster, w2: FakeCluster
) -> None:
    """A worker slow to answer does not hold back the copy to the next one: the copies of one
    workload go out together (one after another, ten workers cost ten round trips)."""
    metrics, events = Metrics(), _Events()
    mkc = _controller(manager, {"w1": w1.kube, "w2": w2.kube}, metrics, events)
    wl, check = await _setup(manager)
    state = AdmissionCheckState(name="mk", state="Pending", message="", last_transition_time=NOW)
    w1.server.hold("POST", WORKLOADS)
    syncing = asyncio.create_task(mkc.sync(wl, check, state, NOW))
    try:
        copied: list[Obj] = []

        async def on_w2() -> bool:
            copied[:] = await w2.kube.list(WORKLOADS, namespace="ns")
            return bool(copied)

        for _ in range(200):
            if await on_w2():
                break
            await asyncio.sleep(0.01)
        assert copied, "the copy to w2 waited for w1's answer"
        assert not syncing.done()
    finally:
        w1.server.release()
    await asyncio.wait_for(syncing, 5)
    assert (await w1.kube.get(WORKLOADS, "job-j", "ns"))["spec"]["queueName"] == "q"
