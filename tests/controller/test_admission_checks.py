"""The admission-check controllers without I/O: Kueue's provisioning controller and
admission-check reconciler cases (pkg/controller/admissionchecks/provisioning/*_test.go) and its
workload controller's check-based eviction, ported by name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    AdmissionCheckState,
    ClusterQueue,
    ProvisioningRequestConfig,
    Workload,
    parse_object,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.admission_checks.provisioning import requests as pr
from kqueue.controller.admission_checks.provisioning.controller import ProvisioningController
from kqueue.controller.admission_checks.workload_checks import apply_checks, required_checks
from kqueue.controller.informer import Store
from kqueue.engine.checks import Verdict

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def workload(
    *, admitted: bool = False, count: int = 4, gpu: bool = True, checks: list[Any] | None = None,
    active: bool = True, extra_pod_set: bool = False,
) -> Workload:
    resources = {"requests": {"cpu": "1", **({"example.com/gpu": "1"} if gpu else {})}}
    pod_sets = [{"name": "main", "count": count, "template": {"spec": {"containers": [
        {"name": "c", "image": "x", "resources": resources}]}}}]
    if extra_pod_set:
        pod_sets.append({"name": "driver", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}})
    conditions = [{"type": c.QUOTA_RESERVED, "status": "True", "reason": "QuotaReserved",
                   "message": "", "lastTransitionTime": "2025-01-01T11:00:00Z"}]
    conditions.append({"type": c.ADMITTED, "status": "True" if admitted else "False",
                       "reason": "Admitted" if admitted else "UnsatisfiedAdmissionChecks",
                       "message": "", "lastTransitionTime": "2025-01-01T11:00:00Z"})
    doc = {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {"queueName": "lq", "podSets": pod_sets, "active": active},
        "status": {
            "conditions": conditions,
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": ps["name"], "flavors": {"cpu": "gpu-flavor"}, "count": ps["count"]}
                for ps in pod_sets]},
            "admissionChecks": checks or [{"name": "prov", "state": "Pending", "message": ""}],
        },
    }
    out = parse_object(doc, validate=False)
    assert isinstance(out, Workload)
    return out


def config(**spec: Any) -> ProvisioningRequestConfig:
    out = parse_object({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "prc"},
        "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                 **spec},
    })
    assert isinstance(out, ProvisioningRequestConfig)
    return out


def request(*conditions: tuple[str, str], name: str = "wl-prov-1", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                 "podSets": [{"podTemplateRef": {"name": f"ppt-{name}-main"}, "count": 4}]},
        "status": {"conditions": [
            {"type": t, "status": "True", "message": m} for t, m in conditions], **status},
    }


def state(value: str = "Pending", retries: int | None = None) -> AdmissionCheckState:
    return AdmissionCheckState(name="prov", state=value, retry_count=retries,  # type: ignore[arg-type]
                               last_transition_time=NOW - timedelta(minutes=1))


# -- TestReconcile (syncCheckStates) ----------------------------------------------------------


def test_when_request_fails_and_is_retried() -> None:
    got = pr.next_state(workload(), state(), request(("Failed", "out of stock")), config(), NOW)
    assert (got.state, got.message) == ("Retry", "Retrying after failure: out of stock")
    assert got.requeue_after_seconds == 60  # backoffBaseSeconds * 2^0
    assert got.last_transition_time == NOW


def test_when_request_fails_and_there_is_no_retry() -> None:
    prc = config(retryStrategy={"backoffLimitCount": 0})
    got = pr.next_state(workload(), state(), request(("Failed", "out of stock")), prc, NOW)
    assert (got.state, got.message) == ("Rejected", "out of stock")


def test_retry_backoff_doubles_per_attempt_up_to_the_limit() -> None:
    prc = config(retryStrategy={"backoffLimitCount": 3, "backoffBaseSeconds": 10,
                                "backoffMaxSeconds": 25})
    second = pr.next_state(workload(), state(retries=1), request(("Failed", "x"), name="wl-prov-2"),
                           prc, NOW)
    assert (second.state, second.requeue_after_seconds) == ("Retry", 20)
    third = pr.next_state(workload(), state(retries=2), request(("Failed", "x"), name="wl-prov-3"),
                          prc, NOW)
    assert (third.state, third.requeue_after_seconds) == ("Retry", 25)
    fourth = pr.next_state(workload(), state(retries=3), request(("Failed", "x"), name="wl-prov-4"),
                           prc, NOW)
    assert fourth.state == "Rejected"


def test_when_request_is_provisioned() -> None:
    got = pr.next_state(workload(), state(), request(("Provisioned", "done")), config(), NOW)
    assert (got.state, got.message) == ("Ready", "done")
    (update,) = got.pod_set_updates
    assert update.name == "main"
    assert update.annotations == {
        "autoscaling.x-k8s.io/consume-provisioning-request": "wl-prov-1",
        "autoscaling.x-k8s.io/provisioning-class-name":
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
    }


def test_when_request_is_provisioned_and_has_node_selector_specified_via_provisioning_class_detail() -> None:
    prc = config(podSetUpdates={"nodeSelector": [
        {"key": "cloud.example.com/reservation", "valueFromProvisioningClassDetail": "res"},
        {"key": "missing", "valueFromProvisioningClassDetail": "absent"},
    ]})
    req = request(("Provisioned", ""), provisioningClassDetails={"res": "r-1"})
    got = pr.next_state(workload(), state(), req, prc, NOW)
    assert got.pod_set_updates[0].node_selector == {"cloud.example.com/reservation": "r-1"}


def test_when_the_request_has_no_conditions_yet_the_previous_check_message_is_cleared() -> None:
    old = state().model_copy(update={"message": "Error creating ProvisioningRequest"})
    got = pr.next_state(workload(), old, request(), config(), NOW)
    assert (got.state, got.message) == ("Pending", "")


@pytest.mark.parametrize(
    ("name", "admitted", "active", "want"),
    [
        ("workload sets AdmissionCheck status to Retry when it is not finished and receives the "
         "provisioning request's CapacityRevoked condition", True, True, "Retry"),
        ("workloads doesnt change the AdmissionCheck when it is deactivated and receives the "
         "provisioning request's CapacityRevoked condition", True, False, "Ready"),
    ],
)
def test_capacity_revoked(name: str, admitted: bool, active: bool, want: str) -> None:
    wl = workload(admitted=admitted, active=active)
    got = pr.next_state(wl, state("Ready"), request(("CapacityRevoked", "nodes gone")), config(), NOW)
    assert got.state == want


def test_workload_does_nothing_when_admitted_and_receives_booking_expired() -> None:
    got = pr.next_state(workload(admitted=True), state("Ready"),
                        request(("Provisioned", ""), ("BookingExpired", "late")), config(), NOW)
    assert got.state == "Ready"


def test_workload_retries_when_not_admitted_and_receives_booking_expired() -> None:
    got = pr.next_state(workload(), state(), request(("BookingExpired", "late")), config(), NOW)
    assert (got.state, got.message) == ("Retry", "Retrying after booking expired: late")


def test_workload_rejects_when_not_admitted_and_receives_booking_expired() -> None:
    prc = config(retryStrategy={"backoffLimitCount": 0})
    got = pr.next_state(workload(), state(), request(("BookingExpired", "late")), prc, NOW)
    assert (got.state, got.message) == ("Rejected", "late")


# -- the request built (syncOwnedProvisionRequest, createPodTemplate) -------------------------


def test_with_config() -> None:
    prc = config(parameters={"maxRunDurationSeconds": "600"})
    req, templates = pr.build(workload(), "prov", 1, prc, {"gpu-flavor": {"pool": "gpu"}})
    assert req["metadata"]["name"] == "wl-prov-1"
    assert req["spec"] == {
        "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        "parameters": {"maxRunDurationSeconds": "600"},
        "podSets": [{"podTemplateRef": {"name": "ppt-wl-prov-1-main"}, "count": 4}],
    }
    (pt,) = templates
    assert pt["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert req["metadata"]["ownerReferences"][0]["uid"] == "u-1"


def test_when_request_is_needed_for_one_pod_set_resource_request() -> None:
    prc = config(managedResources=["example.com/gpu"])
    req, templates = pr.build(workload(extra_pod_set=True), "prov", 2, prc, {})
    assert [p["podTemplateRef"]["name"] for p in req["spec"]["podSets"]] == ["ppt-wl-prov-2-main"]
    assert len(templates) == 1


def test_when_no_request_is_needed() -> None:
    assert pr.required_pod_sets(workload(gpu=False), ["example.com/gpu"]) == []


def test_with_only_zero_count_pod_sets() -> None:
    assert pr.required_pod_sets(workload(count=0), []) == []


def test_long_names_are_limited() -> None:
    name = pr.request_name("w" * 250, "prov", 1)
    assert len(name) == 253 and name != pr.request_name("w" * 251, "prov", 1)


# -- TestReconcileAdmissionCheck (admissioncheck_reconciler_test.go) --------------------------


def _check(parameters: dict[str, str] | None) -> AdmissionCheck:
    spec: dict[str, Any] = {"controllerName": "kqueue.io/provisioning-request"}
    if parameters is not None:
        spec["parameters"] = parameters
    out = parse_object({"apiVersion": "kqueue.io/v1alpha1", "kind": "AdmissionCheck",
                        "metadata": {"name": "prov"}, "spec": spec})
    assert isinstance(out, AdmissionCheck)
    return out


@pytest.mark.parametrize(
    ("name", "parameters", "want"),
    [
        ("no parameters specified", None, "BadParametersRef"),
        ("bad ref group", {"apiGroup": "other.io", "kind": "ProvisioningRequestConfig",
                           "name": "prc"}, "BadParametersRef"),
        ("bad ref kind", {"apiGroup": "kqueue.io", "kind": "Other", "name": "prc"},
         "BadParametersRef"),
        ("config missing", {"apiGroup": "kqueue.io", "kind": "ProvisioningRequestConfig",
                            "name": "nope"}, "ProvisioningRequestConfigNotFound"),
        ("config found", {"apiGroup": "kqueue.io", "kind": "ProvisioningRequestConfig",
                          "name": "prc"}, None),
    ],
)
def test_reconcile_admission_check(name: str, parameters: dict[str, str] | None, want: str | None) -> None:
    configs: Store[ProvisioningRequestConfig] = Store()
    configs._put("prc", config(), "1")
    ctrl = ProvisioningController(configs=configs, flavors=Store(), kube=None, events=None)  # type: ignore[arg-type]
    inactive = ctrl.inactive(_check(parameters))
    assert (inactive.reason if inactive else None) == want


# -- the workload controller's reconcileCheckBasedEviction / SyncAdmittedCondition ------------


def test_all_checks_ready_admits() -> None:
    wl = workload(checks=[{"name": "prov", "state": "Ready", "message": ""}])
    out, verdict = apply_checks(wl, ["prov"], {}, NOW)
    assert verdict == Verdict.ADMIT and out is not None and out.is_admitted


def test_missing_check_is_added_pending_and_keeps_the_workload_unadmitted() -> None:
    wl = workload(checks=[{"name": "prov", "state": "Ready", "message": ""}])
    out, verdict = apply_checks(wl, ["prov", "ext"], {}, NOW)
    assert verdict == Verdict.WAIT and out is not None
    assert [(s.name, s.state) for s in out.status.admission_checks] == [
        ("ext", "Pending"), ("prov", "Ready")
    ]
    assert not out.is_admitted


def _cq_with_checks(*names: str) -> ClusterQueue:
    out = parse_object({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": n} for n in names]}},
    }, validate=False)
    assert isinstance(out, ClusterQueue)
    return out


def test_checks_added_to_the_cluster_queue_wait_for_a_workload_not_admitted_yet() -> None:
    wl = workload(admitted=False, checks=[{"name": "prov", "state": "Ready", "message": ""}])
    assert required_checks(wl, _cq_with_checks("prov", "later")) == ["later", "prov"]


def test_checks_added_to_the_cluster_queue_never_stop_an_admitted_workload() -> None:
    # Deliberately unlike Kueue (docs/admission-checks.md): nothing already admitted is lost to
    # an edit of its ClusterQueue; a check removed from it is still dropped.
    wl = workload(admitted=True, checks=[{"name": "prov", "state": "Ready", "message": ""}])
    required = required_checks(wl, _cq_with_checks("prov", "later"))
    assert required == ["prov"]
    out, verdict = apply_checks(wl, required, {}, NOW)
    assert verdict == Verdict.ADMIT and (out is None or out.is_admitted)
    assert required_checks(wl, _cq_with_checks("later")) == []


def test_retry_evicts_with_requeue_at() -> None:
    retry = AdmissionCheckState(name="prov", state="Retry", message="out of stock",
                                requeue_after_seconds=60, last_transition_time=NOW)
    out, verdict = apply_checks(workload(), ["prov"], {"prov": retry}, NOW)
    assert verdict == Verdict.RETRY and out is not None
    evicted = out.condition(c.EVICTED)
    assert evicted is not None and evicted.reason == "AdmissionCheck"
    assert evicted.message == 'Evicted due to AdmissionCheck in Retry state: "prov" (out of stock)'
    assert out.status.requeue_state is not None
    assert out.status.requeue_state.requeue_at == NOW + timedelta(seconds=60)


def test_rejected_deactivates_with_message() -> None:
    wl = workload(checks=[{"name": "ext", "state": "Rejected", "message": "quota denied"}])
    out, verdict = apply_checks(wl, ["ext"], {}, NOW, releases_itself=True)
    assert verdict == Verdict.REJECT and out is not None
    target = out.condition(c.DEACTIVATION_TARGET)
    assert target is not None and target.reason == "AdmissionCheck"
    assert target.message == 'AdmissionCheck in Rejected state: "ext" (quota denied)'
    # The quota is held until spec.active false makes the engine evict it (never readmitted
    # in between); the engine's eviction says why (tests/engine/test_admission_checks.py).
    assert out.condition(c.EVICTED) is None
    assert out.status.admission is not None
    again, _ = apply_checks(out, ["ext"], {}, NOW)
    assert again is None  # idempotent


# -- Kueue's admission_checks_wait_time_seconds ------------------------------------------------


def test_admission_is_counted_when_the_checks_pass_not_at_reservation() -> None:
    from kqueue.controller.metrics import Metrics
    from tests.controller.test_metrics import value

    m = Metrics()
    waiting = workload()
    m.workload_admitted(waiting, "cq", 5.0, admitted=False)
    assert value(m, "kqueue_quota_reserved_workloads_total", cluster_queue="cq",
                 priority_class="") == 1
    assert value(m, "kqueue_admitted_workloads_total", cluster_queue="cq",
                 priority_class="") in (None, 0)
    admitted = workload(admitted=True, checks=[{"name": "prov", "state": "Ready", "message": ""}])
    doc = admitted.to_dict()
    doc["status"]["conditions"][1]["lastTransitionTime"] = "2025-01-01T11:02:00Z"
    admitted = Workload.model_validate(doc)
    m.workload_changed(waiting, admitted)
    assert value(m, "kqueue_admitted_workloads_total", cluster_queue="cq", priority_class="") == 1
    assert value(m, "kqueue_admission_checks_wait_time_seconds_sum", cluster_queue="cq",
                 priority_class="") == 120.0
    # Its LocalQueue twin (Kueue's local_queue_admission_checks_wait_time_seconds).
    assert value(m, "kqueue_local_queue_admission_checks_wait_time_seconds_sum", name="lq",
                 namespace="ns", priority_class="") == 120.0
    assert value(m, "kqueue_local_queue_admission_checks_wait_time_seconds_count", name="lq",
                 namespace="ns", priority_class="") == 1


# -- Kueue TestReconcile "with podSetMergePolicy ..." / TestMergePodSetsSkipsZeroCounts ---------


def _two_workers(second_cpu: str, image: str = "x") -> Workload:
    wl = workload(extra_pod_set=True)
    doc = wl.to_dict()
    worker = doc["spec"]["podSets"][1]
    worker["name"] = "workers"
    worker["count"] = 2
    worker["template"]["spec"]["containers"][0].update(image=image)
    worker["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": second_cpu, "example.com/gpu": "1"}}
    doc["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "example.com/gpu": "1"}}
    doc["status"]["admission"]["podSetAssignments"][1].update(name="workers", count=2)
    out = Workload.model_validate(doc)
    return out


@pytest.mark.parametrize(
    ("name", "policy", "cpu", "image", "want"),
    [
        ("with podSetMergePolicy IdenticalPodTemplates", "IdenticalPodTemplates", "1", "x",
         [("ppt-wl-prov-1-main", 6)]),
        ("with podSetMergePolicy IdenticalPodTemplates, templates differ",
         "IdenticalPodTemplates", "1", "y", [("ppt-wl-prov-1-main", 4), ("ppt-wl-prov-1-workers", 2)]),
        ("with podSetMergePolicy IdenticalWorkloadSchedulingRequirements",
         "IdenticalWorkloadSchedulingRequirements", "1", "y", [("ppt-wl-prov-1-main", 6)]),
        ("without podSetMergePolicy", None, "1", "x",
         [("ppt-wl-prov-1-main", 4), ("ppt-wl-prov-1-workers", 2)]),
    ],
)
def test_pod_set_merge_policy(
    name: str, policy: str | None, cpu: str, image: str, want: list[tuple[str, int]]
) -> None:
    prc = config(**({"podSetMergePolicy": policy} if policy else {}))
    wl = _two_workers(cpu, image)
    req, templates = pr.build(wl, "prov", 1, prc, {})
    assert [(p["podTemplateRef"]["name"], p["count"]) for p in req["spec"]["podSets"]] == want
    assert len(templates) == len(want)
    provisioned = {**req, "status": {"conditions": [{"type": "Provisioned", "status": "True"}]}}
    updates = pr.pod_set_updates(wl, provisioned, prc)
    # Every pod set covered by the request consumes it, merged or not.
    assert sorted(u.name for u in updates) == ["main", "workers"]


def test_workload_with_provreq_annotation() -> None:
    doc = workload().to_dict()
    doc["metadata"]["annotations"] = {"provreq.kqueue.io/maxRunDurationSeconds": "600",
                                      "other": "x"}
    wl = Workload.model_validate(doc)
    req, _ = pr.build(wl, "prov", 1, config(parameters={"a": "b"}), {})
    assert req["spec"]["parameters"] == {"a": "b", "maxRunDurationSeconds": "600"}


def test_provreq_annotations_of_a_job_reach_its_workload() -> None:
    from kqueue.api.integrations.common import kept_annotations

    assert kept_annotations({"provreq.kqueue.io/x": "1", "unrelated": "2"}) == {
        "provreq.kqueue.io/x": "1"
    }


# -- Kueue scheduler_test: the reservation's Admitted condition from the check states ---------


def _reserve(checks: list[Any]) -> Workload:
    from kqueue.controller import workload_status
    from kqueue.engine import types as t

    doc = workload(checks=checks).to_dict()
    doc["status"] = {"admissionChecks": checks}
    wl = Workload.model_validate(doc)
    admission = t.Admission(
        t.ClusterQueueName("sales"),
        (t.PodSetAssignment(t.PodSetName("main"), {t.ResourceName("cpu"): t.FlavorName("default")},
                            {t.ResourceName("cpu"): 4000}, 4),),
        reserved_at=NOW, awaiting_checks=True,
    )
    return workload_status.admit(wl, admission, NOW, checks=["check"])


def test_workload_fits_in_single_clusterqueue_with_check_state_ready() -> None:
    out = _reserve([{"name": "check", "state": "Ready", "message": ""}])
    admitted = out.condition(c.ADMITTED)
    assert admitted is not None and admitted.is_true
    assert (admitted.reason, admitted.message) == ("Admitted", "The workload is admitted")
    reserved = out.condition(c.QUOTA_RESERVED)
    assert reserved is not None and reserved.message == "Quota reserved in ClusterQueue sales"


def test_workload_fits_in_single_clusterqueue_with_check_state_pending() -> None:
    out = _reserve([{"name": "check", "state": "Pending", "message": ""}])
    admitted = out.condition(c.ADMITTED)
    assert admitted is not None and not admitted.is_true
    assert (admitted.reason, admitted.message) == (
        "UnsatisfiedAdmissionChecks", "The workload has not all checks ready"
    )
    assert out.condition(c.QUOTA_RESERVED) is not None
    assert [(s.name, s.state) for s in out.status.admission_checks] == [("check", "Pending")]


# -- Kueue TestMergePodSetsSkipsZeroCounts / TestReqIsNeeded ------------------------------------


def _counted(spec_counts: list[int], admitted: list[int | None] | None) -> Workload:
    doc = workload().to_dict()
    doc["spec"]["podSets"] = [
        {"name": f"ps{i}", "count": n, "template": {"spec": {"containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}
        for i, n in enumerate(spec_counts)
    ]
    if admitted is None:
        doc["status"]["admission"]["podSetAssignments"] = []
    else:
        doc["status"]["admission"]["podSetAssignments"] = [
            {"name": f"ps{i}", "flavors": {"cpu": "f"}, **({"count": n} if n is not None else {})}
            for i, n in enumerate(admitted)
        ]
    return Workload.model_validate(doc)


@pytest.mark.parametrize(
    ("name", "spec_counts", "admitted", "policy", "want"),
    [
        ("zero spec count", [0, 2], [0, 2], None, [("ps1", 2)]),
        ("zero admission count override", [1, 2], [0, 2], None, [("ps1", 2)]),
        ("zero count does not block compatible merging", [1, 2, 3], [0, 2, 3],
         "IdenticalPodTemplates", [("ps1", 5)]),
    ],
)
def test_merge_pod_sets_skips_zero_counts(
    name: str, spec_counts: list[int], admitted: list[int | None], policy: str | None,
    want: list[tuple[str, int]],
) -> None:
    prc = config(**({"podSetMergePolicy": policy} if policy else {}))
    got = pr.merged_pod_sets(_counted(spec_counts, admitted), prc)
    assert [(ps.name, n) for ps, n in got] == want


@pytest.mark.parametrize(
    ("name", "spec_counts", "admitted", "want"),
    [
        ("positive admitted count needs request", [1], [1], True),
        ("missing admitted count falls back to spec count", [1], [None], True),
        ("zero admitted count does not need request", [1], [0], False),
        ("zero spec count does not require assignment", [0], None, False),
        # Kueue errors (errInconsistentPodSetAssignments); kqueue takes the spec count, as for
        # an assignment without a count.
        ("missing assignment returns inconsistency error", [1], None, True),
        ("needed podset short circuits later missing assignment", [1, 1], [1], True),
    ],
)
def test_req_is_needed(
    name: str, spec_counts: list[int], admitted: list[int | None] | None, want: bool
) -> None:
    wl = _counted(spec_counts, admitted)
    assert bool(pr.required_pod_sets(wl, ["cpu"])) is want


# -- Kueue TestUpdateCheckMessage (framework.with_state) ----------------------------------------


@pytest.mark.parametrize(
    ("name", "message", "new", "want_changed"),
    [
        ("sets a message on a check that has none", "", "provisioned", True),
        ("replaces an existing message", "waiting for capacity", "provisioned", True),
        ("clears an existing message when the new one is empty",
         'Error creating ProvisioningRequest "wl-check1-1": already exists', "", True),
        ("reports no change when the message is unchanged", "provisioned", "provisioned", False),
        ("reports no change when both messages are empty", "", "", False),
    ],
)
def test_update_check_message(name: str, message: str, new: str, want_changed: bool) -> None:
    from kqueue.controller.admission_checks.framework import with_state

    before = AdmissionCheckState(name="check1", state="Pending", message=message,
                                 last_transition_time=NOW)
    after = with_state(before, "Pending", new, NOW + timedelta(minutes=1))
    assert after.message == new
    assert (after != before) is want_changed
    assert after.last_transition_time == NOW  # the state did not change


# -- TestReconcileAdmissionCheck "unrelated check" ----------------------------------------------


def test_unrelated_check_gets_no_active_condition_from_kqueue() -> None:
    from kqueue.controller.admission_checks.status import CheckStatus

    configs: Store[ProvisioningRequestConfig] = Store()
    ctrl = ProvisioningController(configs=configs, flavors=Store(), kube=None, events=None)  # type: ignore[arg-type]
    status = CheckStatus(checks=Store(), controllers={ctrl.controller_name: ctrl},
                         kube=None, now=lambda: NOW)  # type: ignore[arg-type]
    other = _check(None).model_copy(deep=True)
    other.spec.controller_name = "example.com/other"
    assert status.wanted(other) is None
    assert status.wanted(_check(None)) == (
        "False", "BadParametersRef",
        "spec.parameters is not set; the check needs a ProvisioningRequestConfig "
        "(apiGroup kqueue.io, kind ProvisioningRequestConfig)",
    )


# -- Kueue workload_controller_test.go: TestSyncCheckStates ------------------------------------


@pytest.mark.parametrize(
    ("name", "states", "required", "want", "want_change"),
    [
        ("nil conditions, nil list", [], [], [], False),
        ("add to nil conditions", [], ["ac1", "ac2"],
         [("ac1", "Pending", ""), ("ac2", "Pending", "")], True),
        ("add and remove", [("ac0", "Pending", ""), ("ac1", "Pending", "")], ["ac1", "ac2"],
         [("ac1", "Pending", ""), ("ac2", "Pending", "")], True),
        ("cleanup", [("ac0", "Pending", ""), ("ac1", "Pending", "")], [], [], True),
        ("preserve conditions data", [("ac0", "Ready", "Message one"), ("ac1", "Pending", "")],
         ["ac0", "ac1"], [("ac0", "Ready", "Message one"), ("ac1", "Pending", "")], False),
    ],
)
def test_sync_check_states(
    name: str, states: list[tuple[str, str, str]], required: list[str],
    want: list[tuple[str, str, str]], want_change: bool,
) -> None:
    from kqueue.engine import checks as ck

    given = [AdmissionCheckState(name=n, state=s, message=m, last_transition_time=NOW)  # type: ignore[arg-type]
             for n, s, m in states]
    got, changed = ck.sync(given, required, NOW + timedelta(minutes=1))
    assert [(s.name, s.state, s.message) for s in got] == want
    assert changed is want_change
    kept = {s.name for s in given}
    for s in got:  # kept states keep their transition time; added ones get now
        assert s.last_transition_time == (NOW if s.name in kept else NOW + timedelta(minutes=1))


# -- Kueue TestReconcileSyncAdmissionChecks and TestReconcile's check cases ---------------------


def _strategy_cq(*rules: tuple[str, list[str]]) -> ClusterQueue:
    out = parse_object({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"admissionChecksStrategy": {"admissionChecks": [
            {"name": n, **({"onFlavors": f} if f else {})} for n, f in rules]}} if rules else {},
    }, validate=False)
    assert isinstance(out, ClusterQueue)
    return out


def _reserved_on(flavor: str, checks: list[Any] | None = None) -> Workload:
    doc = workload(gpu=False, checks=checks if checks is not None else []).to_dict()
    doc["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"cpu": flavor}
    if checks is None:
        doc["status"]["admissionChecks"] = []
    return Workload.model_validate(doc)


@pytest.mark.parametrize(
    ("name", "wl_flavor", "rules", "given", "want"),
    [
        ("no checks in cq", "flavor1", [], [], []),
        ("add checks from cq", "flavor1", [("ac1", []), ("ac2", [])], [],
         [("ac1", "Pending"), ("ac2", "Pending")]),
        # Kueue lists the checks on a workload before it reserves quota too (then only those
        # for every flavor); kqueue lists them at the reservation, for the flavors assigned.
        ("add only checks covering all flavors to unadmitted wl from cq with strategy",
         "flavor2", [("ac1", ["flavor1"]), ("ac2", [])], [], [("ac2", "Pending")]),
        ("add checks to admitted wl from cq with strategy", "flavor1",
         [("ac1", ["flavor1"]), ("ac2", ["flavor2"]), ("ac3", [])], [],
         [("ac1", "Pending"), ("ac3", "Pending")]),
        ("keep only existing valid checks", "flavor1", [("ac1", []), ("ac2", [])],
         [{"name": "ac1", "state": "Ready", "message": ""},
          {"name": "ac3", "state": "Ready", "message": ""}],
         [("ac1", "Ready"), ("ac2", "Pending")]),
        ("assign Admission Checks from ClusterQueue.spec.AdmissionCheckStrategy", "flavor1",
         [("ac1", ["flavor1"]), ("ac2", [])], [], [("ac1", "Pending"), ("ac2", "Pending")]),
    ],
)
def test_reconcile_sync_admission_checks(
    name: str, wl_flavor: str, rules: list[tuple[str, list[str]]], given: list[Any],
    want: list[tuple[str, str]],
) -> None:
    wl = _reserved_on(wl_flavor, given)
    required = required_checks(wl, _strategy_cq(*rules))
    out, verdict = apply_checks(wl, required, {}, NOW)
    states = out.status.admission_checks if out is not None else wl.status.admission_checks
    assert [(s.name, s.state) for s in states] == want
    assert verdict == (Verdict.ADMIT if not want else Verdict.WAIT)


def test_admit() -> None:
    from kqueue.controller.admission_checks.workload_checks import admitted_message

    wl = workload(checks=[{"name": "check", "state": "Ready", "message": ""}])
    out, verdict = apply_checks(wl, ["check"], {}, NOW)
    assert verdict == Verdict.ADMIT and out is not None
    admitted = out.condition(c.ADMITTED)
    assert admitted is not None and admitted.is_true
    assert (admitted.reason, admitted.message) == ("Admitted", "The workload is admitted")
    # Reserved at 11:00, admitted at 12:00 (Kueue's event).
    assert admitted_message(out, NOW) == (
        "Admitted by ClusterQueue cq, wait time since reservation was 3600s"
    )


def test_already_admitted() -> None:
    wl = workload(admitted=True, checks=[{"name": "check", "state": "Ready", "message": ""}])
    out, verdict = apply_checks(wl, ["check"], {}, NOW)
    assert verdict == Verdict.ADMIT and out is None  # nothing to write


# -- Kueue indexer_test.go TestIndexAdmissionChecks: the checks a config change concerns -------


def _ac(name: str, controller: str, group: str, kind: str, config_name: str) -> AdmissionCheck:
    out = parse_object({"apiVersion": "kqueue.io/v1alpha1", "kind": "AdmissionCheck",
                        "metadata": {"name": name},
                        "spec": {"controllerName": controller, "parameters": {
                            "apiGroup": group, "kind": kind, "name": config_name or "x"}}},
                       validate=False)
    assert isinstance(out, AdmissionCheck) and out.spec.parameters is not None
    if not config_name:  # the API refuses an empty name; the function must not match it either
        params = out.spec.parameters.model_copy(update={"name": ""})
        out = out.model_copy(update={"spec": out.spec.model_copy(update={"parameters": params})})
    return out


PROV = "kqueue.io/provisioning-request"


@pytest.mark.parametrize(
    ("name", "checks", "config_name", "want"),
    [
        ("different controller",
         [("check1", "other", "kqueue.io", "ProvisioningRequestConfig", "config1")], "config1", []),
        ("bad ref group",
         [("check1", PROV, "core", "ProvisioningRequestConfig", "config1")], "config1", []),
        ("bad ref kind", [("check1", PROV, "kqueue.io", "kind", "config1")], "config1", []),
        ("empty name", [("check1", PROV, "kqueue.io", "ProvisioningRequestConfig", "")], "", []),
        ("match", [("check1", PROV, "kqueue.io", "ProvisioningRequestConfig", "config1")],
         "config1", ["check1"]),
        ("multiple checks, partial match",
         [("check1", PROV, "kqueue.io", "ProvisioningRequestConfig", "config1"),
          ("check2", PROV, "kqueue.io", "ProvisioningRequestConfig", "config1"),
          ("check3", PROV, "kqueue.io", "ProvisioningRequestConfig", "config2")],
         "config1", ["check1", "check2"]),
    ],
)
def test_index_admission_checks(
    name: str, checks: list[tuple[str, str, str, str, str]], config_name: str, want: list[str]
) -> None:
    from kqueue.controller.admission_checks.provisioning.controller import checks_using

    assert checks_using(config_name, [_ac(*x) for x in checks]) == want


# -- podSetUpdates on release (Kueue's podset.Merge when the job starts) ------------------------


def test_pod_set_updates_of_every_check_are_applied_on_release() -> None:
    from kqueue.controller.integrations.release import pod_set_releases

    flavors: Store[Any] = Store()
    flavors._put("gpu-flavor", parse_object({
        "apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor",
        "metadata": {"name": "gpu-flavor"},
        "spec": {"nodeLabels": {"pool": "gpu"},
                 "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    }), "1")
    wl = workload(admitted=True, checks=[
        {"name": "prov", "state": "Ready", "message": "", "podSetUpdates": [{
            "name": "main",
            "annotations": {"autoscaling.x-k8s.io/consume-provisioning-request": "wl-prov-1"},
            "nodeSelector": {"cloud.example.com/reservation": "r-1"},
        }]},
        {"name": "budget", "state": "Ready", "message": "", "podSetUpdates": [{
            "name": "main", "labels": {"team": "a"},
            "tolerations": [{"key": "spot", "operator": "Equal", "value": "true",
                             "effect": "NoSchedule"}],
        }]},
    ])
    release = pod_set_releases(wl, flavors)["main"]
    assert release.count == 4
    assert dict(release.labels) == {"team": "a"}
    assert dict(release.annotations) == {
        "autoscaling.x-k8s.io/consume-provisioning-request": "wl-prov-1"}
    assert dict(release.node_selector) == {"pool": "gpu", "cloud.example.com/reservation": "r-1"}
    assert list(release.tolerations) == [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    ]
