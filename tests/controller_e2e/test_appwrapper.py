"""AppWrappers under kqueue, with the real AppWrapper operator (v1.1.2, its webhooks off) on the
real control plane: Kueue's sample (an AppWrapper wrapping a PyTorchJob, with the real
training-operator) through its whole life, an AppWrapper wrapping a Job preempted whole by a
higher-priority Job and resumed, and one wrapping a kind kqueue does not manage refused naming
the component's field, with what was admitted kept."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.integrations import appwrapper as aw
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
    stays,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue, quota_freed
from tests.controller_e2e.test_jobset import _setup, _wait_workload

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
FRAMEWORKS = ["batch/job", "pod", kf.PYTORCHJOB.framework, aw.INTEGRATION.framework]
APPWRAPPERS = Resource(aw.GROUP, "v1beta2", aw.PLURAL)


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster,
    appwrapper_operator: str,
    training_operator: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-appwrapper"))
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": FRAMEWORKS}})


def sample(namespace: str, queue: str, *, complete_after: str = "10s") -> Obj:
    """Kueue's sample (its PyTorchJob's pods completing on kwok after ``complete_after``)."""
    [obj] = [d for d in yaml.safe_load_all((SAMPLES / "appwrapper.yaml").read_text()) if d]
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["labels"][c.QUEUE_NAME_LABEL] = queue
    for spec in obj["spec"]["components"][0]["template"]["spec"]["pytorchReplicaSpecs"].values():
        spec["template"].setdefault("metadata", {})["annotations"] = {COMPLETE_AFTER_ANNOTATION: complete_after}
    return obj


def wrapped_job(name: str, namespace: str, *, pods: int, labels: dict[str, str] | None = None) -> Obj:
    inner = job(f"{name}-job", namespace, "q", count=pods)
    del inner["metadata"]["namespace"], inner["metadata"]["labels"], inner["metadata"]["annotations"]
    return {
        "apiVersion": aw.API_VERSION,
        "kind": aw.KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": {c.QUEUE_NAME_LABEL: "q", **(labels or {})}},
        "spec": {"components": [{"template": inner}]},
    }


async def _pods(api: Api, namespace: str, name: str) -> list[Obj]:
    return [
        p
        for p in await api.kube.list(PODS, namespace=namespace, label_selector=f"{aw.APPWRAPPER_LABEL}={name}")
        if not p["metadata"].get("deletionTimestamp")
    ]


async def test_kueue_s_sample_full_life(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    cq = await _setup(api, namespace, "1")
    obj = sample(namespace, "q")
    name = obj["metadata"]["name"]
    created = await api.kube.create(APPWRAPPERS, obj, namespace=namespace)
    # Held: suspended as kqueue's, the podSets the operator would infer written down, every pod
    # template they name gated.
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    [component] = created["spec"]["components"]
    assert [p["path"] for p in component["podSets"]] == [
        "template.spec.pytorchReplicaSpecs.Master.template",
        "template.spec.pytorchReplicaSpecs.Worker.template",
    ]
    for spec in component["template"]["spec"]["pytorchReplicaSpecs"].values():
        assert {"name": c.ADMISSION_GATE} in spec["template"]["spec"]["schedulingGates"]

    # 1 CPU for 2 pods of 1 CPU: queued, and the operator creates nothing.
    wl = await _wait_workload(api, namespace, aw.KIND, name, lambda w: True, "created")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [(f"{name}-0", 1), (f"{name}-1", 1)]

    async def queued() -> bool:
        wl = await api.workload_of(namespace, name, kind=aw.KIND)
        pytorchjobs = await api.kube.list(Resource(kf.GROUP, "v1", kf.PYTORCHJOB.plural), namespace=namespace)
        return wl is not None and not is_true(wl, c.QUOTA_RESERVED) and not pytorchjobs

    await stays(queued, for_s=3, what="the AppWrapper queued, with no PyTorchJob, while the quota is short")

    # Quota grows: admitted, resumed, the PyTorchJob created and its pods released.
    await _setup_quota(api, cq, "4")
    await _wait_workload(api, namespace, aw.KIND, name, lambda w: is_true(w, c.ADMITTED), "admitted")

    async def bound() -> list[Obj] | None:
        pods = await _pods(api, namespace, name)
        ok = len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)
        return pods if ok else None

    pods = await eventually(bound, within=120, what="the AppWrapper's 2 pods bound to kwok nodes")
    for pod in pods:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert not pod["spec"].get("schedulingGates")
    assert sorted(p["metadata"]["labels"][aw.POD_SET_LABEL] for p in pods) == [f"{name}-0", f"{name}-1"]
    # One Workload, the AppWrapper's: its PyTorchJob and pods are not queued on their own.
    owners = [
        ref["kind"]
        for w in await api.kube.list(WORKLOADS, namespace=namespace)
        for ref in w["metadata"].get("ownerReferences") or []
    ]
    assert owners == [aw.KIND]

    finished = await _wait_workload(api, namespace, aw.KIND, name, lambda w: is_true(w, c.FINISHED), "finished")
    assert condition(finished, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]

    await quota_freed(api, cq)


async def _setup_quota(api: Api, cq: str, cpu: str) -> None:
    current = await api.kube.get(CLUSTER_QUEUES, cq)
    groups = copy.deepcopy(current["spec"]["resourceGroups"])
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = cpu
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"resourceGroups": groups}})


async def test_an_appwrapper_is_preempted_whole_then_resumed(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    low, high = unique("low"), unique("high")
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await _setup(api, namespace, "3", preemption={"withinClusterQueue": "LowerPriority"})
    await api.kube.create(
        APPWRAPPERS, wrapped_job("victim", namespace, pods=3, labels={c.PRIORITY_CLASS_LABEL: low}), namespace=namespace
    )

    async def running(n: int) -> bool:
        pods = await _pods(api, namespace, "victim")
        return len(pods) == n and all(p["status"].get("phase") == "Running" for p in pods)

    await eventually(lambda: running(3), within=120, what="the victim AppWrapper's 3 pods Running")
    await api.apply(job("urgent", namespace, "q", cpu="2", complete_after="5s", labels={c.PRIORITY_CLASS_LABEL: high}))
    victim = await _wait_workload(api, namespace, aw.KIND, "victim", lambda w: is_true(w, c.PREEMPTED), "Preempted")
    assert condition(victim, c.PREEMPTED)["reason"] == c.IN_CLUSTER_QUEUE  # type: ignore[index]

    async def stopped() -> bool:
        obj = await api.kube.get(APPWRAPPERS, "victim", namespace)
        return obj["spec"].get("suspend") is True and not await _pods(api, namespace, "victim")

    # Whole: its Job and every pod go, never a part of it.
    await eventually(stopped, within=120, what="the victim AppWrapper suspended with no pods left")
    await api.wait_workload(namespace, "urgent", lambda w: is_true(w, c.FINISHED), what="finished", within=90)
    await _wait_workload(api, namespace, aw.KIND, "victim", lambda w: is_true(w, c.ADMITTED), "re-admitted")
    await eventually(lambda: running(3), within=120, what="the victim AppWrapper running again")


async def test_an_appwrapper_wrapping_a_kind_kqueue_does_not_manage_is_refused_naming_the_component(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    await _setup(api, namespace, "3")
    # Something already admitted in the queue is not touched by the refusal.
    await api.apply(job("kept", namespace, "q", cpu="1"))
    await api.wait_workload(namespace, "kept", lambda w: is_true(w, c.ADMITTED), what="admitted")
    bad = wrapped_job("bad", namespace, pods=1)
    bad["spec"]["components"].append(
        {
            "template": {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
                         "spec": {"selector": {"matchLabels": {"a": "b"}},
                                  "template": {"metadata": {"labels": {"a": "b"}},
                                               "spec": {"containers": [{"name": "c", "image": "x"}]}}}},
            "podSets": [{"path": "template.spec.template", "replicas": 1}],
        }
    )
    with pytest.raises(KubeError) as info:
        await api.kube.create(APPWRAPPERS, bad, namespace=namespace)
    assert info.value.status == 422
    assert "spec.components[1].template.kind" in info.value.message
    assert "DaemonSet (apps/v1) is not a kind kqueue manages" in info.value.message
    kept = await api.workload_of(namespace, "kept")
    assert kept is not None and is_true(kept, c.ADMITTED) and not is_true(kept, c.EVICTED)
