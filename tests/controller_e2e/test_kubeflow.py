"""Training-operator v1 jobs under kqueue, with the real training-operator (v1.9.2) on the real
control plane: each kind's sample (config/samples/, converted from Kueue's) through its whole
life, a PyTorchJob preempted whole by a higher-priority Job and resumed, and an elastic
PyTorchJob whose minReplicas exceeds maxReplicas refused naming the field."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.integrations import kubeflow as kf
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import CLUSTER_QUEUES, PODS, WORKLOADS, Resource
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION, INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    Api,
    condition,
    eventually,
    is_true,
    job,
    priority_class,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue

# The queue set-up and the wait for an owner's Workload, as for JobSets and MPIJobs.
from tests.controller_e2e.test_jobset import _setup, _wait_workload

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
FRAMEWORKS = ["batch/job", "pod", *(k.framework for k in kf.KINDS)]


def resource(kind: kf.KubeflowKind) -> Resource:
    return Resource(kf.GROUP, "v1", kind.plural)


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, training_operator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-kubeflow"))
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": FRAMEWORKS}})


def sample(kind: kf.KubeflowKind, namespace: str, queue: str) -> Obj:
    """The kind's sample, in ``namespace`` and queued in ``queue``."""
    [obj] = [d for d in yaml.safe_load_all((SAMPLES / f"{kind.kind.lower()}.yaml").read_text()) if d]
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["labels"][c.QUEUE_NAME_LABEL] = queue
    return obj


async def _pods(api: Api, namespace: str, name: str) -> list[Obj]:
    return [
        p
        for p in await api.kube.list(PODS, namespace=namespace, label_selector=f"{kf.JOB_NAME_LABEL}={name}")
        if not p["metadata"].get("deletionTimestamp")
    ]


