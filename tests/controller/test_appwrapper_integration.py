"""The AppWrapper integration without a cluster: its Workload from the components' podSets, its
hold through ``spec.suspend``, its patches and webhooks, and the objects it wraps left to it.
Cases ported from Kueue keep Kueue's names (appwrapper_controller_test.go, appwrapper_webhook_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.integrations import IntegrationError, PriorityClasses
from kqueue.api.integrations.appwrapper import (
    APPWRAPPER_LABEL,
    POD_SET_LABEL,
    infer_pod_sets,
    parse_path,
    workload_for_appwrapper,
)
from kqueue.api.integrations.kubeflow import PYTORCHJOB
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import PodSetRelease, registry
from kqueue.controller.integrations.appwrapper.generic import AppWrapperIntegration
from kqueue.controller.integrations.appwrapper.webhook import SUSPENDABLE
from kqueue.controller.integrations.kubeflow.webhook import suspendable as kubeflow_suspendable
from kqueue.controller.integrations.suspension import SuspendableWebhooks
from kqueue.controller.webhook_server import AdmissionRequest

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])
HELD = c.SUSPENDED_BY_KQUEUE_ANNOTATION


def _pod(cpu: str = "1") -> Obj:
    return {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}


def job_component(parallelism: int = 2, pod_sets: list[Obj] | None = None) -> Obj:
    component: Obj = {
        "template": {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": _pod()},
        }
    }
    if pod_sets is not None:
        component["podSets"] = pod_sets
    return component


def pytorch_component() -> Obj:
    return {
        "template": {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": _pod()},
                                             "Worker": {"replicas": 3, "template": _pod("2")}}},
        }
    }


def appwrapper(*components: Obj, queue: str | None = "lq", held: bool = False) -> Obj:
    meta: Obj = {"name": "aw", "namespace": "ns", "uid": "u-aw", "resourceVersion": "3", "labels": {}, "annotations": {}}
    if queue is not None:
        meta["labels"][c.QUEUE_NAME_LABEL] = queue
    if held:
        meta["annotations"][HELD] = "true"
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": meta,
        "spec": {"suspend": held, "components": list(components) or [job_component(pod_sets=[{"path": "template.spec.template", "replicas": 2}])]},
    }


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u", operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "workload.codeflare.dev", "version": "v1beta2", "kind": "AppWrapper"},
        resource={"group": "workload.codeflare.dev", "version": "v1beta2", "resource": "appwrappers"},
        namespace="ns", name=new["metadata"]["name"], object=new, old_object=old,
    )


# -- Workload (Kueue's TestPodSets) -----------------------------------------------------------------


def test_pod_sets_no_annotations() -> None:
    # Kueue's "no annotations": one pod set per podSets entry over all components, named
    # <appwrapper>-<index>, each of its entry's replicas.
    aw = appwrapper(
        job_component(pod_sets=[{"path": "template.spec.template", "replicas": 2}]),
        {**pytorch_component(), "podSets": [
            {"path": "template.spec.pytorchReplicaSpecs.Master.template", "replicas": 1},
            {"path": "template.spec.pytorchReplicaSpecs.Worker.template", "replicas": 3},
        ]},
    )
    wl = workload_for_appwrapper(aw, NO_CLASSES)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("aw-0", 2), ("aw-1", 1), ("aw-2", 3)]
    assert str(wl.pod_set("aw-2").template.spec.containers[0].resources.requests["cpu"]) == "2"
    assert wl.metadata.name.startswith("appwrapper-aw-")
    assert wl.spec.queue_name == "lq"


def test_workload_is_created_with_podsets_inferred_from_the_wrapped_kind() -> None:
    # Kueue's TestReconciler "workload is created with podsets", with the podSets the
    # AppWrapper operator's webhook infers (a Job: parallelism, at most completions).
    wl = workload_for_appwrapper(appwrapper(job_component(parallelism=4), pytorch_component()), NO_CLASSES)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("aw-0", 4), ("aw-1", 1), ("aw-2", 3)]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 3, "template": _pod()}},
                     [{"path": "template.spec.template", "replicas": 3}], id="deployment"),
        pytest.param({"apiVersion": "v1", "kind": "Pod", "spec": _pod()["spec"]},
                     [{"path": "template", "replicas": 1}], id="pod"),
        pytest.param({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": [
            {"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 3, "template": _pod()}}}]}},
            [{"path": "template.spec.replicatedJobs[0].template.spec.template", "replicas": 6}], id="jobset"),
        pytest.param({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {
            "headGroupSpec": {"template": _pod()}, "workerGroupSpecs": [{"groupName": "g", "replicas": 2, "template": _pod()}]}},
            [{"path": "template.spec.headGroupSpec.template", "replicas": 1},
             {"path": "template.spec.workerGroupSpecs[0].template", "replicas": 2}], id="raycluster"),
        pytest.param({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "spec": {}}, None,
                     id="leaderworkerset needs its podSets"),
    ],
)
def test_pod_sets_inferred_as_the_appwrapper_operator_does(template: Obj, expected: list[Obj] | None) -> None:
    assert infer_pod_sets(template) == expected


@pytest.mark.parametrize(
    ("path", "steps"),
    [("template", []), ("template.spec.template", ["spec", "template"]),
     ("template.spec.replicatedJobs[1].template", ["spec", "replicatedJobs", 1, "template"])],
)
def test_paths_read_as_the_appwrapper_operator_reads_them(path: str, steps: list[str | int]) -> None:
    assert parse_path(path) == steps


@pytest.mark.parametrize(
    ("component", "field"),
    [
        pytest.param(job_component(pod_sets=[{"path": "spec.template"}]), "spec.components[0].podSets[0].path",
                     id="path not rooted at template"),
        pytest.param(job_component(pod_sets=[{"path": "template.spec.nothere"}]), "spec.components[0].podSets[0].path",
                     id="path to nothing"),
        pytest.param(job_component(pod_sets=[{"path": "template.spec.template", "replicas": -1}]),
                     "spec.components[0].podSets[0].replicas", id="negative replicas"),
        pytest.param({"template": {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"template": _pod()}},
                      "podSets": [{"path": "template.spec.template"}]},
                     "spec.components[0].template.kind", id="a kind kqueue does not manage"),
        pytest.param({"template": {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                   "spec": {"leaderWorkerTemplate": {"workerTemplate": _pod()}}}},
                     "spec.components[0].podSets", id="podSets a kind does not imply"),
    ],
)
def test_what_kqueue_cannot_queue_is_reported_naming_the_field(component: Obj, field: str) -> None:
    with pytest.raises(IntegrationError) as err:
        workload_for_appwrapper(appwrapper(component), NO_CLASSES)
    assert err.value.path == field


def test_a_wrapped_kind_kqueue_does_not_manage_names_the_component_and_what_is_allowed() -> None:
    widget = {"template": {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"template": _pod()}},
              "podSets": [{"path": "template.spec.template"}]}
    with pytest.raises(IntegrationError) as err:
        workload_for_appwrapper(appwrapper(job_component(), widget), NO_CLASSES)
    assert err.value.path == "spec.components[1].template.kind"
    assert "Widget (example.com/v1) is not a kind kqueue manages" in err.value.detail
    assert "PyTorchJob (kubeflow.org/v1)" in err.value.detail


def test_a_service_next_to_the_workload_needs_no_pod_set() -> None:
    service = {"template": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": []}}}
    wl = workload_for_appwrapper(appwrapper(service, job_component()), NO_CLASSES)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("aw-0", 2)]


# -- suspend, active, finished (Kueue's IsSuspended, IsActive, Finished) ---------------------------


@pytest.mark.parametrize(("suspend", "expected"), [(None, False), (False, False), (True, True)])
def test_is_suspended(suspend: bool | None, expected: bool) -> None:
    aw = appwrapper()
    aw["spec"].pop("suspend")
    if suspend is not None:
        aw["spec"]["suspend"] = suspend
    assert AppWrapperIntegration().is_suspended(aw) is expected


@pytest.mark.parametrize(
    ("conditions", "active"),
    [
        pytest.param([], False, id="no conditions"),
        pytest.param([{"type": "QuotaReserved", "status": "False"}], False, id="quota not reserved"),
        pytest.param([{"type": "QuotaReserved", "status": "True"}], True, id="quota reserved"),
    ],
)
def test_is_active(conditions: list[Obj], active: bool) -> None:
    aw = appwrapper()
    aw["status"] = {"conditions": conditions}
    assert AppWrapperIntegration().is_active(aw) is active


@pytest.mark.parametrize(
    ("status", "finished"),
    [
        pytest.param({"phase": "Running"}, None, id="running"),
        pytest.param({"phase": "Succeeded"}, (c.FINISHED_SUCCEEDED, "AppWrapper finished successfully"), id="succeeded"),
        pytest.param({"phase": "Failed", "conditions": [{"type": "ResourcesDeployed", "status": "True"}]}, None,
                     id="failed, still deleting resources"),
        pytest.param({"phase": "Failed", "conditions": [{"type": "ResourcesDeployed", "status": "False"}]},
                     (c.FINISHED_FAILED, "AppWrapper failed"), id="failed"),
    ],
)
def test_finished(status: Obj, finished: tuple[str, str] | None) -> None:
    aw = appwrapper()
    aw["status"] = status
    assert AppWrapperIntegration().finished(aw) == finished


# -- patches (Kueue's RunWithPodSetsInfo, RestorePodSetsInfo) --------------------------------------


def test_resumed_with_each_pod_sets_info() -> None:
    aw = appwrapper(job_component(), pytorch_component(), held=True)
    aw["spec"]["components"][1]["podSets"] = infer_pod_sets(aw["spec"]["components"][1]["template"])
    wl = workload_for_appwrapper(aw, NO_CLASSES)
    releases = {
        ps.name: PodSetRelease(ps.name, ps.count, node_selector={"flavor": f"f-{ps.name}"},
                               tolerations=({"key": "t", "operator": "Exists"},), labels={"l": "v"})
        for ps in wl.spec.pod_sets
    }
    patch = AppWrapperIntegration().run_patch(aw, wl, releases)
    assert patch is not None
    assert patch["metadata"]["annotations"] == {HELD: None}
    assert patch["spec"]["suspend"] is False
    infos = [comp["podSetInfos"] for comp in patch["spec"]["components"]]
    assert [[i["nodeSelector"] for i in comp] for comp in infos] == [
        [{"flavor": "f-aw-0"}], [{"flavor": "f-aw-1"}, {"flavor": "f-aw-2"}]
    ]
    assert infos[1][1]["labels"] == {"l": "v", POD_SET_LABEL: "aw-2"}
    assert infos[0][0]["tolerations"] == [{"key": "t", "operator": "Exists"}]
    # The wrapped objects themselves are sent unchanged (a list is replaced whole).
    assert patch["spec"]["components"][1]["template"] == aw["spec"]["components"][1]["template"]
    running = copy.deepcopy(aw)
    running["spec"]["suspend"] = False
    assert AppWrapperIntegration().run_patch(running, wl, releases) is None


def test_stopped_then_its_pod_set_infos_cleared_once_its_components_are_gone() -> None:
    aw = appwrapper()
    wl = workload_for_appwrapper(aw, NO_CLASSES)
    job = AppWrapperIntegration()
    assert job.stop_patch(aw, wl) == {"metadata": {"annotations": {HELD: "true"}}, "spec": {"suspend": True}}
    stopped = copy.deepcopy(aw)
    stopped["spec"]["suspend"] = True
    stopped["metadata"]["annotations"][HELD] = "true"
    stopped["spec"]["components"][0]["podSetInfos"] = [{"nodeSelector": {"flavor": "old"}}]
    assert job.stop_patch(stopped, wl) is None and not job.user_suspended(stopped)
    # Still deploying: left alone until the operator has deleted its components.
    stopped["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True"}]}
    assert job.hold_patch(stopped, wl) is None
    stopped["status"] = {"conditions": [{"type": "QuotaReserved", "status": "False"}]}
    hold = job.hold_patch(stopped, wl)
    assert hold is not None and hold["metadata"] == {"resourceVersion": "3"}
    [component] = hold["spec"]["components"]
    assert "podSetInfos" not in component
    # Created before kqueue's webhooks: its pod template gets the gate too.
    assert {"name": c.ADMISSION_GATE} in component["template"]["spec"]["template"]["spec"]["schedulingGates"]


def test_pods_find_their_appwrapper_and_pod_set() -> None:
    pod = {"metadata": {"namespace": "ns", "labels": {APPWRAPPER_LABEL: "aw", POD_SET_LABEL: "aw-1"},
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j",
                                             "controller": True}]}}
    job = AppWrapperIntegration()
    assert job.owner_of_pod(pod) == "ns/aw"
    assert job.pod_set_of(appwrapper(), pod) == "aw-1"
    # A pod of an AppWrapper kqueue never resumed (no pod-set label): not one of its pods.
    assert job.owner_of_pod({"metadata": {"namespace": "ns", "labels": {APPWRAPPER_LABEL: "aw"}}}) is None


# -- webhooks (Kueue's appwrapper_webhook_test.go) ------------------------------------------------


async def test_should_suspend_an_appwrapper_when_created_in_unsuspend_state() -> None:
    aw = appwrapper(job_component(parallelism=3), pytorch_component())
    out = (await SuspendableWebhooks(SUSPENDABLE).mutate(_request(aw))).patched
    assert out is not None
    assert out["spec"]["suspend"] is True and out["metadata"]["annotations"][HELD] == "true"
    job, pytorch = out["spec"]["components"]
    # The podSets the AppWrapper operator's webhook would infer, written down.
    assert job["podSets"] == [{"path": "template.spec.template", "replicas": 3}]
    assert [p["replicas"] for p in pytorch["podSets"]] == [1, 3]
    templates = [job["template"]["spec"]["template"],
                 *(pytorch["template"]["spec"]["pytorchReplicaSpecs"][rt]["template"] for rt in ("Master", "Worker"))]
    for template in templates:
        assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]
        assert template["metadata"]["labels"][c.MANAGED_LABEL] == "true"
    assert AppWrapperIntegration().holds_pods(out)


async def test_an_appwrapper_without_a_queue_is_left_alone() -> None:
    hooks = SuspendableWebhooks(SUSPENDABLE)
    assert (await hooks.mutate(_request(appwrapper(queue=None)))).patched is None


async def test_an_appwrapper_wrapping_a_kind_kqueue_does_not_manage_is_refused_naming_the_component() -> None:
    widget = {"template": {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"template": _pod()}},
              "podSets": [{"path": "template.spec.template"}]}
    verdict = await SuspendableWebhooks(SUSPENDABLE).validate(_request(appwrapper(job_component(), widget)))
    assert not verdict.allowed
    assert [e.field for e in verdict.errors] == ["spec.components[1].template.kind"]
    # Unmanaged (no queue): not kqueue's to refuse.
    assert (await SuspendableWebhooks(SUSPENDABLE).validate(_request(appwrapper(widget, queue=None)))).allowed


async def test_the_creation_doesnt_succeed_if_the_queue_name_is_changed_while_running() -> None:
    old = appwrapper()
    old["spec"]["suspend"] = False
    new = copy.deepcopy(old)
    new["metadata"]["labels"][c.QUEUE_NAME_LABEL] = "other"
    verdict = await SuspendableWebhooks(SUSPENDABLE).validate(_request(new, old))
    assert [e.field for e in verdict.errors] == [f"metadata.labels[{c.QUEUE_NAME_LABEL}]"]


async def test_the_pytorchjob_it_wraps_is_left_to_the_appwrapper() -> None:
    # The operator creates the wrapped PyTorchJob controlled by the AppWrapper, with the queue
    # label the user may have left in it: queued with the AppWrapper, never a second time.
    child = copy.deepcopy(pytorch_component()["template"])
    child["metadata"].update(namespace="ns", labels={c.QUEUE_NAME_LABEL: "lq"}, ownerReferences=[
        {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "name": "aw", "uid": "u-aw", "controller": True}])
    request = AdmissionRequest(
        uid="u", operation="CREATE", kind={"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"},
        resource={"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"},
        namespace="ns", name="pt", object=child, old_object=None,
    )
    parents = frozenset({("workload.codeflare.dev/v1beta2", "AppWrapper")})
    hooks = SuspendableWebhooks(kubeflow_suspendable(PYTORCHJOB), parent_kinds=parents)
    assert (await hooks.mutate(request)).patched is None
    # Without the appwrapper integration on, the PyTorchJob would be queued on its own.
    assert (await SuspendableWebhooks(kubeflow_suspendable(PYTORCHJOB)).mutate(request)).patched is not None


def test_registered() -> None:
    fw = registry.get("workload.codeflare.dev/appwrapper")
    assert fw.kind == "AppWrapper" and fw.suspendable and not fw.default_enabled
    assert fw.declares.operator == "appwrapper"


def _miscounted() -> Obj:
    # A Job of 2 pods declared as 3.
    return appwrapper(job_component(2, pod_sets=[{"path": "template.spec.template", "replicas": 3}]))


async def test_podsets_that_miscount_the_wrapped_pods_are_refused_at_creation() -> None:
    verdict = await SuspendableWebhooks(SUSPENDABLE).validate(_request(_miscounted()))
    assert not verdict.allowed
    assert [e.field for e in verdict.errors] == ["spec.components[0].podSets[0].replicas"]


async def test_an_appwrapper_accepted_before_the_count_check_still_gets_kqueue_s_updates() -> None:
    """Made before the check existed (or by the AppWrapper operator's own webhook): kqueue's
    resume and suspend patches, which change no component, pass; an update that changes the
    component is checked."""
    old = _miscounted()
    old["spec"]["suspend"] = True
    resumed = copy.deepcopy(old)
    resumed["spec"]["suspend"] = False
    hooks = SuspendableWebhooks(SUSPENDABLE)
    assert (await hooks.validate(_request(resumed, old))).allowed

    grown = copy.deepcopy(old)
    grown["spec"]["components"][0]["template"]["spec"]["parallelism"] = 1
    verdict = await hooks.validate(_request(grown, old))
    assert [e.field for e in verdict.errors] == ["spec.components[0].podSets[0].replicas"]
