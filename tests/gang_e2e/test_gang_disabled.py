"""``gangScheduling: Disabled`` on a cluster that serves the API: today's behaviour, said so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    Api,
    cluster_queue,
    eventually,
    flavor,
    job,
    local_queue,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue, running_pods
from tests.fixtures.cluster import PODGROUPS

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    yield from configured_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-gang-off")),
        {"gangScheduling": "Disabled"},
    )


async def test_disabled_places_pods_one_by_one(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    assert "gang scheduling: off (gangScheduling: Disabled)" in kqueue.log_path.read_text()
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("lq", namespace, cq))
    await api.apply(job("plain", namespace, "lq", count=2))
    pods = await eventually(lambda: running_pods(api, namespace, "plain", 2), what="2 pods Running")
    assert not any("schedulingGroup" in p["spec"] for p in pods)
    assert await api.kube.list(PODGROUPS, namespace=namespace) == []
