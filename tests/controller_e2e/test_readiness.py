"""waitForPodsReady on the real control plane: PodsReady, timeouts, backoff, deactivation.

Pods that never become ready: a node selector no node matches keeps them Pending (kwok only
runs pods that kube-scheduler bound to one of its nodes).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1 import parse_time
from kqueue.controller.resources import WORKLOADS
from kqueue.localcluster.cluster import LocalCluster
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
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]

TIMEOUT_S = 3
# Long enough to see the released workload wait out its backoff (Requeued=False) by polling.
BACKOFF_BASE_S = 4
LIMIT = 2


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    yield from configured_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-ready")),
        {
            "waitForPodsReady": {
                "enable": True,
                "timeout": f"{TIMEOUT_S}s",
                "blockAdmission": False,
                "requeuingStrategy": {
                    "backoffBaseSeconds": BACKOFF_BASE_S,
                    "backoffMaxSeconds": 10,
                    "backoffLimitCount": LIMIT,
                },
            }
        },
    )


async def _queues(api: Api, namespace: str) -> None:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "4")]))
    await api.apply(local_queue("lq", namespace, cq))


async def test_ready_pods_set_pods_ready(api: Api, namespace: str) -> None:
    await _queues(api, namespace)
    await api.apply(job("fine", namespace, "lq", count=2))
    wl = await api.wait_workload(
        namespace, "fine", lambda w: is_true(w, c.PODS_READY), what="PodsReady=True", within=30
    )
    assert is_true(wl, c.ADMITTED)
    assert condition(wl, c.PODS_READY)["reason"] == "PodsReady"  # type: ignore[index]


async def test_timeout_evicts_requeues_with_backoff_then_deactivates(
    api: Api, namespace: str
) -> None:
    await _queues(api, namespace)
    stuck = job("stuck", namespace, "lq", count=1)
    stuck["spec"]["template"]["spec"]["nodeSelector"] = {"e2e.kqueue.io/no-such-node": "true"}
    await api.apply(stuck)

    # Admitted, but the pod never becomes ready: PodsReady=False names the count.
    wl = await api.wait_workload(
        namespace,
        "stuck",
        lambda w: is_true(w, c.ADMITTED)
        and (condition(w, c.PODS_READY) or {}).get("status") == "False",
        what="Admitted with PodsReady=False",
        within=20,
    )
    first = condition(wl, c.PODS_READY)
    assert first is not None and first["reason"] == "WaitForStart" and "0 of 1" in first["message"]

    # First timeout: evicted with PodsReadyTimeout, requeueState count 1, requeued after the
    # base backoff.
    wl = await api.wait_workload(
        namespace,
        "stuck",
        lambda w: ((w.get("status") or {}).get("requeueState") or {}).get("count") == 1,
        what="requeueState.count == 1",
        within=TIMEOUT_S + 15,
    )
    state = wl["status"]["requeueState"]
    evicted = condition(wl, c.EVICTED)
    assert evicted is not None and evicted["reason"] == c.EVICTED_BY_PODS_READY_TIMEOUT
    backoff = parse_time(state["requeueAt"]) - parse_time(evicted["lastTransitionTime"])
    assert timedelta(0) <= backoff <= timedelta(seconds=BACKOFF_BASE_S + 1)

    requeue_at = parse_time(state["requeueAt"])

    # Released while the backoff runs: not requeued yet (Kueue's Requeued=False).
    def waiting(w: Obj) -> bool:
        cond = condition(w, c.REQUEUED) or {}
        return (w.get("status") or {}).get("admission") is None and (
            cond.get("status"), cond.get("reason")
        ) == ("False", c.EVICTED_BY_PODS_READY_TIMEOUT)

    wl = await api.wait_workload(
        namespace, "stuck", waiting, what="released with Requeued=False", within=BACKOFF_BASE_S
    )
    assert not is_true(wl, c.ADMITTED)

    # Re-admitted after the backoff, as a new attempt, and Requeued=True says the backoff ended.
    wl = await api.wait_workload(
        namespace,
        "stuck",
        lambda w: is_true(w, c.ADMITTED)
        and not is_true(w, c.EVICTED)
        and ((w.get("status") or {}).get("requeueState") or {}).get("count") == 1,
        what="admitted again after the backoff",
        within=BACKOFF_BASE_S + 20,
    )
    requeued = condition(wl, c.REQUEUED)
    assert requeued is not None and requeued["status"] == "True"
    assert requeued["reason"] == "BackoffFinished"
    assert parse_time(requeued["lastTransitionTime"]) >= requeue_at - timedelta(seconds=1)
    assert wl["status"]["requeueState"].get("requeueAt") is None
    events = {e["reason"] for e in await api.events_for(namespace, wl["metadata"]["name"])}
    assert c.EVICTED in events

    # Past the limit: deactivated (spec.active false, DeactivationTarget, Evicted/Deactivated).
    wl = await api.wait_workload(
        namespace,
        "stuck",
        lambda w: w["spec"].get("active") is False
        and (condition(w, c.EVICTED) or {}).get("reason") == c.EVICTED_BY_DEACTIVATION,
        what="deactivated after the requeue limit",
        within=3 * TIMEOUT_S + 4 * BACKOFF_BASE_S + 20,
    )
    assert wl["status"]["requeueState"]["count"] == LIMIT
    assert is_true(wl, c.DEACTIVATION_TARGET)

    async def released() -> Obj | None:
        got = await api.kube.get(WORKLOADS, wl["metadata"]["name"], namespace)
        return got if got["status"].get("admission") is None else None


    await eventually(released, what="the deactivated workload's quota released", within=20)
