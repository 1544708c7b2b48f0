"""The SparkApplication integration without a cluster: its driver and executor pod sets, its
hold through ``spec.suspend``, its patches and webhooks. Cases ported from Kueue keep Kueue's
names (sparkapplication_controller_test.go, sparkapplication_webhook_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.integrations import IntegrationError, PriorityClasses
from kqueue.api.integrations.sparkapplication import (
    APP_NAME_LABEL,
    ROLE_LABEL,
    java_memory,
    workload_for_sparkapplication,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import PodSetRelease, registry
from kqueue.controller.integrations.sparkapplication.generic import SparkApplicationIntegration
from kqueue.controller.integrations.sparkapplication.webhook import SUSPENDABLE
from kqueue.controller.integrations.suspension import SuspendableWebhooks
from kqueue.controller.webhook_server import AdmissionRequest

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])
HELD = c.SUSPENDED_BY_KQUEUE_ANNOTATION
TOLERATION = {"key": "t1k", "operator": "Equal", "value": "t1v", "effect": "NoExecute"}


def sparkapp(*, queue: str | None = "lq", held: bool = False, instances: int = 3, **spec: Any) -> Obj:
    meta: Obj = {"name": "sparkapp", "namespace": "ns", "uid": "u-s", "resourceVersion": "3", "labels": {}, "annotations": {}}
    if queue is not None:
        meta["labels"][c.QUEUE_NAME_LABEL] = queue
    if held:
        meta["annotations"][HELD] = "true"
    role = {"coreRequest": "100m", "memory": "512m"}
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": meta,
        "spec": {"type": "Scala", "mode": "cluster", "suspend": held, "driver": dict(role),
                 "executor": {**role, "instances": instances}, **spec},
    }


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u", operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "sparkoperator.k8s.io", "version": "v1beta2", "kind": "SparkApplication"},
        resource={"group": "sparkoperator.k8s.io", "version": "v1beta2", "resource": "sparkapplications"},
        namespace="ns", name=new["metadata"]["name"], object=new, old_object=old,
    )


# -- Workload (Kueue's TestPodSets) ---------------------------------------------------------------


def test_pod_sets_base() -> None:
    app = sparkapp()
    for role in ("driver", "executor"):
        app["spec"][role].update(nodeSelector={"test": "test"}, tolerations=[dict(TOLERATION)])
    wl = workload_for_sparkapplication(app, NO_CLASSES)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == [("driver", 1), ("executor", 3)]
    driver, executor = (ps.template.to_dict()["spec"] for ps in wl.spec.pod_sets)
    assert driver["containers"][0]["name"] == "spark-kubernetes-driver"
    assert executor["containers"][0]["name"] == "spark-kubernetes-executor"
    for pod in (driver, executor):
        assert pod["nodeSelector"] == {"test": "test"}
        assert pod["tolerations"] == [TOLERATION]
        assert pod["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "512Mi"}
    assert wl.metadata.name.startswith("sparkapplication-sparkapp-")


def test_pod_sets_from_the_role_templates_with_gpu_limits_and_sidecars() -> None:
    app = sparkapp()
    app["spec"]["executor"].update(
        template={"spec": {"containers": [{"name": "other", "image": "o"}, {"name": "spark-kubernetes-executor"}]}},
        gpu={"name": "nvidia.com/gpu", "quantity": 1}, coreLimit="2", memoryLimit="1g",
        sidecars=[{"name": "side", "image": "s", "resources": {"requests": {"cpu": "1"}}}],
    )
    executor = workload_for_sparkapplication(app, NO_CLASSES).pod_set("executor").template.to_dict()["spec"]
    assert [ctr["name"] for ctr in executor["containers"]] == ["other", "spark-kubernetes-executor", "side"]
    assert executor["containers"][1]["resources"]["limits"] == {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}


@pytest.mark.parametrize(("java", "quantity"), [("512m", "512Mi"), ("1g", "1Gi"), ("2G", "2Gi"), ("4gb", "4Gi"), ("1024Mi", "1024Mi")])
def test_java_memory_sizes_are_read_as_spark_reads_them(java: str, quantity: str) -> None:
    assert java_memory(java, "spec.driver.memory") == quantity


def test_a_memory_spark_cannot_read_is_refused_naming_the_field() -> None:
    app = sparkapp()
    app["spec"]["executor"]["memory"] = "lots"
    with pytest.raises(IntegrationError) as err:
        workload_for_sparkapplication(app, NO_CLASSES)
    assert err.value.path == "spec.executor.memory"


# -- suspend, active, finished --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "finished"),
    [("RUNNING", None), ("COMPLETED", c.FINISHED_SUCCEEDED), ("FAILED", c.FINISHED_FAILED),
     ("SUBMISSION_FAILED", c.FINISHED_FAILED)],
)
def test_finished(state: str, finished: str | None) -> None:
    app = sparkapp()
    app["status"] = {"applicationState": {"state": state}}
    done = SparkApplicationIntegration().finished(app)
    assert (done[0] if done else None) == finished
    assert SparkApplicationIntegration().is_active(app) is (state == "RUNNING")


# -- patches (Kueue's TestRunWithPodsetsInfo, TestRestorePodSetsInfo) ------------------------------


def test_run_with_podsets_info() -> None:
    app = sparkapp(held=True)
    app["spec"]["driver"]["nodeSelector"] = {"mine": "x"}
    wl = workload_for_sparkapplication(app, NO_CLASSES)
    releases = {ps.name: PodSetRelease(ps.name, ps.count, node_selector={"flavor": f"f-{ps.name}"},
                                       tolerations=(TOLERATION,)) for ps in wl.spec.pod_sets}
    patch = SparkApplicationIntegration().run_patch(app, wl, releases)
    assert patch is not None and patch["spec"]["suspend"] is False
    assert patch["metadata"]["annotations"] == {HELD: None}
    assert patch["spec"]["driver"] == {"nodeSelector": {"flavor": "f-driver"}, "tolerations": [TOLERATION]}
    assert patch["spec"]["executor"]["nodeSelector"] == {"flavor": "f-executor"}
    running = copy.deepcopy(app)
    running["spec"]["suspend"] = False
    assert SparkApplicationIntegration().run_patch(running, wl, releases) is None


def test_restore_podsets_info() -> None:
    app = sparkapp(held=True)
    wl = workload_for_sparkapplication(app, NO_CLASSES)
    job = SparkApplicationIntegration()
    assert job.stop_patch(app, wl) is None and not job.user_suspended(app)
    admitted = copy.deepcopy(app)
    admitted["spec"]["driver"].update(nodeSelector={"flavor": "f"}, tolerations=[TOLERATION])
    for role in ("driver", "executor"):
        admitted["spec"][role]["template"] = {"spec": {"schedulingGates": [{"name": c.ADMISSION_GATE}]}}
    hold = job.hold_patch(admitted, wl)
    assert hold == {"metadata": {"resourceVersion": "3"},
                    "spec": {"driver": {"nodeSelector": {"flavor": None}, "tolerations": None}}}


def test_pods_find_their_application_and_pod_set() -> None:
    pod = {"metadata": {"namespace": "ns", "labels": {APP_NAME_LABEL: "sparkapp", ROLE_LABEL: "executor"}}}
    job = SparkApplicationIntegration()
    assert job.owner_of_pod(pod) == "ns/sparkapp" and job.pod_set_of(sparkapp(), pod) == "executor"
    assert job.owner_of_pod({"metadata": {"namespace": "ns", "labels": {APP_NAME_LABEL: "sparkapp"}}}) is None


# -- webhooks (Kueue's TestDefault, TestValidateCreate) --------------------------------------------


async def test_default_suspends_and_gates_the_driver_and_executors() -> None:
    out = (await SuspendableWebhooks(SUSPENDABLE).mutate(_request(sparkapp()))).patched
    assert out is not None and out["spec"]["suspend"] is True and out["metadata"]["annotations"][HELD] == "true"
    for role, container in (("driver", "spark-kubernetes-driver"), ("executor", "spark-kubernetes-executor")):
        template = out["spec"][role]["template"]
        assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]
        assert template["spec"]["containers"] == [{"name": container}]
    assert SparkApplicationIntegration().holds_pods(out)
    # The driver creates the executors once it runs: it is kept out of their gang, and its pod
    # set is not counted in the gang's size.
    assert out["spec"]["driver"]["template"]["metadata"]["annotations"] == {c.GANG_SCHEDULING_ANNOTATION: "false"}
    assert "annotations" not in out["spec"]["executor"]["template"].get("metadata", {})
    wl = workload_for_sparkapplication(out, NO_CLASSES)
    gang = {ps.name: (ps.template.metadata.annotations or {}).get(c.GANG_SCHEDULING_ANNOTATION) for ps in wl.spec.pod_sets}
    assert gang == {"driver": "false", "executor": None}


@pytest.mark.parametrize(
    ("obj", "fields"),
    [
        pytest.param(sparkapp(), [], id="base"),
        pytest.param(sparkapp(dynamicAllocation={"enabled": True}), ["spec.dynamicAllocation.enabled"],
                     id="dynamicAllocation without elastic job feature"),
        pytest.param(sparkapp(mode="client"), ["spec.mode"], id="client mode"),
        pytest.param(sparkapp(queue=None, mode="client"), [], id="unmanaged client mode"),
    ],
)
async def test_validate_create(obj: Obj, fields: list[str]) -> None:
    verdict = await SuspendableWebhooks(SUSPENDABLE).validate(_request(obj))
    assert [e.field for e in verdict.errors] == fields
    assert verdict.allowed is (not fields)


def test_registered() -> None:
    fw = registry.get("sparkoperator.k8s.io/sparkapplication")
    assert fw.kind == "SparkApplication" and fw.suspendable and not fw.default_enabled
