"""Plain Pods and pod groups on the shared fake API server: Workload creation (once the group
is complete), release of admitted pods, eviction by deleting pods, finishing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kqueue.api.integrations import PriorityClasses, role_hash
from kqueue.api.v1alpha1 import ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import Informer, as_dict
from kqueue.controller.integrations.eviction import DISRUPTION_TARGET
from kqueue.controller.integrations.owners import BY_OWNER, owner_uids
from kqueue.controller.integrations.pod.generic import (
    BY_GROUP,
    PodJob,
    group_key,
    reconcile_key,
)
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.release import PodReleaser
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import PODS, RESOURCE_FLAVORS, WORKLOADS
from kqueue.engine.engine import Engine
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.fakes import Events, model
from tests.controller.test_metrics import samples

Obj = dict[str, Any]

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NS = "team-a"


def pod(name: str, *, group: str | None = None, total: int = 0, phase: str = "Pending") -> Obj:
    labels = {c.QUEUE_NAME_LABEL: "main", c.MANAGED_LABEL: "true"}
    annotations = {}
    if group is not None:
        labels[c.POD_GROUP_NAME_LABEL] = group
        annotations[c.POD_GROUP_TOTAL_COUNT_ANNOTATION] = str(total)
    # As the plain-pod webhook leaves it: gated, labelled managed, with kqueue's finalizer.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": labels,
            "annotations": annotations,
            "finalizers": [c.MANAGED_FINALIZER],
            "creationTimestamp": "2025-03-01T11:00:00Z",
        },
        "spec": {
            "schedulingGates": [{"name": c.ADMISSION_GATE}],
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
        "status": {"phase": phase},
    }


class Pods:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.server = cluster.server
        self.engine = Engine()
        self.events = Events()
        self.metrics = Metrics()

    @classmethod
    async def start(cls, cluster: FakeCluster) -> Pods:
        world = cls(cluster)
        world.pods: Informer[Obj] = await cluster.informer(
            PODS, as_dict, label_selector=f"{c.MANAGED_LABEL}=true",
            indexes={BY_OWNER: owner_uids, BY_GROUP: group_key},
        )
        world.workloads = await cluster.informer(
            WORKLOADS, model(Workload), indexes={BY_OWNER: owner_uids}
        )
        world.flavors = await cluster.informer(RESOURCE_FLAVORS, model(ResourceFlavor))
        # Plain pods run through the generic reconciler, as a composed job of pods.
        world.reconciler = JobReconciler(
            job=PodJob(),
            engine=lambda: world.engine,
            objects=world.pods.store,
            pods=world.pods.store,
            workloads=world.workloads.store,
            flavors=world.flavors.store,
            priorities=lambda: PriorityClasses.from_objects([], []),
            kube=cluster.kube,
            events=world.events,
            releaser=PodReleaser(kube=cluster.kube, metrics=Metrics(), now=lambda: NOW),
            now=lambda: NOW,
            metrics=world.metrics,
        )
        return world

    async def add(self, *pods: Obj) -> None:
        for p in pods:
            self.server.add(PODS, p)
        await self.cluster.synced()

    async def reconcile(self, any_pod: Obj) -> None:
        key = reconcile_key(any_pod)
        assert key is not None
        await self.reconciler(key)
        await self.cluster.synced()

    def workloads_in_api(self) -> list[Obj]:
        return self.server.objects(WORKLOADS)

    async def admit(self, name: str, count: int | None) -> None:
        """Reserve quota for the Workload ``name`` as the scheduler writes it: ``count`` pods
        in each pod set, or (None) each pod set's own count."""
        doc = self.server.get(WORKLOADS, name, NS)
        assert doc is not None
        at = (NOW - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        doc["status"] = {
            "conditions": [
                {"type": c.QUOTA_RESERVED, "status": "True", "reason": c.QUOTA_RESERVED_REASON,
                 "message": "reserved", "lastTransitionTime": at},
                {"type": c.ADMITTED, "status": "True", "reason": c.ADMITTED_REASON,
                 "message": "admitted", "lastTransitionTime": at},
            ],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": ps["name"], "flavors": {"cpu": "on-demand"},
                     "resourceUsage": {"cpu": str(n)}, "count": n}
                    for ps in doc["spec"]["podSets"]
                    for n in [ps["count"] if count is None else count]
                ],
            },
        }
        self.server.add(WORKLOADS, doc)
        await self.cluster.synced()

    async def set_condition(self, name: str, cond: Obj) -> None:
        doc = self.server.get(WORKLOADS, name, NS)
        assert doc is not None
        doc["status"]["conditions"].append(cond)
        self.server.add(WORKLOADS, doc)
        await self.cluster.synced()


