"""Plain pod groups (the ``pod`` integration) placed whole by kube-scheduler.

A pod group (``kqueue.io/pod-group-name``, ``kqueue.io/pod-group-total-count`` > 1) is one gang
Workload; its pods name the PodGroup ``pod-group-<group>`` from birth (the integration
framework's ``pod_workload`` hook tells the pod webhook which workload a plain pod belongs to),
and kqueue sizes it before it releases them. A single pod gets no group.
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.controller.kube import NotFound
from kqueue.controller.resources import CLUSTER_QUEUES, EVENTS, PODS, WORKLOADS
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    local_queue,
    stays,
    unique,
)
from tests.controller_e2e.support_extra import pod
from tests.fixtures.cluster import PODGROUPS
from tests.gang_e2e.fragment import (
    GANG_SIZE,
    assert_bound_together,
    assert_gang_unschedulable,
    bound,
    fragmented,
    free_blocker,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
GROUP = "trainers"


def _pod(name: str, namespace: str, *, group: str | None, total: int = GANG_SIZE) -> Obj:
    return pod(name, namespace, "lq", group=group, total=total)


async def _group_pods(api: Api, namespace: str) -> list[Obj]:
    return await api.kube.list(
        PODS, namespace=namespace, label_selector=f"{c.POD_GROUP_NAME_LABEL}={GROUP}"
    )


async def _workload(api: Api, namespace: str) -> Obj | None:
    try:
        return await api.kube.get(WORKLOADS, GROUP, namespace)
    except NotFound:
        return None


async def _excess_event(api: Api, namespace: str, name: str) -> Obj | None:
    """The ExcessPodDeleted event on pod ``name``, once there is one."""
    events = await api.kube.list(EVENTS, namespace=namespace)
    return next(
        (
            e
            for e in events
            if e.get("reason") == "ExcessPodDeleted"
            and (e.get("involvedObject") or {}).get("name") == name
        ),
        None,
    )


async def _pod_gone(api: Api, namespace: str, name: str) -> bool:
    try:
        await api.kube.get(PODS, name, namespace)
    except NotFound:
        return True
    return False


async def test_pod_group_binds_nothing_then_all_together(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    async with fragmented(cluster, api, namespace) as frag:
        for i in range(GANG_SIZE):
            await api.kube.create(PODS, _pod(f"p{i}", namespace, group=GROUP), namespace=namespace)
        want = gang.group_name("Pod", f"group-{GROUP}")
        assert want == f"pod-group-{GROUP}"
        pods = await _group_pods(api, namespace)
        assert {p["spec"].get("schedulingGroup", {}).get("podGroupName") for p in pods} == {want}

        async def admitted() -> Obj | None:
            wl = await _workload(api, namespace)
            return wl if wl is not None and is_true(wl, c.ADMITTED) else None

        wl = await eventually(admitted, what=f"Workload {GROUP} admitted")

        # Quota fits 4, nodes fit 3: none is bound, the Workload says why.
        await assert_gang_unschedulable(
            api, namespace, want, wl, lambda: _workload(api, namespace)
        )

        async def none_bound() -> bool:
            return not bound(await _group_pods(api, namespace))

        await stays(none_bound, for_s=3, what="no pod of the group bound")

        await free_blocker(api, frag)

        async def all_bound() -> list[Obj] | None:
            pods = bound(await _group_pods(api, namespace))
            return pods if len(pods) == GANG_SIZE else None

        assert_bound_together(await eventually(all_bound, what=f"all {GANG_SIZE} pods bound"))

        async def placed() -> bool:
            got = await _workload(api, namespace)
            return got is not None and is_true(got, gang.POD_GROUP_SCHEDULED)

        await eventually(placed, what=f"{gang.POD_GROUP_SCHEDULED}=True")
        for p in await _group_pods(api, namespace):
            await api.kube.delete(PODS, p["metadata"]["name"], namespace=namespace)


async def test_a_single_pod_gets_no_group(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    async with fragmented(cluster, api, namespace):
        created = await api.kube.create(PODS, _pod("solo", namespace, group=None), namespace=namespace)
        assert "schedulingGroup" not in created["spec"]

        async def bound_alone() -> bool:
            got = await api.kube.get(PODS, "solo", namespace)
            return bool(got["spec"].get("nodeName"))

        await eventually(bound_alone, what="the single pod bound")
        await api.kube.delete(PODS, "solo", namespace=namespace)


async def test_an_evicted_pod_group_s_new_pods_are_placed_whole_in_a_new_pod_group(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """Evicted (its ClusterQueue drained), the group's pods are deleted; kqueue does not delete
    the PodGroup itself (new pods naming a group that is still terminating would wait for it
    forever). The pod group's Workload is owned by its pods, so once they are gone the garbage
    collector removes the Workload and, with it, the PodGroup; pods created again after that get a
    new Workload and a new PodGroup of the same name, and are placed whole. (Pods recreated while
    the old PodGroup is still being collected are held with a PodGroupTerminating event: see
    docs/concepts.md.)"""
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("lq", namespace, cq))
    want = gang.group_name("Pod", "group-again")

    async def running(names: list[str]) -> bool:
        pods = [await api.kube.get(PODS, n, namespace) for n in names]
        return all(p["status"].get("phase") == "Running" for p in pods)

    first = ["a-0", "a-1"]
    for n in first:
        await api.kube.create(PODS, _pod(n, namespace, group="again", total=2), namespace=namespace)
    await eventually(lambda: running(first), what="the group's first pods Running")
    before = await api.kube.get(PODGROUPS, want, namespace)

    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": "HoldAndDrain"}})

    async def gone() -> bool:
        pods = await api.kube.list(
            PODS, namespace=namespace, label_selector=f"{c.POD_GROUP_NAME_LABEL}=again"
        )
        return not pods

    await eventually(gone, what="the evicted pods removed")

    async def collected() -> bool:
        try:
            await api.kube.get(PODGROUPS, want, namespace)
        except NotFound:
            return True
        return False

    await eventually(collected, what="the old Workload's PodGroup garbage-collected")
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": "None"}})
    second = ["b-0", "b-1"]
    for n in second:
        created = await api.kube.create(
            PODS, _pod(n, namespace, group="again", total=2), namespace=namespace
        )
        assert created["spec"]["schedulingGroup"] == {"podGroupName": want}
    await eventually(lambda: running(second), what="the group's new pods Running")
    after = await api.kube.get(PODGROUPS, want, namespace)
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    for n in second:
        await api.kube.delete(PODS, n, namespace=namespace)


async def test_a_pod_beyond_the_group_s_total_count_is_deleted_and_the_gang_is_placed(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """Kueue's TestReconciler "excess pods before admission": a pod group declares 2 pods and 3
    are made. The webhook names the PodGroup on all 3 at creation (the field is immutable), and
    kube-scheduler v1.37.2 binds none of a group while a pod naming it stays gated, so a kept
    excess pod would stall the gang for good. kqueue deletes the excess pod (last in Kueue's
    order), as Kueue does, with an ``ExcessPodDeleted`` event on it; the 2 admitted pods are
    placed together."""
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "3")]))
    await api.apply(local_queue("lq", namespace, cq))
    names = ["e-0", "e-1", "e-2"]
    for n in names:
        await api.kube.create(PODS, _pod(n, namespace, group="extra", total=2), namespace=namespace)

    # Which pod is the excess one follows Kueue's order (kqueue's finalizer first, ungated
    # first, older first, then the name): made within a second, it is e-2 once all three carry
    # the finalizer, but the finalizer may not be on all three yet when the group is first
    # seen. Either way exactly one goes, the other two run together.
    async def two_running_one_gone() -> list[str] | None:
        live: dict[str, Obj] = {}
        for n in names:
            try:
                live[n] = await api.kube.get(PODS, n, namespace)
            except NotFound:
                continue
        running = [n for n, p in live.items() if p["status"].get("phase") == "Running"]
        return running if len(live) == 2 and len(running) == 2 else None

    kept = await eventually(
        two_running_one_gone, within=120, what="one pod deleted and the group's 2 others Running"
    )
    (gone,) = set(names) - set(kept)
    group = await api.kube.get(PODGROUPS, gang.group_name("Pod", "group-extra"), namespace)
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2

    event = await eventually(
        lambda: _excess_event(api, namespace, gone), what=f"an ExcessPodDeleted event on {gone}"
    )
    # Counted against the group's total count, or, if its Workload was made from the first two
    # pods before the third was seen, against its one pod set's count: 2 either way.
    assert "count 2" in event["message"] and "3 active pods" in event["message"]
    for n in kept:
        await api.kube.delete(PODS, n, namespace=namespace)


async def test_a_leader_beyond_its_pod_set_s_count_is_deleted_within_the_total_count(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """Kueue's TestReconciler "excess pods in pod set after admission": once the Workload
    exists, the excess is counted per pod set (role), not against the group's total count. A
    group of total count 3, 1 leader + 2 workers, runs; a worker goes and a leader-shaped pod
    comes instead: 3 active pods, within the total count, but 2 leaders for a pod set of 1.
    kqueue deletes the new leader, whose event names its pod set and count (kept, it would stay
    gated naming the running group's PodGroup)."""
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "4")]))
    await api.apply(local_queue("lq", namespace, cq))

    def member(name: str, cpu: str) -> Obj:
        return pod(name, namespace, "lq", cpu=cpu, group="roles", total=3)

    first = {"l-0": "1", "w-0": "500m", "w-1": "500m"}
    for n, cpu in first.items():
        await api.kube.create(PODS, member(n, cpu), namespace=namespace)

    async def running() -> bool:
        pods = [await api.kube.get(PODS, n, namespace) for n in first]
        return all(p["status"].get("phase") == "Running" for p in pods)

    await eventually(running, what="the group's 3 pods Running")
    # Both roles were released on the flavor's nodes: each pod set got its node labels.
    for n in first:
        selector = (await api.kube.get(PODS, n, namespace))["spec"].get("nodeSelector") or {}
        assert selector.get(INSTANCE_TYPE_LABEL) == "on-demand", (n, selector)
    # The worker fails, as its kubelet would report it (the nodes run no containers).
    await api.kube.patch(
        PODS, "w-1", {"status": {"phase": "Failed"}}, namespace=namespace, subresource="status"
    )
    await api.kube.create(PODS, member("l-1", "1"), namespace=namespace)

    event = await eventually(
        lambda: _excess_event(api, namespace, "l-1"), what="an ExcessPodDeleted event on l-1"
    )
    wl = await api.kube.get(WORKLOADS, "roles", namespace)
    leader = next(ps for ps in wl["spec"]["podSets"] if ps["count"] == 1)
    assert (
        f"pod set {leader['name']} (this pod's role) of its Workload has count 1, and the "
        f"group has 2 active pods of that role"
    ) in event["message"]

    await eventually(lambda: _pod_gone(api, namespace, "l-1"), what="l-1 deleted")
    for n in ("l-0", "w-0"):
        assert (await api.kube.get(PODS, n, namespace))["status"]["phase"] == "Running"
    for n in ("l-0", "w-0", "w-1"):
        await api.kube.delete(PODS, n, namespace=namespace)
