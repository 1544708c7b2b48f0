"""Delayed topology requests in the admission-check reconciler (workload_checks.py): a
workload whose pod set waits with ``delayedTopologyRequest: Pending`` is admitted only with the
placement of the engine's second pass (kqueue/engine/tas/delayed.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from kqueue.api.v1alpha1 import (
    Admission,
    AdmissionCheck,
    AdmissionCheckState,
    Workload,
    parse_object,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.admission_checks.status import feed
from kqueue.controller.admission_checks.workload_checks import (
    WorkloadChecks,
    apply_checks,
    waits_for_placement,
)
from kqueue.controller.informer import Store
from kqueue.engine import types as t
from kqueue.engine.checks import Verdict
from kqueue.engine.engine import Engine
from kqueue.engine.from_api import admission_check_delegates, admission_check_provisions
from kqueue.engine.tas.delayed import PodSetUpdate

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def workload(state: str = "Ready") -> Workload:
    doc: dict[str, Any] = {
        "apiVersion": "kqueue.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": {
            "conditions": [
                {"type": c.QUOTA_RESERVED, "status": "True", "reason": "QuotaReserved",
                 "message": "", "lastTransitionTime": "2025-01-01T11:00:00Z"},
                {"type": c.ADMITTED, "status": "False", "reason": "UnsatisfiedAdmissionChecks",
                 "message": "", "lastTransitionTime": "2025-01-01T11:00:00Z"},
            ],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "tas"}, "resourceUsage": {"cpu": "1"},
                 "count": 1, "delayedTopologyRequest": "Pending"}]},
            "admissionChecks": [{"name": "prov", "state": state, "message": ""}],
        },
    }
    out = parse_object(doc, validate=False)
    assert isinstance(out, Workload)
    return out


def placed() -> Admission:
    return workload_status.api_admission(t.Admission(
        t.ClusterQueueName("cq"),
        (t.PodSetAssignment(
            t.PodSetName("main"), {t.ResourceName("cpu"): t.FlavorName("tas")},
            {t.ResourceName("cpu"): 1000}, 1,
            t.TopologyAssignment(("kubernetes.io/hostname",), ((("x1",), 1),)), "Ready",
        ),),
    ))


def test_admitted_with_the_second_pass_placement() -> None:
    wl = workload()
    assert waits_for_placement(wl.status.admission)
    out, verdict = apply_checks(wl, ["prov"], {}, NOW, second_pass=placed())
    assert verdict == Verdict.ADMIT and out is not None and out.is_admitted
    assert out.status.admission is not None
    (psa,) = out.status.admission.pod_set_assignments
    assert psa.delayed_topology_request == "Ready"
    assert psa.topology_assignment is not None
    assert not waits_for_placement(out.status.admission)


def test_no_room_keeps_the_quota_and_says_why() -> None:
    out, verdict = apply_checks(workload(), ["prov"], {}, NOW,
                                second_pass="couldn't assign flavors to pod set main: no room")
    assert verdict == Verdict.WAIT and out is not None and not out.is_admitted
    cond = out.condition(c.ADMITTED)
    assert cond is not None and cond.reason == "PendingDelayedTopologyRequests"
    assert cond.message.endswith("no room")
    assert out.status.admission is not None  # the reservation is kept


def test_never_admitted_without_a_placement() -> None:
    out, verdict = apply_checks(workload(), ["prov"], {}, NOW)
    assert verdict == Verdict.WAIT and out is not None and not out.is_admitted


def test_pending_check_waits_as_before() -> None:
    out, verdict = apply_checks(workload("Pending"), ["prov"], {}, NOW, second_pass=placed())
    assert verdict == Verdict.WAIT
    assert out is None or out.status.admission == workload("Pending").status.admission


def _check(controller: str, name: str = "x") -> AdmissionCheck:
    out = parse_object({"apiVersion": "kqueue.io/v1alpha1", "kind": "AdmissionCheck",
                        "metadata": {"name": name}, "spec": {"controllerName": controller}})
    assert isinstance(out, AdmissionCheck)
    return out


def test_only_provisioning_request_checks_delay_the_placement() -> None:
    assert admission_check_provisions(_check("kqueue.io/provisioning-request"))
    assert not admission_check_provisions(_check("example.com/custom"))
    assert not admission_check_provisions(_check("kqueue.io/multikueue"))


def test_only_multikueue_checks_delegate_the_placement() -> None:
    assert admission_check_delegates(_check("kqueue.io/multikueue"))
    assert not admission_check_delegates(_check("kqueue.io/provisioning-request"))
    assert not admission_check_delegates(_check("example.com/custom"))


def test_a_rebuilt_engine_knows_which_checks_delay_or_delegate() -> None:
    """status.feed hands each AdmissionCheck's kind to a rebuilt engine: without it a
    MultiKueue manager would place at reservation on its own nodes again."""
    checks: Store[AdmissionCheck] = Store()
    for name, controller in (("mk", "kqueue.io/multikueue"),
                             ("prov", "kqueue.io/provisioning-request"),
                             ("custom", "example.com/custom")):
        checks._put(name, _check(controller, name), "1")
    engine = Engine()
    feed(engine, checks)
    assert engine.cache.multikueue_checks == {"mk"}
    assert engine.cache.provisioning_checks == {"prov"}
    # A check whose controller changes moves from one kind to the other.
    engine.upsert_admission_check("mk", None, provisions=True)
    assert (engine.cache.multikueue_checks, engine.cache.provisioning_checks) == (
        set(), {"mk", "prov"})
    engine.delete_admission_check("mk")
    assert engine.cache.provisioning_checks == {"prov"}


def test_multikueue_check_ready_admits_without_a_placement() -> None:
    """A MultiKueue manager: the second pass marks the pod set Ready with no placement (the
    worker placed it; Kueue's updateDelayedTopologyRequest), and that admits the workload."""
    delegated = workload_status.api_admission(t.Admission(
        t.ClusterQueueName("cq"),
        (t.PodSetAssignment(
            t.PodSetName("main"), {t.ResourceName("cpu"): t.FlavorName("tas")},
            {t.ResourceName("cpu"): 1000}, 1, None, "Ready",
        ),),
    ))
    out, verdict = apply_checks(workload(), ["prov"], {}, NOW, second_pass=delegated)
    assert verdict == Verdict.ADMIT and out is not None and out.is_admitted
    assert out.status.admission is not None
    (psa,) = out.status.admission.pod_set_assignments
    assert (psa.delayed_topology_request, psa.topology_assignment) == ("Ready", None)
    assert not waits_for_placement(out.status.admission)


def _reconciler(second_pass: Any) -> WorkloadChecks:
    # Only the second-pass decision is exercised: no I/O happens before the status write.
    return WorkloadChecks(
        workloads=Store(), cluster_queues=Store(), checks=Store(), controllers={},
        kube=None, events=None, releases_itself=lambda _: False,  # type: ignore[arg-type]
        now=lambda: NOW, second_pass=second_pass,
    )


def test_the_second_pass_runs_once_every_check_is_ready() -> None:
    calls: list[str] = []

    def second_pass(wl: Workload, updates: Sequence[PodSetUpdate]) -> t.Admission | str | None:
        calls.append(wl.key)
        return "no room"

    r = _reconciler(second_pass)
    ready = AdmissionCheckState(name="prov", state="Ready")
    assert r._place_delayed(workload("Pending"), ["prov"], {}, NOW) is None
    assert calls == []
    # Ready as the built-in controller drives it in this reconcile, or as already written.
    assert r._place_delayed(workload("Pending"), ["prov"], {"prov": ready}, NOW) == "no room"
    assert r._place_delayed(workload("Ready"), ["prov"], {}, NOW) == "no room"
    assert calls == ["ns/wl", "ns/wl"]


def test_a_workload_the_engine_does_not_hold_is_tried_again() -> None:
    got = _reconciler(lambda wl, updates: None)._place_delayed(workload(), ["prov"], {}, NOW)
    assert isinstance(got, str)


def test_the_second_pass_gets_the_ready_checks_pod_set_updates() -> None:
    """A ProvisioningRequest's podSetUpdates (the node selector of the nodes it provisioned)
    go to the second pass, as the check reports them in this reconcile."""
    seen: list[Sequence[PodSetUpdate]] = []

    def second_pass(wl: Workload, updates: Sequence[PodSetUpdate]) -> t.Admission | str | None:
        seen.append(updates)
        return "no room"

    ready = AdmissionCheckState.model_validate({
        "name": "prov", "state": "Ready",
        "podSetUpdates": [{"name": "main", "nodeSelector": {"pool": "provisioned"},
                           "tolerations": [{"key": "pool", "operator": "Exists"}]}],
    })
    _reconciler(second_pass)._place_delayed(workload("Pending"), ["prov"], {"prov": ready}, NOW)
    assert seen == [[PodSetUpdate(
        t.PodSetName("main"), {"pool": "provisioned"}, (t.Toleration("pool", "Exists"),)
    )]]
