"""Without the gang-scheduling API (a stock cluster: feature gates off), the fragmentation
case binds part of the gang: the behaviour the hand-off to kube-scheduler removes (compare
tests/gang_e2e/test_gang.py). Asserted, so the difference stays visible."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, KqueueProcess, condition, eventually, is_true, stays
from tests.gang_e2e.fragment import GANG_SIZE, bound, fragmented, free_blocker, submit_gang

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


async def test_discovery_logs_that_gang_scheduling_is_off(kqueue: KqueueProcess) -> None:
    log = kqueue.log_path.read_text()
    assert "gang scheduling: off (gangScheduling: Auto, but the cluster does not serve" in log


async def test_fragmented_gang_is_bound_in_part_without_the_api(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    async with fragmented(cluster, api, namespace) as frag:
        await submit_gang(api, frag)
        await api.wait_workload(
            namespace, frag.job_name, lambda w: is_true(w, c.ADMITTED), what="Admitted"
        )

        async def three_bound() -> list[Obj] | None:
            pods = await api.pods_of(namespace, frag.job_name)
            return pods if len(pods) == GANG_SIZE and len(bound(pods)) == GANG_SIZE - 1 else None

        pods = await eventually(three_bound, what=f"{GANG_SIZE - 1} of {GANG_SIZE} pods bound")
        assert not any("schedulingGroup" in p["spec"] for p in pods)

        async def still_three() -> bool:
            return len(bound(await api.pods_of(namespace, frag.job_name))) == GANG_SIZE - 1

        # Three pods hold their nodes (and the quota) while the fourth waits.
        await stays(still_three, for_s=3, what=f"{GANG_SIZE - 1} pods bound, one pending")
        wl = await api.workload_of(namespace, frag.job_name)
        assert wl is not None and condition(wl, gang.POD_GROUP_SCHEDULED) is None

        await free_blocker(api, frag)

        async def all_bound() -> bool:
            return len(bound(await api.pods_of(namespace, frag.job_name))) == GANG_SIZE

        await eventually(all_bound, what="the last pod bound once a cpu is free")
