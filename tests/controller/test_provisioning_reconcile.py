"""Kueue's provisioning controller TestReconcile and TestActiveOrLastPRForChecks
(pkg/controller/admissionchecks/provisioning/controller_test.go), ported by name, on kqueue's
controllers and the fake API server: the workload's check reconciler
(kqueue/controller/admission_checks/workload_checks.py) drives the ProvisioningRequest check
(kqueue/controller/admission_checks/provisioning/) through the real client.

Kueue's fixture: Workload ``wl`` with pod sets ps1 (4 x cpu 1, flavor flv1, admitted 4) and ps2
(4 x memory 1M, flavor flv2, admitted 3), checks ``check1`` (the ProvisioningRequest check,
config ``config1``: class1, parameter p1=v1) and ``not-provisioning`` (another controller's),
flavor flv1 with a node label and a toleration, flv2 with a node label. Where kqueue differs on
purpose the case says so (docs/admission-checks.md).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    ClusterQueue,
    ProvisioningRequestConfig,
    Workload,
    parse_object,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.admission_checks.provisioning import requests as pr
from kqueue.controller.admission_checks.provisioning.controller import (
    CONTROLLER_NAME,
    POD_TEMPLATES,
    PROVISIONING_REQUESTS,
    ProvisioningController,
)
from kqueue.controller.admission_checks.workload_checks import WorkloadChecks
from kqueue.controller.informer import Store
from kqueue.controller.resources import WORKLOADS
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import Events

Obj = dict[str, Any]
NS = "ns"
UID = "wl-uid"
NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = "2025-01-01T11:00:00Z"
REQUEST = "wl-check1-1"
FLV1_TOLERATION = {"key": "f1t1k", "operator": "Equal", "value": "f1t1v", "effect": "NoSchedule"}
CONSUME = {pr.CONSUME_ANNOTATION: REQUEST, pr.CLASS_ANNOTATION: "class1"}


def pod_set(name: str, count: int, requests: Obj, **spec: Any) -> Obj:
    return {"name": name, "count": count, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": requests}}], **spec}}}


def base_workload(
    *, pod_sets: list[Obj] | None = None, assignments: list[Obj] | None = None,
    checks: list[Obj] | None = None, admitted: bool = False, conditions: list[Obj] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    if pod_sets is None:
        pod_sets = [pod_set("ps1", 4, {"cpu": "1"}), pod_set("ps2", 4, {"memory": "1M"})]
    if assignments is None:
        assignments = [
            {"name": "ps1", "flavors": {"cpu": "flv1"}, "resourceUsage": {"cpu": "4"}, "count": 4},
            {"name": "ps2", "flavors": {"cpu": "flv2"}, "resourceUsage": {"cpu": "3M"}, "count": 3},
        ]
    conds = [
        {"type": c.QUOTA_RESERVED, "status": "True", "reason": "QuotaReserved", "message": "",
         "lastTransitionTime": EARLIER},
        {"type": c.ADMITTED, "status": "True" if admitted else "False",
         "reason": "Admitted" if admitted else "UnsatisfiedAdmissionChecks", "message": "",
         "lastTransitionTime": EARLIER},
        *(conditions or []),
    ]
    return {
        "apiVersion": c.API_VERSION, "kind": "Workload",
        "metadata": {"name": "wl", "namespace": NS, "uid": UID, "generation": 1,
                     "annotations": annotations or {}},
        "spec": {"queueName": "lq", "podSets": pod_sets},
        "status": {
            "conditions": conds,
            "admission": {"clusterQueue": "q1", "podSetAssignments": assignments},
            "admissionChecks": checks if checks is not None else [
                state("check1", "Pending"), state("not-provisioning", "Pending")],
        },
    }


def state(name: str, value: str, message: str = "", **extra: Any) -> Obj:
    return {"name": name, "state": value, "message": message, "lastTransitionTime": EARLIER,
            **extra}


def config(**spec: Any) -> Obj:
    return {"apiVersion": c.API_VERSION, "kind": "ProvisioningRequestConfig",
            "metadata": {"name": "config1"},
            "spec": {"provisioningClassName": "class1", "parameters": {"p1": "v1"},
                     "retryStrategy": {"backoffLimitCount": 3, "backoffBaseSeconds": 60,
                                       "backoffMaxSeconds": 1800},
                     **spec}}


def request(
    *conditions: Obj, name: str = REQUEST, pod_sets: list[tuple[str, int]] | None = None,
    parameters: dict[str, str] | None = None, owned: bool = True, **status: Any,
) -> Obj:
    labels = {c.MANAGED_LABEL: "true", **({pr.WORKLOAD_UID_LABEL: UID} if owned else {})}
    return {
        "apiVersion": pr.API_VERSION, "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "provisioningClassName": "class1",
            "parameters": parameters if parameters is not None else {"p1": "v1"},
            "podSets": [{"podTemplateRef": {"name": f"ppt-{name}-{ps}"}, "count": n}
                        for ps, n in (pod_sets or [("ps1", 4), ("ps2", 3)])],
        },
        "status": {"conditions": list(conditions), **status},
    }


def cond(type_: str, status: str = "True", message: str = "") -> Obj:
    return {"type": type_, "status": status, "reason": type_, "message": message,
            "lastTransitionTime": EARLIER}


def template(name: str, *, requests: Obj, selector: dict[str, str], tolerations: list[Obj],
             owned: bool = True) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "resources": {"requests": requests}}],
                 "nodeSelector": selector}
    if tolerations:
        spec["tolerations"] = tolerations
    labels = {c.MANAGED_LABEL: "true", **({pr.WORKLOAD_UID_LABEL: UID} if owned else {})}
    return {"apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "template": {"spec": spec}}


TEMPLATE1 = template("ppt-wl-check1-1-ps1", requests={"cpu": "1"}, selector={"f1l1": "v1"},
                     tolerations=[FLV1_TOLERATION])
TEMPLATE2 = template("ppt-wl-check1-1-ps2", requests={"memory": "1M"}, selector={"f2l1": "v1"},
                     tolerations=[])
CREATED = ("ProvisioningRequestCreated", f'Created ProvisioningRequest: "{REQUEST}"')


@dataclass
class Case:
    name: str
    workload: Obj = field(default_factory=base_workload)
    config: Obj | None = field(default_factory=config)
    requests: list[Obj] = field(default_factory=list)
    templates: list[Obj] = field(default_factory=list)
    # Requests to fail on the API: (resource, HTTP code).
    fail: tuple[Any, int] | None = None
    # check1's state and message after the reconcile; None: check1 is not written.
    want_check: tuple[str, str] | None = None
    want_pod_set_updates: list[Obj] | None = None
    want_requeue_after: int | None = None
    # Requests on the API afterwards, by name: (podSets as (template, count), parameters).
    want_requests: dict[str, tuple[list[tuple[str, int]], dict[str, str]]] | None = None
    want_requests_not_found: list[str] = field(default_factory=list)
    # Templates on the API afterwards, by name: (nodeSelector, tolerations, requests).
    want_templates: dict[str, tuple[dict[str, str], list[Obj], Obj]] | None = None
    want_events: list[tuple[str, str]] = field(default_factory=list)
    want_event_prefix: tuple[str, str] | None = None
    # The checks of ClusterQueue q1.
    cq_checks: tuple[str, ...] = ("check1", "not-provisioning")


def _requests_of(cluster: FakeCluster) -> dict[str, tuple[list[tuple[str, int]], dict[str, str]]]:
    return {
        o["metadata"]["name"]: (
            [(p["podTemplateRef"]["name"], p["count"]) for p in o["spec"].get("podSets") or []],
            o["spec"].get("parameters") or {},
        )
        for o in cluster.server.objects(PROVISIONING_REQUESTS)
    }


def _templates_of(cluster: FakeCluster) -> dict[str, tuple[dict[str, str], list[Obj], Obj]]:
    out = {}
    for o in cluster.server.objects(POD_TEMPLATES):
        spec = o["template"]["spec"]
        out[o["metadata"]["name"]] = (
            spec.get("nodeSelector") or {}, spec.get("tolerations") or [],
            spec["containers"][0]["resources"].get("requests") or {},
        )
    return out


def _store(items: list[tuple[str, Any]]) -> Store[Any]:
    store: Store[Any] = Store()
    for key, obj in items:
        store._put(key, obj, "1")
    return store


def _parse(doc: Obj) -> Any:
    return parse_object(doc, validate=False)


async def reconcile(cluster: FakeCluster, case: Case) -> tuple[Obj, Events]:
    """One reconcile of ``wl``; returns it as the API holds it after, and the events."""
    flavors: list[Obj] = [
        {"apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "flv1"},
         "spec": {"nodeLabels": {"f1l1": "v1"}, "tolerations": [FLV1_TOLERATION]}},
        {"apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "flv2"},
         "spec": {"nodeLabels": {"f2l1": "v1"}}},
    ]
    checks: list[Obj] = [
        {"apiVersion": c.API_VERSION, "kind": "AdmissionCheck", "metadata": {"name": "check1"},
         "spec": {"controllerName": CONTROLLER_NAME, "parameters": {
             "apiGroup": c.GROUP, "kind": "ProvisioningRequestConfig", "name": "config1"}}},
        {"apiVersion": c.API_VERSION, "kind": "AdmissionCheck",
         "metadata": {"name": "not-provisioning"},
         "spec": {"controllerName": "example.com/other"}},
    ]
    cq: Obj = {"apiVersion": c.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": "q1"},
          "spec": {"admissionChecksStrategy": {"admissionChecks": [
              {"name": n} for n in case.cq_checks]}} if case.cq_checks else {}}
    for obj in case.requests:
        cluster.server.add(PROVISIONING_REQUESTS, obj)
    for obj in case.templates:
        cluster.server.add(POD_TEMPLATES, obj)
    stored = cluster.server.add(WORKLOADS, case.workload)
    if case.fail is not None:
        cluster.server.fail("POST", case.fail[0], code=case.fail[1])
    events = Events()
    configs: list[tuple[str, ProvisioningRequestConfig]] = (
        [("config1", _parse(case.config))] if case.config is not None else []
    )
    queues: Store[ClusterQueue] = _store([("q1", _parse(cq))])
    provisioning = ProvisioningController(
        configs=_store(configs),
        flavors=_store([(f["metadata"]["name"], _parse(f)) for f in flavors]),
        kube=cluster.kube, events=events, cluster_queues=queues,
    )
    checks_store: Store[AdmissionCheck] = _store([(a["metadata"]["name"], _parse(a)) for a in checks])
    workloads: Store[Workload] = _store([(f"{NS}/wl", Workload.model_validate(stored))])
    reconciler = WorkloadChecks(
        workloads=workloads, cluster_queues=queues, checks=checks_store,
        controllers={CONTROLLER_NAME: provisioning}, kube=cluster.kube, events=events,
        releases_itself=lambda _wl: False, now=lambda: NOW,
    )
    await reconciler(f"{NS}/wl")
    after = cluster.server.get(WORKLOADS, "wl", NS)
    assert after is not None
    return after, events


def _check(wl: Obj, name: str) -> Obj:
    return next(s for s in wl["status"]["admissionChecks"] if s["name"] == name)


def _failed_request() -> Obj:
    return request(cond("Failed", message="By test"))


def _revoked() -> Obj:
    return request(cond("Failed", "False"), cond("Provisioned"), cond("Accepted"),
                   cond("CapacityRevoked", message="nodes reclaimed"))


def _expired() -> Obj:
    return request(cond("Failed", "False"), cond("Provisioned", "False"), cond("Accepted"),
                   cond("BookingExpired", message="late"))


def _updated(to: str, message: str) -> tuple[str, str]:
    return ("AdmissionCheckUpdated",
            f"Admission check check1 updated state from Pending to {to} with message: {message}")


def _with_checks(wl: Obj, *states: Obj) -> Obj:
    out = copy.deepcopy(wl)
    out["status"]["admissionChecks"] = list(states)
    return out


def _zero_counts() -> Obj:
    wl = base_workload()
    for ps in wl["spec"]["podSets"]:
        ps["count"] = 0
    for psa in wl["status"]["admission"]["podSetAssignments"]:
        psa["count"] = 0
    return wl


def _finished() -> list[Obj]:
    return [{"type": c.FINISHED, "status": "True", "reason": "ByTest", "message": "Finished by test",
             "lastTransitionTime": EARLIER}]


def _evicted(reason: str) -> list[Obj]:
    return [{"type": c.EVICTED, "status": "True", "reason": reason, "message": "",
             "lastTransitionTime": EARLIER}]


def _gpu_limit() -> Obj:
    wl = base_workload()
    ps1 = wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
    ps1["resources"]["limits"] = {"example.com/gpu": "1"}
    return wl


def _merge_workload(policy_case: str) -> Obj:
    """Kueue's five pod sets for the podSetMergePolicy cases."""
    if policy_case == "IdenticalPodTemplates":
        sets = [
            pod_set("ps1", 2, {"cpu": "1"}), pod_set("ps2", 2, {"cpu": "1"}),
            pod_set("ps3", 2, {"memory": "1M"}, priorityClassName="pc-100"),
            pod_set("ps4", 2, {"memory": "1M"}, priorityClassName="pc-100"),
            pod_set("ps5", 1, {"memory": "1M"}, priorityClassName="pc-200"),
        ]
    else:
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
        sets = [
            pod_set("ps1", 2, {"cpu": "1"}, priorityClassName="pc-100"),
            pod_set("ps2", 2, {"cpu": "1"}, priorityClassName="pc-200"),
            pod_set("ps3", 2, {"memory": "1M"}, priorityClassName="pc-100"),
            pod_set("ps4", 2, {"memory": "1M"}, priorityClassName="pc-200"),
            pod_set("ps5", 1, {"memory": "1M"}, priorityClassName="pc-300", affinity=affinity),
        ]
        sets[2]["topologyRequest"] = {"required": "default1"}
        sets[3]["topologyRequest"] = {"required": "default2"}
    assignments = [
        {"name": "ps1", "flavors": {"cpu": "flv1"}, "count": 1},
        {"name": "ps2", "flavors": {"cpu": "flv1"}, "count": 2},
        {"name": "ps3", "flavors": {"cpu": "flv2"}, "count": 2},
        {"name": "ps4", "flavors": {"cpu": "flv2"}, "count": 1},
        {"name": "ps5", "flavors": {"cpu": "flv2"}, "count": 1},
    ]
    return base_workload(pod_sets=sets, assignments=assignments)


