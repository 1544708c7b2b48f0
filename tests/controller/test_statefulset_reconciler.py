"""A StatefulSet through the generic reconciler and its scaling hook, on in-memory stores and the
fake API server: one Workload, pods released with the flavor's node labels (never more than
admitted), held templates, scale to 0, a scale-up's replacement slice, eviction by deleting
running pods."""

from __future__ import annotations

from typing import Any

from kqueue.api.integrations import PriorityClasses
from kqueue.api.v1alpha1 import ResourceFlavor, Workload, parse_object
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import Store
from kqueue.controller.integrations.owners import BY_OWNER, owner_uids
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.release import PodReleaser
from kqueue.controller.integrations.slices import ElasticSlices
from kqueue.controller.integrations.statefulset import StatefulSetIntegration
from kqueue.controller.integrations.statefulset.generic import STATEFULSETS
from kqueue.controller.integrations.statefulset.scaling import SIZING, StatefulSetScaling
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import PODS, WORKLOADS, Resource
from tests.controller.fake_apiserver import FakeCluster, Recorded
from tests.controller.fakes import Events
from tests.controller.test_job_reconciler import ADMITTED_AT, NOW

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])


def sts(name: str = "db", *, replicas: int = 2, generation: int = 1, gated: bool = True) -> Obj:
    template: Obj = {
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }
    if gated:
        template["metadata"]["labels"][c.MANAGED_LABEL] = "true"
        template["spec"]["schedulingGates"] = [{"name": c.ADMISSION_GATE}]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "generation": generation,
            "resourceVersion": "7",
            "labels": {c.QUEUE_NAME_LABEL: "main"},
        },
        "spec": {"replicas": replicas, "template": template},
    }


def workload(obj: Obj, *, admitted: int | None = None, evicted: bool = False) -> Workload:
    doc = StatefulSetIntegration().workload_for(obj, NO_CLASSES).to_dict()
    doc["metadata"]["uid"] = f"wl-{doc['metadata']['name']}"
    if admitted is not None:
        at = ADMITTED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = [
            {"type": c.QUOTA_RESERVED, "status": "True", "reason": c.QUOTA_RESERVED_REASON,
             "message": "reserved", "lastTransitionTime": at},
            {"type": c.ADMITTED, "status": "True", "reason": c.ADMITTED,
             "message": "admitted", "lastTransitionTime": at},
        ]
        if evicted:
            conditions.append(
                {"type": c.EVICTED, "status": "True", "reason": c.EVICTED_BY_PREEMPTION,
                 "message": "Preempted to accommodate a higher priority Workload",
                 "lastTransitionTime": at}
            )
        doc["status"] = {
            "conditions": conditions,
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "main", "flavors": {"cpu": "on-demand"},
                     "resourceUsage": {"cpu": str(admitted)}, "count": admitted}
                ],
            },
        }
    out = parse_object(doc, validate=False)
    assert isinstance(out, Workload)
    return out


def pod(owner: Obj, i: int, *, gated: bool = True, phase: str = "Pending") -> Obj:
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{i}",
            "namespace": meta["namespace"],
            "uid": f"{meta['name']}-pod-{i}",
            "resourceVersion": "1",
            "creationTimestamp": f"2025-03-01T11:00:0{i}Z",
            "labels": {c.MANAGED_LABEL: "true"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"],
                 "uid": meta["uid"], "controller": True}
            ],
        },
        "spec": {
            "schedulingGates": [{"name": c.ADMISSION_GATE}] if gated else [],
            "containers": [],
            **({} if gated else {"nodeName": "kwok-1"}),
        },
        "status": {"phase": phase},
    }


