"""A StatefulSet through the generic reconciler and its scaling hook, on in-memory stores and a
fake API: one Workload, pods released with the flavor's node labels (never more than admitted),
held templates, scale to 0, a scale-up's replacement slice, eviction by deleting running pods."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
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
from kqueue.controller.integrations.statefulset.scaling import SIZING, StatefulSetScaling
from kqueue.controller.kube import KubeError
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import PODS, WORKLOADS
from tests.controller.fakes import Events
from tests.controller.test_job_reconciler import ADMITTED_AT, NOW

Obj = dict[str, Any]
NO_CLASSES = PriorityClasses.from_objects([], [])


# A recording client (this module drives the reconciler step by step through its stores).
class FakeKube:
    """Records requests; every patch awaits, so concurrent patches overlap."""

    def __init__(self, *, fail: Iterable[str] = (), boom: Iterable[str] = ()) -> None:
        self.fail = set(fail)
        self.boom = set(boom)
        self.in_flight = 0
        self.max_in_flight = 0
        self.patched: list[tuple[str, str, Any]] = []
        self.created: list[Obj] = []
        self.finished_after_boom = 0
        self._boomed = False

    async def patch(self, resource: Any, name: str, patch: Any, **_: Any) -> Obj:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.005)
            if name in self.boom:
                self._boomed = True
                raise OSError(f"connection reset while patching {name}")
            if name in self.fail:
                raise KubeError(what=f"patch {name}", status=500, body={"reason": "InternalError"})
            if self._boomed:
                self.finished_after_boom += 1
            self.patched.append((resource.plural, name, patch))
            return {}
        finally:
            self.in_flight -= 1

    async def create(self, resource: Any, body: Obj, namespace: str | None = None) -> Obj:
        self.created.append(body)
        return body

    async def replace_status(self, resource: Any, body: Obj, *, namespace: str | None = None) -> Obj:
        return body


class Kube(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[tuple[str, str]] = []
        self.statuses: list[Obj] = []

    async def delete(self, resource: Any, name: str, *, namespace: str | None = None) -> Obj:
        self.deleted.append((resource.plural, name))
        return {}

    async def replace_status(self, resource: Any, body: Obj, *, namespace: str | None = None) -> Obj:
        self.statuses.append(body)
        return body


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
    def __init__(self) -> None:
        self.kube = Kube()
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
        releaser = PodReleaser(kube=self.kube, metrics=metrics, now=lambda: NOW)  # type: ignore[arg-type]
        self.reconciler = JobReconciler(
            job=StatefulSetIntegration(),
            objects=self.objects,
            workloads=self.workloads,
            pods=self.pods,
            flavors=flavors,
            priorities=lambda: NO_CLASSES,
            kube=self.kube,  # type: ignore[arg-type]
            events=self.events,
            releaser=releaser,
            now=lambda: NOW,
        )
        slices = ElasticSlices(
            engine=_no_engine,
            workloads=self.workloads,
            priorities=lambda: NO_CLASSES,
            kube=self.kube,  # type: ignore[arg-type]
            events=self.events,
            metrics=metrics,
            now=lambda: NOW,
            sizing=SIZING,
        )
        scaling = StatefulSetScaling(
            slices=slices, pods=self.pods, kube=self.kube,  # type: ignore[arg-type]
            events=self.events, releaser=releaser, now=lambda: NOW,
        )
        self.reconciler.workload_hooks.append(scaling.select)

    def add(self, obj: Obj, *wls: Workload, pods: list[Obj] | None = None) -> str:
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        self.objects._put(key, obj, "7")
        for wl in wls:
            self.workloads._put(f"{wl.namespace}/{wl.name}", wl, "1")
        for p in pods or []:
            self.pods._put(f"{p['metadata']['namespace']}/{p['metadata']['name']}", p, "1")
        return key

    def patches(self, plural: str) -> list[tuple[str, Any]]:
        return [(name, patch) for pl, name, patch in self.kube.patched if pl == plural]


def _no_engine() -> Any:
    raise AssertionError("no scale-down expected here")


async def test_a_new_statefulset_gets_one_gang_workload() -> None:
    world = World()
    key = world.add(sts(replicas=3))
    assert await world.reconciler(key) is None
    [body] = world.kube.created
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("main", 3)]
    assert body["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    assert world.events.reasons("db") == ["CreatedWorkload"]


async def test_admitted_pods_are_released_with_the_flavor_never_more_than_admitted() -> None:
    world = World()
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


async def test_a_queued_statefulset_created_before_the_webhooks_gets_the_gate() -> None:
    world = World()
    obj = sts(gated=False)
    key = world.add(obj, workload(obj))
    await world.reconciler(key)
    [(name, patch)] = world.patches("statefulsets")
    assert name == "db"
    assert patch["spec"]["template"]["spec"]["schedulingGates"] == [{"name": c.ADMISSION_GATE}]
    assert patch["spec"]["template"]["metadata"]["labels"] == {c.MANAGED_LABEL: "true"}
    assert patch["metadata"]["resourceVersion"] == "7"

    held = World()
    obj = sts(gated=True)
    await held.reconciler(held.add(obj, workload(obj)))
    assert held.kube.patched == []


async def test_scaled_to_zero_the_workload_goes_and_none_is_created() -> None:
    world = World()
    running = sts(replicas=2)
    wl = workload(running, admitted=2)
    key = world.add(sts(replicas=0, generation=2), wl)
    assert await world.reconciler(key) is None
    assert world.kube.deleted == [(WORKLOADS.plural, wl.name)]
    assert world.kube.created == []
    assert world.events.reasons("db") == ["ScaledToZero"]
    assert "its quota is free" in world.events.recorded[0][3]

    # Still at 0, nothing left: nothing happens.
    empty = World()
    assert await empty.reconciler(empty.add(sts(replicas=0))) is None
    assert empty.kube.created == [] and empty.kube.deleted == []


async def test_a_scale_up_creates_a_replacement_slice_and_keeps_driving_the_admitted_one() -> None:
    world = World()
    before = sts(replicas=2)
    first = workload(before, admitted=2)
    grown = sts(replicas=4, generation=2)
    pods = [pod(before, 0, gated=False, phase="Running"), pod(before, 1, gated=False, phase="Running"),
            pod(before, 2)]
    key = world.add(grown, first, pods=pods)
    assert await world.reconciler(key) is None
    [body] = world.kube.created
    assert body["spec"]["podSets"][0]["count"] == 4
    assert body["metadata"]["annotations"][c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION] == (
        f"team-a/{first.name}"
    )
    assert body["metadata"]["name"] != first.name
    # The new pod waits for the replacement: the admitted slice covers the two running pods.
    assert world.patches(PODS.plural) == []
    assert "CreatedWorkloadSlice" in world.events.reasons("db")


async def test_eviction_deletes_the_running_pods_and_requeues_once_they_are_gone() -> None:
    world = World()
    obj = sts(replicas=2)
    wl = workload(obj, admitted=2, evicted=True)
    running = [pod(obj, 0, gated=False, phase="Running"), pod(obj, 1, gated=False, phase="Running")]
    key = world.add(obj, wl, pods=running)
    await world.reconciler(key)
    assert sorted(name for plural, name in world.kube.deleted if plural == PODS.plural) == ["db-0", "db-1"]
    assert world.kube.statuses == [], "quota kept while pods run"
    assert "Stopped" in world.events.reasons("db")

    # Gone, and recreated behind the gate by the StatefulSet controller: the quota goes.
    world.kube.deleted.clear()
    for p in running:
        world.pods._delete(f"team-a/{p['metadata']['name']}")
    for p in (pod(obj, 0), pod(obj, 1)):
        world.pods._put(f"team-a/{p['metadata']['name']}", p, "2")
    await world.reconciler(key)
    assert world.kube.deleted == [], "gated pods are not deleted"
    [released] = world.kube.statuses
    assert released["status"].get("admission") is None
    requeued = next(x for x in released["status"]["conditions"] if x["type"] == c.REQUEUED)
    assert (requeued["status"], requeued["reason"]) == ("True", c.EVICTED_BY_PREEMPTION)


async def test_pods_running_while_the_workload_is_queued_are_stopped_once_the_template_is_gated() -> None:
    # Created before kqueue's webhooks: its pods run ungated, and its template had no gate.
    world = World()
    obj = sts(gated=False)
    running = [pod(obj, 0, gated=False, phase="Running"), pod(obj, 1, gated=False, phase="Running")]
    key = world.add(obj, workload(obj), pods=running)
    await world.reconciler(key)
    assert world.kube.deleted == [], "not before its next pods would be held"
    assert [name for name, _ in world.patches("statefulsets")] == ["db"]

    # The template has the gate now: the running pods go, and come back held.
    world.objects._put(key, sts(gated=True), "8")
    await world.reconciler(key)
    assert sorted(name for _, name in world.kube.deleted) == ["db-0", "db-1"]
    [message] = [m for n, _, r, m in world.events.recorded if (n, r) == ("db", "Stopped")]
    assert "running while Workload" in message and "queued" in message

    # Admitted pods are never stopped that way.
    admitted = World()
    obj = sts()
    await admitted.reconciler(admitted.add(obj, workload(obj, admitted=2), pods=[
        pod(obj, 0, gated=False, phase="Running"), pod(obj, 1, gated=False, phase="Running")
    ]))
    assert admitted.kube.deleted == []
