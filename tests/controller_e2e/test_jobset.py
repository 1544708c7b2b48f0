"""JobSets under kqueue, with the real JobSet operator on the real control plane: the whole
life, a JobSet preempted whole by a higher-priority Job and resumed, a non-preemptible JobSet
protected, and Kueue-only annotations refused. MPIJobs: test_mpijob.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import PODS, Resource
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION, INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
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
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets")
FRAMEWORKS = ["batch/job", "pod", "jobset.x-k8s.io/jobset"]


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster,
    jobset_operator: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-jobset"))
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": FRAMEWORKS}})


def pod_template(cpu: str, complete_after: str | None) -> Obj:
    annotations = {COMPLETE_AFTER_ANNOTATION: complete_after} if complete_after else {}
    return {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                pause_container(cpu)
            ],
        },
    }


def jobset(
    name: str,
    namespace: str,
    queue: str,
    *,
    workers: int = 2,
    complete_after: str | None = "5s",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    def rjob(rname: str, parallelism: int) -> Obj:
        return {
            "name": rname,
            "replicas": 1,
            "template": {
                "spec": {
                    "parallelism": parallelism,
                    "completions": parallelism,
                    "backoffLimit": 0,
                    "template": pod_template("1", complete_after),
                }
            },
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {c.QUEUE_NAME_LABEL: queue, **(labels or {})},
            "annotations": annotations or {},
        },
        "spec": {"replicatedJobs": [rjob("leader", 1), rjob("workers", workers)]},
    }


async def _setup(api: Api, namespace: str, cpu: str, *, preemption: Obj | None = None) -> str:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, cpu)], preemption=preemption))
    await api.apply(local_queue("q", namespace, cq))
    return cq


async def _wait_workload(api: Api, namespace: str, kind: str, name: str, pred: Any, what: str) -> Obj:
    async def probe() -> Obj | None:
        wl = await api.workload_of(namespace, name, kind=kind)
        return wl if wl is not None and pred(wl) else None

    return await eventually(probe, within=90, what=f"Workload of {kind} {name}: {what}")


async def _pods(api: Api, namespace: str, selector: str) -> list[Obj]:
    return [
        p
        for p in await api.kube.list(PODS, namespace=namespace, label_selector=selector)
        if not p["metadata"].get("deletionTimestamp")
    ]


async def test_jobset_full_life(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    await _setup(api, namespace, "4")
    created = await api.kube.create(JOBSETS, jobset("train", namespace, "q"), namespace=namespace)
    # Queued: suspended as kqueue's, every replicated Job's template gated.
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    for rjob in created["spec"]["replicatedJobs"]:
        gates = rjob["template"]["spec"]["template"]["spec"]["schedulingGates"]
        assert {"name": c.ADMISSION_GATE} in gates

    wl = await _wait_workload(
        api, namespace, "JobSet", "train", lambda w: is_true(w, c.ADMITTED), "admitted"
    )
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [
        ("leader", 1),
        ("workers", 2),
    ]
    selector = "jobset.sigs.k8s.io/jobset-name=train"

    async def bound() -> list[Obj] | None:
        pods = await _pods(api, namespace, selector)
        ok = len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)
        return pods if ok else None

    pods = await eventually(bound, within=90, what="the JobSet's 3 pods bound to kwok nodes")
    for pod in pods:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert not pod["spec"].get("schedulingGates")
    # Only the JobSet has a Workload: its Jobs are not queued on their own.
    from kqueue.controller.resources import WORKLOADS

    owners = {
        ref["kind"]
        for w in await api.kube.list(WORKLOADS, namespace=namespace)
        for ref in w["metadata"].get("ownerReferences") or []
    }
    assert owners == {"JobSet"}

    finished = await _wait_workload(
        api, namespace, "JobSet", "train", lambda w: is_true(w, c.FINISHED), "finished"
    )
    assert condition(finished, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]


async def test_jobset_preempted_whole_then_resumed(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    low, high = unique("low"), unique("high")
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await _setup(api, namespace, "3", preemption={"withinClusterQueue": "LowerPriority"})
    await api.kube.create(
        JOBSETS,
        jobset("victim", namespace, "q", complete_after=None, labels={c.PRIORITY_CLASS_LABEL: low}),
        namespace=namespace,
    )
    selector = "jobset.sigs.k8s.io/jobset-name=victim"

    async def running(n: int) -> bool:
        pods = await _pods(api, namespace, selector)
        return len(pods) == n and all(p["status"].get("phase") == "Running" for p in pods)

    await eventually(lambda: running(3), within=90, what="the victim JobSet's 3 pods Running")
    await api.apply(
        job("urgent", namespace, "q", cpu="2", complete_after="5s", labels={c.PRIORITY_CLASS_LABEL: high})
    )
    victim = await _wait_workload(
        api, namespace, "JobSet", "victim", lambda w: is_true(w, c.PREEMPTED), "Preempted"
    )
    assert condition(victim, c.PREEMPTED)["reason"] == c.IN_CLUSTER_QUEUE  # type: ignore[index]

    async def stopped() -> bool:
        js = await api.kube.get(JOBSETS, "victim", namespace)
        return js["spec"].get("suspend") is True and not await _pods(api, namespace, selector)

    # Whole: every pod of every replicated Job goes, never a part of the gang.
    await eventually(stopped, within=90, what="the victim JobSet suspended with no pods left")
    await api.wait_workload(namespace, "urgent", lambda w: is_true(w, c.FINISHED), what="finished", within=90)
    await _wait_workload(
        api, namespace, "JobSet", "victim", lambda w: is_true(w, c.ADMITTED), "re-admitted"
    )
    await eventually(lambda: running(3), within=90, what="the victim JobSet running again")


async def test_a_non_preemptible_jobset_is_protected(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    low, high = unique("low"), unique("high")
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await _setup(api, namespace, "3", preemption={"withinClusterQueue": "LowerPriority"})
    await api.kube.create(
        JOBSETS,
        jobset(
            "kept", namespace, "q", complete_after=None,
            labels={c.PRIORITY_CLASS_LABEL: low, c.PREEMPTIBILITY_LABEL: "non-preemptible"},
        ),
        namespace=namespace,
    )
    await _wait_workload(api, namespace, "JobSet", "kept", lambda w: is_true(w, c.ADMITTED), "admitted")
    await api.apply(job("urgent", namespace, "q", cpu="2", labels={c.PRIORITY_CLASS_LABEL: high}))
    await api.wait_workload(namespace, "urgent", lambda w: True, what="created")

    async def untouched() -> bool:
        wl = await api.workload_of(namespace, "kept", kind="JobSet")
        urgent = await api.workload_of(namespace, "urgent")
        return (
            wl is not None
            and is_true(wl, c.ADMITTED)
            and not is_true(wl, c.EVICTED)
            and urgent is not None
            and not is_true(urgent, c.QUOTA_RESERVED)
        )

    await stays(untouched, for_s=8, what="the non-preemptible JobSet kept, the urgent Job pending")


async def test_an_elastic_annotation_on_a_jobset_is_refused(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    with pytest.raises(KubeError) as info:
        await api.kube.create(
            JOBSETS,
            jobset("bad", namespace, "q", annotations={c.ELASTIC_JOB_ANNOTATION: "true"}),
            namespace=namespace,
        )
    assert info.value.status == 422
    assert f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]" in info.value.message
    assert "cannot be elastic" in info.value.message
