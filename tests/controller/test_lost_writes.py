"""An admission whose answer is lost to a cut connection is read back, never assumed either way.

The real Scheduler and DecisionWriter, a real Engine, the real Kube client and a real Workload
informer, on the shared fake API server with connections cut (cutting_apiserver.py). The
engine is fed the informer's first list only: what it holds after the write is what the writer
made of the write's outcome (ADMITTED: confirmed; PENDING: forgotten), not what a later watch
event would have told it. Writes are counted at the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from kqueue.api.v1alpha1 import Workload
from kqueue.controller import decision_writer
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Informer
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import WORKLOADS
from kqueue.controller.scheduler import Scheduler
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey
from kqueue.engine.workload import WorkloadState
from tests.controller.cutting_apiserver import (
    cutting_cluster,
    record_pauses,
    server_of,
)
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_scheduler import NOW, NS, FakeEvents, make, workload

Obj = dict[str, Any]
KEY = WorkloadKey(f"{NS}/a")


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async for c in cutting_cluster():
        yield c


@pytest.fixture(autouse=True)
def read_back_pauses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The writer's pauses before reading a lost write back, recorded and shortened."""
    return record_pauses(monkeypatch, decision_writer)


class Setup:
    def __init__(self, cluster: FakeCluster, informer: Informer[Workload], engine: Engine) -> None:
        self.cluster = cluster
        self.server = server_of(cluster)
        self.engine = engine
        self.written: list[tuple[str, str | None]] = []
        self.scheduler = Scheduler(
            engine=lambda: engine,
            workloads=informer.store,
            kube=cluster.kube,
            events=cast(EventRecorder, FakeEvents()),
            metrics=Metrics(),
            releases_itself=lambda wl: True,
            on_written=lambda key, rv: self.written.append((key, rv)),
            now=lambda: NOW,
        )

    async def cycle(self) -> None:
        """One scheduling cycle, its writes done (a writer that never finds out fails here)."""
        assert await self.scheduler.run_once()
        await asyncio.wait_for(self.scheduler.drain(), 10)

    def admission_writes(self) -> list[int]:
        """The HTTP status of each admission write the server served (cut ones included)."""
        return [r.status for r in self.server.requests_to("PUT", WORKLOADS, subresource="status")]

    def stored(self) -> Obj:
        obj = self.server.get(WORKLOADS, "a", NS)
        assert obj is not None
        return obj

    def admission(self) -> Any:
        return (self.stored().get("status") or {}).get("admission")


async def _setup(cluster: FakeCluster) -> Setup:
    """Workload ``a`` pending, fitting its ClusterQueue; the engine fed the informer's list."""
    cluster.server.add(WORKLOADS, workload("a", "1"))
    informer = await cluster.informer(WORKLOADS, Workload.model_validate)
    _, _, _, engine = make(cluster, cpu="4")
    for _, wl in informer.store.items():
        from_api.apply_workload(engine, wl, owner_labels=wl.metadata.labels)
    assert engine.state(KEY) == WorkloadState.PENDING
    return Setup(cluster, informer, engine)


async def test_an_admission_that_landed_with_its_answer_lost_is_confirmed(
    cluster: FakeCluster, read_back_pauses: list[int]
) -> None:
    s = await _setup(cluster)
    s.server.cut("PUT", WORKLOADS, subresource="status", served=True)
    # aiohttp resends a PUT cut on its connection once by itself: cut that copy unserved, so
    # that the loss reaches the writer (the next test lets it through).
    s.server.cut("PUT", WORKLOADS, subresource="status", served=False)
    await s.cycle()

    assert s.engine.state(KEY) == WorkloadState.ADMITTED
    assert s.admission_writes() == [200]  # read back, not written again
    assert s.admission() is not None
    assert read_back_pauses == [1]
    # The feed's floor: the version read back, so no older event undoes the admission.
    assert s.written == [(KEY, s.stored()["metadata"]["resourceVersion"])]
    assert s.scheduler.admitted == 1


async def test_an_admission_that_landed_and_whose_resend_conflicts_is_confirmed(
    cluster: FakeCluster,
) -> None:
    """aiohttp sends a PUT cut on its connection once more; that copy, based on the same
    resourceVersion, is refused with 409 Conflict by our own first copy in place."""
    s = await _setup(cluster)
    s.server.cut("PUT", WORKLOADS, subresource="status", served=True)
    await s.cycle()

    assert s.admission_writes() == [200, 409]
    assert s.admission() is not None
    assert s.engine.state(KEY) == WorkloadState.ADMITTED


async def test_an_admission_that_did_not_land_is_sent_again_and_lands_once(
    cluster: FakeCluster,
) -> None:
    s = await _setup(cluster)
    # Cut before it is served, and aiohttp's own resend too.
    s.server.cut("PUT", WORKLOADS, subresource="status", served=False, times=2)
    await s.cycle()

    assert s.server.hung_up == 2
    assert s.admission_writes() == [200]
    assert s.admission() is not None
    assert s.engine.state(KEY) == WorkloadState.ADMITTED
    assert s.scheduler.admitted == 1
    # Nothing is decided again: the admission is held, the queue empty.
    assert not await s.scheduler.run_once()
    assert s.admission_writes() == [200]


async def test_an_admission_lost_while_the_workload_changed_is_forgotten(
    cluster: FakeCluster,
) -> None:
    s = await _setup(cluster)
    changed: list[str] = []

    def someone_writes() -> None:
        if not changed:
            obj = s.stored()
            obj["metadata"].setdefault("labels", {})["touched"] = "yes"
            changed.append(s.server.add(WORKLOADS, obj)["metadata"]["resourceVersion"])

    s.server.cut("PUT", WORKLOADS, subresource="status", served=False, times=2, then=someone_writes)
    await s.cycle()

    assert changed
    assert s.admission_writes() == []  # no resend onto a workload that moved on
    assert s.admission() is None
    assert s.engine.state(KEY) == WorkloadState.PENDING
    assert s.scheduler.admitted == 0
    assert s.written == []
