"""Whole-gang placement on a control plane with the PodGroup API and gang scheduling on.

kqueue decides when (quota), kube-scheduler places all or nothing: the pods of a kqueue workload
name one PodGroup, kqueue creates it for the admitted count before releasing them, and the
Workload carries kube-scheduler's verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.controller.kube import KubeError, NotFound
from kqueue.controller.resources import JOBS, PODS, WORKLOADS
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
from tests.fixtures.cluster import PODGROUPS, RESIZES_IN_PLACE
from tests.gang_e2e.fragment import (
    GANG_SIZE,
    assert_bound_together,
    bound,
    fragmented,
    free_blocker,
    submit_gang,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


async def _pod_group(api: Api, namespace: str, name: str) -> Obj | None:
    try:
        return await api.kube.get(PODGROUPS, name, namespace)
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
        assert "priorityClassName" not in pg["spec"]
        if RESIZES_IN_PLACE:
            # v1beta1 serves disruptionMode with GenericWorkload alone: the gang is disrupted
            # whole by kube-scheduler's workload-aware preemption, never one pod of it.
            assert pg["spec"]["disruptionMode"] == {"all": {}}
        else:
            # v1.36 without WorkloadAwarePreemption: the API server drops the fields
            # (disruptionMode defaults to Pod), and kqueue learns it from its first group.
            assert pg["spec"].get("disruptionMode", "Pod") == "Pod"
            assert "workload-aware preemption: off" in kqueue.log_path.read_text()

        # Quota fits 4, nodes fit 3: kube-scheduler binds none, and the Workload says why.
        unschedulable = await api.wait_workload(
            namespace,
            frag.job_name,
            # The first verdict may carry only the gang's waiting message; the reason of the pod
            # that did not fit follows once kube-scheduler has tried it.
            lambda w: (condition(w, gang.POD_GROUP_SCHEDULED) or {}).get("status") == "False"
            and "Insufficient cpu" in (condition(w, gang.POD_GROUP_SCHEDULED) or {})["message"],
            what=f"{gang.POD_GROUP_SCHEDULED}=False, Insufficient cpu",
        )
        cond = condition(unschedulable, gang.POD_GROUP_SCHEDULED)
        assert cond is not None and cond["reason"] == "Unschedulable"
        assert "Insufficient cpu" in cond["message"] and group in cond["message"]

        async def warned() -> bool:  # events are written after the condition
            events = await api.events_for(namespace, wl["metadata"]["name"])
            return any(e["reason"] == gang.GANG_UNSCHEDULABLE_EVENT for e in events)

        await eventually(warned, what=f"a {gang.GANG_UNSCHEDULABLE_EVENT} event")

        async def none_bound() -> bool:
            return not bound(await api.pods_of(namespace, frag.job_name))

        await stays(none_bound, for_s=3, what="no pod of the gang bound")

        # One cpu freed: all four are bound, never some of them.
        await free_blocker(api, frag)

        async def all_bound() -> list[Obj] | None:
            pods = bound(await api.pods_of(namespace, frag.job_name))
            return pods if len(pods) == GANG_SIZE else None

        assert_bound_together(await eventually(all_bound, what=f"all {GANG_SIZE} pods bound"))
        placed = await api.wait_workload(
            namespace,
            frag.job_name,
            lambda w: is_true(w, gang.POD_GROUP_SCHEDULED),
            what=f"{gang.POD_GROUP_SCHEDULED}=True",
        )
        assert condition(placed, gang.POD_GROUP_SCHEDULED)["reason"] == "Scheduled"  # type: ignore[index]
        await api.kube.delete(JOBS, frag.job_name, namespace=namespace, propagation="Foreground")


def _groups(pods: list[Obj]) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = {}
    for p in pods:
        out.setdefault(p["spec"]["schedulingGroup"]["podGroupName"], []).append(p)
    return out


async def _slice_when(api: Api, wl: Obj, pred: Callable[[Obj], bool], *, what: str) -> Obj:
    async def probe() -> Obj | None:
        got = await api.kube.get(WORKLOADS, wl["metadata"]["name"], wl["metadata"]["namespace"])
        return got if pred(got) else None

    return await eventually(probe, what=what)


async def _elastic_job_of_one(api: Api, namespace: str) -> Obj:
    """An elastic work-queue Job ``grow`` of 1 pod: its pod, once Running."""
    obj = job("grow", namespace, "lq", count=1, annotations={c.ELASTIC_JOB_ANNOTATION: "true"})
    del obj["spec"]["completions"]
    await api.apply(obj)
    [pod] = await eventually(lambda: running_pods(api, namespace, "grow", 1), what="1 pod Running")
    return pod


async def _unschedulable_message(api: Api, wl: Obj) -> str:
    """The message of ``wl``'s PodGroupScheduled=False once it names the pod that did not fit
    (before kube-scheduler has tried it, only the group's waiting message is there)."""
    got = await _slice_when(
        api,
        wl,
        lambda w: (condition(w, gang.POD_GROUP_SCHEDULED) or {}).get("status") == "False"
        and "Insufficient cpu" in (condition(w, gang.POD_GROUP_SCHEDULED) or {})["message"],
        what=f"{gang.POD_GROUP_SCHEDULED}=False on the new slice, Insufficient cpu",
    )
    return str(condition(got, gang.POD_GROUP_SCHEDULED)["message"])  # type: ignore[index]


async def _next_slice(api: Api, namespace: str, name: str, before: Obj) -> Obj:
    """The admitted slice of ``name`` that followed ``before`` (a scale-up's)."""

    async def admitted() -> Obj | None:
        for w in await slices_of(api, namespace, name):
            if w["metadata"]["uid"] != before["metadata"]["uid"] and is_true(w, c.ADMITTED):
                return w
        return None

    return await eventually(admitted, what="the scale-up's slice admitted")


async def _live_pods(api: Api, namespace: str, name: str) -> list[Obj]:
    return [
        p
        for p in await api.pods_of(namespace, name)
        if not p["metadata"].get("deletionTimestamp")
        and p["status"].get("phase") not in ("Succeeded", "Failed")
    ]


@pytest.mark.skipif(
    RESIZES_IN_PLACE,
    reason="v1.36 (v1alpha2, immutable minCount) behaviour: runs under `make test-k136`; "
    "test_elastic_scale_up_raises_min_count_in_place is its 1.37 counterpart",
)
async def test_elastic_scale_up_places_the_added_pods_all_or_nothing(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    """1 pod runs; scaled to 4, the 3 added pods name a group of their own (minCount 3): with
    room for 2 of them none is bound, the new slice says why; with room for 3 all are bound
    together. The running pod's group is handed to the new slice, both go with it."""
    async with fragmented(cluster, api, namespace) as frag:
        first_pod = await _elastic_job_of_one(api, namespace)
        base = await _group_of(api, namespace, "grow")
        first_group = first_pod["spec"]["schedulingGroup"]["podGroupName"]
        assert first_group.startswith(f"{base}-g")
        [slice1] = [w for w in await slices_of(api, namespace, "grow") if is_true(w, c.ADMITTED)]
        first = await _pod_group(api, namespace, first_group)
        assert first is not None and first["spec"]["schedulingPolicy"]["gang"]["minCount"] == 1
        assert _owner_uids(first) == {slice1["metadata"]["uid"]}

        await api.kube.patch(JOBS, "grow", {"spec": {"parallelism": 4}}, namespace=namespace)

        slice2 = await _next_slice(api, namespace, "grow", slice1)

        async def added() -> dict[str, list[Obj]] | None:
            pods = await _live_pods(api, namespace, "grow")
            groups = _groups(pods)
            if len(pods) != 4 or len(groups) != 2:
                return None
            return groups

        groups = await eventually(added, what="4 pods in 2 groups")
        [second_group] = [g for g in groups if g != first_group]
        assert second_group.startswith(f"{base}-g") and len(groups[second_group]) == 3
        second = await eventually(
            lambda: _pod_group(api, namespace, second_group), what=f"PodGroup {second_group}"
        )
        assert second["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
        assert second["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == "4"

        # Room for 2 of the 3 added pods: none of them is bound, the new slice says why.
        message = await _unschedulable_message(api, slice2)
        assert second_group in message and "Insufficient cpu" in message

        async def none_added_bound() -> bool:
            pods = _groups(await _live_pods(api, namespace, "grow")).get(second_group) or []
            return not bound(pods)

        await stays(none_added_bound, for_s=3, what="none of the added pods bound")

        # Both groups are the new slice's now (the first one kept: immutable, its pod runs).
        async def handed_over() -> bool:
            pgs = [await _pod_group(api, namespace, g) for g in (first_group, second_group)]
            return all(
                pg is not None and _owner_uids(pg) == {slice2["metadata"]["uid"]} for pg in pgs
            )

        await eventually(handed_over, what="both PodGroups owned by the new slice")
        kept = await _pod_group(api, namespace, first_group)
        assert kept is not None and kept["metadata"]["uid"] == first["metadata"]["uid"]

        # One cpu freed: the three are bound together, never some of them.
        await free_blocker(api, frag)

        async def all_added_bound() -> list[Obj] | None:
            pods = _groups(await _live_pods(api, namespace, "grow")).get(second_group) or []
            return bound(pods) if len(bound(pods)) == 3 else None

        assert_bound_together(await eventually(all_added_bound, what="the 3 added pods bound"))
        await _slice_when(
            api,
            slice2,
            lambda w: is_true(w, gang.POD_GROUP_SCHEDULED),
            what=f"{gang.POD_GROUP_SCHEDULED}=True on the new slice",
        )

        # Scaled down to 2: the surplus pods go; the groups stay the slice's, nothing re-gated.
        await api.kube.patch(JOBS, "grow", {"spec": {"parallelism": 2}}, namespace=namespace)
        await eventually(lambda: running_pods(api, namespace, "grow", 2), what="2 pods Running")
        for g in (first_group, second_group):
            pg = await _pod_group(api, namespace, g)
            assert pg is not None and _owner_uids(pg) == {slice2["metadata"]["uid"]}
        await api.kube.delete(JOBS, "grow", namespace=namespace, propagation="Foreground")


@pytest.mark.skipif(
    not RESIZES_IN_PLACE,
    reason="v1beta1 (1.37) behaviour: a v1alpha2 group's minCount is immutable, see "
    "test_elastic_scale_up_places_the_added_pods_all_or_nothing",
)
async def test_elastic_scale_up_raises_min_count_in_place(
    api: Api, kqueue: KqueueProcess, cluster: LocalCluster, namespace: str
) -> None:
    """1 pod runs; scaled to 4, the 3 added pods join the same PodGroup, whose minCount kqueue
    raises from 1 to 4 (the same object, not a group per generation): with room for 2 of them
    none is bound and the new slice says why; with room for 3 all are bound together."""
    async with fragmented(cluster, api, namespace) as frag:
        first_pod = await _elastic_job_of_one(api, namespace)
        group = await _group_of(api, namespace, "grow")
        assert first_pod["spec"]["schedulingGroup"]["podGroupName"] == group
        [slice1] = [w for w in await slices_of(api, namespace, "grow") if is_true(w, c.ADMITTED)]
        first = await _pod_group(api, namespace, group)
        assert first is not None and first["spec"]["schedulingPolicy"]["gang"]["minCount"] == 1

        await api.kube.patch(JOBS, "grow", {"spec": {"parallelism": 4}}, namespace=namespace)

        slice2 = await _next_slice(api, namespace, "grow", slice1)

        async def raised() -> Obj | None:
            pg = await _pod_group(api, namespace, group)
            gang_policy = (pg or {}).get("spec", {}).get("schedulingPolicy", {}).get("gang", {})
            return pg if gang_policy.get("minCount") == 4 else None

        resized = await eventually(raised, what=f"PodGroup {group} minCount raised to 4")
        assert resized["metadata"]["uid"] == first["metadata"]["uid"]  # in place
        assert _owner_uids(resized) == {slice2["metadata"]["uid"]}
        assert resized["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == "4"

        async def four_in_one_group() -> list[Obj] | None:
            pods = await _live_pods(api, namespace, "grow")
            return pods if len(pods) == 4 and set(_groups(pods)) == {group} else None

        await eventually(four_in_one_group, what=f"4 pods, all naming {group}")

        # Room for 2 of the 3 added pods: none of them is bound, the new slice says why.
        assert group in await _unschedulable_message(api, slice2)

        async def only_first_bound() -> bool:
            return len(bound(await _live_pods(api, namespace, "grow"))) == 1

        await stays(only_first_bound, for_s=3, what="none of the added pods bound")

        # One cpu freed: the three are bound together, never some of them.
        await free_blocker(api, frag)

        async def all_bound() -> list[Obj] | None:
            pods = bound(await _live_pods(api, namespace, "grow"))
            return pods if len(pods) == 4 else None

        placed = await eventually(all_bound, what="all 4 pods bound")
        first_name = first_pod["metadata"]["name"]
        assert_bound_together([p for p in placed if p["metadata"]["name"] != first_name])
        await api.kube.delete(JOBS, "grow", namespace=namespace, propagation="Foreground")


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


async def test_a_replacement_pod_joins_the_running_gang_while_its_predecessor_terminates(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    """A Job's pod is deleted and held terminating (a finalizer, as a slow shutdown would); the
    Job controller creates its replacement at once. kqueue counts only live pods against the
    admitted 2, so it releases the replacement into the group, whose minCount the running pod
    and the terminating one already met: kube-scheduler binds it while its predecessor still
    terminates, and no pod waits behind the gate."""
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "3")]))
    await api.apply(local_queue("lq", namespace, cq))
    obj = job("repl", namespace, "lq", count=2)
    obj["spec"]["backoffLimit"] = 3
    del obj["spec"]["completions"]
    await api.apply(obj)
    await eventually(lambda: running_pods(api, namespace, "repl", 2), what="2 pods Running")
    [first, second] = await _live_pods(api, namespace, "repl")
    hold = "kqueue.io/test-hold"
    name = first["metadata"]["name"]
    # Added to the Job controller's own (job-tracking) finalizer, which it must keep.
    kept = list(first["metadata"].get("finalizers") or [])
    await api.kube.patch(
        PODS, name, {"metadata": {"finalizers": [*kept, hold]}}, namespace=namespace
    )
    await api.kube.delete(PODS, name, namespace=namespace)
    try:

        async def replacement_running() -> Obj | None:
            live = [
                p for p in await _live_pods(api, namespace, "repl")
                if p["metadata"]["name"] != second["metadata"]["name"]
            ]
            return next((p for p in live if p["status"].get("phase") == "Running"), None)

        got = await eventually(replacement_running, what="the replacement pod Running")
        assert got["spec"]["schedulingGroup"] == first["spec"]["schedulingGroup"]
        old = await api.kube.get(PODS, name, namespace)
        assert old["metadata"].get("deletionTimestamp"), "the predecessor still terminates"
    finally:
        current = await api.kube.get(PODS, name, namespace)
        rest = [f for f in current["metadata"].get("finalizers") or [] if f != hold]
        await api.kube.patch(PODS, name, {"metadata": {"finalizers": rest}}, namespace=namespace)
