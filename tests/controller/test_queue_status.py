"""LocalQueue status counts read the LocalQueue's own workloads (an index), not all of them."""

from __future__ import annotations

from typing import Any, cast

from kqueue.api.v1alpha1 import ClusterQueue, LocalQueue, ResourceFlavor, Workload
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Kube
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import Resource
from kqueue.controller.status import QueueStatusReconciler
from kqueue.engine import adapt
from kqueue.engine.engine import Engine
from tests.controller.test_scheduler import NOW, NS, cluster_queue, workload

Obj = dict[str, Any]


class CaptureKube:
    def __init__(self) -> None:
        self.statuses: dict[str, Obj] = {}

    async def replace_status(self, _: Resource, obj: Obj, *, namespace: str | None = None) -> Obj:
        self.statuses[f"{namespace}/{obj['metadata']['name']}"] = obj["status"]
        return obj


def local_queue(name: str) -> LocalQueue:
    return LocalQueue.model_validate({
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "1"},
        "spec": {"clusterQueue": "cq"},
    })


async def test_local_queue_counts_only_its_own_workloads() -> None:
    engine = Engine()
    engine.upsert_flavor(adapt.flavor(ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    cqs: Store[ClusterQueue] = Store()
    lqs: Store[LocalQueue] = Store()
    wls: Store[Workload] = Store()
    cq = cluster_queue("2")
    cqs._put("cq", cq, "1")
    engine.upsert_cluster_queue(adapt.cluster_queue(cq))
    for name in ("one", "two"):
        lq = local_queue(name)
        lqs._put(lq.key, lq, "1")
        engine.upsert_local_queue(adapt.local_queue(lq))
    kube = CaptureKube()
    reconciler = QueueStatusReconciler(
        engine=lambda: engine,
        cluster_queues=cqs,
        local_queues=lqs,
        flavors=Store(),
        workloads=wls,
        kube=cast(Kube, kube),
        events=cast(EventRecorder, None),
        metrics=Metrics(),
        now=lambda: NOW,
    )
    # "one": a (1 cpu, admitted), b and c (2 cpu each, pending); "two": d (pending).
    for i, (name, cpu, queue) in enumerate(
        [("a", "1", "one"), ("b", "2", "one"), ("c", "2", "one"), ("d", "1", "two")]
    ):
        doc = workload(name, cpu, created_s=i)
        doc["spec"]["queueName"] = queue
        wl = Workload.model_validate(doc)
        wls._put(wl.key, wl, "1")
        adapt.apply_workload(engine, wl)
    (admitted,) = engine.schedule(NOW).admitted
    assert admitted.workload == f"{NS}/a"
    await reconciler(f"lq:{NS}/one")
    await reconciler(f"lq:{NS}/two")
    one, two = kube.statuses[f"{NS}/one"], kube.statuses[f"{NS}/two"]
    assert (one["pendingWorkloads"], one["reservingWorkloads"]) == (2, 1)
    assert one["flavorsReservation"] == [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]
    assert (two.get("pendingWorkloads"), two.get("reservingWorkloads", 0)) == (1, 0)
