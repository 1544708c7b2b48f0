"""Kueue's LocalQueue metric family and the workload timings, after sequences of events on the
controller's test doubles (the scheduler against its fake API, the queue status reconciler)."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any, cast

from kqueue.api.v1alpha1 import ClusterQueue, LocalQueue, ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.metric_labels import eviction_labels
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS
from kqueue.controller.status import QueueStatusReconciler
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_metrics import samples
from tests.controller.test_queue_status import Events
from tests.controller.test_scheduler import NOW, NS, key, make, workload

Obj = dict[str, Any]
LQ = {"name": "lq", "namespace": NS}


def value(m: Metrics, metric: str, /, **labels: str) -> float | None:
    """The sample's value (positional-only: LocalQueue series have a label ``name``)."""
    return samples(m).get((metric, tuple(sorted(labels.items()))))


def with_class(doc: Obj, name: str, priority: int) -> Obj:
    doc["spec"]["priorityClassRef"] = {"group": "kqueue.io", "kind": "WorkloadPriorityClass", "name": name}
    doc["spec"]["priority"] = priority
    return doc


def condition(type_: str, status: str, reason: str, at: timedelta) -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": (NOW + at).isoformat().replace("+00:00", "Z"),
    }


# -- admissions and evictions (the scheduler) -------------------------------------------------


async def test_an_admission_counts_in_its_cluster_queue_and_local_queue_with_its_priority_class(
    cluster: FakeCluster,
) -> None:
    scheduler, api, _, _ = make(cluster, cpu="4")
    m = scheduler._metrics
    api.create(with_class(workload("a", "1", created_s=0), "high", 100))
    api.create(workload("b", "1", created_s=30))
    for _ in range(2):  # one head per ClusterQueue per cycle
        await scheduler.run_once()
    await scheduler.drain()
    # Created 11:00:00 and 11:00:30, admitted at NOW (12:00).
    assert value(m, "kqueue_admitted_workloads_total", cluster_queue="cq", priority_class="high") == 1
    assert value(m, "kqueue_admitted_workloads_total", cluster_queue="cq", priority_class="") == 1
    assert value(m, "kqueue_quota_reserved_workloads_total", cluster_queue="cq", priority_class="") == 1
    lq_high = {**LQ, "priority_class": "high"}
    assert value(m, "kqueue_local_queue_admitted_workloads_total", **lq_high) == 1
    assert value(m, "kqueue_local_queue_quota_reserved_workloads_total", **lq_high) == 1
    assert value(m, "kqueue_local_queue_admission_wait_time_seconds_sum", **lq_high) == 3600
    assert (
        value(m, "kqueue_local_queue_quota_reserved_wait_time_seconds_sum", **LQ, priority_class="")
        == 3570
    )


async def test_evicted_once_counts_a_workload_once_per_reason_and_cause(
    cluster: FakeCluster,
) -> None:
    scheduler, api, _, engine = make(cluster, cpu="2")
    m = scheduler._metrics
    api.create(workload("low", "2", priority=0))
    await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    # A higher-priority workload preempts "low" (LowerPriority within the ClusterQueue).
    api.create(workload("high", "2", priority=10, created_s=1))
    await scheduler.run_once()
    await scheduler.drain()
    evicted = {"cluster_queue": "cq", "reason": "Preempted", "underlying_cause": "", "priority_class": ""}
    assert value(m, "kqueue_evicted_workloads_total", **evicted) == 1
    assert value(m, "kqueue_evicted_workloads_once_total", **evicted) == 1
    assert value(
        m, "kqueue_preempted_workloads_total", preempting_cluster_queue="cq", reason="InClusterQueue"
    ) == 1
    assert value(
        m, "kqueue_local_queue_evicted_workloads_total",
        **LQ, reason="Preempted", underlying_cause="", priority_class="",
    ) == 1
    # The same workload preempted again (released, admitted, preempted once more): the total
    # counts both, "once" only the first.
    victim = api.objects[key("low")]
    m.workload_evicted(Workload.model_validate(victim), "cq", c.EVICTED_BY_PREEMPTION)
    assert value(m, "kqueue_evicted_workloads_total", **evicted) == 2
    assert value(m, "kqueue_evicted_workloads_once_total", **evicted) == 1
    # Another reason for the same workload is a first time again.
    m.workload_evicted(Workload.model_validate(victim), "cq", c.EVICTED_BY_CLUSTER_QUEUE_STOPPED)
    stopped = {**evicted, "reason": "ClusterQueueStopped"}
    assert value(m, "kqueue_evicted_workloads_once_total", **stopped) == 1
    del engine


