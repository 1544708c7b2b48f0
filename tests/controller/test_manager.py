"""The Manager on the shared fake API server: what it wires from the integration registry."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kqueue.api.config import Configuration
from kqueue.api.v1alpha1 import Workload, parse_object
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.collector import collector_paused
from kqueue.controller.integrations.pod.generic import PodJob
from kqueue.controller.integrations.pod.webhook import MUTATE_PATH as PLAIN_POD_PATH
from kqueue.controller.manager import Manager
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import JOBS, PODS, WORKLOADS
from kqueue.controller.topology import BOUND_PODS_FIELD_SELECTOR
from kqueue.controller.webhook_server.server import ADMISSION_API_VERSION
from kqueue.engine.types import ClusterQueueName, LocalQueueSpec, WorkloadKey, local_queue_key
from tests.controller.fake_apiserver import FakeCluster, eventually

Obj = dict[str, Any]
BOTH = ["batch/job", "pod"]


def config(frameworks: list[str], **extra: Any) -> Configuration:
    return Configuration.model_validate(
        {"integrations": {"frameworks": frameworks}, "leaderElection": {"leaderElect": False},
         **extra}
    )


@pytest.fixture
def manager(cluster: FakeCluster) -> Callable[..., Manager]:
    def make(frameworks: list[str], **extra: Any) -> Manager:
        return Manager(cluster.api, config(frameworks, **extra), metrics=Metrics())

    return make


@asynccontextmanager
async def running(m: Manager) -> AsyncIterator[None]:
    """The manager's informers, running and synced."""
    tasks = [asyncio.create_task(i.run()) for i in m.informers().values()]
    try:
        for informer in m.informers().values():
            await asyncio.wait_for(informer.wait_synced(), 5)
        yield
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def plain_pod(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "labels": {c.QUEUE_NAME_LABEL: "main", c.MANAGED_LABEL: "true"},
        },
        "spec": {
            "schedulingGates": [{"name": c.ADMISSION_GATE}],
            "containers": [{"name": "c", "image": "busybox"}],
        },
        "status": {"phase": "Pending"},
    }


def owned_workload(kind: str, api_version: str) -> Workload:
    wl = parse_object(
        {
            "apiVersion": c.API_VERSION,
            "kind": "Workload",
            "metadata": {
                "name": "w",
                "namespace": "team-a",
                "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": "o",
                                     "uid": "u", "controller": True}] if kind else [],
            },
            "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}]}}}]},
        },
        validate=False,
    )
    assert isinstance(wl, Workload)
    return wl


@pytest.mark.parametrize(
    ("frameworks", "wired", "generic"),
    [
        pytest.param(BOTH, ["batch/job", "pod"], ["batch/job"], id="all"),
        pytest.param(["batch/job"], ["batch/job"], ["batch/job"], id="jobs-only"),
        pytest.param(["pod"], ["pod"], [], id="pods-only"),
    ],
)
def test_only_enabled_integrations_are_wired(
    manager: Callable[..., Manager], frameworks: list[str], wired: list[str], generic: list[str]
) -> None:
    m = manager(frameworks)
    assert [fw.name for fw in m.frameworks] == wired
    # An informer per enabled integration that has objects of its own; none for plain pods,
    # whose members come from the pod informer.
    assert sorted(m.objects) == generic
    assert sorted(n for n in m.informers() if n.startswith("integration/")) == [
        f"integration/{n}" for n in generic
    ]
    # A work queue and a generic reconciler per enabled integration, plain pods included (a
    # composed job of pods), none for the others.
    assert sorted(m.job_reconcilers) == sorted(m.job_queues) == sorted(wired)
    pods = m.job_reconcilers.get("pod")
    assert (pods is not None and isinstance(pods.composable, PodJob)) == ("pod" in frameworks)


async def _review(m: Manager, path: str, obj: Obj) -> Obj:
    review = {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "AdmissionReview",
        "request": {
            "uid": "1",
            "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "team-a",
            "name": obj["metadata"]["name"],
            "object": obj,
        },
    }
    async with TestClient(TestServer(m.webhook_server.app())) as client:
        response = await client.post(path, data=json.dumps(review))
        assert response.status == 200
        answer: Obj = (await response.json())["response"]
    return answer