def gated(p: Obj | None) -> bool:
    assert p is not None
    return any(g["name"] == c.ADMISSION_GATE for g in p["spec"].get("schedulingGates") or [])


async def test_a_single_pod_gets_a_workload_it_owns(cluster: FakeCluster) -> None:
    world = await Pods.start(cluster)
    p = pod("solo")
    await world.add(p)

    await world.reconcile(p)

    [wl] = world.workloads_in_api()
    assert [r["uid"] for r in wl["metadata"]["ownerReferences"]] == ["uid-solo"]
    assert wl["spec"]["queueName"] == "main"
    assert "CreatedWorkload" in world.events.reasons("solo")


async def test_a_group_is_queued_once_all_its_pods_exist(cluster: FakeCluster) -> None:
    world = await Pods.start(cluster)
    first, second, third = (pod(f"g-{i}", group="g", total=3) for i in range(3))
    await world.add(first, second)

    await world.reconcile(first)
    assert world.workloads_in_api() == []
    assert "WaitingForPodGroup" in {r for _, _, r, _ in world.events.recorded}

    await world.add(third)
    await world.reconcile(third)
    [wl] = world.workloads_in_api()
    assert wl["metadata"]["name"] == "g"
    assert sorted(r["uid"] for r in wl["metadata"]["ownerReferences"]) == [
        "uid-g-0", "uid-g-1", "uid-g-2"
    ]


async def test_admitted_pods_are_released_with_the_flavor_never_more_than_admitted(
    cluster: FakeCluster,
) -> None:
    world = await Pods.start(cluster)
    cluster.server.add(RESOURCE_FLAVORS, {
        "apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "on-demand"},
        "spec": {"nodeLabels": {"instance-type": "on-demand"}},
    })
    members = [pod(f"g-{i}", group="g", total=3) for i in range(3)]
    await world.add(*members)
    await world.reconcile(members[0])
    await world.admit("g", 2)

    await world.reconcile(members[0])

    released = [p for p in world.server.objects(PODS) if not gated(p)]
    assert len(released) == 2
    assert all(p["spec"]["nodeSelector"] == {"instance-type": "on-demand"} for p in released)
    # Again: idempotent, the third pod stays gated.
    await world.reconcile(members[0])
    assert len([p for p in world.server.objects(PODS) if not gated(p)]) == 2


async def test_an_evicted_group_s_pods_are_marked_and_deleted_then_the_workload_requeued(
    cluster: FakeCluster,
) -> None:
    world = await Pods.start(cluster)
    members = [pod(f"g-{i}", group="g", total=2) for i in range(2)]
    await world.add(*members)
    await world.reconcile(members[0])
    await world.admit("g", 2)
    await world.reconcile(members[0])  # released: they run (gated pods are kept, below)
    await world.set_condition("g", {
        "type": c.EVICTED, "status": "True", "reason": c.EVICTED_BY_PREEMPTION,
        "message": "Preempted to accommodate a workload",
        "lastTransitionTime": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
    })

    await world.reconcile(members[0])

    for name in ("g-0", "g-1"):
        stopped = world.server.get(PODS, name, NS)
        assert stopped is not None and stopped["metadata"].get("deletionTimestamp")
        conds = {x["type"]: x for x in stopped["status"].get("conditions") or []}
        assert conds[DISRUPTION_TARGET]["reason"] == "EvictedByKqueue"
    # The pods terminate (the kubelet's part), then the quota is released.
    for name in ("g-0", "g-1"):
        done = world.server.get(PODS, name, NS)
        assert done is not None
        done["status"]["phase"] = "Failed"
        world.server.add(PODS, done)
    await cluster.synced()
    await world.reconcile(members[0])
    wl = world.server.get(WORKLOADS, "g", NS)
    assert wl is not None and "admission" not in wl["status"]
    assert world.server.objects(PODS) == []  # finalizers dropped: the pods are gone


