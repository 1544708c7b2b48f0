"""What one periodic workload resync costs (kqueue/controller/workload_feed.py).

Builds an engine and a Workload store of N workloads (a share of them admitted, the rest
pending, as after a relist) and times ``WorkloadFeed.resync`` over them: the comparison of the
engine's state with each stored Workload that the manager runs every WORKLOAD_RESYNC_SECONDS.
With nothing to repair (a healthy process) it only reads; a second figure times the resync
after the engine was made to disagree on 1% of the workloads (each then re-applied).

    python bench/resync_cost.py --count 10000 --count 50000 --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from kqueue.api.v1alpha1 import ClusterQueue, LocalQueue, ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import Store
from kqueue.controller.workload_feed import WorkloadFeed
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey

NS = "bench"


def _setup(count: int, admitted_share: float) -> tuple[Engine, Store[Workload]]:
    engine = Engine()
    engine.upsert_flavor(from_api.flavor(ResourceFlavor.model_validate(
        {"apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    engine.upsert_cluster_queue(from_api.cluster_queue(ClusterQueue.model_validate({
        "apiVersion": c.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
                 "flavors": [{"name": "f", "resources": [
                     {"name": "cpu", "nominalQuota": str(count)}]}]}]},
    })))
    engine.upsert_local_queue(from_api.local_queue(LocalQueue.model_validate({
        "apiVersion": c.API_VERSION, "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": NS}, "spec": {"clusterQueue": "cq"},
    })))
    engine.set_namespace_labels(NS, {})
    store: Store[Workload] = Store()
    admitted = int(count * admitted_share)
    for i in range(count):
        doc = {
            "apiVersion": c.API_VERSION, "kind": "Workload",
            "metadata": {"name": f"w{i}", "namespace": NS, "resourceVersion": str(i + 1),
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                     "template": {"spec": {"containers": [
                         {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        }
        if i < admitted:
            doc["status"] = {
                "admission": {"clusterQueue": "cq", "podSetAssignments": [
                    {"name": "main", "count": 1, "flavors": {"cpu": "f"},
                     "resourceUsage": {"cpu": "1"}}]},
                "conditions": [{"type": c.QUOTA_RESERVED, "status": "True", "reason": "Reserved",
                                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            }
        wl = Workload.model_validate(doc)
        store._put(f"{NS}/w{i}", wl, str(i + 1))
    return engine, store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, action="append", default=None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--admitted", type=float, default=0.2)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for count in args.count or [10_000]:
        engine, store = _setup(count, args.admitted)
        feed = WorkloadFeed(lambda e=engine: e, store)
        feed.rebuild(engine)
        clean: list[float] = []
        for _ in range(args.runs):
            started = time.perf_counter()
            repairs = feed.resync(lambda _k: False)
            clean.append(time.perf_counter() - started)
            assert not repairs
        # Disagree on 1%: the engine forgets workloads the store holds.
        broken: list[float] = []
        for _ in range(args.runs):
            for i in range(0, count, 100):
                engine.delete_workload(WorkloadKey(f"{NS}/w{i}"))
            started = time.perf_counter()
            repairs = feed.resync(lambda _k: False)
            broken.append(time.perf_counter() - started)
            assert len(repairs) == len(range(0, count, 100))
        print(
            f"{count:>7} workloads: resync {statistics.median(clean) * 1000:.1f} ms median "
            f"(min {min(clean) * 1000:.1f}), nothing to repair; "
            f"{statistics.median(broken) * 1000:.1f} ms with {count // 100} repairs"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
