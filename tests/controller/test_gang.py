"""Gang scheduling hand-off, without a cluster: the pod webhook's group reference, discovery,
the PodGroup kqueue sizes before releasing pods, kube-scheduler's verdict on the Workload."""

from __future__ import annotations

import copy
import dataclasses
import re
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient, Configuration

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.controller.gang import PODGROUPS, GangPlacement, group_name
from kqueue.controller.kube import Kube
from kqueue.controller.resources import WORKLOADS
from kqueue.controller.webhook_server import AdmissionRequest
from kqueue.controller.webhooks import claimant
from kqueue.controller.webhooks.pod import pod_mutator
from tests.controller.fake_apiserver import FakeCluster, Refused
from tests.controller.fakes import Events
from tests.controller.test_job_reconciler import gated_pods, job, workload

Obj = dict[str, Any]
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _pod(
    *,
    owner: str | None = "train",
    group: Obj | None = None,
    managed: bool = True,
    opt_out: bool = False,
) -> Obj:
    meta: Obj = {"name": "p", "namespace": "team-a", "labels": {}}
    if opt_out:
        meta["annotations"] = {gang.GANG_SCHEDULING_ANNOTATION: "false"}
    if managed:
        meta["labels"][c.MANAGED_LABEL] = "true"
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": owner,
                "uid": "u1",
                "controller": True,
            }
        ]
    spec: Obj = {"containers": [{"name": "main", "image": "pause"}]}
    if group is not None:
        spec["schedulingGroup"] = group
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _create(pod: Obj) -> AdmissionRequest:
    return AdmissionRequest(
        uid="r1",
        kind={"group": "", "version": "v1", "kind": "Pod"},
        resource={"group": "", "version": "v1", "resource": "pods"},
        sub_resource=None,
        name="p",
        namespace="team-a",
        operation="CREATE",
        object=pod,
        old_object=None,
        user_info={},
        dry_run=False,
    )


# -- the pod webhook ------------------------------------------------------------------------------

MUTATION_CASES = [
    # (name, gang on, pod, expected group or None, refused)
    ("gang off: gate only", False, _pod(), None, False),
    ("gang on: pod of a Job names the Job's group", True, _pod(), "job-train-u1", False),
    ("gang on: pod claimed by no integration gets no group", True, _pod(owner=None), None, False),
    ("gang on: pod opted out gets no group", True, _pod(opt_out=True), None, False),
    (
        "gang on: reinvoked with kqueue's own group",
        True,
        _pod(group={"podGroupName": "job-train-u1"}),
        "job-train-u1",
        False,
    ),
    ("gang on: user-set group refused", True, _pod(group={"podGroupName": "mine"}), None, True),
    ("gang off: user-set group refused", False, _pod(group={"podGroupName": "mine"}), None, True),
    (
        "unmanaged pod left alone",
        True,
        _pod(managed=False, group={"podGroupName": "mine"}),
        "mine",
        False,
    ),
]


@pytest.mark.parametrize(
    ("on", "pod", "want_group", "refused"),
    [pytest.param(*case[1:], id=case[0]) for case in MUTATION_CASES],
)
async def test_pod_webhook_sets_or_refuses_the_scheduling_group(
    on: bool, pod: Obj, want_group: str | None, refused: bool
) -> None:
    mutate = pod_mutator(lambda: on, claimant({"batch/job"}))
    verdict = await mutate(_create(copy.deepcopy(pod)))
    if refused:
        assert not verdict.allowed
        [error] = verdict.errors
        assert error.field == gang.SCHEDULING_GROUP_FIELD
        assert c.MANAGED_LABEL in error.message and "remove spec.schedulingGroup" in error.message
        return
    assert verdict.allowed
    out = verdict.patched if verdict.patched is not None else pod
    assert (out["spec"].get("schedulingGroup") or {}).get("podGroupName") == want_group
    if pod["metadata"]["labels"].get(c.MANAGED_LABEL):
        assert {"name": c.ADMISSION_GATE} in out["spec"]["schedulingGates"]


EPOCH_CASES = [
    # (name, epoch answer, expected group)
    ("not resizable: the object's group", None, "job-train-u1"),
    ("resizable: the group of the object's current size", "g3", "job-train-u1-g3"),
]


