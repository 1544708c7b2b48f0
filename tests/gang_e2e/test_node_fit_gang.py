"""The node-fit guard with kube-scheduler's gang gates on (this directory's cluster): the guard
still runs, so a gang the nodes cannot place is never handed to kube-scheduler
(tests/gang_e2e/node_fit_case.py)."""

from __future__ import annotations

from typing import Literal

import pytest

from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, KqueueProcess
from tests.gang_e2e.node_fit_case import held_then_released

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("room_from", ["node", "pod"])
async def test_gang_held_before_its_pod_group_then_bound_together(
    api: Api,
    kqueue: KqueueProcess,
    cluster: LocalCluster,
    namespace: str,
    room_from: Literal["node", "pod"],
) -> None:
    await held_then_released(api, cluster, namespace, room_from=room_from, gang_gates=True)
