"""LocalQueue status counts read the LocalQueue's own workloads (an index), not all of them."""

from __future__ import annotations

from typing import Any, cast

from kqueue.api.v1alpha1 import ClusterQueue, LocalQueue, ResourceFlavor, Workload
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Kube
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS, WORKLOADS
from kqueue.controller.status import QueueStatusReconciler
from kqueue.engine import adapt
from kqueue.engine.engine import Engine
from tests.controller.fake_apiserver import FakeCluster
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
    engine.upsert_flavor(adapt.flavor(ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    cq = cluster_queue("2")
    cluster.server.add(CLUSTER_QUEUES, cq.to_dict())
    engine.upsert_cluster_queue(adapt.cluster_queue(cq))
    for name in ("one", "two"):
        cluster.server.add(LOCAL_QUEUES, local_queue(name))
        engine.upsert_local_queue(adapt.local_queue(LocalQueue.model_validate(local_queue(name))))
    # "one": a (1 cpu, admitted), b and c (2 cpu each, pending); "two": d (pending).
    for i, (name, cpu, queue) in enumerate(
        [("a", "1", "one"), ("b", "2", "one"), ("c", "2", "one"), ("d", "1", "two")]
    ):
        doc = workload(name, cpu, created_s=i)
        doc["spec"]["queueName"] = queue
        cluster.server.add(WORKLOADS, doc)
        adapt.apply_workload(engine, Workload.model_validate(doc))
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


class CaptureKube:
    def __init__(self) -> None:
        self.statuses: dict[str, Obj] = {}

    async def replace_status(self, _: Any, obj: Obj, *, namespace: str | None = None) -> Obj:
        self.statuses[f"{namespace}/{obj['metadata']['name']}"] = obj["status"]
        return obj

    async def patch(self, _: Any, name: str, patch: Any, **_kw: Any) -> Obj:
        return {}


class Events:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def record(self, _obj: Any, _type: str, reason: str, _message: str) -> None:
        self.reasons.append(reason)


async def test_a_new_cluster_queue_is_not_reported_flavorless_while_its_flavors_arrive() -> None:
    from datetime import timedelta

    from kqueue.controller.status import FLAVOR_GRACE_S
    from kqueue.controller.workqueue import Requeue

    engine = Engine()
    cqs: Store[ClusterQueue] = Store()
    kube, events = CaptureKube(), Events()
    reconciler = QueueStatusReconciler(
        engine=lambda: engine,
        cluster_queues=cqs,
        local_queues=Store(),
        flavors=Store(),  # the flavor "f" is not known (yet)
        workloads=Store(),
        kube=cast(Kube, kube),
        events=cast(EventRecorder, events),
        metrics=Metrics(),
        now=lambda: NOW,
    )
    cq = cluster_queue("2")
    cq.metadata.creation_timestamp = NOW - timedelta(seconds=1)
    cqs._put("cq", cq, "1")

    assert await reconciler("cq:cq") == Requeue(after=FLAVOR_GRACE_S)
    assert kube.statuses == {} and events.reasons == []

    # Still missing once the grace is over: reported, with the event.
    cq.metadata.creation_timestamp = NOW - timedelta(seconds=30)
    kube.statuses.clear()
    await reconciler("cq:cq")
    assert events.reasons == ["FlavorNotFound"]
