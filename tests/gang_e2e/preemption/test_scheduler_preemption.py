"""kube-scheduler's own preemption, outside kqueue, against a kqueue gang.

A high-priority pod that no kqueue queue manages needs the cpu a running 3-pod kqueue gang
holds. Preempting one pod of the gang (what kube-scheduler does to pods on its own) would leave
two running without the third. kqueue's PodGroups carry the disruption mode that makes
kube-scheduler's workload-aware preemption take the whole group or none of it (v1beta1
``disruptionMode: {all: {}}``, v1alpha2 ``PodGroup``), so the gang is never left half running:
its pods are all preempted, and their replacements wait together, none bound, while the
preemptor holds the room. Where kube-scheduler takes single pods anyway, kqueue evicts the gang
whole when it sees the victim's ``DisruptionTarget`` (kqueue/controller/gang_disruption.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.controller.kube import KubeError
from kqueue.controller.resources import PODS, PRIORITY_CLASSES
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import Api, KqueueProcess, eventually, job, pause_container, stays
from tests.gang_e2e.fragment import bound, fragmented, free_blocker

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]

GANG = 3


async def _live(api: Api, namespace: str, name: str) -> list[Obj]:
    return [
        p
        for p in await api.pods_of(namespace, name)
        if not p["metadata"].get("deletionTimestamp")
        and p["status"].get("phase") not in ("Succeeded", "Failed")
    ]


async def test_scheduler_preemption_never_leaves_a_gang_half_running(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    async with fragmented(cluster, api, namespace) as frag:
        await free_blocker(api, frag)  # 4 cpu free on the two nodes
        await api.apply(job("gang", namespace, "lq", count=GANG, cpu="1"))

        async def gang_bound() -> list[Obj] | None:
            pods = bound(await _live(api, namespace, "gang"))
            return pods if len(pods) == GANG else None

        first = {p["metadata"]["uid"] for p in await eventually(gang_bound, what="gang bound")}

        pc = f"urgent-{namespace}"
        await api.kube.create(
            PRIORITY_CLASSES,
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": pc},
                "value": 100000,
            },
        )
        api.created.append((PRIORITY_CLASSES, pc, None))
        # 2 cpu on the gang's nodes, where 1 is free: kube-scheduler must preempt.
        urgent = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "urgent", "namespace": namespace},
            "spec": {
                "priorityClassName": pc,
                "nodeSelector": {INSTANCE_TYPE_LABEL: frag.instance_type},
                "terminationGracePeriodSeconds": 0,
                "containers": [pause_container("2")],
            },
        }

        async def urgent_created() -> bool:
            # The API server's priority admission reads PriorityClasses from its own cache: a
            # class created a moment ago may not be there yet (403 "no PriorityClass ... found").
            try:
                await api.kube.create(PODS, urgent, namespace=namespace)
            except KubeError as exc:
                if exc.status == 403 and "PriorityClass" in exc.message:
                    return False
                raise
            return True

        await eventually(urgent_created, within=30, what="the high-priority pod created")

        async def urgent_bound() -> bool:
            pod = await api.kube.get(PODS, "urgent", namespace)
            return bool(pod["spec"].get("nodeName"))

        await eventually(urgent_bound, what="the high-priority pod bound", within=90)

        async def whole_or_none() -> bool:
            pods = await _live(api, namespace, "gang")
            running = bound(pods)
            survivors = {p["metadata"]["uid"] for p in running} & first
            # Either none of the first gang runs, or (not preempted at all) all of it does.
            return len(running) in (0, GANG) and len(survivors) in (0, GANG)

        # Where kube-scheduler takes single pods (1.36's alpha gates were seen to), kqueue evicts
        # the gang whole on its victim's DisruptionTarget (kqueue/controller/gang_disruption.py):
        # for the moment that takes, the rest of the gang is still running.
        await eventually(whole_or_none, within=60, what="the gang whole or not at all")
        await stays(whole_or_none, for_s=10, what="the gang whole or not at all")
        running = bound(await _live(api, namespace, "gang"))
        # The preemptor took 2 of the 4 cpu: a gang of 3 can only be waiting, whole.
        assert running == [], f"{len(running)} of {GANG} gang pods bound next to the preemptor"
