"""The StatefulSet and Deployment webhooks, and the plain-pod webhook on a Deployment's pods.

Case names follow Kueue's statefulset_webhook_test.go and deployment_webhook_test.go where the
case is Kueue's; kqueue's differences are named as such.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kqueue.api.integrations.deployment import PROPAGATED_LABELS
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.deployment import webhook as deployment_webhook
from kqueue.controller.integrations.pod.generic import is_plain
from kqueue.controller.integrations.pod.webhook import mutate_plain_pod
from kqueue.controller.integrations.statefulset import webhook as sts_webhook
from kqueue.controller.webhook_server import AdmissionRequest, Verdict

Obj = dict[str, Any]
QUEUE = c.QUEUE_NAME_LABEL
PRIORITY = c.PRIORITY_CLASS_LABEL


def _obj(
    kind: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    replicas: int = 3,
    ready: int = 0,
    cpu: str = "1",
    template_labels: dict[str, str] | None = None,
) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {
            "name": "app",
            "namespace": "ns",
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"app": "app", **(template_labels or {})}},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
                    ]
                },
            },
        },
        "status": {"readyReplicas": ready},
    }


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    plural = new["kind"].lower() + "s"
    return AdmissionRequest(
        uid="u",
        operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "apps", "version": "v1", "kind": new["kind"]},
        resource={"group": "apps", "version": "v1", "resource": plural},
        namespace="ns",
        name="app",
        object=new,
        old_object=old,
    )


def _errors(verdict: Verdict) -> dict[str, str]:
    return {e.field: e.message for e in verdict.errors}


# -- StatefulSet: mutating -------------------------------------------------------------------------


async def test_statefulset_with_queue_gets_the_gate_and_managed_label() -> None:
    sts = _obj("StatefulSet", labels={QUEUE: "q"})
    verdict = await sts_webhook.mutate(_request(sts))
    assert verdict.patched is not None
    template = verdict.patched["spec"]["template"]
    assert template["spec"]["schedulingGates"] == [{"name": c.ADMISSION_GATE}]
    assert template["metadata"]["labels"] == {"app": "app", c.MANAGED_LABEL: "true"}
    assert sts["spec"]["template"]["spec"].get("schedulingGates") is None, "input untouched"


async def test_statefulset_update_that_dropped_the_gate_gets_it_back() -> None:
    sts = _obj("StatefulSet", labels={QUEUE: "q"})
    held = (await sts_webhook.mutate(_request(sts))).patched
    assert held is not None
    again = await sts_webhook.mutate(_request(held, held))
    assert again.patched is None, "nothing to change on an already held template"
    dropped = copy.deepcopy(held)
    dropped["spec"]["template"]["spec"]["schedulingGates"] = []
    fixed = (await sts_webhook.mutate(_request(dropped, held))).patched
    assert fixed is not None and fixed["spec"]["template"]["spec"]["schedulingGates"] == [
        {"name": c.ADMISSION_GATE}
    ]


async def test_statefulset_without_queue_is_left_alone() -> None:
    verdict = await sts_webhook.mutate(_request(_obj("StatefulSet")))
    assert verdict.allowed and verdict.patched is None


# -- StatefulSet: validating -----------------------------------------------------------------------


@dataclass
class Case:
    old: Obj | None
    new: Obj
    want: dict[str, str] = field(default_factory=dict)
    """field -> a fragment of its message; empty: allowed."""


def _sts(**kw: Any) -> Obj:
    return _obj("StatefulSet", **kw)


STATEFULSET_CASES = {
    "no changes": Case(_sts(labels={QUEUE: "q"}, ready=3), _sts(labels={QUEUE: "q"}, ready=3)),
    "change in queue label": Case(_sts(labels={QUEUE: "q"}), _sts(labels={QUEUE: "q2"})),
    "change in queue label (ReadyReplicas > 0)": Case(
        _sts(labels={QUEUE: "q"}, ready=1),
        _sts(labels={QUEUE: "q2"}),
        {f"metadata.labels[{QUEUE}]": "immutable while the StatefulSet has ready pods (1)"},
    ),
    "set queue label": Case(_sts(), _sts(labels={QUEUE: "q"})),
    "delete queue name": Case(
        _sts(labels={QUEUE: "q"}),
        _sts(),
        {f"metadata.labels[{QUEUE}]": "cannot be removed"},
    ),
    "change in priority class label when replicas not ready": Case(
        _sts(labels={QUEUE: "q", PRIORITY: "p1"}), _sts(labels={QUEUE: "q", PRIORITY: "p2"})
    ),
    "set in priority class label when replicas ready": Case(
        _sts(labels={QUEUE: "q"}, ready=2),
        _sts(labels={QUEUE: "q", PRIORITY: "p2"}),
        {f"metadata.labels[{PRIORITY}]": "immutable while the StatefulSet has ready pods"},
    ),
    # Kueue lets the value change here (its Workload's priority follows); kqueue keeps a running
    # workload's priority class fixed, as for Jobs and JobSets.
    "kqueue: change in priority class label when replicas ready": Case(
        _sts(labels={QUEUE: "q", PRIORITY: "p1"}, ready=2),
        _sts(labels={QUEUE: "q", PRIORITY: "p2"}),
        {f"metadata.labels[{PRIORITY}]": "cannot change from 'p1' to 'p2'"},
    ),
    "delete in priority class label when replicas ready": Case(
        _sts(labels={QUEUE: "q", PRIORITY: "p1"}, ready=2),
        _sts(labels={QUEUE: "q"}),
        {f"metadata.labels[{PRIORITY}]": "immutable"},
    ),
    # kqueue differs from Kueue: a StatefulSet is resized through WorkloadSlices.
    "kqueue: change in replicas (scale up)": Case(
        _sts(labels={QUEUE: "q"}, ready=3), _sts(labels={QUEUE: "q"}, replicas=5, ready=3)
    ),
    "kqueue: change in replicas (scale down)": Case(
        _sts(labels={QUEUE: "q"}, ready=3), _sts(labels={QUEUE: "q"}, replicas=1, ready=3)
    ),
    "attempt to change resources in container": Case(
        _sts(labels={QUEUE: "q"}, ready=3),
        _sts(labels={QUEUE: "q"}, cpu="2"),
        {"spec.template.spec.containers[0].resources.requests": "scale it to 0 first"},
    ),
    "kqueue: change resources while no pod is ready": Case(
        _sts(labels={QUEUE: "q"}), _sts(labels={QUEUE: "q"}, cpu="2")
    ),
    "partial admission annotation is rejected": Case(
        None,
        _sts(labels={QUEUE: "q"}, annotations={c.JOB_MIN_PARALLELISM_ANNOTATION: "1"}),
        {f"metadata.annotations[{c.JOB_MIN_PARALLELISM_ANNOTATION}]": "not supported"},
    ),
    # Every StatefulSet resizes; the annotation asks for nothing more.
    "kqueue: elastic job annotation is accepted": Case(
        None, _sts(labels={QUEUE: "q"}, annotations={c.ELASTIC_JOB_ANNOTATION: "true"})
    ),
}


@pytest.mark.parametrize("case", STATEFULSET_CASES.values(), ids=STATEFULSET_CASES.keys())
async def test_statefulset_validation(case: Case) -> None:
    verdict = await sts_webhook.validate(_request(case.new, case.old))
    errors = _errors(verdict)
    assert sorted(errors) == sorted(case.want), errors
    for path, fragment in case.want.items():
        assert fragment in errors[path], (path, errors[path])
    assert verdict.allowed == (not case.want)


# -- Deployment: mutating --------------------------------------------------------------------------


def _dep(**kw: Any) -> Obj:
    return _obj("Deployment", **kw)


MUTATE_CASES: dict[str, tuple[Obj, dict[str, str] | None]] = {
    "deployment without queue": (_dep(), None),
    "deployment with queue": (_dep(labels={QUEUE: "q"}), {"app": "app", QUEUE: "q"}),
    "deployment with queue and pod template spec queue": (
        _dep(labels={QUEUE: "q"}, template_labels={QUEUE: "other"}),
        {"app": "app", QUEUE: "q"},
    ),
    "deployment with queue and priority class": (
        _dep(labels={QUEUE: "q", PRIORITY: "high"}),
        {"app": "app", QUEUE: "q", PRIORITY: "high"},
    ),
    "deployment with queue, priority class and pod template spec queue, priority class": (
        _dep(labels={QUEUE: "q", PRIORITY: "high"}, template_labels={QUEUE: "x", PRIORITY: "low"}),
        {"app": "app", QUEUE: "q", PRIORITY: "high"},
    ),
    "kqueue: preemption priority and preemptibility labels are propagated too": (
        _dep(
            labels={
                QUEUE: "q",
                c.PREEMPTION_PRIORITY_CLASS_LABEL: "pp",
                c.PREEMPTIBILITY_LABEL: c.NON_PREEMPTIBLE_LABEL_VALUE,
                "team": "a",
            }
        ),
        {
            "app": "app",
            QUEUE: "q",
            c.PREEMPTION_PRIORITY_CLASS_LABEL: "pp",
            c.PREEMPTIBILITY_LABEL: c.NON_PREEMPTIBLE_LABEL_VALUE,
        },
    ),
    "kqueue: a priority class the deployment dropped is dropped from the template": (
        _dep(labels={QUEUE: "q"}, template_labels={PRIORITY: "stale"}),
        {"app": "app", QUEUE: "q"},
    ),
}


@pytest.mark.parametrize(
    ("deployment", "want"), MUTATE_CASES.values(), ids=MUTATE_CASES.keys()
)
async def test_deployment_defaulting(deployment: Obj, want: dict[str, str] | None) -> None:
    verdict = await deployment_webhook.mutate(_request(deployment))
    if want is None:
        assert verdict.patched is None
        return
    assert verdict.patched is not None
    meta = verdict.patched["spec"]["template"]["metadata"]
    assert meta["labels"] == want
    assert meta["annotations"] == {c.SUSPENDED_BY_PARENT_ANNOTATION: "deployment"}
    # The gate and the managed label are the plain-pod webhook's to add, per pod.
    assert "schedulingGates" not in verdict.patched["spec"]["template"]["spec"]
    assert c.MANAGED_LABEL not in meta["labels"]


# -- Deployment: validating ------------------------------------------------------------------------

DEPLOYMENT_CASES = {
    "without queue (no changes)": Case(_dep(), _dep()),
    "with queue (no changes)": Case(_dep(labels={QUEUE: "q"}), _dep(labels={QUEUE: "q"})),
    "with queue": Case(_dep(labels={QUEUE: "q"}), _dep(labels={QUEUE: "q2"})),
    "with queue (ready replicas)": Case(
        _dep(labels={QUEUE: "q"}, ready=1),
        _dep(labels={QUEUE: "q2"}),
        {f"metadata.labels[{QUEUE}]": "immutable while the Deployment has ready pods (1)"},
    ),
    "kqueue: remove queue": Case(
        _dep(labels={QUEUE: "q"}), _dep(), {f"metadata.labels[{QUEUE}]": "cannot be removed"}
    ),
    "update priority-class when suspended": Case(
        _dep(labels={QUEUE: "q", PRIORITY: "p1"}), _dep(labels={QUEUE: "q", PRIORITY: "p2"})
    ),
    "set priority-class when replicas ready": Case(
        _dep(labels={QUEUE: "q"}, ready=1),
        _dep(labels={QUEUE: "q", PRIORITY: "p2"}),
        {f"metadata.labels[{PRIORITY}]": "immutable"},
    ),
    "delete priority-class when replicas ready": Case(
        _dep(labels={QUEUE: "q", PRIORITY: "p1"}, ready=1),
        _dep(labels={QUEUE: "q"}),
        {f"metadata.labels[{PRIORITY}]": "immutable"},
    ),
    "set priority-class when replicas not ready": Case(
        _dep(labels={QUEUE: "q"}), _dep(labels={QUEUE: "q", PRIORITY: "p2"})
    ),
    "elastic job annotation is rejected on create": Case(
        None,
        _dep(labels={QUEUE: "q"}, annotations={c.ELASTIC_JOB_ANNOTATION: "true"}),
        {f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]": "a Deployment cannot be elastic"},
    ),
    "kqueue: partial admission annotation is rejected": Case(
        None,
        _dep(labels={QUEUE: "q"}, annotations={c.JOB_MIN_PARALLELISM_ANNOTATION: "1"}),
        {f"metadata.annotations[{c.JOB_MIN_PARALLELISM_ANNOTATION}]": "not supported"},
    ),
    "kqueue: a pod group label in the template is rejected": Case(
        None,
        _dep(labels={QUEUE: "q"}, template_labels={c.POD_GROUP_NAME_LABEL: "g"}),
        {f"spec.template.metadata.labels[{c.POD_GROUP_NAME_LABEL}]": "never as a pod group"},
    ),
    "kqueue: annotations of an unmanaged deployment are not kqueue's business": Case(
        None, _dep(annotations={c.ELASTIC_JOB_ANNOTATION: "true"})
    ),
}


@pytest.mark.parametrize("case", DEPLOYMENT_CASES.values(), ids=DEPLOYMENT_CASES.keys())
async def test_deployment_validation(case: Case) -> None:
    verdict = await deployment_webhook.validate(_request(case.new, case.old))
    errors = _errors(verdict)
    assert sorted(errors) == sorted(case.want), errors
    for path, fragment in case.want.items():
        assert fragment in errors[path], (path, errors[path])


# -- a Deployment's pods --------------------------------------------------------------------------


def _pod(*, owner_kind: str | None, marked: bool, queue: bool = True) -> Obj:
    meta: Obj = {"name": "p", "namespace": "ns", "labels": {}, "annotations": {}}
    if queue:
        meta["labels"][QUEUE] = "q"
    if marked:
        meta["annotations"][c.SUSPENDED_BY_PARENT_ANNOTATION] = "deployment"
    if owner_kind is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1" if owner_kind != "Job" else "batch/v1", "kind": owner_kind,
             "name": "o", "uid": "u", "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": []}}


POD_CASES = {
    "a Deployment's pod (ReplicaSet-owned, marked)": (_pod(owner_kind="ReplicaSet", marked=True), True),
    "a ReplicaSet's pod the Deployment webhook did not mark": (
        _pod(owner_kind="ReplicaSet", marked=False), False
    ),
    "a Job's pod, even marked, is its Job's (never queued twice)": (
        _pod(owner_kind="Job", marked=True), False
    ),
    "a StatefulSet's pod is its StatefulSet's": (_pod(owner_kind="StatefulSet", marked=True), False),
    "a marked pod without a queue": (_pod(owner_kind="ReplicaSet", marked=True, queue=False), False),
    "a plain pod": (_pod(owner_kind=None, marked=False), True),
}


@pytest.mark.parametrize(("pod", "managed"), POD_CASES.values(), ids=POD_CASES.keys())
async def test_which_pods_the_plain_pod_integration_manages(pod: Obj, managed: bool) -> None:
    assert is_plain(pod) is managed
    req = AdmissionRequest(
        uid="u", operation="CREATE", kind={"kind": "Pod"}, resource={"resource": "pods"},
        namespace="ns", name="p", object=pod, old_object=None,
    )
    verdict = await mutate_plain_pod(req)
    if not managed:
        assert verdict.patched is None
        return
    assert verdict.patched is not None
    out = verdict.patched
    assert out["spec"]["schedulingGates"] == [{"name": c.ADMISSION_GATE}]
    assert out["metadata"]["labels"][c.MANAGED_LABEL] == "true"
    assert out["metadata"]["finalizers"] == [c.MANAGED_FINALIZER]


# -- registration --------------------------------------------------------------------------------


@pytest.mark.parametrize("without_queue_name", [False, True], ids=["labelled", "all-jobs"])
def test_webhook_configurations_route_the_apps_kinds_only_when_enabled(without_queue_name: bool) -> None:
    from kqueue.api.config import LabelSelector
    from kqueue.controller.webhooks.config import webhook_configurations

    def names(frameworks: list[str]) -> tuple[list[str], list[str], Obj]:
        mutating, validating = webhook_configurations(
            namespace_selector=LabelSelector(),
            base_url="https://127.0.0.1:9443",
            manage_jobs_without_queue_name=without_queue_name,
            frameworks=frameworks,
        )
        hooks = {w["name"]: w for cfg in (mutating, validating) for w in cfg["webhooks"]}
        return [w["name"] for w in mutating["webhooks"]], [w["name"] for w in validating["webhooks"]], hooks

    mutating, validating, hooks = names(["batch/job", "pod", "statefulset", "deployment"])
    assert mutating == [
        "mbatch-job.kqueue.io", "mdeployment.kqueue.io", "mstatefulset.kqueue.io",
        "mplainpod.kqueue.io", "mpod.kqueue.io",
    ]
    assert validating == [
        "vbatch-job.kqueue.io", "vdeployment.kqueue.io", "vstatefulset.kqueue.io",
        # the other kinds (JobSet, Ray, ...) are off: a queue label on them is reported
        "vintegrationoff.kqueue.io",
        "vkqueue.kqueue.io",
    ]
    # Serving kinds queue only when they name a queue, whatever manageJobsWithoutQueueName says.
    for name in ("mdeployment.kqueue.io", "vstatefulset.kqueue.io"):
        assert hooks[name]["objectSelector"] == {
            "matchExpressions": [{"key": QUEUE, "operator": "Exists"}]
        }
        assert hooks[name]["failurePolicy"] == "Fail"
    assert hooks["mstatefulset.kqueue.io"]["clientConfig"]["url"].endswith(
        "/mutate-apps-v1-statefulset"
    )
    mutating, validating, _ = names(["batch/job", "pod"])
    assert not [n for n in mutating + validating if "statefulset" in n or "deployment" in n]


# -- invariants ----------------------------------------------------------------------------------

_LABEL_KEYS = st.sampled_from(
    [QUEUE, PRIORITY, c.PREEMPTION_PRIORITY_CLASS_LABEL, c.PREEMPTIBILITY_LABEL, "team", "app"]
)
_VALUES = st.sampled_from(["a", "b", "preemptible"])


@given(
    st.dictionaries(_LABEL_KEYS, _VALUES),
    st.dictionaries(_LABEL_KEYS, _VALUES),
)
def test_deployment_defaulting_propagates_exactly_and_is_idempotent(
    labels: dict[str, str], template_labels: dict[str, str]
) -> None:
    dep = _dep(labels=labels, template_labels=template_labels)
    verdict = asyncio.run(deployment_webhook.mutate(_request(dep)))
    if QUEUE not in labels:
        assert verdict.patched is None
        return
    out = verdict.patched if verdict.patched is not None else dep
    got = out["spec"]["template"]["metadata"]["labels"]
    for key in PROPAGATED_LABELS:
        assert got.get(key) == labels.get(key)
    for key, value in {"app": "app", **template_labels}.items():
        if key not in PROPAGATED_LABELS:
            assert got[key] == value
    again = asyncio.run(deployment_webhook.mutate(_request(out, out)))
    assert again.patched is None


@given(st.integers(min_value=0, max_value=50), st.booleans())
def test_statefulset_defaulting_is_idempotent(replicas: int, labelled: bool) -> None:
    sts = _sts(labels={QUEUE: "q"} if labelled else {}, replicas=replicas)
    first = asyncio.run(sts_webhook.mutate(_request(sts)))
    out = first.patched if first.patched is not None else sts
    assert (first.patched is not None) == labelled
    assert asyncio.run(sts_webhook.mutate(_request(out, out))).patched is None
    assert out["spec"]["replicas"] == replicas
