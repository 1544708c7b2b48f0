"""Which kinds' Workloads take ``spec.maximumExecutionTimeSeconds`` from the
``kqueue.io/max-exec-time-seconds`` label, per registered integration, as Kueue's.

Kueue reads the label in ``jobframework.NewWorkload`` (utils.go,
``MaximumExecutionTimeSecondsForObject``) from the object it builds the Workload from: every
GenericJob (``ConstructWorkload``), a StatefulSet and a LeaderWorkerSet group
(``podcontroller.NewGroupWorkload`` on the StatefulSet / LeaderWorkerSet, in
statefulset_reconciler.go and leaderworkerset_reconciler.go ``constructWorkload``), a pod or a
pod group (from the pod). A Deployment's label reaches nothing: its webhook copies only the queue
and priority labels into the pod template, each pod being its own Workload; kqueue ignores it
too, with an admission warning (Kueue ignores it silently).

Case names with a Kueue test name are Kueue's cases (job_controller_test.go,
job_webhook_test.go) run on each kind; Kueue's StatefulSet, LeaderWorkerSet and Deployment tests
have none for the label.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.integrations.declaration import MaxExecTime, Workloads
from kqueue.api.integrations.pod import (
    group_name,
    group_pods,
    workload_for_pod,
    workload_for_pod_group,
)
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import Framework, frameworks
from kqueue.controller.integrations.deployment import webhook as deployment_webhook
from kqueue.controller.integrations.leaderworkerset import webhook as lws_webhook
from kqueue.controller.integrations.statefulset import webhook as sts_webhook
from kqueue.controller.webhook_server import AdmissionRequest
from tests.controller.test_integration_contracts import PRIORITIES, _members, _sample

Obj = dict[str, Any]
LABEL = c.MAX_EXEC_TIME_SECONDS_LABEL
LABEL_PATH = f"metadata.labels[{LABEL}]"


def _labelled(obj: Obj, value: str | None) -> Obj:
    out = copy.deepcopy(obj)
    if value is not None:
        out["metadata"]["labels"][LABEL] = value
    return out


def _workloads(fw: Framework, value: str | None) -> list[Workload]:
    """The Workloads kqueue builds for the kind's sample (config/samples/) labelled ``value``:
    its own Workload, or those of the pods its webhook templates give (each pod's, or each
    group's), or for plain pods those of the pod-group sample, one alone and one group."""
    decl = fw.declares
    if decl.workloads is Workloads.POD:
        job = fw.job()  # type: ignore[misc]
        out = []
        for group in (False, True):
            members = _members(fw, group)
            for pod in members:
                pod["metadata"]["labels"] = _labelled(pod, value)["metadata"]["labels"]
            out.append(job.workload_for_members(members, PRIORITIES))
        return out
    obj, docs = _sample(fw)
    obj = _labelled(obj, value)
    if decl.workloads is Workloads.OWN:
        assert decl.build is not None
        inputs = decl.inputs(docs) if decl.inputs is not None else {}
        return [decl.build(obj, PRIORITIES, **inputs)]
    assert decl.pods is not None
    pods = decl.pods(obj)
    if decl.workloads is Workloads.EACH_POD:
        return [workload_for_pod(p, PRIORITIES) for p in pods]
    groups: dict[str, list[Obj]] = {}
    for p in pods:
        groups.setdefault(str(group_name(p)), []).append(p)
    return [workload_for_pod_group(group_pods(m), PRIORITIES) for m in groups.values()]


EVERY_KIND = [pytest.param(fw, id=fw.name) for fw in frameworks()]


def test_the_serving_kinds_declare_what_kueue_does() -> None:
    declared = {fw.kind: fw.declares.max_exec_time for fw in frameworks()}
    assert declared["StatefulSet"] is MaxExecTime.OBJECT
    assert declared["LeaderWorkerSet"] is MaxExecTime.OBJECT
    assert declared["Pod"] is MaxExecTime.PODS
    assert declared["Deployment"] is MaxExecTime.IGNORED
    # Every other kind is a GenericJob in Kueue: the object's label.
    others = {k: v for k, v in declared.items() if k not in {"Pod", "Deployment"}}
    assert set(others.values()) == {MaxExecTime.OBJECT}


@pytest.mark.parametrize("fw", EVERY_KIND)
def test_the_maximum_execution_time_is_passed_to_the_created_workload(fw: Framework) -> None:
    """Kueue's job_controller_test.go "the maximum execution time is passed to the created
    workload", on every kind: each of its Workloads has the label's value, or none where the
    kind does not honour it."""
    want = None if fw.declares.max_exec_time is MaxExecTime.IGNORED else 600
    workloads = _workloads(fw, "600")
    assert workloads, f"{fw.name}: its sample gives no Workload"
    assert [wl.spec.maximum_execution_time_seconds for wl in workloads] == [want] * len(workloads)


@pytest.mark.parametrize("fw", EVERY_KIND)
def test_without_the_label_no_maximum_execution_time(fw: Framework) -> None:
    assert {wl.spec.maximum_execution_time_seconds for wl in _workloads(fw, None)} == {None}


# --- the webhooks of the serving kinds ----------------------------------------------------------


def _sts(labels: dict[str, str], ready: int = 0) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "app", "namespace": "ns", "labels": {c.QUEUE_NAME_LABEL: "lq", **labels}},
        "spec": {
            "replicas": 2,
            "template": {"metadata": {"labels": {"app": "app"}}, "spec": {"containers": []}},
        },
        "status": {"readyReplicas": ready},
    }


