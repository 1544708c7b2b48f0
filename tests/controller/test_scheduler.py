"""The scheduler's writes against an in-memory API: pipelined cycles, rollbacks, hooks, reasons.

The fake API keeps resourceVersions (a stale write is a Conflict, as on a real server) and can
hold writes back, so a test sees what the scheduler does while its writes are in flight. The
informer is played by :meth:`FakeApi.sync`, which copies the API's objects into the store and
the engine, as the manager's handlers do.
"""

from __future__ import annotations

import asyncio
import copy
import json
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
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound
from kqueue.controller.metrics import Metrics
from kqueue.controller.pending_reasons import PendingReasons
from kqueue.controller.resources import Resource
from kqueue.controller.scheduler import Scheduler, SchedulerSettings
from kqueue.engine import adapt
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.readiness import PodsReadyConfig
from kqueue.engine.types import WorkloadKey

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


class FakeApi:
    """Workload status writes with optimistic concurrency; writes can be held at a gate."""

    def __init__(self, engine: Engine, store: Store[Workload]) -> None:
        self.engine = engine
        self.store = store
        self.objects: dict[str, Obj] = {}
        self.gate = asyncio.Event()
        self.gate.set()
        # Keys whose writes are held back (until release()) while the others go through.
        self.held: set[str] = set()
        self._released = asyncio.Event()
        self.writes: list[tuple[str, Obj]] = []
        self.in_flight: dict[str, int] = {}
        self.max_in_flight_per_key = 0
        self.fail: BaseException | None = None
        # Refuse every write that evicts (Evicted=True), as a server failing them would.
        self.refuse_evictions = False
        self.patches: list[tuple[str, Any]] = []

    def release(self) -> None:
        self.held.clear()
        self._released.set()

    def create(self, obj: Obj) -> None:
        key = f"{NS}/{obj['metadata']['name']}"
        self.objects[key] = copy.deepcopy(obj)
        self.sync()

    def sync(self) -> None:
        """The informer catches up: the store and the engine see what the API holds."""
        for key, obj in self.objects.items():
            if self.store.resource_version(key) == obj["metadata"]["resourceVersion"]:
                continue  # unchanged: the informer keeps the object it has
            wl = Workload.model_validate(obj)
            self.store._put(key, wl, obj["metadata"]["resourceVersion"])
            adapt.apply_workload(self.engine, wl, owner_labels=wl.metadata.labels)

    async def replace_status(self, _: Resource, obj: Obj, *, namespace: str | None = None) -> Obj:
        key = f"{namespace}/{obj['metadata']['name']}"
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        self.max_in_flight_per_key = max(self.max_in_flight_per_key, self.in_flight[key])
        try:
            await self.gate.wait()
            if key in self.held:
                await self._released.wait()
            if self.fail is not None:
                raise self.fail
            if self.refuse_evictions and is_evicted(obj):
                raise KubeError(what=key, status=500, body={"reason": "InternalError"})
            have = self.objects.get(key)
            if have is None:
                raise NotFound(what=key, status=404, body={})
            if have["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                raise Conflict(what=key, status=409, body={"reason": "Conflict"})
            new = copy.deepcopy(have)
            new["status"] = copy.deepcopy(obj.get("status") or {})
            new["metadata"]["resourceVersion"] = str(int(have["metadata"]["resourceVersion"]) + 1)
            self.objects[key] = new
            self.writes.append((key, new))
            return copy.deepcopy(new)
        finally:
            self.in_flight[key] -= 1

    async def write_status(
        self, resource: Resource, obj: Obj, *, namespace: str | None = None
    ) -> bytes:
        """As Kube.write_status: the answer as JSON text."""
        return json.dumps(await self.replace_status(resource, obj, namespace=namespace)).encode()

    async def patch(self, _: Resource, name: str, body: Any, **_kw: Any) -> Obj:
        """Recorded only (the tests read status writes)."""
        self.patches.append((name, body))
        return copy.deepcopy(self.objects[f"{NS}/{name}"])

    async def get(self, _: Resource, name: str, namespace: str | None = None) -> Obj:
        key = f"{namespace}/{name}"
        if key not in self.objects:
            raise NotFound(what=key, status=404, body={})
        return copy.deepcopy(self.objects[key])

    # The real get-modify-write loop, over this fake's get and replace_status.
    modify_status = Kube.modify_status

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
    cpu: str = "4",
    *,
    pods_ready: PodsReadyConfig | None = None,
    now: Now = lambda: NOW,
    **settings: Any,
) -> tuple[Scheduler, FakeApi, FakeEvents, Engine]:
    engine = Engine(pods_ready=pods_ready)
    engine.upsert_flavor(adapt.flavor(ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    engine.upsert_cluster_queue(adapt.cluster_queue(cluster_queue(cpu)))
    engine.upsert_local_queue(adapt.local_queue(LocalQueue.model_validate({
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": NS},
        "spec": {"clusterQueue": "cq"},
    })))
    store: Store[Workload] = Store()
    api = FakeApi(engine, store)
    events = FakeEvents()
    scheduler = Scheduler(
        engine=lambda: engine,
        workloads=store,
        kube=cast(Kube, api),
        events=cast(EventRecorder, events),
        metrics=Metrics(),
        releases_itself=lambda wl: True,
        now=now,
        settings=SchedulerSettings(**settings),
    )
    return scheduler, api, events, engine


def elastic_slices(api: FakeApi, events: FakeEvents) -> ElasticSlices:
    return ElasticSlices(
        engine=lambda: api.engine,
        workloads=api.store,
        priorities=lambda: cast(Any, None),
        kube=cast(Kube, api),
        events=cast(EventRecorder, events),
        metrics=Metrics(),
        now=lambda: NOW,
        sizing=JOB_SIZING,
    )


def key(name: str) -> WorkloadKey:
    return WorkloadKey(f"{NS}/{name}")


async def test_cycles_run_ahead_of_their_writes_without_overcommitting() -> None:
    scheduler, api, _, engine = make(cpu="4")
    for i, name in enumerate(("a", "b", "c")):
        api.create(workload(name, "2", created_s=i))
    api.gate.clear()  # the API holds every write
    for _ in range(3):
        await scheduler.run_once()
    # Both admissions were decided while the first write was still held: the second cycle
    # counted the first's quota, and the third found no room for c.
    assert engine.holds_quota(key("a")) and engine.holds_quota(key("b"))
    assert not engine.holds_quota(key("c"))
    assert api.admitted() == set()
    api.gate.set()
    await scheduler.drain()
    assert api.admitted() == {key("a"), key("b")}
    assert scheduler.admitted == 2


async def test_a_refused_admission_is_rolled_back_and_retried() -> None:
    scheduler, api, _, engine = make()
    api.create(workload("a", "1"))
    api.objects[key("a")]["metadata"]["resourceVersion"] = "7"  # someone wrote since we read
    await scheduler.run_once()
    await scheduler.drain()
    assert not engine.holds_quota(key("a"))
    assert api.admitted() == set()
    api.sync()
    await scheduler.run_once()
    await scheduler.drain()
    assert api.admitted() == {key("a")}


async def test_a_crashing_write_is_logged_and_rolled_back(caplog: pytest.LogCaptureFixture) -> None:
    scheduler, api, _, engine = make()
    api.create(workload("a", "1"))
    api.fail = RuntimeError("bug in the writer")
    with caplog.at_level(logging.ERROR, logger="kqueue.controller.decision_writer"):
        await scheduler.run_once()
        await scheduler.drain()
    assert not engine.holds_quota(key("a"))
    assert any("admission of Workload team/a failed" in r.getMessage() for r in caplog.records)
    assert any("bug in the writer" in (r.exc_text or "") for r in caplog.records)


async def test_stopping_cancels_writes_and_forgets_their_assumptions() -> None:
    scheduler, api, _, engine = make()
    api.create(workload("a", "1"))
    api.create(workload("b", "1", created_s=1))
    api.gate.clear()
    await scheduler.run_once()
    await scheduler.run_once()
    assert engine.holds_quota(key("a")) and engine.holds_quota(key("b"))
    await scheduler.stop_writes()
    assert not engine.holds_quota(key("a")) and not engine.holds_quota(key("b"))
    api.gate.set()
    assert api.admitted() == set()


async def test_hooks_run_after_their_cycles_writes_in_cycle_order() -> None:
    scheduler, api, _, _ = make()
    api.create(workload("a", "1"))
    seen: list[tuple[int, set[str]]] = []

    async def hook(_: Engine, result: CycleResult) -> None:
        seen.append((result.cycle, api.admitted()))

    scheduler.after_cycle.append(hook)
    api.gate.clear()
    await scheduler.run_once()
    api.create(workload("b", "1", created_s=1))
    await scheduler.run_once()
    await asyncio.sleep(0.01)
    assert seen == []  # writes held: no hook has run
    api.gate.set()
    await scheduler.drain()
    # Each run admitted one workload, then ran a cycle that admitted nothing (merged_cycles.py).
    assert [cycle for cycle, _ in seen] == [2, 4]
    assert key("a") in seen[0][1]
    assert {key("a"), key("b")} <= seen[1][1]


async def test_one_write_at_a_time_per_workload() -> None:
    scheduler, api, events, _ = make(cpu="1")
    api.create(workload("low", "1"))
    api.gate.clear()
    await scheduler.run_once()
    # A higher-priority workload preempts "low" while low's admission is still being written:
    # the eviction waits for the admission, then starts from what it wrote.
    api.create(workload("high", "1", priority=100, created_s=1))
    result = await scheduler.run_once()
    assert result  # the preemption was decided
    api.gate.set()
    await scheduler.drain()
    assert api.max_in_flight_per_key == 1
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


async def _settle(api: FakeApi, scheduler: Scheduler) -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)
    await scheduler.drain()


async def _cycle(scheduler: Scheduler, api: FakeApi) -> None:
    """One cycle (sweeping too), its writes and reasons done, seen by the informer."""
    scheduler.reasons._last_sweep = float("-inf")
    await scheduler.run_once()
    await _settle(api, scheduler)
    api.sync()


def _a_admitted_b_waiting(
    cpu: str = "1", **settings: Any
) -> tuple[Scheduler, FakeApi, FakeEvents, Engine]:
    scheduler, api, events, engine = make(cpu=cpu, reason_qps=100, reason_burst=10, **settings)
    size = "2" if cpu != "1" else "1"
    api.create(workload("a", size))
    api.create(workload("b", size, created_s=1))
    return scheduler, api, events, engine


async def test_a_blocked_head_gets_its_verdict_once_and_one_event() -> None:
    scheduler, api, events, _ = _a_admitted_b_waiting()
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


async def test_reasons_wait_while_decisions_are_written() -> None:
    scheduler, api, _, _ = _a_admitted_b_waiting()
    lane = await _lane(scheduler)
    try:
        api.gate.clear()
        await scheduler.run_once()  # admits a (held), b is queued behind it
        scheduler.reasons._last_sweep = float("-inf")
        await scheduler.run_once()
        await asyncio.sleep(0.05)
        assert api.in_flight.get(key("b"), 0) == 0  # nothing for b while a's admission waits
        api.gate.set()
        await _settle(api, scheduler)
    finally:
        lane.cancel()
    assert api.admitted() == {key("a")}
    assert len(api.reason_writes(key("b"))) == 1


# Five runs, each considering b after admitting a (the first) or not (merged_cycles.py): five messages.
@pytest.mark.parametrize(("interval_s", "writes"), [(0.0, 5), (10.0, 1)])
async def test_a_changing_message_is_not_rewritten_every_cycle(
    interval_s: float, writes: int
) -> None:
    scheduler, api, events, engine = _a_admitted_b_waiting("3", reason_interval_s=interval_s)
    lane = await _lane(scheduler)
    try:
        for quota in ("3", "2800m", "2600m", "2400m", "2200m"):
            # Less quota each time: b's message ("... N more needed") changes every cycle.
            engine.upsert_cluster_queue(adapt.cluster_queue(cluster_queue(quota)))
            await _cycle(scheduler, api)
    finally:
        lane.cancel()
    heads = [w for w in api.reason_writes(key("b")) if "more needed" in w["message"]]
    assert len(heads) == writes
    # One Pending event per reason, however often the message changed.
    pending_events = [e for e in events.recorded if e[0] == "b" and e[1] == "Pending"]
    assert len(pending_events) == 1


async def test_a_write_starts_from_our_last_write_when_the_informer_lags() -> None:
    scheduler, api, _, engine = _a_admitted_b_waiting()
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
    ttl_s: float, kept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kqueue.controller.decision_writer._WRITTEN_TTL_S", ttl_s)
    scheduler, api, _, _ = make(cpu="3")
    for i, name in enumerate(("a", "b", "c")):
        api.create(workload(name, "1", created_s=i))
        await scheduler.run_once()
        await scheduler.drain()
    assert api.admitted() == {key("a"), key("b"), key("c")}
    assert len(scheduler.writer._written) == kept


async def test_a_stopped_queue_shows_in_settled_workloads_at_once() -> None:
    scheduler, api, _, engine = _a_admitted_b_waiting()
    api.create(workload("c", "1", created_s=2))  # behind b: never a head, the sweep's to explain
    lane = await _lane(scheduler)
    try:
        for _ in range(2):
            await _cycle(scheduler, api)
        assert scheduler.reasons._settled.get(key("c")) is not None  # the sweep skips c from now on
        writes = len(api.reason_writes(key("c")))
        stopped = cluster_queue("1")
        stopped.spec.stop_policy = "Hold"
        engine.upsert_cluster_queue(adapt.cluster_queue(stopped))
        await _cycle(scheduler, api)
    finally:
        lane.cancel()
    # Within the per-workload interval, but a new reason: written at once.
    latest = api.reason_writes(key("c"))
    assert len(latest) == writes + 1
    assert latest[-1]["reason"] == c.SUSPENDED and "stopped" in latest[-1]["message"]


async def test_no_cycle_uses_a_replaced_slices_quota_before_its_replacement_is_written() -> None:
    """A cycle that admits a replacement slice takes the old slice's quota out of the engine
    at once; if the replacement's write then fails, only the after-cycle hook gives it back.
    A later cycle that ran before that hook would hand the old slice's quota (its pods still
    run) to someone else."""
    scheduler, api, events, engine = make(cpu="6")
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
    api.held.add(key("w0"))  # w0's write (and so its cycle's hooks) takes a while
    # One run: a cycle admits w0, the next s2 (finishing s1 in the engine), and the run stops
    # there (engine/merged_cycles.py: a replaced slice ends the batch).
    await scheduler.run_once()
    assert engine.holds_quota(key("s2")) and not engine.holds_quota(key("s1"))
    # The Job went back to its old size: s2 is deleted before its admission is written.
    del api.objects[key("s2")]
    api.store._delete(key("s2"))
    engine.delete_workload(key("s2"))
    for _ in range(5):
        await asyncio.sleep(0)  # s2's write fails (NotFound) and is rolled back
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
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Building the status can fail too (a bug): the assumption must go with it, or the engine
    # keeps the quota for an admission that never reaches the API, for the rest of the term.
    scheduler, api, _, engine = make()
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
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The engine counts a victim as leaving until its eviction is written or given up. A write
    # that crashes must give it up too, or no later cycle ever evicts it again: the victim
    # keeps its quota and the preemptor waits for it for the rest of the term.
    scheduler, api, _, engine = make(cpu="1")
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
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The lane restarts after a crash; a crash after it took a write slot must give the slot
    # back, or after as many crashes as there are slots the lane never writes again.
    scheduler, api, _, _ = _a_admitted_b_waiting()
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


async def test_a_second_cancellation_while_stopping_still_stops_every_write() -> None:
    # A term can be cancelled twice (the leadership ends while the process shuts down): the
    # second cancellation must not skip the stop, or a held write lands after the term.
    scheduler, api, _, engine = make()
    api.create(workload("a", "1"))
    api.gate.clear()
    scheduler_task = asyncio.ensure_future(scheduler.run())
    scheduler.trigger()
    for _ in range(50):
        await asyncio.sleep(0.01)
        if api.in_flight.get(key("a")):
            break
    assert engine.holds_quota(key("a")) and api.in_flight.get(key("a")) == 1
    scheduler_task.cancel()
    await asyncio.sleep(0)  # run() is stopping: it waits for its reason lane to end
    scheduler_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await scheduler_task
    api.gate.set()
    await asyncio.sleep(0.05)
    assert api.admitted() == set()
    assert not engine.holds_quota(key("a"))