@pytest.mark.parametrize(
    ("size", "want_group"), [pytest.param(*case[1:], id=case[0]) for case in EPOCH_CASES]
)
async def test_pod_webhook_names_one_group_per_size_of_a_resizable_object(
    size: str | None, want_group: str
) -> None:
    asked: list[tuple[str, str, str, str | None]] = []

    async def identity(
        kind: str, namespace: str, name: str, uid: str | None
    ) -> tuple[str | None, str | None]:
        asked.append((kind, namespace, name, uid))
        return uid, size

    mutate = pod_mutator(lambda: True, claimant({"batch/job"}), identity)
    verdict = await mutate(_create(_pod()))
    assert verdict.allowed and verdict.patched is not None
    assert verdict.patched["spec"]["schedulingGroup"] == {"podGroupName": want_group}
    assert asked == [("Job", "team-a", "train", "u1")]
    # Reinvoked with the group it chose: kept; with another size's group: refused.
    again = await mutate(_create(verdict.patched))
    assert again.allowed
    stale = _pod(group={"podGroupName": "job-train-u1-g1"})
    assert not (await mutate(_create(stale))).allowed


async def test_pod_webhook_refuses_the_pod_when_the_size_cannot_be_read() -> None:
    from kqueue.controller.kube import KubeError

    async def identity(
        kind: str, namespace: str, name: str, uid: str | None
    ) -> tuple[str | None, str | None]:
        raise KubeError(what="list Job", status=503, body={"message": "unavailable"})

    verdict = await pod_mutator(lambda: True, claimant({"batch/job"}), identity)(_create(_pod()))
    assert not verdict.allowed
    [error] = verdict.errors
    assert error.field == gang.SCHEDULING_GROUP_FIELD
    assert "Job team-a/train" in error.message and "503" in error.message


IDENTITY_CASES = [
    # (name, kind, object name, uid on the pod, expected (uid, epoch), objects read)
    ("a Job's pod: read whether it is elastic", "Job", "fixed", "u1", ("u1", None), 1),
    ("a kind that never resizes, UID on the pod: nothing to read", "JobSet", "trainer", "u9", ("u9", None), 0),
    ("an elastic Job's pod: its generation", "Job", "grow", "u2", ("u2", "g4"), 1),
    ("a JobSet's pod: its UID", "JobSet", "trainer", None, ("js-uid", None), 1),
    ("a JobSet already gone: as claimed", "JobSet", "gone", None, (None, None), 1),
    ("a kind not enabled: as claimed", "MPIJob", "pi", None, (None, None), 0),
]


@pytest.mark.parametrize(
    ("kind", "name", "uid", "want", "reads"),
    [pytest.param(*case[1:], id=case[0]) for case in IDENTITY_CASES],
)
async def test_identity_reads_uid_and_size_only_when_needed(
    cluster: FakeCluster,
    kind: str,
    name: str,
    uid: str | None,
    want: tuple[str | None, str | None],
    reads: int,
) -> None:
    from kqueue.controller.integrations.jobset.generic import JOBSETS
    from kqueue.controller.resources import JOBS
    from kqueue.controller.webhooks import identities

    elastic = job("grow", count=2)
    elastic["metadata"]["annotations"] = {c.ELASTIC_JOB_ANNOTATION: "true"}
    elastic["metadata"]["generation"] = 4
    cluster.server.add(JOBS, elastic)
    cluster.server.add(JOBS, job("fixed", count=2))
    cluster.server.add(
        JOBSETS,
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "trainer", "namespace": "team-a", "uid": "js-uid"},
        },
    )
    before = len(cluster.server.requests)
    identity = identities({"batch/job", "jobset.x-k8s.io/jobset"}, cluster.kube)
    assert await identity(kind, "team-a", name, uid) == want
    assert len(cluster.server.requests) - before == reads


def test_claimant_prefers_the_top_level_object() -> None:
    pod = _pod(owner="trainer-workers-0")
    pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = "trainer"
    assert claimant({"batch/job"})(pod) == ("Job", "trainer-workers-0", "u1")
    # The JobSet is not the pod's controller: its UID is not on the pod, its name is.
    assert claimant({"batch/job", "jobset.x-k8s.io/jobset"})(pod) == ("JobSet", "trainer", None)


