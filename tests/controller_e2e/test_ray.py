"""RayClusters, RayJobs and RayServices under kqueue, with the real KubeRay operator on the real control plane:
the whole life (created -> Workload -> pods gated -> admitted -> released with the flavor's
nodeSelector -> bound on kwok nodes -> deleted -> quota freed), a RayJob's or a RayService's
RayCluster not queued on its own, the samples, and what a queued Ray object cannot have refused naming the field.

A RayCluster never finishes, and a RayJob here does not finish its Ray job (KubeRay asks the
Ray dashboard on the head pod for the job's status, which this cluster has no network to): those
lives end with the object deleted, which frees the quota as a finish does. A RayJob past its
``spec.activeDeadlineSeconds`` does finish, Failed by KubeRay itself with no dashboard asked: its
Workload is Finished and the quota freed with the RayJob still there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError, NotFound
from kqueue.controller.resources import CLUSTER_QUEUES, PODS, WORKLOADS, Resource
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    KWOK_NODES,
    SAMPLES,
    Api,
    cluster_queue,
    condition,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    pause_container,
    priority_class,
    stays,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters")
RAYJOBS = Resource("ray.io", "v1", "rayjobs")
RAYSERVICES = Resource("ray.io", "v1", "rayservices")
FRAMEWORKS = ["batch/job", "pod", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice"]


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, kuberay_operator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-ray"))
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": FRAMEWORKS}})


def _template(name: str, cpu: str = "1") -> Obj:
    return {
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                pause_container(cpu, name=name)
            ],
        }
    }


def cluster_spec(workers: int) -> Obj:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": _template("ray-head")},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": _template("ray-worker"),
            }
        ],
    }


def raycluster(name: str, namespace: str, queue: str, workers: int = 2) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.QUEUE_NAME_LABEL: queue}},
        "spec": cluster_spec(workers),
    }


def rayjob(name: str, namespace: str, queue: str) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.QUEUE_NAME_LABEL: queue}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": cluster_spec(1),
        },
    }


# Long enough for the RayJob's pods to start under load; KubeRay counts it from its own
# start of the RayJob (status.startTime, set again on each resume), not from its creation.
DEADLINE_S = 20


def deadline_rayjob(name: str, namespace: str, queue: str) -> Obj:
    """A RayJob that ends without a Ray dashboard: KubeRay v1.5.1 (rayjob_controller.go
    ``checkActiveDeadlineAndUpdateStatusIfNeeded``) sets ``jobDeploymentStatus: Failed``, reason
    ``DeadlineExceeded``, once ``spec.activeDeadlineSeconds`` have passed since its start, and
    ``checkBackoffLimitAndUpdateStatusIfNeeded`` never retries that reason, whatever
    ``spec.backoffLimit`` allows (given here, so that a retry would show)."""
    obj = rayjob(name, namespace, queue)
    obj["spec"] |= {"activeDeadlineSeconds": DEADLINE_S, "backoffLimit": 2}
    return obj


def deadline_exceeded(status: Obj) -> None:
    """KubeRay's status of a RayJob past its deadline: Failed once, not retried."""
    assert (status.get("jobDeploymentStatus"), status.get("reason")) == ("Failed", "DeadlineExceeded"), status
    assert status.get("failed") == 1, status
    assert "activeDeadlineSeconds" in str(status.get("message")), status


def rayservice(name: str, namespace: str, queue: str, workers: int = 2) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.QUEUE_NAME_LABEL: queue}},
        "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": cluster_spec(workers)},
    }


async def _setup(
    api: Api, namespace: str, cpu: str, queue: str = "q", *, preemption: Obj | None = None
) -> tuple[str, str]:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, cpu)], preemption=preemption))
    await api.apply(local_queue(queue, namespace, cq))
    return od, cq


async def _wait_workload(api: Api, namespace: str, kind: str, name: str, pred: Any, what: str) -> Obj:
    async def probe() -> Obj | None:
        wl = await api.workload_of(namespace, name, kind=kind)
        return wl if wl is not None and pred(wl) else None

    return await eventually(probe, within=120, what=f"Workload of {kind} {name}: {what}")


