"""The pure parts of plain pods, waitForPodsReady and elastic slices (no cluster)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.v1alpha1 import Workload, parse_object
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.validation import validate_update
from kqueue.controller.integrations import pod as plain_pods
from kqueue.controller.readiness import admitted_pods, pod_ready
from kqueue.controller.webhook_server import AdmissionRequest
from tests.api.test_validation import workload

Obj = dict[str, Any]


def _pod(*, group: str | None = None, owner: bool = False, queue: bool = True) -> Obj:
    labels = {c.QUEUE_NAME_LABEL: "lq"} if queue else {}
    meta: Obj = {"name": "p", "namespace": "ns", "labels": labels}
    if group is not None:
        labels[c.POD_GROUP_NAME_LABEL] = group
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": "u", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": []}}


def _request(obj: Obj, operation: str = "CREATE") -> AdmissionRequest:
    return AdmissionRequest(
        uid="1", operation=operation, kind={"kind": "Pod"}, resource={"resource": "pods"},  # type: ignore[arg-type]
        namespace="ns", name="p", object=obj, old_object=None,
    )


async def test_plain_pod_is_held_at_creation() -> None:
    verdict = await plain_pods.mutate_plain_pod(_request(_pod()))
    assert verdict.allowed and verdict.patched is not None
    out = verdict.patched
    assert {"name": c.ADMISSION_GATE} in out["spec"]["schedulingGates"]
    assert out["metadata"]["labels"][c.MANAGED_LABEL] == "true"
    assert out["metadata"]["finalizers"] == [c.MANAGED_FINALIZER]
    # Idempotent: a reinvocation changes nothing.
    again = await plain_pods.mutate_plain_pod(_request(out))
    assert again.allowed and again.patched is None


@pytest.mark.parametrize(
    ("pod", "why"),
    [
        (_pod(owner=True), "a Job's pod: the Job integration holds it"),
        (_pod(queue=False), "no queue"),
    ],
)
async def test_other_pods_are_left_alone(pod: Obj, why: str) -> None:
    verdict = await plain_pods.mutate_plain_pod(_request(pod))
    assert verdict.allowed and verdict.patched is None, why
    assert (await plain_pods.mutate_plain_pod(_request(_pod(), "UPDATE"))).patched is None


def test_reconcile_keys() -> None:
    assert plain_pods.reconcile_key(_pod()) == "pod:ns/p"
    assert plain_pods.reconcile_key(_pod(group="g")) == "group:ns/g"
    assert plain_pods.reconcile_key(_pod(owner=True)) is None
    assert plain_pods.group_key(_pod(group="g")) == ["ns/g"]


def test_pod_ready_follows_kueue() -> None:
    ready = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert pod_ready(ready)
    assert pod_ready({"status": {"phase": "Succeeded"}})
    assert not pod_ready({"status": {"phase": "Pending"}})
    deleting = {**ready, "metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}
    assert not pod_ready(deleting)


def _wl(doc: Obj) -> Workload:
    obj = parse_object(doc, validate=False)
    assert isinstance(obj, Workload)
    return obj


def test_admitted_pods_counts_the_admission() -> None:
    assert admitted_pods(_wl(workload(reserved=True))) == 2
    assert admitted_pods(_wl(workload())) == 0


def _shrunk(count: int, flavor: str = "on-demand") -> Obj:
    doc = workload(reserved=True)
    psa = doc["status"]["admission"]["podSetAssignments"][0]
    psa.update(count=count, resourceUsage={"cpu": str(count)}, flavors={"cpu": flavor})
    doc["spec"]["podSets"][0]["count"] = count
    return doc


@pytest.mark.parametrize(
    ("new", "allowed"),
    [
        (_shrunk(1), True),
        (_shrunk(1, flavor="spot"), False),
        (_shrunk(3), False),
    ],
    ids=["scale-down", "flavor changed", "grown in place"],
)
def test_admission_changes_only_by_scale_down(new: Obj, allowed: bool) -> None:
    old = _wl(workload(reserved=True))
    errors = validate_update(old, _wl(copy.deepcopy(new)))
    paths = {e.path for e in errors}
    assert ("status.admission" not in paths) is allowed, errors
