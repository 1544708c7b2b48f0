"""Gang hand-off on Kubernetes 1.37's ``scheduling.k8s.io/v1beta1``, without a cluster:
discovery prefers it, its PodGroup (``disruptionMode: {all: {}}``, the renamed verdict), an
elastic scale-up that raises ``minCount`` in place, the Job controller's own group
(``Job.spec.scheduling``) left to it, and the local control plane's gates per release."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.controller.gang import PODGROUPS_V1BETA1, GangPlacement
from kqueue.controller.integrations.job.webhook import SCHEDULING_MIN_COUNT_FIELD, scheduling_errors
from kqueue.controller.webhooks import claimant
from kqueue.controller.webhooks.pod import pod_mutator
from kqueue.localcluster.cluster import ClusterStartError, gang_flags
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import Events
from tests.controller.test_gang import NOW, _create, _pod, _with_group
from tests.controller.test_job_reconciler import gated_pods, job, workload

Obj = dict[str, Any]


def _v1beta1(cluster: FakeCluster, events: Events | None = None) -> GangPlacement:
    placement = GangPlacement(kube=cluster.kube, events=events or Events(), now=lambda: NOW)
    placement.enabled, placement.pod_groups, placement.workload_preemption = (
        True,
        PODGROUPS_V1BETA1,
        True,
    )
    return placement


DISCOVERY_CASES = [
    # (name, versions the API server serves PodGroups in, expected version or None)
    ("1.37 with GenericWorkload: v1beta1", ["v1beta1"], "v1beta1"),
    ("both served: v1beta1 preferred", ["v1alpha2", "v1beta1"], "v1beta1"),
    ("1.36 with the alpha gates: v1alpha2", ["v1alpha2"], "v1alpha2"),
    ("stock cluster: the guard alone", [], None),
]


@pytest.mark.parametrize(
    ("served", "want"), [pytest.param(*case[1:], id=case[0]) for case in DISCOVERY_CASES]
)
async def test_discovery_prefers_v1beta1(
    cluster: FakeCluster, served: list[str], want: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    for version in served:
        cluster.server.discovery[f"scheduling.k8s.io/{version}"] = ["podgroups", "workloads"]
    placement = GangPlacement(kube=cluster.kube, events=Events(), now=lambda: NOW)
    with caplog.at_level("INFO", logger="kqueue.controller.gang"):
        assert await placement.discover() is (want is not None)
    if want is None:
        assert "does not serve PodGroups" in caplog.text
        assert "scheduling.k8s.io/v1beta1=true" in caplog.text  # says how to turn it on
        return
    assert placement.pod_groups.version == want
    assert placement.per_size_groups is (want == "v1alpha2")
    # v1beta1 serves disruptionMode without another gate; v1alpha2 learns it on first use.
    assert placement.workload_preemption is (True if want == "v1beta1" else None)


async def test_v1beta1_group_is_disrupted_whole(cluster: FakeCluster) -> None:
    j = job("train", count=3)
    wl = workload(j, admitted=3)
    pods = _with_group(gated_pods(j, 3), "job-train")
    assert (await _v1beta1(cluster).prepare(wl, pods, 3)).ready
    [pg] = cluster.server.objects(PODGROUPS_V1BETA1)
    assert pg["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert pg["spec"]["disruptionMode"] == {"all": {}}


RESIZE_CASES = [
    # (name, pods running in the group, pods joining it, admitted, expected minCount, event)
    ("elastic scale-up 1 -> 4", 1, 3, 4, 4, True),
    ("elastic scale-up 2 -> 5, one added pod not created yet", 2, 2, 5, 5, True),
    ("a replacement joins a running gang of 3", 2, 1, 3, 3, False),
]


@pytest.mark.parametrize(
    ("running", "joining", "admitted", "want", "event"),
    [pytest.param(*case[1:], id=case[0]) for case in RESIZE_CASES],
)
async def test_scale_up_raises_min_count_in_place(
    cluster: FakeCluster, running: int, joining: int, admitted: int, want: int, event: bool
) -> None:
    j = job("grow", count=admitted)
    first = workload(j, admitted=running if event else admitted)
    first.metadata.uid = "wl-slice-1"
    size = running if event else admitted
    cluster.server.add(
        PODGROUPS_V1BETA1, gang.pod_group_manifest(first, "job-grow", size, size, PODGROUPS_V1BETA1)
    )
    before = cluster.server.get(PODGROUPS_V1BETA1, "job-grow", "team-a")
    second = workload(j, admitted=admitted)
    pods = _with_group(gated_pods(j, running + joining), "job-grow")
    for p in pods[:running]:
        del p["spec"]["schedulingGates"]
    events = Events()
    assert (await _v1beta1(cluster, events).prepare(second, pods, admitted)).ready
    pg = cluster.server.get(PODGROUPS_V1BETA1, "job-grow", "team-a")
    assert pg is not None and before is not None
    assert pg["metadata"]["uid"] == before["metadata"]["uid"]  # the same group, resized
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == want
    assert [r["uid"] for r in pg["metadata"]["ownerReferences"]] == [second.metadata.uid]
    assert pg["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == str(admitted)
    assert ("PodGroupResized" in events.reasons(second.name)) is event
    assert len(cluster.server.objects(PODGROUPS_V1BETA1)) == 1


JOB_UID = "u1"  # the Job that controls _pod()'s pods


def _theirs(name: str, job_uid: str = JOB_UID, kind: str = "Job") -> Obj:
    """A PodGroup as the Job controller makes it (WorkloadWithJob): controlled by the Job."""
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": kind, "name": "train", "uid": job_uid,
                 "controller": True}
            ],
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }


GROUP = "train-abc-train-pgt-0-xyz"
FOREIGN_CASES = [
    # (name, the PodGroup the pod names as the API server has it, allowed)
    ("made by the pod's own Job controller (WorkloadWithJob): kept", _theirs(GROUP), True),
    ("controlled by another Job: refused", _theirs(GROUP, job_uid="other"), False),
    ("controlled by something else: refused", _theirs(GROUP, kind="JobSet"), False),
    ("no such PodGroup: refused", None, False),
]


@pytest.mark.parametrize(
    ("group", "allowed"), [pytest.param(*case[1:], id=case[0]) for case in FOREIGN_CASES]
)
async def test_pod_webhook_keeps_the_job_controllers_own_group(
    group: Obj | None, allowed: bool
) -> None:
    pod = _pod(group={"podGroupName": GROUP})
    asked: list[tuple[str, str]] = []

    async def read_group(namespace: str, name: str) -> Obj | None:
        asked.append((namespace, name))
        return group

    mutate = pod_mutator(lambda: True, claimant({"batch/job"}), read_group=read_group)
    verdict = await mutate(_create(copy.deepcopy(pod)))
    assert asked == [("team-a", GROUP)]
    assert verdict.allowed is allowed
    if allowed:
        out = verdict.patched if verdict.patched is not None else pod
        assert out["spec"]["schedulingGroup"] == {"podGroupName": GROUP}
        assert {"name": c.ADMISSION_GATE} in out["spec"]["schedulingGates"]
    else:
        assert verdict.errors[0].field == gang.SCHEDULING_GROUP_FIELD


async def test_prepare_leaves_the_job_controllers_group_alone(cluster: FakeCluster) -> None:
    """No second group, no owner or minCount change: the Job controller keeps minCount equal to
    spec.parallelism, which kqueue set to the admitted count."""
    j = job("train", count=2)
    wl = workload(j, admitted=2)
    theirs = _theirs(GROUP, job_uid=j["metadata"]["uid"])
    cluster.server.add(PODGROUPS_V1BETA1, copy.deepcopy(theirs))
    pods = _with_group(gated_pods(j, 2), GROUP)
    assert (await _v1beta1(cluster).prepare(wl, pods, 3)).ready
    [pg] = cluster.server.objects(PODGROUPS_V1BETA1)
    assert pg["metadata"]["ownerReferences"] == theirs["metadata"]["ownerReferences"]
    assert pg["spec"]["schedulingPolicy"] == theirs["spec"]["schedulingPolicy"]
    assert gang.ADMITTED_COUNT_ANNOTATION not in (pg["metadata"].get("annotations") or {})


def _scheduled_job(min_count: int | None) -> Obj:
    gang_policy: Obj = {} if min_count is None else {"minCount": min_count}
    obj = job("train", count=3)
    obj["spec"]["scheduling"] = {"schedulingPolicy": {"gang": gang_policy}}
    return obj


SCHEDULING_CASES = [
    # (name, Job, old Job or None (create), refused)
    ("gang without minCount: follows parallelism", _scheduled_job(None), None, False),
    ("no spec.scheduling", job("train", count=3), None, False),
    ("explicit minCount on create: refused", _scheduled_job(2), None, True),
    ("explicit minCount changed: refused", _scheduled_job(3), _scheduled_job(2), True),
    ("explicit minCount unchanged on update", _scheduled_job(2), _scheduled_job(2), False),
]


@pytest.mark.parametrize(
    ("obj", "old", "refused"), [pytest.param(*case[1:], id=case[0]) for case in SCHEDULING_CASES]
)
def test_job_scheduling_min_count_is_refused_naming_the_field(
    obj: Obj, old: Obj | None, refused: bool
) -> None:
    errors = scheduling_errors(obj, old)
    assert bool(errors) is refused
    for error in errors:
        assert error.field == SCHEDULING_MIN_COUNT_FIELD
        assert "spec.parallelism" in error.message and "remove minCount" in error.message


GATE_CASES = [
    # (name, version, extra gates, expected gates, expected runtime-config)
    (
        "1.37: v1beta1, GangScheduling folded into GenericWorkload",
        "v1.37.2",
        (),
        ["GenericWorkload=true", "TopologyAwareWorkloadScheduling=true"],
        ["scheduling.k8s.io/v1beta1=true"],
    ),
    (
        "1.37: WorkloadAwarePreemption dropped (folded), WorkloadWithJob kept",
        "v1.37.2",
        ("WorkloadAwarePreemption", "WorkloadWithJob"),
        ["GenericWorkload=true", "TopologyAwareWorkloadScheduling=true", "WorkloadWithJob=true"],
        ["scheduling.k8s.io/v1beta1=true"],
    ),
    (
        "1.36: v1alpha2 with GangScheduling",
        "v1.36.4",
        ("WorkloadAwarePreemption",),
        ["GenericWorkload=true", "GangScheduling=true", "WorkloadAwarePreemption=true"],
        ["scheduling.k8s.io/v1alpha2=true"],
    ),
]


@pytest.mark.parametrize(
    ("version", "extra", "gates", "runtime"),
    [pytest.param(*case[1:], id=case[0]) for case in GATE_CASES],
)
def test_gang_flags_per_release(
    version: str, extra: tuple[str, ...], gates: list[str], runtime: list[str]
) -> None:
    assert gang_flags(version, extra) == (gates, runtime)


@pytest.mark.parametrize("version", ["v1.35.2", "1.37", "latest"])
def test_gang_flags_refuse_a_release_without_the_api(version: str) -> None:
    with pytest.raises(ClusterStartError) as err:
        gang_flags(version)
    assert version in str(err.value)


def _member(bound: bool, refused: bool = False) -> Obj:
    pod: Obj = {"spec": {"nodeName": "n1"} if bound else {}, "status": {}}
    if refused:
        pod["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    return pod


RESIZED_VERDICT_CASES = [
    # (name, minCount, members, expected status or None)
    ("all of minCount bound: placed", 4, [_member(True)] * 4, "True"),
    ("raised to 4, 1 bound, added pods refused", 4, [_member(True)] + [_member(False, True)] * 3, "False"),
    ("raised to 4, 1 bound, not tried yet: no verdict", 4, [_member(True)] + [_member(False)] * 3, None),
]


@pytest.mark.parametrize(
    ("min_count", "members", "want"),
    [pytest.param(*case[1:], id=case[0]) for case in RESIZED_VERDICT_CASES],
)
def test_initially_scheduled_is_not_taken_for_a_resized_group(
    min_count: int, members: list[Obj], want: str | None
) -> None:
    """v1beta1's PodGroupInitiallyScheduled stays True after the first placement."""
    group = {"spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}
    got = gang.resized_verdict({"status": "True", "reason": "Scheduled"}, group, members)
    assert (got or {}).get("status") == want