async def _bound(api: Api, namespace: str, selector: str, n: int, what: str) -> list[Obj]:
    async def probe() -> list[Obj] | None:
        pods = [
            p
            for p in await api.kube.list(PODS, namespace=namespace, label_selector=selector)
            if not p["metadata"].get("deletionTimestamp")
        ]
        ok = len(pods) == n and all(p["spec"].get("nodeName") in KWOK_NODES for p in pods)
        return pods if ok else None

    return await eventually(probe, within=120, what=what)


async def _gated_pod(api: Api, namespace: str, selector: str) -> Obj | None:
    for pod in await api.kube.list(PODS, namespace=namespace, label_selector=selector):
        gates = pod["spec"].get("schedulingGates") or []
        if {"name": c.ADMISSION_GATE} in gates:
            return pod
    return None


async def _quota_freed(api: Api, cq: str, od: str) -> None:
    async def freed() -> Obj | None:
        st = (await api.kube.get(CLUSTER_QUEUES, cq)).get("status") or {}
        used = {
            r["name"]: r["total"]
            for f in st.get("flavorsUsage") or []
            if f["name"] == od
            for r in f["resources"]
        }
        return st if st.get("admittedWorkloads") == 0 and used.get("cpu") in ("0", None) else None

    await eventually(freed, within=120, what=f"ClusterQueue {cq}'s quota freed")


async def _gone(api: Api, resource: Resource, name: str, namespace: str) -> None:
    async def probe() -> bool:
        try:
            await api.kube.get(resource, name, namespace)
        except NotFound:
            return True
        return False

    await eventually(probe, within=90, what=f"{resource.plural} {name} deleted")


async def stays_unadmitted(api: Api, namespace: str) -> None:
    async def queued() -> bool:
        wl = await api.workload_of(namespace, "rc", kind="RayCluster")
        return wl is not None and not is_true(wl, c.QUOTA_RESERVED)

    await stays(queued, for_s=3, what="the RayCluster queued while the quota is short")


async def test_raycluster_full_life(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    # 2 CPUs for 3 pods of 1 CPU: the cluster waits, its pods held, until the quota grows.
    od, cq = await _setup(api, namespace, "2")
    created = await api.kube.create(RAYCLUSTERS, raycluster("rc", namespace, "q"), namespace=namespace)
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    templates = [
        created["spec"]["headGroupSpec"]["template"],
        *(g["template"] for g in created["spec"]["workerGroupSpecs"]),
    ]
    for template in templates:
        assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]

    wl = await _wait_workload(api, namespace, "RayCluster", "rc", lambda w: True, "created")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("head", 1), ("workers", 2)]
    assert not is_true(wl, c.QUOTA_RESERVED)
    await stays_unadmitted(api, namespace)
    # Queued: no pods at all (KubeRay creates none for a suspended RayCluster).
    assert not await api.kube.list(PODS, namespace=namespace, label_selector="ray.io/cluster=rc")

    grown = cluster_queue(cq, [(od, "4")])
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"resourceGroups": grown["spec"]["resourceGroups"]}})
    await _wait_workload(api, namespace, "RayCluster", "rc", lambda w: is_true(w, c.ADMITTED), "admitted")
    pods = await _bound(api, namespace, "ray.io/cluster=rc", 3, "the RayCluster's 3 pods bound to kwok nodes")
    for pod in pods:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert {"name": c.ADMISSION_GATE} not in (pod["spec"].get("schedulingGates") or [])
    reasons = {e["reason"] for e in await api.events_for(namespace, "rc")}
    assert "CreatedWorkload" in reasons, reasons

    await api.kube.delete(RAYCLUSTERS, "rc", namespace=namespace)
    await _gone(api, RAYCLUSTERS, "rc", namespace)
    await _quota_freed(api, cq, od)


