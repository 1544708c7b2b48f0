"""The topology hand-off on a gang-scheduling control plane (kwok-tas nodes: 2 blocks x 2 racks
x 4 hosts of 4 cpu), once per ``topologyHandOff`` mode: a Job requiring a rack (4 pods of 3
cpu, a whole rack) is bound inside one rack, all together; a second one goes to another rack.

What each mode hands kube-scheduler (docs/topology.md, kqueue/controller/gang_topology.py): the
PodGroup carries ``schedulingConstraints.topology`` = the rack level unless the mode is
``NodeSelector`` (and only on v1beta1, 1.37: v1alpha2 is given none); the pods carry their
host's ``kubernetes.io/hostname`` selector unless the mode is ``Constraint`` on 1.37, where
kube-scheduler picks the rack.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gang import mutable_min_count
from kqueue.controller.gang_topology import stored_key
from kqueue.controller.resources import NODES
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import TAS_RACK_LABEL
from tests.controller_e2e.harness import Api, eventually, is_true
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_topology import _rack_job, _tas_queue, _wait_idle
from tests.fixtures.cluster import PODGROUPS

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
MODES = ("NodeSelector", "NodeSelectorAndConstraint", "Constraint")
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module", params=MODES)
def kqueue(
    request: pytest.FixtureRequest,
    cluster: LocalCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConfiguredKqueue]:
    work = Path(tmp_path_factory.mktemp(f"kqueue-{request.param.lower()}"))
    yield from configured_kqueue(cluster, work, {"topologyHandOff": request.param})


async def test_rack_jobs_are_bound_each_inside_one_rack(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    mode = kqueue.overrides["topologyHandOff"]
    constrained = mode != "NodeSelector" and mutable_min_count(PODGROUPS)
    pinned = not (mode == "Constraint" and constrained)
    racks = {
        n["metadata"]["name"]: n["metadata"]["labels"].get(TAS_RACK_LABEL)
        for n in await api.kube.list(NODES)
    }
    await _wait_idle(api, racks)
    await _tas_queue(api, namespace)

    async def bound_racks(name: str) -> set[str] | None:
        pods = await api.pods_of(namespace, name)
        nodes = [(p.get("spec") or {}).get("nodeName") for p in pods]
        if len(nodes) != 4 or not all(nodes):
            return None
        # Bound all together: the gang is one PodGroup of minCount 4.
        [group] = {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods}
        pg = await api.kube.get(PODGROUPS, group, namespace)
        assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
        assert stored_key(pg) == (TAS_RACK_LABEL if constrained else None), mode
        assert all(
            (HOSTNAME in (p["spec"].get("nodeSelector") or {})) is pinned for p in pods
        ), f"{mode}: pods pinned to their hosts: {pinned}"
        assert all(p["metadata"]["labels"].get(c.TAS_LABEL) == "true" for p in pods)
        return {racks[n] for n in nodes if n}

    seen: list[set[str]] = []
    for name in ("rack-a", "rack-b"):
        await api.apply(_rack_job(name, namespace))
        await api.wait_workload(namespace, name, lambda w: is_true(w, c.ADMITTED),
                                what="admitted")
        got = await eventually(lambda n=name: bound_racks(n), within=60,  # type: ignore[misc]
                               what=f"{name}'s 4 pods bound ({mode})")
        assert len(got) == 1, f"{name} spread over racks {got} ({mode})"
        seen.append(got)
    assert seen[0] != seen[1], f"both Jobs in rack {seen[0]} ({mode})"
