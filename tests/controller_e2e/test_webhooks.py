"""Webhook rejections name the field; partial admission through the Job annotation."""

from __future__ import annotations

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import CLUSTER_QUEUES, JOBS, LOCAL_QUEUES
from tests.controller_e2e.harness import (
    Api,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    unique,
)

pytestmark = pytest.mark.cluster

MIN = c.JOB_MIN_PARALLELISM_ANNOTATION


async def _rejected(api: Api, obj: dict[str, object]) -> KubeError:
    with pytest.raises(KubeError) as info:
        await api.apply(obj)  # type: ignore[arg-type]
    return info.value


async def test_job_rejections(api: Api, namespace: str) -> None:
    err = await _rejected(api, job("bad", namespace, "q", count=3, annotations={MIN: "abc"}))
    assert err.status == 422
    assert f"metadata.annotations[{MIN}]" in err.message and "integer" in err.message

    err = await _rejected(api, job("big", namespace, "q", count=3, annotations={MIN: "3"}))
    assert f"metadata.annotations[{MIN}]" in err.message and "between 0 and 2" in err.message

    err = await _rejected(
        api,
        job(
            "elastic", namespace, "q", count=3,
            annotations={MIN: "1", c.ELASTIC_JOB_ANNOTATION: "true"},
        ),
    )
    assert f"metadata.annotations[{MIN}]" in err.message and "elastic" in err.message

    # A queued Job waits suspended: its queue may still change (the Workload follows it).
    await api.apply(job("waiting", namespace, "q"))
    moved = await api.kube.patch(
        JOBS, "waiting", {"metadata": {"labels": {c.QUEUE_NAME_LABEL: "other"}}},
        namespace=namespace,
    )
    assert moved["metadata"]["labels"][c.QUEUE_NAME_LABEL] == "other"

    # The queue cannot change under a running Job.
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("runs", namespace, cq))
    await api.apply(job("ok", namespace, "runs"))

    async def running() -> bool:
        return (await api.job(namespace, "ok"))["spec"].get("suspend") is False

    await eventually(running, what="Job ok admitted and resumed")
    with pytest.raises(KubeError) as info:
        await api.kube.patch(
            JOBS, "ok", {"metadata": {"labels": {c.QUEUE_NAME_LABEL: "other"}}},
            namespace=namespace,
        )
    assert f"metadata.labels[{c.QUEUE_NAME_LABEL}]" in info.value.message


async def test_elastic_and_partial_admission_on_update(api: Api, namespace: str) -> None:
    # Adding the elastic annotation to a running Job that already allows partial admission is
    # refused as at creation, naming both annotations.
    await api.apply(job("partial", namespace, "q", count=3, annotations={MIN: "1"}))
    with pytest.raises(KubeError) as info:
        await api.kube.patch(
            JOBS, "partial", {"metadata": {"annotations": {c.ELASTIC_JOB_ANNOTATION: "true"}}},
            namespace=namespace,
        )
    assert info.value.status == 422
    assert f"metadata.annotations[{MIN}]" in info.value.message
    assert c.ELASTIC_JOB_ANNOTATION in info.value.message
    # An elastic Job stays elastic: removing the annotation is refused too.
    await api.apply(
        job("elastic", namespace, "q", count=2, annotations={c.ELASTIC_JOB_ANNOTATION: "true"})
    )
    with pytest.raises(KubeError) as info:
        await api.kube.patch(
            JOBS, "elastic", {"metadata": {"annotations": {c.ELASTIC_JOB_ANNOTATION: None}}},
            namespace=namespace,
        )
    assert f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]" in info.value.message
    assert "immutable" in info.value.message
    current = await api.job(namespace, "elastic")
    assert current["metadata"]["annotations"][c.ELASTIC_JOB_ANNOTATION] == "true"


async def test_kqueue_object_rejections(api: Api, namespace: str) -> None:
    a, b, cq = unique("a"), unique("b"), unique("cq")
    bad = cluster_queue(cq, [(a, "1")])
    bad["spec"]["resourceGroups"].append(  # type: ignore[index]
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": a, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]}],
        }
    )
    err = await _rejected(api, bad)
    assert err.status == 422
    assert "spec.resourceGroups[1].flavors[0].name" in err.message
    assert "duplicate flavor" in err.message

    await api.apply(cluster_queue(cq, [(a, "1")]))
    await api.apply(cluster_queue(b, [(a, "1")]))
    await api.apply(local_queue("q", namespace, cq))
    with pytest.raises(KubeError) as info:
        await api.kube.patch(
            LOCAL_QUEUES, "q", {"spec": {"clusterQueue": b}}, namespace=namespace
        )
    assert "spec.clusterQueue" in info.value.message and "immutable" in info.value.message


async def test_partial_admission(api: Api, namespace: str) -> None:
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("partial", namespace, "q", count=4, cpu="1", annotations={MIN: "2"}))
    wl = await api.wait_workload(
        namespace, "partial", lambda w: is_true(w, c.ADMITTED), what="partially admitted"
    )
    [psa] = wl["status"]["admission"]["podSetAssignments"]
    assert psa["count"] == 2 and psa["resourceUsage"]["cpu"] == "2"

    async def scaled() -> bool:
        j = await api.job(namespace, "partial")
        pods = await api.pods_of(namespace, "partial")
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return j["spec"]["parallelism"] == 2 and len(running) == 2

    await eventually(scaled, what="Job parallelism 2 with 2 running pods")
    cq_obj = await api.kube.get(CLUSTER_QUEUES, cq)
    assert cq_obj["status"]["admittedWorkloads"] == 1