def test_eviction_reasons_are_labelled_as_kueue_labels_them() -> None:
    wl = Workload.model_validate(workload("a", "1"))
    cases = {
        "Preempted": ("Preempted", ""),
        "ClusterQueueStopped": ("ClusterQueueStopped", ""),
        "DeactivatedDueToMaximumExecutionTimeExceeded": ("Deactivated", "MaximumExecutionTimeExceeded"),
        "PodsReadyTimeout": ("PodsReadyTimeout", "WaitForStart"),
    }
    for reason, want in cases.items():
        assert eviction_labels(wl, reason) == want, reason
    doc = workload("b", "1")
    doc["status"] = {"conditions": [condition(c.PODS_READY, "False", "WaitForRecovery", timedelta())]}
    assert eviction_labels(Workload.model_validate(doc), "PodsReadyTimeout") == (
        "PodsReadyTimeout", "WaitForRecovery",
    )


# -- preemption skips (engine result -> gauge) -------------------------------------------------


def cq_in_cohort(name: str, cpu: str) -> ClusterQueue:
    return ClusterQueue.model_validate({
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": "all",
            "namespaceSelector": {},
            "preemption": {"reclaimWithinCohort": "Any"},
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }],
        },
    })


def test_two_queues_reclaiming_the_same_victim_count_one_preemption_skip() -> None:
    engine = Engine()
    engine.upsert_flavor(from_api.flavor(ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    for name, cpu in (("a", "2"), ("b", "0"), ("c", "2")):
        engine.upsert_cluster_queue(from_api.cluster_queue(cq_in_cohort(name, cpu)))
        engine.upsert_local_queue(from_api.local_queue(LocalQueue.model_validate({
            "apiVersion": "kqueue.io/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": f"lq-{name}", "namespace": NS},
            "spec": {"clusterQueue": name},
        })))

    def submit(name: str, queue: str, cpu: str, created_s: int) -> None:
        doc = workload(name, cpu, created_s=created_s)
        doc["spec"]["queueName"] = queue
        from_api.apply_workload(engine, Workload.model_validate(doc))

    submit("borrower", "lq-b", "4", 0)  # b borrows all of a's and c's quota
    assert [a.workload for a in engine.schedule(NOW).admitted] == [key("borrower")]
    submit("reclaim-a", "lq-a", "2", 1)
    submit("reclaim-c", "lq-c", "2", 2)
    result = engine.schedule(NOW)
    # Both heads would preempt the borrower; the second one in the cycle is skipped.
    (preempt,) = result.preempted
    # preempted_workloads_total is labelled with the preemptor's ClusterQueue, as Kueue's.
    assert (preempt.cluster_queue, preempt.preemptor_cluster_queue) in {("b", "a"), ("b", "c")}
    m = Metrics()
    m.preemption_skips(result.preemption_skips)
    skips = {
        labels[0][1]: v
        for (name, labels), v in samples(m).items()
        if name == "kqueue_admission_cycle_preemption_skips"
    }
    assert sorted(skips.values()) == [0, 1]
    assert set(skips) == {"a", "c"}
    # The next cycle considers the skipped queue again without a conflict: back to 0.
    m.preemption_skips([(q, 0) for q in skips])
    assert value(m, "kqueue_admission_cycle_preemption_skips", cluster_queue="c") == 0


# -- PodsReady timings ---------------------------------------------------------------------------


def admitted_workload(*conditions: Obj, requeued: Obj | None = None) -> Workload:
    doc = with_class(workload("a", "1", created_s=0), "high", 1)
    doc["status"] = {
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1}]},
        "conditions": [
            condition(c.QUOTA_RESERVED, "True", "QuotaReserved", timedelta(seconds=10)),
            condition(c.ADMITTED, "True", "Admitted", timedelta(seconds=10)),
            *conditions,
            *([requeued] if requeued else []),
        ],
    }
    return Workload.model_validate(doc)


