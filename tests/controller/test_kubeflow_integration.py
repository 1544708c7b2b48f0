"""The training-operator v1 integrations (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob)
without a cluster: their Workloads, patches and webhooks. Cases named ``Kueue: <Test>/<case>``
are ported from Kueue's pkg/controller/jobs/kubeflow/jobs/*/*_controller_test.go."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.integrations import IntegrationError, PriorityClasses
from kqueue.api.integrations import kubeflow as kf
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations import PodSetRelease, registry
from kqueue.controller.integrations.kubeflow.generic import KubeflowJobIntegration
from kqueue.controller.integrations.kubeflow.webhook import suspendable
from kqueue.controller.integrations.suspension import SuspendableWebhooks
from kqueue.controller.webhook_server import AdmissionRequest

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])
CLASSES = PriorityClasses.from_objects(
    [], [{"metadata": {"name": n}, "value": v} for n, v in (("scheduling", 3), ("master", 2), ("worker", 1))]
)
HELD = c.SUSPENDED_BY_KQUEUE_ANNOTATION


def _template(priority_class: str = "") -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"spec": spec}


def job(
    kind: kf.KubeflowKind = kf.PYTORCHJOB,
    replicas: dict[str, int] | None = None,
    *,
    held: bool = False,
    elastic: Obj | None = None,
) -> Obj:
    replicas = {"Master": 1, "Worker": 2} if replicas is None else replicas
    meta: Obj = {"name": "train", "namespace": "ns", "uid": "u", "resourceVersion": "3",
                 "labels": {c.QUEUE_NAME_LABEL: "lq"}, "annotations": {HELD: "true"} if held else {}}
    spec: Obj = {
        "runPolicy": {"suspend": held},
        kind.replica_specs_field: {rt: {"replicas": n, "template": _template()} for rt, n in replicas.items()},
    }
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    return {"apiVersion": "kubeflow.org/v1", "kind": kind.kind, "metadata": meta, "spec": spec}


def _pod_sets(obj: Obj, kind: kf.KubeflowKind = kf.PYTORCHJOB) -> list[tuple[str, int, int | None]]:
    wl = kf.workload_for(kind, obj, NO_CLASSES)
    return [(ps.name, ps.count, ps.min_count) for ps in wl.spec.pod_sets]


@pytest.mark.parametrize(
    ("kind", "replicas", "expected"),
    [
        pytest.param(kf.PYTORCHJOB, {"Worker": 3, "Master": 1}, [("master", 1), ("worker", 3)],
                     id="Kueue: TestOrderedReplicaTypes/job has all replicas (pytorchjob)"),
        pytest.param(kf.PYTORCHJOB, {"Worker": 2}, [("worker", 2)],
                     id="Kueue: TestOrderedReplicaTypes/job only has the worker replica"),
        pytest.param(kf.TFJOB, {"Evaluator": 1, "Worker": 2, "PS": 1, "Master": 1, "Chief": 1},
                     [("chief", 1), ("master", 1), ("ps", 1), ("worker", 2), ("evaluator", 1)],
                     id="Kueue: tfjob OrderedReplicaTypes chief master ps worker evaluator"),
        pytest.param(kf.XGBOOSTJOB, {"Worker": 2, "Master": 1}, [("master", 1), ("worker", 2)],
                     id="Kueue: xgboostjob OrderedReplicaTypes master worker"),
        pytest.param(kf.PADDLEJOB, {"Worker": 2, "Master": 1}, [("master", 1), ("worker", 2)],
                     id="Kueue: paddlejob OrderedReplicaTypes master worker"),
        pytest.param(kf.JAXJOB, {"Worker": 4}, [("worker", 4)], id="Kueue: jaxjob OrderedReplicaTypes worker"),
    ],
)
def test_one_pod_set_per_replica_type_in_kueue_s_order(
    kind: kf.KubeflowKind, replicas: dict[str, int], expected: list[tuple[str, int]]
) -> None:
    wl = kf.workload_for(kind, job(kind, replicas), NO_CLASSES)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == expected
    [owner] = wl.metadata.owner_references
    assert (owner.kind, owner.api_version, owner.controller) == (kind.kind, "kubeflow.org/v1", True)


def test_replicas_default_to_one() -> None:
    obj = job()
    del obj["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"]
    assert _pod_sets(obj)[0] == ("master", 1, None)


@pytest.mark.parametrize(
    ("scheduling", "master", "worker", "expected"),
    [
        pytest.param("", "", "", None, id="Kueue: TestPriorityClass/none priority class name specified"),
        pytest.param("scheduling", "master", "worker", "scheduling",
                     id="Kueue: TestPriorityClass/priority specified at runPolicy and replicas; use priority in runPolicy"),
        pytest.param("", "master", "worker", "master",
                     id="Kueue: TestPriorityClass/specified on master takes precedence over worker"),
        pytest.param("", "", "worker", "worker",
                     id="Kueue: TestPriorityClass/master present, but without priority; fallback to worker"),
    ],
)
def test_priority_class(scheduling: str, master: str, worker: str, expected: str | None) -> None:
    obj = job()
    specs = obj["spec"]["pytorchReplicaSpecs"]
    specs["Master"]["template"] = _template(master)
    specs["Worker"]["template"] = _template(worker)
    if scheduling:
        obj["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": scheduling}
    wl = kf.workload_for(kf.PYTORCHJOB, obj, CLASSES)
    ref = wl.spec.priority_class_ref
    assert (ref.name if ref is not None else None) == expected
    assert wl.spec.priority == {"scheduling": 3, "master": 2, "worker": 1, None: 0}[expected]


@pytest.mark.parametrize(
    ("elastic", "expected"),
    [
        pytest.param({"minReplicas": 1, "maxReplicas": 4}, [("master", 1, None), ("worker", 2, 1)],
                     id="min below replicas: workers partially admissible"),
        pytest.param({"minReplicas": 2, "maxReplicas": 2}, [("master", 1, None), ("worker", 2, None)],
                     id="min equal to replicas: all or nothing"),
        pytest.param({"maxReplicas": 3}, [("master", 1, None), ("worker", 2, None)], id="max only"),
    ],
)
def test_elastic_pytorchjob_workers_are_partially_admissible(elastic: Obj, expected: list[Any]) -> None:
    assert _pod_sets(job(elastic=elastic)) == expected


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        pytest.param(lambda j: j["spec"].pop("pytorchReplicaSpecs"), "spec.pytorchReplicaSpecs",
                     id="no replica specs"),
        pytest.param(lambda j: j["spec"]["pytorchReplicaSpecs"].__setitem__("Launcher", {}),
                     "spec.pytorchReplicaSpecs.Launcher", id="unknown replica type"),
        pytest.param(lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"].__setitem__("replicas", -1),
                     "spec.pytorchReplicaSpecs.Worker.replicas", id="negative replicas"),
        pytest.param(lambda j: j["spec"]["pytorchReplicaSpecs"]["Master"].pop("template"),
                     "spec.pytorchReplicaSpecs.Master.template.spec", id="no template"),
        pytest.param(lambda j: j["spec"].__setitem__("elasticPolicy", {"minReplicas": 3, "maxReplicas": 2}),
                     "spec.elasticPolicy.minReplicas", id="elastic min above max"),
        pytest.param(lambda j: j["spec"].__setitem__("elasticPolicy", {"minReplicas": 1, "maxReplicas": 1}),
                     "spec.pytorchReplicaSpecs.Worker.replicas", id="workers above elastic max"),
    ],
)
def test_bad_jobs_are_refused_naming_the_field(mutate: Any, path: str) -> None:
    obj = job()
    mutate(obj)
    with pytest.raises(IntegrationError) as info:
        kf.workload_for(kf.PYTORCHJOB, obj, NO_CLASSES)
    assert info.value.path == path


def test_resume_uses_run_policy_and_each_replica_type_s_flavor() -> None:
    obj = job(kf.TFJOB, {"PS": 1, "Worker": 2}, held=True)
    integration = KubeflowJobIntegration(kf.TFJOB)
    wl = integration.workload_for(obj, NO_CLASSES)
    releases = {"ps": PodSetRelease("ps", 1, {"type": "od"}), "worker": PodSetRelease("worker", 2, {"type": "gpu"})}
    patch = integration.run_patch(obj, wl, releases)
    assert patch is not None
    assert patch["spec"]["runPolicy"] == {"suspend": False}
    specs = patch["spec"]["tfReplicaSpecs"]
    assert specs["PS"]["template"]["spec"]["nodeSelector"] == {"type": "od"}
    assert specs["Worker"]["template"]["spec"]["nodeSelector"] == {"type": "gpu"}
    assert "replicas" not in specs["Worker"]
    assert patch["metadata"]["annotations"] == {HELD: None}
    assert integration.stop_patch(obj, wl) is None
    assert integration.stop_patch(job(kf.TFJOB, {"PS": 1, "Worker": 2}), wl) == {
        "metadata": {"annotations": {HELD: "true"}},
        "spec": {"runPolicy": {"suspend": True}},
    }


def test_a_partially_admitted_pytorchjob_runs_the_admitted_workers_and_gets_them_back() -> None:
    obj = job(kf.PYTORCHJOB, {"Master": 1, "Worker": 4}, held=True,
              elastic={"minReplicas": 2, "maxReplicas": 4})
    integration = KubeflowJobIntegration(kf.PYTORCHJOB)
    wl = integration.workload_for(obj, NO_CLASSES)
    releases = {"master": PodSetRelease("master", 1), "worker": PodSetRelease("worker", 3)}
    patch = integration.run_patch(obj, wl, releases)
    assert patch is not None
    assert patch["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert "replicas" not in patch["spec"]["pytorchReplicaSpecs"].get("Master", {})
    # Evicted and stopped with 3 workers: held again with the 4 the Workload asks for.
    ran = copy.deepcopy(obj)
    ran["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    hold = integration.hold_patch(ran, wl)
    assert hold is not None and hold["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4


def test_pods_are_found_by_the_operator_s_labels() -> None:
    pod = {"metadata": {"namespace": "ns", "labels": {
        kf.JOB_NAME_LABEL: "train", kf.REPLICA_TYPE_LABEL: "worker"},
        "ownerReferences": [{"kind": "PyTorchJob", "name": "train", "controller": True}]}}
    assert KubeflowJobIntegration(kf.PYTORCHJOB).owner_of_pod(pod) == "ns/train"
    assert KubeflowJobIntegration(kf.PYTORCHJOB).pod_set_of(job(), pod) == "worker"
    # Same labels, another kind's pod: not this integration's.
    assert KubeflowJobIntegration(kf.TFJOB).owner_of_pod(pod) is None


def _request(new: Obj, old: Obj | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u", operation="UPDATE" if old is not None else "CREATE",
        kind={"group": "kubeflow.org", "version": "v1", "kind": new["kind"]},
        resource={"group": "kubeflow.org", "version": "v1", "resource": new["kind"].lower() + "s"},
        namespace="ns", name="train", object=new, old_object=old,
    )


@pytest.mark.parametrize("kind", kf.KINDS, ids=lambda k: k.kind)
async def test_a_new_job_is_suspended_through_its_run_policy_and_gated(kind: kf.KubeflowKind) -> None:
    replicas = {kind.replica_types[-1 if kind is kf.TFJOB else 0]: 1, "Worker": 2}
    out = (await SuspendableWebhooks(suspendable(kind)).mutate(_request(job(kind, replicas)))).patched
    assert out is not None
    assert out["spec"]["runPolicy"]["suspend"] is True and "suspend" not in out["spec"]
    assert out["metadata"]["annotations"][HELD] == "true"
    for spec in out["spec"][kind.replica_specs_field].values():
        assert {"name": c.ADMISSION_GATE} in spec["template"]["spec"]["schedulingGates"]


async def test_resuming_a_queued_job_keeps_it_queued() -> None:
    old = job(held=True)
    new = copy.deepcopy(old)
    new["spec"]["runPolicy"]["suspend"] = False
    out = (await SuspendableWebhooks(suspendable(kf.PYTORCHJOB)).mutate(_request(new, old))).patched
    assert out is not None and out["spec"]["runPolicy"]["suspend"] is True


async def test_elastic_min_above_max_is_refused_naming_the_field() -> None:
    verdict = await SuspendableWebhooks(suspendable(kf.PYTORCHJOB)).validate(
        _request(job(elastic={"minReplicas": 3, "maxReplicas": 2}))
    )
    assert [e.field for e in verdict.errors] == ["spec.elasticPolicy.minReplicas"]
    assert "3 > 2" in verdict.errors[0].message


@pytest.mark.parametrize("kind", kf.KINDS, ids=lambda k: k.kind)
def test_registered_off_by_default(kind: kf.KubeflowKind) -> None:
    fw = registry.get(f"kubeflow.org/{kind.kind.lower()}")
    assert fw.kind == kind.kind and fw.suspendable and not fw.default_enabled
    assert fw.declares.operator == "training-operator"
