"""Kubeflow Trainer v2 TrainJobs under kqueue, on the real control plane with the real Trainer and
JobSet operators: the whole life, preemption of the whole TrainJob, and a missing runtime."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.integrations.jobset import JOBSET_NAME_LABEL, REPLICATED_JOB_NAME_LABEL
from kqueue.api.integrations.trainjob import ANCESTOR_LABEL, RUNTIME_PATCH_MANAGER
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.trainjob.generic import CLUSTER_TRAINING_RUNTIMES, TRAINJOBS
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import CLUSTER_QUEUES, PODS, WORKLOADS, Resource
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION, INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    ROOT,
    Api,
    cluster_queue,
    condition,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    priority_class,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets")
FRAMEWORKS = ["batch/job", "pod", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, trainer_operator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    yield from configured_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-trainjob")),
        {
            "integrations": {"frameworks": FRAMEWORKS},
            # Generous: PodsReady is asserted, a timeout never expected.
            "waitForPodsReady": {"enable": True, "timeout": "5m", "blockAdmission": False},
        },
    )


def runtime(name: str, *, complete_after: str | None = None) -> Obj:
    """A ClusterTrainingRuntime: one trainer Job (``node``), 1 node by default, 1 cpu per pod."""
    annotations = {COMPLETE_AFTER_ANNOTATION: complete_after} if complete_after else {}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                                "spec": {
                                    "backoffLimit": 0,
                                    "template": {
                                        "metadata": {"annotations": annotations},
                                        "spec": {
                                            "restartPolicy": "Never",
                                            "terminationGracePeriodSeconds": 0,
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "registry.k8s.io/pause:3.10",
                                                    "resources": {
                                                        "requests": {"cpu": "1", "memory": "64Mi"}
                                                    },
                                                }
                                            ],
                                        },
                                    },
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def trainjob(name: str, namespace: str, queue: str, runtime_name: str, *, nodes: int,
             labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {c.QUEUE_NAME_LABEL: queue, **(labels or {})},
        },
        "spec": {"runtimeRef": {"name": runtime_name}, "trainer": {"numNodes": nodes}},
    }


async def _with_runtime(api: Api, rt: Obj) -> None:
    await api.kube.create(CLUSTER_TRAINING_RUNTIMES, rt)
    api.created.append((CLUSTER_TRAINING_RUNTIMES, rt["metadata"]["name"], None))


async def _wait_workload(api: Api, namespace: str, name: str, pred: Any, what: str,
                         within: float = 90) -> Obj:
    async def probe() -> Obj | None:
        wl = await api.workload_of(namespace, name, kind="TrainJob")
        return wl if wl is not None and pred(wl) else None

    return await eventually(probe, within=within, what=f"Workload of TrainJob {name}: {what}")


async def _pods(api: Api, namespace: str, name: str) -> list[Obj]:
    return await api.kube.list(PODS, namespace=namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}")


async def _running(api: Api, namespace: str, name: str, n: int) -> list[Obj]:
    async def probe() -> list[Obj] | None:
        pods = [p for p in await _pods(api, namespace, name) if not p["metadata"].get("deletionTimestamp")]
        ok = len(pods) == n and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else None

    return await eventually(probe, within=90, what=f"{n} pods of TrainJob {name} Running")


async def test_trainjob_full_life(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    od, spot, cq, rt = unique("on-demand"), unique("spot"), unique("cq"), unique("rt")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(flavor(spot, "spot", spot=True))
    # Stopped first, so the TrainJob is seen queued (suspended) and its Workload pending.
    await api.apply(cluster_queue(cq, [(spot, "0"), (od, "3")], stop_policy="Hold"))
    await api.apply(local_queue("user-queue", namespace, cq))
    await _with_runtime(api, runtime(rt, complete_after="5s"))
    created = await api.kube.create(
        TRAINJOBS, trainjob("train", namespace, "user-queue", rt, nodes=2), namespace=namespace
    )
    # The webhook suspended it as kqueue's.
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"

    # One Workload, one pod set per replicated Job of the runtime: numNodes from the TrainJob.
    wl = await _wait_workload(
        api, namespace, "train",
        lambda w: (condition(w, c.QUOTA_RESERVED) or {}).get("status") == "False",
        "pending while its ClusterQueue is held",
    )
    [ps] = wl["spec"]["podSets"]
    assert (ps["name"], ps["count"]) == ("node", 2)
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("TrainJob", created["metadata"]["uid"])

    # Queued: suspended, its gate written into kqueue's runtime patch, the Trainer's JobSet
    # suspended too and not queued on its own; no pods.
    async def held() -> Obj | None:
        tj = await api.kube.get(TRAINJOBS, "train", namespace)
        mine = [p for p in tj["spec"].get("runtimePatches") or [] if p["manager"] == RUNTIME_PATCH_MANAGER]
        return tj if mine else None

    tj = await eventually(held, within=30, what="kqueue's runtimePatches entry")
    assert tj["spec"]["suspend"] is True
    js = await eventually(
        lambda: _get(api, JOBSETS, "train", namespace), within=60, what="the Trainer's JobSet"
    )
    assert js["spec"].get("suspend") is True
    assert [w for w in await api.kube.list(WORKLOADS, namespace=namespace)
            if w["metadata"]["ownerReferences"][0]["kind"] == "JobSet"] == []
    assert await _pods(api, namespace, "train") == []

    # Admitted on the flavor that fits, resumed; the pods are released onto on-demand nodes.
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": "None"}})
    wl = await _wait_workload(api, namespace, "train", lambda w: is_true(w, c.ADMITTED), "Admitted")
    [psa] = wl["status"]["admission"]["podSetAssignments"]
    assert psa["flavors"]["cpu"] == od and psa["count"] == 2

    async def resumed() -> Obj | None:
        tj = await api.kube.get(TRAINJOBS, "train", namespace)
        return None if tj["spec"].get("suspend") else tj

    tj = await eventually(resumed, within=30, what="TrainJob resumed")
    [mine] = [p for p in tj["spec"]["runtimePatches"] if p["manager"] == RUNTIME_PATCH_MANAGER]
    pod_patch = mine["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod_patch["spec"]["nodeSelector"] == {INSTANCE_TYPE_LABEL: "on-demand"}

    pods = await _running(api, namespace, "train", 2)
    for p in pods:
        assert not p["spec"].get("schedulingGates")
        assert p["metadata"]["labels"][REPLICATED_JOB_NAME_LABEL] == "node"
        assert p["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert p["spec"]["nodeName"].startswith("kwok-on-demand-")

    async def usage() -> Obj | None:
        st = (await api.kube.get(CLUSTER_QUEUES, cq)).get("status") or {}
        return st if st.get("admittedWorkloads") == 1 else None

    await eventually(usage, what="ClusterQueue admittedWorkloads=1")
    # waitForPodsReady: the TrainJob's pods (found through its JobSet's label) make it ready.
    await _wait_workload(api, namespace, "train", lambda w: is_true(w, c.PODS_READY), "PodsReady")

    # The pods complete, the TrainJob completes, the Workload finishes and the quota is freed.
    wl = await _wait_workload(api, namespace, "train", lambda w: is_true(w, c.FINISHED), "Finished",
                              within=120)
    assert condition(wl, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]

    async def freed() -> Obj | None:
        st = (await api.kube.get(CLUSTER_QUEUES, cq)).get("status") or {}
        used = {
            r["name"]: r["total"]
            for f in st.get("flavorsUsage") or [] if f["name"] == od for r in f["resources"]
        }
        return st if st.get("admittedWorkloads") == 0 and used.get("cpu") in ("0", None) else None

    await eventually(freed, what="quota freed")
    reasons = {e["reason"] for e in await api.events_for(namespace, "train")}
    assert {"CreatedWorkload", "Resumed", "Started"} <= reasons, reasons


async def test_the_trainjob_sample_runs(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    rt_doc, tj_doc = yaml.safe_load_all((ROOT / "config" / "samples" / "trainjob.yaml").read_text())
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "4")]))
    await api.apply(local_queue(tj_doc["metadata"]["labels"][c.QUEUE_NAME_LABEL], namespace, cq))
    rt_doc["metadata"]["name"] = unique(rt_doc["metadata"]["name"])
    tj_doc["metadata"]["namespace"] = namespace
    tj_doc["spec"]["runtimeRef"]["name"] = rt_doc["metadata"]["name"]
    await _with_runtime(api, rt_doc)
    await api.kube.create(TRAINJOBS, tj_doc, namespace=namespace)
    name = tj_doc["metadata"]["name"]
    wl = await _wait_workload(api, namespace, name, lambda w: is_true(w, c.ADMITTED), "Admitted")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2)]
    await _running(api, namespace, name, 2)
    await _wait_workload(api, namespace, name, lambda w: is_true(w, c.FINISHED), "Finished",
                         within=120)


async def _get(api: Api, resource: Resource, name: str, namespace: str) -> Obj | None:
    try:
        return await api.kube.get(resource, name, namespace)
    except KubeError:
        return None


async def test_trainjob_preempted_whole_then_resumed(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    od, cq, rt, low, high = unique("od"), unique("cq"), unique("rt"), unique("low"), unique("high")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await api.apply(cluster_queue(cq, [(od, "2")], preemption={"withinClusterQueue": "LowerPriority"}))
    await api.apply(local_queue("q", namespace, cq))
    await _with_runtime(api, runtime(rt))
    await api.kube.create(
        TRAINJOBS,
        trainjob("victim", namespace, "q", rt, nodes=2, labels={c.PRIORITY_CLASS_LABEL: low}),
        namespace=namespace,
    )
    await _running(api, namespace, "victim", 2)

    await api.apply(
        job("urgent", namespace, "q", cpu="2", complete_after="4s",
            labels={c.PRIORITY_CLASS_LABEL: high})
    )
    victim = await _wait_workload(api, namespace, "victim", lambda w: is_true(w, c.PREEMPTED), "Preempted")
    assert condition(victim, c.EVICTED)["reason"] == c.EVICTED_BY_PREEMPTION  # type: ignore[index]

    # Stopped whole: the TrainJob suspended, every pod gone.
    async def stopped() -> bool:
        tj = await api.kube.get(TRAINJOBS, "victim", namespace)
        live = [p for p in await _pods(api, namespace, "victim")
                if p["status"].get("phase") not in ("Succeeded", "Failed")]
        return bool(tj["spec"].get("suspend")) and not live

    await eventually(stopped, within=60, what="victim TrainJob suspended with no pods")
    await api.wait_workload(namespace, "urgent", lambda w: is_true(w, c.ADMITTED), what="Admitted")

    # The urgent Job finishes; the TrainJob is admitted again and resumed whole.
    await _wait_workload(
        api, namespace, "victim",
        lambda w: is_true(w, c.ADMITTED) and not is_true(w, c.EVICTED), "re-admitted", within=120,
    )
    await _running(api, namespace, "victim", 2)
    tj = await api.kube.get(TRAINJOBS, "victim", namespace)
    assert not tj["spec"].get("suspend")


TRAINER_VALIDATOR = "validator.trainjob.trainer.kubeflow.org"


@contextlib.contextmanager
def without_trainer_validation(cluster: LocalCluster) -> Iterator[None]:
    """The Trainer's validating webhook configuration removed, and put back afterwards: a TrainJob
    whose runtime is missing reaches kqueue as it does when that webhook is not installed (or
    the runtime is deleted between the Trainer's check and kqueue's)."""
    configs = json.loads(
        cluster.kubectl("get", "validatingwebhookconfigurations", "-o", "json").stdout
    )["items"]
    [config] = [
        cfg for cfg in configs if any(w["name"] == TRAINER_VALIDATOR for w in cfg.get("webhooks") or [])
    ]
    name = config["metadata"]["name"]
    config["metadata"] = {"name": name, "labels": config["metadata"].get("labels") or {}}
    cluster.kubectl("delete", "validatingwebhookconfiguration", name)
    try:
        yield
    finally:
        cluster.kubectl("create", "-f", "-", input=json.dumps(config))


async def test_trainjob_naming_a_missing_runtime_is_refused(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    await api.apply(local_queue("q", namespace, unique("cq")))
    missing = unique("no-such-runtime")
    with pytest.raises(KubeError) as info:
        await api.kube.create(
            TRAINJOBS, trainjob("lost", namespace, "q", missing, nodes=1), namespace=namespace
        )
    # The Trainer's own webhook refuses it, naming the field and the runtime.
    assert "spec.runtimeref" in str(info.value).lower() and missing in str(info.value)
    assert await api.workload_of(namespace, "lost", kind="TrainJob") is None


async def test_trainjob_whose_runtime_is_missing_is_reported_then_queued_once_it_exists(
    api: Api, kqueue: ConfiguredKqueue, namespace: str, cluster: LocalCluster
) -> None:
    cq, od = unique("cq"), unique("od")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("q", namespace, cq))
    missing = unique("late-runtime")
    with without_trainer_validation(cluster):

        async def created() -> Obj | None:
            try:
                return await api.kube.create(
                    TRAINJOBS, trainjob("lost", namespace, "q", missing, nodes=1), namespace=namespace
                )
            except KubeError:
                return None  # the API server has not dropped the Trainer's webhook yet

        await eventually(created, within=30, what="TrainJob created without the Trainer's check")

    # kqueue reports it on the TrainJob, naming the field, and makes no Workload.
    async def reported() -> Obj | None:
        for event in await api.events_for(namespace, "lost"):
            if event["reason"] == "ErrWorkloadCompose":
                return event
        return None

    event = await eventually(reported, within=30, what="ErrWorkloadCompose event on the TrainJob")
    assert event["type"] == "Warning"
    assert "spec.runtimeRef.name" in event["message"]
    assert f"ClusterTrainingRuntime '{missing}' not found" in event["message"]
    assert await api.workload_of(namespace, "lost", kind="TrainJob") is None
    tj = await api.kube.get(TRAINJOBS, "lost", namespace)
    assert tj["spec"]["suspend"] is True  # held, no pods

    # The runtime appears: kqueue (watching runtimes) builds the Workload and admits it.
    await _with_runtime(api, runtime(missing))
    wl = await _wait_workload(api, namespace, "lost", lambda w: is_true(w, c.ADMITTED), "Admitted")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 1)]


async def test_the_elastic_annotation_on_a_trainjob_is_refused(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    rt = unique("rt")
    await _with_runtime(api, runtime(rt))
    doc = trainjob("stretchy", namespace, "q", rt, nodes=1)
    doc["metadata"]["annotations"] = {c.ELASTIC_JOB_ANNOTATION: "true"}
    with pytest.raises(KubeError) as info:
        await api.kube.create(TRAINJOBS, doc, namespace=namespace)
    message = str(info.value)
    assert "vtrainjob.kqueue.io" in message
    assert f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]" in message
    assert await api.workload_of(namespace, "stretchy", kind="TrainJob") is None
