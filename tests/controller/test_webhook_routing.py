"""The generated mutating webhook configuration routes each pod to the right handler, once.

The API server's mutating chain is replayed here: webhooks in their order, each called when its
object selector matches the pod as the earlier webhooks left it.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from kqueue.api.config import LabelSelector, default_managed_namespace_selector
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import pod as plain_pods
from kqueue.controller.integrations.job import webhook as job
from kqueue.controller.webhook_server import AdmissionRequest, Verdict
from kqueue.controller.webhooks import pod
from kqueue.controller.webhooks.config import webhook_configurations

Obj = dict[str, Any]
Handler = Callable[[AdmissionRequest], Awaitable[Verdict]]

HANDLERS: dict[str, Handler] = {
    job.MUTATE_PATH: job.JobWebhooks().mutate,
    pod.MUTATE_PATH: pod.mutate_pod,
    plain_pods.MUTATE_PATH: plain_pods.mutate_plain_pod,
}


def _request(kind: str, obj: Obj) -> AdmissionRequest:
    return AdmissionRequest(
        uid="1", operation="CREATE", kind={"kind": kind}, resource={"resource": kind.lower() + "s"},  # type: ignore[arg-type]
        namespace="team-a", name=obj["metadata"]["name"], object=obj, old_object=None,
    )


def _mutating(frameworks: Sequence[str] = ("batch/job", "pod")) -> list[Obj]:
    mutating, _ = webhook_configurations(
        namespace_selector=default_managed_namespace_selector("kqueue-system"),
        base_url="https://127.0.0.1:9443",
        frameworks=frameworks,
    )
    hooks: list[Obj] = mutating["webhooks"]
    return hooks


CALLED: list[str] = []


async def admit(kind: str, obj: Obj, hooks: list[Obj]) -> tuple[Obj, list[str]]:
    """``obj`` after the chain, and the webhooks that changed it (all called ones: CALLED)."""
    CALLED.clear()
    changed = []
    for hook in hooks:
        if kind.lower() + "s" not in hook["rules"][0]["resources"]:
            continue
        labels = obj["metadata"].get("labels") or {}
        if not LabelSelector.model_validate(hook["objectSelector"]).matches(labels):
            continue
        CALLED.append(hook["name"])
        path = hook["clientConfig"]["url"].removeprefix("https://127.0.0.1:9443")
        verdict = await HANDLERS[path](_request(kind, copy.deepcopy(obj)))
        assert verdict.allowed, (hook["name"], verdict)
        if verdict.patched is not None:
            obj = verdict.patched
            changed.append(hook["name"])
    return obj, changed


def plain_pod() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "labels": {c.QUEUE_NAME_LABEL: "lq"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def test_a_plain_pod_is_held_by_the_plain_pod_webhook() -> None:
    out, changed = await admit("Pod", plain_pod(), _mutating())
    assert changed == [plain_pods.WEBHOOK_NAME]
    # The managed label it adds routes the pod on to mpod (which finds it gated already).
    assert CALLED == [plain_pods.WEBHOOK_NAME, "mpod.kqueue.io"]
    assert {"name": c.ADMISSION_GATE} in out["spec"]["schedulingGates"]
    assert out["metadata"]["labels"][c.MANAGED_LABEL] == "true"
    assert out["metadata"]["finalizers"] == [c.MANAGED_FINALIZER]


async def test_a_jobs_pod_is_never_a_plain_pod() -> None:
    template_labels = {c.QUEUE_NAME_LABEL: "lq"}  # users may copy the queue label here too
    j = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "team-a", "labels": {c.QUEUE_NAME_LABEL: "lq"}},
        "spec": {
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "busybox"}]},
            }
        },
    }
    hooks = _mutating()
    j, changed = await admit("Job", j, hooks)
    assert changed == ["mbatch-job.kqueue.io"]
    # The Job controller creates the pod from the mutated template, owned by the Job.
    template = j["spec"]["template"]
    p = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **copy.deepcopy(template["metadata"]),
            "name": "j-abcde",
            "namespace": "team-a",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                 "uid": "u", "controller": True}],
        },
        "spec": {**copy.deepcopy(template["spec"]), "schedulingGates": []},
    }
    out, changed = await admit("Pod", p, hooks)
    # Only mpod: gated again (its template gate was dropped above), and no plain-pod finalizer.
    assert changed == ["mpod.kqueue.io"]
    assert CALLED == ["mpod.kqueue.io"], "the plain-pod webhook must not even be called"
    assert {"name": c.ADMISSION_GATE} in out["spec"]["schedulingGates"]
    assert not out["metadata"].get("finalizers")


async def test_without_the_pod_framework_plain_pods_are_not_routed() -> None:
    hooks = _mutating(["batch/job"])
    assert plain_pods.WEBHOOK_NAME not in {h["name"] for h in hooks}
    out, changed = await admit("Pod", plain_pod(), hooks)
    assert changed == []
    assert out == plain_pod()


@pytest.mark.parametrize("frameworks", [["batch/job", "pod"], ["pod"]])
def test_the_plain_pod_webhook_fails_closed_in_managed_namespaces(frameworks: list[str]) -> None:
    (hook,) = [h for h in _mutating(frameworks) if h["name"] == plain_pods.WEBHOOK_NAME]
    assert hook["failurePolicy"] == "Fail"
    assert hook["rules"][0]["operations"] == ["CREATE"]
    ns = LabelSelector.model_validate(hook["namespaceSelector"])
    assert ns.matches({"kubernetes.io/metadata.name": "team-a"})
    assert not ns.matches({"kubernetes.io/metadata.name": "kqueue-system"})