@pytest.mark.parametrize(
    ("kind", "name", "uid"),
    [
        ("Job", "a", None),
        ("Job", "a", "0f1e2d3c-aaaa-bbbb"),
        ("JobSet", "x" * 63, None),
        ("Job", "y" * 253, "0f1e2d3c-aaaa-bbbb"),
    ],
    ids=["short", "short-with-uid", "longest-label", "longest-subdomain"],
)
def test_group_name_is_a_stable_dns_subdomain(kind: str, name: str, uid: str | None) -> None:
    out = group_name(kind, name, uid)
    assert out == group_name(kind, name, uid)
    assert len(out) <= 253 and out[0].isalnum() and out[-1].isalnum()
    assert out.startswith(kind.lower() + "-")
    assert group_name(kind, name + "z", uid) != out
    if len(name) < 200:
        assert out == f"{kind.lower()}-{name}" + (f"-{uid[:8]}" if uid else "")
    # Another object of the same name (recreated) gets another group.
    assert group_name(kind, name, "99999999-cccc") != out


JOB_WAVE_CASES = [
    # (name, completions, parallelism, partial admission, runs in waves)
    ("work queue", None, 4, False, False),
    ("one wave", 4, 4, False, False),
    ("fewer completions than parallelism", 2, 4, False, False),
    ("more completions than parallelism", 6, 4, False, True),
    ("partial admission may shrink the wave", 4, 4, True, True),
    ("single pod with partial admission", 1, 1, True, False),
]


@pytest.mark.parametrize(
    ("completions", "parallelism", "partial", "waves"),
    [pytest.param(*case[1:], id=case[0]) for case in JOB_WAVE_CASES],
)
async def test_job_webhook_keeps_jobs_that_run_in_waves_out_of_gangs(
    completions: int | None, parallelism: int, partial: bool, waves: bool
) -> None:
    from kqueue.controller.integrations.job.webhook import JobWebhooks, runs_in_waves
    from tests.controller_e2e.harness import job as e2e_job

    obj = e2e_job("train", "team-a", "main", count=parallelism)
    obj["spec"]["completions"] = completions
    if partial:
        obj["metadata"]["annotations"][c.JOB_MIN_PARALLELISM_ANNOTATION] = "1"
    assert runs_in_waves(obj) is waves
    req = dataclasses.replace(
        _create(obj),
        kind={"group": "batch", "version": "v1", "kind": "Job"},
        resource={"group": "batch", "version": "v1", "resource": "jobs"},
    )
    verdict = await JobWebhooks().mutate(req)
    assert verdict.allowed and verdict.patched is not None
    annotations = verdict.patched["spec"]["template"]["metadata"].get("annotations") or {}
    assert (annotations.get(gang.GANG_SCHEDULING_ANNOTATION) == "false") is waves
    # The rest of the mutation is kept: gated, labelled, suspended while queued.
    assert verdict.patched["spec"]["suspend"] is True


# -- discovery ------------------------------------------------------------------------------------


DISCOVERY = "/apis/scheduling.k8s.io/v1alpha2"
SERVED = ["podgroups", "workloads"]
UNREACHABLE = None  # nothing listens where the client connects


@pytest.mark.parametrize(
    ("mode", "served", "enabled", "log"),
    [
        pytest.param("Auto", SERVED, True, "gang scheduling: on", id="auto-served"),
        pytest.param("Auto", [], False, "does not serve", id="auto-not-served"),
        pytest.param("Auto", ["workloads"], False, "does not serve", id="auto-no-podgroups"),
        pytest.param("Auto", UNREACHABLE, False, "unreachable", id="auto-unreachable"),
        pytest.param("Disabled", SERVED, False, "gangScheduling: Disabled", id="disabled"),
    ],
)
async def test_discovery(
    mode: Any,
    served: list[str] | None,
    enabled: bool,
    log: str,
    caplog: pytest.LogCaptureFixture,
    cluster: FakeCluster,
) -> None:
    kube = cluster.kube
    if served is UNREACHABLE:
        with socket.socket() as s:  # a port just freed: the connection is refused
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        kube = Kube(ApiClient(Configuration(host=f"http://127.0.0.1:{port}")))
    elif served:
        cluster.server.discovery["scheduling.k8s.io/v1alpha2"] = served
    placement = GangPlacement(kube=kube, events=Events(), now=lambda: NOW, mode=mode)
    try:
        with caplog.at_level("INFO", logger="kqueue.controller.gang"):
            assert await placement.discover() is enabled
    finally:
        if kube is not cluster.kube:
            await kube.api.close()
    assert placement.enabled is enabled
    assert log in caplog.text
    asked = [r for r in cluster.server.requests if (r.method, r.path) == ("GET", DISCOVERY)]
    assert len(asked) == (0 if mode == "Disabled" or served is UNREACHABLE else 1)


