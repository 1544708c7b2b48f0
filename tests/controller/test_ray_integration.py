"""The RayCluster and RayJob integrations without a cluster: their Workloads, patches and
webhooks. Webhook cases ported from Kueue keep Kueue's case names (raycluster_webhook_test.go,
rayjob_webhook_test.go)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kqueue.api.integrations import IntegrationError, PriorityClasses
from kqueue.api.integrations.ray import (
    RAYJOB_NAME_LABEL,
    SUBMITTER_RESOURCES,
    workload_for_raycluster,
    workload_for_rayjob,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import PodSetRelease, registry
from kqueue.controller.integrations.ray.generic import RayClusterIntegration, RayJobIntegration
from kqueue.controller.integrations.ray.webhook import RAYCLUSTER as RAYCLUSTER_HOOKS
from kqueue.controller.integrations.ray.webhook import RAYJOB as RAYJOB_HOOKS
from kqueue.controller.integrations.suspension import SuspendableWebhooks
from kqueue.controller.webhook_server import AdmissionRequest

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])
HELD = c.SUSPENDED_BY_KQUEUE_ANNOTATION


def _template(cpu: str = "1", image: str = "rayproject/ray:2.9") -> Obj:
    return {"spec": {"containers": [{"name": "ray", "image": image, "resources": {"requests": {"cpu": cpu}}}]}}


def cluster_spec(*groups: tuple[str, int]) -> Obj:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": _template("2")},
        "workerGroupSpecs": [
            {"groupName": g, "replicas": n, "minReplicas": n, "maxReplicas": n, "rayStartParams": {}, "template": _template()}
            for g, n in groups
        ],
    }


def _meta(name: str, *, queue: str | None, held: bool) -> Obj:
    meta: Obj = {"name": name, "namespace": "ns", "uid": "u-" + name, "resourceVersion": "3", "labels": {}, "annotations": {}}
    if queue is not None:
        meta["labels"][c.QUEUE_NAME_LABEL] = queue
    if held:
        meta["annotations"][HELD] = "true"
    return meta


def raycluster(*, queue: str | None = "lq", suspend: bool = False, held: bool = False, groups: tuple[tuple[str, int], ...] = (("small", 2),)) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": _meta("rc", queue=queue, held=held),
        "spec": {"suspend": suspend or held, **cluster_spec(*groups)},
    }


def rayjob(*, queue: str | None = "lq", suspend: bool = False, held: bool = False, mode: str | None = None,
           groups: tuple[tuple[str, int], ...] = (("small", 2),)) -> Obj:
    spec: Obj = {
        "entrypoint": "python -c 'print(1)'",
        "suspend": suspend or held,
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": cluster_spec(*groups),
    }
    if mode is not None:
        spec["submissionMode"] = mode
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": _meta("rj", queue=queue, held=held), "spec": spec}


# -- Workloads ----------------------------------------------------------------------------------


def test_raycluster_pod_sets_are_head_then_each_worker_group() -> None:
    wl = workload_for_raycluster(raycluster(groups=(("small", 2), ("big", 3))), NO_CLASSES)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("head", 1), ("small", 2), ("big", 3)]
    assert wl.spec.queue_name == "lq"
    [owner] = wl.metadata.owner_references
    assert (owner.kind, owner.api_version, owner.name) == ("RayCluster", "ray.io/v1", "rc")


def test_a_multi_host_worker_group_counts_replicas_times_hosts() -> None:
    rc = raycluster()
    rc["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 4
    wl = workload_for_raycluster(rc, NO_CLASSES)
    small = wl.pod_set("small")
    assert small is not None and small.count == 8


@pytest.mark.parametrize(
    ("mode", "pod_sets", "head_containers"),
    [
        pytest.param(None, ["head", "small", "submitter"], ["ray"], id="K8sJobMode by default"),
        pytest.param("K8sJobMode", ["head", "small", "submitter"], ["ray"], id="K8sJobMode"),
        pytest.param("SidecarMode", ["head", "small"], ["ray", "ray-job-submitter"], id="SidecarMode"),
        pytest.param("HTTPMode", ["head", "small"], ["ray"], id="HTTPMode"),
    ],
)
def test_rayjob_submitter_pod_set_follows_the_submission_mode(
    mode: str | None, pod_sets: list[str], head_containers: list[str]
) -> None:
    wl = workload_for_rayjob(rayjob(mode=mode), NO_CLASSES)
    assert [ps.name for ps in wl.spec.pod_sets] == pod_sets
    head = wl.pod_set("head")
    assert head is not None
    assert [ct.name for ct in head.template.spec.containers] == head_containers


def test_the_default_submitter_is_kuberays_default_container() -> None:
    wl = workload_for_rayjob(rayjob(), NO_CLASSES)
    submitter = wl.pod_set("submitter")
    assert submitter is not None and submitter.count == 1
    [container] = submitter.template.to_dict()["spec"]["containers"]
    assert container["image"] == "rayproject/ray:2.9"  # the head's image
    assert container["resources"]["requests"] == SUBMITTER_RESOURCES["requests"]


def test_a_submitter_pod_template_is_charged_as_written() -> None:
    job = rayjob()
    job["spec"]["submitterPodTemplate"] = _template("300m")
    wl = workload_for_rayjob(job, NO_CLASSES)
    submitter = wl.pod_set("submitter")
    assert submitter is not None
    assert submitter.template.to_dict()["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "300m"}


@pytest.mark.parametrize(
    ("build", "mutate", "path"),
    [
        pytest.param(workload_for_rayjob, lambda j: j["spec"].pop("rayClusterSpec"), "spec.rayClusterSpec", id="rayjob without rayClusterSpec"),
        pytest.param(workload_for_rayjob, lambda j: j["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].__setitem__("replicas", -1),
                     "spec.rayClusterSpec.workerGroupSpecs[0].replicas", id="negative replicas"),
        pytest.param(workload_for_raycluster, lambda j: j["spec"].pop("headGroupSpec"), "spec.headGroupSpec", id="no head group"),
        pytest.param(workload_for_raycluster, lambda j: j["spec"]["workerGroupSpecs"][0].pop("groupName"),
                     "spec.workerGroupSpecs[0].groupName", id="worker group without a name"),
    ],
)
def test_bad_ray_objects_are_refused_naming_the_field(build: Any, mutate: Callable[[Obj], Any], path: str) -> None:
    obj = rayjob() if build is workload_for_rayjob else raycluster()
    mutate(obj)
    with pytest.raises(IntegrationError) as info:
        build(obj, NO_CLASSES)
    assert info.value.path == path


# -- run, stop, hold ----------------------------------------------------------------------------


def test_raycluster_resumes_with_each_groups_flavor() -> None:
    rc = raycluster(held=True, groups=(("small", 2), ("big", 1)))
    wl = workload_for_raycluster(rc, NO_CLASSES)
    releases = {
        "head": PodSetRelease("head", 1, {"type": "cpu"}),
        "small": PodSetRelease("small", 2, {"type": "cpu"}),
        "big": PodSetRelease("big", 1, {"type": "gpu"}, ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},)),
    }
    patch = RayClusterIntegration().run_patch(rc, wl, releases)
    assert patch is not None
    assert patch["spec"]["suspend"] is False
    assert patch["metadata"]["annotations"] == {HELD: None}
    assert patch["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"type": "cpu"}
    groups = patch["spec"]["workerGroupSpecs"]
    # A list is replaced whole by a merge patch: every group is sent, with its change.
    assert [g["groupName"] for g in groups] == ["small", "big"]
    assert groups[1]["template"]["spec"]["nodeSelector"] == {"type": "gpu"}
    assert groups[1]["template"]["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert groups[0]["rayStartParams"] == {} and groups[0]["replicas"] == 2
    assert RayClusterIntegration().run_patch(raycluster(), wl, releases) is None


def test_rayjob_resumes_with_flavors_in_its_cluster_spec_and_submitter() -> None:
    job = rayjob(held=True)
    job["spec"]["submitterPodTemplate"] = _template("500m")
    wl = workload_for_rayjob(job, NO_CLASSES)
    releases = {n: PodSetRelease(n, 1, {"type": n}) for n in ("head", "small", "submitter")}
    patch = RayJobIntegration().run_patch(job, wl, releases)
    assert patch is not None and patch["spec"]["suspend"] is False
    cluster = patch["spec"]["rayClusterSpec"]
    assert cluster["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"type": "head"}
    assert cluster["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] == {"type": "small"}
    assert patch["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {"type": "submitter"}


def test_stopped_raycluster_gets_its_templates_back_as_recorded() -> None:
    rc = raycluster(held=True)
    wl = workload_for_raycluster(rc, NO_CLASSES)
    running = copy.deepcopy(rc)
    running["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = {"type": "gpu"}
    running["status"] = {"state": "suspended"}
    patch = RayClusterIntegration().hold_patch(running, wl)
    assert patch is not None
    group = patch["spec"]["workerGroupSpecs"][0]
    assert not group["template"]["spec"].get("nodeSelector")  # nulls dropped inside a replaced list
    assert {"name": c.ADMISSION_GATE} in group["template"]["spec"]["schedulingGates"]
    # Still running (KubeRay has not deleted its pods): not yet.
    running["status"] = {"state": "ready"}
    assert RayClusterIntegration().hold_patch(running, wl) is None


@pytest.mark.parametrize(
    ("status", "active"),
    [
        pytest.param({}, False, id="New"),
        pytest.param({"jobDeploymentStatus": "Suspended"}, False, id="Suspended"),
        pytest.param({"jobDeploymentStatus": "Suspending"}, True, id="Suspending"),
        pytest.param({"jobDeploymentStatus": "Running"}, True, id="Running"),
    ],
)
def test_rayjob_is_active_unless_new_or_suspended(status: Obj, active: bool) -> None:
    job = rayjob()
    job["status"] = status
    assert RayJobIntegration().is_active(job) is active


_DEADLINE_MESSAGE = ("The RayJob has passed the activeDeadlineSeconds. "
                     "StartTime: 2026-11-29 20:00:00 +0000 UTC. ActiveDeadlineSeconds: 20")


@pytest.mark.parametrize(
    ("status", "finished"),
    [
        pytest.param({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, None,
                     id="Test_RayJobFinished: jobStatus=Running, jobDeploymentStatus=Running"),
        pytest.param({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "ok"},
                     (c.FINISHED_SUCCEEDED, "ok"), id="succeeded"),
        pytest.param({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"},
                     (c.FINISHED_FAILED, "RayJob failed"), id="complete but stopped"),
        # The rest of Kueue's Test_RayJobFinished cases.
        pytest.param({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"},
                     (c.FINISHED_SUCCEEDED, "RayJob succeeded"),
                     id="Test_RayJobFinished: jobStatus=Succeeded, jobDeploymentStatus=Complete"),
        pytest.param({"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"},
                     (c.FINISHED_FAILED, "RayJob failed"),
                     id="Test_RayJobFinished: jobStatus=Failed, jobDeploymentStatus=Complete"),
        pytest.param({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED"},
                     (c.FINISHED_FAILED, "RayJob failed"),
                     id="Test_RayJobFinished: jobStatus=Failed, jobDeploymentStatus=Failed"),
        # KubeRay v1.5.1's checkActiveDeadlineAndUpdateStatusIfNeeded: the Ray job's own status
        # is left as it was, the deployment Failed with reason DeadlineExceeded and a message.
        pytest.param({"jobDeploymentStatus": "Failed", "jobStatus": "RUNNING",
                      "reason": "DeadlineExceeded", "message": _DEADLINE_MESSAGE},
                     (c.FINISHED_FAILED, _DEADLINE_MESSAGE),
                     id="Test_RayJobFinished: jobStatus=Running, jobDeploymentStatus=Failed "
                        "(when activeDeadlineSeconds is exceeded)"),
        # KubeRay's checkBackoffLimitAndUpdateStatusIfNeeded: a failure within spec.backoffLimit
        # (but DeadlineExceeded) goes Retrying, not Failed; the RayJob runs again.
        pytest.param({"jobDeploymentStatus": "Retrying", "jobStatus": "FAILED", "failed": 1},
                     None, id="retrying within backoffLimit"),
    ],
)
def test_rayjob_finishes_when_kuberay_says_its_deployment_ended(status: Obj, finished: Any) -> None:
    job = rayjob()
    job["status"] = status
    assert RayJobIntegration().finished(job) == finished


def test_a_raycluster_never_finishes() -> None:
    rc = raycluster()
    rc["status"] = {"state": "failed"}
    assert RayClusterIntegration().finished(rc) is None


def test_pods_find_their_object_and_pod_set() -> None:
    head = {"metadata": {"namespace": "ns", "labels": {"ray.io/node-type": "head", "ray.io/group": "headgroup",
                                                       RAYJOB_NAME_LABEL: "rj"},
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rj-x7k2p",
                                              "uid": "c", "controller": True}]}}
    worker = {"metadata": {"namespace": "ns", "labels": {"ray.io/node-type": "worker", "ray.io/group": "small"}}}
    submitter = {"metadata": {"namespace": "ns", "labels": {RAYJOB_NAME_LABEL: "rj", "batch.kubernetes.io/job-name": "rj"}}}
    assert RayJobIntegration().owner_of_pod(head) == "ns/rj"
    assert RayClusterIntegration().owner_of_pod(head) == "ns/rj-x7k2p"
    assert RayJobIntegration().owner_of_pod(worker) is None
    assert RayJobIntegration().pod_set_of(rayjob(), head) == "head"
    assert RayJobIntegration().pod_set_of(rayjob(), worker) == "small"
    assert RayJobIntegration().pod_set_of(rayjob(), submitter) == "submitter"
    assert RayClusterIntegration().pod_set_of(raycluster(), worker) == "small"


# -- webhooks -----------------------------------------------------------------------------------


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    plural = "rayjobs" if new["kind"] == "RayJob" else "rayclusters"
    return AdmissionRequest(
        uid="u", operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "ray.io", "version": "v1", "kind": new["kind"]},
        resource={"group": "ray.io", "version": "v1", "resource": plural},
        namespace="ns", name=new["metadata"]["name"], object=new, old_object=old,
    )


async def test_a_new_raycluster_is_suspended_and_every_group_gated() -> None:
    out = (await SuspendableWebhooks(RAYCLUSTER_HOOKS).mutate(_request(raycluster()))).patched
    assert out is not None
    assert out["spec"]["suspend"] is True and out["metadata"]["annotations"][HELD] == "true"
    templates = [out["spec"]["headGroupSpec"]["template"], *(g["template"] for g in out["spec"]["workerGroupSpecs"])]
    for template in templates:
        assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]
        assert template["metadata"]["labels"][c.MANAGED_LABEL] == "true"


async def test_a_new_rayjob_gets_a_gated_labelled_submitter_template() -> None:
    out = (await SuspendableWebhooks(RAYJOB_HOOKS).mutate(_request(rayjob()))).patched
    assert out is not None and out["spec"]["suspend"] is True
    submitter = out["spec"]["submitterPodTemplate"]
    assert {"name": c.ADMISSION_GATE} in submitter["spec"]["schedulingGates"]
    assert submitter["spec"]["containers"][0]["resources"] == SUBMITTER_RESOURCES
    cluster = out["spec"]["rayClusterSpec"]
    for template in (submitter, cluster["headGroupSpec"]["template"], cluster["workerGroupSpecs"][0]["template"]):
        assert template["metadata"]["labels"][RAYJOB_NAME_LABEL] == "rj"
    # What the Workload is charged for is what the webhook wrote.
    wl = workload_for_rayjob(out, NO_CLASSES)
    ps = wl.pod_set("submitter")
    assert ps is not None and ps.template.to_dict()["spec"]["containers"][0]["resources"] == SUBMITTER_RESOURCES


async def test_a_sidecar_mode_rayjob_gets_no_submitter_template() -> None:
    out = (await SuspendableWebhooks(RAYJOB_HOOKS).mutate(_request(rayjob(mode="SidecarMode")))).patched
    assert out is not None and "submitterPodTemplate" not in out["spec"]


async def test_a_raycluster_a_rayjob_controls_is_left_to_the_rayjob() -> None:
    rc = raycluster()
    rc["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "j", "controller": True}
    ]
    hooks = SuspendableWebhooks(RAYCLUSTER_HOOKS, parent_kinds=frozenset({("ray.io/v1", "RayJob")}))
    assert (await hooks.mutate(_request(rc))).patched is None
    rc["spec"]["enableInTreeAutoscaling"] = True
    assert (await hooks.validate(_request(rc))).allowed
    # With the rayjob framework off, the RayCluster is queued on its own.
    assert (await SuspendableWebhooks(RAYCLUSTER_HOOKS).mutate(_request(raycluster()))).patched is not None


def _with(obj: Obj, change: Callable[[Obj], Any]) -> Obj:
    change(obj)
    return obj


@pytest.mark.parametrize(
    ("obj", "without_queue_name", "fields"),
    [
        pytest.param(_with(rayjob(queue=None), lambda j: j["spec"].pop("rayClusterSpec")), False, [], id="invalid unmanaged"),
        pytest.param(_with(rayjob(), lambda j: j["spec"].pop("rayClusterSpec")), False, ["spec.rayClusterSpec"],
                     id="invalid managed - no cluster selector and no RayClusterSpec"),
        pytest.param(_with(rayjob(queue=None), lambda j: j["spec"].pop("rayClusterSpec")), True, ["spec.rayClusterSpec"],
                     id="invalid managed - by config"),
        pytest.param(_with(rayjob(), lambda j: j["spec"].__setitem__("shutdownAfterJobFinishes", False)), False,
                     ["spec.shutdownAfterJobFinishes"], id="invalid managed - by queue"),
        pytest.param(_with(rayjob(), lambda j: j["spec"].__setitem__("clusterSelector", {"ray.io/cluster": "c"})), False,
                     ["spec.clusterSelector"], id="invalid managed - has cluster selector and RayClusterSpec"),
        pytest.param(_with(rayjob(), lambda j: j["spec"]["rayClusterSpec"].__setitem__("enableInTreeAutoscaling", True)), False,
                     ["spec.rayClusterSpec.enableInTreeAutoscaling"], id="invalid managed - has auto scaler"),
        pytest.param(rayjob(groups=tuple((f"g{i}", 1) for i in range(8))), False,
                     ["spec.rayClusterSpec.workerGroupSpecs"], id="invalid managed - too many worker groups"),
        pytest.param(rayjob(groups=(("head", 1),)), False,
                     ["spec.rayClusterSpec.workerGroupSpecs[0].groupName"], id="worker group uses head name"),
        pytest.param(_with(rayjob(), lambda j: (j["spec"].pop("rayClusterSpec"), j["spec"].__setitem__("clusterSelector", {"ray.io/cluster": "c"}))),
                     False, [], id="managed with cluster selector only is not queued"),
    ],
)
async def test_rayjob_validation(obj: Obj, without_queue_name: bool, fields: list[str]) -> None:
    verdict = await SuspendableWebhooks(RAYJOB_HOOKS, manage_jobs_without_queue_name=without_queue_name).validate(_request(obj))
    assert [e.field for e in verdict.errors] == fields
    assert verdict.allowed is (not fields)


@pytest.mark.parametrize(
    ("obj", "fields"),
    [
        pytest.param(_with(raycluster(queue=None), lambda r: r["spec"].__setitem__("enableInTreeAutoscaling", True)), [],
                     id="invalid unmanaged"),
        pytest.param(_with(raycluster(), lambda r: r["spec"].__setitem__("enableInTreeAutoscaling", True)),
                     ["spec.enableInTreeAutoscaling"], id="invalid managed - has auto scaler"),
        pytest.param(raycluster(groups=tuple((f"g{i}", 1) for i in range(8))), ["spec.workerGroupSpecs"],
                     id="invalid managed - too many worker groups"),
        pytest.param(raycluster(groups=(("head", 1),)), ["spec.workerGroupSpecs[0].groupName"], id="worker group uses head name"),
        pytest.param(_with(raycluster(), lambda r: r["metadata"]["annotations"].__setitem__(c.ELASTIC_JOB_ANNOTATION, "true")),
                     [f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]"], id="elastic annotation"),
    ],
)
async def test_raycluster_validation(obj: Obj, fields: list[str]) -> None:
    verdict = await SuspendableWebhooks(RAYCLUSTER_HOOKS).validate(_request(obj))
    assert [e.field for e in verdict.errors] == fields


@pytest.mark.parametrize(
    ("old_suspended", "new_queue", "allowed"),
    [
        pytest.param(False, "lq", True, id="queue name unchanged while unsuspended"),
        pytest.param(False, "other", False, id="invalid managed - queue name should not change while unsuspended"),
        pytest.param(True, "other", True, id="managed - queue name can change while suspended"),
    ],
)
async def test_raycluster_queue_name_updates(old_suspended: bool, new_queue: str, allowed: bool) -> None:
    old = raycluster(held=old_suspended)
    new = copy.deepcopy(old)
    new["metadata"]["labels"][c.QUEUE_NAME_LABEL] = new_queue
    verdict = await SuspendableWebhooks(RAYCLUSTER_HOOKS).validate(_request(new, old))
    assert verdict.allowed is allowed
    if not allowed:
        assert [e.field for e in verdict.errors] == [f"metadata.labels[{c.QUEUE_NAME_LABEL}]"]


async def test_resuming_a_queued_rayjob_keeps_it_queued() -> None:
    old = rayjob(held=True)
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    out = (await SuspendableWebhooks(RAYJOB_HOOKS).mutate(_request(new, old))).patched
    assert out is not None and out["spec"]["suspend"] is True


def test_registered() -> None:
    for name, kind in (("ray.io/rayjob", "RayJob"), ("ray.io/raycluster", "RayCluster")):
        fw = registry.get(name)
        assert fw.kind == kind and fw.suspendable and not fw.default_enabled
