"""Admission checks in `kqueue simulate` and `kqueue explain` (kqueue/sim/checks.py): states
given in the input, or by a rule on the AdmissionCheck."""

from __future__ import annotations

from typing import Any

import yaml

from .conftest import run_cli, simulate_json

SETUP = """\
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata: {name: spot}
---
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata: {name: reserved}
---
apiVersion: kqueue.io/v1alpha1
kind: AdmissionCheck
metadata:
  name: capacity
  annotations: {simulate.kqueue.io/check-rule: "%(rule)s"}
spec: {controllerName: kqueue.io/provisioning-request}
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: spot
      resources: [{name: cpu, nominalQuota: "2"}]
    - name: reserved
      resources: [{name: cpu, nominalQuota: "2"}]
  admissionChecksStrategy:
    admissionChecks: [{name: capacity, onFlavors: [%(on)s]}]
---
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata: {name: q, namespace: default}
spec: {clusterQueue: cq}
"""


def workload(name: str, second: int, *, status: dict[str, Any] | None = None,
             run_time: str = "") -> str:
    doc: dict[str, Any] = {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": name, "namespace": "default",
                     "creationTimestamp": f"2026-01-01T00:00:0{second}Z",
                     "annotations": {"simulate.kqueue.io/run-time": run_time} if run_time else {}},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 2, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
    }
    if status is not None:
        doc["status"] = status
    return "---\n" + yaml.safe_dump(doc)


def scenario(rule: str, *workloads: str, on: str = "spot") -> str:
    return SETUP % {"rule": rule, "on": on} + "".join(workloads)


def events(out: dict[str, Any], name: str) -> list[tuple[str, str, str]]:
    return [(e["time"][11:19], e["type"], e["reason"]) for e in out["events"]
            if e["workload"] == f"default/{name}"]


def test_provisioned_if_the_flavor_is_spot_after_2m() -> None:
    out = simulate_json("-", input=scenario(
        "Provisioned after 2m if the flavor is spot",
        workload("a", 0, run_time="10m"), workload("b", 1),
    ))
    # a takes spot (first in order) and waits 2m for its check; b takes reserved, no check.
    assert events(out, "a") == [
        ("00:00:01", "QuotaReserved", "QuotaReserved"),
        ("00:02:01", "Admitted", "Admitted"),
        ("00:12:01", "Finished", "Succeeded"),  # run time counts from Admitted
    ]
    assert events(out, "b")[:2] == [
        ("00:00:01", "QuotaReserved", "QuotaReserved"), ("00:00:01", "Admitted", "Admitted"),
    ]
    assert out["workloads"]["default/a"]["admissionChecks"] == [
        {"name": "capacity", "state": "Ready",
         "message": "simulated: Ready after 2m0s (flavor spot)"}
    ]
    assert "admissionChecks" not in out["workloads"]["default/b"]


def test_rejected_deactivates_with_message() -> None:
    out = simulate_json("-", input=scenario("Rejected after 30s", workload("a", 0)))
    assert [t for _, t, _ in events(out, "a")] == [
        "QuotaReserved", "Deactivated", "Evicted",
    ]
    wl = out["workloads"]["default/a"]
    assert wl["state"] == "Pending"
    evicted = next(cnd for cnd in wl["conditions"] if cnd["type"] == "Evicted")
    assert evicted["reason"] == "DeactivatedDueToAdmissionCheck"
    assert evicted["message"].startswith('Deactivated due to AdmissionCheck in Rejected state: "capacity"')


def test_retry_requeues_then_the_rule_applies_again() -> None:
    out = simulate_json("--cycles", "3", "-", input=scenario("Retry after 1m", workload("a", 0)))
    kinds = [t for _, t, _ in events(out, "a")]
    assert kinds[:4] == ["QuotaReserved", "Evicted", "Requeued", "QuotaReserved"]
    evicted = next(e for e in events(out, "a") if e[1] == "Evicted")
    assert evicted == ("00:01:00", "Evicted", "AdmissionCheck")  # reserved at 00:00:00


def test_check_state_given_in_the_input() -> None:
    # Kueue scheduler_test "workload fits in single clusterQueue, with check state ready".
    ready = {"admissionChecks": [{"name": "capacity", "state": "Ready", "message": "given"}]}
    out = simulate_json("-", input=scenario("Rejected", workload("a", 0, status=ready)))
    assert [t for _, t, _ in events(out, "a")] == ["QuotaReserved", "Admitted"]


def test_no_rule_and_no_state_keeps_the_quota_without_admission() -> None:
    text = scenario("Ready if the flavor is reserved", workload("a", 0))
    out = simulate_json("-", input=text)
    assert out["workloads"]["default/a"]["state"] == "QuotaReserved"
    res = run_cli("explain", "-f", "-", "default/a", input=text)
    assert res.exit_code == 0, res.output
    assert "admission check capacity: Pending" in res.stdout
    assert "not admitted until every admission check is Ready" in res.stdout


def test_bad_rule_names_the_object_and_the_annotation() -> None:
    res = run_cli("simulate", "-", input=scenario("Maybe after 2m", workload("a", 0)))
    assert res.exit_code == 2
    assert "AdmissionCheck capacity" in res.stderr
    assert "simulate.kqueue.io/check-rule" in res.stderr
    assert "allowed: <Ready|Provisioned|Retry|Rejected>" in res.stderr
