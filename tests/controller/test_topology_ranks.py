"""Rank-ordered pinning for every kind whose pods carry a rank: each integration declares where
(kqueue.api.integrations.declaration.Ranks), and a released pod goes to its rank's domain.

Kueue's topology_ungater_test.go "ranks: ..." cases for JobSet, LeaderWorkerSet, Kubeflow and pod
groups, ported by name (the batch/Job ones are in tests/controller/test_topology.py), each reading
its ranks from the kind's declaration as the reconciler does (registry.ranks), plus the wiring
through the reconciler."""

from __future__ import annotations

from typing import Any

from kqueue.api.integrations import PriorityClasses, registry
from kqueue.api.integrations.appwrapper import API_VERSION as AW_API_VERSION
from kqueue.api.integrations.appwrapper import (
    TAS_POD_INDEX_LABEL_ANNOTATION,
    TAS_SUB_GROUP_COUNT_ANNOTATION,
    TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION,
)
from kqueue.api.integrations.declaration import Ranks
from kqueue.api.integrations.job import COMPLETION_INDEX_LABEL
from kqueue.api.integrations.jobset import JOB_INDEX_LABEL, JOBSET_API_VERSION
from kqueue.api.integrations.kubeflow import API_VERSION as KUBEFLOW_API_VERSION
from kqueue.api.integrations.leaderworkerset import (
    LWS_API_VERSION,
    LWS_KIND,
    WORKER_INDEX_LABEL,
    leaderworkerset_pods,
)
from kqueue.api.integrations.mpijob import MPIJOB_API_VERSION, REPLICA_INDEX_LABEL
from kqueue.api.integrations.statefulset import POD_INDEX_LABEL as STS_POD_INDEX_LABEL
from kqueue.api.v1alpha1 import Workload, parse_object
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import PodSetRelease
from kqueue.controller.integrations.release import pinned
from kqueue.controller.topology import pod_rank
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_job_reconciler import World, gated_pods, job, workload

Obj = dict[str, Any]
B1R1, B1R2, B2R1 = (
    {"block": "b1", "rack": "r1"}, {"block": "b1", "rack": "r2"}, {"block": "b2", "rack": "r1"}
)
TEMPLATE: Obj = {"spec": {"containers": [{"name": "c", "image": "x"}]}}


def _workload(**counts: int) -> Workload:
    """A Workload with one pod set per keyword (name: count)."""
    wl = parse_object({
        "apiVersion": c.API_VERSION, "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": [
            {"name": name, "count": n, "template": TEMPLATE} for name, n in counts.items()
        ]},
    })
    assert isinstance(wl, Workload)
    return wl


