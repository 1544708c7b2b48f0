"""MultiKueue's garbage collector reads the manager's watches of a worker (gc.py): a pass on a
quiet, watched worker asks it nothing; a job kind not watched is listed once per connection
until a list finds none of this manager's there; a new connection lists again."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import ORIGIN_LABEL
from kqueue.controller.admission_checks.multikueue import adapters
from kqueue.controller.admission_checks.multikueue.gc import GarbageCollector
from kqueue.controller.informer import Store
from kqueue.controller.kube import NotFound
from kqueue.controller.resources import JOBS, WORKLOADS, Resource

Obj = dict[str, Any]
NS = "ns"
ORIGIN = "origin1"
MPIJOBS = Resource("kubeflow.org", "v2beta1", "mpijobs")


def _copy(name: str) -> Obj:
    return {"metadata": {"name": name, "namespace": NS, "labels": {ORIGIN_LABEL: ORIGIN}}}


def _job(name: str, workload: str) -> Obj:
    return {"metadata": {"name": name, "namespace": NS, "labels": {
        ORIGIN_LABEL: ORIGIN, c.PREBUILT_WORKLOAD_LABEL: workload}}}


def _store(*objs: Obj) -> Store[Obj]:
    store: Store[Obj] = Store()
    for obj in objs:
        store._put(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}", obj, "1")
    return store


class _Worker:
    """A worker's client: counts the lists; ``jobs`` answer them (MPIJobs are not served)."""

    def __init__(self, jobs: dict[str, list[Obj]] | None = None) -> None:
        self.lists: Counter[str] = Counter()
        self.deleted: list[tuple[str, str]] = []
        self.jobs = jobs or {}

    async def list(self, resource: Resource, *, label_selector: str) -> list[Obj]:
        assert label_selector == f"{ORIGIN_LABEL}={ORIGIN}"
        self.lists[resource.plural] += 1
        if resource.plural == MPIJOBS.plural:
            raise NotFound(what="list mpijobs", status=404, body={})
        return [o for o in self.jobs.get(resource.plural, [])
                if (resource.plural, o["metadata"]["name"]) not in self.deleted]

    async def delete(self, resource: Resource, name: str, *, namespace: str | None = None) -> None:
        self.deleted.append((resource.plural, name))


class _Watches:
    """RemoteClusters as the collector reads it: the stores of the watched resources."""

    def __init__(self, stores: dict[Resource, Store[Obj]]) -> None:
        self.stores = stores

    def watched(self, name: str, resource: Resource) -> Store[Obj] | None:
        return self.stores.get(resource)


def _manager(*names: str) -> Store[Workload]:
    store: Store[Workload] = Store()
    for name in names:
        wl = Workload.model_validate({
            "apiVersion": c.API_VERSION, "kind": "Workload",
            "metadata": {"name": name, "namespace": NS}, "spec": {"podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]},
        })
        store._put(f"{NS}/{name}", wl, "1")
    return store


def _gc(watches: _Watches, manager: Store[Workload]) -> GarbageCollector:
    return GarbageCollector(remotes=watches, workloads=manager,  # type: ignore[arg-type]
                            origin=ORIGIN, interval=0)


UNWATCHED = sorted(a.resource.plural for a in adapters.ADAPTERS.values()
                   if a.resource.plural != JOBS.plural)


async def test_a_watched_worker_s_orphans_go_and_a_quiet_pass_asks_the_worker_nothing() -> None:
    watches = _Watches({
        WORKLOADS: _store(_copy("wl-gone"), _copy("wl-kept")),
        JOBS: _store(_job("job-gone", "wl-gone"), _job("job-kept", "wl-kept")),
    })
    worker = _Worker()
    gc = _gc(watches, _manager("wl-kept"))

    assert await gc.collect("worker1", worker) == 1  # type: ignore[arg-type]

    assert worker.deleted == [("workloads", "wl-gone"), ("jobs", "job-gone")]
    # Read from the watches: the Workloads and Jobs never listed; every other kind once (none
    # of this manager's there, or not served).
    assert sorted(worker.lists) == UNWATCHED and set(worker.lists.values()) == {1}
    assert "workloads" not in worker.lists and "jobs" not in worker.lists

    worker.lists.clear()
    await gc.collect("worker1", worker)  # type: ignore[arg-type]
    assert worker.lists == Counter()


async def test_a_kind_with_orphans_is_listed_until_none_is_left() -> None:
    watches = _Watches({WORKLOADS: _store()})
    worker = _Worker({"rayjobs": [_job("rj", "wl-gone")]})
    gc = _gc(watches, _manager())

    await gc.collect("worker1", worker)  # type: ignore[arg-type]
    assert ("rayjobs", "rj") in worker.deleted
    worker.lists.clear()
    await gc.collect("worker1", worker)  # type: ignore[arg-type]
    # Listed again (the orphan's deletion is checked), found none: not listed after that.
    assert worker.lists == Counter({"rayjobs": 1})
    worker.lists.clear()
    await gc.collect("worker1", worker)  # type: ignore[arg-type]
    assert worker.lists == Counter()


async def test_the_workloads_are_listed_until_their_watch_has_listed() -> None:
    watches = _Watches({})
    worker = _Worker({"workloads": [_copy("wl-gone")]})
    gc = _gc(watches, _manager())

    await gc.collect("worker1", worker)  # type: ignore[arg-type]
    await gc.collect("worker1", worker)  # type: ignore[arg-type]
    assert worker.lists["workloads"] == 2
    assert worker.deleted[0] == ("workloads", "wl-gone")
    watches.stores[WORKLOADS] = _store()
    worker.lists.clear()
    await gc.collect("worker1", worker)  # type: ignore[arg-type]
    assert "workloads" not in worker.lists


async def test_a_new_connection_lists_the_unwatched_kinds_again() -> None:
    """A worker that was lost and came back (a new client) may hold orphans of any kind."""
    watches = _Watches({WORKLOADS: _store(), JOBS: _store()})
    gc = _gc(watches, _manager())
    first = _Worker()
    await gc.collect("worker1", first)  # type: ignore[arg-type]
    await gc.collect("worker1", first)  # type: ignore[arg-type]
    assert set(first.lists.values()) == {1}

    back = _Worker({"rayclusters": [_job("rc", "wl-gone")]})
    await gc.collect("worker1", back)  # type: ignore[arg-type]
    assert sorted(back.lists) == UNWATCHED
    assert back.deleted == [("rayclusters", "rc")]