def test_time_to_ready_is_observed_on_the_first_readiness_after_admission_only() -> None:
    m = Metrics()
    starting = admitted_workload(condition(c.PODS_READY, "False", "WaitForStart", timedelta(seconds=10)))
    m.pods_ready(starting, NOW + timedelta(seconds=25))
    cq = {"cluster_queue": "cq", "priority_class": "high"}
    lq = {**LQ, "priority_class": "high"}
    # Created 11:00:00 (an hour before NOW), admitted NOW+10s, ready NOW+25s.
    assert value(m, "kqueue_ready_wait_time_seconds_sum", **cq) == 3625
    assert value(m, "kqueue_admitted_until_ready_wait_time_seconds_sum", **cq) == 15
    assert value(m, "kqueue_local_queue_ready_wait_time_seconds_count", **lq) == 1
    assert value(m, "kqueue_local_queue_admitted_until_ready_wait_time_seconds_sum", **lq) == 15
    # A pod failed and came back (WaitForRecovery in this admission): not a start.
    recovering = admitted_workload(
        condition(c.PODS_READY, "False", "WaitForRecovery", timedelta(seconds=40))
    )
    m.pods_ready(recovering, NOW + timedelta(seconds=60))
    assert value(m, "kqueue_ready_wait_time_seconds_count", **cq) == 1
    # Requeued after an eviction at NOW+100s and admitted again at NOW+10s of a later clock:
    # the ready wait counts from the requeue. A PodsReady left from the previous admission is
    # older than this one, so the pods are starting.
    again = admitted_workload(
        condition(c.PODS_READY, "True", "PodsReady", timedelta(seconds=-30)),
        requeued=condition(c.REQUEUED, "True", "Preempted", timedelta(seconds=4)),
    )
    m.pods_ready(again, NOW + timedelta(seconds=12))
    assert value(m, "kqueue_ready_wait_time_seconds_count", **cq) == 2
    assert value(m, "kqueue_ready_wait_time_seconds_sum", **cq) == 3625 + 8


# -- finished workloads --------------------------------------------------------------------------


def test_a_finished_workload_counts_once_with_its_execution_time() -> None:
    m = Metrics()
    running = admitted_workload()
    running.status.accumulated_past_execution_time_seconds = 100
    done = running.model_copy(deep=True)
    done.status.conditions.append(
        Workload.model_validate(
            {**copy.deepcopy(workload("x", "1")), "status": {"conditions": [
                condition(c.FINISHED, "True", "Succeeded", timedelta(seconds=70))
            ]}}
        ).status.conditions[0]
    )
    m.workload_changed(None, running)
    m.workload_changed(running, done)
    m.workload_changed(done, done)  # a later event of the finished workload: not again
    cq = {"cluster_queue": "cq", "priority_class": "high"}
    assert value(m, "kqueue_finished_workloads_total", **cq) == 1
    assert value(m, "kqueue_local_queue_finished_workloads_total", **LQ, priority_class="high") == 1
    # 100 s in past admissions + admitted NOW+10s .. finished NOW+70s.
    assert value(m, "kqueue_execution_time_seconds_sum", **cq) == 160
    assert value(m, "kqueue_local_queue_execution_time_seconds_sum", **LQ, priority_class="high") == 160


# -- the LocalQueue gauges (queue status reconciler) ---------------------------------------------


def local_queue(name: str, stop: str | None = None) -> LocalQueue:
    spec: Obj = {"clusterQueue": "cq"}
    if stop:
        spec["stopPolicy"] = stop
    return LocalQueue.model_validate({
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "1"},
        "spec": spec,
    })


