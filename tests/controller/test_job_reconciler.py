"""The Job reconciler on informers of the shared fake API server: concurrent pod release, jobs
without a queue name (manageJobsWithoutQueueName), and Jobs that started before the webhooks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from kqueue.api.config import Configuration
from kqueue.api.integrations import PriorityClasses
from kqueue.api.v1alpha1 import LocalQueue, ResourceFlavor, Workload, parse_object
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import as_dict
from kqueue.controller.integrations.job import JobIntegration
from kqueue.controller.integrations.management import Management
from kqueue.controller.integrations.owners import BY_OWNER, owner_uids
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.release import PodReleaser
from kqueue.controller.kube import Kube, KubeError
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import (
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Resource,
)
from kqueue.controller.workqueue import Requeue
from tests.controller.fake_apiserver import FakeCluster, eventually
from tests.controller.fakes import Events, model
from tests.controller_e2e.harness import job as e2e_job

Obj = dict[str, Any]
M = TypeVar("M")

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
ADMITTED_AT = NOW - timedelta(seconds=5)


class BoomKube(Kube):
    """The real client, but patching the named objects fails as a dropped connection does."""

    def __init__(self, kube: Kube, boom: Iterable[str]) -> None:
        super().__init__(kube.api)
        self.boom = set(boom)
        self.finished_after_boom = 0
        self._boomed = False

    async def patch(self, resource: Resource, name: str, patch: Any, **kw: Any) -> Obj:
        await asyncio.sleep(0.005)
        if name in self.boom:
            self._boomed = True
            raise RuntimeError(f"a bug while patching {name}")
        out = await super().patch(resource, name, patch, **kw)
        if self._boomed:
            self.finished_after_boom += 1
        return out


def job(
    name: str,
    *,
    namespace: str = "team-a",
    queue: str | None = "main",
    count: int = 2,
    gated: bool = True,
    suspend: bool = False,
    started: bool = False,
    held: bool = False,
) -> Obj:
    out = e2e_job(name, namespace, queue or "", count=count)
    meta = out["metadata"]
    meta.update(uid=f"uid-{name}", resourceVersion="7")
    if queue is None:
        del meta["labels"][c.QUEUE_NAME_LABEL]
    if gated:
        # What the Job webhook does at creation.
        out["spec"]["template"]["spec"]["schedulingGates"] = [{"name": c.ADMISSION_GATE}]
        out["spec"]["template"]["metadata"]["labels"] = {c.MANAGED_LABEL: "true"}
    out["spec"]["suspend"] = suspend or held
    if held:
        # What the Job webhook does at creation: suspended while queued, as kqueue's.
        meta.setdefault("annotations", {})[c.SUSPENDED_BY_KQUEUE_ANNOTATION] = "true"
    out["status"] = {"startTime": "2025-03-01T11:00:00Z", "active": count} if started else {}
    return out


def workload(job_obj: Obj, *, admitted: int | None = None, queue: str | None = None) -> Workload:
    wl = JobIntegration().workload_for(job_obj, PriorityClasses.from_objects([], []))
    doc = wl.to_dict()
    doc["metadata"]["uid"] = f"wl-{job_obj['metadata']['name']}"
    if queue is not None:
        doc["spec"]["queueName"] = queue
    if admitted is not None:
        doc["status"] = {
            "conditions": [
                {
                    "type": c.QUOTA_RESERVED,
                    "status": "True",
                    "reason": c.QUOTA_RESERVED_REASON,
                    "message": "reserved",
                    "lastTransitionTime": ADMITTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            ],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {
                        "name": c.DEFAULT_POD_SET_NAME,
                        "flavors": {"cpu": "on-demand"},
                        "resourceUsage": {"cpu": str(admitted)},
                        "count": admitted,
                    }
                ],
            },
        }
    out = parse_object(doc, validate=False)
    assert isinstance(out, Workload)
    return out


def gated_pods(job_obj: Obj, n: int) -> list[Obj]:
    meta = job_obj["metadata"]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{meta['name']}-{i}",
                "namespace": meta["namespace"],
                "uid": f"{meta['name']}-pod-{i}",
                "resourceVersion": "1",
                "creationTimestamp": "2025-03-01T11:00:00Z",
                "labels": {c.MANAGED_LABEL: "true"},
                "ownerReferences": [
                    {"kind": "Job", "name": meta["name"], "uid": meta["uid"], "controller": True}
                ],
            },
            "spec": {"schedulingGates": [{"name": c.ADMISSION_GATE}], "containers": []},
            "status": {"phase": "Pending"},
        }
        for i in range(n)
    ]


class World:
    """A JobReconciler on informers of the shared fake API server, as the manager wires it."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.server = cluster.server
        # Every patch takes a little while, so concurrent ones overlap.
        self.server.delay["PATCH"] = 0.005
        self.events = Events()
        self.metrics = Metrics()

    @classmethod
    async def start(
        cls,
        cluster: FakeCluster,
        *,
        releases_per_job: int = 16,
        releases_in_flight: int = 64,
        kube: Kube | None = None,
        **reconciler_args: Any,
    ) -> World:
        world = cls(cluster)
        kube = kube if kube is not None else cluster.kube
        world.jobs = await cluster.informer(JOBS, as_dict)
        world.workloads = await cluster.informer(
            WORKLOADS, model(Workload), indexes={BY_OWNER: owner_uids}
        )
        world.pods = await cluster.informer(PODS, as_dict, indexes={BY_OWNER: owner_uids})
        world.namespaces = await cluster.informer(NAMESPACES, as_dict)
        world.local_queues = await cluster.informer(LOCAL_QUEUES, model(LocalQueue))
        world.flavors = await cluster.informer(RESOURCE_FLAVORS, model(ResourceFlavor))
        world.reconciler = JobReconciler(
            job=JobIntegration(),
            objects=world.jobs.store,
            workloads=world.workloads.store,
            pods=world.pods.store,
            flavors=world.flavors.store,
            priorities=lambda: PriorityClasses.from_objects([], []),
            kube=kube,
            events=world.events,
            releaser=PodReleaser(
                kube=kube,
                metrics=world.metrics,
                now=lambda: NOW,
                per_object=releases_per_job,
                in_flight=releases_in_flight,
            ),
            now=lambda: NOW,
            namespaces=world.namespaces.store,
            local_queues=world.local_queues.store,
            **reconciler_args,
        )
        return world

    async def add_job(
        self, job_obj: Obj, wl: Workload | None = None, pods: Iterable[Obj] = ()
    ) -> str:
        """Put the objects in the API and wait until the informers have them."""
        self.server.add(JOBS, job_obj)
        if wl is not None:
            self.server.add(WORKLOADS, wl.to_dict())
        for pod in pods:
            self.server.add(PODS, pod)
        await self.cluster.synced()
        return f"{job_obj['metadata']['namespace']}/{job_obj['metadata']['name']}"

    async def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        meta = {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}
        self.server.add(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        await self.cluster.synced()

    async def add_local_queue(self, namespace: str, name: str) -> None:
        self.server.add(
            LOCAL_QUEUES,
            {
                "apiVersion": c.API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusterQueue": "cq"},
            },
        )
        await self.cluster.synced()

    def job_version(self, key: str) -> str:
        """The resourceVersion of the Job as the reconciler read it."""
        job_obj = self.jobs.store.get(key)
        assert job_obj is not None
        return str(job_obj["metadata"]["resourceVersion"])

    def gate_removals(self) -> float:
        """Pods released, over every label set of the histogram."""
        return sum(
            s.value
            for family in self.metrics.registry.collect()
            for s in family.samples
            if s.name == "kqueue_pod_scheduling_gate_removal_seconds_count"
        )

    def created(self) -> list[Obj]:
        """Workloads created (the request bodies)."""
        return [r.body for r in self.server.requests_to("POST", WORKLOADS) if r.ok]

    def patched(self) -> list[tuple[str, str, Any]]:
        """(plural, name, patch) of every patch the API server applied."""
        return [(r.plural, r.name, r.body) for r in self.server.requests_to("PATCH") if r.ok]

    def forget_requests(self) -> None:
        self.server.requests.clear()

    def pod_patches(self) -> list[str]:
        return [name for plural, name, _ in self.patched() if plural == PODS.plural]

    def job_patches(self) -> list[Any]:
        return [patch for plural, _, patch in self.patched() if plural == JOBS.plural]


# -- concurrent release --------------------------------------------------------------------------


async def test_pods_of_one_job_are_released_concurrently_within_the_per_job_bound(cluster: FakeCluster) -> None:
    world = await World.start(cluster, releases_per_job=8, releases_in_flight=64)
    j = job("big", count=40)
    key = await world.add_job(j, workload(j, admitted=40), gated_pods(j, 40))

    assert await world.reconciler(key) is None

    assert sorted(world.pod_patches()) == sorted(f"big-{i}" for i in range(40))
    # Overlapping, but never more than the per-Job bound.
    assert 1 < world.server.max_in_flight("PATCH", PODS) <= 8
    assert world.gate_removals() == 40
    assert world.events.reasons("big") == ["Started"]


async def test_the_global_bound_holds_across_jobs(cluster: FakeCluster) -> None:
    world = await World.start(cluster, releases_per_job=16, releases_in_flight=20)
    keys = []
    for name in ("a", "b", "c"):
        j = job(name, count=30)
        keys.append(await world.add_job(j, workload(j, admitted=30), gated_pods(j, 30)))

    await asyncio.gather(*(world.reconciler(k) for k in keys))

    assert len(world.pod_patches()) == 90
    # Several Jobs together go past one Job's bound, never past the global one.
    assert 16 < world.server.max_in_flight("PATCH", PODS) <= 20


async def test_never_more_pods_released_than_admitted(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    j = job("partial", count=10)
    key = await world.add_job(j, workload(j, admitted=4), gated_pods(j, 10))

    await world.reconciler(key)

    assert len(world.pod_patches()) == 4


async def test_a_failed_release_is_retried_and_the_others_still_go(cluster: FakeCluster) -> None:
    j = job("flaky", count=10)
    world = await World.start(cluster)
    for name in ("flaky-3", "flaky-7"):
        cluster.server.fail("PATCH", PODS, name)
    key = await world.add_job(j, workload(j, admitted=10), gated_pods(j, 10))

    result = await world.reconciler(key)

    assert isinstance(result, Requeue) and result.after is None
    assert len(world.pod_patches()) == 8
    assert world.gate_removals() == 8  # observed for the released pods only

    # Next time only the two still gated are sent (the store says the rest are released).
    cluster.server.clear_faults()
    await cluster.synced()
    world.forget_requests()
    assert await world.reconciler(key) is None
    assert sorted(world.pod_patches()) == ["flaky-3", "flaky-7"]


async def test_an_unexpected_error_is_raised_after_every_release_ended(cluster: FakeCluster) -> None:
    j = job("boom", count=12)
    kube = BoomKube(cluster.kube, boom={"boom-0"})
    world = await World.start(cluster, kube=kube, releases_per_job=4)
    key = await world.add_job(j, workload(j, admitted=12), gated_pods(j, 12))

    with pytest.raises(RuntimeError, match="boom-0"):
        await world.reconciler(key)

    # Nothing left in flight, and the pods after the failing one were still released.
    assert cluster.server.in_flight("PATCH", PODS) == 0
    assert len(world.pod_patches()) == 11 and kube.finished_after_boom > 0


# -- manageJobsWithoutQueueName -----------------------------------------------------------------


def _managing(**kw: Any) -> dict[str, Any]:
    config = Configuration.model_validate({"manageJobsWithoutQueueName": True, **kw})
    return {"management": Management.from_config(config)}


def test_the_informer_lists_every_job_only_when_unlabelled_ones_are_managed() -> None:
    integration = JobIntegration()
    assert integration.label_selector() == c.QUEUE_NAME_LABEL
    assert integration.label_selector(without_queue_name=True) is None


async def test_unlabelled_jobs_are_ignored_unless_configured(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    await world.add_namespace("team-a")
    key = await world.add_job(job("plain", queue=None))

    assert await world.reconciler(key) is None
    assert world.created() == [] and world.events.recorded == []


@pytest.mark.parametrize("namespace", ["kube-system", "kqueue-system"])
async def test_unlabelled_jobs_outside_the_managed_namespaces_are_ignored(namespace: str, cluster: FakeCluster) -> None:
    world = await World.start(cluster, **_managing())
    await world.add_namespace(namespace)
    key = await world.add_job(job("plain", namespace=namespace, queue=None, gated=False, started=True))

    assert await world.reconciler(key) is None
    assert world.created() == [] and world.patched() == []


async def test_an_unlabelled_job_waits_without_a_default_queue_and_says_what_to_do(cluster: FakeCluster) -> None:
    world = await World.start(cluster, **_managing())
    await world.add_namespace("team-a")
    j = job("plain", queue=None, held=True)
    key = await world.add_job(j)

    await world.reconciler(key)

    [body] = world.created()
    assert "queueName" not in body["spec"]
    [warning] = [e for e in world.events.recorded if e[2] == "NoQueueName"]
    assert warning[1] == "Warning"
    assert "LocalQueue 'default'" in warning[3] and c.QUEUE_NAME_LABEL in warning[3]

    # With its Workload pending and no queue, it is looked at again (a default may come).
    world.forget_requests()
    await cluster.synced()  # the Workload it created, pending without a queue
    wl = workload(j)
    result = await world.reconciler(key)
    assert isinstance(result, Requeue) and result.after is not None and result.after > 0
    assert world.patched() == []  # suspended by kqueue while queued: nothing to do

    # A LocalQueue "default" created since: the waiting Workload moves to it.
    await world.add_local_queue("team-a", "default")
    assert await world.reconciler(key) is None
    [(plural, name, patch)] = world.patched()
    assert (plural, name) == (WORKLOADS.plural, wl.name)
    assert patch == {"spec": {"queueName": "default"}}


async def test_an_unlabelled_job_goes_to_the_namespace_default_queue(cluster: FakeCluster) -> None:
    world = await World.start(cluster, **_managing())
    await world.add_namespace("team-a")
    await world.add_local_queue("team-a", "default")
    key = await world.add_job(job("plain", queue=None))

    await world.reconciler(key)

    [body] = world.created()
    assert body["spec"]["queueName"] == "default"
    assert "NoQueueName" not in world.events.reasons("plain")


async def test_a_labelled_job_is_managed_in_any_namespace(cluster: FakeCluster) -> None:
    # As in Kueue, the namespace selector only limits jobs without a queue name.
    world = await World.start(cluster, **_managing())
    await world.add_namespace("kube-system")
    key = await world.add_job(job("named", namespace="kube-system"))

    await world.reconciler(key)

    [body] = world.created()
    assert body["spec"]["queueName"] == "main"


async def test_an_admitted_workload_keeps_its_queue(cluster: FakeCluster) -> None:
    world = await World.start(cluster, **_managing())
    await world.add_namespace("team-a")
    await world.add_local_queue("team-a", "default")
    j = job("plain", queue=None, count=1)
    key = await world.add_job(j, workload(j, admitted=1, queue="other"), gated_pods(j, 1))

    await world.reconciler(key)

    assert world.pod_patches() == ["plain-0"]
    assert not [p for plural, _, p in world.patched() if plural == WORKLOADS.plural]


async def test_an_unlabelled_job_with_a_workload_stays_managed_when_its_namespace_leaves(cluster: FakeCluster) -> None:
    # Admitted while its namespace was selected; the namespace no longer is (here: one the
    # selector never matches). Its Workload still holds quota, so the Job is still driven:
    # its pods are released now and its Workload is finished when it ends.
    world = await World.start(cluster, **_managing())
    await world.add_namespace("kube-system")
    j = job("plain", namespace="kube-system", queue=None, count=1)
    key = await world.add_job(j, workload(j, admitted=1, queue="default"), gated_pods(j, 1))

    await world.reconciler(key)

    assert world.pod_patches() == ["plain-0"]


# -- Jobs that started before the webhooks ------------------------------------------------------


async def test_a_job_running_ungated_without_admission_is_suspended(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    j = job("early", gated=False, started=True)
    key = await world.add_job(j, workload(j))

    assert await world.reconciler(key) is None

    assert world.job_patches() == [
        {
            "metadata": {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: "true"}},
            "spec": {"suspend": True},
        }
    ]
    [stopped] = [e for e in world.events.recorded if e[2] == "Stopped"]
    assert "started before kqueue admitted it" in stopped[3]
    assert "suspended until admitted" in stopped[3]


async def test_a_gated_job_running_while_queued_is_suspended(cluster: FakeCluster) -> None:
    # Created by a kqueue that held queued Jobs by the gate alone: its gated pods would run its
    # deadline and use namespace quota while it waits, so it is suspended as kqueue's.
    world = await World.start(cluster)
    j = job("fresh", gated=True, started=True)
    key = await world.add_job(j, workload(j), gated_pods(j, 2))

    assert await world.reconciler(key) is None
    [patch] = world.job_patches()
    assert patch["spec"] == {"suspend": True}
    assert patch["metadata"]["annotations"] == {c.SUSPENDED_BY_KQUEUE_ANNOTATION: "true"}
    [stopped] = [e for e in world.events.recorded if e[2] == "Stopped"]
    assert "no pods, its deadline does not run" in stopped[3]


async def test_a_job_the_webhook_suspended_waits_untouched(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    j = job("queued", held=True)
    key = await world.add_job(j, workload(j))

    assert await world.reconciler(key) is None
    assert world.patched() == [] and world.events.recorded == []


async def test_a_job_admitted_before_a_restart_is_not_suspended(cluster: FakeCluster) -> None:
    # Its Workload holds quota in the API: whatever its template says, it keeps running.
    world = await World.start(cluster)
    j = job("old", gated=False, started=True)
    key = await world.add_job(j, workload(j, admitted=2))

    assert await world.reconciler(key) is None
    assert world.job_patches() == []


async def test_the_suspended_job_gets_the_gate_once_reset(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    # Suspended, but the Job controller has not cleared startTime yet: wait.
    j = job("early", gated=False, suspend=True, started=True)
    key = await world.add_job(j, workload(j))
    await world.reconciler(key)
    assert world.job_patches() == []

    j = job("early", gated=False, suspend=True, started=False)
    j["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "other.io/gate"}]
    await world.add_job(j)
    read = world.job_version(key)
    await world.reconciler(key)

    [patch] = world.job_patches()
    template = patch["spec"]["template"]
    assert template["spec"]["schedulingGates"] == [
        {"name": "other.io/gate"},
        {"name": c.ADMISSION_GATE},
    ]
    assert template["metadata"]["labels"] == {c.MANAGED_LABEL: "true"}
    assert patch["metadata"]["resourceVersion"] == read



@pytest.mark.parametrize(
    ("code", "retried"),
    [pytest.param(503, True, id="unavailable-is-retried"),
     pytest.param(429, True, id="throttled-is-retried"),
     pytest.param(422, False, id="invalid-is-reported")],
)
async def test_a_failed_gate_template_write_is_retried_unless_refused_for_good(
    cluster: FakeCluster, code: int, retried: bool
) -> None:
    # Holding the template (the gate in) while queued: a passing failure (no answer, 429,
    # 5xx) goes back to the work queue; only a refusal the same write cannot overcome ends in
    # the ErrGateTemplate event. Under dropped connections the first gave up for good.
    world = await World.start(cluster)
    j = job("held", gated=False, suspend=True, started=False)
    key = await world.add_job(j, workload(j))
    world.server.fail("PATCH", JOBS, "held", code=code, times=1)
    if retried:
        with pytest.raises(KubeError) as raised:
            await world.reconciler(key)
        assert raised.value.status == code
        assert [e for e in world.events.reasons("held") if e == "ErrGateTemplate"] == []
        await world.reconciler(key)  # the retry
        [patch] = world.job_patches()
        assert {"name": c.ADMISSION_GATE} in patch["spec"]["template"]["spec"]["schedulingGates"]
    else:
        await world.reconciler(key)
        assert world.job_patches() == []
        assert "ErrGateTemplate" in world.events.reasons("held")


async def test_a_released_pod_the_informer_still_shows_gated_counts_as_released(cluster: FakeCluster) -> None:
    # Our informer may show a pod we released as still gated for a while. A pod created since
    # that sorts before it (same second, smaller name) must not take its place: that would
    # run one pod more than admitted.
    world = await World.start(cluster)
    j = job("lag", count=3)  # partial admission: 2 of 3
    first, second, newer = gated_pods(j, 3)
    for pod, name in ((first, "lag-a"), (second, "lag-m"), (newer, "lag-b")):
        pod["metadata"]["name"] = name
    key = await world.add_job(j, workload(j, admitted=2), [first])
    await world.reconciler(key)  # releases lag-a
    await world.add_job(j, pods=[second])
    cluster.server.lag(PODS, "team-a/lag-m")
    await world.reconciler(key)  # releases lag-m; the informer does not show that yet
    assert world.pod_patches() == ["lag-a", "lag-m"]
    cluster.server.add(PODS, newer)
    await eventually(lambda: "team-a/lag-b" in world.pods.store, what="lag-b in the informer")
    pod_m = world.pods.store.get("team-a/lag-m")
    assert pod_m is not None and pod_m["spec"].get("schedulingGates")  # still shown gated
    await world.reconciler(key)
    assert world.pod_patches() == ["lag-a", "lag-m"]  # lag-a and lag-m run: 2 of 2


# -- suspended while queued ---------------------------------------------------------------------


def _flavor(name: str = "on-demand") -> Obj:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {
            "nodeLabels": {"instance-type": name},
            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


async def test_a_job_its_user_created_suspended_is_left_to_the_user(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    key = await world.add_job(job("mine", suspend=True))

    assert await world.reconciler(key) is None

    assert world.created() == [] and world.patched() == []
    [(_, type_, reason, message)] = world.events.recorded
    assert (type_, reason) == ("Normal", "SuspendedByUser")
    assert "set spec.suspend to false to queue it" in message


async def test_an_admitted_job_is_resumed_with_the_flavors_directives_in_its_template(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    cluster.server.add(RESOURCE_FLAVORS, _flavor())
    j = job("go", held=True)
    key = await world.add_job(j, workload(j, admitted=2))

    assert await world.reconciler(key) is None

    [patch] = world.job_patches()
    assert patch["metadata"] == {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: None}}
    assert patch["spec"]["suspend"] is False
    template = patch["spec"]["template"]["spec"]
    assert template["nodeSelector"] == {"instance-type": "on-demand"}
    assert template["tolerations"] == [
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert "Resumed" in world.events.reasons("go")


async def test_a_resumed_job_s_gated_pods_are_released_and_counted_in_the_event(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    j = job("run", count=3)
    key = await world.add_job(j, workload(j, admitted=3), gated_pods(j, 3))

    assert await world.reconciler(key) is None

    assert len(world.pod_patches()) == 3
    [started] = [e for e in world.events.recorded if e[2] == "Started"]
    assert "all 3 admitted pod(s) released" in started[3]


async def test_a_requeued_job_gets_its_recorded_template_back_once_reset(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    original = job("again", held=True)
    wl = workload(original)  # records the template as the user wrote it
    ran = job("again", held=True)
    ran["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "spot"}
    ran["spec"]["template"]["spec"]["tolerations"] = [{"key": "spot", "operator": "Exists"}]
    key = await world.add_job(ran, wl)
    read = world.job_version(key)

    assert await world.reconciler(key) is None

    [patch] = world.job_patches()
    template = patch["spec"]["template"]["spec"]
    assert template["nodeSelector"] == {"instance-type": None}
    assert template["tolerations"] is None
    assert patch["metadata"]["resourceVersion"] == read


async def test_an_evicted_job_is_suspended_as_kqueue_s(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    j = job("victim", started=True)
    wl = workload(j, admitted=2)
    doc = wl.to_dict()
    doc["status"]["conditions"].append(
        {
            "type": c.EVICTED,
            "status": "True",
            "reason": c.EVICTED_BY_PREEMPTION,
            "message": "Preempted to accommodate a workload",
            "lastTransitionTime": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )
    evicted = parse_object(doc, validate=False)
    assert isinstance(evicted, Workload)
    key = await world.add_job(j, evicted)

    assert await world.reconciler(key) is None

    [patch] = world.job_patches()
    assert patch["spec"]["suspend"] is True
    assert patch["metadata"]["annotations"] == {c.SUSPENDED_BY_KQUEUE_ANNOTATION: "true"}


async def test_started_counts_every_admitted_pod_when_they_come_in_batches(cluster: FakeCluster) -> None:
    # The Job controller creates a resumed Job's pods in batches (1, 2, ...): "Started" comes
    # once, when the last admitted pod leaves the gate, and says how many that is.
    world = await World.start(cluster)
    j = job("batches", count=3)
    first, *rest = gated_pods(j, 3)
    key = await world.add_job(j, workload(j, admitted=3), [first])
    await world.reconciler(key)
    assert world.events.reasons("batches") == []
    for pod in rest:
        world.server.add(PODS, pod)
    await cluster.synced()
    await world.reconciler(key)
    assert len(world.pod_patches()) == 3
    [started] = [e for e in world.events.recorded if e[2] == "Started"]
    assert "all 3 admitted pod(s) released" in started[3]


# -- MultiKueue (docs/multikueue.md) -------------------------------------------------------------


def _evicted(wl: Workload) -> Workload:
    doc = wl.to_dict()
    doc["status"]["conditions"].append({
        "type": c.EVICTED, "status": "True", "reason": "AdmissionCheck",
        "message": "Evicted due to mk: Worker cluster 'w1' was unreachable",
        "lastTransitionTime": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
    })
    out = parse_object(doc, validate=False)
    assert isinstance(out, Workload)
    return out


async def test_a_multikueue_job_is_requeued_although_its_copied_status_says_active(
    cluster: FakeCluster,
) -> None:
    # Its status came from a worker that is now lost: no pod of it runs here to wait for.
    world = await World.start(cluster)
    j = job("remote", started=True)
    j["spec"]["managedBy"] = "kqueue.io/multikueue"
    j["spec"]["suspend"] = True
    key = await world.add_job(j, _evicted(workload(j, admitted=2)))
    await world.reconciler(key)
    stored = world.server.get(WORKLOADS, world.workloads.store.objects()[0].name, "team-a")
    assert stored is not None and stored["status"].get("admission") is None
    assert any(cd["type"] == c.REQUEUED and cd["status"] == "True"
               for cd in stored["status"]["conditions"])


async def test_an_admitted_multikueue_job_is_resumed_and_no_pod_is_released_here(
    cluster: FakeCluster,
) -> None:
    world = await World.start(cluster)
    j = job("remote", held=True)
    j["spec"]["managedBy"] = "kqueue.io/multikueue"
    wl = workload(j, admitted=2)
    doc = wl.to_dict()
    doc["status"]["conditions"].append({
        "type": c.ADMITTED, "status": "True", "reason": "Admitted", "message": "",
        "lastTransitionTime": ADMITTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ"),
    })
    admitted = parse_object(doc, validate=False)
    assert isinstance(admitted, Workload)
    key = await world.add_job(j, admitted, gated_pods(j, 2))
    await world.reconciler(key)
    assert any(plural == "jobs" and patch["spec"].get("suspend") is False
               for plural, _, patch in world.patched())
    assert not [p for p in world.patched() if p[0] == "pods"]


async def test_a_job_adopts_its_prebuilt_workload(cluster: FakeCluster) -> None:
    # A MultiKueue worker: the manager made the Workload; the Job names it.
    world = await World.start(cluster)
    j = job("copy", held=True)
    j["metadata"]["labels"][c.PREBUILT_WORKLOAD_LABEL] = "job-copy-from-manager"
    doc = workload(j, admitted=2).to_dict()
    doc["metadata"]["name"] = "job-copy-from-manager"
    doc["metadata"].pop("ownerReferences", None)
    prebuilt = parse_object(doc, validate=False)
    assert isinstance(prebuilt, Workload)
    key = await world.add_job(j, prebuilt)
    await world.reconciler(key)
    assert world.created() == []
    stored = world.server.get(WORKLOADS, "job-copy-from-manager", "team-a")
    assert stored is not None
    assert [(r["kind"], r["name"], r.get("controller")) for r in stored["metadata"]["ownerReferences"]] == [
        ("Job", "copy", True)
    ]


async def test_a_job_waits_for_its_missing_prebuilt_workload(cluster: FakeCluster) -> None:
    world = await World.start(cluster)
    j = job("early", held=True)
    j["metadata"]["labels"][c.PREBUILT_WORKLOAD_LABEL] = "not-yet"
    key = await world.add_job(j)
    assert await world.reconciler(key) == Requeue(after=2.0)
    assert world.created() == []