async def test_a_pod_that_succeeded_finishes_its_workload(cluster: FakeCluster) -> None:
    world = await Pods.start(cluster)
    p = pod("solo")
    await world.add(p)
    await world.reconcile(p)
    [wl] = world.workloads_in_api()
    await world.admit(wl["metadata"]["name"], 1)
    done = world.server.get(PODS, "solo", NS)
    assert done is not None
    done["spec"]["schedulingGates"] = []
    done["status"]["phase"] = "Succeeded"
    world.server.add(PODS, done)
    await cluster.synced()

    await world.reconcile(p)

    finished = world.server.get(WORKLOADS, wl["metadata"]["name"], NS)
    assert finished is not None
    conds = {x["type"]: x for x in finished["status"]["conditions"]}
    assert conds[c.FINISHED]["status"] == "True" and conds[c.FINISHED]["reason"] == c.FINISHED_SUCCEEDED
    remaining = world.server.get(PODS, "solo", NS)
    assert remaining is not None and not remaining["metadata"].get("finalizers")


# -- the same milestones as every kind: the creation latency and the Started event --------------


def creation_latencies(world: Pods) -> float | None:
    return samples(world.metrics).get(
        ("kqueue_workload_creation_latency_seconds_count", (("job_kind", "Pod"),))
    )


async def test_a_single_pod_s_workload_creation_is_measured_as_every_kind_s(
    cluster: FakeCluster,
) -> None:
    world = await Pods.start(cluster)
    p = pod("solo")
    await world.add(p)
    assert creation_latencies(world) is None

    await world.reconcile(p)

    assert creation_latencies(world) == 1
    # Reconciled again with its Workload there: not created, not counted twice.
    await world.reconcile(p)
    assert creation_latencies(world) == 1


async def test_a_pod_group_s_workload_creation_is_measured_once(cluster: FakeCluster) -> None:
    world = await Pods.start(cluster)
    members = [pod(f"g-{i}", group="g", total=3) for i in range(3)]
    await world.add(*members[:2])
    await world.reconcile(members[0])
    assert creation_latencies(world) is None  # still waiting for the third pod

    await world.add(members[2])
    await world.reconcile(members[2])

    assert creation_latencies(world) == 1


async def test_a_single_pod_is_started_once_released(cluster: FakeCluster) -> None:
    world = await Pods.start(cluster)
    p = pod("solo")
    await world.add(p)
    await world.reconcile(p)
    [wl] = world.workloads_in_api()
    assert "Started" not in world.events.reasons("solo")
    await world.admit(wl["metadata"]["name"], 1)

    await world.reconcile(p)
    await world.reconcile(p)

    assert not gated(world.server.get(PODS, "solo", NS))
    assert world.events.reasons("solo").count("Started") == 1


async def test_a_pod_group_is_started_once_when_its_last_admitted_pod_is_released(
    cluster: FakeCluster,
) -> None:
    world = await Pods.start(cluster)
    members = [pod(f"g-{i}", group="g", total=3) for i in range(3)]
    await world.add(*members)
    await world.reconcile(members[0])
    await world.admit("g", 3)

    await world.reconcile(members[0])
    await world.reconcile(members[0])

    assert not [p for p in world.server.objects(PODS) if gated(p)]
    started = [m for _, _, r, m in world.events.recorded if r == "Started"]
    assert started == ["Admitted by clusterQueue cq; all 3 admitted pod(s) released"]