async def test_local_queue_gauges_follow_admissions_finishes_and_deletion(
    cluster: FakeCluster,
) -> None:
    from tests.controller.test_scheduler import cluster_queue

    engine = Engine()
    flavor = ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )
    engine.upsert_flavor(from_api.flavor(flavor))
    cqs: Store[ClusterQueue] = Store()
    lqs: Store[LocalQueue] = Store()
    flavors: Store[ResourceFlavor] = Store()
    flavors._put("f", flavor, "1")
    wls: Store[Workload] = Store()
    cq = cluster_queue("3")
    cqs._put("cq", cq, "1")
    engine.upsert_cluster_queue(from_api.cluster_queue(cq))
    lq = local_queue("lq")
    lqs._put(lq.key, lq, "1")
    cluster.server.add(LOCAL_QUEUES, lq.to_dict())
    engine.upsert_local_queue(from_api.local_queue(lq))
    m = Metrics()
    reconciler = QueueStatusReconciler(
        engine=lambda: engine, cluster_queues=cqs, local_queues=lqs, flavors=flavors,
        workloads=wls, kube=cluster.kube, events=cast(EventRecorder, None),
        metrics=m, now=lambda: NOW,
    )
    for i, (name, cpu) in enumerate([("a", "1500m"), ("b", "1"), ("c", "2")]):
        wl = Workload.model_validate(workload(name, cpu, created_s=i))
        wls._put(wl.key, wl, "1")
        from_api.apply_workload(engine, wl)
    engine.schedule(NOW)  # a (1.5 cpu)
    engine.schedule(NOW)  # b (1 cpu); c (2) does not fit and waits (StrictFIFO: active)
    await reconciler(f"lq:{NS}/lq")
    assert value(m, "kqueue_local_queue_pending_workloads", **LQ, status="active") == 1
    assert value(m, "kqueue_local_queue_pending_workloads", **LQ, status="inadmissible") == 0
    assert value(m, "kqueue_local_queue_reserving_active_workloads", **LQ) == 2
    assert value(m, "kqueue_local_queue_admitted_active_workloads", **LQ) == 2
    usage = {**LQ, "flavor": "f", "resource": "cpu"}
    assert value(m, "kqueue_local_queue_resource_reservation", **usage) == 2.5
    assert value(m, "kqueue_local_queue_resource_usage", **usage) == 2.5
    assert value(m, "kqueue_local_queue_status", **LQ, active="True") == 1
    assert value(m, "kqueue_local_queue_status", **LQ, active="False") == 0
    assert value(m, "kqueue_local_queue_finished_workloads", **LQ) == 0

    # a finishes: its quota is free, it is counted among the finished Workloads that exist.
    done_doc = workload("a", "1500m")
    done_doc["status"] = {"conditions": [condition(c.FINISHED, "True", "Succeeded", timedelta())]}
    done = Workload.model_validate(done_doc)
    wls._put(done.key, done, "2")
    from_api.apply_workload(engine, done)
    # The LocalQueue is stopped meanwhile: its pending workloads are not admissible.
    stopped = local_queue("lq", stop="Hold")
    lqs._put(stopped.key, stopped, "2")
    await reconciler(f"lq:{NS}/lq")
    assert value(m, "kqueue_local_queue_reserving_active_workloads", **LQ) == 1
    assert value(m, "kqueue_local_queue_resource_usage", **usage) == 1
    assert value(m, "kqueue_local_queue_finished_workloads", **LQ) == 1
    assert value(m, "kqueue_finished_workloads", cluster_queue="cq") == 1
    assert value(m, "kqueue_local_queue_status", **LQ, active="False") == 1
    assert value(m, "kqueue_local_queue_pending_workloads", **LQ, status="active") == 0
    assert value(m, "kqueue_local_queue_pending_workloads", **LQ, status="inadmissible") == 1

    m.workload_admitted(done, "cq", 1.0)  # a counter series of the queue
    m.forget_local_queue(f"{NS}/lq")
    left = [labels for (_, labels) in samples(m) if ("name", "lq") in labels]
    assert left == []
    assert value(m, "kqueue_finished_workloads", cluster_queue="cq") == 0


# -- eviction timings ----------------------------------------------------------------------------


def test_eviction_timings_from_ready_to_evicted_and_from_evicted_to_released() -> None:
    m = Metrics()
    evicting = admitted_workload(
        condition(c.PODS_READY, "True", "PodsReady", timedelta(seconds=20)),
        condition(c.EVICTED, "True", "Preempted", timedelta(seconds=70)),
    )
    m.workload_evicted(evicting, "cq", c.EVICTED_BY_PREEMPTION)
    ready_to_evicted = {"cluster_queue": "cq", "reason": "Preempted", "underlying_cause": ""}
    assert value(m, "kqueue_pods_ready_to_evicted_time_seconds_sum", **ready_to_evicted) == 50
    # Released 3 s after the eviction: QuotaReserved=False, no admission.
    released = evicting.model_copy(deep=True)
    released.status.admission = None
    for cond in released.status.conditions:
        if cond.type == c.QUOTA_RESERVED:
            cond.status = "False"
            cond.last_transition_time = NOW + timedelta(seconds=73)
    m.workload_changed(evicting, released)
    assert (
        value(m, "kqueue_workload_eviction_latency_seconds_sum", cluster_queue="cq", reason="Preempted")
        == 3
    )
    # Pods never ready: no ready-to-evicted sample.
    never_ready = admitted_workload(condition(c.EVICTED, "True", "Preempted", timedelta(seconds=9)))
    m.workload_evicted(never_ready, "cq", c.EVICTED_BY_PREEMPTION)
    assert value(m, "kqueue_pods_ready_to_evicted_time_seconds_count", **ready_to_evicted) == 1


# -- ClusterQueue info and pending resources (queue status reconciler) -------------------------


