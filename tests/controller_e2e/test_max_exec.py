"""Maximum execution time on the real control plane: a Job labelled
kqueue.io/max-exec-time-seconds is deactivated once admitted that long; an invalid label is
refused by the Job webhook, naming it."""

from __future__ import annotations

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import WORKLOADS
from tests.controller_e2e.harness import (
    Api,
    cluster_queue,
    condition,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    unique,
)

pytestmark = pytest.mark.cluster

MAX_S = 3


async def _queues(api: Api, namespace: str) -> None:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "4")]))
    await api.apply(local_queue("lq", namespace, cq))


async def test_a_job_past_its_maximum_execution_time_is_deactivated(
    api: Api, namespace: str
) -> None:
    await _queues(api, namespace)
    await api.apply(
        job("limited", namespace, "lq", labels={c.MAX_EXEC_TIME_SECONDS_LABEL: str(MAX_S)})
    )
    wl = await api.wait_workload(
        namespace, "limited", lambda w: is_true(w, c.ADMITTED), what="admitted", within=30
    )
    assert wl["spec"]["maximumExecutionTimeSeconds"] == MAX_S

    wl = await api.wait_workload(
        namespace,
        "limited",
        lambda w: w["spec"].get("active") is False
        and (condition(w, c.EVICTED) or {}).get("reason") == c.EVICTED_BY_MAXIMUM_EXECUTION_TIME,
        what="deactivated for its maximum execution time",
        within=MAX_S + 20,
    )
    evicted = condition(wl, c.EVICTED)
    assert evicted is not None
    assert f"exceeded its maximum execution time of {MAX_S}s" in evicted["message"]
    target = condition(wl, c.DEACTIVATION_TARGET)
    assert target is not None and target["status"] == "True"
    assert target["reason"] == c.MAXIMUM_EXECUTION_TIME_EXCEEDED

    async def released() -> bool | None:
        got = await api.kube.get(WORKLOADS, wl["metadata"]["name"], namespace)
        return True if got["status"].get("admission") is None else None

    await eventually(released, what="the deactivated workload's quota released", within=30)
    got = await api.kube.get(WORKLOADS, wl["metadata"]["name"], namespace)
    assert not is_true(got, c.ADMITTED)
    assert got["spec"]["active"] is False
    events = {e["reason"] for e in await api.events_for(namespace, wl["metadata"]["name"])}
    assert c.MAXIMUM_EXECUTION_TIME_EXCEEDED in events


async def test_an_invalid_label_is_refused_naming_it(api: Api, namespace: str) -> None:
    await _queues(api, namespace)
    with pytest.raises(KubeError) as info:
        await api.apply(job("typo", namespace, "lq", labels={c.MAX_EXEC_TIME_SECONDS_LABEL: "0"}))
    assert info.value.status == 422
    assert f"metadata.labels[{c.MAX_EXEC_TIME_SECONDS_LABEL}]" in info.value.message
    assert "should be greater than 0, got 0" in info.value.message