CASES = [
    Case("missing config", config=None,
         want_check=("Pending", pr.CHECK_INACTIVE_MESSAGE), want_requests={}),
    Case(
        "with config",
        want_check=("Pending", ""),
        want_requests={REQUEST: ([("ppt-wl-check1-1-ps1", 4), ("ppt-wl-check1-1-ps2", 3)],
                                 {"p1": "v1"})},
        want_templates={
            "ppt-wl-check1-1-ps1": ({"f1l1": "v1"}, [FLV1_TOLERATION], {"cpu": "1"}),
            "ppt-wl-check1-1-ps2": ({"f2l1": "v1"}, [], {"memory": "1M"}),
        },
        want_events=[CREATED],
    ),
    Case(
        "with only zero-count PodSets", workload=_zero_counts(),
        requests=[request()], templates=[TEMPLATE1, TEMPLATE2],
        want_check=("Ready", pr.NO_REQUEST_NEEDED),
        want_requests_not_found=[REQUEST],
        want_events=[("AdmissionCheckUpdated", "Admission check check1 updated state from "
                      "Pending to Ready with message: the provisioning request is not needed")],
    ),
    Case(
        # kqueue's prefix is provreq.kqueue.io/ (convert maps Kueue's provreq.kueue.x-k8s.io/).
        "workload with provreq annotation",
        workload=base_workload(
            pod_sets=[pod_set("main", 1, {"cpu": "1"})],
            assignments=[{"name": "main", "flavors": {}, "count": 1}],
            checks=[state("check1", "Pending")],
            annotations={"provreq.kqueue.io/ValidUntilSeconds": "0",
                         "invalid-provreq-prefix/Foo1": "Bar1",
                         "another-invalid-provreq-prefix/Foo2": "Bar2"},
        ),
        config={"apiVersion": c.API_VERSION, "kind": "ProvisioningRequestConfig",
                "metadata": {"name": "config1"}, "spec": {"provisioningClassName": "class1"}},
        want_requests={REQUEST: ([("ppt-wl-check1-1-main", 1)], {"ValidUntilSeconds": "0"})},
        want_events=[CREATED],
    ),
    Case(
        # A request of a check the workload no longer has (kqueue's are found by their
        # workload-UID label; one not made for the workload is never touched).
        "remove unnecessary requests",
        requests=[request(name="wl-check2-1", pod_sets=[("ps1", 4)]),
                  request(name="wl-check3-1", pod_sets=[("ps1", 4)], owned=False)],
        want_check=("Pending", ""),
        want_requests={REQUEST: ([("ppt-wl-check1-1-ps1", 4), ("ppt-wl-check1-1-ps2", 3)],
                                 {"p1": "v1"}),
                       "wl-check3-1": ([("ppt-wl-check3-1-ps1", 4)], {"p1": "v1"})},
        want_requests_not_found=["wl-check2-1"],
        want_events=[CREATED],
    ),
    Case(
        # Not Kueue's: a check the ClusterQueue requires that the workload does not list yet
        # (added this round) may have made its request already; it is kept.
        "a request of a required check not listed yet is kept",
        cq_checks=("check0", "check1", "not-provisioning"),
        requests=[request(name="wl-check0-1", pod_sets=[("ps1", 4)])],
        want_check=("Pending", ""),
        want_requests={REQUEST: ([("ppt-wl-check1-1-ps1", 4), ("ppt-wl-check1-1-ps2", 3)],
                                 {"p1": "v1"}),
                       "wl-check0-1": ([("ppt-wl-check0-1-ps1", 4)], {"p1": "v1"})},
        want_events=[CREATED],
    ),
    Case(
        "one template already created", templates=[TEMPLATE1],
        want_check=("Pending", ""),
        want_requests={REQUEST: ([("ppt-wl-check1-1-ps1", 4), ("ppt-wl-check1-1-ps2", 3)],
                                 {"p1": "v1"})},
        want_templates={
            "ppt-wl-check1-1-ps1": ({"f1l1": "v1"}, [FLV1_TOLERATION], {"cpu": "1"}),
            "ppt-wl-check1-1-ps2": ({"f2l1": "v1"}, [], {"memory": "1M"}),
        },
        want_events=[CREATED],
    ),
    Case(
        # A ProvisioningRequest's spec is immutable: the attempt's request is followed as it is,
        # not replaced (a new attempt gets a new one).
        "request out of sync",
        requests=[request(pod_sets=[("main", 1)], parameters={"p1": "v0"})],
        want_check=("Pending", ""),
        want_requests={REQUEST: ([("ppt-wl-check1-1-main", 1)], {"p1": "v0"})},
    ),
    Case(
        "request removed on workload finished",
        workload=base_workload(conditions=_finished()),
        requests=[request()], templates=[TEMPLATE1, TEMPLATE2],
        want_requests_not_found=[REQUEST], want_templates={},
    ),
    Case(
        "request removed on workload evicted",
        workload=base_workload(conditions=_evicted("Preempted")),
        requests=[request()], templates=[TEMPLATE1, TEMPLATE2],
        want_requests_not_found=[REQUEST], want_templates={},
    ),
    Case(
        "request removed on workload evicted by admission check",
        workload=base_workload(conditions=_evicted("AdmissionCheck")),
        requests=[request()], templates=[TEMPLATE1, TEMPLATE2],
        want_requests_not_found=[REQUEST], want_templates={},
    ),
    Case(
        "when retry count is preserved but provisioning request was cleaned up",
        workload=base_workload(checks=[state("check1", "Pending", retryCount=1),
                                       state("not-provisioning", "Pending")]),
        want_check=("Pending", ""),
        want_requests={"wl-check1-2": ([("ppt-wl-check1-2-ps1", 4), ("ppt-wl-check1-2-ps2", 3)],
                                       {"p1": "v1"})},
        want_events=[("ProvisioningRequestCreated", 'Created ProvisioningRequest: "wl-check1-2"')],
    ),
    Case(
        "when request fails and is retried",
        config=config(retryStrategy={"backoffLimitCount": 2, "backoffBaseSeconds": 60,
                                     "backoffMaxSeconds": 1800}),
        requests=[_failed_request()], templates=[TEMPLATE1, TEMPLATE2],
        want_check=("Retry", "Retrying after failure: By test"), want_requeue_after=60,
        want_events=[("AdmissionCheckUpdated", "Admission check check1 updated state from "
                      "Pending to Retry with message: Retrying after failure: By test")],
    ),
    Case(
        "when request fails, and there is no retry",
        config=config(retryStrategy={"backoffLimitCount": 0, "backoffBaseSeconds": 60,
                                     "backoffMaxSeconds": 1800}),
        requests=[_failed_request()], templates=[TEMPLATE1, TEMPLATE2],
        want_check=("Rejected", "By test"),
        want_events=[("AdmissionCheckUpdated", "Admission check check1 updated state from "
                      "Pending to Rejected with message: By test")],
    ),
    Case(
        "when request is provisioned",
        requests=[request(cond("Provisioned", message="By test"))],
        templates=[TEMPLATE1, TEMPLATE2],
        want_check=("Ready", "By test"),
        want_pod_set_updates=[{"name": "ps1", "annotations": CONSUME},
                              {"name": "ps2", "annotations": CONSUME}],
        want_events=[("AdmissionCheckUpdated", "Admission check check1 updated state from "
                      "Pending to Ready with message: By test")],
    ),
    Case(
        "when no request is needed",
        config=config(managedResources=["example.org/gpu"]),
        want_check=("Ready", pr.NO_REQUEST_NEEDED), want_requests={},
        want_events=[("AdmissionCheckUpdated", "Admission check check1 updated state from "
                      "Pending to Ready with message: the provisioning request is not needed")],
    ),
    Case(
        "when request is needed for one PodSet (resource request)",
        config=config(managedResources=["memory"]),
        want_check=("Pending", ""),
        want_requests={REQUEST: ([("ppt-wl-check1-1-ps2", 3)], {"p1": "v1"})},
        want_templates={"ppt-wl-check1-1-ps2": ({"f2l1": "v1"}, [], {"memory": "1M"})},
        want_events=[CREATED],
    ),
    Case(
        # The template's requests take the limit where none is set.
        "when request is needed for one PodSet (resource limit)",
        workload=_gpu_limit(), config=config(managedResources=["example.com/gpu"]),
        want_check=("Pending", ""),
        want_requests={REQUEST: ([("ppt-wl-check1-1-ps1", 4)], {"p1": "v1"})},
        want_templates={
            "ppt-wl-check1-1-ps1": ({"f1l1": "v1"}, [FLV1_TOLERATION],
                                    {"cpu": "1", "example.com/gpu": "1"}),
        },
        want_events=[CREATED],
    ),
    Case(
        "when the request is removed while the check is ready; don't create the ProvReq and "
        "keep Ready state",
        workload=base_workload(checks=[state("check1", "Ready"),
                                       state("not-provisioning", "Pending")]),
        want_check=("Ready", ""), want_requests={},
        want_requests_not_found=[REQUEST, "wl-check2-1"],
    ),
    Case(
        "workloads status gets updated based on the provisioning request",
        requests=[request(cond("Failed", "False"), cond(
            "Provisioned", "False",
            "Provisioning Request wasn't provisioned. ETA: 2024-02-22T10:36:40Z"),
            cond("Accepted"))],
        templates=[TEMPLATE1, TEMPLATE2],
        want_check=("Pending", "Provisioning Request wasn't provisioned. ETA: 2024-02-22T10:36:40Z"),
    ),
    Case(
        # Deliberately Retry, not Kueue's Rejected: the workload is evicted and requeued, and
        # its next attempt asks for new capacity (the issue's "CapacityRevoked after admission").
        "workload sets AdmissionCheck status to Rejected when it is not finished and receives "
        "the provisioning request's CapacityRevoked condition (kqueue: Retry)",
        workload=base_workload(admitted=True), requests=[_revoked()],
        want_check=("Retry", "Capacity revoked: nodes reclaimed"), want_requeue_after=60,
        want_events=[_updated("Retry", "Capacity revoked: nodes reclaimed")],
    ),
    Case(
        "workload sets AdmissionCheck status to Rejected when it is not admitted and receives "
        "the provisioning request's CapacityRevoked condition (kqueue: Retry)",
        requests=[_revoked()],
        want_check=("Retry", "Capacity revoked: nodes reclaimed"), want_requeue_after=60,
        want_events=[_updated("Retry", "Capacity revoked: nodes reclaimed")],
    ),
    Case(
        "workloads doesnt set AdmissionCheck status to Rejected when it is finished and "
        "receives the provisioning request's CapacityRevoked condition",
        workload=base_workload(conditions=_finished()), requests=[_revoked()],
        want_check=("Pending", ""),
    ),
    Case(
        "workload does nothing when admitted and receives the provisioning request's "
        "BookingExpired condition",
        workload=base_workload(admitted=True, checks=[state("check1", "Ready"),
                                                      state("not-provisioning", "Ready")]),
        requests=[request(cond("Provisioned"), cond("BookingExpired"))],
        want_check=("Ready", ""),
    ),
    Case(
        "workload retries the admission check when is not admitted and receives the "
        "provisioning request's BookingExpired condition",
        requests=[_expired()],
        want_check=("Retry", "Retrying after booking expired: late"), want_requeue_after=60,
        want_events=[_updated("Retry", "Retrying after booking expired: late")],
    ),
    Case(
        "workload rejects the admission check when is not admitted and receives the "
        "provisioning request's BookingExpired condition",
        config=config(retryStrategy={"backoffLimitCount": 0, "backoffBaseSeconds": 60,
                                     "backoffMaxSeconds": 1800}),
        requests=[_expired()],
        want_check=("Rejected", "late"),
        want_events=[_updated("Rejected", "late")],
    ),
    Case(
        "when pod template creation error", fail=(POD_TEMPLATES, 422),
        want_requests={},
        want_event_prefix=("FailedCreate", 'Error creating PodTemplate "ppt-wl-check1-1-ps1": '),
    ),
    Case(
        "when provisioning request creation error", fail=(PROVISIONING_REQUESTS, 422),
        want_requests={},
        want_templates={
            "ppt-wl-check1-1-ps1": ({"f1l1": "v1"}, [FLV1_TOLERATION], {"cpu": "1"}),
            "ppt-wl-check1-1-ps2": ({"f2l1": "v1"}, [], {"memory": "1M"}),
        },
        want_event_prefix=("FailedCreate", f'Error creating ProvisioningRequest "{REQUEST}": '),
    ),
    Case(
        # A 409 on create: an earlier reconcile's request (kqueue reads the request by name
        # from the API, not from a cache, so the next sync finds it).
        "when the provisioning request already exists", fail=(PROVISIONING_REQUESTS, 409),
        want_check=("Pending", ""), want_requests={},
    ),
    Case(
        # Another's request with this attempt's name (not labelled with the workload's UID).
        "when the existing request is already visible in the cache",
        requests=[request(cond("Provisioned"), owned=False)],
        want_check=("Pending", f'Error creating ProvisioningRequest "{REQUEST}": '
                    f'provisioningrequests.autoscaling.x-k8s.io "{REQUEST}" already exists'),
        want_events=[("FailedCreate", f'Error creating ProvisioningRequest "{REQUEST}": '
                      f'provisioningrequests.autoscaling.x-k8s.io "{REQUEST}" already exists')],
    ),
    Case(
        "when the request has no conditions yet the previous check message is cleared",
        workload=base_workload(checks=[
            state("check1", "Pending", f'Error creating ProvisioningRequest "{REQUEST}": '
                  f'provisioningrequests.autoscaling.x-k8s.io "{REQUEST}" already exists'),
            state("not-provisioning", "Pending")]),
        requests=[request()], templates=[TEMPLATE1, TEMPLATE2],
        want_check=("Pending", ""),
    ),
    Case(
        "when the request is provisioned the previous check message is cleared",
        workload=base_workload(checks=[
            state("check1", "Pending", f'Error creating ProvisioningRequest "{REQUEST}": '
                  "already exists"),
            state("not-provisioning", "Pending")]),
        requests=[request(cond("Provisioned"))], templates=[TEMPLATE1, TEMPLATE2],
        want_check=("Ready", ""),
        want_pod_set_updates=[{"name": "ps1", "annotations": CONSUME},
                              {"name": "ps2", "annotations": CONSUME}],
        want_events=[("AdmissionCheckUpdated",
                      "Admission check check1 updated state from Pending to Ready")],
    ),
    Case(
        "when request is provisioned and has NodeSelector specified via ProvisioningClassDetail",
        config=config(podSetUpdates={"nodeSelector": [
            {"key": "node-selector-key", "valueFromProvisioningClassDetail": "node-selector-value"}
        ]}),
        requests=[request(cond("Provisioned", message="By test"),
                          provisioningClassDetails={"node-selector-value": "nodes-selector-xyz"})],
        want_check=("Ready", "By test"), want_events=[_updated("Ready", "By test")],
        want_pod_set_updates=[
            {"name": "ps1", "annotations": CONSUME,
             "nodeSelector": {"node-selector-key": "nodes-selector-xyz"}},
            {"name": "ps2", "annotations": CONSUME,
             "nodeSelector": {"node-selector-key": "nodes-selector-xyz"}},
        ],
    ),
    Case(
        "when request is provisioned and has NodeSelector missing in the ProvisioningClassDetail",
        config=config(podSetUpdates={"nodeSelector": [
            {"key": "node-selector-key", "valueFromProvisioningClassDetail": "node-selector-value"}
        ]}),
        requests=[request(cond("Provisioned", message="By test"),
                          provisioningClassDetails={"some-detail": "xyz"})],
        want_check=("Ready", "By test"), want_events=[_updated("Ready", "By test")],
        want_pod_set_updates=[{"name": "ps1", "annotations": CONSUME},
                              {"name": "ps2", "annotations": CONSUME}],
    ),
    Case(
        # ps1+ps2 identical; ps3+ps4 identical; ps5's priority class differs.
        "with podSetMergePolicy IdenticalPodTemplates",
        workload=_merge_workload("IdenticalPodTemplates"),
        config=config(podSetMergePolicy="IdenticalPodTemplates"),
        want_requests={REQUEST: ([("ppt-wl-check1-1-ps1", 3), ("ppt-wl-check1-1-ps3", 3),
                                  ("ppt-wl-check1-1-ps5", 1)], {"p1": "v1"})},
        want_events=[CREATED],
    ),
    Case(
        # Kueue errors (errInconsistentPodSetAssignments) when the admission has no assignment
        # for a pod set; kqueue takes the pod set's own count, as for an assignment without one
        # (the engine always writes an assignment per pod set).
        "with podSetMergePolicy but no PodSetAssignments (kqueue: the spec counts)",
        workload=base_workload(
            pod_sets=[pod_set("ps11", 2, {"cpu": "1"}, priorityClassName="pc-100"),
                      pod_set("ps22", 2, {"cpu": "1"}, priorityClassName="pc-200")],
            assignments=[]),
        config=config(podSetMergePolicy="IdenticalWorkloadSchedulingRequirements"),
        want_requests={REQUEST: ([("ppt-wl-check1-1-ps11", 4)], {"p1": "v1"})},
        want_events=[CREATED],
    ),
    Case(
        # Priority class and topology request do not count; ps5's extra affinity does.
        "with podSetMergePolicy IdenticalWorkloadSchedulingRequirements",
        workload=_merge_workload("IdenticalWorkloadSchedulingRequirements"),
        config=config(podSetMergePolicy="IdenticalWorkloadSchedulingRequirements"),
        want_requests={REQUEST: ([("ppt-wl-check1-1-ps1", 3), ("ppt-wl-check1-1-ps3", 3),
                                  ("ppt-wl-check1-1-ps5", 1)], {"p1": "v1"})},
        want_events=[CREATED],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
async def test_reconcile(cluster: FakeCluster, case: Case) -> None:
    wl, events = await reconcile(cluster, case)
    if case.want_check is not None:
        check1 = _check(wl, "check1")
        assert (check1["state"], check1.get("message", "")) == case.want_check
        assert _check(wl, "not-provisioning")["state"] in ("Pending", "Ready")
        if case.want_pod_set_updates is not None:
            assert check1.get("podSetUpdates") == case.want_pod_set_updates
        if case.want_requeue_after is not None:
            assert check1.get("requeueAfterSeconds") == case.want_requeue_after
    if case.want_requests is not None:
        assert _requests_of(cluster) == case.want_requests
    for name in case.want_requests_not_found:
        assert cluster.server.get(PROVISIONING_REQUESTS, name, NS) is None
    if case.want_templates is not None:
        assert _templates_of(cluster) == case.want_templates
    recorded = [(r, m) for _, _, r, m in events.recorded
                if r in ("ProvisioningRequestCreated", "AdmissionCheckUpdated", "FailedCreate")]
    if case.want_event_prefix is not None:
        reason, prefix = case.want_event_prefix
        assert [(r, m[: len(prefix)]) for r, m in recorded] == [(reason, prefix)]
        assert _check(wl, "check1")["message"].startswith(prefix)
    else:
        assert recorded == case.want_events


@pytest.mark.parametrize(
    "name",
    ["unrelated workload", "unrelated workload with reservation", "unrelated admitted workload"],
)
async def test_reconcile_unrelated(cluster: FakeCluster, name: str) -> None:
    """Workloads without this check: nothing is created, no check state is written."""
    wl = base_workload(checks=[], admitted=name == "unrelated admitted workload")
    if name == "unrelated workload":
        del wl["status"]["admission"]
        wl["status"]["conditions"] = []
    after, events = await reconcile(cluster, Case(name, workload=wl, cq_checks=()))
    assert after["status"].get("admissionChecks", []) == []
    assert cluster.server.objects(PROVISIONING_REQUESTS) == []
    assert cluster.server.objects(POD_TEMPLATES) == []
    assert [r for _, _, r, _ in events.recorded if r != c.ADMITTED] == []
    writes = [verb for verb, _ in cluster.server.writes]
    if name == "unrelated workload with reservation":
        # kqueue's part of every workload's checks (Kueue's workload controller): with none
        # required, Admitted=True; nothing else is written.
        assert writes == ["replace"]
        admitted = next(x for x in after["status"]["conditions"] if x["type"] == c.ADMITTED)
        assert admitted["status"] == "True"
    else:
        assert writes == []


# -- TestActiveOrLastPRForChecks: the request a check follows ---------------------------------


@pytest.mark.parametrize(
    ("name", "requests", "want_state"),
    [
        ("no provisioning requests", [], "Pending"),
        # kqueue names the attempt from the check's retryCount, so the order the requests are
        # listed in never matters: attempt 2's request is followed, not attempt 1's failure.
        ("two provisioning requests; 1 then 2",
         [request(cond("Failed", message="x")), request(name="wl-check1-2")], "Pending"),
        ("two provisioning requests; 2 then 1",
         [request(name="wl-check1-2"), request(cond("Failed", message="x"))], "Pending"),
    ],
)
async def test_active_or_last_pr_for_checks(
    cluster: FakeCluster, name: str, requests: list[Obj], want_state: str
) -> None:
    wl = base_workload(checks=[state("check1", "Pending", retryCount=1),
                               state("not-provisioning", "Pending")])
    after, events = await reconcile(cluster, Case(name, workload=wl, requests=requests))
    assert _check(after, "check1")["state"] == want_state
    assert "wl-check1-2" in _requests_of(cluster)
    created = [m for _, _, r, m in events.recorded if r == "ProvisioningRequestCreated"]
    assert created == ([] if requests else ['Created ProvisioningRequest: "wl-check1-2"'])


# -- indexer_test.go TestIndexProvisioningRequests: a workload's requests ----------------------


def _labelled(name: str, uid: str | None) -> Obj:
    out = request(name=name)
    if uid is None:
        del out["metadata"]["labels"][pr.WORKLOAD_UID_LABEL]
    else:
        out["metadata"]["labels"][pr.WORKLOAD_UID_LABEL] = uid
    return out


@pytest.mark.parametrize(
    ("name", "requests", "want_left"),
    [
        ("no owner", [("name", None)], ["name"]),
        ("single owner, single match", [("name", None), ("name2", UID)], ["name"]),
        # kqueue's requests name their workload by a UID label, one per request (Kueue's
        # index reads ownerReferences, which may name several).
        ("multiple owners, multiple matches",
         [("name", None), ("name2", UID), ("name3", UID), ("name4", "other-uid")],
         ["name", "name4"]),
    ],
)
async def test_index_provisioning_requests(
    cluster: FakeCluster, name: str, requests: list[tuple[str, str | None]], want_left: list[str]
) -> None:
    """The requests cleaned up with a workload are exactly those made for it."""
    for req_name, uid in requests:
        cluster.server.add(PROVISIONING_REQUESTS, _labelled(req_name, uid))
    ctrl = ProvisioningController(configs=Store(), flavors=Store(), kube=cluster.kube,
                                  events=Events())
    await ctrl.cleanup(Workload.model_validate(base_workload()))
    left = sorted(o["metadata"]["name"] for o in cluster.server.objects(PROVISIONING_REQUESTS))
    assert left == want_left