async def test_cluster_queue_info_and_pending_resources(cluster: FakeCluster) -> None:
    from kqueue.engine.types import CohortName, CohortSpec
    from tests.controller.test_scheduler import cluster_queue

    engine = Engine()
    flavor = ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )
    engine.upsert_flavor(from_api.flavor(flavor))
    engine.upsert_cohort(CohortSpec(name=CohortName("team"), parent=CohortName("org")))
    engine.upsert_cohort(CohortSpec(name=CohortName("org")))
    cq = cluster_queue("1")
    cq.spec.cohort_name = "team"
    cqs: Store[ClusterQueue] = Store()
    cqs._put("cq", cq, "1")
    cluster.server.add(CLUSTER_QUEUES, cq.to_dict())
    flavors: Store[ResourceFlavor] = Store()
    flavors._put("f", flavor, "1")
    engine.upsert_cluster_queue(from_api.cluster_queue(cq))
    lq = local_queue("lq")
    engine.upsert_local_queue(from_api.local_queue(lq))
    m = Metrics()
    reconciler = QueueStatusReconciler(
        engine=lambda: engine, cluster_queues=cqs, local_queues=Store(), flavors=flavors,
        workloads=Store(), kube=cluster.kube, events=cast(EventRecorder, Events()),
        metrics=m, now=lambda: NOW, resource_metrics=True,
    )
    for i, cpu in enumerate(("1", "500m", "2")):
        from_api.apply_workload(engine, Workload.model_validate(workload(f"w{i}", cpu, created_s=i)))
    engine.schedule(NOW)  # w0 takes the 1 cpu; w1 and w2 wait
    await reconciler("cq:cq")
    assert (
        value(m, "kqueue_cluster_queue_info", cluster_queue="cq", parent_cohort="team", root_cohort="org")
        == 1
    )
    assert value(m, "kqueue_cluster_queue_resource_pending", cluster_queue="cq", resource="cpu") == 2.5
    # Summed when scraped: a workload queued since the last status update counts.
    from_api.apply_workload(engine, Workload.model_validate(workload("w3", "250m", created_s=3)))
    assert value(m, "kqueue_cluster_queue_resource_pending", cluster_queue="cq", resource="cpu") == 2.75
    # Its cohorts, "team" under the root "org": the place, the subtree's quota and use.
    for cohort, parent in (("team", "org"), ("org", "")):
        assert value(
            m, "kqueue_cohort_info", cohort=cohort, parent_cohort=parent, root_cohort="org"
        ) == 1
        cpu = {"cohort": cohort, "flavor": "f", "resource": "cpu"}
        assert value(m, "kqueue_cohort_subtree_quota", **cpu) == 1
        assert value(m, "kqueue_cohort_subtree_resource_reservations", **cpu) == 1
        assert value(m, "kqueue_cohort_subtree_admitted_active_workloads", cohort=cohort) == 1
    m.workload_admitted(None, "cq", 1.0)
    for cohort in ("team", "org"):
        assert value(
            m, "kqueue_cohort_subtree_admitted_workloads_total", cohort=cohort, priority_class=""
        ) == 1
    # Moved out of its cohort: the old info series goes, and the cohorts (no member left) too.
    cq.spec.cohort_name = None
    engine.upsert_cluster_queue(from_api.cluster_queue(cq))
    await reconciler("cq:cq")
    infos = [labels for (name, labels) in samples(m) if name == "kqueue_cluster_queue_info"]
    assert infos == [(("cluster_queue", "cq"), ("parent_cohort", ""), ("root_cohort", ""))]
    assert [name for (name, _) in samples(m) if name.startswith("kqueue_cohort_")] == []
    # The per-flavor ClusterQueue series are labelled with the new cohort only.
    cohorts = {
        dict(labels)["cohort"]
        for (name, labels) in samples(m)
        if name.startswith("kqueue_cluster_queue_") and "cohort" in dict(labels)
    }
    assert cohorts == {""}


# -- Workload creation latency (the job reconciler) ----------------------------------------------


async def test_workload_creation_latency_is_observed_per_job_kind_on_the_first_generation(
    cluster: FakeCluster,
) -> None:
    from tests.controller.test_job_reconciler import World, job

    m = Metrics()
    world = await World.start(cluster, metrics=m)
    fresh = job("fresh", held=True)
    await world.reconciler(await world.add_job(fresh))
    assert value(m, "kqueue_workload_creation_latency_seconds_count", job_kind="Job") == 1
    assert value(m, "kqueue_workload_creation_latency_seconds_sum", job_kind="Job") >= 0
    # A Job changed since its creation (generation 2): its Workload's wait is not creation's.
    changed = job("changed", held=True)
    changed["metadata"]["generation"] = 2
    await world.reconciler(await world.add_job(changed))
    assert len(cluster.server.objects(WORKLOADS)) == 2
    assert value(m, "kqueue_workload_creation_latency_seconds_count", job_kind="Job") == 1
