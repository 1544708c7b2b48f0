"""Fair sharing on the real control plane: with the Configuration's fairSharing on, a ClusterQueue
borrowing in its cohort shows its weighted share in status, the Cohort too, and both are
exported as metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import CLUSTER_QUEUES, COHORTS
from kqueue.localcluster.cluster import LocalCluster
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
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-fair"))
    yield from configured_kqueue(cluster, work_dir, {"fairSharing": {}})


async def test_borrowing_shows_as_weighted_share(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    od, cohort = unique("od"), unique("ai")
    team_a, team_b = unique("team-a"), unique("team-b")
    await api.apply(flavor(od, "on-demand"))
    await api.apply({
        "apiVersion": c.API_VERSION, "kind": "Cohort", "metadata": {"name": cohort}, "spec": {},
    })
    await api.apply(cluster_queue(team_a, [(od, "2")], cohort=cohort))
    await api.apply(cluster_queue(team_b, [(od, "6")], cohort=cohort))
    await api.apply(local_queue("a", namespace, team_a))
    # 4 cpu in team-a (nominal 2): it borrows 2 of the 8 the cohort can lend.
    await api.apply(job("big", namespace, "a", count=4, cpu="1"))
    await api.wait_workload(namespace, "big", lambda w: is_true(w, c.ADMITTED), what="admitted")

    async def shares() -> tuple[int, int] | None:
        a = await api.kube.get(CLUSTER_QUEUES, team_a)
        b = await api.kube.get(CLUSTER_QUEUES, team_b)
        sa = (a.get("status") or {}).get("fairSharing", {}).get("weightedShare")
        sb = (b.get("status") or {}).get("fairSharing", {}).get("weightedShare")
        # A status written before the admission's usage reached it says 0: wait for team-a's
        # share to move (on a loaded machine the first status seen can be that earlier one).
        return (sa, sb) if sa and sb is not None else None

    assert await eventually(shares, what="team-a's weightedShare above 0 in its status") == (250, 0)

    async def cohort_share() -> int | None:
        co = await api.kube.get(COHORTS, cohort)
        return (co.get("status") or {}).get("fairSharing", {}).get("weightedShare")

    assert await eventually(lambda: _not_none(cohort_share()), what="the Cohort's weightedShare") == (0,)
    assert kqueue.metric("kqueue_cluster_queue_weighted_share", cluster_queue=team_a) == 250.0
    assert 'kqueue_cohort_weighted_share{cohort="' + cohort + '"}' in kqueue.metrics()


async def _not_none(value: object) -> object:
    v = await value  # type: ignore[misc]
    return (v,) if v is not None else None
