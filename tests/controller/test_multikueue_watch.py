"""The manager follows its copies on the workers by watching them (Kueue's ``establishWatcher``
in multikueuecluster.go), not by polling: one watch per worker of the Workloads labelled with
this manager's origin, one per job kind once a job was placed there; their events queue the
manager's Workload; the controller reads the copies from them; a watch that fails makes the
worker unusable (``Active=False``) as a failed probe does. Against in-process API servers
(tests/controller/fake_apiserver.py) reached through real kubeconfigs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from kqueue.api import config as cfgmod
from kqueue.api.v1alpha1 import (
    AdmissionCheckState,
    MultiKueueCluster,
    MultiKueueConfig,
    parse_object,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import ORIGIN_LABEL
from kqueue.controller.admission_checks.multikueue.clusters import (
    CONNECTION_FAILED,
    RemoteClusters,
)
from kqueue.controller.admission_checks.multikueue.controller import (
    RESYNC_SECONDS,
    MultiKueueController,
)
from kqueue.controller.admission_checks.multikueue.remote_writes import WorkerBackoff
from kqueue.controller.informer import Store
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import JOBS, WORKLOADS
from tests.controller.fake_apiserver import (
    FakeApiServer,
    FakeCluster,
    eventually,
    fake_cluster,
    gone_event,
)
from tests.controller.test_multikueue_dispatch import _admitted_status, _Events, _read, _setup

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
ORIGIN = "mgr-a"


class _Manager:
    """The manager's API as RemoteClusters writes it: the clusters' Active condition."""

    async def modify_status(self, *args: object, **kwargs: object) -> None:
        pass


@dataclass
class _Worker:
    server: FakeApiServer
    url: str


async def _serve_worker() -> tuple[TestServer, _Worker]:
    server = FakeApiServer()

    async def version(_: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "37", "gitVersion": "v1.37.2"})

    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_route("*", "/{tail:.*}", server._handle)
    test_server = TestServer(app)
    await test_server.start_server()
    return test_server, _Worker(server, str(test_server.make_url("")).rstrip("/"))


@pytest.fixture
async def worker() -> AsyncIterator[_Worker]:
    test_server, w = await _serve_worker()
    try:
        yield w
    finally:
        await w.server.shutdown()
        await test_server.close()


@pytest.fixture
async def manager() -> AsyncIterator[FakeCluster]:
    async for m in fake_cluster():
        yield m


def _remotes(tmp_path: Path, workers: dict[str, str], keys: list[str]) -> RemoteClusters:
    clusters: Store[MultiKueueCluster] = Store()
    for name, url in workers.items():
        kubeconfig = tmp_path / f"{name}.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": {"server": url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": "u"}}],
        }))
        mkc = parse_object({
            "apiVersion": "kqueue.io/v1alpha1", "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {"clusterSource": {"kubeConfig": {
                "locationType": "Path", "location": str(kubeconfig)}}},
        })
        assert isinstance(mkc, MultiKueueCluster)
        clusters._put(name, mkc, "1")
    return RemoteClusters(
        clusters=clusters, kube=_Manager(),  # type: ignore[arg-type]
        namespace="kqueue-system", now=lambda: datetime.now(UTC),
        origin=ORIGIN, on_copy=keys.append,
    )


def _copy(name: str, origin: str = ORIGIN) -> Obj:
    return {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "labels": {ORIGIN_LABEL: origin}},
        "spec": {"queueName": "q", "podSets": []},
    }


async def _connected(remotes: RemoteClusters, name: str) -> None:
    await remotes.probe(name)
    assert remotes.client(name) is not None, remotes.connections[name].problem
    await eventually(lambda: remotes.watched(name, WORKLOADS) is not None,
                     what=f"the watch of {name}'s Workloads to list")


async def test_copy_and_job_events_queue_the_managers_workload(
    worker: _Worker, tmp_path: Path
) -> None:
    keys: list[str] = []
    remotes = _remotes(tmp_path, {"w1": worker.url}, keys)
    try:
        await _connected(remotes, "w1")
        # Listed is not yet watching: the watch request follows the list.
        await eventually(lambda: len(worker.server.watch_requests) == 1, what="the watch")
        (watch,) = worker.server.watch_requests
        assert watch.query["labelSelector"] == f"{ORIGIN_LABEL}={ORIGIN}"
        worker.server.add(WORKLOADS, _copy("job-a"))
        worker.server.add(WORKLOADS, _copy("job-other", origin="another-manager"))
        await eventually(lambda: "ns/job-a" in keys, what="the copy's event")
        # The job kind is watched once asked for; its events name the job's Workload.
        remotes.watch("w1", JOBS)
        await eventually(lambda: remotes.watched("w1", JOBS) is not None, what="jobs listed")
        worker.server.add(JOBS, {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "a", "namespace": "ns", "labels": {
                ORIGIN_LABEL: ORIGIN, c.PREBUILT_WORKLOAD_LABEL: "job-a"}},
            "spec": {},
        })
        await eventually(lambda: keys.count("ns/job-a") == 2, what="the job's event")
        worker.server.remove(WORKLOADS, "job-a", "ns")
        await eventually(lambda: keys.count("ns/job-a") == 3, what="the deletion's event")
        assert "ns/job-other" not in keys
        store = remotes.watched("w1", WORKLOADS)
        assert store is not None and list(store) == []
    finally:
        await remotes.close()


async def test_the_watch_relists_on_410_and_goes_on(worker: _Worker, tmp_path: Path) -> None:
    keys: list[str] = []
    worker.server.watches.append([gone_event()])
    remotes = _remotes(tmp_path, {"w1": worker.url}, keys)
    try:
        await _connected(remotes, "w1")
        await eventually(lambda: len(worker.server.list_requests) == 2, what="the relist")
        worker.server.add(WORKLOADS, _copy("job-a"))
        await eventually(lambda: keys == ["ns/job-a"], what="the event after the relist")
        assert remotes.client("w1") is not None
    finally:
        await remotes.close()


async def test_a_failing_watch_makes_the_worker_inactive_until_it_works(
    worker: _Worker, tmp_path: Path
) -> None:
    """Kueue marks the cluster disconnected when its watch ends; here a watch that cannot list
    (refused: 403) feeds the same Active=False a failed probe does, naming the watch."""
    worker.server.fail("GET", WORKLOADS, code=403, times=1)
    remotes = _remotes(tmp_path, {"w1": worker.url}, [])
    try:
        await remotes.probe("w1")
        conn = remotes.connections["w1"]
        watch = conn.watches[WORKLOADS].informer
        await eventually(lambda: watch.failure is not None, what="the list to fail")
        await remotes.probe("w1")
        assert remotes.client("w1") is None
        assert conn.problem is not None
        reason, message = conn.problem
        assert reason == CONNECTION_FAILED
        assert "watch of" in message and "403" in message, message
        assert remotes.lost_for("w1") is not None
        # The next list works (the informer's backoff): the worker is usable again.
        await eventually(lambda: watch.failure is None, what="the list to work again")
        await remotes.probe("w1")
        assert remotes.client("w1") is not None
        assert remotes.lost_for("w1") is None
    finally:
        await remotes.close()


BACKOFF_S = 3.0


async def test_copies_are_read_from_the_watches_and_synced_on_their_events(
    manager: FakeCluster, tmp_path: Path
) -> None:
    """The sync reads no copy from a worker once the worker is watched, and comes back on an
    event, with only the slow resync as a timer."""
    servers = [await _serve_worker() for _ in range(2)]
    keys: list[str] = []
    remotes = _remotes(tmp_path, {f"w{i + 1}": w.url for i, (_, w) in enumerate(servers)}, keys)
    try:
        for name in ("w1", "w2"):
            await _connected(remotes, name)
        configs: Store[MultiKueueConfig] = Store()
        cfg = parse_object({"apiVersion": "kqueue.io/v1alpha1", "kind": "MultiKueueConfig",
                            "metadata": {"name": "cfg"}, "spec": {"clusters": ["w1", "w2"]}})
        configs._put("cfg", cfg, "1")
        mkc = MultiKueueController(
            configs=configs, clusters=Store[MultiKueueCluster](), checks=Store(),
            remotes=remotes, kube=manager.kube, events=_Events(),  # type: ignore[arg-type]
            settings=cfgmod.MultiKueue(origin=ORIGIN), metrics=Metrics(),
            # Long enough that the second sync below comes inside it on a loaded machine (0.2 s
            # ran out between the two at nice 19 beside a cold CI run).
            backoff=WorkerBackoff(initial=BACKOFF_S, maximum=BACKOFF_S),
        )
        wl, check = await _setup(manager)
        state = AdmissionCheckState(name="mk", state="Pending", message="", last_transition_time=NOW)
        w1, w2 = (w.server for _, w in servers)
        # A copy refused leaves no event: the workload comes back when w1's backoff is over,
        # not at the resync; until then nothing is sent to w1 again.
        w1.fail("POST", WORKLOADS, code=500, times=1)
        synced = await mkc.sync(wl, check, state, NOW)
        assert synced.again_after is not None and 0 < synced.again_after <= BACKOFF_S
        assert w1.objects(WORKLOADS) == []
        posts = len(w1.requests_to("POST", WORKLOADS))
        synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
        assert synced.again_after is not None and synced.again_after <= BACKOFF_S
        assert len(w1.requests_to("POST", WORKLOADS)) == posts
        await asyncio.sleep(synced.again_after)
        synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
        assert synced.state.state == "Pending"
        assert synced.again_after == RESYNC_SECONDS
        await eventually(lambda: keys.count("ns/job-j") >= 2, what="both copies' events")
        # w2 admits its copy: an event, and the sync that follows it places the workload.
        copy = w2.get(WORKLOADS, "job-j", "ns")
        assert copy is not None
        w2.add(WORKLOADS, {**copy, "status": _admitted_status()})
        await eventually(lambda: keys.count("ns/job-j") >= 3, what="the admission's event")
        await eventually(
            lambda: (s := remotes.watched("w2", WORKLOADS)) is not None
            and bool((s.get("ns/job-j") or {}).get("status")),
            what="the watch to hold the admitted copy",
        )
        synced = await mkc.sync(await _read(manager), check, synced.state, NOW)
        assert synced.state.state == "Ready"
        assert (await _read(manager)).status.cluster_name == "w2"
        assert w1.objects(WORKLOADS) == []
        assert w2.get(JOBS, "j", "ns") is not None
        # No copy was ever read from a worker: the watches held them.
        for server in (w1, w2):
            assert [r for r in server.requests_to("GET", WORKLOADS) if r.target.name] == []
    finally:
        await remotes.close()
        for test_server, w in servers:
            await w.server.shutdown()
            await test_server.close()
