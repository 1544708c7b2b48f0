"""Delayed topology requests in `kqueue simulate` (kqueue/engine/tas/delayed.py): a
topology-aware pod set behind a ProvisioningRequest check reserves quota without a placement
and is placed once the check is Ready."""

from __future__ import annotations

from typing import Any

from .conftest import simulate_json

SETUP = """\
apiVersion: kqueue.io/v1alpha1
kind: Topology
metadata: {name: hosts}
spec: {levels: [{nodeLabel: kubernetes.io/hostname}]}
---
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata: {name: tas}
spec: {nodeLabels: {tas-node: "true"}, topologyName: hosts}
---
apiVersion: kqueue.io/v1alpha1
kind: AdmissionCheck
metadata:
  name: prov
  annotations: {simulate.kqueue.io/check-rule: "Provisioned after 1m"}
spec: {controllerName: %(controller)s}
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: tas
      resources: [{name: cpu, nominalQuota: "8"}]
  admissionChecksStrategy:
    admissionChecks: [{name: prov}]
---
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata: {name: q, namespace: default}
spec: {clusterQueue: cq}
---
apiVersion: kqueue.io/v1alpha1
kind: Workload
metadata: {name: a, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: q
  podSets:
  - name: main
    count: 2
    topologyRequest: {required: kubernetes.io/hostname}
    template:
      spec:
        containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""

NODE = """\
---
apiVersion: v1
kind: Node
metadata:
  name: x1
  labels: {kubernetes.io/hostname: x1, tas-node: "true"}
status:
  allocatable: {cpu: "4", pods: "10"}
  conditions: [{type: Ready, status: "True"}]
"""

PROVISIONING = "kqueue.io/provisioning-request"


def _run(controller: str, nodes: str) -> dict[str, Any]:
    return simulate_json("-", input=SETUP % {"controller": controller} + nodes)


def _events(out: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["time"][11:19], e["type"]) for e in out["events"] if e["workload"] == "default/a"]


def test_placed_after_the_provisioning_check_is_ready() -> None:
    out = _run(PROVISIONING, NODE)
    assert _events(out) == [("00:00:00", "QuotaReserved"), ("00:01:00", "Admitted")]
    (ps,) = out["workloads"]["default/a"]["podSets"]
    assert ps["delayedTopologyRequest"] == "Ready"
    assert ps["topologyAssignment"]["levels"] == ["kubernetes.io/hostname"]


def test_scale_from_zero_reserves_quota_and_waits() -> None:
    """No node yet: the quota is reserved (the ProvisioningRequest can be made); the
    placement waits, and with no node ever appearing the workload is not admitted."""
    out = _run(PROVISIONING, "")
    assert _events(out) == [("00:00:00", "QuotaReserved")]
    wl = out["workloads"]["default/a"]
    assert wl["state"] == "QuotaReserved"
    (ps,) = wl["podSets"]
    assert ps["delayedTopologyRequest"] == "Pending" and "topologyAssignment" not in ps
    admitted = next(c for c in wl["conditions"] if c["type"] == "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("False", "PendingDelayedTopologyRequests")
    assert "couldn't assign flavors to pod set main" in admitted["message"]


def test_a_custom_check_places_at_reservation() -> None:
    out = _run("example.com/custom", "")
    assert _events(out) == []
    wl = out["workloads"]["default/a"]
    assert wl["state"] == "Pending"
    reserved = next(c for c in wl["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["reason"] == "TopologyPlacementFailed"


MULTIKUEUE = "kqueue.io/multikueue"


def test_multikueue_manager_reserves_and_admits_without_a_placement() -> None:
    """A MultiKueue manager (Kueue's multikueue/tas "should admit workload which fits in a
    required topology domain"): no node of its own, the quota is reserved Pending, and once the
    check is Ready (a worker admitted and placed it) the workload is admitted with the pod set
    Ready and no placement. With a node of its own, that node is not used either."""
    for nodes in ("", NODE):
        out = _run(MULTIKUEUE, nodes)
        assert _events(out) == [("00:00:00", "QuotaReserved"), ("00:01:00", "Admitted")]
        (ps,) = out["workloads"]["default/a"]["podSets"]
        assert ps["delayedTopologyRequest"] == "Ready" and "topologyAssignment" not in ps
