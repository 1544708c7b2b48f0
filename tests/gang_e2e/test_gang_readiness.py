"""waitForPodsReady with the hand-off: a gang kube-scheduler cannot place is evicted by the
timeout as before; its PodGroup goes with the eviction and no pod was ever bound."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.controller.gate import is_gated
from kqueue.controller.kube import NotFound
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, condition, eventually, is_true, job
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.fixtures.cluster import PODGROUPS
from tests.gang_e2e.fragment import bound, fragmented, submit_gang

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]

TIMEOUT_S = 4


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    yield from configured_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-gang-ready")),
        {
            "waitForPodsReady": {
                "enable": True,
                "timeout": f"{TIMEOUT_S}s",
                "blockAdmission": False,
                "requeuingStrategy": {"backoffBaseSeconds": 30, "backoffMaxSeconds": 60},
            }
        },
    )


async def test_unplaceable_gang_is_evicted_by_the_timeout_never_half_bound(
    api: Api, kqueue: ConfiguredKqueue, cluster: LocalCluster, namespace: str
) -> None:
    async with fragmented(cluster, api, namespace) as frag:
        await submit_gang(api, frag)
        wl = await api.wait_workload(
            namespace,
            frag.job_name,
            lambda w: (condition(w, gang.POD_GROUP_SCHEDULED) or {}).get("reason") == "Unschedulable",
            what=f"{gang.POD_GROUP_SCHEDULED}=False (Unschedulable)",
        )
        job_uid = (await api.job(namespace, frag.job_name))["metadata"]["uid"]
        group = gang.group_name("Job", frag.job_name, job_uid)
        first = await api.kube.get(PODGROUPS, group, namespace)
        seen: set[int] = set()

        async def evicted() -> Obj | None:
            seen.add(len(bound(await api.pods_of(namespace, frag.job_name))))
            w = await api.workload_of(namespace, frag.job_name)
            return w if w is not None and is_true(w, c.EVICTED) else None

        out = await eventually(evicted, what="Evicted by the PodsReady timeout", within=60)
        assert condition(out, c.EVICTED)["reason"] == c.EVICTED_BY_PODS_READY_TIMEOUT  # type: ignore[index]
        assert out["metadata"]["uid"] == wl["metadata"]["uid"]

        async def group_gone() -> bool:
            seen.add(len(bound(await api.pods_of(namespace, frag.job_name))))
            try:
                pg = await api.kube.get(PODGROUPS, group, namespace)
            except NotFound:
                return True
            return bool(pg["metadata"]["uid"] != first["metadata"]["uid"])

        await eventually(group_gone, what=f"PodGroup {group} deleted with the eviction")
        assert seen == {0}, f"pods of the gang were bound: counts seen {sorted(seen)}"


async def test_gang_held_by_the_node_fit_guard_is_evicted_by_the_timeout_and_requeued(
    api: Api, kqueue: ConfiguredKqueue, cluster: LocalCluster, namespace: str
) -> None:
    """The timeout counts from admission, held or not (docs/concepts.md, "Node-fit guard"):
    the held gang is evicted and requeued, its pods never released nor bound."""
    async with fragmented(
        cluster, api, namespace, nodes=2, node_cpu="1", blocker=False, quota=3,
        node_fit_guard=None,
    ) as frag:
        await api.apply(job(frag.job_name, namespace, "lq", count=3, cpu="1"))
        held = await api.wait_workload(
            namespace, frag.job_name,
            lambda w: (condition(w, c.NODES_FIT) or {}).get("status") == "False",
            what=f"{c.NODES_FIT}=False",
        )
        seen: set[tuple[int, bool]] = set()

        async def requeued() -> Obj | None:
            pods = await api.pods_of(namespace, frag.job_name)
            seen.add((len(bound(pods)), all(is_gated(p) for p in pods)))
            w = await api.workload_of(namespace, frag.job_name)
            cond = condition(w, c.REQUEUED) if w is not None else None
            return w if cond is not None and cond["reason"] == c.EVICTED_BY_PODS_READY_TIMEOUT else None

        out = await eventually(requeued, what="evicted by the PodsReady timeout and requeued")
        assert condition(out, c.EVICTED)["reason"] == c.EVICTED_BY_PODS_READY_TIMEOUT  # type: ignore[index]
        assert out["metadata"]["uid"] == held["metadata"]["uid"]
        assert not out["status"].get("admission"), "the quota is released with the eviction"
        assert out["status"]["requeueState"]["count"] == 1
        assert seen == {(0, True)}, f"pods released or bound while held: {sorted(seen)}"
        assert not await api.kube.list(PODGROUPS, namespace=namespace)