async def test_a_disabled_framework_s_webhooks_allow_unchanged(
    manager: Callable[..., Manager],
) -> None:
    pod = plain_pod("p")
    del pod["spec"]["schedulingGates"]
    pod["metadata"]["labels"] = {c.QUEUE_NAME_LABEL: "main"}

    off = await _review(manager(["batch/job"]), PLAIN_POD_PATH, pod)
    assert off["allowed"] is True and "patch" not in off

    on = await _review(manager(BOTH), PLAIN_POD_PATH, pod)
    assert on["allowed"] is True and on.get("patch")


@pytest.mark.parametrize(
    ("without_queue_name", "selector"),
    [
        pytest.param(False, c.QUEUE_NAME_LABEL, id="labelled-jobs-only"),
        pytest.param(True, None, id="every-job"),
    ],
)
async def test_each_generic_integration_lists_its_kind(
    cluster: FakeCluster, manager: Callable[..., Manager], without_queue_name: bool,
    selector: str | None,
) -> None:
    m = manager(BOTH, manageJobsWithoutQueueName=without_queue_name)
    async with running(m):
        [jobs_list] = [r for r in cluster.server.requests_to("GET", JOBS) if "watch" not in r.query]
        assert jobs_list.query.get("labelSelector") == selector
        lists = [r for r in cluster.server.requests_to("GET", PODS) if "watch" not in r.query]
        # kqueue's own pods, and (topology-aware scheduling) every pod bound to a node.
        assert sorted(
            (r.query.get("labelSelector") or "", r.query.get("fieldSelector") or "") for r in lists
        ) == [("", BOUND_PODS_FIELD_SELECTOR), (f"{c.MANAGED_LABEL}=true", "")]


async def test_leader_tasks_from_integrations_run_while_leading(
    cluster: FakeCluster, manager: Callable[..., Manager]
) -> None:
    cluster.server.add(PODS, plain_pod("solo"))
    m = manager(BOTH)
    async with running(m):
        leading = asyncio.create_task(m.lead())
        try:
            # The generic reconciler, run on the pod integration's composed jobs while
            # leading, makes the pod's Workload.
            await eventually(
                lambda: any(
                    r["uid"] == "uid-solo"
                    for w in cluster.server.objects(WORKLOADS)
                    for r in w["metadata"].get("ownerReferences") or []
                ),
                what="the plain pod's Workload",
            )
            assert m.leading
        finally:
            leading.cancel()
            await asyncio.gather(leading, return_exceptions=True)
    assert not m.leading


async def test_pod_and_workload_events_queue_the_pod_s_composed_job(
    cluster: FakeCluster, manager: Callable[..., Manager]
) -> None:
    member = plain_pod("worker-0")
    member["metadata"]["labels"][c.POD_GROUP_NAME_LABEL] = "g"
    member["metadata"]["annotations"] = {c.POD_GROUP_TOTAL_COUNT_ANNOTATION: "2"}
    cluster.server.add(PODS, member)
    cluster.server.add(PODS, plain_pod("solo"))
    m = manager(BOTH)
    queue = m.job_queues["pod"]

    async def drain() -> list[str]:
        keys = sorted([await queue.get() for _ in range(len(queue))])
        for key in keys:
            queue.done(key)
        return keys

    async with running(m):
        # The pod informer's events: each pod's job, a group once however many members.
        assert await drain() == ["group:team-a/g", "pod:team-a/solo"]
        wl = owned_workload("Pod", "v1")
        wl.metadata.owner_references[0].name = "worker-0"
        m._workload_changed(wl, None)
        assert await drain() == ["group:team-a/g"]
        m._enqueue_all_jobs()
        assert await drain() == ["group:team-a/g", "pod:team-a/solo"]


async def test_without_the_pod_framework_no_plain_pod_is_queued(
    cluster: FakeCluster, manager: Callable[..., Manager]
) -> None:
    cluster.server.add(PODS, plain_pod("solo"))
    m = manager(["batch/job"])
    async with running(m):
        leading = asyncio.create_task(m.lead())
        try:
            await asyncio.sleep(0.3)
        finally:
            leading.cancel()
            await asyncio.gather(leading, return_exceptions=True)
    assert cluster.server.objects(WORKLOADS) == []