def _lws(labels: dict[str, str]) -> Obj:
    template = {"spec": {"containers": [{"name": "c", "image": "pause"}]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "ns", "labels": {c.QUEUE_NAME_LABEL: "lq", **labels}},
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": copy.deepcopy(template),
                "workerTemplate": copy.deepcopy(template),
            },
        },
    }


def _deployment(labels: dict[str, str]) -> Obj:
    sts = _sts(labels)
    return {**sts, "kind": "Deployment"}


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        operation="UPDATE" if old is not None else "CREATE",
        kind={"kind": new["kind"]},
        resource={},
        namespace="ns",
        name=new["metadata"]["name"],
        object=new,
        old_object=old,
    )


VALIDATORS = {
    "StatefulSet": (sts_webhook.validate, _sts),
    "LeaderWorkerSet": (lws_webhook.validate, _lws),
}


# Kueue's job_webhook_test.go cases for the label (its StatefulSet and LeaderWorkerSet webhooks do
# not check it, and its reconciler then ignores a bad value; kqueue, whose Workload would not be
# built, refuses it as it does on a Job).
@pytest.mark.parametrize("kind", sorted(VALIDATORS))
@pytest.mark.parametrize(
    ("case", "value", "error"),
    [
        ("invalid maximum execution time", "NaN", "must be an integer, got 'NaN'"),
        ("zero maximum execution time", "0", "should be greater than 0, got 0"),
        ("negative maximum execution time", "-10", "should be greater than 0, got -10"),
        ("valid maximum execution time", "10", None),
    ],
)
async def test_the_serving_kinds_validate_the_label(
    kind: str, case: str, value: str, error: str | None
) -> None:
    validate, make = VALIDATORS[kind]
    verdict = await validate(_request(make({LABEL: value})))
    if error is None:
        assert verdict.allowed, case
        return
    assert not verdict.allowed, case
    [err] = verdict.errors
    assert err.field == LABEL_PATH and error in err.message, (case, err)


@pytest.mark.parametrize("kind", sorted(VALIDATORS))
async def test_an_unchanged_bad_label_is_not_checked_again(kind: str) -> None:
    # As on a Job: an object kqueue already holds is not refused every update for a label it had.
    validate, make = VALIDATORS[kind]
    old = make({LABEL: "NaN"})
    assert (await validate(_request(make({LABEL: "NaN"}), old))).allowed
    changed = await validate(_request(make({LABEL: "0"}), old))
    assert [e.field for e in changed.errors] == [LABEL_PATH]


async def test_the_leaderworkerset_webhook_copies_the_label_into_both_templates() -> None:
    # kqueue builds each group's Workload from its pods, so the label must reach them; dropped
    # from the LeaderWorkerSet it is dropped from the templates (the LeaderWorkerSet's wins).
    verdict = await lws_webhook.mutate(_request(_lws({LABEL: "600"})))
    assert verdict.patched is not None
    lwt = verdict.patched["spec"]["leaderWorkerTemplate"]
    assert [lwt[t]["metadata"]["labels"].get(LABEL) for t in ("leaderTemplate", "workerTemplate")] == [
        "600",
        "600",
    ]
    old = verdict.patched
    dropped = copy.deepcopy(old)
    del dropped["metadata"]["labels"][LABEL]
    again = await lws_webhook.mutate(_request(dropped, old))
    assert again.patched is not None
    lwt = again.patched["spec"]["leaderWorkerTemplate"]
    assert all(LABEL not in lwt[t]["metadata"]["labels"] for t in ("leaderTemplate", "workerTemplate"))


async def test_the_deployment_webhook_does_not_copy_the_label() -> None:
    verdict = await deployment_webhook.mutate(_request(_deployment({LABEL: "600"})))
    assert verdict.patched is not None
    assert LABEL not in verdict.patched["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize(
    ("case", "labels", "old_labels", "warned"),
    [
        ("set on create", {LABEL: "600"}, None, True),
        ("added on update", {LABEL: "600"}, {}, True),
        ("changed on update", {LABEL: "600"}, {LABEL: "60"}, True),
        ("unchanged on update", {LABEL: "600"}, {LABEL: "600"}, False),
        ("absent", {}, None, False),
        # Not kqueue's Deployment: no queue, nothing said.
        ("without a queue", {LABEL: "600", c.QUEUE_NAME_LABEL: ""}, None, False),
    ],
)
async def test_the_deployment_webhook_warns_that_the_label_is_ignored(
    case: str, labels: dict[str, str], old_labels: dict[str, str] | None, warned: bool
) -> None:
    new = _deployment(labels)
    old = None if old_labels is None else _deployment(old_labels)
    verdict = await deployment_webhook.validate(_request(new, old))
    assert verdict.allowed, case
    if not warned:
        assert verdict.warnings == (), case
        return
    [warning] = verdict.warnings
    assert warning.startswith(f"{LABEL_PATH}: ignored on Deployment ns/app"), warning
    assert "no maximum execution time applies" in warning