@pytest.mark.parametrize("kind", kf.KINDS, ids=lambda k: k.kind)
async def test_sample_full_life(
    api: Api, kqueue: ConfiguredKqueue, namespace: str, kind: kf.KubeflowKind
) -> None:
    cq = await _setup(api, namespace, "8")
    obj = sample(kind, namespace, "q")
    name = obj["metadata"]["name"]
    specs = obj["spec"][kind.replica_specs_field]
    expected = [
        (kf.pod_set_name(rt), specs[rt].get("replicas", 1)) for rt in kind.replica_types if rt in specs
    ]
    created = await api.kube.create(resource(kind), obj, namespace=namespace)
    # Held: suspended as kqueue's through its run policy, every replica template gated.
    assert created["spec"]["runPolicy"]["suspend"] is True
    assert created["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    for spec in created["spec"][kind.replica_specs_field].values():
        assert {"name": c.ADMISSION_GATE} in spec["template"]["spec"]["schedulingGates"]

    wl = await _wait_workload(api, namespace, kind.kind, name, lambda w: is_true(w, c.ADMITTED), "admitted")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == expected
    total = sum(n for _, n in expected)

    async def bound() -> list[Obj] | None:
        pods = await _pods(api, namespace, name)
        ok = len(pods) == total and all(p["spec"].get("nodeName") for p in pods)
        return pods if ok else None

    pods = await eventually(bound, within=120, what=f"the {kind.kind}'s {total} pods bound to kwok nodes")
    for pod in pods:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert not pod["spec"].get("schedulingGates")
    # One Workload, the job's: its pods are not queued on their own.
    owners = [
        ref["kind"]
        for w in await api.kube.list(WORKLOADS, namespace=namespace)
        for ref in w["metadata"].get("ownerReferences") or []
    ]
    assert owners == [kind.kind]

    finished = await _wait_workload(api, namespace, kind.kind, name, lambda w: is_true(w, c.FINISHED), "finished")
    assert condition(finished, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]

    async def freed() -> bool:
        st = (await api.kube.get(CLUSTER_QUEUES, cq)).get("status") or {}
        used = [r.get("total") for f in st.get("flavorsUsage") or [] for r in f["resources"]]
        return st.get("admittedWorkloads", 0) == 0 and all(u in (0, "0") for u in used)

    await eventually(freed, within=60, what=f"ClusterQueue {cq}'s quota freed")


def pytorchjob(name: str, namespace: str, *, workers: int = 2, labels: dict[str, str] | None = None,
               elastic: Obj | None = None, complete_after: str | None = None) -> Obj:
    obj = sample(kf.PYTORCHJOB, namespace, "q")
    obj["metadata"]["name"] = name
    obj["metadata"]["labels"].update(labels or {})
    specs = obj["spec"]["pytorchReplicaSpecs"]
    specs["Worker"]["replicas"] = workers
    for spec in specs.values():
        annotations = spec["template"]["metadata"]["annotations"]
        annotations.pop(COMPLETE_AFTER_ANNOTATION)
        if complete_after:
            annotations[COMPLETE_AFTER_ANNOTATION] = complete_after
    if elastic is not None:
        obj["spec"]["elasticPolicy"] = elastic
    return obj


async def test_a_pytorchjob_is_preempted_whole_then_resumed(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    low, high = unique("low"), unique("high")
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await _setup(api, namespace, "3", preemption={"withinClusterQueue": "LowerPriority"})
    pytorchjobs = resource(kf.PYTORCHJOB)
    await api.kube.create(
        pytorchjobs, pytorchjob("victim", namespace, labels={c.PRIORITY_CLASS_LABEL: low}), namespace=namespace
    )

    async def running(n: int) -> bool:
        pods = await _pods(api, namespace, "victim")
        return len(pods) == n and all(p["status"].get("phase") == "Running" for p in pods)

    await eventually(lambda: running(3), within=120, what="the victim PyTorchJob's 3 pods Running")
    await api.apply(
        job("urgent", namespace, "q", cpu="2", complete_after="5s", labels={c.PRIORITY_CLASS_LABEL: high})
    )
    victim = await _wait_workload(api, namespace, "PyTorchJob", "victim", lambda w: is_true(w, c.PREEMPTED), "Preempted")
    assert condition(victim, c.PREEMPTED)["reason"] == c.IN_CLUSTER_QUEUE  # type: ignore[index]

    async def stopped() -> bool:
        obj = await api.kube.get(pytorchjobs, "victim", namespace)
        return obj["spec"]["runPolicy"].get("suspend") is True and not await _pods(api, namespace, "victim")

    # Whole: the master and every worker go, never a part of the gang.
    await eventually(stopped, within=120, what="the victim PyTorchJob suspended with no pods left")
    await api.wait_workload(namespace, "urgent", lambda w: is_true(w, c.FINISHED), what="finished", within=90)
    await _wait_workload(api, namespace, "PyTorchJob", "victim", lambda w: is_true(w, c.ADMITTED), "re-admitted")
    await eventually(lambda: running(3), within=120, what="the victim PyTorchJob running again")


async def test_an_elastic_pytorchjob_runs_the_workers_its_quota_allows(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    await _setup(api, namespace, "3")
    obj = pytorchjob("elastic", namespace, workers=4, elastic={"minReplicas": 1, "maxReplicas": 4})
    await api.kube.create(resource(kf.PYTORCHJOB), obj, namespace=namespace)
    wl = await _wait_workload(api, namespace, "PyTorchJob", "elastic", lambda w: is_true(w, c.ADMITTED), "admitted")
    worker = next(ps for ps in (wl["status"]["admission"]["podSetAssignments"]) if ps["name"] == "worker")
    # 3 CPUs: the master and 2 of the 4 workers.
    assert worker["count"] == 2

    async def two_workers() -> bool:
        got = await api.kube.get(resource(kf.PYTORCHJOB), "elastic", namespace)
        return got["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2 and len(
            await _pods(api, namespace, "elastic")
        ) == 3

    await eventually(two_workers, within=120, what="the elastic PyTorchJob running 2 workers")


async def test_elastic_min_above_max_is_refused_naming_the_field(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    await _setup(api, namespace, "3")
    # Something already admitted in the queue is not touched by the refusal.
    await api.apply(job("kept", namespace, "q", cpu="1"))
    await api.wait_workload(namespace, "kept", lambda w: is_true(w, c.ADMITTED), what="admitted")
    bad = pytorchjob("bad", namespace, elastic={"minReplicas": 3, "maxReplicas": 2})
    with pytest.raises(KubeError) as info:
        await api.kube.create(resource(kf.PYTORCHJOB), copy.deepcopy(bad), namespace=namespace)
    assert info.value.status == 422
    assert "spec.elasticPolicy.minReplicas" in info.value.message and "3 > 2" in info.value.message
    kept = await api.workload_of(namespace, "kept")
    assert kept is not None and is_true(kept, c.ADMITTED) and not is_true(kept, c.EVICTED)