def _pod(name: str, labels: dict[str, str], selector: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> Obj:
    """A pod: gated, or running with ``selector`` (its domain)."""
    spec: Obj = {"containers": [{"name": "c"}]}
    if selector is None:
        spec["schedulingGates"] = [{"name": c.ADMISSION_GATE}]
    else:
        spec["nodeSelector"] = dict(selector)
    meta: Obj = {"name": name, "namespace": "ns", "labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _release(
    name: str, count: int, domains: tuple[tuple[dict[str, str], int], ...], ranks: Ranks | None
) -> PodSetRelease:
    return PodSetRelease(name, count, {}, domains=domains, ranks=ranks)


def _where(got: list[tuple[Obj, PodSetRelease]]) -> dict[str, tuple[str, str]]:
    return {p["metadata"]["name"]: (r.node_selector["block"], r.node_selector["rack"])
            for p, r in got}


def _split(pods: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    running = [p for p in pods if "nodeSelector" in p["spec"]]
    return running, [p for p in pods if "nodeSelector" not in p["spec"]]


# -- JobSet: completion index within the child Job, child Job index as the sub-group ---------


def _jobset(replicas: int, per_job: int) -> Obj:
    job_spec = {"parallelism": per_job, "completions": per_job, "completionMode": "Indexed",
                "template": TEMPLATE}
    return {
        "apiVersion": JOBSET_API_VERSION, "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns"},
        "spec": {"replicatedJobs": [
            {"name": "main", "replicas": replicas, "template": {"spec": job_spec}}
        ]},
    }


def _jobset_ranks() -> Ranks | None:
    js = _jobset(replicas=2, per_job=2)
    wl = registry.of(JOBSET_API_VERSION, "JobSet").build(  # type: ignore[union-attr,misc]
        js, PriorityClasses.from_objects([], [])
    )
    return registry.ranks(JOBSET_API_VERSION, "JobSet", js, wl).get("main")


JOBSET_DOMAINS = ((B1R1, 2), (B1R2, 1), (B2R1, 1))


def _jobset_pod(name: str, index: int, job_index: int, selector: dict[str, str] | None = None
                ) -> Obj:
    return _pod(name, {COMPLETION_INDEX_LABEL: str(index), JOB_INDEX_LABEL: str(job_index),
                       "jobset.sigs.k8s.io/replicatedjob-replicas": "2"}, selector)


def test_the_jobset_declaration_gives_the_sub_group_of_each_replicated_job() -> None:
    assert _jobset_ranks() == Ranks(COMPLETION_INDEX_LABEL, JOB_INDEX_LABEL, 2)


def test_ranks_support_rank_based_ordering_for_jobset_for_all_pods() -> None:
    """Kueue's "ranks: support rank-based ordering for JobSet - for all Pods": rank = job index
    x 2 + completion index; created in an order unlike their ranks."""
    release = _release("main", 4, JOBSET_DOMAINS, _jobset_ranks())
    gated = [_jobset_pod("p3", 1, 1), _jobset_pod("p2", 0, 1), _jobset_pod("p1", 1, 0),
             _jobset_pod("p0", 0, 0)]
    assert _where(pinned(release, [], gated)) == {
        "p0": ("b1", "r1"), "p1": ("b1", "r1"), "p2": ("b1", "r2"), "p3": ("b2", "r1"),
    }


def test_ranks_support_rank_based_ordering_for_jobset_some_pods_already_scheduled() -> None:
    """Kueue's "ranks: support rank-based ordering for JobSet - some Pods already scheduled"."""
    release = _release("main", 4, JOBSET_DOMAINS, _jobset_ranks())
    running = [_jobset_pod("p1", 1, 0, B1R1), _jobset_pod("p2", 0, 1, B1R2)]
    gated = [_jobset_pod("p3", 1, 1), _jobset_pod("p0", 0, 0)]
    assert _where(pinned(release, running, gated)) == {"p0": ("b1", "r1"), "p3": ("b2", "r1")}


def test_ranks_support_rank_based_ordering_for_jobset_only_subset_of_pods_is_observed_so_far(
) -> None:
    """Kueue's "ranks: support rank-based ordering for JobSet - only subset of pods is observed
    so far": the pods not yet created do not move the others."""
    release = _release("main", 4, JOBSET_DOMAINS, _jobset_ranks())
    gated = [_jobset_pod("p3", 1, 1), _jobset_pod("p1", 1, 0)]
    assert _where(pinned(release, [], gated)) == {"p1": ("b1", "r1"), "p3": ("b2", "r1")}


def test_ranks_ungate_single_pod_with_sub_group_index_label_but_zero_sub_group_count() -> None:
    """Kueue's "ungate single pod with sub group index label but zero sub group count" (and
    "... but no sub group count"): no ranks, the pod is still released, oldest first."""
    for ranks in (Ranks(COMPLETION_INDEX_LABEL, JOB_INDEX_LABEL, 0),
                  Ranks(COMPLETION_INDEX_LABEL, JOB_INDEX_LABEL, None)):
        pod = _jobset_pod("p0", 0, 0)
        assert pod_rank(pod, ranks, 1) is None
        assert _where(pinned(_release("main", 1, ((B1R1, 1),), ranks), [], [pod])) == {
            "p0": ("b1", "r1")}


def test_a_jobset_pod_index_beyond_its_child_job_gives_no_ranks() -> None:
    """Kueue's readRanksForLabels: a completion index past the child Job's size is refused, and
    the pods go oldest first."""
    release = _release("main", 4, JOBSET_DOMAINS, _jobset_ranks())
    gated = [_jobset_pod("p0", 2, 0), _jobset_pod("p1", 0, 0)]
    assert _where(pinned(release, [], gated)) == {"p0": ("b1", "r1"), "p1": ("b1", "r1")}


# -- LeaderWorkerSet: worker index, the leader's 0, the workers' after it -------------------------


def _lws_pods(leader_template: bool) -> list[Obj]:
    """One group of 5 pods, as the LeaderWorkerSet controller and kqueue's webhook make them."""
    lwt: Obj = {"size": 5, "workerTemplate": TEMPLATE}
    if leader_template:
        lwt["leaderTemplate"] = {"spec": {"containers": [{"name": "leader", "image": "y"}]}}
    return leaderworkerset_pods({
        "apiVersion": LWS_API_VERSION, "kind": LWS_KIND,
        "metadata": {"name": "lws", "namespace": "ns"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": lwt},
    })


def test_ranks_ungate_pods_according_to_their_ranks_for_leaderworkerset_for_all_pods() -> None:
    """Kueue's "ranks: ungate pods according to their ranks for LeaderWorkerSet - for all
    Pods": the workers' indexes 1..4 are ranks 0..3 of their pod set (the leader's pod set,
    smaller, comes first)."""
    wl = _workload(workers=4, leader=1)
    leader_pod, *worker_pods = _lws_pods(leader_template=True)
    for pod in (leader_pod, *worker_pods):
        pod["spec"]["schedulingGates"] = [{"name": c.ADMISSION_GATE}]
    # A LeaderWorkerSet's pods are queued by the pod integration: its declaration is found
    # from the pod.
    ranks = registry.ranks("v1", "Pod", leader_pod, wl)
    assert ranks == {"leader": Ranks(WORKER_INDEX_LABEL),
                     "workers": Ranks(WORKER_INDEX_LABEL, offset=1)}
    workers = _release("workers", 4, ((B1R1, 1), (B1R2, 1), (B2R1, 2)), ranks["workers"])
    leader = _release("leader", 1, ((B1R1, 1),), ranks["leader"])
    # Created in an order unlike their indexes (Kueue's p1 has worker index 2, p2 index 1).
    shuffled = [worker_pods[1], worker_pods[0], worker_pods[2], worker_pods[3]]
    assert _where(pinned(workers, [], shuffled) + pinned(leader, [], [leader_pod])) == {
        "lws-0": ("b1", "r1"), "lws-0-1": ("b1", "r1"), "lws-0-2": ("b1", "r2"),
        "lws-0-3": ("b2", "r1"), "lws-0-4": ("b2", "r1"),
    }


def test_a_leaderworkerset_without_a_leader_template_ranks_its_one_pod_set_from_0() -> None:
    wl = _workload(group=5)
    assert registry.ranks("v1", "Pod", _lws_pods(leader_template=False)[0], wl) == {
        "group": Ranks(WORKER_INDEX_LABEL)}


def test_ranks_gracefully_handle_situation_with_ranks_going_below_0() -> None:
    """Kueue's "ranks: gracefully handle situation with ranks going below 0": workers indexed
    from 0 next to a leader (offset 1) would take rank -1, so they go oldest first."""
    wl = _workload(workers=4, leader=1)
    _, *worker_pods = _lws_pods(leader_template=True)
    for pod, index in zip(worker_pods, range(4), strict=True):
        pod["metadata"]["labels"][WORKER_INDEX_LABEL] = str(index)
        pod["spec"]["schedulingGates"] = [{"name": c.ADMISSION_GATE}]
    ranks = registry.ranks("v1", "Pod", worker_pods[0], wl)["workers"]
    assert pod_rank(worker_pods[0], ranks, 4) is None
    workers = _release("workers", 4, ((B1R1, 1), (B1R2, 1), (B2R1, 2)), ranks)
    assert _where(pinned(workers, [], worker_pods)) == {
        "lws-0-1": ("b1", "r1"), "lws-0-2": ("b1", "r2"), "lws-0-3": ("b2", "r1"),
        "lws-0-4": ("b2", "r1"),
    }


# -- Kubeflow (training-operator v1, MPIJob v2beta1): replica index -----------------------------


def _mpijob(launcher_as_worker: bool) -> Obj:
    spec: Obj = {"mpiReplicaSpecs": {
        "Launcher": {"replicas": 1, "template": TEMPLATE},
        "Worker": {"replicas": 3, "template": TEMPLATE},
    }}
    if launcher_as_worker:
        spec["runLauncherAsWorker"] = True
    return {"apiVersion": MPIJOB_API_VERSION, "kind": "MPIJob",
            "metadata": {"name": "mpi", "namespace": "ns"}, "spec": spec}


def _kf_pod(name: str, index: int | None, selector: dict[str, str] | None = None) -> Obj:
    labels = {} if index is None else {REPLICA_INDEX_LABEL: str(index)}
    return _pod(name, labels, selector)


def test_ranks_support_rank_based_ordering_for_kubeflow_with_valid_offset_annotation_for_all_pods(
) -> None:
    """Kueue's "ranks: support rank-based ordering for kubeflow with valid offset annotation -
    for all Pods": an MPIJob whose launcher runs as a worker numbers its workers from 1 (Kueue
    gives them the pod-index-offset annotation 1; kqueue's MPIJob declaration the offset)."""
    mpi = _mpijob(launcher_as_worker=True)
    wl = _workload(launcher=1, worker=3)
    ranks = registry.ranks(MPIJOB_API_VERSION, "MPIJob", mpi, wl)
    assert ranks["worker"] == Ranks(REPLICA_INDEX_LABEL, offset=1)
    launcher = _release("launcher", 1, ((B1R1, 1),), ranks["launcher"])
    worker = _release("worker", 3, ((B1R1, 1), (B1R2, 1), (B2R1, 1)), ranks["worker"])
    got = pinned(launcher, [], [_kf_pod("l0", 0)]) + pinned(
        worker, [], [_kf_pod("w3", 3), _kf_pod("w1", 1), _kf_pod("w2", 2)])
    assert _where(got) == {
        "l0": ("b1", "r1"), "w1": ("b1", "r1"), "w2": ("b1", "r2"), "w3": ("b2", "r1"),
    }
    # Without runLauncherAsWorker the workers count from 0.
    assert registry.ranks(MPIJOB_API_VERSION, "MPIJob", _mpijob(False), wl)["worker"] == Ranks(
        REPLICA_INDEX_LABEL)


KF_DOMAINS = ((B1R1, 2), (B1R2, 1), (B2R1, 1))


def _pytorch_ranks() -> Ranks | None:
    obj = {"apiVersion": KUBEFLOW_API_VERSION, "kind": "PyTorchJob",
           "metadata": {"name": "pt", "namespace": "ns"}, "spec": {}}
    return registry.ranks(KUBEFLOW_API_VERSION, "PyTorchJob", obj, _workload(main=4))["main"]


def test_ranks_support_rank_based_ordering_for_kubeflow_for_all_pods() -> None:
    """Kueue's "ranks: support rank-based ordering for kubeflow - for all Pods": the pod set
    mixes a pod without a replica index (l0), so there are no ranks: oldest first."""
    release = _release("main", 4, KF_DOMAINS, _pytorch_ranks())
    gated = [_kf_pod("l0", None), _kf_pod("w0", 0), _kf_pod("w1", 1), _kf_pod("w2", 2)]
    assert _where(pinned(release, [], gated)) == {
        "l0": ("b1", "r1"), "w0": ("b1", "r1"), "w1": ("b1", "r2"), "w2": ("b2", "r1"),
    }


def test_ranks_support_rank_based_ordering_for_kubeflow_some_pods_already_scheduled() -> None:
    """Kueue's "ranks: support rank-based ordering for kubeflow - some Pods already
    scheduled": no ranks (l0 has none), so the gated ones fill what the running ones left."""
    release = _release("main", 4, KF_DOMAINS, _pytorch_ranks())
    running = [_kf_pod("w1", 1, B1R1), _kf_pod("w2", 2, B1R2)]
    gated = [_kf_pod("l0", None), _kf_pod("w0", 0)]
    assert _where(pinned(release, running, gated)) == {"l0": ("b1", "r1"), "w0": ("b2", "r1")}


def test_kubeflow_replica_indexes_rank_their_pods() -> None:
    """With every pod indexed, a Kubeflow pod set is pinned by replica index."""
    release = _release("main", 4, KF_DOMAINS, _pytorch_ranks())
    gated = [_kf_pod(f"w{i}", i) for i in (3, 2, 1, 0)]
    assert _where(pinned(release, [], gated)) == {
        "w0": ("b1", "r1"), "w1": ("b1", "r1"), "w2": ("b1", "r2"), "w3": ("b2", "r1"),
    }


# -- Pod groups: the label their annotation names; StatefulSets: the pod index ----------------


INDEX = "example.com/index"


def _group_pod(name: str, index: int, selector: dict[str, str] | None = None) -> Obj:
    return _pod(name, {INDEX: str(index), c.POD_GROUP_NAME_LABEL: "g"}, selector,
                {c.POD_GROUP_POD_INDEX_LABEL_ANNOTATION: INDEX,
                 c.POD_GROUP_TOTAL_COUNT_ANNOTATION: "4"})


def _group_ranks() -> Ranks | None:
    return registry.ranks("v1", "Pod", _group_pod("w0", 0), _workload(main=4)).get("main")


def test_ranks_support_rank_based_ordering_for_pod_groups_for_all_pods() -> None:
    """Kueue's "ranks: support rank-based ordering for pod groups - for all Pods"."""
    release = _release("main", 4, KF_DOMAINS, _group_ranks())
    gated = [_group_pod(f"w{i}", i) for i in (2, 3, 0, 1)]
    assert _where(pinned(release, [], gated)) == {
        "w0": ("b1", "r1"), "w1": ("b1", "r1"), "w2": ("b1", "r2"), "w3": ("b2", "r1"),
    }


def test_ranks_support_rank_based_ordering_for_pod_groups_some_pods_already_scheduled() -> None:
    """Kueue's "ranks: support rank-based ordering for pod groups - some Pods already
    scheduled"."""
    release = _release("main", 4, KF_DOMAINS, _group_ranks())
    running = [_group_pod("w1", 1, B1R1), _group_pod("w3", 3, B2R1)]
    gated = [_group_pod("w2", 2), _group_pod("w0", 0)]
    assert _where(pinned(release, running, gated)) == {"w0": ("b1", "r1"), "w2": ("b1", "r2")}


def test_a_pod_group_without_the_index_annotation_has_no_ranks() -> None:
    pod = _pod("w0", {INDEX: "0", c.POD_GROUP_NAME_LABEL: "g"})
    assert registry.ranks("v1", "Pod", pod, _workload(main=4)) == {}


def test_a_statefulset_ranks_its_pods_by_their_pod_index() -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "s", "namespace": "ns"}, "spec": {}}
    ranks = registry.ranks("apps/v1", "StatefulSet", sts, _workload(main=2))["main"]
    gated = [_pod("s-1", {STS_POD_INDEX_LABEL: "1"}), _pod("s-0", {STS_POD_INDEX_LABEL: "0"})]
    release = _release("main", 2, ((B1R1, 1), (B2R1, 1)), ranks)
    assert _where(pinned(release, [], gated)) == {"s-0": ("b1", "r1"), "s-1": ("b2", "r1")}