@dataclass(frozen=True)
class EvictCase:
    name: str
    group: bool
    # Members released (ungated) before the eviction: they ran.
    released: int
    # Members deleted (DisruptionTarget) by the eviction; the rest stay, gated.
    stopped: int


# Kueue's pod_controller_test.go TestReconciler cases by name (its Stop skips a pod that is
# gated, ``podSuspended``, unless the Workload is deleted), and kqueue's own.
EVICT_CASES = [
    EvictCase("pod is stopped when workload is evicted", group=False, released=1, stopped=1),
    EvictCase("pod group remains stopped when workload is evicted", group=True, released=0,
              stopped=0),
    # A MultiKueue pod evicted before it was offered to any worker (its check waiting) is
    # such a gated pod: kept, its Workload requeued.
    EvictCase("single pod evicted before it was released stays gated", group=False, released=0,
              stopped=0),
    EvictCase("group with one pod released: that one is stopped, the gated one kept",
              group=True, released=1, stopped=1),
]


@pytest.mark.parametrize("case", EVICT_CASES, ids=lambda k: k.name)
async def test_eviction_stops_only_released_pods(case: EvictCase, cluster: FakeCluster) -> None:
    world = await Pods.start(cluster)
    members = ([pod(f"g-{i}", group="g", total=2) for i in range(2)] if case.group
               else [pod("solo")])
    await world.add(*members)
    await world.reconcile(members[0])
    [wl] = world.workloads_in_api()
    name = wl["metadata"]["name"]
    await world.admit(name, len(members))
    for p in members[:case.released]:
        current = world.server.get(PODS, p["metadata"]["name"], NS)
        assert current is not None
        current["spec"]["schedulingGates"] = []
        current["status"]["phase"] = "Running"
        world.server.add(PODS, current)
    await cluster.synced()
    await world.set_condition(name, {
        "type": c.EVICTED, "status": "True", "reason": c.EVICTED_BY_PREEMPTION,
        "message": "Preempted to accommodate a higher priority Workload",
        "lastTransitionTime": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
    })

    await world.reconcile(members[0])

    pods = [world.server.get(PODS, p["metadata"]["name"], NS) for p in members]
    stopped = [p for p in pods if p is not None and p["metadata"].get("deletionTimestamp")]
    assert len(stopped) == case.stopped
    for p in stopped:
        conds = {x["type"]: x for x in p["status"].get("conditions") or []}
        assert conds[DISRUPTION_TARGET]["reason"] == "EvictedByKqueue"
    kept = [p for p in pods if p is not None and p not in stopped]
    assert len(kept) == len(members) - case.stopped
    for p in kept:
        assert gated(p) and c.MANAGED_FINALIZER in p["metadata"]["finalizers"]
        assert not any(x["type"] == DISRUPTION_TARGET for x in p["status"].get("conditions") or [])
    # The stopped pods terminate (the kubelet's part); then the quota is released.
    for p in stopped:
        p["status"]["phase"] = "Failed"
        world.server.add(PODS, p)
    await cluster.synced()
    await world.reconcile(members[0])
    requeued = world.server.get(WORKLOADS, name, NS)
    assert requeued is not None and "admission" not in requeued["status"]
    # The kept pods keep their finalizer (they are the Workload's); the stopped ones are gone.
    assert sorted(p["metadata"]["name"] for p in world.server.objects(PODS)) == sorted(
        p["metadata"]["name"] for p in kept)


@dataclass(frozen=True)
class ExcessCase:
    name: str
    # Members before the first reconcile: (name, minutes after 11:00 it was made, phase).
    first: tuple[tuple[str, int, str], ...]
    # Members added after the first reconcile (and, with ``admit``, after the release).
    later: tuple[tuple[str, int, str], ...]
    admit: bool
    deleted: tuple[str, ...]
    # Counted against the Workload's pod set (it exists by then), not the group's total count.
    per_pod_set: bool = False