class World:
    """The reconciler driven step by step through its stores, which hold what the API server
    holds; what it wrote is read from the server's record of requests (since ``clear``)."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.server = cluster.server
        self.kube = cluster.kube
        self._first = len(self.server.requests)
        self.objects: Store[Obj] = Store()
        self.workloads: Store[Workload] = Store()
        self.workloads.add_index(BY_OWNER, owner_uids)
        self.pods: Store[Obj] = Store()
        self.pods.add_index(BY_OWNER, owner_uids)
        flavors: Store[ResourceFlavor] = Store()
        rf = parse_object(
            {"apiVersion": c.API_VERSION, "kind": "ResourceFlavor",
             "metadata": {"name": "on-demand"},
             "spec": {"nodeLabels": {"instance-type": "on-demand"}}}
        )
        assert isinstance(rf, ResourceFlavor)
        flavors._put("on-demand", rf, "1")
        self.events = Events()
        metrics = Metrics()
        releaser = PodReleaser(kube=self.kube, metrics=metrics, now=lambda: NOW)
        self.reconciler = JobReconciler(
            job=StatefulSetIntegration(),
            objects=self.objects,
            workloads=self.workloads,
            pods=self.pods,
            flavors=flavors,
            priorities=lambda: NO_CLASSES,
            kube=self.kube,
            events=self.events,
            releaser=releaser,
            now=lambda: NOW,
        )
        slices = ElasticSlices(
            engine=_no_engine,
            workloads=self.workloads,
            priorities=lambda: NO_CLASSES,
            kube=self.kube,
            events=self.events,
            metrics=metrics,
            now=lambda: NOW,
            sizing=SIZING,
        )
        scaling = StatefulSetScaling(
            slices=slices, pods=self.pods, kube=self.kube,
            events=self.events, releaser=releaser, now=lambda: NOW,
        )
        self.reconciler.workload_hooks.append(scaling.select)

    def add(self, obj: Obj, *wls: Workload, pods: list[Obj] | None = None) -> str:
        key = self.put(self.objects, STATEFULSETS, obj)
        for wl in wls:
            stored = self.server.add(WORKLOADS, wl.to_dict())
            self.workloads._put(
                f"{wl.namespace}/{wl.name}",
                Workload.model_validate(stored),
                stored["metadata"]["resourceVersion"],
            )
        for p in pods or []:
            self.put(self.pods, PODS, p)
        return key

    def put(self, store: Store[Obj], resource: Resource, obj: Obj) -> str:
        """``obj`` on the API server, and in ``store`` as an informer would have it."""
        stored = self.server.add(resource, obj)
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        store._put(key, stored, stored["metadata"]["resourceVersion"])
        return key

    def clear(self) -> None:
        self._first = len(self.server.requests)

    def _written(self, method: str, plural: str | None = None) -> list[Recorded]:
        return [
            r
            for r in self.server.requests[self._first :]
            if r.method == method and plural in (None, r.plural) and r.ok
        ]

    def patches(self, plural: str) -> list[tuple[str, Any]]:
        return [(r.name, r.body) for r in self._written("PATCH", plural)]

    @property
    def patched(self) -> list[tuple[str, str, Any]]:
        return [(r.plural, r.name, r.body) for r in self._written("PATCH")]

    @property
    def created(self) -> list[Obj]:
        return [r.body for r in self._written("POST", WORKLOADS.plural)]

    @property
    def deleted(self) -> list[tuple[str, str]]:
        return [
            (r.plural, r.name)
            for r in self._written("DELETE")
        ]

    @property
    def statuses(self) -> list[Obj]:
        return [
            r.body
            for r in self._written("PUT", WORKLOADS.plural)
            if r.target.subresource == "status"
        ]


def _no_engine() -> Any:
    raise AssertionError("no scale-down expected here")


async def test_a_new_statefulset_gets_one_gang_workload(cluster: FakeCluster) -> None:
    world = World(cluster)
    key = world.add(sts(replicas=3))
    assert await world.reconciler(key) is None
    [body] = world.created
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("main", 3)]
    assert body["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    assert world.events.reasons("db") == ["CreatedWorkload"]


async def test_admitted_pods_are_released_with_the_flavor_never_more_than_admitted(cluster: FakeCluster) -> None:
    world = World(cluster)
    obj = sts(replicas=2)
    # A third pod (say, a surplus one its controller has not deleted yet) stays gated.
    key = world.add(obj, workload(obj, admitted=2), pods=[pod(obj, i) for i in range(3)])
    assert await world.reconciler(key) is None
    released = world.patches(PODS.plural)
    assert sorted(name for name, _ in released) == ["db-0", "db-1"]
    for _, ops in released:
        assert {"op": "add", "path": "/spec/nodeSelector", "value": {"instance-type": "on-demand"}} in ops
    assert world.patches("statefulsets") == [], "the template never changes on admission"
    assert world.events.reasons("db") == ["Started"]


async def test_a_queued_statefulset_created_before_the_webhooks_gets_the_gate(cluster: FakeCluster) -> None:
    world = World(cluster)
    obj = sts(gated=False)
    key = world.add(obj, workload(obj))
    await world.reconciler(key)
    [(name, patch)] = world.patches("statefulsets")
    assert name == "db"
    assert patch["spec"]["template"]["spec"]["schedulingGates"] == [{"name": c.ADMISSION_GATE}]
    assert patch["spec"]["template"]["metadata"]["labels"] == {c.MANAGED_LABEL: "true"}
    assert patch["metadata"]["resourceVersion"] == world.objects.get(key)["metadata"]["resourceVersion"]

    held = World(cluster)
    obj = sts(gated=True)
    await held.reconciler(held.add(obj, workload(obj)))
    assert held.patched == []


async def test_scaled_to_zero_the_workload_goes_and_none_is_created(cluster: FakeCluster) -> None:
    world = World(cluster)
    running = sts(replicas=2)
    wl = workload(running, admitted=2)
    key = world.add(sts(replicas=0, generation=2), wl)
    assert await world.reconciler(key) is None
    assert world.deleted == [(WORKLOADS.plural, wl.name)]
    assert world.created == []
    assert world.events.reasons("db") == ["ScaledToZero"]
    assert "its quota is free" in world.events.recorded[0][3]

    # Still at 0, nothing left: nothing happens.
    empty = World(cluster)
    assert await empty.reconciler(empty.add(sts(replicas=0))) is None
    assert empty.created == [] and empty.deleted == []


async def test_a_scale_up_creates_a_replacement_slice_and_keeps_driving_the_admitted_one(cluster: FakeCluster) -> None:
    world = World(cluster)
    before = sts(replicas=2)
    first = workload(before, admitted=2)
    grown = sts(replicas=4, generation=2)
    pods = [pod(before, 0, gated=False, phase="Running"), pod(before, 1, gated=False, phase="Running"),
            pod(before, 2)]
    key = world.add(grown, first, pods=pods)
    assert await world.reconciler(key) is None
    [body] = world.created
    assert body["spec"]["podSets"][0]["count"] == 4
    assert body["metadata"]["annotations"][c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION] == (
        f"team-a/{first.name}"
    )
    assert body["metadata"]["name"] != first.name
    # The new pod waits for the replacement: the admitted slice covers the two running pods.
    assert world.patches(PODS.plural) == []
    assert "CreatedWorkloadSlice" in world.events.reasons("db")


async def test_eviction_deletes_the_running_pods_and_requeues_once_they_are_gone(cluster: FakeCluster) -> None:
    world = World(cluster)
    obj = sts(replicas=2)
    wl = workload(obj, admitted=2, evicted=True)
    running = [pod(obj, 0, gated=False, phase="Running"), pod(obj, 1, gated=False, phase="Running")]
    key = world.add(obj, wl, pods=running)
    await world.reconciler(key)
    assert sorted(name for plural, name in world.deleted if plural == PODS.plural) == ["db-0", "db-1"]
    assert world.statuses == [], "quota kept while pods run"
    assert "Stopped" in world.events.reasons("db")

    # Gone, and recreated behind the gate by the StatefulSet controller: the quota goes.
    world.clear()
    for p in running:
        world.pods._delete(f"team-a/{p['metadata']['name']}")
    for p in (pod(obj, 0), pod(obj, 1)):
        world.put(world.pods, PODS, p)
    await world.reconciler(key)
    assert world.deleted == [], "gated pods are not deleted"
    [released] = world.statuses
    assert released["status"].get("admission") is None
    requeued = next(x for x in released["status"]["conditions"] if x["type"] == c.REQUEUED)
    assert (requeued["status"], requeued["reason"]) == ("True", c.EVICTED_BY_PREEMPTION)


async def test_pods_running_while_the_workload_is_queued_are_stopped_once_the_template_is_gated(cluster: FakeCluster) -> None:
    # Created before kqueue's webhooks: its pods run ungated, and its template had no gate.
    world = World(cluster)
    obj = sts(gated=False)
    running = [pod(obj, 0, gated=False, phase="Running"), pod(obj, 1, gated=False, phase="Running")]
    key = world.add(obj, workload(obj), pods=running)
    await world.reconciler(key)
    assert world.deleted == [], "not before its next pods would be held"
    assert [name for name, _ in world.patches("statefulsets")] == ["db"]

    # The template has the gate now: the running pods go, and come back held.
    world.put(world.objects, STATEFULSETS, sts(gated=True))
    await world.reconciler(key)
    assert sorted(name for _, name in world.deleted) == ["db-0", "db-1"]
    [message] = [m for n, _, r, m in world.events.recorded if (n, r) == ("db", "Stopped")]
    assert "running while Workload" in message and "queued" in message

    # Admitted pods are never stopped that way.
    admitted = World(cluster)
    obj = sts()
    await admitted.reconciler(admitted.add(obj, workload(obj, admitted=2), pods=[
        pod(obj, 0, gated=False, phase="Running"), pod(obj, 1, gated=False, phase="Running")
    ]))
    assert admitted.deleted == []


def _max_exec(obj: Obj, value: str) -> Obj:
    obj["metadata"]["labels"][c.MAX_EXEC_TIME_SECONDS_LABEL] = value
    return obj


async def test_the_maximum_execution_time_is_passed_to_the_created_workload(cluster: FakeCluster) -> None:
    # Kueue's job_controller_test.go case, on a StatefulSet: Kueue builds its Workload from the
    # StatefulSet's labels (statefulset_reconciler.go constructWorkload).
    world = World(cluster)
    key = world.add(_max_exec(sts(), "10"))
    assert await world.reconciler(key) is None
    [body] = world.created
    assert body["spec"]["maximumExecutionTimeSeconds"] == 10


async def test_the_maximum_execution_time_is_updated_in_the_workload(cluster: FakeCluster) -> None:
    # Kueue's job_controller_test.go case: a queued Workload follows the label (5 -> 10).
    world = World(cluster)
    waiting = workload(_max_exec(sts(), "5"))
    key = world.add(_max_exec(sts(), "10"), waiting)
    await world.reconciler(key)
    assert world.patches(WORKLOADS.plural) == [
        (waiting.name, {"spec": {"maximumExecutionTimeSeconds": 10}})
    ]
    assert world.created == []