async def test_rayjob_full_life(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    od, cq = await _setup(api, namespace, "4")
    created = await api.kube.create(RAYJOBS, rayjob("rj", namespace, "q"), namespace=namespace)
    assert created["spec"]["suspend"] is True
    # The submitter pod is held and charged like the Ray pods: it got KubeRay's default template.
    submitter = created["spec"]["submitterPodTemplate"]
    assert {"name": c.ADMISSION_GATE} in submitter["spec"]["schedulingGates"]

    wl = await _wait_workload(api, namespace, "RayJob", "rj", lambda w: is_true(w, c.ADMITTED), "admitted")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [
        ("head", 1),
        ("workers", 1),
        ("submitter", 1),
    ]

    async def ray_cluster() -> Obj | None:
        # KubeRay records status.rayClusterName before it creates the RayCluster: wait for both.
        obj = await api.kube.get(RAYJOBS, "rj", namespace)
        name = str((obj.get("status") or {}).get("rayClusterName") or "")
        clusters = await api.kube.list(RAYCLUSTERS, namespace=namespace) if name else []
        return next((rc for rc in clusters if rc["metadata"]["name"] == name), None)

    # Read before the job can finish: KubeRay deletes the cluster once the submitter is done.
    rc = await eventually(ray_cluster, within=120, what="RayJob rj's RayCluster")
    pods = await _bound(api, namespace, "kqueue.io/rayjob-name=rj", 3, "the RayJob's head, worker and submitter bound")
    for pod in pods:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
    assert sum(1 for p in pods if "ray.io/node-type" not in p["metadata"]["labels"]) == 1  # the submitter
    # Only the RayJob has a Workload: the RayCluster it made (and its submitter Job) are its own.
    assert [(o["kind"], o["name"]) for o in rc["metadata"]["ownerReferences"]] == [("RayJob", "rj")]
    owners = {
        ref["kind"]
        for w in await api.kube.list(WORKLOADS, namespace=namespace)
        for ref in w["metadata"].get("ownerReferences") or []
    }
    assert owners == {"RayJob"}

    await api.kube.delete(RAYJOBS, "rj", namespace=namespace)
    await _gone(api, RAYJOBS, "rj", namespace)
    await _quota_freed(api, cq, od)


async def test_a_rayjob_past_its_deadline_finishes_and_frees_the_quota(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    od, cq = await _setup(api, namespace, "4")
    await api.kube.create(RAYJOBS, deadline_rayjob("rj", namespace, "q"), namespace=namespace)
    await _wait_workload(api, namespace, "RayJob", "rj", lambda w: is_true(w, c.ADMITTED), "admitted")
    await _bound(api, namespace, "kqueue.io/rayjob-name=rj", 3, "the RayJob's head, worker and submitter bound")

    async def finished() -> Obj | None:
        wl = await api.workload_of(namespace, "rj", kind="RayJob")
        return wl if wl is not None and is_true(wl, c.FINISHED) else None

    wl = await eventually(finished, within=DEADLINE_S + 120, what="Workload of RayJob rj: finished")
    done = condition(wl, c.FINISHED)
    assert done is not None and done["reason"] == c.FINISHED_FAILED, done
    # The message is KubeRay's, naming the deadline.
    status = (await api.kube.get(RAYJOBS, "rj", namespace))["status"]
    assert done["message"] == status["message"], (done, status)
    deadline_exceeded(status)
    # The finish freed the quota: the RayJob is still there.
    await _quota_freed(api, cq, od)
    assert (await api.kube.get(RAYJOBS, "rj", namespace))["status"]["jobDeploymentStatus"] == "Failed"


async def _workload_owners(api: Api, namespace: str) -> set[str]:
    return {
        ref["kind"]
        for w in await api.kube.list(WORKLOADS, namespace=namespace)
        for ref in w["metadata"].get("ownerReferences") or []
    }


async def _rayclusters_of(api: Api, namespace: str, owner: str) -> list[Obj] | None:
    clusters = [
        rc
        for rc in await api.kube.list(RAYCLUSTERS, namespace=namespace)
        if any(o["kind"] == "RayService" and o["name"] == owner for o in rc["metadata"].get("ownerReferences") or [])
    ]
    return clusters or None


async def test_rayservice_full_life(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    # 2 CPUs for 3 pods of 1 CPU: the RayService waits, held through its cluster config's
    # suspend, until the quota grows.
    od, cq = await _setup(api, namespace, "2")
    created = await api.kube.create(RAYSERVICES, rayservice("rs", namespace, "q"), namespace=namespace)
    config = created["spec"]["rayClusterConfig"]
    assert config["suspend"] is True
    assert created["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    for template in [config["headGroupSpec"]["template"], *(g["template"] for g in config["workerGroupSpecs"])]:
        assert {"name": c.ADMISSION_GATE} in template["spec"]["schedulingGates"]
        assert template["metadata"]["labels"]["kqueue.io/rayservice-name"] == "rs"

    wl = await _wait_workload(api, namespace, "RayService", "rs", lambda w: True, "created")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("head", 1), ("workers", 2)]
    # KubeRay makes the RayService's RayCluster suspended (no pods), controlled by the
    # RayService and carrying its queue label: it is not queued a second time.
    [held] = await eventually(lambda: _rayclusters_of(api, namespace, "rs"), within=120, what="rs's RayCluster")
    assert held["spec"]["suspend"] is True
    assert held["metadata"]["labels"][c.QUEUE_NAME_LABEL] == "q"
    await stays(
        lambda: _not_admitted(api, namespace, "RayService", "rs"),
        for_s=3,
        what="the RayService queued while the quota is short",
    )
    assert not await api.kube.list(PODS, namespace=namespace, label_selector="kqueue.io/rayservice-name=rs")
    assert await _workload_owners(api, namespace) == {"RayService"}

    grown = cluster_queue(cq, [(od, "4")])
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"resourceGroups": grown["spec"]["resourceGroups"]}})
    await _wait_workload(api, namespace, "RayService", "rs", lambda w: is_true(w, c.ADMITTED), "admitted")
    pods = await _bound(api, namespace, "kqueue.io/rayservice-name=rs", 3, "the RayService's 3 pods bound to kwok nodes")
    for pod in pods:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert {"name": c.ADMISSION_GATE} not in (pod["spec"].get("schedulingGates") or [])
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    assert await _workload_owners(api, namespace) == {"RayService"}
    reasons = {e["reason"] for e in await api.events_for(namespace, "rs")}
    assert "CreatedWorkload" in reasons, reasons

    await api.kube.delete(RAYSERVICES, "rs", namespace=namespace)
    await _gone(api, RAYSERVICES, "rs", namespace)
    await _quota_freed(api, cq, od)