# Kueue's pod_controller_test.go TestReconciler cases by name (removeExcessPods: the group's
# active pods beyond its total count, or once the Workload exists beyond their pod set's
# count, sorted finalizer first, ungated before gated, older first, are deleted with an
# ExcessPodDeleted event), and kqueue's own. Total count 2, one role (pod set count 2).
EXCESS_CASES = [
    ExcessCase("excess pods before wl creation, youngest pods are deleted",
               first=(("g-0", 0, "Pending"), ("g-1", 1, "Pending"), ("g-2", 2, "Pending")),
               later=(), admit=False, deleted=("g-2",)),
    ExcessCase("excess pods before admission, youngest pods are deleted",
               first=(("g-0", 0, "Pending"), ("g-1", 1, "Pending")),
               later=(("g-2", 2, "Pending"),), admit=False, deleted=("g-2",), per_pod_set=True),
    # The gated pod is the oldest, but the released ones come first: it is the excess one.
    ExcessCase("delete excess pod that is gated",
               first=(("g-0", 1, "Pending"), ("g-1", 2, "Pending")),
               later=(("g-2", 0, "Pending"),), admit=True, deleted=("g-2",), per_pod_set=True),
    ExcessCase("a failed pod's replacement is not excess",
               first=(("g-0", 0, "Failed"), ("g-1", 1, "Pending"), ("g-2", 2, "Pending")),
               later=(), admit=False, deleted=()),
]


def _made_at(name: str, minutes: int, phase: str, *, total: int = 2, cpu: str = "1") -> Obj:
    """A pod of group ``g`` made ``minutes`` after 11:00; its cpu request is its role."""
    p = pod(name, group="g", total=total, phase=phase)
    p["metadata"]["creationTimestamp"] = f"2025-03-01T11:{minutes:02d}:00Z"
    p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return p


@pytest.mark.parametrize("case", EXCESS_CASES, ids=lambda k: k.name)
async def test_pods_beyond_the_group_s_total_count_are_deleted(
    case: ExcessCase, cluster: FakeCluster
) -> None:
    world = await Pods.start(cluster)
    first = [_made_at(*m) for m in case.first]
    await world.add(*first)
    await world.reconcile(first[0])
    if case.admit:
        await world.admit("g", 2)
        await world.reconcile(first[0])
        released = [p for p in world.server.objects(PODS) if not gated(p)]
        assert sorted(p["metadata"]["name"] for p in released) == ["g-0", "g-1"]
    if case.later:
        await world.add(*(_made_at(*m) for m in case.later))
        await world.reconcile(first[0])

    left = sorted(p["metadata"]["name"] for p in world.server.objects(PODS))
    everyone = [m[0] for m in (*case.first, *case.later)]
    assert left == sorted(n for n in everyone if n not in case.deleted)
    excess_events = [
        (n, m) for n, _, r, m in world.events.recorded if r == "ExcessPodDeleted"
    ]
    assert [n for n, _ in excess_events] == list(case.deleted)
    counted = (f"pod set {role_hash(first[0])} (this pod's role) of its Workload has count 2"
               if case.per_pod_set else "declares total count 2")
    for _, message in excess_events:
        assert counted in message and "3 active pods" in message
    [wl] = world.workloads_in_api()
    owners = sorted(r["uid"] for r in wl["metadata"]["ownerReferences"])
    assert not {f"uid-{n}" for n in case.deleted} & set(owners)


@dataclass(frozen=True)
class RoleCase:
    name: str
    # The group's pods, (name, cpu): one pod set per cpu (role); total count their number.
    first: tuple[tuple[str, str], ...]
    # Fails once all run; then the replacement, (name, cpu), is made.
    failed: str
    replacement: tuple[str, str]
    deleted: bool


