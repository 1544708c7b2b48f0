"""The scheduler's writes against the fake API server: pipelined cycles, rollbacks, hooks, reasons.

The scheduler writes through the real client. The server keeps resourceVersions (a stale write
is a Conflict) and can hold writes back, so a test sees what the scheduler does while its writes
are in flight. The informer is played by :meth:`Api.sync`, which copies the server's objects
into the store and the engine, as the manager's handlers do.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from kqueue.api.v1alpha1 import ClusterQueue, LocalQueue, ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.integrations.job.elastic import JOB_SIZING
from kqueue.controller.integrations.slices import ElasticSlices
from kqueue.controller.metrics import Metrics
from kqueue.controller.pending_reasons import PendingReasons
from kqueue.controller.resources import WORKLOADS, object_key
from kqueue.controller.scheduler import Scheduler, SchedulerSettings
from kqueue.engine import from_api
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.readiness import PodsReadyConfig
from kqueue.engine.types import WorkloadKey
from tests.controller.fake_apiserver import FakeCluster, eventually

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
NS = "team"


def workload(name: str, cpu: str, *, priority: int = 0, created_s: int = 0) -> Obj:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": f"2026-01-01T11:00:{created_s:02d}Z",
        },
        "spec": {
            "queueName": "lq",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
                        }
                    },
                }
            ],
        },
    }


def is_evicted(obj: Obj) -> bool:
    return any(
        cond["type"] == c.EVICTED and cond["status"] == "True"
        for cond in (obj.get("status") or {}).get("conditions") or []
    )


class Api:
    """The fake API server's Workloads, as these tests write and read them.

    The scheduler writes through the real client; the informer is played by :meth:`sync`,
    which copies what the server holds into the store and the engine, as the manager's
    handlers do, only when a test says so (so a test decides what the informer has seen).
    """

    def __init__(self, cluster: FakeCluster, engine: Engine, store: Store[Workload]) -> None:
        self.server = cluster.server
        self.kube = cluster.kube
        self.engine = engine
        self.store = store

    def create(self, obj: Obj) -> None:
        self.server.add(WORKLOADS, obj)
        self.sync()

    def sync(self) -> None:
        """The informer catches up: the store and the engine see what the API holds."""
        for obj in self.server.objects(WORKLOADS):
            if self.store.resource_version(object_key(obj)) != obj["metadata"]["resourceVersion"]:
                self.deliver(obj)  # else unchanged: the informer keeps the object it has

    def deliver(self, obj: Obj) -> None:
        """The informer hands this version of an object to the store and the engine."""
        wl = Workload.model_validate(obj)
        self.store._put(object_key(obj), wl, obj["metadata"]["resourceVersion"])
        from_api.apply_workload(self.engine, wl, owner_labels=wl.metadata.labels)

    @property
    def objects(self) -> dict[str, Obj]:
        return {object_key(o): o for o in self.server.objects(WORKLOADS)}

    def hold_writes(self, name: str | None = None) -> None:
        """Hold the status writes (of one workload, with ``name``) until :meth:`release`."""
        self.server.hold("PUT", WORKLOADS, name)

    def release(self) -> None:
        self.server.release()

    def refuse_evictions(self) -> None:
        """Refuse every write that evicts (Evicted=True), as a server failing them would."""
        self.server.fail("PUT", WORKLOADS, when=is_evicted)

    def in_flight(self, name: str) -> int:
        """Status writes of one workload the server is answering now."""
        return self.server.in_flight("PUT", WORKLOADS, name, NS)

    def max_in_flight_per_key(self) -> int:
        return max(
            self.server.max_in_flight("PUT", WORKLOADS, o["metadata"]["name"], NS)
            for o in self.server.objects(WORKLOADS)
        )

    @property
    def writes(self) -> list[tuple[str, Obj]]:
        """The status writes the server carried out: (workload key, what was written)."""
        return [
            (f"{r.target.namespace}/{r.name}", r.body)
            for r in self.server.requests_to("PUT", WORKLOADS, subresource="status")
            if r.ok
        ]

    @property
    def patches(self) -> list[tuple[str, Any]]:
        return [(r.name, r.body) for r in self.server.requests_to("PATCH", WORKLOADS) if r.ok]

    def admitted(self) -> set[str]:
        return {k for k, o in self.objects.items() if (o.get("status") or {}).get("admission")}

    def reason_writes(self, key: str) -> list[Obj]:
        out = []
        for k, obj in self.writes:
            for cond in (obj.get("status") or {}).get("conditions") or []:
                if k == key and cond["type"] == c.QUOTA_RESERVED and cond["status"] == "False":
                    out.append(cond)
        return out


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, obj: Obj, _type: str, reason: str, message: str) -> None:
        self.recorded.append((obj["metadata"]["name"], reason, message))


def cluster_queue(cpu: str) -> ClusterQueue:
    return ClusterQueue.model_validate({
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": "StrictFIFO",
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }],
        },
    })


def make(
    cluster: FakeCluster,
    cpu: str = "4",
    *,
    pods_ready: PodsReadyConfig | None = None,
    now: Now = lambda: NOW,
    **settings: Any,
) -> tuple[Scheduler, Api, FakeEvents, Engine]:
    engine = Engine(pods_ready=pods_ready)
    engine.upsert_flavor(from_api.flavor(ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    engine.upsert_cluster_queue(from_api.cluster_queue(cluster_queue(cpu)))
    engine.upsert_local_queue(from_api.local_queue(LocalQueue.model_validate({
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": NS},
        "spec": {"clusterQueue": "cq"},
    })))
    store: Store[Workload] = Store()
    api = Api(cluster, engine, store)
    events = FakeEvents()
    scheduler = Scheduler(
        engine=lambda: engine,
        workloads=store,
        kube=api.kube,
        events=cast(EventRecorder, events),
        metrics=Metrics(),
        releases_itself=lambda wl: True,
        now=now,
        settings=SchedulerSettings(**settings),
    )
    return scheduler, api, events, engine


def elastic_slices(api: Api, events: FakeEvents) -> ElasticSlices:
    return ElasticSlices(
        engine=lambda: api.engine,
        workloads=api.store,
        priorities=lambda: cast(Any, None),
        kube=api.kube,
        events=cast(EventRecorder, events),
        metrics=Metrics(),
        now=lambda: NOW,
        sizing=JOB_SIZING,
    )


def key(name: str) -> WorkloadKey:
    return WorkloadKey(f"{NS}/{name}")


async def test_cycles_run_ahead_of_their_writes_without_overcommitting(
    cluster: FakeCluster,
) -> None:
    scheduler, api, _, engine = make(cluster, cpu="4")
    for i, name in enumerate(("a", "b", "c")):
        api.create(workload(name, "2", created_s=i))
    api.hold_writes()  # the API holds every write
    for _ in range(3):
        await scheduler.run_once()
    # Both admissions were decided while the first write was still held: the second cycle
    # counted the first's quota, and the third found no room for c.
    assert engine.holds_quota(key("a")) and engine.holds_quota(key("b"))
    assert not engine.holds_quota(key("c"))
    assert api.admitted() == set()
    api.release()
    await scheduler.drain()
    assert api.admitted() == {key("a"), key("b")}
    assert scheduler.admitted == 2


async def test_a_refused_admission_is_rolled_back_and_retried(cluster: FakeCluster) -> None:
    scheduler, api, _, engine = make(cluster)
    api.create(workload("a", "1"))
    api.server.add(WORKLOADS, api.objects[key("a")])  # someone wrote since we read
    await scheduler.run_once()
    await scheduler.drain()
    assert not engine.holds_quota(key("a"))
    assert api.admitted() == set()
    api.sync()
    await scheduler.run_once()
    await scheduler.drain()
    assert api.admitted() == {key("a")}


async def test_a_crashing_write_is_logged_and_rolled_back(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler, api, _, engine = make(cluster)
    api.create(workload("a", "1"))

    async def crash(*_: object, **__: object) -> bytes:
        raise RuntimeError("bug in the writer")

    monkeypatch.setattr(api.kube, "write_status", crash)
    with caplog.at_level(logging.ERROR, logger="kqueue.controller.decision_writer"):
        await scheduler.run_once()
        await scheduler.drain()
    assert not engine.holds_quota(key("a"))
    assert any("admission of Workload team/a failed" in r.getMessage() for r in caplog.records)
    assert any("bug in the writer" in (r.exc_text or "") for r in caplog.records)


async def test_stopping_cancels_writes_and_forgets_their_assumptions(cluster: FakeCluster) -> None:
    scheduler, api, _, engine = make(cluster)
    api.create(workload("a", "1"))
    api.create(workload("b", "1", created_s=1))
    api.hold_writes()
    await scheduler.run_once()
    await scheduler.run_once()
    assert engine.holds_quota(key("a")) and engine.holds_quota(key("b"))
    await scheduler.stop_writes()
    assert not engine.holds_quota(key("a")) and not engine.holds_quota(key("b"))
    api.release()
    assert api.admitted() == set()


async def test_hooks_run_after_their_cycles_writes_in_cycle_order(cluster: FakeCluster) -> None:
    scheduler, api, _, _ = make(cluster)
    api.create(workload("a", "1"))
    seen: list[tuple[int, set[str]]] = []

    async def hook(_: Engine, result: CycleResult) -> None:
        seen.append((result.cycle, api.admitted()))

    scheduler.after_cycle.append(hook)
    api.hold_writes()
    await scheduler.run_once()
    api.create(workload("b", "1", created_s=1))
    await scheduler.run_once()
    await asyncio.sleep(0.01)
    assert seen == []  # writes held: no hook has run
    api.release()
    await scheduler.drain()
    # Each run admitted one workload, then ran a cycle that admitted nothing (merged_cycles.py).
    assert [cycle for cycle, _ in seen] == [2, 4]
    assert key("a") in seen[0][1]
    assert {key("a"), key("b")} <= seen[1][1]


async def test_one_write_at_a_time_per_workload(cluster: FakeCluster) -> None:
    scheduler, api, events, _ = make(cluster, cpu="1")
    api.create(workload("low", "1"))
    api.hold_writes()
    await scheduler.run_once()
    # A higher-priority workload preempts "low" while low's admission is still being written:
    # the eviction waits for the admission, then starts from what it wrote.
    api.create(workload("high", "1", priority=100, created_s=1))
    result = await scheduler.run_once()
    assert result  # the preemption was decided
    api.release()
    await scheduler.drain()
    assert api.max_in_flight_per_key() == 1
    evicted = [o for k, o in api.writes if k == key("low")][-1]
    assert any(
        cond["type"] == c.EVICTED and cond["status"] == "True"
        for cond in evicted["status"]["conditions"]
    )
    assert ("low", c.PREEMPTED) in {(name, reason) for name, reason, _ in events.recorded}


async def _lane(scheduler: Scheduler) -> asyncio.Task[None]:
    task = asyncio.get_running_loop().create_task(scheduler.reasons.run())
    await asyncio.sleep(0)
    return task


async def _settle(api: Api, scheduler: Scheduler) -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)
    await scheduler.drain()


async def _cycle(scheduler: Scheduler, api: Api) -> None:
    """One cycle (sweeping too), its writes and reasons done, seen by the informer."""
    scheduler.reasons._last_sweep = float("-inf")
    await scheduler.run_once()
    await _settle(api, scheduler)
    api.sync()


def _a_admitted_b_waiting(
    cluster: FakeCluster, cpu: str = "1", **settings: Any
) -> tuple[Scheduler, Api, FakeEvents, Engine]:
    scheduler, api, events, engine = make(cluster, cpu=cpu, reason_qps=100, reason_burst=10, **settings)
    size = "2" if cpu != "1" else "1"
    api.create(workload("a", size))
    api.create(workload("b", size, created_s=1))
    return scheduler, api, events, engine


async def test_a_blocked_head_gets_its_verdict_once_and_one_event(cluster: FakeCluster) -> None:
    scheduler, api, events, _ = _a_admitted_b_waiting(cluster)
    lane = await _lane(scheduler)
    try:
        for _ in range(4):
            await _cycle(scheduler, api)
    finally:
        lane.cancel()
    # The run that admitted a went on to a cycle that considered b (merged_cycles.py): b's first
    # write is that verdict, and later cycles with the same verdict write nothing.
    (verdict,) = api.reason_writes(key("b"))
    assert verdict["reason"] == c.WAITING_FOR_QUOTA and "more needed" in verdict["message"]
    assert len([e for e in events.recorded if e[0] == "b" and e[1] == "Pending"]) == 1


async def test_reasons_wait_while_decisions_are_written(cluster: FakeCluster) -> None:
    scheduler, api, _, _ = _a_admitted_b_waiting(cluster)
    lane = await _lane(scheduler)
    try:
        api.hold_writes()
        await scheduler.run_once()  # admits a (held), b is queued behind it
        scheduler.reasons._last_sweep = float("-inf")
        await scheduler.run_once()
        await asyncio.sleep(0.05)
        assert api.in_flight("b") == 0  # nothing for b while a's admission waits
        api.release()
        await _settle(api, scheduler)
    finally:
        lane.cancel()
    assert api.admitted() == {key("a")}
    assert len(api.reason_writes(key("b"))) == 1


# Five runs, each considering b after admitting a (the first) or not (merged_cycles.py): five messages.
@pytest.mark.parametrize(("interval_s", "writes"), [(0.0, 5), (10.0, 1)])
async def test_a_changing_message_is_not_rewritten_every_cycle(
    cluster: FakeCluster,
    interval_s: float, writes: int
) -> None:
    scheduler, api, events, engine = _a_admitted_b_waiting(cluster, "3", reason_interval_s=interval_s)
    lane = await _lane(scheduler)
    try:
        for quota in ("3", "2800m", "2600m", "2400m", "2200m"):
            # Less quota each time: b's message ("... N more needed") changes every cycle.
            engine.upsert_cluster_queue(from_api.cluster_queue(cluster_queue(quota)))
            await _cycle(scheduler, api)
    finally:
        lane.cancel()
    heads = [w for w in api.reason_writes(key("b")) if "more needed" in w["message"]]
    assert len(heads) == writes
    # One Pending event per reason, however often the message changed.
    pending_events = [e for e in events.recorded if e[0] == "b" and e[1] == "Pending"]
    assert len(pending_events) == 1


async def test_a_write_starts_from_our_last_write_when_the_informer_lags(
    cluster: FakeCluster,
) -> None:
    scheduler, api, _, engine = _a_admitted_b_waiting(cluster)
    lane = await _lane(scheduler)
    try:
        await scheduler.run_once()  # admits a; the sweep gives b a placeholder reason
        await _settle(api, scheduler)
        assert len(api.reason_writes(key("b"))) == 1
        # a finishes; the informer has not delivered b's new resourceVersion yet.
        engine.finish(key("a"))
        await scheduler.run_once()
        await scheduler.drain()
    finally:
        lane.cancel()
    assert api.admitted() == {key("a"), key("b")}


@pytest.mark.parametrize(("ttl_s", "kept"), [(0.0, 1), (60.0, 3)])
async def test_responses_are_kept_only_for_a_few_seconds(
    cluster: FakeCluster,
    ttl_s: float, kept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kqueue.controller.decision_writer._WRITTEN_TTL_S", ttl_s)
    scheduler, api, _, _ = make(cluster, cpu="3")
    for i, name in enumerate(("a", "b", "c")):
        api.create(workload(name, "1", created_s=i))
        await scheduler.run_once()
        await scheduler.drain()
    assert api.admitted() == {key("a"), key("b"), key("c")}
    assert len(scheduler.writer._written) == kept


async def test_a_stopped_queue_shows_in_settled_workloads_at_once(cluster: FakeCluster) -> None:
    scheduler, api, _, engine = _a_admitted_b_waiting(cluster)
    api.create(workload("c", "1", created_s=2))  # behind b: never a head, the sweep's to explain
    lane = await _lane(scheduler)
    try:
        for _ in range(2):
            await _cycle(scheduler, api)
        assert scheduler.reasons._settled.get(key("c")) is not None  # the sweep skips c from now on
        writes = len(api.reason_writes(key("c")))
        stopped = cluster_queue("1")
        stopped.spec.stop_policy = "Hold"
        engine.upsert_cluster_queue(from_api.cluster_queue(stopped))
        await _cycle(scheduler, api)
    finally:
        lane.cancel()
    # Within the per-workload interval, but a new reason: written at once.
    latest = api.reason_writes(key("c"))
    assert len(latest) == writes + 1
    assert latest[-1]["reason"] == c.SUSPENDED and "stopped" in latest[-1]["message"]


async def test_no_cycle_uses_a_replaced_slices_quota_before_its_replacement_is_written(
    cluster: FakeCluster,
) -> None:
    """A cycle that admits a replacement slice takes the old slice's quota out of the engine
    at once; if the replacement's write then fails, only the after-cycle hook gives it back.
    A later cycle that ran before that hook would hand the old slice's quota (its pods still
    run) to someone else."""
    scheduler, api, events, engine = make(cluster, cpu="6")
    slices = elastic_slices(api, events)
    scheduler.after_cycle.append(slices.after_cycle)
    api.create(workload("s1", "3"))
    await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    assert api.admitted() == {key("s1")}
    # Admitted next, in this order (StrictFIFO): w0, then s2 (s1 scaled up to 4 cpu), then x.
    api.create(workload("w0", "1", created_s=1))
    s2 = workload("s2", "4", created_s=2)
    s2["metadata"]["annotations"] = {c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION: key("s1")}
    api.create(s2)
    api.create(workload("x", "3", created_s=3))
    api.hold_writes("w0")  # w0's write (and so its cycle's hooks) takes a while
    # One run: a cycle admits w0, the next s2 (finishing s1 in the engine), and the run stops
    # there (engine/merged_cycles.py: a replaced slice ends the batch).
    await scheduler.run_once()
    assert engine.holds_quota(key("s2")) and not engine.holds_quota(key("s1"))
    # The Job went back to its old size: s2 is deleted before its admission is written.
    api.server.remove(WORKLOADS, "s2", NS)
    api.store._delete(key("s2"))
    engine.delete_workload(key("s2"))
    # s2's write fails (NotFound) and is rolled back
    await eventually(lambda: not scheduler.writer.writing(key("s2")), what="s2's write to end")
    nxt = asyncio.ensure_future(scheduler.run_once())
    await asyncio.sleep(0.05)
    api.release()
    await nxt
    await scheduler.drain()
    api.sync()
    # s1 still runs 3 cpu and w0 holds 1: x (3 cpu) does not fit in 6.
    assert api.admitted() == {key("s1"), key("w0")}
    assert engine.holds_quota(key("s1")) and not engine.holds_quota(key("x"))


async def test_an_admission_that_fails_before_its_write_is_rolled_back(
    cluster: FakeCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Building the status can fail too (a bug): the assumption must go with it, or the engine
    # keeps the quota for an admission that never reaches the API, for the rest of the term.
    scheduler, api, _, engine = make(cluster)
    api.create(workload("a", "1"))

    def broken(*_: object) -> Workload:
        raise ValueError("cannot build the admission")

    monkeypatch.setattr("kqueue.controller.decision_writer.workload_status.admit", broken)
    await scheduler.run_once()
    await scheduler.drain()
    assert api.admitted() == set()
    assert not engine.holds_quota(key("a"))
    monkeypatch.undo()
    await scheduler.run_once()
    await scheduler.drain()
    assert api.admitted() == {key("a")}


async def test_an_eviction_that_fails_unexpectedly_is_decided_again(
    cluster: FakeCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The engine counts a victim as leaving until its eviction is written or given up. A write
    # that crashes must give it up too, or no later cycle ever evicts it again: the victim
    # keeps its quota and the preemptor waits for it for the rest of the term.
    scheduler, api, _, engine = make(cluster, cpu="1")
    api.create(workload("low", "1"))
    await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    api.create(workload("high", "1", priority=100, created_s=1))

    def broken(*_: object, **__: object) -> Workload:
        raise ValueError("cannot build the eviction")

    monkeypatch.setattr("kqueue.controller.decision_writer.workload_status.evict", broken)
    assert await scheduler.run_once()  # preempts low; its write crashes
    await scheduler.drain()
    assert key("low") not in engine.cache.evicting
    monkeypatch.undo()
    await scheduler.run_once()
    await scheduler.drain()
    low = api.objects[key("low")]
    assert any(
        cond["type"] == c.EVICTED and cond["status"] == "True"
        for cond in low["status"]["conditions"]
    )


async def test_the_reason_lane_survives_crashes_between_its_slot_and_its_write(
    cluster: FakeCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The lane restarts after a crash; a crash after it took a write slot must give the slot
    # back, or after as many crashes as there are slots the lane never writes again.
    scheduler, api, _, _ = _a_admitted_b_waiting(cluster)
    await scheduler.run_once()  # admits a; b pends without a reason
    await scheduler.drain()
    api.sync()
    real = PendingReasons._update
    calls = 0

    def flaky(self: PendingReasons, k: WorkloadKey, head: bool) -> Any:
        nonlocal calls
        calls += 1
        if calls in (2, 4):  # the second look, after the slot was taken
            raise RuntimeError("bug while reading the reason again")
        return real(self, k, head)

    monkeypatch.setattr(PendingReasons, "_update", flaky)
    lane = await _lane(scheduler)
    try:
        for _ in range(3):
            scheduler.reasons.queue(key("b"), head=False)
            for _ in range(120):
                await asyncio.sleep(0.02)
                if api.reason_writes(key("b")) or lane.done():
                    break
    finally:
        lane.cancel()
    assert len(api.reason_writes(key("b"))) == 1


async def test_a_second_cancellation_while_stopping_still_stops_every_write(
    cluster: FakeCluster,
) -> None:
    # A term can be cancelled twice (the leadership ends while the process shuts down): the
    # second cancellation must not skip the stop, or a held write lands after the term.
    scheduler, api, _, engine = make(cluster)
    api.create(workload("a", "1"))
    api.hold_writes()
    scheduler_task = asyncio.ensure_future(scheduler.run())
    scheduler.trigger()
    for _ in range(50):
        await asyncio.sleep(0.01)
        if api.in_flight("a"):
            break
    assert engine.holds_quota(key("a")) and api.in_flight("a") == 1
    scheduler_task.cancel()
    await asyncio.sleep(0)  # run() is stopping: it waits for its reason lane to end
    scheduler_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await scheduler_task
    api.release()
    await asyncio.sleep(0.05)
    assert api.admitted() == set()
    assert not engine.holds_quota(key("a"))
