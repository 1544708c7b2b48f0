"""API models to engine types, and a small end-to-end run on manifests."""

from __future__ import annotations

from datetime import UTC, datetime

import yaml

from kqueue.api.v1alpha1 import parse_object
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.types import (
    FungibilityPolicy,
    PreemptionOrder,
    Taint,
    Toleration,
)

MANIFESTS = """
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {instance: spot}
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
  tolerations: [{key: spot, operator: Equal, value: "true", effect: NoSchedule}]
---
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata: {name: on-demand}
---
apiVersion: kqueue.io/v1alpha1
kind: Cohort
metadata: {name: team}
spec:
  parentName: org
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources:
      - {name: cpu, nominalQuota: "2", lendingLimit: "1"}
      - {name: memory, nominalQuota: 0}
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: team
  namespaceSelector: {}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  preemption:
    preemptiblePriorityThreshold: 100
    preemptionOrder: Oldest
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources:
      - {name: cpu, nominalQuota: 500m, borrowingLimit: "1"}
      - {name: memory, nominalQuota: 2Gi}
    - name: spot
      resources:
      - {name: cpu, nominalQuota: "8"}
      - {name: memory, nominalQuota: 16Gi}
---
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {clusterQueue: cq}
---
apiVersion: kqueue.io/v1alpha1
kind: Workload
metadata:
  name: train
  namespace: ml
  uid: u-1
  creationTimestamp: "2024-05-01T12:00:00Z"
spec:
  queueName: lq
  priority: 50
  podSets:
  - name: main
    count: 4
    minCount: 2
    template:
      metadata:
        labels: {kqueue.io/preemptibility: non-preemptible}
      spec:
        nodeSelector: {instance: spot}
        tolerations: [{key: spot, operator: Exists}]
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions: [{key: instance, operator: In, values: [spot]}]
        containers:
        - name: c
          resources: {requests: {cpu: 250m, memory: 1Gi}}
"""


def _objects() -> list[object]:
    return [parse_object(d) for d in yaml.safe_load_all(MANIFESTS)]


def test_conversion() -> None:
    rf, _, co, cq, lq, wl = _objects()
    f = from_api.flavor(rf)  # type: ignore[arg-type]
    assert f.node_labels == {"instance": "spot"}
    assert f.node_taints == (Taint("spot", "true", "NoSchedule"),)
    assert f.tolerations == (Toleration("spot", "Equal", "true", "NoSchedule"),)
    cohort = from_api.cohort(co)  # type: ignore[arg-type]
    assert cohort.parent == "org"
    assert cohort.quotas()[("on-demand", "cpu")].lending_limit == 1000
    spec = from_api.cluster_queue(cq)  # type: ignore[arg-type]
    assert spec.cohort == "team"
    quotas = spec.quotas()
    assert quotas[("on-demand", "cpu")].nominal == 500
    assert quotas[("on-demand", "cpu")].borrowing_limit == 1000
    assert quotas[("spot", "memory")].nominal == 16 * 2**30
    assert spec.flavor_fungibility.when_can_borrow == FungibilityPolicy.TRY_NEXT_FLAVOR
    assert spec.flavor_fungibility.when_can_preempt == FungibilityPolicy.TRY_NEXT_FLAVOR
    assert spec.preemption.preemptible_priority_threshold == 100
    assert spec.preemption.preemption_order == PreemptionOrder.OLDEST
    assert spec.namespace_selector is not None
    assert from_api.local_queue(lq).key == "ml/lq"  # type: ignore[arg-type]
    w = from_api.workload(wl, owner_labels={"kqueue.io/preemptibility": "preemptible"})  # type: ignore[arg-type]
    assert w.key == "ml/train"
    assert w.creation_time == datetime(2024, 5, 1, 12, tzinfo=UTC)
    (ps,) = w.pod_sets
    assert (ps.count, ps.min_count, ps.requests) == (4, 2, {"cpu": 250, "memory": 2**30})
    assert ps.required_affinity is not None and ps.required_affinity[0][0].values == ("spot",)
    assert w.owner_preemptibility_label == "preemptible"
    assert w.pod_preemptibility_label == "non-preemptible"
    assert w.admission is None


def test_end_to_end_on_manifests() -> None:
    rf, rf2, co, cq, lq, wl = _objects()
    engine = Engine()
    engine.upsert_flavor(from_api.flavor(rf))  # type: ignore[arg-type]
    engine.upsert_flavor(from_api.flavor(rf2))  # type: ignore[arg-type]
    engine.upsert_cohort(from_api.cohort(co))  # type: ignore[arg-type]
    engine.upsert_cluster_queue(from_api.cluster_queue(cq))  # type: ignore[arg-type]
    engine.upsert_local_queue(from_api.local_queue(lq))  # type: ignore[arg-type]
    from_api.apply_workload(engine, wl)  # type: ignore[arg-type]
    r = engine.schedule(datetime(2024, 5, 1, 13, tzinfo=UTC))
    (admit,) = r.admitted
    assert dict(admit.pod_sets[0].flavors) == {"cpu": "spot", "memory": "spot"}
    assert admit.usage == {("spot", "cpu"): 1000, ("spot", "memory"): 4 * 2**30}

    # Round trip: the admitted object, as the API would show it, keeps holding the quota.
    doc = yaml.safe_load_all(MANIFESTS)
    wdoc = list(doc)[-1]
    wdoc["status"] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"cpu": "spot", "memory": "spot"},
                    "resourceUsage": {"cpu": "1", "memory": "4Gi"},
                    "count": 4,
                }
            ],
        },
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "",
                "lastTransitionTime": "2024-05-01T13:00:00Z",
            }
        ],
    }
    admitted = parse_object(wdoc)
    w = from_api.workload(admitted)  # type: ignore[arg-type]
    assert w.admission is not None
    assert w.admission.reserved_at == datetime(2024, 5, 1, 13, tzinfo=UTC)
    assert w.admission.usage() == admit.usage
    fresh = Engine()
    fresh.upsert_workload(w)
    assert fresh.holds_quota(w.key)
