"""A cut watch is resumed where it was, as client-go's reflector does; only 410 Gone relists.

The real Informer on the shared fake API server, whose connections are cut as a flaky load
balancer cuts them (cutting_apiserver.py). Each test reads what the informer asked the server
(the resourceVersion each watch started from, how many lists) and what its handlers were told.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kqueue.controller.clock import LoopClock
from kqueue.controller.informer import Informer, as_dict
from kqueue.controller.resources import CONFIGMAPS
from tests.controller.cutting_apiserver import cutting_cluster, server_of
from tests.controller.fake_apiserver import FakeCluster, eventually
from tests.controller.test_informer import Recorder, configmap

Obj = dict[str, Any]
NS = "default"


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async for c in cutting_cluster():
        yield c


def _add(cluster: FakeCluster, name: str, **data: str) -> str:
    """Create or replace a ConfigMap; returns its new resourceVersion."""
    obj = configmap(name, 0, **data)
    del obj["metadata"]["resourceVersion"]
    return str(cluster.server.add(CONFIGMAPS, obj)["metadata"]["resourceVersion"])


async def _watching(cluster: FakeCluster, informer: Informer[Obj], count: int) -> None:
    """Wait until the informer made ``count`` watch requests and holds the last one's stream
    open (it resets ``_opened`` before each request)."""
    server = server_of(cluster)
    await eventually(
        lambda: informer.watches >= count and informer._opened and bool(server._watching),
        what=f"watch request {count} open",
    )


class RecordingClock(LoopClock):
    """The loop's clock, recording each pause the informer asks for instead of taking it."""

    def __init__(self) -> None:
        self.pauses: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        await asyncio.sleep(0.001)


async def _run(cluster: FakeCluster, informer: Informer[Obj]) -> Informer[Obj]:
    cluster._tasks.append(asyncio.get_running_loop().create_task(informer.run()))
    await asyncio.wait_for(informer.wait_synced(), 5)
    return informer


async def test_a_watch_cut_mid_stream_resumes_at_the_last_resource_version(
    cluster: FakeCluster,
) -> None:
    server = server_of(cluster)
    _add(cluster, "a")
    informer = await cluster.informer(CONFIGMAPS, as_dict)
    rec = Recorder()
    informer.add_handler(on_add=rec.on_add, on_update=rec.on_update, on_delete=rec.on_delete)
    listed_at = informer.resource_version
    rv_b, rv_c = _add(cluster, "b"), _add(cluster, "c")
    await cluster.synced()
    await _watching(cluster, informer, 1)

    assert server.cut_watches() == 1
    rv_d, rv_e = _add(cluster, "d"), _add(cluster, "e")  # while the informer is cut off
    await cluster.synced()

    assert server.watch_versions() == [listed_at, rv_c]
    assert server.list_requests() == 1 and informer.lists == 1
    assert informer.cuts == 1
    # Every event once: nothing before the cut again, nothing after it missed.
    rv_a = cluster.server.get(CONFIGMAPS, "a", NS)["metadata"]["resourceVersion"]  # type: ignore[index]
    assert rec.seen == [
        f"add {NS}/a@{rv_a}",
        f"add {NS}/b@{rv_b}",
        f"add {NS}/c@{rv_c}",
        f"add {NS}/d@{rv_d}",
        f"add {NS}/e@{rv_e}",
    ]


async def test_a_quiet_watch_cut_again_and_again_neither_lists_nor_backs_off(
    cluster: FakeCluster,
) -> None:
    """The issue's quiet informers: each watch opens, sees no event and is cut. Before the fix
    such a cut was a failed list: relisted every time, backing off to 30 s."""
    server = server_of(cluster)
    _add(cluster, "a")
    clock = RecordingClock()
    informer = await _run(
        cluster, Informer(cluster.kube, CONFIGMAPS, converter=as_dict, clock=clock)
    )
    for n in range(1, 11):
        await _watching(cluster, informer, n)
        assert server.cut_watches() == 1
    await _watching(cluster, informer, 11)
    rv = _add(cluster, "b")
    await eventually(lambda: informer.store.resource_version(f"{NS}/b") == rv, what="b seen")

    assert server.list_requests() == 1 and informer.lists == 1
    assert informer.cuts == 10
    assert len(clock.pauses) == 10
    # Each resume waits at most the initial backoff (0.5 s), jittered: never tens of seconds.
    assert all(0 < p <= 0.5 for p in clock.pauses), clock.pauses
    assert len(set(server.watch_versions())) == 1  # nothing happened: all at one version


