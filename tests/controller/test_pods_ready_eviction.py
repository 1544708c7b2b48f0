"""A PodsReady timeout whose eviction write never lands: nothing of it stays behind.

The engine counts the requeue when it decides the timeout; if the scheduler gives the eviction
up, that count is taken back and no ``requeueState`` is written, so the timeout decided again
is the same requeue, not the next one (a workload is deactivated only after
``backoffLimitCount`` requeues that really happened).
"""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.readiness import ReadinessWatcher
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.readiness import PodsReadyConfig
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_scheduler import NOW, is_evicted, key, make, workload


async def test_a_timeout_whose_eviction_is_given_up_is_not_counted(cluster: FakeCluster) -> None:
    clock = [NOW]
    cfg = PodsReadyConfig(
        timeout=timedelta(seconds=10), backoff_base_seconds=5, backoff_limit_count=1,
        block_admission=False,
    )
    scheduler, api, events, engine = make(cluster, pods_ready=cfg, now=lambda: clock[0])
    watcher = ReadinessWatcher(
        engine=lambda: engine,
        workloads=api.store,
        pods=Store(),
        kube=api.kube,
        events=cast(EventRecorder, events),
        trigger=scheduler.trigger,
        now=lambda: clock[0],
    )
    written_evictions: list[tuple[int, int | None, bool]] = []

    async def seen(_: Engine, result: CycleResult) -> None:
        written_evictions.extend((result.cycle, e.requeue_count, e.deactivate) for e in result.evicted)

    scheduler.after_cycle += [watcher.after_cycle, seen]
    api.create(workload("a", "1"))
    await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    assert engine.holds_quota(key("a"))

    # The pods never become ready: the timeout is decided, and every eviction write fails.
    api.refuse_evictions()
    clock[0] = NOW + timedelta(seconds=11)
    assert await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    obj = api.objects[key("a")]
    assert not is_evicted(obj) and obj["status"].get("admission")
    assert "requeueState" not in obj["status"]  # no requeue happened
    assert written_evictions == []
    assert engine.readiness.count(key("a")) == 0
    assert key("a") not in engine.cache.evicting  # decided again by a later cycle

    # The API takes writes again: the timeout decided again is the first requeue (with a
    # limit of 1 a second one would deactivate the workload), counted once.
    api.server.clear_faults()
    assert await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    assert [(n, d) for _, n, d in written_evictions] == [(1, False)]
    wl = Workload.model_validate(api.objects[key("a")])
    evicted = wl.condition(c.EVICTED)
    assert evicted is not None and evicted.reason == c.EVICTED_BY_PODS_READY_TIMEOUT
    assert wl.status.requeue_state is not None and wl.status.requeue_state.count == 1
    assert wl.condition(c.DEACTIVATION_TARGET) is None
    assert engine.readiness.count(key("a")) == 1
