"""A workload admitted longer than spec.maximumExecutionTimeSeconds, through the scheduler and
the readiness hook: the eviction (DeactivatedDueToMaximumExecutionTimeExceeded), then
DeactivationTarget, the accumulated time cleared and spec.active false, and no readmission."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.readiness import ReadinessWatcher
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_scheduler import NOW, is_evicted, key, make, workload


async def test_exceeding_the_maximum_execution_time_deactivates_the_workload(cluster: FakeCluster) -> None:
    clock = [NOW]
    scheduler, api, events, engine = make(cluster, now=lambda: clock[0])
    watcher = ReadinessWatcher(
        engine=lambda: engine,
        workloads=api.store,
        pods=Store(),
        kube=api.kube,
        events=cast(EventRecorder, events),
        trigger=scheduler.trigger,
        now=lambda: clock[0],
    )
    scheduler.after_cycle.append(watcher.after_cycle)
    obj = workload("a", "1")
    obj["spec"]["maximumExecutionTimeSeconds"] = 60
    obj["status"] = {"accumulatedPastExecutionTimeSeconds": 20}
    api.create(obj)
    await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    assert engine.holds_quota(key("a"))
    # 20s used before: 40s left.
    assert engine.next_deadline() == NOW + timedelta(seconds=40)

    clock[0] = NOW + timedelta(seconds=39)
    await scheduler.run_once()
    await scheduler.drain()
    assert not is_evicted(api.objects[key("a")])

    clock[0] = NOW + timedelta(seconds=40)
    assert await scheduler.run_once()
    await scheduler.drain()
    # The informer sees the status writes but not yet the spec patch's event: spec.active is
    # still true in its copy.
    lagging = api.objects[key("a")]
    assert lagging["spec"]["active"] is False
    lagging["spec"]["active"] = True
    api.deliver(lagging)
    wl = Workload.model_validate(api.objects[key("a")])
    evicted = wl.condition(c.EVICTED)
    assert evicted is not None and evicted.is_true
    assert evicted.reason == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert evicted.message.startswith(
        "The workload is deactivated due to exceeding the maximum execution time: it exceeded "
        "its maximum execution time of 60s; admitted for 60s in total"
    )
    target = wl.condition(c.DEACTIVATION_TARGET)
    assert target is not None and target.is_true
    assert (target.reason, target.message) == (
        "MaximumExecutionTimeExceeded", "exceeding the maximum execution time"
    )
    assert wl.status.accumulated_past_execution_time_seconds is None
    assert api.patches == [("a", {"spec": {"active": False}})]
    assert [(r, m[:40]) for n, r, m in events.recorded if n == "a" and r == (
        "MaximumExecutionTimeExceeded"
    )] == [("MaximumExecutionTimeExceeded", evicted.message[:40])]

    # Released (the fake releases with the eviction) while spec.active is still true in the
    # informer's copy: the engine does not admit it again.
    clock[0] = NOW + timedelta(seconds=100)
    await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    assert not engine.holds_quota(key("a"))
    assert "admission" not in api.objects[key("a")]["status"]