async def test_the_resume_backoff_grows_while_no_watch_opens_and_resets_once_one_does(
    cluster: FakeCluster,
) -> None:
    server = server_of(cluster)
    _add(cluster, "a")
    clock = RecordingClock()
    informer = await _run(
        cluster, Informer(cluster.kube, CONFIGMAPS, converter=as_dict, clock=clock)
    )
    await _watching(cluster, informer, 1)
    # The next six watch requests are cut before they are answered (the server unreachable).
    server.cut(
        "GET",
        CONFIGMAPS,
        served=False,
        times=None,
        watches=True,
        until=lambda: informer.watches >= 8,
    )
    server.cut_watches()
    await _watching(cluster, informer, 8)
    grown = list(clock.pauses)
    server.cut_watches()  # the eighth watch had opened: the backoff starts over
    await _watching(cluster, informer, 9)

    assert len(grown) == 7
    assert grown[0] <= 0.5  # the cut of a watch that was open: resumed within the initial backoff
    assert grown[1] < grown[2] < grown[3] < grown[4]  # doubling while none opens...
    assert 4.0 <= grown[6] <= 5.0  # ...up to 5 s, never the list backoff's 30 s
    assert clock.pauses[7] <= 0.5  # started over
    assert server.list_requests() == 1 and informer.lists == 1
    assert len(set(server.watch_versions())) == 1  # nothing happened: all resumed at one version


async def test_410_gone_relists_and_delivers_what_changed_between_the_lists(
    cluster: FakeCluster,
) -> None:
    server = server_of(cluster)
    for name in ("a", "b", "c"):
        _add(cluster, name)
    informer = await cluster.informer(CONFIGMAPS, as_dict)
    await _watching(cluster, informer, 1)
    rec = Recorder()
    informer.add_handler(on_add=rec.on_add, on_update=rec.on_update, on_delete=rec.on_delete)
    rec.seen.clear()  # the replay of a, b, c
    before = {k: informer.store.resource_version(k) for k in informer.store}
    # What the informer misses: a changed, b deleted, d created, c untouched.
    for name in ("a", "b", "c", "d"):
        server.lag(CONFIGMAPS, f"{NS}/{name}")
    rv_a = _add(cluster, "a", v="2")
    server.remove(CONFIGMAPS, "b", NS)
    rv_d = _add(cluster, "d")
    # The watch is cut, and resuming it finds the resourceVersion expired.
    server.fail("GET", CONFIGMAPS, code=410, times=1)
    server.cut_watches()
    await eventually(lambda: informer.lists == 2, what="the relist")
    await _watching(cluster, informer, 3)

    assert sorted(rec.seen) == [
        f"add {NS}/d@{rv_d}",
        f"delete {NS}/b@{before[f'{NS}/b']}",
        f"update {NS}/a@{before[f'{NS}/a']}->{rv_a}",
    ]
    assert server.list_requests() == 2
    versions = server.watch_versions()
    assert versions[2] == informer.resource_version != versions[1]  # watched on from the list


@pytest.mark.parametrize(("code", "lists"), [(403, 2), (503, 1), (429, 1)])
async def test_a_refused_watch_relists_only_when_watching_again_cannot_cure_it(
    cluster: FakeCluster, code: int, lists: int
) -> None:
    server = server_of(cluster)
    _add(cluster, "a")
    informer = await cluster.informer(CONFIGMAPS, as_dict)
    await _watching(cluster, informer, 1)
    server.fail("GET", CONFIGMAPS, code=code, times=1)
    server.cut_watches()
    await _watching(cluster, informer, 3)
    rv = _add(cluster, "b")
    await eventually(lambda: informer.store.resource_version(f"{NS}/b") == rv, what="b seen")
    assert server.list_requests() == lists and informer.lists == lists
