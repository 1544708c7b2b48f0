"""The RayService integration without a cluster: its Workload, its hold through
``spec.rayClusterConfig.suspend``, its patches and webhooks, and the RayCluster KubeRay makes for it
left to it. Cases ported from Kueue keep Kueue's names (rayservice_controller_test.go,
rayservice_webhook_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.integrations import IntegrationError, PriorityClasses
from kqueue.api.integrations.ray import RAYSERVICE_NAME_LABEL, workload_for_rayservice
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import PodSetRelease, registry
from kqueue.controller.integrations.ray.generic import RayServiceIntegration
from kqueue.controller.integrations.ray.webhook import RAYCLUSTER as RAYCLUSTER_HOOKS
from kqueue.controller.integrations.ray.webhook import RAYSERVICE as RAYSERVICE_HOOKS
from kqueue.controller.integrations.suspension import SuspendableWebhooks
from kqueue.controller.webhook_server import AdmissionRequest
from tests.controller.test_ray_integration import cluster_spec

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])
HELD = c.SUSPENDED_BY_KQUEUE_ANNOTATION


def rayservice(*, queue: str | None = "lq", held: bool = False, groups: tuple[tuple[str, int], ...] = (("group1", 1), ("group2", 3))) -> Obj:
    meta: Obj = {"name": "rs", "namespace": "ns", "uid": "u-rs", "resourceVersion": "3", "labels": {}, "annotations": {}}
    if queue is not None:
        meta["labels"][c.QUEUE_NAME_LABEL] = queue
    if held:
        meta["annotations"][HELD] = "true"
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": meta,
        "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": {"suspend": held, **cluster_spec(*groups)}},
    }


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    plural = new["kind"].lower() + "s"
    return AdmissionRequest(
        uid="u", operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "ray.io", "version": "v1", "kind": new["kind"]},
        resource={"group": "ray.io", "version": "v1", "resource": plural},
        namespace="ns", name=new["metadata"]["name"], object=new, old_object=old,
    )


# -- Workload (Kueue's TestPodSets) -----------------------------------------------------------------


def test_pod_sets_no_annotations() -> None:
    wl = workload_for_rayservice(rayservice(), NO_CLASSES)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("head", 1), ("group1", 1), ("group2", 3)]
    assert wl.metadata.name.startswith("rayservice-rs-")
    assert wl.spec.queue_name == "lq"


def test_a_rayservice_without_its_cluster_config_is_refused_naming_the_field() -> None:
    rs = rayservice()
    del rs["spec"]["rayClusterConfig"]
    with pytest.raises(IntegrationError) as err:
        workload_for_rayservice(rs, NO_CLASSES)
    assert err.value.path == "spec.rayClusterConfig"


# -- suspend, active, finished (Kueue's TestIsSuspended, TestIsActive) ------------------------------


@pytest.mark.parametrize(("suspend", "expected"), [(None, False), (False, False), (True, True)])
def test_is_suspended(suspend: bool | None, expected: bool) -> None:
    rs = rayservice()
    rs["spec"]["rayClusterConfig"].pop("suspend")
    if suspend is not None:
        rs["spec"]["rayClusterConfig"]["suspend"] = suspend
    assert RayServiceIntegration().is_suspended(rs) is expected


@pytest.mark.parametrize(
    ("conditions", "active"),
    [
        pytest.param([], False, id="no conditions"),
        pytest.param([{"type": "Ready", "status": "False"}], False, id="ready false"),
        pytest.param([{"type": "Ready", "status": "True"}], True, id="ready true"),
    ],
)
def test_is_active(conditions: list[Obj], active: bool) -> None:
    rs = rayservice()
    rs["status"] = {"conditions": conditions}
    assert RayServiceIntegration().is_active(rs) is active


def test_a_rayservice_never_finishes() -> None:
    rs = rayservice()
    rs["status"] = {"serviceStatus": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    assert RayServiceIntegration().finished(rs) is None


# -- patches --------------------------------------------------------------------------------------


def test_resumed_through_its_cluster_config_with_each_groups_flavor() -> None:
    rs = rayservice(held=True)
    wl = workload_for_rayservice(rs, NO_CLASSES)
    releases = {
        ps.name: PodSetRelease(ps.name, ps.count, node_selector={"flavor": f"f-{ps.name}"}) for ps in wl.spec.pod_sets
    }
    patch = RayServiceIntegration().run_patch(rs, wl, releases)
    assert patch is not None
    assert patch["metadata"]["annotations"] == {HELD: None}
    cluster = patch["spec"]["rayClusterConfig"]
    assert cluster["suspend"] is False
    assert "suspend" not in patch["spec"]  # a RayService has no spec.suspend
    assert cluster["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"flavor": "f-head"}
    assert [g["template"]["spec"]["nodeSelector"] for g in cluster["workerGroupSpecs"]] == [
        {"flavor": "f-group1"}, {"flavor": "f-group2"}
    ]
    # Running: not patched again.
    running = copy.deepcopy(rs)
    running["spec"]["rayClusterConfig"]["suspend"] = False
    assert RayServiceIntegration().run_patch(running, wl, releases) is None


def test_stopped_through_its_cluster_config_then_labelled_for_its_pods() -> None:
    rs = rayservice()
    wl = workload_for_rayservice(rs, NO_CLASSES)
    job = RayServiceIntegration()
    stop = job.stop_patch(rs, wl)
    assert stop == {"metadata": {"annotations": {HELD: "true"}}, "spec": {"rayClusterConfig": {"suspend": True}}}
    stopped = copy.deepcopy(rs)
    stopped["spec"]["rayClusterConfig"]["suspend"] = True
    stopped["metadata"]["annotations"][HELD] = "true"
    assert job.stop_patch(stopped, wl) is None and not job.user_suspended(stopped)
    # A RayService created before kqueue's webhooks gets the label its pods are found by.
    hold = job.hold_patch(stopped, wl)
    assert hold is not None and hold["metadata"] == {"resourceVersion": "3"}
    head = hold["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]
    assert head["metadata"]["labels"][RAYSERVICE_NAME_LABEL] == "rs"


def test_pods_find_their_rayservice_and_pod_set() -> None:
    head = {"metadata": {"namespace": "ns", "labels": {"ray.io/node-type": "head", RAYSERVICE_NAME_LABEL: "rs"},
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rs-x7k2p",
                                              "uid": "c", "controller": True}]}}
    worker = {"metadata": {"namespace": "ns", "labels": {"ray.io/node-type": "worker", "ray.io/group": "group2",
                                                         RAYSERVICE_NAME_LABEL: "rs"}}}
    job = RayServiceIntegration()
    assert job.owner_of_pod(head) == "ns/rs" and job.owner_of_pod(worker) == "ns/rs"
    assert job.pod_set_of(rayservice(), head) == "head"
    assert job.pod_set_of(rayservice(), worker) == "group2"
    assert job.owner_of_pod({"metadata": {"namespace": "ns", "labels": {}}}) is None


# -- webhooks (Kueue's TestValidateCreate) -------------------------------------------------------


async def test_a_new_rayservice_is_held_through_its_cluster_config_and_every_group_gated() -> None:
    out = (await SuspendableWebhooks(RAYSERVICE_HOOKS).mutate(_request(rayservice()))).patched
    assert out is not None
    cluster = out["spec"]["rayClusterConfig"]
    assert cluster["suspend"] is True and "suspend" not in out["spec"]
    assert out["metadata"]["annotations"][HELD] == "true"
    templates = [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    for template in templates:
        assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]
        assert template["metadata"]["labels"][RAYSERVICE_NAME_LABEL] == "rs"


def _autoscaling(rs: Obj) -> Obj:
    rs["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    return rs


@pytest.mark.parametrize(
    ("obj", "fields"),
    [
        pytest.param(rayservice(), [], id="valid rayservice"),
        pytest.param(rayservice(groups=tuple((f"g{i}", 1) for i in range(8))),
                     ["spec.rayClusterConfig.workerGroupSpecs"], id="too many worker groups"),
        pytest.param(_autoscaling(rayservice()), ["spec.rayClusterConfig.enableInTreeAutoscaling"],
                     id="autoscaling without elastic jobs feature"),
        pytest.param(_autoscaling(rayservice(queue=None)), [], id="unmanaged autoscaling"),
        pytest.param(rayservice(groups=(("head", 1),)), ["spec.rayClusterConfig.workerGroupSpecs[0].groupName"],
                     id="worker group uses head name"),
    ],
)
async def test_validate_create(obj: Obj, fields: list[str]) -> None:
    verdict = await SuspendableWebhooks(RAYSERVICE_HOOKS).validate(_request(obj))
    assert [e.field for e in verdict.errors] == fields
    assert verdict.allowed is (not fields)


async def test_resuming_a_queued_rayservice_keeps_it_queued() -> None:
    old = rayservice(held=True)
    new = copy.deepcopy(old)
    new["spec"]["rayClusterConfig"]["suspend"] = False
    out = (await SuspendableWebhooks(RAYSERVICE_HOOKS).mutate(_request(new, old))).patched
    assert out is not None and out["spec"]["rayClusterConfig"]["suspend"] is True


async def test_the_raycluster_kuberay_makes_for_it_is_left_to_the_rayservice() -> None:
    # KubeRay copies the RayService's labels (the queue's) and spec into the RayCluster it makes,
    # controlled by the RayService: queued with it, never a second time.
    rs = rayservice()
    rc = {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "rs-x7k2p", "namespace": "ns", "labels": dict(rs["metadata"]["labels"]),
                     "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayService", "name": "rs", "uid": "u-rs",
                                          "controller": True}]},
        "spec": _autoscaling(rs)["spec"]["rayClusterConfig"],
    }
    hooks = SuspendableWebhooks(RAYCLUSTER_HOOKS, parent_kinds=frozenset({("ray.io/v1", "RayService")}))
    assert (await hooks.mutate(_request(rc))).patched is None
    assert (await hooks.validate(_request(rc))).allowed


def test_registered() -> None:
    fw = registry.get("ray.io/rayservice")
    assert fw.kind == "RayService" and fw.suspendable and not fw.default_enabled


def test_the_rayclusters_kuberay_made_before_a_run_or_stop_are_remade() -> None:
    # KubeRay v1.5.1 does not carry a changed rayClusterConfig into a RayCluster it made: kqueue
    # deletes those its status names, and KubeRay makes them again from the new spec.
    rs = rayservice(held=True)
    job = RayServiceIntegration()
    assert job.children_to_remake(rs) == []
    rs["status"] = {"pendingServiceStatus": {"rayClusterName": "rs-x7k2p"}, "activeServiceStatus": {}}
    assert [(r.plural, name) for r, name in job.children_to_remake(rs)] == [("rayclusters", "rs-x7k2p")]
    rs["status"]["activeServiceStatus"] = {"rayClusterName": "rs-a1b2c"}
    assert [name for _, name in job.children_to_remake(rs)] == ["rs-x7k2p", "rs-a1b2c"]
