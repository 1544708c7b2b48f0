"""waitForPodsReady with the hand-off: a gang kube-scheduler cannot place is evicted by the
timeout as before; its PodGroup goes with the eviction and no pod was ever bound."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.controller.kube import NotFound
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, condition, eventually, is_true
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