def test_kinds_without_ranks_pin_oldest_first() -> None:
    """A kind that declares no ranks (a Deployment's pods), or a release without them."""
    deployment_pod = _pod("d", {COMPLETION_INDEX_LABEL: "1"})
    deployment_pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "d-1", "controller": True}]
    assert registry.ranks("apps/v1", "Deployment", {}, _workload(main=2)) == {}
    release = _release("main", 2, ((B1R1, 1), (B2R1, 1)), None)
    gated = [deployment_pod, _pod("e", {COMPLETION_INDEX_LABEL: "0"})]
    assert _where(pinned(release, [], gated)) == {"d": ("b1", "r1"), "e": ("b2", "r1")}


def _appwrapper(annotations: dict[str, str]) -> Obj:
    job_template = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                    "spec": {"parallelism": 4, "completions": 4, "template": TEMPLATE}}
    return {
        "apiVersion": AW_API_VERSION, "kind": "AppWrapper",
        "metadata": {"name": "aw", "namespace": "ns"},
        "spec": {"components": [{
            "template": job_template,
            "podSets": [{"replicas": 4, "path": "template.spec.template",
                         "annotations": annotations}],
        }]},
    }


def test_an_appwrapper_reads_its_ranks_from_its_pod_set_annotations() -> None:
    """Kueue's AppWrapper integration: the podSets entry's tas-pod-index-label,
    tas-sub-group-index-label and tas-sub-group-count annotations."""
    aw = _appwrapper({
        TAS_POD_INDEX_LABEL_ANNOTATION: COMPLETION_INDEX_LABEL,
        TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION: JOB_INDEX_LABEL,
        TAS_SUB_GROUP_COUNT_ANNOTATION: "2",
    })
    ranks = registry.ranks(AW_API_VERSION, "AppWrapper", aw, _workload(**{"aw-0": 4}))
    assert ranks == {"aw-0": Ranks(COMPLETION_INDEX_LABEL, JOB_INDEX_LABEL, 2)}
    release = _release("aw-0", 4, JOBSET_DOMAINS, ranks["aw-0"])
    gated = [_jobset_pod("p3", 1, 1), _jobset_pod("p0", 0, 0)]
    assert _where(pinned(release, [], gated)) == {"p0": ("b1", "r1"), "p3": ("b2", "r1")}
    # A malformed count is ignored, as Kueue does: no sub-group count, so no ranks.
    bad = _appwrapper({TAS_POD_INDEX_LABEL_ANNOTATION: COMPLETION_INDEX_LABEL,
                       TAS_SUB_GROUP_INDEX_LABEL_ANNOTATION: JOB_INDEX_LABEL,
                       TAS_SUB_GROUP_COUNT_ANNOTATION: "two"})
    got = registry.ranks(AW_API_VERSION, "AppWrapper", bad, _workload(**{"aw-0": 4}))["aw-0"]
    assert got.sub_group_count is None and pod_rank(gated[1], got, 4) is None
    # Without the annotations there are none.
    assert registry.ranks(AW_API_VERSION, "AppWrapper", _appwrapper({}), _workload(a=4)) == {}


