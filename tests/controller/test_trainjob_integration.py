"""The TrainJob integration without a cluster: its Workload from the runtime, its patches, its
webhooks, the JobSet it makes left alone, and a missing runtime on the shared fake API server.

Kueue's cases (pkg/controller/jobs/trainjob) that map onto kqueue are named as Kueue names them.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kqueue.api.config import Configuration
from kqueue.api.integrations import IntegrationError, PriorityClasses
from kqueue.api.integrations.trainjob import (
    ANCESTOR_LABEL,
    RUNTIME_PATCH_MANAGER,
    runtimes_from,
    workload_for_trainjob,
)
from kqueue.api.v1alpha1 import ResourceFlavor, Workload, WorkloadPriorityClass, parse_object
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import as_dict
from kqueue.controller.integrations import PodSetRelease, registry
from kqueue.controller.integrations.jobset.webhook import SUSPENDABLE as JOBSET_HOOKS
from kqueue.controller.integrations.owners import BY_OWNER, owner_uids
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.release import PodReleaser
from kqueue.controller.integrations.suspension import SuspendableWebhooks
from kqueue.controller.integrations.trainjob.generic import (
    CLUSTER_TRAINING_RUNTIMES,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    RuntimeStores,
    TrainJobIntegration,
    kqueue_patch,
)
from kqueue.controller.integrations.trainjob.webhook import SUSPENDABLE as TRAINJOB_HOOKS
from kqueue.controller.manager import Manager
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import PODS, RESOURCE_FLAVORS, WORKLOADS
from kqueue.controller.webhook_server import AdmissionRequest
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import Events, model

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])
HELD = c.SUSPENDED_BY_KQUEUE_ANNOTATION
NAME = "trainer.kubeflow.org/trainjob"


def rjob(name: str, *, ancestor: str | None = None, parallelism: int | None = None,
         replicas: int | None = None, cpu: str = "1") -> Obj:
    job_spec: Obj = {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "node" if ancestor == "trainer" else name, "image": "busybox",
                     "resources": {"requests": {"cpu": cpu}}}
                ],
            }
        }
    }
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    out: Obj = {"name": name, "template": {"spec": job_spec}}
    if ancestor is not None:
        out["template"]["metadata"] = {"labels": {ANCESTOR_LABEL: ancestor}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def runtime(*rjobs: Obj, ml_policy: Obj | None = None, name: str = "torch",
            kind: str = "ClusterTrainingRuntime", namespace: str | None = None) -> Obj:
    spec: Obj = {"template": {"spec": {"replicatedJobs": list(rjobs)}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}


TORCH = runtime(rjob("node", ancestor="trainer"), ml_policy={"numNodes": 1, "torch": {}})


def trainjob(*, runtime_name: str = "torch", kind: str | None = None, trainer: Obj | None = None,
             queue: str | None = "lq", held: bool = False, suspend: bool = False,
             patches: list[Obj] | None = None, annotations: dict[str, str] | None = None) -> Obj:
    ref: Obj = {"name": runtime_name}
    if kind:
        ref["kind"] = kind
    spec: Obj = {"runtimeRef": ref, "suspend": suspend or held}
    if trainer is not None:
        spec["trainer"] = trainer
    if patches is not None:
        spec["runtimePatches"] = patches
    meta: Obj = {
        "name": "tj", "namespace": "ns", "uid": "tj-uid", "resourceVersion": "5",
        "labels": {c.QUEUE_NAME_LABEL: queue} if queue else {},
        "annotations": dict(annotations or {}),
    }
    if held:
        meta["annotations"][HELD] = "true"
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta, "spec": spec}


def build(tj: Obj, *runtimes: Obj) -> Workload:
    return workload_for_trainjob(tj, NO_CLASSES, runtimes=runtimes_from(runtimes or (TORCH,)))


# -- the Workload: pod sets as the Trainer's plugins make the JobSet ------------------------------


MPI = runtime(
    rjob("launcher", parallelism=1),
    rjob("node", ancestor="trainer"),
    ml_policy={"numNodes": 3, "mpi": {"runLauncherAsNode": True}},
    name="mpi",
)
WITH_INITIALIZERS = runtime(
    rjob("dataset-initializer", ancestor="dataset-initializer", replicas=3),
    rjob("model-initializer", ancestor="model-initializer"),
    rjob("node", ancestor="trainer"),
    ml_policy={"numNodes": 2},
    name="init",
)
PLAIN = runtime(rjob("workers", parallelism=3, replicas=2), name="plain")


@pytest.mark.parametrize(
    ("tj", "rt", "want"),
    [
        pytest.param(trainjob(), TORCH, [("node", 1)], id="runtime numNodes"),
        pytest.param(trainjob(trainer={"numNodes": 4}), TORCH, [("node", 4)],
                     id="TrainJob numNodes overrides the runtime's"),
        pytest.param(trainjob(runtime_name="mpi"), MPI, [("launcher", 1), ("node", 3)],
                     id="mpi: runtime numNodes"),
        pytest.param(trainjob(runtime_name="mpi", trainer={"numNodes": 4}), MPI,
                     [("launcher", 1), ("node", 3)], id="mpi: launcher runs as a node"),
        pytest.param(trainjob(runtime_name="init", trainer={"numNodes": 5}), WITH_INITIALIZERS,
                     [("dataset-initializer", 1), ("model-initializer", 1), ("node", 5)],
                     id="initializers are one Job of one pod"),
        pytest.param(trainjob(runtime_name="plain"), PLAIN, [("workers", 6)],
                     id="no ancestor: replicas x parallelism"),
    ],
)
def test_pod_sets_from_the_runtime(tj: Obj, rt: Obj, want: list[tuple[str, int]]) -> None:
    wl = build(tj, rt)
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == want


def test_workload_for_trainjob_is_owned_and_named_deterministically() -> None:
    wl = build(trainjob())
    assert wl.spec.queue_name == "lq"
    [owner] = wl.metadata.owner_references
    assert (owner.kind, owner.api_version, owner.uid, owner.controller) == (
        "TrainJob", "trainer.kubeflow.org/v1alpha1", "tj-uid", True)
    assert wl.name.startswith("trainjob-tj-") and build(trainjob()).name == wl.name


def _wpc(name: str, value: int) -> WorkloadPriorityClass:
    return WorkloadPriorityClass.model_validate({
        "apiVersion": c.API_VERSION, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
        "value": value})


def test_the_top_level_labels_are_read_on_the_trainjob() -> None:
    tj = trainjob()
    tj["metadata"]["labels"].update({
        c.PRIORITY_CLASS_LABEL: "low",
        c.PREEMPTION_PRIORITY_CLASS_LABEL: "high",
        c.PREEMPTIBILITY_LABEL: c.NON_PREEMPTIBLE_LABEL_VALUE,
        c.MAX_EXEC_TIME_SECONDS_LABEL: "60",
    })
    classes = PriorityClasses.from_objects([_wpc("high", 1000), _wpc("low", 10)])
    wl = workload_for_trainjob(tj, classes, runtimes=runtimes_from([TORCH]))
    assert wl.spec.priority == 10
    assert wl.spec.priority_class_ref is not None and wl.spec.priority_class_ref.name == "low"
    assert wl.spec.preemption_priority == 1000
    assert wl.metadata.labels[c.PREEMPTIBILITY_LABEL] == c.NON_PREEMPTIBLE_LABEL_VALUE
    assert wl.spec.maximum_execution_time_seconds == 60
    tj["metadata"]["labels"][c.PRIORITY_CLASS_LABEL] = "missing"
    with pytest.raises(IntegrationError) as info:
        workload_for_trainjob(tj, classes, runtimes=runtimes_from([TORCH]))
    assert info.value.path == f"metadata.labels[{c.PRIORITY_CLASS_LABEL}]"


def test_resources_per_node_are_merged_into_the_trainer_container() -> None:
    tj = trainjob(trainer={"resourcesPerNode": {"requests": {"memory": "2Gi", "cpu": "3"}}})
    [ps] = build(tj).spec.pod_sets
    [container] = ps.template.to_dict()["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "3", "memory": "2Gi"}


def test_runtime_patches_reach_the_pod_template_except_kqueue_s_own() -> None:
    def patch(manager: str, selector: dict[str, str]) -> Obj:
        return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": selector}}}}}
        ]}}}}

    tj = trainjob(patches=[patch("user", {"zone": "a"}), patch(RUNTIME_PATCH_MANAGER, {"type": "od"})])
    [ps] = build(tj).spec.pod_sets
    assert ps.template.to_dict()["spec"]["nodeSelector"] == {"zone": "a"}


def test_a_namespaced_training_runtime_is_looked_up_in_the_trainjob_s_namespace() -> None:
    rt = runtime(rjob("node", ancestor="trainer"), ml_policy={"numNodes": 2}, name="local",
                 kind="TrainingRuntime", namespace="ns")
    [ps] = build(trainjob(runtime_name="local", kind="TrainingRuntime"), rt).spec.pod_sets
    assert ps.count == 2
    elsewhere = copy.deepcopy(rt)
    elsewhere["metadata"]["namespace"] = "other"
    with pytest.raises(IntegrationError, match="not found in namespace ns"):
        build(trainjob(runtime_name="local", kind="TrainingRuntime"), elsewhere)


@pytest.mark.parametrize(
    ("tj", "path", "detail"),
    [
        pytest.param(trainjob(runtime_name="nope"), "spec.runtimeRef.name",
                     "ClusterTrainingRuntime 'nope' not found", id="runtime does not exist"),
        pytest.param(trainjob(runtime_name=""), "spec.runtimeRef.name", "required", id="no runtime"),
        pytest.param(trainjob(kind="Runtime"), "spec.runtimeRef.kind", "must be one of",
                     id="unknown runtime kind"),
        pytest.param(trainjob(trainer={"numNodes": -1}), "spec.trainer.numNodes",
                     "non-negative", id="negative numNodes"),
        pytest.param(
            trainjob(patches=[{"manager": "user", "trainingRuntimeSpec": {"template": {"spec": {
                "replicatedJobs": [{"name": "ghost"}]}}}}]),
            "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name",
            "no replicated Job 'ghost'", id="patch names a Job the runtime lacks"),
    ],
)
def test_bad_trainjobs_are_reported_naming_the_field(tj: Obj, path: str, detail: str) -> None:
    with pytest.raises(IntegrationError) as info:
        build(tj)
    assert info.value.path == path
    assert detail in info.value.detail


# -- start, stop, hold: kqueue's runtimePatches entry -------------------------------------------


def _admitted(tj: Obj) -> Workload:
    doc = build(tj).to_dict()
    doc["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "node", "flavors": {"cpu": "spot"}, "resourceUsage": {"cpu": "1"}, "count": 1}]}}
    wl = parse_object(doc, validate=False)
    assert isinstance(wl, Workload)
    return wl


RELEASES = {"node": PodSetRelease("node", 1, {"type": "spot"}, ({"key": "spot", "operator": "Exists"},))}


def _pod_patch(entry: Obj | None) -> Obj:
    assert entry is not None
    [r] = entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert r["name"] == "node"
    template: Obj = r["template"]["spec"]["template"]
    return template


def test_resume_writes_the_gate_and_the_flavor_into_kqueue_s_runtime_patch() -> None:
    other = {"manager": "user", "trainingRuntimeSpec": {}}
    tj = trainjob(held=True, patches=[other])
    patch = TrainJobIntegration().run_patch(tj, _admitted(tj), RELEASES)
    assert patch is not None
    assert patch["spec"]["suspend"] is False
    assert patch["metadata"]["annotations"] == {HELD: None}
    assert patch["metadata"]["resourceVersion"] == "5"
    user, mine = patch["spec"]["runtimePatches"]
    assert user == other  # another manager's entry is kept (the list is replaced whole)
    template = _pod_patch(mine)
    assert template["spec"]["nodeSelector"] == {"type": "spot"}
    assert template["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert template["spec"]["schedulingGates"] == [{"name": c.ADMISSION_GATE}]
    assert template["metadata"]["labels"] == {c.MANAGED_LABEL: "true"}


def test_a_queued_trainjob_holds_its_pods_through_the_gate_alone() -> None:
    integration = TrainJobIntegration()
    tj = trainjob(held=True)
    wl = build(tj)
    assert not integration.holds_pods(tj)
    patch = integration.hold_patch(tj, wl)
    assert patch is not None and patch["metadata"]["resourceVersion"] == "5"
    [mine] = patch["spec"]["runtimePatches"]
    template = _pod_patch(mine)
    assert "nodeSelector" not in template["spec"]  # an earlier admission's directives are gone
    assert template["spec"]["schedulingGates"] == [{"name": c.ADMISSION_GATE}]
    # Applied (the Trainer's webhook stamps ``time``): nothing more to do, pods held.
    tj["spec"]["runtimePatches"] = [{**mine, "time": "2026-01-01T00:00:00Z"}]
    assert integration.hold_patch(tj, wl) is None and integration.holds_pods(tj)
    # After a run, the flavor's directives are taken back once its Jobs are gone.
    ran = copy.deepcopy(tj)
    ran["spec"]["runtimePatches"] = TrainJobIntegration().run_patch(tj, _admitted(tj), RELEASES)["spec"]["runtimePatches"]  # type: ignore[index]
    ran["spec"]["suspend"] = True
    ran["status"] = {"jobsStatus": [{"name": "node", "active": 1}]}
    assert integration.hold_patch(ran, wl) is None  # still active: the Trainer would refuse
    ran["status"] = {"jobsStatus": [{"name": "node", "active": 0}]}
    again = integration.hold_patch(ran, wl)
    assert again is not None
    assert "nodeSelector" not in _pod_patch(kqueue_patch(again))["spec"]


def test_user_suspended_finished_and_pods() -> None:
    integration = TrainJobIntegration()
    assert integration.user_suspended(trainjob(suspend=True))
    assert not integration.user_suspended(trainjob(held=True))
    tj = trainjob()
    tj["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
    assert integration.finished(tj) == (c.FINISHED_SUCCEEDED, "done")
    tj["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimit"}]}
    assert integration.finished(tj) == (c.FINISHED_FAILED, "BackoffLimit")
    pod = {"metadata": {"namespace": "ns", "labels": {
        "jobset.sigs.k8s.io/jobset-name": "tj", "jobset.sigs.k8s.io/replicatedjob-name": "node"}}}
    assert integration.owner_of_pod(pod) == "ns/tj"
    assert integration.pod_set_of(tj, pod) == "node"
    assert integration.owner_of_pod({"metadata": {"namespace": "ns"}}) is None


# -- webhooks ---------------------------------------------------------------------------------------


def _request(new: Obj, old: Obj | None = None, kind: str = "TrainJob") -> AdmissionRequest:
    group = "jobset.x-k8s.io" if kind == "JobSet" else "trainer.kubeflow.org"
    version = "v1alpha2" if kind == "JobSet" else "v1alpha1"
    return AdmissionRequest(
        uid="u", operation="UPDATE" if old is not None else "CREATE",
        kind={"group": group, "version": version, "kind": kind},
        resource={"group": group, "version": version, "resource": kind.lower() + "s"},
        namespace="ns", name=new["metadata"]["name"], object=new, old_object=old,
    )


async def test_a_new_trainjob_is_suspended_as_kqueue_s() -> None:
    verdict = await SuspendableWebhooks(TRAINJOB_HOOKS).mutate(_request(trainjob()))
    out = verdict.patched
    assert out is not None
    assert out["spec"]["suspend"] is True and out["metadata"]["annotations"][HELD] == "true"


async def test_a_trainjob_without_a_queue_is_left_alone() -> None:
    assert (await SuspendableWebhooks(TRAINJOB_HOOKS).mutate(_request(trainjob(queue=None)))).patched is None


async def test_resuming_a_queued_trainjob_keeps_it_queued() -> None:
    old = trainjob(held=True)
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    verdict = await SuspendableWebhooks(TRAINJOB_HOOKS).mutate(_request(new, old))
    assert verdict.patched is not None and verdict.patched["spec"]["suspend"] is True


@pytest.mark.parametrize(
    "annotation", [c.ELASTIC_JOB_ANNOTATION, c.JOB_MIN_PARALLELISM_ANNOTATION], ids=["elastic", "partial"]
)
async def test_annotations_a_trainjob_cannot_honour_are_refused(annotation: str) -> None:
    verdict = await SuspendableWebhooks(TRAINJOB_HOOKS).validate(_request(trainjob(annotations={annotation: "true"})))
    assert not verdict.allowed
    [error] = verdict.errors
    assert error.field == f"metadata.annotations[{annotation}]"


def _trainer_jobset(labels: dict[str, str]) -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "tj", "namespace": "ns", "labels": labels, "ownerReferences": [
            {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj",
             "uid": "tj-uid", "controller": True}]},
        "spec": {"replicatedJobs": [rjob("node")]},
    }


async def test_the_jobset_of_a_trainjob_is_not_queued_on_its_own() -> None:
    parents = frozenset({("trainer.kubeflow.org/v1alpha1", "TrainJob")})
    js = _trainer_jobset({c.QUEUE_NAME_LABEL: "lq"})
    hooks = SuspendableWebhooks(JOBSET_HOOKS, parent_kinds=parents)
    assert (await hooks.mutate(_request(js, kind="JobSet"))).patched is None
    # With the TrainJob framework off, the same JobSet is queued as any other.
    assert (await SuspendableWebhooks(JOBSET_HOOKS).mutate(_request(js, kind="JobSet"))).patched is not None
    # manageJobsWithoutQueueName does not make it the JobSet integration's either.
    every = SuspendableWebhooks(JOBSET_HOOKS, parent_kinds=parents, manage_jobs_without_queue_name=True)
    assert (await every.mutate(_request(_trainer_jobset({}), kind="JobSet"))).patched is None


def test_registered_and_opt_in() -> None:
    fw = registry.get(NAME)
    assert fw.kind == "TrainJob" and fw.suspendable and not fw.default_enabled
    assert {w.name for w in fw.webhooks} == {"mtrainjob.kqueue.io", "vtrainjob.kqueue.io"}
    assert set(fw.watches) == {CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES}
    granted = {r for rule in fw.rbac for r in rule.resources}
    assert {"clustertrainingruntimes", "trainingruntimes", "trainjobs"} <= granted


# -- on the fake API server ----------------------------------------------------------------------


async def test_a_trainjob_naming_a_missing_runtime_is_reported_then_queued_once_it_exists(
    cluster: FakeCluster,
) -> None:
    trainjobs = await cluster.informer(TRAINJOBS, as_dict)
    workloads = await cluster.informer(WORKLOADS, model(Workload), indexes={BY_OWNER: owner_uids})
    pods = await cluster.informer(PODS, as_dict, indexes={BY_OWNER: owner_uids})
    flavors = await cluster.informer(RESOURCE_FLAVORS, model(ResourceFlavor))
    cluster_runtimes = await cluster.informer(CLUSTER_TRAINING_RUNTIMES, as_dict)
    runtimes = await cluster.informer(TRAINING_RUNTIMES, as_dict)
    events = Events()
    reconciler = JobReconciler(
        job=TrainJobIntegration(RuntimeStores(cluster_runtimes.store, runtimes.store)),
        objects=trainjobs.store, workloads=workloads.store, pods=pods.store, flavors=flavors.store,
        priorities=lambda: NO_CLASSES, kube=cluster.kube, events=events,
        releaser=PodReleaser(kube=cluster.kube, metrics=Metrics(), now=lambda: None),  # type: ignore[arg-type, return-value]
        now=lambda: None,  # type: ignore[arg-type, return-value]
    )
    cluster.server.add(TRAINJOBS, trainjob(held=True))
    await cluster.synced()

    await reconciler("ns/tj")
    assert cluster.server.objects(WORKLOADS) == []
    [(name, type_, reason, message)] = events.recorded
    assert (name, type_, reason) == ("tj", "Warning", "ErrWorkloadCompose")
    assert "spec.runtimeRef.name" in message and "ClusterTrainingRuntime 'torch' not found" in message

    cluster.server.add(CLUSTER_TRAINING_RUNTIMES, TORCH)
    await cluster.synced()
    await reconciler("ns/tj")
    [wl] = cluster.server.objects(WORKLOADS)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("node", 1)]


def test_the_manager_watches_the_runtimes_only_with_the_trainjob_framework(
    cluster: FakeCluster,
) -> None:
    def manager(frameworks: list[str]) -> Manager:
        config = Configuration.model_validate(
            {"integrations": {"frameworks": frameworks}, "leaderElection": {"leaderElect": False}})
        return Manager(cluster.api, config, metrics=Metrics())

    on = manager(["batch/job", "jobset.x-k8s.io/jobset", NAME])
    assert set(on.watched) == {CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES}
    assert "watched/trainer.kubeflow.org/clustertrainingruntimes" in on.informers()
    job = on.job_reconcilers[NAME].job
    assert isinstance(job, TrainJobIntegration) and isinstance(job.runtimes, RuntimeStores)
    off = manager(["batch/job", "jobset.x-k8s.io/jobset"])
    assert off.watched == {} and not any(n.startswith("watched/") for n in off.informers())


# -- invariants ---------------------------------------------------------------------------------------

_ANCESTORS = st.sampled_from([None, "trainer", "dataset-initializer", "model-initializer"])


@st.composite
def runtimes_and_trainjobs(draw: st.DrawFn) -> tuple[Obj, Obj]:
    n = draw(st.integers(min_value=1, max_value=4))
    rjobs = [
        rjob(f"job{i}", ancestor=draw(_ANCESTORS),
             parallelism=draw(st.none() | st.integers(min_value=0, max_value=5)),
             replicas=draw(st.none() | st.integers(min_value=0, max_value=3)))
        for i in range(n)
    ]
    policy = draw(st.none() | st.builds(lambda k: {"numNodes": k}, st.integers(min_value=1, max_value=8)))
    trainer = draw(st.none() | st.builds(lambda k: {"numNodes": k}, st.integers(min_value=0, max_value=8)))
    return runtime(*rjobs, ml_policy=policy), trainjob(trainer=trainer, held=True)


@given(runtimes_and_trainjobs(), st.sampled_from(["od", "spot"]))
def test_kqueue_s_own_runtime_patch_never_changes_the_workload(case: tuple[Obj, Obj], flavor: str) -> None:
    """Holding and running a TrainJob (kqueue's runtimePatches entry) leaves the Workload it needs
    as it was: the reconciler never sees a drift it caused itself. One pod set per replicated Job,
    in the runtime's order."""
    rt, tj = case
    before = build(tj, rt)
    names = [r["name"] for r in rt["spec"]["template"]["spec"]["replicatedJobs"]]
    assert [ps.name for ps in before.spec.pod_sets] == names
    releases = {name: PodSetRelease(name, 1, {"type": flavor}) for name in names}
    held = TrainJobIntegration().hold_patch(tj, before)
    assert held is not None
    running = copy.deepcopy(tj)
    running["spec"]["runtimePatches"] = held["spec"]["runtimePatches"]
    assert build(running, rt).spec.pod_sets == before.spec.pod_sets
    run = TrainJobIntegration().run_patch(running, before, releases)
    assert run is not None
    running["spec"]["runtimePatches"] = run["spec"]["runtimePatches"]
    running["spec"]["suspend"] = False
    assert build(running, rt).spec.pod_sets == before.spec.pod_sets
