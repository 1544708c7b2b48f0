"""Workloads whose containers could never run stay pending as Misconfigured, end to end.

A container requesting more than its limits, or outside a LimitRange of its namespace, would
have its pods refused: kqueue keeps its Workload pending (QuotaReserved=False, reason
Misconfigured, the pod set and container named) instead of admitting it, and admits it once
the cause is gone. Other Jobs of the same queue are not held back.
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import JOBS, LIMIT_RANGES, WORKLOADS
from tests.controller_e2e.harness import (
    Api,
    cluster_queue,
    condition,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    pending_reason,
    unique,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


def limit_range(name: str, namespace: str, **container: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"limits": [{"type": "Container", **container}]},
    }


def with_resources(obj: Obj, requests: dict[str, str], limits: dict[str, str] | None) -> Obj:
    resources: Obj = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = resources
    return obj


async def _queue(api: Api, namespace: str) -> str:
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "8")]))
    await api.apply(local_queue("q", namespace, cq))
    return cq


def _misconfigured(wl: Obj) -> bool:
    return pending_reason(wl) == c.MISCONFIGURED


async def test_limit_range_max_holds_the_job_until_the_limit_range_goes(
    api: Api, namespace: str
) -> None:
    await _queue(api, namespace)
    await api.kube.create(
        LIMIT_RANGES, limit_range("max-cpu", namespace, max={"cpu": "2"}), namespace=namespace
    )
    await api.apply(with_resources(job("big", namespace, "q"), {"cpu": "3"}, {"cpu": "3"}))
    big = await api.wait_workload(namespace, "big", _misconfigured, what="Misconfigured")
    cond = condition(big, c.QUOTA_RESERVED)
    assert cond is not None
    assert cond["message"] == (
        "resources didn't satisfy LimitRange constraints: pod set main, container main: "
        "requests must not be above the limitRange max (cpu: 3 > 2)"
    )
    # A Job within the LimitRange, in the same queue, is admitted meanwhile.
    await api.apply(job("small", namespace, "q", cpu="1"))
    await api.wait_workload(namespace, "small", lambda w: is_true(w, c.ADMITTED), what="admitted")
    big = await api.wait_workload(namespace, "big", _misconfigured, what="still Misconfigured")
    assert not is_true(big, c.QUOTA_RESERVED)

    await api.kube.delete(LIMIT_RANGES, "max-cpu", namespace=namespace)
    await api.wait_workload(namespace, "big", lambda w: is_true(w, c.ADMITTED), what="admitted")

    async def started() -> bool:
        return (await api.kube.get(JOBS, "big", namespace))["spec"]["suspend"] is False

    await eventually(started, what="Job big unsuspended")


async def test_job_whose_request_exceeds_its_limit_waits_until_fixed(
    api: Api, namespace: str
) -> None:
    await _queue(api, namespace)
    # The API server refuses a Job whose template asks for more than its limit...
    with pytest.raises(KubeError) as refused:
        await api.apply(with_resources(job("skewed", namespace, "q"), {"cpu": "2"}, {"cpu": "1"}))
    assert refused.value.status == 422
    # ...but a LimitRange's default limit applies to the pods only: a Job asking for 2 cpu
    # without a limit gets pods limited to 1 cpu, which would be refused. Kueue (and kqueue)
    # apply the default first and hold the Job.
    await api.kube.create(
        LIMIT_RANGES, limit_range("defaults", namespace, default={"cpu": "1"}), namespace=namespace
    )
    await api.apply(with_resources(job("unbounded", namespace, "q"), {"cpu": "2"}, None))
    wl = await api.wait_workload(namespace, "unbounded", _misconfigured, what="Misconfigured")
    cond = condition(wl, c.QUOTA_RESERVED)
    assert cond is not None
    assert cond["message"] == (
        "resources validation failed: pod set main, container main: requests must not exceed "
        "its limits (cpu: 2 > 1)"
    )
    await api.apply(job("fine", namespace, "q", cpu="1"))
    await api.wait_workload(namespace, "fine", lambda w: is_true(w, c.ADMITTED), what="admitted")

    # Fixed by raising the namespace's default limit.
    await api.kube.patch(
        LIMIT_RANGES,
        "defaults",
        {"spec": {"limits": [{"type": "Container", "default": {"cpu": "4"}}]}},
        namespace=namespace,
    )
    await api.wait_workload(
        namespace, "unbounded", lambda w: is_true(w, c.ADMITTED), what="admitted"
    )


async def test_workload_whose_request_exceeds_its_limit_waits_until_fixed(
    api: Api, namespace: str
) -> None:
    await _queue(api, namespace)
    container = {
        "name": "train",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
    }
    await api.kube.create(
        WORKLOADS,
        {
            "apiVersion": c.API_VERSION,
            "kind": "Workload",
            "metadata": {"name": "skewed", "namespace": namespace},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
                ],
            },
        },
        namespace=namespace,
    )

    async def reason(pred: Any) -> Obj | None:
        wl = await api.kube.get(WORKLOADS, "skewed", namespace)
        return wl if pred(wl) else None

    wl = await eventually(lambda: reason(_misconfigured), what="Workload skewed Misconfigured")
    cond = condition(wl, c.QUOTA_RESERVED)
    assert cond is not None
    assert cond["message"] == (
        "resources validation failed: pod set main, container train: requests must not exceed "
        "its limits (cpu: 2 > 1)"
    )
    # While it waits its pod sets may change: raising the limit fixes it.
    container["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}
    await api.kube.patch(
        WORKLOADS,
        "skewed",
        {"spec": {"podSets": [
            {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
        ]}},
        namespace=namespace,
    )
    await eventually(
        lambda: reason(lambda w: is_true(w, c.QUOTA_RESERVED)), what="Workload skewed admitted"
    )