# Once the Workload exists Kueue counts the excess per pod set (FindMatchingWorkloads), not
# against the group's total count: Kueue's pod_controller_test.go TestReconciler case by
# name, and kqueue's own. In each, the group's active pods stay within its total count.
ROLE_CASES = [
    RoleCase("excess pods in pod set after admission, youngest pods are deleted",
             first=(("g-0", "2"), ("g-1", "1")), failed="g-0", replacement=("g-2", "1"),
             deleted=True),
    # 1 leader + 2 workers declared; with a leader instead of the failed worker, 2 leaders run.
    RoleCase("a second leader is deleted although the group is within its total count",
             first=(("l-0", "2"), ("w-0", "1"), ("w-1", "1")), failed="w-1",
             replacement=("l-1", "2"), deleted=True),
    RoleCase("a failed worker's replacement of its own role is released",
             first=(("l-0", "2"), ("w-0", "1"), ("w-1", "1")), failed="w-1",
             replacement=("w-2", "1"), deleted=False),
]


@pytest.mark.parametrize("case", ROLE_CASES, ids=lambda k: k.name)
async def test_pods_beyond_their_pod_set_s_count_are_deleted_once_the_workload_exists(
    case: RoleCase, cluster: FakeCluster
) -> None:
    world = await Pods.start(cluster)
    # Released onto a flavor with node labels: the running pods' hash is no longer their role.
    cluster.server.add(RESOURCE_FLAVORS, {
        "apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "on-demand"},
        "spec": {"nodeLabels": {"instance-type": "on-demand"}},
    })
    total = len(case.first)
    first = [
        _made_at(n, i, "Pending", total=total, cpu=cpu) for i, (n, cpu) in enumerate(case.first)
    ]
    await world.add(*first)
    await world.reconcile(first[0])
    await world.admit("g", None)
    await world.reconcile(first[0])
    running = world.server.objects(PODS)
    assert all(p["spec"]["nodeSelector"] == {"instance-type": "on-demand"} for p in running)
    failed = world.server.get(PODS, case.failed, NS)
    assert failed is not None
    failed["status"]["phase"] = "Failed"
    world.server.add(PODS, failed)
    name, cpu = case.replacement
    replacement = _made_at(name, len(first), "Pending", total=total, cpu=cpu)
    await world.add(replacement)

    await world.reconcile(first[0])

    left = world.server.get(PODS, name, NS)
    excess = [(n, m) for n, _, r, m in world.events.recorded if r == "ExcessPodDeleted"]
    if not case.deleted:
        assert excess == [] and left is not None and not gated(left)
        return
    assert left is None
    [(on, message)] = excess
    [wl] = world.workloads_in_api()
    role = role_hash(replacement)
    [count] = [ps["count"] for ps in wl["spec"]["podSets"] if ps["name"] == role]
    assert on == name
    assert (f"pod set {role} (this pod's role) of its Workload has count {count}, and the "
            f"group has {count + 1} active pods of that role") in message
    # The others stay (the failed one too: it is let go, not deleted).
    assert sorted(p["metadata"]["name"] for p in world.server.objects(PODS)) == sorted(
        n for n, _ in case.first)


async def test_a_pod_kept_gated_beyond_the_admitted_count_is_told_why_once(
    cluster: FakeCluster,
) -> None:
    """Admitted with 2 of the group's 3 pods: the third stays gated, with one
    WaitingBeyondAdmittedCount event naming the admitted count, however often it is
    reconciled; the released pods get none."""
    world = await Pods.start(cluster)
    members = [_made_at(f"g-{i}", i, "Pending") for i in range(3)]
    for p in members:
        p["metadata"]["annotations"][c.POD_GROUP_TOTAL_COUNT_ANNOTATION] = "3"
    await world.add(*members)
    await world.reconcile(members[0])
    await world.admit("g", 2)

    await world.reconcile(members[0])
    await world.reconcile(members[0])

    told = [(n, m) for n, _, r, m in world.events.recorded if r == "WaitingBeyondAdmittedCount"]
    assert [n for n, _ in told] == ["g-2"]
    assert "admitted with 2 pod(s)" in told[0][1]
    assert gated(world.server.get(PODS, "g-2", NS))