# -- Wiring: the reconciler hands the declaration's ranks to the release ------------------------


async def test_the_reconciler_pins_a_job_s_pods_by_their_completion_index(
    cluster: FakeCluster,
) -> None:
    """The oldest pod has completion index 1: it goes to the second host, not the first."""
    world = await World.start(cluster)
    j = job("ranked", count=2)
    doc = workload(j, admitted=2).to_dict()
    doc["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = {
        "levels": ["kubernetes.io/hostname"],
        "slices": [{"domainCount": 2,
                    "valuesPerLevel": [{"individual": {"roots": ["h1", "h2"]}}],
                    "podCounts": {"universal": 1}}],
    }
    pods = gated_pods(j, 2)
    for pod, index in zip(pods, (1, 0), strict=True):
        pod["metadata"]["labels"][COMPLETION_INDEX_LABEL] = str(index)
    pods[1]["metadata"]["creationTimestamp"] = "2025-03-01T11:00:01Z"
    key = await world.add_job(j, Workload.model_validate(doc), pods)

    await world.reconciler(key)

    hosts = {
        name: patch for plural, name, patch in world.patched() if plural == "pods"
    }
    assert set(hosts) == {"ranked-0", "ranked-1"}
    assert "h2" in str(hosts["ranked-0"]) and "h1" in str(hosts["ranked-1"])