async def _not_admitted(api: Api, namespace: str, kind: str, name: str) -> bool:
    wl = await api.workload_of(namespace, name, kind=kind)
    return wl is not None and not is_true(wl, c.QUOTA_RESERVED)


async def test_the_ray_samples_run(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    od, cq = await _setup(api, namespace, "6", queue="user-queue")
    for sample, resource in (("raycluster.yaml", RAYCLUSTERS), ("rayjob.yaml", RAYJOBS)):
        doc = yaml.safe_load((SAMPLES / sample).read_text())
        assert doc["metadata"]["labels"][c.QUEUE_NAME_LABEL] == "user-queue"
        doc["metadata"]["namespace"] = namespace
        await api.kube.create(resource, doc, namespace=namespace)
    await _wait_workload(api, namespace, "RayCluster", "sample-raycluster", lambda w: is_true(w, c.ADMITTED), "admitted")
    await _wait_workload(api, namespace, "RayJob", "sample-rayjob", lambda w: is_true(w, c.ADMITTED), "admitted")
    await _bound(api, namespace, "ray.io/cluster=sample-raycluster", 3, "the RayCluster sample's 3 pods bound")
    await _bound(api, namespace, "kqueue.io/rayjob-name=sample-rayjob", 3, "the RayJob sample's 3 pods bound")
    for sample, resource in (("raycluster", RAYCLUSTERS), ("rayjob", RAYJOBS)):
        await api.kube.delete(resource, f"sample-{sample}", namespace=namespace)
    await _quota_freed(api, cq, od)


async def test_the_rayservice_sample_runs(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    # Kueue's sample, converted: head 2 CPUs, one worker of 1 CPU.
    od, cq = await _setup(api, namespace, "3", queue="user-queue")
    doc = yaml.safe_load((SAMPLES / "rayservice.yaml").read_text())
    assert doc["metadata"]["labels"][c.QUEUE_NAME_LABEL] == "user-queue"
    doc["metadata"]["namespace"] = namespace
    await api.kube.create(RAYSERVICES, doc, namespace=namespace)
    await _wait_workload(api, namespace, "RayService", "test-rayservice", lambda w: is_true(w, c.ADMITTED), "admitted")
    await _bound(api, namespace, "kqueue.io/rayservice-name=test-rayservice", 2, "the RayService sample's 2 pods bound")
    await api.kube.delete(RAYSERVICES, "test-rayservice", namespace=namespace)
    await _quota_freed(api, cq, od)


@pytest.mark.parametrize(
    ("kind", "field"),
    [
        pytest.param("RayCluster", "spec.enableInTreeAutoscaling", id="raycluster autoscaling"),
        pytest.param("RayJob", "spec.rayClusterSpec.enableInTreeAutoscaling", id="rayjob autoscaling"),
        pytest.param("RayJob", "spec.shutdownAfterJobFinishes", id="rayjob keeping its cluster"),
    ],
)
async def test_what_a_queued_ray_object_cannot_have_is_refused(
    api: Api, kqueue: ConfiguredKqueue, namespace: str, kind: str, field: str
) -> None:
    if kind == "RayCluster":
        obj, resource = raycluster("bad", namespace, "q"), RAYCLUSTERS
        obj["spec"]["enableInTreeAutoscaling"] = True
    else:
        obj, resource = rayjob("bad", namespace, "q"), RAYJOBS
        if field.endswith("enableInTreeAutoscaling"):
            obj["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
        else:
            obj["spec"]["shutdownAfterJobFinishes"] = False
    with pytest.raises(KubeError) as info:
        await api.kube.create(resource, obj, namespace=namespace)
    assert info.value.status == 422
    assert field in info.value.message


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob", "RayService"])
async def test_a_ray_object_preempted_whole_then_resumed(
    api: Api, kqueue: ConfiguredKqueue, namespace: str, kind: str
) -> None:
    """A higher-priority Job preempts the whole Ray object: suspended, every pod gone (for a
    RayJob its RayCluster too; a RayService's RayCluster is made again, suspended); once the Job finished it is admitted and runs again."""
    low, high = unique("low"), unique("high")
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await _setup(api, namespace, "3", preemption={"withinClusterQueue": "LowerPriority"})
    if kind == "RayCluster":
        obj, resource = raycluster("victim", namespace, "q", workers=1), RAYCLUSTERS
        selector, n = "ray.io/cluster=victim", 2
    elif kind == "RayService":
        obj, resource = rayservice("victim", namespace, "q", workers=1), RAYSERVICES
        selector, n = "kqueue.io/rayservice-name=victim", 2
    else:
        obj, resource = rayjob("victim", namespace, "q"), RAYJOBS
        selector, n = "kqueue.io/rayjob-name=victim", 3
    obj["metadata"]["labels"][c.PRIORITY_CLASS_LABEL] = low
    await api.kube.create(resource, obj, namespace=namespace)
    await _bound(api, namespace, selector, n, f"the victim {kind}'s {n} pods bound")

    await api.apply(
        job("urgent", namespace, "q", cpu="2", complete_after="5s", labels={c.PRIORITY_CLASS_LABEL: high})
    )
    await _wait_workload(api, namespace, kind, "victim", lambda w: is_true(w, c.PREEMPTED), "Preempted")

    async def stopped() -> bool:
        current = await api.kube.get(resource, "victim", namespace)
        pods = [
            p for p in await api.kube.list(PODS, namespace=namespace, label_selector=selector)
            if not p["metadata"].get("deletionTimestamp")
        ]
        switch = current["spec"].get("rayClusterConfig", current["spec"]) if kind == "RayService" else current["spec"]
        return switch.get("suspend") is True and not pods

    await eventually(stopped, within=120, what=f"the victim {kind} suspended with no pods left")
    await api.wait_workload(namespace, "urgent", lambda w: is_true(w, c.FINISHED), what="finished", within=120)
    await _wait_workload(api, namespace, kind, "victim", lambda w: is_true(w, c.ADMITTED), "re-admitted")
    await _bound(api, namespace, selector, n, f"the victim {kind} running again")
    await api.kube.delete(resource, "victim", namespace=namespace)