@pytest.mark.parametrize(
    ("frameworks", "owner", "releases_itself"),
    [
        pytest.param(BOTH, ("Job", "batch/v1"), False, id="job-enabled"),
        pytest.param(["pod"], ("Job", "batch/v1"), True, id="job-disabled"),
        pytest.param(BOTH, ("Pod", "v1"), False, id="pod-enabled"),
        pytest.param(["batch/job"], ("Pod", "v1"), True, id="pod-disabled"),
        pytest.param(BOTH, ("", ""), True, id="no-owner"),
        pytest.param(BOTH, ("Job", "batch/v2"), True, id="another-version-of-the-kind"),
    ],
)
def test_a_workload_no_enabled_integration_runs_releases_itself(
    manager: Callable[..., Manager], frameworks: list[str], owner: tuple[str, str],
    releases_itself: bool,
) -> None:
    m = manager(frameworks)
    assert m._releases_itself(owned_workload(*owner)) is releases_itself


def _workload_doc(rv: str, cpu: str = "1", conditions: list[Obj] | None = None) -> Obj:
    return {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "uid": "u1", "resourceVersion": rv,
                     "labels": {"team": "a"}},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]},
        "status": {"conditions": conditions or []},
    }


def test_status_only_workload_events_keep_the_engine_pod_sets(
    manager: Callable[..., Manager],
) -> None:
    """The engine's pod sets are converted once per spec: a status-only event reuses them, a
    spec change converts again, and either way the engine holds what a fresh conversion gives."""
    from kqueue.engine import from_api

    m = manager(BOTH)
    pending = m.engine.queues.pending
    key = WorkloadKey("ns/w")

    def fresh(doc: Obj) -> object:
        wl = parse_object(doc, validate=False)
        assert isinstance(wl, Workload)
        return from_api.workload(wl, owner_labels=wl.metadata.labels)

    added = _workload_doc("1")
    m.workloads._apply("ADDED", json.loads(json.dumps(added)))
    first = pending[key].obj
    assert first == fresh(added)
    kept = m.workload_feed._pod_sets[key][1]

    pending_reason = [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                       "message": "waiting", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    status_only = _workload_doc("2", conditions=pending_reason)
    m.workloads._apply("MODIFIED", json.loads(json.dumps(status_only)))
    second = pending[key].obj
    assert m.workload_feed._pod_sets[key][1] is kept
    assert second == fresh(status_only)

    spec_change = _workload_doc("3", cpu="2", conditions=pending_reason)
    m.workloads._apply("MODIFIED", json.loads(json.dumps(spec_change)))
    third = pending[key].obj
    assert m.workload_feed._pod_sets[key][1] is not kept
    assert third == fresh(spec_change)
    assert third.pod_sets[0].requests == {"cpu": 2000}

    m.workloads._apply("DELETED", json.loads(json.dumps(spec_change)))
    assert key not in pending
    assert key not in m.workload_feed._pod_sets
    assert len(m.workload_reader) == 0


def test_a_rebuilt_engine_reuses_the_pod_sets_of_unchanged_specs(
    manager: Callable[..., Manager], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A term's rebuild gives the engine a fresh conversion gives, without reading again the
    specs whose pod sets the handlers kept."""
    from kqueue.engine import from_api

    m = manager(BOTH)
    key = WorkloadKey("ns/w")
    m.workloads._apply("ADDED", json.loads(json.dumps(_workload_doc("1"))))
    wl = m.workloads.store.get(key)
    assert wl is not None
    expected = m.engine.queues.pending[key].obj
    assert expected == from_api.workload(wl, owner_labels=wl.metadata.labels)

    converted: list[object] = []
    real = from_api.workload_pod_sets

    def counting(spec: Any, *rest: Any) -> Any:
        converted.append(spec)
        return real(spec, *rest)

    monkeypatch.setattr(from_api, "workload_pod_sets", counting)
    assert m.rebuild_engine().queues.pending[key].obj == expected
    assert converted == []

    # Pod sets kept for another spec object are not trusted: converted again, same result.
    m.workload_feed._pod_sets[key] = (wl.spec.model_copy(), m.workload_feed._pod_sets[key][1])
    assert m.rebuild_engine().queues.pending[key].obj == expected
    assert converted == [wl.spec]


def _local_queue_doc(namespace: str, name: str, cluster_queue: str, rv: str = "1") -> Obj:
    return {"apiVersion": "kqueue.io/v1alpha1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
            "spec": {"clusterQueue": cluster_queue}}


async def test_queue_changes_refresh_the_local_queues_of_those_cluster_queues(
    manager: Callable[..., Manager],
) -> None:
    """The LocalQueues refreshed for a ClusterQueue change are found through an index: those
    submitting to the changed ClusterQueues, in key order, following spec changes."""
    m = manager(BOTH)
    for ns, name, cq in [("b", "q", "cq-1"), ("a", "q", "cq-2"), ("a", "p", "cq-1"),
                         ("c", "q", "cq-3")]:
        m.local_queues._apply("ADDED", _local_queue_doc(ns, name, cq))
    queue = m.status_queue

    def drained() -> list[str]:
        out = list(queue._queue)
        queue._queue.clear()
        queue._dirty.clear()
        return out

    drained()
    m._queues_changed([ClusterQueueName("cq-1"), ClusterQueueName("cq-2")])
    assert drained() == ["cq:cq-1", "cq:cq-2", "lq:a/p", "lq:a/q", "lq:b/q"]
    m.local_queues._apply("MODIFIED", _local_queue_doc("c", "q", "cq-1", rv="2"))
    drained()
    m._queues_changed([ClusterQueueName("cq-1")])
    assert drained() == ["cq:cq-1", "lq:a/p", "lq:b/q", "lq:c/q"]
    m._queues_changed([ClusterQueueName("cq-3")])
    assert drained() == ["cq:cq-3"]


@pytest.mark.parametrize(
    ("change", "upserted"),
    [
        pytest.param({"status": {"pendingWorkloads": 3}}, False, id="status only"),
        pytest.param({"spec": {"clusterQueue": "cq-2"}}, True, id="another ClusterQueue"),
        pytest.param({"spec": {"clusterQueue": "cq-1", "stopPolicy": "Hold"}}, True,
                     id="stopped"),
    ],
)
def test_local_queue_events_update_the_engine_when_its_view_changes(
    manager: Callable[..., Manager], change: Obj, upserted: bool,
) -> None:
    m = manager(BOTH)
    m.local_queues._apply("ADDED", _local_queue_doc("a", "q", "cq-1"))
    calls: list[LocalQueueSpec] = []
    real = m.engine.upsert_local_queue

    def spy(spec: LocalQueueSpec) -> None:
        calls.append(spec)
        real(spec)

    m.engine.upsert_local_queue = spy  # type: ignore[method-assign]
    doc = {**_local_queue_doc("a", "q", "cq-1", rv="2"), **change}
    m.local_queues._apply("MODIFIED", doc)
    assert bool(calls) is upserted
    lq = m.engine.local_queue(local_queue_key("a", "q"))
    assert lq is not None
    assert lq.cluster_queue == doc["spec"]["clusterQueue"]


async def test_a_first_term_ends_the_collector_s_start_up_pause(
    cluster: FakeCluster, manager: Callable[..., Manager]
) -> None:
    # Without leader election the term starts right after the sync, on the consistent first
    # list (no relist). The collector, paused while the caches were filled, runs again once the
    # term's engine is frozen, after the queues' first statuses.
    m = manager(BOTH)
    m._heap_pause.enter_context(collector_paused())
    try:
        async with running(m):
            assert not gc.isenabled()
            leading = asyncio.create_task(m.lead())
            try:
                await eventually(lambda: m._terms == 1, what="the term's engine")
                # Once the queue statuses are written (or SETTLE_HEAP_WITHIN), not before.
                await eventually(gc.isenabled, what="the collector back on")
                assert m.status_queue.is_shut_down or len(m.status_queue) == 0
                lists = [
                    r.query.get("resourceVersion")
                    for r in cluster.server.requests_to("GET", WORKLOADS)
                    if "watch" not in r.query
                ]
                assert lists == [None]
            finally:
                leading.cancel()
                await asyncio.gather(leading, return_exceptions=True)
    finally:
        m._heap_pause.close()
        gc.enable()
