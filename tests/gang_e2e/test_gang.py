"""Whole-gang placement on a control plane with the PodGroup API and gang scheduling on.

kqueue decides when (quota), kube-scheduler places all or nothing: the pods of a kqueue workload
name one PodGroup, kqueue creates it for the admitted count before releasing them, and the
Workload carries kube-scheduler's verdict.
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.controller.kube import KubeError, NotFound
from kqueue.controller.resources import JOBS, PODS
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    condition,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    priority_class,
    stays,
    unique,
)
from tests.controller_e2e.support_extra import running_pods, slices_of
from tests.gang_e2e.fragment import GANG_SIZE, bound, fragmented, free_blocker, submit_gang

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


async def _pod_group(api: Api, namespace: str, name: str) -> Obj | None:
    try:
        return await api.kube.get(gang.PODGROUPS, name, namespace)
    except NotFound:
        return None


async def _group_of(api: Api, namespace: str, job_name: str) -> str:
    j = await api.job(namespace, job_name)
    return gang.group_name("Job", job_name, j["metadata"]["uid"])


def _owner_uids(obj: Obj) -> set[str]:
    return {r["uid"] for r in obj["metadata"].get("ownerReferences") or []}


async def test_discovery_logs_that_gang_scheduling_is_on(kqueue: KqueueProcess) -> None:
    assert "gang scheduling: on (gangScheduling: Auto" in kqueue.log_path.read_text()


async def test_fragmented_gang_binds_nothing_then_all_together(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    async with fragmented(cluster, api, namespace) as frag:
        await submit_gang(api, frag)
        wl = await api.wait_workload(
            namespace, frag.job_name, lambda w: is_true(w, c.ADMITTED), what="Admitted"
        )
        group = await _group_of(api, namespace, frag.job_name)

        # Every pod names the group; the group is sized to the admission and owned by the Workload.
        async def four_pods() -> list[Obj] | None:
            pods = await api.pods_of(namespace, frag.job_name)
            return pods if len(pods) == GANG_SIZE else None

        pods = await eventually(four_pods, what=f"{GANG_SIZE} pods")
        assert {p["spec"].get("schedulingGroup", {}).get("podGroupName") for p in pods} == {group}
        pg = await eventually(lambda: _pod_group(api, namespace, group), what=f"PodGroup {group}")
        assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == GANG_SIZE
        assert _owner_uids(pg) == {wl["metadata"]["uid"]}

        # Quota fits 4, nodes fit 3: kube-scheduler binds none, and the Workload says why.
        unschedulable = await api.wait_workload(
            namespace,
            frag.job_name,
            lambda w: (condition(w, gang.POD_GROUP_SCHEDULED) or {}).get("status") == "False",
            what=f"{gang.POD_GROUP_SCHEDULED}=False",
        )
        cond = condition(unschedulable, gang.POD_GROUP_SCHEDULED)
        assert cond is not None and cond["reason"] == "Unschedulable"
        assert "Insufficient cpu" in cond["message"] and group in cond["message"]
        events = await api.events_for(namespace, wl["metadata"]["name"])
        assert any(e["reason"] == gang.GANG_UNSCHEDULABLE_EVENT for e in events)

        async def none_bound() -> bool:
            return not bound(await api.pods_of(namespace, frag.job_name))

        await stays(none_bound, for_s=3, what="no pod of the gang bound")

        # One cpu freed: all four are bound, never some of them.
        await free_blocker(api, frag)
        seen: set[int] = set()

        async def all_bound() -> bool:
            n = len(bound(await api.pods_of(namespace, frag.job_name)))
            seen.add(n)
            return n == GANG_SIZE

        await eventually(all_bound, what=f"all {GANG_SIZE} pods bound")
        assert seen <= {0, GANG_SIZE}, f"pods bound piecemeal: counts seen {sorted(seen)}"
        placed = await api.wait_workload(
            namespace,
            frag.job_name,
            lambda w: is_true(w, gang.POD_GROUP_SCHEDULED),
            what=f"{gang.POD_GROUP_SCHEDULED}=True",
        )
        assert condition(placed, gang.POD_GROUP_SCHEDULED)["reason"] == "Scheduled"  # type: ignore[index]
        await api.kube.delete(JOBS, frag.job_name, namespace=namespace, propagation="Foreground")


async def test_elastic_scale_up_updates_the_pod_group(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "4")]))
    await api.apply(local_queue("lq", namespace, cq))
    obj = job("grow", namespace, "lq", count=2, annotations={c.ELASTIC_JOB_ANNOTATION: "true"})
    del obj["spec"]["completions"]
    await api.apply(obj)
    await eventually(lambda: running_pods(api, namespace, "grow", 2), what="2 pods Running")
    group = await _group_of(api, namespace, "grow")
    first = await _pod_group(api, namespace, group)
    assert first is not None and first["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    [slice1] = [w for w in await slices_of(api, namespace, "grow") if is_true(w, c.ADMITTED)]
    assert _owner_uids(first) == {slice1["metadata"]["uid"]}

    await api.kube.patch(JOBS, "grow", {"spec": {"parallelism": 3}}, namespace=namespace)
    pods = await eventually(lambda: running_pods(api, namespace, "grow", 3), what="3 pods Running")
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {group}

    async def handed_over() -> Obj | None:
        pg = await _pod_group(api, namespace, group)
        slices = [
            w
            for w in await slices_of(api, namespace, "grow")
            if is_true(w, c.ADMITTED) and not is_true(w, c.FINISHED)
        ]
        if (
            pg is None
            or len(slices) != 1
            or slices[0]["metadata"]["uid"] == slice1["metadata"]["uid"]
        ):
            return None
        if _owner_uids(pg) != {slices[0]["metadata"]["uid"]}:
            return None
        return pg

    pg = await eventually(handed_over, what="the PodGroup owned by the new slice")
    assert pg["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == "3"
    # The same object: its spec is immutable and its running pods keep it from being replaced.
    assert pg["metadata"]["uid"] == first["metadata"]["uid"]


async def test_partial_admission_sizes_the_gang_to_the_admitted_count(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "3")]))
    await api.apply(local_queue("lq", namespace, cq))
    obj = job("part", namespace, "lq", count=4, annotations={c.JOB_MIN_PARALLELISM_ANNOTATION: "2"})
    del obj["spec"]["completions"]  # a work queue: one wave, so it keeps its gang
    await api.apply(obj)
    await eventually(lambda: running_pods(api, namespace, "part", 3), what="3 pods Running")
    pg = await _pod_group(api, namespace, await _group_of(api, namespace, "part"))
    assert pg is not None
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    assert pg["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == "3"


async def test_preempted_gang_pod_group_goes_with_it(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    od, cq, low, high = unique("od"), unique("cq"), unique("low"), unique("high")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await api.apply(
        cluster_queue(cq, [(od, "2")], preemption={"withinClusterQueue": "LowerPriority"})
    )
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("victim", namespace, "q", count=2, labels={c.PRIORITY_CLASS_LABEL: low}))
    await eventually(lambda: running_pods(api, namespace, "victim", 2), what="victim Running")
    group = await _group_of(api, namespace, "victim")
    before = await _pod_group(api, namespace, group)
    assert before is not None

    await api.apply(job("urgent", namespace, "q", count=2, labels={c.PRIORITY_CLASS_LABEL: high}))
    await api.wait_workload(namespace, "victim", lambda w: is_true(w, c.EVICTED), what="Evicted")

    async def gone() -> bool:
        pg = await _pod_group(api, namespace, group)
        return pg is None or pg["metadata"]["uid"] != before["metadata"]["uid"]

    await eventually(gone, what=f"the victim's PodGroup {group} deleted")
    await eventually(lambda: running_pods(api, namespace, "urgent", 2), what="urgent Running")
    urgent = await _pod_group(api, namespace, await _group_of(api, namespace, "urgent"))
    assert urgent is not None and urgent["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2


async def test_job_in_waves_runs_without_a_gang(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """3 completions, 2 at a time: the last wave (1 pod) could never meet a minCount of 2."""
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("lq", namespace, cq))
    obj = job("waves", namespace, "lq", count=2, complete_after="1s")
    obj["spec"]["completions"] = 3
    await api.apply(obj)
    await api.wait_workload(
        namespace, "waves", lambda w: is_true(w, c.FINISHED), what="Finished", within=90
    )
    pods = await api.pods_of(namespace, "waves")
    assert len(pods) >= 3
    assert not any("schedulingGroup" in p["spec"] for p in pods)
    assert all(
        p["metadata"]["annotations"].get(gang.GANG_SCHEDULING_ANNOTATION) == "false" for p in pods
    )


async def test_why_waves_opt_out_a_gang_last_wave_is_never_placed(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """The same Job with the user insisting on a gang: the third pod waits for a second that
    will never come (kube-scheduler counts only live pods toward minCount)."""
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("lq", namespace, cq))
    obj = job("forced", namespace, "lq", count=2, complete_after="1s")
    obj["spec"]["completions"] = 3
    obj["spec"]["template"]["metadata"]["annotations"][gang.GANG_SCHEDULING_ANNOTATION] = "true"
    await api.apply(obj)

    async def stranded() -> Obj | None:
        pods = await api.pods_of(namespace, "forced")
        done = [p for p in pods if p["status"].get("phase") == "Succeeded"]
        pending = [
            p
            for p in pods
            if p["status"].get("phase") == "Pending" and not p["spec"].get("schedulingGates")
        ]
        return pending[0] if len(done) == 2 and len(pending) == 1 else None

    pod = await eventually(stranded, what="two pods Succeeded, the third released and pending")
    assert pod["spec"]["schedulingGroup"]["podGroupName"].startswith("job-forced-")

    async def still_pending() -> bool:
        p = await api.kube.get(PODS, pod["metadata"]["name"], namespace)
        return not p["spec"].get("nodeName")

    await stays(still_pending, for_s=5, what="the last wave's pod unbound")
    await api.kube.delete(JOBS, "forced", namespace=namespace)


@pytest.mark.parametrize(
    "given",
    [
        pytest.param({"podGroupName": "mine"}, id="user-chosen-group"),
        pytest.param({"podGroupName": "job-other"}, id="another-jobs-group"),
    ],
)
async def test_user_set_scheduling_group_is_refused(
    api: Api, kqueue: KqueueProcess, namespace: str, given: Obj
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "own-group",
            "namespace": namespace,
            "labels": {c.MANAGED_LABEL: "true"},
        },
        "spec": {
            "schedulingGroup": given,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    }
    with pytest.raises(KubeError) as err:
        await api.kube.create(PODS, pod, namespace=namespace)
    assert err.value.status in (400, 422)
    assert gang.SCHEDULING_GROUP_FIELD in err.value.message
    assert c.MANAGED_LABEL in err.value.message


async def test_user_set_scheduling_group_in_a_job_template_is_reported_on_the_job(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("lq", namespace, cq))
    obj = job("own-group", namespace, "lq", count=2)
    obj["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "mine"}
    await api.apply(obj)
    await api.wait_workload(namespace, "own-group", lambda w: is_true(w, c.ADMITTED), what="Admitted")

    async def refused() -> Obj | None:
        for e in await api.events_for(namespace, "own-group"):
            if e["reason"] == "FailedCreate" and gang.SCHEDULING_GROUP_FIELD in e["message"]:
                return e
        return None

    event = await eventually(refused, what="FailedCreate naming spec.schedulingGroup.podGroupName")
    assert "remove spec.schedulingGroup" in event["message"]
    assert await api.pods_of(namespace, "own-group") == []
