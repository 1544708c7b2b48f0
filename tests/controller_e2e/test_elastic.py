"""Elastic Jobs (WorkloadSlices) on the real control plane: scale up by replacement, scale down
in place, running pods never disturbed."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import JOBS
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    condition,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    stays,
    unique,
)
from tests.controller_e2e.support_extra import (
    gated,
    running_pods,
    slices_of,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


def elastic_job(name: str, namespace: str, queue: str, count: int) -> Obj:
    obj = job(name, namespace, queue, count=count, annotations={c.ELASTIC_JOB_ANNOTATION: "true"})
    # No completions: parallelism alone sizes the Job (a work queue), so it can be scaled.
    del obj["spec"]["completions"]
    return obj


async def _scale(api: Api, namespace: str, name: str, parallelism: int) -> None:
    await api.kube.patch(JOBS, name, {"spec": {"parallelism": parallelism}}, namespace=namespace)


async def _admitted_slice(api: Api, namespace: str, name: str, count: int) -> Obj:
    async def probe() -> Obj | None:
        for wl in await slices_of(api, namespace, name):
            if is_true(wl, c.FINISHED) or not is_true(wl, c.ADMITTED):
                continue
            [psa] = wl["status"]["admission"]["podSetAssignments"]
            if psa["count"] == count:
                return wl
        return None

    return await eventually(probe, what=f"an admitted slice of {name} with {count} pods")


async def test_scale_up_replaces_the_slice(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "4")]))
    await api.apply(local_queue("lq", namespace, cq))
    await api.apply(elastic_job("grow", namespace, "lq", 2))

    first = await _admitted_slice(api, namespace, "grow", 2)
    pods = await eventually(lambda: running_pods(api, namespace, "grow", 2), what="2 pods Running")
    original = {p["metadata"]["uid"]: p["metadata"]["resourceVersion"] for p in pods}

    await _scale(api, namespace, "grow", 3)
    second = await _admitted_slice(api, namespace, "grow", 3)
    assert second["metadata"]["name"] != first["metadata"]["name"]
    first_key = f"{namespace}/{first['metadata']['name']}"
    assert second["metadata"]["annotations"][c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION] == first_key
    assert second["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == od

    async def old_finished() -> Obj | None:
        for wl in await slices_of(api, namespace, "grow"):
            if wl["metadata"]["name"] == first["metadata"]["name"] and is_true(wl, c.FINISHED):
                return wl
        return None

    old = await eventually(old_finished, what="the old slice Finished")
    assert condition(old, c.FINISHED)["reason"] == c.WORKLOAD_SLICE_REPLACED  # type: ignore[index]

    pods = await eventually(lambda: running_pods(api, namespace, "grow", 3), what="3 pods Running")
    uids = {p["metadata"]["uid"] for p in pods}
    # The running pods are the same objects, never deleted, never gated again.
    assert set(original) <= uids
    for p in pods:
        assert not gated(p)

    async def metric() -> bool:
        return kqueue.metric("kqueue_replaced_workload_slices_total", cluster_queue=cq) == 1

    await eventually(metric, what="kqueue_replaced_workload_slices_total == 1")


async def test_scale_up_waits_for_quota_then_scale_down_frees_it(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("lq", namespace, cq))
    await api.apply(elastic_job("flex", namespace, "lq", 2))
    first = await _admitted_slice(api, namespace, "flex", 2)
    await eventually(lambda: running_pods(api, namespace, "flex", 2), what="2 pods Running")

    # No room for a third pod: the replacement pends, naming the flavor; the new pod stays gated.
    await _scale(api, namespace, "flex", 3)

    async def pending_slice() -> Obj | None:
        for wl in await slices_of(api, namespace, "flex"):
            cond = condition(wl, c.QUOTA_RESERVED)
            if (
                wl["metadata"].get("annotations", {}).get(c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION)
                and cond is not None
                and cond["status"] == "False"
                and od in cond.get("message", "")
            ):
                return wl
        return None

    pending = await eventually(pending_slice, what="a pending slice whose message names the flavor")
    assert "cpu" in condition(pending, c.QUOTA_RESERVED)["message"]  # type: ignore[index]

    async def third_pod_gated() -> bool:
        pods = [p for p in await api.pods_of(namespace, "flex") if not p["metadata"].get("deletionTimestamp")]
        return len(pods) == 3 and sum(1 for p in pods if gated(p)) == 1

    await eventually(third_pod_gated, what="a third pod, gated")
    await stays(third_pod_gated, for_s=2, what="the third pod gated while the slice pends")
    assert any(
        w["metadata"]["name"] == first["metadata"]["name"] and is_true(w, c.ADMITTED)
        for w in await slices_of(api, namespace, "flex")
    )

    # Scale down to 1: the pending slice goes, the admitted one shrinks in place.
    await _scale(api, namespace, "flex", 1)
    shrunk = await _admitted_slice(api, namespace, "flex", 1)
    assert shrunk["metadata"]["name"] == first["metadata"]["name"]
    assert shrunk["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"] == "1"

    async def no_pending_slice() -> bool:
        wls = await slices_of(api, namespace, "flex")
        return len([w for w in wls if not is_true(w, c.FINISHED)]) == 1

    await eventually(no_pending_slice, what="the pending slice removed")

    # The freed cpu admits another Job.
    await api.apply(job("other", namespace, "lq", count=1))
    await api.wait_workload(namespace, "other", lambda w: is_true(w, c.ADMITTED), what="Admitted")


async def test_elastic_with_partial_admission_is_rejected(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    obj = elastic_job("both", namespace, "lq", 3)
    obj["metadata"]["annotations"][c.JOB_MIN_PARALLELISM_ANNOTATION] = "1"
    with pytest.raises(KubeError) as err:
        await api.apply(obj)
    assert "elastic" in err.value.message and c.JOB_MIN_PARALLELISM_ANNOTATION in err.value.message