# -- PodGroups ------------------------------------------------------------------------------------


def _with_group(pods: list[Obj], name: str) -> list[Obj]:
    for p in pods:
        p["spec"]["schedulingGroup"] = {"podGroupName": name}
    return pods


def _placement(cluster: FakeCluster, events: Events | None = None) -> GangPlacement:
    placement = GangPlacement(kube=cluster.kube, events=events or Events(), now=lambda: NOW)
    placement.enabled = True
    return placement


@pytest.mark.parametrize(
    ("admitted", "want"),
    [pytest.param(4, 4, id="whole-admission"), pytest.param(3, 3, id="partial-admission")],
)
async def test_prepare_creates_the_group_for_the_admitted_count(
    cluster: FakeCluster, admitted: int, want: int
) -> None:
    j = job("train", count=4)
    wl = workload(j, admitted=admitted)
    pods = _with_group(gated_pods(j, 4), "job-train")
    prepared = await _placement(cluster).prepare(wl, pods, admitted)
    assert prepared.ready
    pg = cluster.server.get(gang.PODGROUPS, "job-train", "team-a")
    assert pg is not None
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": want}}
    assert [r["uid"] for r in pg["metadata"]["ownerReferences"]] == [wl.metadata.uid]
    assert pg["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == str(want)


async def test_a_released_pod_out_of_the_gang_does_not_shrink_its_group(cluster: FakeCluster) -> None:
    """A Spark driver (``kqueue.io/gang-scheduling: "false"``) runs before its executors
    exist: released and in no group, it is not one of the gang's pods placed elsewhere."""
    j = job("spark", count=3)
    wl = workload(j, admitted=3)
    driver, *executors = gated_pods(j, 3)
    del driver["spec"]["schedulingGates"]
    driver["metadata"].setdefault("annotations", {})[gang.GANG_SCHEDULING_ANNOTATION] = "false"
    prepared = await _placement(cluster).prepare(wl, [driver, *_with_group(executors, "spark")], 2)
    assert prepared.ready
    pg = cluster.server.get(gang.PODGROUPS, "spark", "team-a")
    assert pg is not None and pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


async def test_prepare_without_groups_or_when_off_does_nothing(cluster: FakeCluster) -> None:
    j = job("train", count=2)
    wl = workload(j, admitted=2)
    assert (await _placement(cluster).prepare(wl, gated_pods(j, 2), 2)).ready
    off = GangPlacement(kube=cluster.kube, events=Events(), now=lambda: NOW)
    assert (await off.prepare(wl, _with_group(gated_pods(j, 2), "job-train"), 2)).ready
    assert cluster.server.objects(gang.PODGROUPS) == []


async def test_a_stale_group_named_by_held_pods_is_kept_and_reported(
    cluster: FakeCluster,
) -> None:
    """Deleting it would never finish (the held pods name it): it is kept, handed over, and a
    minCount its pods cannot meet is reported."""
    j = job("train", count=4)
    old = workload(j, admitted=4)
    old.metadata.uid = "wl-old"
    cluster.server.add(gang.PODGROUPS, gang.pod_group_manifest(old, "job-train", 4))
    wl = workload(j, admitted=2)
    events = Events()
    pods = _with_group(gated_pods(j, 2), "job-train")
    assert (await _placement(cluster, events).prepare(wl, pods, 2)).ready
    pg = cluster.server.get(gang.PODGROUPS, "job-train", "team-a")
    assert pg is not None and pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert [r["uid"] for r in pg["metadata"]["ownerReferences"]] == [wl.metadata.uid]
    assert events.reasons(wl.name) == ["PodGroupTooLarge"]


async def test_a_running_group_is_handed_to_the_next_slice(cluster: FakeCluster) -> None:
    j = job("grow", count=3)
    first = workload(j, admitted=2)
    first.metadata.uid = "wl-slice-1"
    cluster.server.add(gang.PODGROUPS, gang.pod_group_manifest(first, "job-grow", 2))
    second = workload(j, admitted=3)
    pods = _with_group(gated_pods(j, 3), "job-grow")
    for p in pods[:2]:
        del p["spec"]["schedulingGates"]  # the first slice's pods run
    events = Events()
    assert (await _placement(cluster, events).prepare(second, pods, 3)).ready
    pg = cluster.server.get(gang.PODGROUPS, "job-grow", "team-a")
    assert pg is not None
    assert [r["uid"] for r in pg["metadata"]["ownerReferences"]] == [second.metadata.uid]
    assert pg["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == "3"
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2  # immutable
    assert "PodGroupKept" in events.reasons(second.name)


def _sized(pods: list[Obj], groups: list[str], running: int) -> list[Obj]:
    """``pods`` naming ``groups`` in turn... one group per pod as listed; the first ``running``
    have left the gate."""
    for p, g in zip(pods, groups, strict=True):
        p["spec"]["schedulingGroup"] = {"podGroupName": g}
    for p in pods[:running]:
        del p["spec"]["schedulingGates"]
    return pods


FRESH_COUNT_CASES = [
    # (name, groups of the pods in order, running, admitted, new groups, expected)
    ("first admission, all pods exist", ["a"] * 4, 0, 4, ["a"], {"a": 4}),
    ("first admission, pods still being created", ["a"] * 2, 0, 4, ["a"], {"a": 4}),
    ("elastic scale-up 2 -> 3", ["a", "a", "b"], 2, 3, ["b"], {"b": 1}),
    ("elastic scale-up 2 -> 5, two added pods not created yet", ["a", "a", "b"], 2, 5, ["b"], {"b": 3}),
    ("a replacement of a running pod joins the new size", ["a", "b", "b"], 1, 3, ["b"], {"b": 2}),
    ("two sizes while created, all exist", ["a", "a", "b", "b", "b"], 0, 5, ["a", "b"], {"a": 2, "b": 3}),
    ("two sizes while created, some missing", ["a", "b"], 0, 5, ["a", "b"], "waiting for all 5"),
    # The old slice still drives the Job when the added pods appear: no room, no group yet.
    ("scale-up pods before their slice is admitted", ["a", "a", "b"], 2, 2, ["b"], {}),
]


@pytest.mark.parametrize(
    ("groups", "running", "admitted", "fresh", "want"),
    [pytest.param(*case[1:], id=case[0]) for case in FRESH_COUNT_CASES],
)
def test_fresh_group_counts(
    groups: list[str], running: int, admitted: int, fresh: list[str], want: Any
) -> None:
    pods = _sized(gated_pods(job("grow", count=admitted), len(groups)), groups, running)
    got = gang.fresh_counts(fresh, pods, admitted)
    if isinstance(want, str):
        assert isinstance(got, str) and want in got
    else:
        assert got == want


async def test_elastic_scale_up_gets_a_group_of_its_own(cluster: FakeCluster) -> None:
    """The running gang keeps its group (handed to the new slice); the added pods' group is
    created for them alone, so kube-scheduler places them all or nothing."""
    j = job("grow", count=5)
    first = workload(j, admitted=2)
    first.metadata.uid = "wl-slice-1"
    cluster.server.add(gang.PODGROUPS, gang.pod_group_manifest(first, "job-grow-g2", 2))
    second = workload(j, admitted=5)
    pods = _sized(gated_pods(j, 5), ["job-grow-g2"] * 2 + ["job-grow-g5"] * 3, running=2)
    events = Events()
    placement = _placement(cluster, events)
    # The old slice still drives the Job when the added pods appear: their group waits.
    assert (await placement.prepare(first, pods, 2)).ready
    assert cluster.server.get(gang.PODGROUPS, "job-grow-g5", "team-a") is None
    assert (await placement.prepare(second, pods, 5)).ready
    old = cluster.server.get(gang.PODGROUPS, "job-grow-g2", "team-a")
    new = cluster.server.get(gang.PODGROUPS, "job-grow-g5", "team-a")
    assert old is not None and new is not None
    assert old["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    assert new["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    for pg in (old, new):
        assert [r["uid"] for r in pg["metadata"]["ownerReferences"]] == [second.metadata.uid]
        assert pg["metadata"]["annotations"][gang.ADMITTED_COUNT_ANNOTATION] == "5"
    assert events.reasons(second.name) == []  # nothing joins a running gang
    # Asked again (a partial release retried): nothing changes, nothing is replaced.
    assert (await placement.prepare(second, pods, 5)).ready
    again = cluster.server.get(gang.PODGROUPS, "job-grow-g5", "team-a")
    assert again is not None and again["metadata"]["uid"] == new["metadata"]["uid"]
    # Evicted: every group of the object goes with the slice that holds them.
    await placement.forget(second, pods)
    assert cluster.server.objects(gang.PODGROUPS) == []


async def test_a_terminating_group_holds_the_release(cluster: FakeCluster) -> None:
    j = job("train", count=2)
    wl = workload(j, admitted=2)
    doc = gang.pod_group_manifest(wl, "job-train", 2)
    doc["metadata"]["deletionTimestamp"] = "2025-03-01T11:59:00Z"
    cluster.server.add(gang.PODGROUPS, doc)
    events = Events()
    pods = _with_group(gated_pods(j, 2), "job-train")
    prepared = await _placement(cluster, events).prepare(wl, pods, 2)
    assert not prepared.ready and "terminating" in prepared.why
    assert events.reasons(wl.name) == []  # its own group, going with its eviction
    # An earlier object's group, which this workload's held pods keep alive: reported.
    newer = workload(j, admitted=2)
    newer.metadata.uid = "wl-newer"
    assert not (await _placement(cluster, events).prepare(newer, pods, 2)).ready
    assert events.reasons(newer.name) == ["PodGroupTerminating"]


async def test_forget_deletes_only_the_evicted_workloads_group(cluster: FakeCluster) -> None:
    j = job("train", count=2)
    wl = workload(j, admitted=2)
    cluster.server.add(gang.PODGROUPS, gang.pod_group_manifest(wl, "job-train", 2))
    other = workload(job("other"), admitted=2)
    cluster.server.add(gang.PODGROUPS, gang.pod_group_manifest(other, "job-other", 2))
    pods = _with_group(gated_pods(j, 2), "job-train") + _with_group(
        gated_pods(job("x"), 1), "job-other"
    )
    await _placement(cluster).forget(wl, pods)
    assert cluster.server.get(gang.PODGROUPS, "job-train", "team-a") is None
    assert cluster.server.get(gang.PODGROUPS, "job-other", "team-a") is not None


# -- the verdict ----------------------------------------------------------------------------------


def _unschedulable_pods(j: Obj) -> list[Obj]:
    pods = _with_group(gated_pods(j, 2), "job-train")
    messages = [
        "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled",
        "0/2 nodes are available: 2 Insufficient cpu.",
    ]
    for p, m in zip(pods, messages, strict=True):
        del p["spec"]["schedulingGates"]
        p["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": m}
        ]
    return pods


@pytest.mark.parametrize(
    ("status", "reason", "want_requeue", "want_event"),
    [
        pytest.param(
            "False", "Unschedulable", True, gang.GANG_UNSCHEDULABLE_EVENT, id="unschedulable"
        ),
        pytest.param("True", "Scheduled", False, gang.GANG_SCHEDULED_EVENT, id="scheduled"),
    ],
)
async def test_report_copies_the_verdict_to_the_workload(
    cluster: FakeCluster, status: str, reason: str, want_requeue: bool, want_event: str
) -> None:
    j = job("train", count=2)
    wl = workload(j, admitted=2)
    stored = cluster.server.add(WORKLOADS, wl.to_dict())
    wl.metadata.resource_version = stored["metadata"]["resourceVersion"]
    pg = gang.pod_group_manifest(wl, "job-train", 2)
    pg["status"] = {
        "conditions": [
            {
                "type": gang.POD_GROUP_SCHEDULED,
                "status": status,
                "reason": reason,
                "message": "pod group is unschedulable",
            }
        ]
    }
    cluster.server.add(gang.PODGROUPS, pg)
    events = Events()
    recheck = await _placement(cluster, events).report(wl, _unschedulable_pods(j))
    assert (recheck is not None) is want_requeue
    written = cluster.server.get(WORKLOADS, wl.name, "team-a")
    assert written is not None
    [cond] = [x for x in written["status"]["conditions"] if x["type"] == gang.POD_GROUP_SCHEDULED]
    assert (cond["status"], cond["reason"]) == (status, reason)
    if status == "False":
        # The pod that did not fit says why, not the ones waiting for it.
        assert "Insufficient cpu" in cond["message"] and "job-train" in cond["message"]
    assert events.reasons(wl.name) == [want_event]


async def test_report_without_a_verdict_yet_asks_again(cluster: FakeCluster) -> None:
    j = job("train", count=2)
    wl = workload(j, admitted=2)
    cluster.server.add(gang.PODGROUPS, gang.pod_group_manifest(wl, "job-train", 2))
    assert (
        await _placement(cluster).report(wl, _with_group(gated_pods(j, 2), "job-train"))
        == gang.RECHECK_S
    )


# -- properties -----------------------------------------------------------------------------------

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?", fullmatch=True)
_kinds = st.sampled_from(["Job", "JobSet", "MPIJob", "RayJob"])
_uids = st.none() | st.uuids().map(str)


@settings(max_examples=200, deadline=None)
@given(kind=_kinds, name=_names, uid=_uids)
def test_group_name_is_always_a_valid_distinct_name(kind: str, name: str, uid: str | None) -> None:
    out = group_name(kind, name, uid)
    assert len(out) <= 253 and _DNS_SUBDOMAIN.match(out), out
    # Different objects never share a group: another name, or (known) another UID.
    assert group_name(kind, name + "x", uid) != out
    if uid is not None:
        assert group_name(kind, name, None) != out


@settings(max_examples=100, deadline=None)
@given(
    on=st.booleans(),
    owner=st.none() | _names.filter(lambda n: len(n) <= 63),
    given_group=st.none() | _names.filter(lambda n: len(n) <= 63),
    managed=st.booleans(),
)
async def test_pod_webhook_never_lets_a_foreign_group_into_a_managed_pod(
    on: bool, owner: str | None, given_group: str | None, managed: bool
) -> None:
    pod = _pod(
        owner=owner,
        group={"podGroupName": given_group} if given_group is not None else None,
        managed=managed,
    )
    verdict = await pod_mutator(lambda: on, claimant({"batch/job"}))(_create(pod))
    ours = group_name("Job", owner, "u1") if on and owner is not None else None
    out = verdict.patched if verdict.patched is not None else pod
    final = (out["spec"].get("schedulingGroup") or {}).get("podGroupName")
    if not managed:
        assert verdict.allowed and verdict.patched is None
    elif given_group is not None and given_group != ours:
        assert not verdict.allowed
    else:
        assert verdict.allowed and final == ours


# -- workload-aware preemption (KEP-5710) ---------------------------------------------------------


def _pod_group_admission(gate: str) -> Callable[[Obj], Obj]:
    """What an API server with or without ``WorkloadAwarePreemption`` stores for a created
    PodGroup. With it off, v1.36.4 drops the fields and defaults ``disruptionMode`` to ``Pod``
    ("drop", seen on the real control plane); its declarative validation would answer
    Forbidden ("refuse")."""

    def admit(body: Obj) -> Obj:
        fields = {"disruptionMode", "priorityClassName"} & set(body["spec"])
        if gate == "drop" and fields:
            body["spec"].pop("priorityClassName", None)
            body["spec"]["disruptionMode"] = "Pod"
        if gate == "refuse" and fields:
            raise Refused(
                422,
                "Invalid",
                f'PodGroup.scheduling.k8s.io "{body["metadata"]["name"]}" is invalid: '
                "spec.disruptionMode: Forbidden: disabled by feature-gate",
            )
        return body

    return admit


PREEMPTION_CASES = [
    # (name, API server, workload's priority class (group, name) or None, expected spec extras)
    (
        "gate on, PriorityClass",
        "on",
        ("scheduling.k8s.io", "high"),
        {"disruptionMode": "PodGroup", "priorityClassName": "high"},
    ),
    (
        "gate on, WorkloadPriorityClass: no class name to give",
        "on",
        ("kqueue.io", "batch-high"),
        {"disruptionMode": "PodGroup"},
    ),
    ("gate on, no priority class", "on", None, {"disruptionMode": "PodGroup"}),
    (
        "gate off, fields dropped",
        "drop",
        ("scheduling.k8s.io", "high"),
        {"disruptionMode": "Pod"},
    ),
    ("gate off, fields refused: created without them", "refuse", ("scheduling.k8s.io", "high"), {}),
]


@pytest.mark.parametrize(
    ("gate", "ref", "extras"), [pytest.param(*case[1:], id=case[0]) for case in PREEMPTION_CASES]
)
async def test_pod_group_carries_workload_preemption_fields_when_served(
    gate: str, ref: tuple[str, str] | None, extras: Obj, cluster: FakeCluster
) -> None:
    from kqueue.api.v1alpha1.workload import PriorityClassRef

    server = cluster.server
    server.admission[PODGROUPS.plural] = _pod_group_admission(gate)
    placement = _placement(cluster)
    j = job("train", count=2)
    wl = workload(j, admitted=2)
    if ref is not None:
        kind = "PriorityClass" if ref[0] == "scheduling.k8s.io" else "WorkloadPriorityClass"
        wl.spec.priority_class_ref = PriorityClassRef(group=ref[0], kind=kind, name=ref[1])
        wl.spec.priority = 100
    pods = _with_group(gated_pods(j, 2), "job-train")
    assert (await placement.prepare(wl, pods, 2)).ready
    assert placement.workload_preemption is (gate == "on")
    [pg] = server.objects(PODGROUPS)
    got = {k: v for k, v in pg["spec"].items() if k in ("disruptionMode", "priorityClassName")}
    assert got == extras
    assert "priority" not in pg["spec"]  # the API server resolves it from the class
    assert len(server.requests_to("POST", PODGROUPS)) == (2 if gate == "refuse" else 1)
    # Learnt once: the next group is created in one request.
    attempts = len(server.requests_to("POST", PODGROUPS))
    assert (await placement.prepare(wl, _with_group(gated_pods(j, 2), "job-other"), 2)).ready
    [other] = [o for o in server.objects(PODGROUPS) if o["metadata"]["name"] == "job-other"]
    assert len(server.requests_to("POST", PODGROUPS)) - attempts == 1
    assert len(server.objects(PODGROUPS)) == 2
    if gate != "on":
        assert not {"disruptionMode", "priorityClassName"} & set(other["spec"])


def _plain(total: int | None, group: Obj | None = None) -> Obj:
    pod = _pod(owner=None, group=group)
    pod["metadata"]["labels"][c.QUEUE_NAME_LABEL] = "main"
    if total is not None:
        pod["metadata"]["labels"][c.POD_GROUP_NAME_LABEL] = "trainers"
        pod["metadata"]["annotations"] = {c.POD_GROUP_TOTAL_COUNT_ANNOTATION: str(total)}
    return pod


PLAIN_POD_CASES = [
    # (name, pod, expected group or None, refused)
    ("pod of a group of 4: the group's PodGroup", _plain(4), "pod-group-trainers", False),
    ("pod of a group of 1: no gang", _plain(1), None, False),
    ("single pod: no gang", _plain(None), None, False),
    (
        "pod of a group with a user-set group: refused",
        _plain(4, {"podGroupName": "mine"}),
        None,
        True,
    ),
    ("single pod with a user-set group: refused", _plain(None, {"podGroupName": "mine"}), None, True),
]


@pytest.mark.parametrize(
    ("pod", "want_group", "refused"),
    [pytest.param(*case[1:], id=case[0]) for case in PLAIN_POD_CASES],
)
async def test_plain_pod_groups_name_their_pod_group(
    pod: Obj, want_group: str | None, refused: bool
) -> None:
    verdict = await pod_mutator(lambda: True, claimant({"batch/job", "pod"}))(_create(pod))
    if refused:
        assert not verdict.allowed
        [error] = verdict.errors
        assert error.field == gang.SCHEDULING_GROUP_FIELD and "mine" in error.message
        return
    assert verdict.allowed
    out = verdict.patched if verdict.patched is not None else pod
    assert (out["spec"].get("schedulingGroup") or {}).get("podGroupName") == want_group
