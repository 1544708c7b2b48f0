"""The MPIJob integration without a cluster: its Workload, its patches and its webhooks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.integrations import IntegrationError, PriorityClasses
from kqueue.api.integrations.mpijob import workload_for_mpijob
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import PodSetRelease, registry
from kqueue.controller.integrations.mpijob.generic import MPIJobIntegration
from kqueue.controller.integrations.mpijob.webhook import SUSPENDABLE as MPIJOB_HOOKS
from kqueue.controller.integrations.suspension import SuspendableWebhooks
from kqueue.controller.webhook_server import AdmissionRequest

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])
HELD = c.SUSPENDED_BY_KQUEUE_ANNOTATION


def _template() -> Obj:
    return {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}


def mpijob(*, workers: int = 2, suspend: bool = False, held: bool = False, queue: str = "lq") -> Obj:
    meta: Obj = {"name": "pi", "namespace": "ns", "uid": "u", "resourceVersion": "3",
                 "labels": {c.QUEUE_NAME_LABEL: queue}, "annotations": {}}
    if held:
        meta["annotations"][HELD] = "true"
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": meta,
        "spec": {
            "runPolicy": {"suspend": suspend or held},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": _template()},
                "Worker": {"replicas": workers, "template": _template()},
            },
        },
    }


def test_launcher_then_worker_pod_sets() -> None:
    wl = workload_for_mpijob(mpijob(workers=3), NO_CLASSES)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("launcher", 1), ("worker", 3)]
    [owner] = wl.metadata.owner_references
    assert (owner.kind, owner.api_version) == ("MPIJob", "kubeflow.org/v2beta1")


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        pytest.param(lambda j: j["spec"].pop("mpiReplicaSpecs"), "spec.mpiReplicaSpecs", id="no replica specs"),
        pytest.param(lambda j: j["spec"]["mpiReplicaSpecs"]["Worker"].__setitem__("replicas", -2),
                     "spec.mpiReplicaSpecs.Worker.replicas", id="negative replicas"),
        pytest.param(lambda j: j["spec"]["mpiReplicaSpecs"]["Launcher"].pop("template"),
                     "spec.mpiReplicaSpecs.Launcher.template.spec", id="no launcher template"),
    ],
)
def test_bad_mpijobs_are_refused_naming_the_field(mutate: Any, path: str) -> None:
    job = mpijob()
    mutate(job)
    with pytest.raises(IntegrationError) as info:
        workload_for_mpijob(job, NO_CLASSES)
    assert info.value.path == path


def test_resume_uses_run_policy_and_each_replica_type_s_flavor() -> None:
    job = mpijob(held=True)
    wl = workload_for_mpijob(job, NO_CLASSES)
    releases = {
        "launcher": PodSetRelease("launcher", 1, {"type": "od"}),
        "worker": PodSetRelease("worker", 2, {"type": "gpu"}),
    }
    patch = MPIJobIntegration().run_patch(job, wl, releases)
    assert patch is not None
    assert patch["spec"]["runPolicy"] == {"suspend": False}
    specs = patch["spec"]["mpiReplicaSpecs"]
    assert specs["Launcher"]["template"]["spec"]["nodeSelector"] == {"type": "od"}
    assert specs["Worker"]["template"]["spec"]["nodeSelector"] == {"type": "gpu"}
    assert patch["metadata"]["annotations"] == {HELD: None}
    assert MPIJobIntegration().stop_patch(job, wl) is None
    assert MPIJobIntegration().stop_patch(mpijob(), wl) == {
        "metadata": {"annotations": {HELD: "true"}},
        "spec": {"runPolicy": {"suspend": True}},
    }


def test_pods_are_found_by_their_labels() -> None:
    pod = {"metadata": {"namespace": "ns", "labels": {
        "training.kubeflow.org/job-name": "pi", "training.kubeflow.org/job-role": "launcher"}}}
    assert MPIJobIntegration().owner_of_pod(pod) == "ns/pi"
    assert MPIJobIntegration().pod_set_of(mpijob(), pod) == "launcher"


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u", operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"},
        resource={"group": "kubeflow.org", "version": "v2beta1", "resource": "mpijobs"},
        namespace="ns", name="pi", object=new, old_object=old,
    )


async def test_a_new_mpijob_is_suspended_through_its_run_policy_and_gated() -> None:
    out = (await SuspendableWebhooks(MPIJOB_HOOKS).mutate(_request(mpijob()))).patched
    assert out is not None
    assert out["spec"]["runPolicy"]["suspend"] is True and "suspend" not in out["spec"]
    assert out["metadata"]["annotations"][HELD] == "true"
    for spec in out["spec"]["mpiReplicaSpecs"].values():
        assert {"name": c.ADMISSION_GATE} in spec["template"]["spec"]["schedulingGates"]


async def test_resuming_a_queued_mpijob_keeps_it_queued() -> None:
    old = mpijob(held=True)
    new = copy.deepcopy(old)
    new["spec"]["runPolicy"]["suspend"] = False
    out = (await SuspendableWebhooks(MPIJOB_HOOKS).mutate(_request(new, old))).patched
    assert out is not None and out["spec"]["runPolicy"]["suspend"] is True


async def test_the_elastic_annotation_is_refused_on_an_mpijob() -> None:
    job = mpijob()
    job["metadata"]["annotations"][c.ELASTIC_JOB_ANNOTATION] = "true"
    verdict = await SuspendableWebhooks(MPIJOB_HOOKS).validate(_request(job))
    assert [e.field for e in verdict.errors] == [f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]"]


def test_registered() -> None:
    fw = registry.get("kubeflow.org/mpijob")
    assert fw.kind == "MPIJob" and fw.suspendable and not fw.default_enabled
