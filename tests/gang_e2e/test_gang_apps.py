"""StatefulSets under gang scheduling: an ordered one (``podManagementPolicy: OrderedReady``,
the default) creates pod n+1 only once pod n is ready, so it is kept out of gangs (a gang of its
replicas would wait for pods that are never created); a ``Parallel`` one is placed whole, its
pods naming the group of its current size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.controller import gang
from kqueue.controller.integrations.statefulset.generic import STATEFULSETS
from kqueue.controller.kube import NotFound
from kqueue.controller.resources import PODS
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, eventually
from tests.controller_e2e.support_extra import PodsKqueue, pods_kqueue
from tests.controller_e2e.test_apps import _queues, statefulset
from tests.fixtures.cluster import PODGROUPS, RESIZES_IN_PLACE

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodsKqueue]:
    yield from pods_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-gang-apps")),
        {"integrations": {"frameworks": ["batch/job", "pod", "statefulset"]}},
    )


async def _running(api: Api, namespace: str, name: str, n: int) -> list[Obj]:
    async def probe() -> list[Obj] | None:
        pods = await api.kube.list(PODS, namespace=namespace, label_selector=f"app={name}")
        ok = len(pods) == n and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else None

    return await eventually(probe, within=90, what=f"{n} pods of StatefulSet {name} Running")


@pytest.mark.parametrize(
    ("policy", "gang_on"),
    [pytest.param(None, False, id="ordered"), pytest.param("Parallel", True, id="parallel")],
)
async def test_statefulset_gang_by_pod_management_policy(
    api: Api, kqueue: PodsKqueue, namespace: str, policy: str | None, gang_on: bool
) -> None:
    await _queues(api, namespace, "3")
    obj = statefulset("web", namespace, "lq", 3)
    if policy is not None:
        obj["spec"]["podManagementPolicy"] = policy
    created = await api.kube.create(STATEFULSETS, obj, namespace=namespace)
    annotations = created["spec"]["template"]["metadata"].get("annotations") or {}
    assert (annotations.get(gang.GANG_SCHEDULING_ANNOTATION) == "false") is not gang_on
    pods = await _running(api, namespace, "web", 3)
    groups = {(p["spec"].get("schedulingGroup") or {}).get("podGroupName") for p in pods}
    if not gang_on:
        assert groups == {None}
        return
    sts = await api.kube.get(STATEFULSETS, "web", namespace)
    uid, generation = sts["metadata"]["uid"], sts["metadata"]["generation"]
    [name] = groups
    epoch = None if RESIZES_IN_PLACE else f"g{generation}"
    assert name == gang.group_name("StatefulSet", "web", uid, epoch)
    try:
        pg = await api.kube.get(PODGROUPS, str(name), namespace)
    except NotFound:
        pytest.fail(f"PodGroup {name} missing")
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3


async def _parallel_scaled_2_to_4(api: Api, namespace: str) -> tuple[str, list[Obj]]:
    """A Parallel StatefulSet ``grow`` of 2 Running, scaled to 4: its first pods' group, and
    its 4 Running pods."""
    await _queues(api, namespace, "4")
    obj = statefulset("grow", namespace, "lq", 2)
    obj["spec"]["podManagementPolicy"] = "Parallel"
    await api.kube.create(STATEFULSETS, obj, namespace=namespace)
    pods = await _running(api, namespace, "grow", 2)
    [first] = {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods}
    await api.kube.patch(STATEFULSETS, "grow", {"spec": {"replicas": 4}}, namespace=namespace)
    return first, await _running(api, namespace, "grow", 4)


@pytest.mark.skipif(
    RESIZES_IN_PLACE,
    reason="v1.36 (v1alpha2, immutable minCount) behaviour: runs under `make test-k136`; "
    "test_parallel_statefulset_scale_up_raises_min_count is its 1.37 counterpart",
)
async def test_parallel_statefulset_scale_up_gets_a_group_of_its_own(
    api: Api, kqueue: PodsKqueue, namespace: str
) -> None:
    first, pods = await _parallel_scaled_2_to_4(api, namespace)
    by_group: dict[str, int] = {}
    for p in pods:
        name = p["spec"]["schedulingGroup"]["podGroupName"]
        by_group[name] = by_group.get(name, 0) + 1
    [second] = [g for g in by_group if g != first]
    assert by_group == {first: 2, second: 2}
    sts = await api.kube.get(STATEFULSETS, "grow", namespace)
    assert second == gang.group_name(
        "StatefulSet", "grow", sts["metadata"]["uid"], f"g{sts['metadata']['generation']}"
    )
    pg = await api.kube.get(PODGROUPS, second, namespace)
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    assert pg["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == "4"


@pytest.mark.skipif(
    not RESIZES_IN_PLACE,
    reason="v1beta1 (1.37) behaviour: see test_parallel_statefulset_scale_up_gets_a_group_of_its_own",
)
async def test_parallel_statefulset_scale_up_raises_min_count(
    api: Api, kqueue: PodsKqueue, namespace: str
) -> None:
    group, pods = await _parallel_scaled_2_to_4(api, namespace)
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {group}
    sts = await api.kube.get(STATEFULSETS, "grow", namespace)
    assert group == gang.group_name("StatefulSet", "grow", sts["metadata"]["uid"])
    # One group for both sizes, resized in place (no group per generation).
    [pg] = await api.kube.list(PODGROUPS, namespace=namespace)
    assert pg["metadata"]["name"] == group
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert pg["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == "4"
