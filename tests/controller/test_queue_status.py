"""LocalQueue status counts read the LocalQueue's own workloads (an index), not all of them."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kqueue.api.v1alpha1 import AdmissionScope, ClusterQueue, LocalQueue, ResourceFlavor, Workload
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from kqueue.controller.status import QueueStatusReconciler
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from tests.controller.fake_apiserver import FakeApiServer, FakeCluster
from tests.controller.fakes import model
from tests.controller.test_scheduler import NOW, NS, cluster_queue, workload

Obj = dict[str, Any]


def local_queue(name: str) -> Obj:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterQueue": "cq"},
    }


async def test_local_queue_counts_only_its_own_workloads(cluster: FakeCluster) -> None:
    engine = Engine()
    engine.upsert_flavor(from_api.flavor(ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    cq = cluster_queue("2")
    cluster.server.add(CLUSTER_QUEUES, cq.to_dict())
    engine.upsert_cluster_queue(from_api.cluster_queue(cq))
    for name in ("one", "two"):
        cluster.server.add(LOCAL_QUEUES, local_queue(name))
        engine.upsert_local_queue(from_api.local_queue(LocalQueue.model_validate(local_queue(name))))
    # "one": a (1 cpu, admitted), b and c (2 cpu each, pending); "two": d (pending).
    for i, (name, cpu, queue) in enumerate(
        [("a", "1", "one"), ("b", "2", "one"), ("c", "2", "one"), ("d", "1", "two")]
    ):
        doc = workload(name, cpu, created_s=i)
        doc["spec"]["queueName"] = queue
        cluster.server.add(WORKLOADS, doc)
        from_api.apply_workload(engine, Workload.model_validate(doc))
    cqs = await cluster.informer(CLUSTER_QUEUES, model(ClusterQueue))
    lqs = await cluster.informer(LOCAL_QUEUES, model(LocalQueue))
    flavors = await cluster.informer(RESOURCE_FLAVORS, model(ResourceFlavor))
    wls = await cluster.informer(WORKLOADS, model(Workload))
    reconciler = QueueStatusReconciler(
        engine=lambda: engine,
        cluster_queues=cqs.store,
        local_queues=lqs.store,
        flavors=flavors.store,
        workloads=wls.store,
        kube=cluster.kube,
        events=cast(EventRecorder, None),
        metrics=Metrics(),
        now=lambda: NOW,
    )
    (admitted,) = engine.schedule(NOW).admitted
    assert admitted.workload == f"{NS}/a"
    await reconciler(f"lq:{NS}/one")
    await reconciler(f"lq:{NS}/two")
    one = cluster.server.get(LOCAL_QUEUES, "one", NS)["status"]  # type: ignore[index]
    two = cluster.server.get(LOCAL_QUEUES, "two", NS)["status"]  # type: ignore[index]
    assert (one["pendingWorkloads"], one["reservingWorkloads"]) == (2, 1)
    assert one["flavorsReservation"] == [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]
    assert (two.get("pendingWorkloads"), two.get("reservingWorkloads", 0)) == (1, 0)


def written_statuses(server: FakeApiServer) -> dict[str, Obj]:
    """The statuses the reconciler wrote (the last per object), by ``namespace/name`` (``None/``
    for a cluster-scoped object)."""
    return {
        f"{r.target.namespace}/{r.name}": r.body["status"]
        for r in server.requests_to("PUT", subresource="status")
        if r.ok
    }


class Events:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def record(self, _obj: Any, _type: str, reason: str, _message: str) -> None:
        self.reasons.append(reason)


async def test_a_new_cluster_queue_is_not_reported_flavorless_while_its_flavors_arrive(
    cluster: FakeCluster,
) -> None:
    from datetime import timedelta

    from kqueue.controller.status import FLAVOR_GRACE_S
    from kqueue.controller.workqueue import Requeue

    engine = Engine()
    cqs: Store[ClusterQueue] = Store()
    events = Events()
    reconciler = QueueStatusReconciler(
        engine=lambda: engine,
        cluster_queues=cqs,
        local_queues=Store(),
        flavors=Store(),  # the flavor "f" is not known (yet)
        workloads=Store(),
        kube=cluster.kube,
        events=cast(EventRecorder, events),
        metrics=Metrics(),
        now=lambda: NOW,
    )
    cq = cluster_queue("2")
    cq.metadata.creation_timestamp = NOW - timedelta(seconds=1)
    cqs._put("cq", cq, "1")
    cluster.server.add(CLUSTER_QUEUES, cq.to_dict())

    assert await reconciler("cq:cq") == Requeue(after=FLAVOR_GRACE_S)
    assert written_statuses(cluster.server) == {} and events.reasons == []

    # Still missing once the grace is over: reported, with the event.
    cq.metadata.creation_timestamp = NOW - timedelta(seconds=30)
    await reconciler("cq:cq")
    assert events.reasons == ["FlavorNotFound"]


def _cq_in_cohort(name: str, cpu: str) -> ClusterQueue:
    doc = cluster_queue(cpu).model_dump(by_alias=True, exclude_none=True)
    doc["metadata"] = {"name": name}
    doc["spec"]["cohortName"] = "ai"
    return ClusterQueue.model_validate(doc)


@pytest.mark.parametrize("fair", [True, False], ids=["fair-sharing", "classical"])
async def test_weighted_shares_are_written_and_exported_with_fair_sharing(
    fair: bool, cluster: FakeCluster
) -> None:
    from kqueue.api.config import FairSharing
    from kqueue.api.v1alpha1 import Cohort

    engine = Engine(fair_sharing=from_api.fair_sharing(FairSharing() if fair else None))
    engine.upsert_flavor(from_api.flavor(ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    cqs: Store[ClusterQueue] = Store()
    cohorts: Store[Cohort] = Store()
    co = Cohort.model_validate({"apiVersion": "kqueue.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "ai"}})
    cohorts._put("ai", co, "1")
    cluster.server.add(COHORTS, co.to_dict())
    engine.upsert_cohort(from_api.cohort(co))
    for name, cpu in (("team-a", "2"), ("team-b", "6")):
        cq = _cq_in_cohort(name, cpu)
        cqs._put(name, cq, "1")
        cluster.server.add(CLUSTER_QUEUES, cq.to_dict())
        engine.upsert_cluster_queue(from_api.cluster_queue(cq))
    lq = LocalQueue.model_validate({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": NS}, "spec": {"clusterQueue": "team-a"},
    })
    engine.upsert_local_queue(from_api.local_queue(lq))
    # team-a (nominal 2) admits 4 cpu: it borrows 2 of what team-b lends.
    wl = Workload.model_validate(workload("big", "4"))
    from_api.apply_workload(engine, wl)
    assert [a.workload for a in engine.schedule(NOW).admitted] == [f"{NS}/big"]

    metrics = Metrics()
    reconciler = QueueStatusReconciler(
        engine=lambda: engine, cluster_queues=cqs, local_queues=Store(), flavors=Store(),
        workloads=Store(), kube=cluster.kube, events=cast(EventRecorder, Events()),
        metrics=metrics, now=lambda: NOW, cohorts=cohorts,
    )
    for f in ("f",):
        reconciler._flavors._put(f, ResourceFlavor.model_validate(
            {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": f}}
        ), "1")
    await reconciler("cq:team-a")
    await reconciler("cq:team-b")
    await reconciler("co:ai")
    share_a = metrics.registry.get_sample_value(
        "kqueue_cluster_queue_weighted_share", {"cluster_queue": "team-a", "cohort": "ai"}
    )
    statuses = written_statuses(cluster.server)
    if fair:
        # Borrowing 2 cpu of the 8 the cohort can lend: 250 per 1000 (Kueue's DRS).
        assert statuses["None/team-a"]["fairSharing"] == {"weightedShare": 250}
        assert statuses["None/team-b"]["fairSharing"] == {"weightedShare": 0}
        assert share_a == 250.0
        assert "None/ai" in statuses  # the Cohort's status too
    else:
        assert "fairSharing" not in statuses["None/team-a"]
        assert share_a is None
        assert "None/ai" not in statuses


@pytest.mark.parametrize("configured", [True, False], ids=["configured", "not-configured"])
async def test_admission_fair_sharing_status_condition_and_metric(
    configured: bool, cluster: FakeCluster
) -> None:
    """A LocalQueue of a ClusterQueue with UsageBasedAdmissionFairSharing gets its decayed
    usage in status.fairSharing and the usage metric; the ClusterQueue says whether admission
    fair sharing orders it (False/NotConfigured, with a Warning event, without the
    Configuration's admissionFairSharing), and the LocalQueue is looked at again after the
    sampling interval."""
    from datetime import timedelta

    from kqueue.api.config import AdmissionFairSharing
    from kqueue.controller.workqueue import Requeue

    afs = AdmissionFairSharing(
        usage_half_life_time=timedelta(minutes=10), usage_sampling_interval=timedelta(seconds=30)
    )
    engine = Engine(admission_fair_sharing=from_api.admission_fair_sharing(afs if configured else None))
    engine.upsert_flavor(from_api.flavor(ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    cq = cluster_queue("4")
    cq.spec.admission_scope = AdmissionScope(admission_mode="UsageBasedAdmissionFairSharing")
    cqs: Store[ClusterQueue] = Store()
    cqs._put("cq", cq, "1")
    cluster.server.add(CLUSTER_QUEUES, cq.to_dict())
    engine.upsert_cluster_queue(from_api.cluster_queue(cq))
    lq = LocalQueue.model_validate({**local_queue("lq"), "spec": {"clusterQueue": "cq",
                                    "fairSharing": {"weight": "2"}}})
    lqs: Store[LocalQueue] = Store()
    lqs._put(f"{NS}/lq", lq, "1")
    cluster.server.add(LOCAL_QUEUES, lq.to_dict())
    engine.upsert_local_queue(from_api.local_queue(lq))
    from_api.apply_workload(engine, Workload.model_validate(workload("w", "2")))
    assert len(engine.schedule(NOW).admitted) == 1
    # A minute later the penalty is settled and a sample folds the 2 cpu held.
    later = NOW + timedelta(minutes=1)
    engine.schedule(later)

    metrics, events = Metrics(), Events()
    flavors: Store[ResourceFlavor] = Store()
    flavors._put("f", ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    ), "1")
    reconciler = QueueStatusReconciler(
        engine=lambda: engine, cluster_queues=cqs, local_queues=lqs, flavors=flavors,
        workloads=Store(), kube=cluster.kube, events=cast(EventRecorder, events),
        metrics=metrics, now=lambda: later,
    )
    await reconciler("cq:cq")
    statuses = written_statuses(cluster.server)
    [cond] = [x for x in statuses["None/cq"]["conditions"] if x["type"] == "AdmissionFairSharing"]
    again = await reconciler(f"lq:{NS}/lq")
    statuses = written_statuses(cluster.server)
    usage = metrics.registry.get_sample_value(
        "kqueue_local_queue_admission_fair_sharing_usage",
        {"name": "lq", "namespace": NS, "cluster_queue": "cq"},
    )
    if configured:
        assert (cond["status"], cond["reason"]) == ("True", "Enabled")
        status = statuses[f"{NS}/lq"]["fairSharing"]["admissionFairSharingStatus"]
        consumed = status["consumedResources"]["cpu"]
        # 2 cpu x (1 - 0.5^(30s/10m)) penalty, then 2 cpu x (1 - 0.5^(1m/10m)) folded in.
        assert consumed.endswith("n") and 0 < int(consumed[:-1]) < 2 * 10**9
        assert status["lastUpdate"] == later.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert usage == pytest.approx(int(consumed[:-1]) / 10**9 / 2)  # weight 2
        assert again == Requeue(after=30.0)
    else:
        assert (cond["status"], cond["reason"]) == ("False", "NotConfigured")
        assert "admissionFairSharing" in cond["message"]
        assert "NotConfigured" in events.reasons
        assert "fairSharing" not in statuses.get(f"{NS}/lq", {})
        assert usage is None and again is None
