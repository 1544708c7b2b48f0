"""StatefulSets and Deployments under kqueue, on the real control plane (the StatefulSet,
Deployment and ReplicaSet controllers of kube-controller-manager, kube-scheduler, kwok nodes)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import datetime
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
from tests.controller_e2e.support_extra import PodsKqueue, gated, pods_kqueue

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
STATEFULSETS = Resource("apps", "v1", "statefulsets")
DEPLOYMENTS = Resource("apps", "v1", "deployments")


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodsKqueue]:
    yield from pods_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-apps")),
        {"integrations": {"frameworks": ["batch/job", "pod", "statefulset", "deployment"]}},
    )


def _template(app: str, cpu: str = "1") -> Obj:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                pause_container(cpu)
            ],
        },
    }


def statefulset(name: str, namespace: str, queue: str, replicas: int) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.QUEUE_NAME_LABEL: queue}},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": _template(name),
        },
    }


def deployment(name: str, namespace: str, queue: str, replicas: int, **extra: Any) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "labels": {c.QUEUE_NAME_LABEL: queue}}
    meta.update(extra)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            # One new pod at a time, no old pod down before its replacement runs.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": _template(name),
        },
    }


async def _queues(api: Api, namespace: str, cpu: str) -> tuple[str, str]:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, cpu)]))
    await api.apply(local_queue("lq", namespace, cq))
    return od, cq


async def _owned(api: Api, namespace: str, kind: str, name: str) -> list[Obj]:
    return [
        wl
        for wl in await api.kube.list(WORKLOADS, namespace=namespace)
        if any(r.get("kind") == kind and r.get("name") == name for r in wl["metadata"].get("ownerReferences") or [])
    ]


async def _sts_pods(api: Api, namespace: str, name: str) -> list[Obj]:
    return [
        p
        for p in await api.kube.list(PODS, namespace=namespace, label_selector=f"app={name}")
        if not p["metadata"].get("deletionTimestamp")
    ]


async def _running(api: Api, namespace: str, app: str, n: int) -> list[Obj] | None:
    pods = await _sts_pods(api, namespace, app)
    ok = len(pods) == n and all(
        p["status"].get("phase") == "Running" and p["spec"].get("nodeName") and not gated(p)
        for p in pods
    )
    return pods if ok else None


async def _admitted_slice(api: Api, namespace: str, name: str, count: int) -> Obj:
    async def probe() -> Obj | None:
        for wl in await _owned(api, namespace, "StatefulSet", name):
            if is_true(wl, c.FINISHED) or not is_true(wl, c.ADMITTED):
                continue
            [psa] = wl["status"]["admission"]["podSetAssignments"]
            if psa["count"] == count:
                return wl
        return None

    return await eventually(probe, within=60, what=f"an admitted slice of {name} with {count} pods")


async def _usage(api: Api, cq: str) -> list[Obj]:
    got = await api.kube.get(CLUSTER_QUEUES, cq)
    return list((got.get("status") or {}).get("flavorsUsage") or [])


def _cpu_used(usage: list[Obj]) -> str:
    for fl in usage:
        for r in fl.get("resources") or []:
            if r["name"] == "cpu":
                return str(r.get("total"))
    return "0"


# -- StatefulSet ---------------------------------------------------------------------------------


async def test_statefulset_full_life(api: Api, namespace: str) -> None:
    """Created -> one Workload -> pods gated -> admitted -> released with the flavor's node
    labels -> bound on kwok nodes -> scaled to 0, quota freed -> deleted."""
    # No quota yet: the Workload waits and the pods stay held.
    od, cq = await _queues(api, namespace, "0")
    created = await api.kube.create(STATEFULSETS, statefulset("db", namespace, "lq", 2), namespace=namespace)
    template = created["spec"]["template"]
    assert gated(template), "the webhook puts the gate in the pod template"
    assert template["metadata"]["labels"][c.MANAGED_LABEL] == "true"

    async def one_workload() -> Obj | None:
        owned = await _owned(api, namespace, "StatefulSet", "db")
        return owned[0] if len(owned) == 1 else None

    wl = await eventually(one_workload, what="one Workload for the StatefulSet")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 2)]
    assert wl["spec"]["queueName"] == "lq"

    async def first_pod_gated() -> Obj | None:
        pods = await _sts_pods(api, namespace, "db")
        return pods[0] if pods and gated(pods[0]) else None

    held = await eventually(first_pod_gated, what="the StatefulSet's first pod created gated")
    assert not held["spec"].get("nodeName")
    await stays(
        lambda: _no_admission(api, namespace, "db"), for_s=3, what="nothing admitted without quota"
    )

    # Quota arrives: the whole gang is admitted, the pods released as they come.
    got = await api.kube.get(CLUSTER_QUEUES, cq)
    got["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "4"
    await api.kube.replace(CLUSTER_QUEUES, got)
    admitted = await _admitted_slice(api, namespace, "db", 2)
    assert admitted["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == od
    pods = await eventually(lambda: _running(api, namespace, "db", 2), within=60, what="2 pods Running")
    for p in pods:
        assert p["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert p["spec"]["nodeName"].startswith("kwok-")
    assert await eventually(
        lambda: _value_if(_cpu_used, api, cq, "2"), what="2 CPUs in use"
    )

    # Scaled to 0: its Workload goes, the quota is free.
    await api.kube.patch(STATEFULSETS, "db", {"spec": {"replicas": 0}}, namespace=namespace)

    async def no_workload() -> bool | None:
        return True if not await _owned(api, namespace, "StatefulSet", "db") else None

    await eventually(no_workload, what="the Workload deleted at 0 replicas")
    assert await eventually(lambda: _value_if(_cpu_used, api, cq, "0"), what="quota freed")

    # Back to 1: queued and admitted again; deleting the StatefulSet frees it too.
    await api.kube.patch(STATEFULSETS, "db", {"spec": {"replicas": 1}}, namespace=namespace)
    await _admitted_slice(api, namespace, "db", 1)
    await eventually(lambda: _running(api, namespace, "db", 1), within=60, what="1 pod Running")
    await api.kube.delete(STATEFULSETS, "db", namespace=namespace)
    assert await eventually(
        lambda: _value_if(_cpu_used, api, cq, "0"), within=60, what="quota freed after deletion"
    )


async def _no_admission(api: Api, namespace: str, name: str) -> bool:
    owned = await _owned(api, namespace, "StatefulSet", name)
    pods = await _sts_pods(api, namespace, name)
    return all(not wl.get("status", {}).get("admission") for wl in owned) and all(gated(p) for p in pods)


async def _value_if(read: Any, api: Api, cq: str, want: str) -> bool | None:
    return True if read(await _usage(api, cq)) == want else None


async def test_statefulset_scaled_2_4_2(api: Api, namespace: str) -> None:
    od, cq = await _queues(api, namespace, "4")
    await api.kube.create(STATEFULSETS, statefulset("grow", namespace, "lq", 2), namespace=namespace)
    first = await _admitted_slice(api, namespace, "grow", 2)
    pods = await eventually(lambda: _running(api, namespace, "grow", 2), within=60, what="2 pods Running")
    original = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}

    await api.kube.patch(STATEFULSETS, "grow", {"spec": {"replicas": 4}}, namespace=namespace)
    second = await _admitted_slice(api, namespace, "grow", 4)
    assert second["metadata"]["name"] != first["metadata"]["name"]
    first_key = f"{namespace}/{first['metadata']['name']}"
    assert second["metadata"]["annotations"][c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION] == first_key
    assert second["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == od

    async def old_replaced() -> Obj | None:
        for wl in await _owned(api, namespace, "StatefulSet", "grow"):
            if wl["metadata"]["name"] == first["metadata"]["name"] and is_true(wl, c.FINISHED):
                return wl
        return None

    replaced = await eventually(old_replaced, what="the first slice finished as replaced")
    finished = next(x for x in replaced["status"]["conditions"] if x["type"] == c.FINISHED)
    assert finished["reason"] == c.WORKLOAD_SLICE_REPLACED
    pods = await eventually(lambda: _running(api, namespace, "grow", 4), within=90, what="4 pods Running")
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    assert {k: now[k] for k in original} == original, "the running pods were not touched"
    assert await eventually(lambda: _value_if(_cpu_used, api, cq, "4"), what="4 CPUs in use")

    await api.kube.patch(STATEFULSETS, "grow", {"spec": {"replicas": 2}}, namespace=namespace)
    shrunk = await _admitted_slice(api, namespace, "grow", 2)
    assert shrunk["metadata"]["name"] == second["metadata"]["name"], "shrunk in place"

    async def spec_shrunk() -> Obj | None:
        # The admission is written first (that frees the quota), the pod set count right after.
        for wl in await _owned(api, namespace, "StatefulSet", "grow"):
            if wl["metadata"]["name"] == second["metadata"]["name"] and wl["spec"]["podSets"][0]["count"] == 2:
                return wl
        return None

    await eventually(spec_shrunk, what="the slice's pod set shrunk to 2")
    pods = await eventually(lambda: _running(api, namespace, "grow", 2), within=60, what="back to 2 pods")
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == original
    assert await eventually(lambda: _value_if(_cpu_used, api, cq, "2"), what="2 CPUs in use again")
    live = [w for w in await _owned(api, namespace, "StatefulSet", "grow") if not is_true(w, c.FINISHED)]
    assert [w["metadata"]["name"] for w in live] == [second["metadata"]["name"]]
    await api.kube.delete(STATEFULSETS, "grow", namespace=namespace)


STS_MAX_S = 14


async def test_a_statefulset_s_maximum_execution_time_spans_its_resize(
    api: Api, namespace: str
) -> None:
    """kqueue.io/max-exec-time-seconds budgets the StatefulSet, not each WorkloadSlice: the
    slice a scale-up admits carries the time its predecessor ran
    (status.accumulatedPastExecutionTimeSeconds) and is deactivated when the whole budget is
    spent, not a full budget after its own admission."""
    await _queues(api, namespace, "4")
    sts = statefulset("budget", namespace, "lq", 2)
    sts["metadata"]["labels"][c.MAX_EXEC_TIME_SECONDS_LABEL] = str(STS_MAX_S)
    await api.kube.create(STATEFULSETS, sts, namespace=namespace)
    await _admitted_slice(api, namespace, "budget", 2)
    await asyncio.sleep(5)

    await api.kube.patch(STATEFULSETS, "budget", {"spec": {"replicas": 3}}, namespace=namespace)
    second = await _admitted_slice(api, namespace, "budget", 3)
    past = int(second["status"].get("accumulatedPastExecutionTimeSeconds") or 0)
    assert 4 <= past < STS_MAX_S, second["status"]
    admitted = condition(second, c.ADMITTED)
    assert admitted is not None

    async def deactivated() -> Obj | None:
        wl = await api.kube.get(WORKLOADS, second["metadata"]["name"], namespace)
        evicted = condition(wl, c.EVICTED) or {}
        if wl["spec"].get("active") is False and (
            evicted.get("reason") == c.EVICTED_BY_MAXIMUM_EXECUTION_TIME
        ):
            return wl
        return None

    wl = await eventually(deactivated, within=STS_MAX_S + 30, what="the slice deactivated")
    evicted = condition(wl, c.EVICTED)
    assert evicted is not None
    assert f"exceeded its maximum execution time of {STS_MAX_S}s" in evicted["message"]
    # What was left of the budget, not a new one: the condition times have whole seconds.
    ran = _seconds_between(admitted["lastTransitionTime"], evicted["lastTransitionTime"])
    assert ran <= STS_MAX_S - past + 3, (ran, past)
    assert ran < STS_MAX_S, (ran, past)


def _seconds_between(start: str, end: str) -> float:
    parse = datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


async def test_statefulset_preempted_by_a_job_then_readmitted(api: Api, namespace: str) -> None:
    """Evicted: its running pods are deleted, recreated gated, the quota goes to the Job; when
    the Job finishes, the StatefulSet is admitted again and its pods released."""
    od, cq, low, high = unique("od"), unique("cq"), unique("low"), unique("high")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await api.apply(cluster_queue(cq, [(od, "2")], preemption={"withinClusterQueue": "LowerPriority"}))
    await api.apply(local_queue("lq", namespace, cq))
    obj = statefulset("svc", namespace, "lq", 2)
    obj["metadata"]["labels"][c.PRIORITY_CLASS_LABEL] = low
    await api.kube.create(STATEFULSETS, obj, namespace=namespace)
    first = await _admitted_slice(api, namespace, "svc", 2)
    pods = await eventually(lambda: _running(api, namespace, "svc", 2), within=60, what="2 pods Running")
    before = {p["metadata"]["uid"] for p in pods}

    await api.apply(
        job("urgent", namespace, "lq", cpu="2", complete_after="5s",
            labels={c.PRIORITY_CLASS_LABEL: high})
    )

    async def requeued() -> Obj | None:
        for wl in await _owned(api, namespace, "StatefulSet", "svc"):
            if wl["metadata"]["name"] == first["metadata"]["name"] and is_true(wl, c.REQUEUED):
                return wl
        return None

    wl = await eventually(requeued, within=60, what="the StatefulSet's Workload evicted and requeued")
    assert not (wl.get("status") or {}).get("admission")

    async def held_again() -> list[Obj] | None:
        now = await _sts_pods(api, namespace, "svc")
        return now if now and all(gated(p) for p in now) and not {p["metadata"]["uid"] for p in now} & before else None

    await eventually(held_again, within=60, what="the pods recreated behind the gate")
    # Events are written in the background: the pods can be back behind the gate before the
    # Stopped event is listed (a cold CI run, 2026-11-29).
    async def stopped() -> bool:
        return any(e.get("reason") == "Stopped" for e in await api.events_for(namespace, "svc"))

    await eventually(stopped, within=30, what="a Stopped event on the StatefulSet")

    # The Job finishes: the StatefulSet is admitted again and runs.
    await _admitted_slice(api, namespace, "svc", 2)
    await eventually(lambda: _running(api, namespace, "svc", 2), within=90, what="2 pods Running again")
    await api.kube.delete(STATEFULSETS, "svc", namespace=namespace)


# -- Deployment ----------------------------------------------------------------------------------


async def _pod_workloads(api: Api, namespace: str, pods: list[Obj]) -> dict[str, Obj]:
    names = {p["metadata"]["name"] for p in pods}
    out: dict[str, Obj] = {}
    for wl in await api.kube.list(WORKLOADS, namespace=namespace):
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Pod" and ref.get("name") in names:
                out[ref["name"]] = wl
    return out


async def test_deployment_pods_admitted_one_by_one_and_rolled(api: Api, namespace: str) -> None:
    # Room for the 2 replicas and one surge pod, never for two whole ReplicaSets.
    _od, cq = await _queues(api, namespace, "3")
    created = await api.kube.create(DEPLOYMENTS, deployment("web", namespace, "lq", 2), namespace=namespace)
    t_meta = created["spec"]["template"]["metadata"]
    assert t_meta["labels"][c.QUEUE_NAME_LABEL] == "lq"
    assert t_meta["annotations"][c.SUSPENDED_BY_PARENT_ANNOTATION] == "deployment"

    pods = await eventually(lambda: _running(api, namespace, "web", 2), within=60, what="2 pods Running")
    by_pod = await _pod_workloads(api, namespace, pods)
    assert len(by_pod) == 2, "each pod is its own Workload"
    for pod in pods:
        wl = by_pod[pod["metadata"]["name"]]
        assert [ps["count"] for ps in wl["spec"]["podSets"]] == [1]
        assert is_true(wl, c.ADMITTED)
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert c.MANAGED_FINALIZER in pod["metadata"]["finalizers"]
    old_uids = {p["metadata"]["uid"] for p in pods}

    # A rolling update: every pod replaced, one at a time, within 3 CPUs.
    await api.kube.patch(
        DEPLOYMENTS, "web",
        {"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}},
        namespace=namespace,
    )

    async def rolled() -> list[Obj] | None:
        now = await _running(api, namespace, "web", 2)
        if now is None or {p["metadata"]["uid"] for p in now} & old_uids:
            return None
        return now

    new = await eventually(rolled, within=120, what="the rollout replaced both pods")
    by_pod = await _pod_workloads(api, namespace, new)
    assert len(by_pod) == 2 and all(is_true(w, c.ADMITTED) for w in by_pod.values())
    assert await eventually(lambda: _value_if(_cpu_used, api, cq, "2"), within=60, what="old pods' quota freed")
    await api.kube.delete(DEPLOYMENTS, "web", namespace=namespace)
    assert await eventually(lambda: _value_if(_cpu_used, api, cq, "0"), within=60, what="all quota freed")


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "annotation"),
    [
        pytest.param("Deployment", c.ELASTIC_JOB_ANNOTATION, id="elastic annotation on a Deployment"),
        pytest.param("Deployment", c.JOB_MIN_PARALLELISM_ANNOTATION, id="partial admission on a Deployment"),
        pytest.param("StatefulSet", c.JOB_MIN_PARALLELISM_ANNOTATION, id="partial admission on a StatefulSet"),
    ],
)
async def test_unsupported_annotations_are_refused(
    api: Api, namespace: str, kind: str, annotation: str
) -> None:
    if kind == "Deployment":
        obj, resource = deployment("bad", namespace, "lq", 1), DEPLOYMENTS
    else:
        obj, resource = statefulset("bad", namespace, "lq", 1), STATEFULSETS
    obj["metadata"]["annotations"] = {annotation: "true" if annotation == c.ELASTIC_JOB_ANNOTATION else "1"}
    with pytest.raises(KubeError) as err:
        await api.kube.create(resource, obj, namespace=namespace)
    assert f"metadata.annotations[{annotation}]" in str(err.value)
    assert kind in str(err.value)
    with pytest.raises(NotFound):
        await api.kube.get(resource, "bad", namespace)


async def test_queue_label_of_a_running_statefulset_cannot_change(api: Api, namespace: str) -> None:
    await _queues(api, namespace, "2")
    await api.kube.create(STATEFULSETS, statefulset("keep", namespace, "lq", 1), namespace=namespace)
    await _admitted_slice(api, namespace, "keep", 1)

    async def ready() -> bool | None:
        got = await api.kube.get(STATEFULSETS, "keep", namespace)
        return True if (got.get("status") or {}).get("readyReplicas") else None

    await eventually(ready, within=60, what="a ready replica")
    with pytest.raises(KubeError) as err:
        await api.kube.patch(
            STATEFULSETS, "keep", {"metadata": {"labels": {c.QUEUE_NAME_LABEL: "other"}}},
            namespace=namespace,
        )
    assert f"metadata.labels[{c.QUEUE_NAME_LABEL}]" in str(err.value)
    # Nothing admitted is lost.
    await _admitted_slice(api, namespace, "keep", 1)
    await api.kube.delete(STATEFULSETS, "keep", namespace=namespace)


# -- the samples ----------------------------------------------------------------------------------


def test_samples_run_under_kqueue(cluster: LocalCluster, kqueue: PodsKqueue) -> None:
    """config/samples/statefulset.yaml and deployment.yaml, with the setup samples: admitted and
    running where their comments say."""
    setup = ["flavors.yaml", "priority-classes.yaml", "cohort.yaml", "local-queues.yaml"]
    apps = ["statefulset.yaml", "deployment.yaml"]
    try:
        for name in setup + apps:
            cluster.kubectl("apply", "-f", str(SAMPLES / name))
        want = {"app=db": 2, "app=web": 3}
        deadline = time.monotonic() + 90
        while True:
            ok = True
            for selector, n in want.items():
                out = cluster.kubectl("get", "pods", "-n", "team-a", "-l", selector, "-o", "yaml").stdout
                pods = [p for p in yaml.safe_load(out)["items"] if not p["metadata"].get("deletionTimestamp")]
                running = [
                    p for p in pods
                    if p["status"].get("phase") == "Running" and not gated(p) and p["spec"].get("nodeName")
                ]
                ok = ok and len(running) == n
            if ok:
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    "samples not running: " + cluster.kubectl("get", "pods,workloads", "-n", "team-a").stdout
                )
            time.sleep(1)
        workloads = yaml.safe_load(
            cluster.kubectl("get", "workloads.kqueue.io", "-n", "team-a", "-o", "yaml").stdout
        )["items"]
        kinds = sorted(r["kind"] for wl in workloads for r in wl["metadata"]["ownerReferences"])
        assert kinds == ["Pod", "Pod", "Pod", "StatefulSet"]
        assert all(is_true(wl, c.ADMITTED) for wl in workloads)
    finally:
        for name in reversed(apps):
            cluster.kubectl("delete", "-f", str(SAMPLES / name), "--ignore-not-found", "--timeout=60s", check=False)
        _drop_finalizers(cluster, "team-a")
        for name in reversed(setup):
            cluster.kubectl("delete", "-f", str(SAMPLES / name), "--ignore-not-found", "--timeout=60s", check=False)


def _drop_finalizers(cluster: LocalCluster, namespace: str) -> None:
    res = cluster.kubectl("get", "pods", "-n", namespace, "-o", "name", check=False)
    for name in res.stdout.split():
        cluster.kubectl(
            "patch", name, "-n", namespace, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
            check=False,
        )


