"""kube-scheduler preempts one pod of an admitted gang: kqueue evicts the whole Workload
(kqueue/controller/gang_disruption.py), on the fake API server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.events import EventRecorder
from kqueue.controller.gang_disruption import (
    PREEMPTED_BY_SCHEDULER,
    GangDisruptionWatcher,
    preempted_by_scheduler,
)
from kqueue.controller.integrations.owners import BY_OWNER, owner_uids
from kqueue.controller.readiness import BY_ANY_OWNER, ReadinessWatcher, any_owner_uids
from kqueue.controller.resources import PODS, WORKLOADS
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import Events, model
from tests.controller.test_job_reconciler import gated_pods, job, workload

Obj = dict[str, Any]
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _admitted(name: str, count: int) -> Obj:
    doc = workload(job(name, count=count), admitted=count).to_dict()
    doc["status"]["conditions"].append(
        {"type": c.ADMITTED, "status": "True", "reason": c.ADMITTED,
         "message": "admitted", "lastTransitionTime": "2026-03-01T11:00:00Z"}
    )
    return doc


def _running(pods: list[Obj], disrupted: dict[int, str]) -> list[Obj]:
    """The pods bound and running; pod ``i`` in ``disrupted`` marked DisruptionTarget=True
    with that reason (kube-scheduler's, before it deletes a victim)."""
    for i, pod in enumerate(pods):
        pod["spec"] = {"nodeName": f"n{i}", "containers": []}
        pod["status"] = {"phase": "Running"}
        if i in disrupted:
            pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                            "reason": disrupted[i], "message": "m",
                                            "lastTransitionTime": "2026-03-01T11:30:00Z"}]
    return pods


async def _watch(cluster: FakeCluster, workloads: list[Obj], pods: list[Obj]) -> tuple[
    GangDisruptionWatcher, Events
]:
    for w in workloads:
        cluster.server.add(WORKLOADS, w)
    for p in pods:
        cluster.server.add(PODS, p)
    wl_informer = await cluster.informer(
        WORKLOADS, model(Workload), indexes={BY_ANY_OWNER: any_owner_uids}
    )
    pod_informer = await cluster.informer(PODS, lambda o: o, indexes={BY_OWNER: owner_uids})
    events = Events()
    readiness = ReadinessWatcher(
        engine=lambda: cast(Any, None), workloads=wl_informer.store, pods=pod_informer.store,
        kube=cluster.kube, events=cast(EventRecorder, events), trigger=lambda: None,
        now=lambda: NOW,
    )
    watcher = GangDisruptionWatcher(
        workloads=wl_informer.store, workloads_of_pod=readiness.workloads_of,
        pods_of=readiness.pods_of, kube=cluster.kube, events=cast(EventRecorder, events),
        now=lambda: NOW,
    )
    for p in pod_informer.store.objects():
        watcher.on_pod("", p)
    return watcher, events


def _evicted(cluster: FakeCluster) -> Obj | None:
    [doc] = cluster.server.objects(WORKLOADS)
    return next((x for x in doc["status"]["conditions"] if x["type"] == c.EVICTED), None)


@pytest.mark.parametrize(
    ("case", "count", "disrupted", "want"),
    [
        ("one pod of a gang of 3 preempted by kube-scheduler", 3, {1: "PreemptionByScheduler"}, True),
        ("all pods of a gang preempted (workload-aware preemption)", 3,
         {0: "PreemptionByScheduler", 1: "PreemptionByScheduler", 2: "PreemptionByScheduler"}, True),
        ("a single-pod workload: its controller makes the pod again", 1,
         {0: "PreemptionByScheduler"}, False),
        ("a pod kqueue itself is stopping", 3, {0: "EvictedByKqueue"}, False),
        ("a node's pod eviction (taint manager)", 3, {0: "DeletionByTaintManager"}, False),
        ("no pod disrupted", 3, {}, False),
    ],
)
async def test_a_gang_with_a_pod_preempted_by_kube_scheduler_is_evicted_whole(
    cluster: FakeCluster, case: str, count: int, disrupted: dict[int, str], want: bool
) -> None:
    j = job("gang", count=count)
    doc = _admitted("gang", count)
    pods = _running(gated_pods(j, count), disrupted)
    watcher, events = await _watch(cluster, [doc], pods)
    # Only a pod kube-scheduler preempted wakes the watcher.
    assert len(watcher.queue) == (1 if "PreemptionByScheduler" in disrupted.values() else 0)
    assert await watcher(f"team-a/{doc['metadata']['name']}") is None
    await cluster.synced()
    evicted = _evicted(cluster)
    if not want:
        assert evicted is None, case
        assert events.recorded == []
        return
    assert evicted is not None and evicted["status"] == "True", case
    assert evicted["reason"] == PREEMPTED_BY_SCHEDULER
    victim = next(p for i, p in enumerate(pods) if i in disrupted)["metadata"]["name"]
    assert f"kube-scheduler preempted pod {victim}, 1 of the {count} pods" in evicted["message"]
    assert [r for _, _, r, _ in events.recorded] == [c.EVICTED]


def test_only_kube_schedulers_reason_is_a_preemption() -> None:
    def pod(reason: str, status: str = "True") -> Obj:
        return {"status": {"conditions": [{"type": "DisruptionTarget", "status": status,
                                           "reason": reason}]}}

    assert preempted_by_scheduler(pod("PreemptionByScheduler"))
    # A victim of an earlier admission: its condition predates this one's Admitted.
    stale = pod("PreemptionByScheduler")
    stale["status"]["conditions"][0]["lastTransitionTime"] = "2026-03-01T11:00:00Z"
    assert preempted_by_scheduler(stale, datetime(2026, 3, 1, 11, 0, tzinfo=UTC))
    assert not preempted_by_scheduler(stale, datetime(2026, 3, 1, 11, 5, tzinfo=UTC))
    assert not preempted_by_scheduler(pod("PreemptionByScheduler", "False"))
    assert not preempted_by_scheduler(pod("EvictionByEvictionAPI"))
    assert not preempted_by_scheduler({"status": {}})
