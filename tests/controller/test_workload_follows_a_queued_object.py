"""A suspended object changed while its Workload waits gets its Workload updated in place
(Kueue's ``updateWorkloadToMatchJob``): same Workload, same place in the queue, the pod sets
the object will run, and an ``UpdatedWorkload`` event naming what changed. A Workload holding
quota is never changed under its running pods (kqueue/api/integrations/matching.py says what
is compared)."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.config import Configuration
from kqueue.api.v1alpha1 import Workload
from kqueue.controller.integrations.job import FRAMEWORK
from kqueue.controller.integrations.job.elastic import DELETED_WORKLOAD, MismatchedWorkload
from kqueue.controller.integrations.reconciler import UPDATED_WORKLOAD
from kqueue.controller.resources import WORKLOADS
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_job_reconciler import World, job, workload

Obj = dict[str, Any]


async def _world(cluster: FakeCluster) -> World:
    # As the manager wires the Job integration (with its mismatch hook).
    world = await World.start(cluster)
    world.reconciler.job = FRAMEWORK.job_for(Configuration())  # type: ignore[assignment]
    world.reconciler.workload_hooks.append(
        MismatchedWorkload(kube=cluster.kube, events=world.events, slices=False).select
    )
    return world


def _cpu(j: Obj, cpu: str) -> Obj:
    for container in j["spec"]["template"]["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
    return j


def _count(j: Obj, count: int) -> Obj:
    j["spec"]["parallelism"] = j["spec"]["completions"] = count
    return j


def _stored(cluster: FakeCluster, wl: Workload) -> Workload:
    obj = cluster.server.get(WORKLOADS, wl.name, "team-a")
    assert obj is not None, f"Workload {wl.name} is gone"
    return Workload.model_validate(obj)


def _updated_events(world: World, name: str) -> list[str]:
    return [e[3] for e in world.events.recorded if e[2] == UPDATED_WORKLOAD and name in str(e)]


@pytest.mark.parametrize(
    ("change", "want_count", "want_cpu", "said"),
    [
        (lambda j: _cpu(j, "2"), 2, "2", "a pod's requests cpu 1 are now cpu 2"),
        (lambda j: _count(j, 4), 4, "1", "pod set main: 2 pods are now 4"),
    ],
    ids=["resources", "parallelism"],
)
async def test_a_suspended_job_changed_while_queued_has_its_workload_updated_in_place(
    cluster: FakeCluster, change: Any, want_count: int, want_cpu: str, said: str
) -> None:
    world = await _world(cluster)
    wl = workload(_cpu(job("edit", held=True), "1"))
    key = await world.add_job(change(_cpu(job("edit", held=True), "1")), wl)

    assert await world.reconciler(key) is None

    stored = _stored(cluster, wl)
    assert stored.metadata.uid == wl.metadata.uid  # the same Workload: its place in the queue
    [main] = stored.spec.pod_sets
    assert main.count == want_count
    assert main.pod_requests() == {"cpu": int(want_cpu) * 1000}
    assert not cluster.server.requests_to("DELETE", WORKLOADS)
    assert DELETED_WORKLOAD not in world.events.reasons("edit")
    [message] = _updated_events(world, "edit")
    assert message.startswith(
        f"Updated not matching Workload for suspended job: team-a/{wl.name} ("
    ), message
    assert said in message
    # Nothing else was done on the stale read (the held Job's templates are left alone).
    assert world.job_patches() == []

    # Settled: the next reconcile finds them matching and writes nothing more.
    await cluster.synced()
    world.forget_requests()
    assert await world.reconciler(key) is None
    assert not cluster.server.requests_to("PATCH", WORKLOADS)
    assert len(_updated_events(world, "edit")) == 1


async def test_a_workload_holding_quota_is_not_changed_under_its_job(
    cluster: FakeCluster,
) -> None:
    world = await _world(cluster)
    before = _cpu(job("runs", started=True), "1")
    wl = workload(before, admitted=2)
    key = await world.add_job(_cpu(job("runs", started=True), "2"), wl)

    assert await world.reconciler(key) is None

    assert _stored(cluster, wl).spec.pod_sets[0].pod_requests() == {"cpu": 1000}
    assert _updated_events(world, "runs") == []


async def test_a_job_that_is_not_suspended_is_left_to_the_hold_step(
    cluster: FakeCluster,
) -> None:
    """A queued Job found running (created before kqueue's webhooks) is suspended first; its
    Workload follows once the Job is suspended."""
    world = await _world(cluster)
    wl = workload(_cpu(job("early", gated=False), "1"))
    key = await world.add_job(_cpu(job("early", gated=False), "2"), wl)

    assert await world.reconciler(key) is None

    assert _stored(cluster, wl).spec.pod_sets[0].pod_requests() == {"cpu": 1000}
    assert [p["spec"]["suspend"] for p in world.job_patches()] == [True]
