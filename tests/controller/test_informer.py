"""Informer against the fake API server's scripted lists and watches over real HTTP: list, watch,
bookmarks, 410 relist."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient

from kqueue.controller import collector
from kqueue.controller import informer as informer_module
from kqueue.controller.informer import Informer, as_dict
from kqueue.controller.kube import Kube
from kqueue.controller.resources import CONFIGMAPS, Resource
from tests.controller.fake_apiserver import (
    Close,
    Event,
    FakeApiServer,
    HttpStatus,
    ListResponse,
    RawLine,
    bookmark,
    eventually,
    gone_event,
    start_app,
)

Obj = dict[str, Any]


def configmap(name: str, rv: int, namespace: str = "default", **data: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv)},
        "data": dict(data),
    }


@dataclass
class Env:
    api: FakeApiServer
    client: ApiClient
    server: TestServer


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    # Lists and watches are scripted (ListResponse, watch steps): what no consistent server says.
    api = FakeApiServer()
    server, (client,) = await start_app(api.app(), ["kqueue"])
    try:
        yield Env(api, client, server)
    finally:
        await client.close()
        await api.shutdown()
        await server.close()


class Recorder:
    """Handlers that log what they saw as short strings: ``add a@5``, ``update a@5->12``."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_add(self, key: str, obj: Obj) -> None:
        self.seen.append(f"add {key}@{obj['metadata']['resourceVersion']}")

    def on_update(self, key: str, old: Obj, new: Obj) -> None:
        self.seen.append(
            f"update {key}@{old['metadata']['resourceVersion']}->{new['metadata']['resourceVersion']}"
        )

    def on_delete(self, key: str, obj: Obj) -> None:
        self.seen.append(f"delete {key}@{obj['metadata']['resourceVersion']}")


def make_informer(env: Env, **kwargs: Any) -> Informer[Obj]:
    kwargs.setdefault("namespace", "default")
    return Informer(
        Kube(env.client), CONFIGMAPS, converter=as_dict, initial_backoff=0.01, max_backoff=0.05, **kwargs
    )


@pytest.fixture
async def running() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def versions(informer: Informer[Obj]) -> dict[str, str]:
    return {
        k: v["metadata"]["resourceVersion"] for k in informer.store if (v := informer.store.get(k))
    }


async def test_list_watch_bookmark_then_gone_relists_and_converges(
    env: Env, running: list[asyncio.Task[None]]
) -> None:
    env.api.lists.extend(
        [
            ListResponse(10, [configmap("a", 5), configmap("b", 6)]),
            # After the 410: b was deleted, c changed and d was created while we were away.
            ListResponse(20, [configmap("a", 12, v="2"), configmap("c", 18), configmap("d", 19)]),
        ]
    )
    env.api.watches.extend(
        [
            [
                Event("ADDED", configmap("c", 11)),
                Event("MODIFIED", configmap("a", 12, v="2")),
                bookmark(15),
                gone_event(),
            ],
            [Event("DELETED", configmap("d", 21))],
        ]
    )
    informer = make_informer(env)
    rec = Recorder()
    informer.add_handler(on_add=rec.on_add, on_update=rec.on_update, on_delete=rec.on_delete)
    assert not informer.has_synced
    running.append(asyncio.create_task(informer.run()))
    await asyncio.wait_for(informer.wait_synced(), 5)
    await eventually(
        lambda: len(env.api.watch_requests) == 2 and "default/d" not in informer.store,
        what="the second watch to delete d",
    )

    assert versions(informer) == {"default/a": "12", "default/c": "18"}
    # Objects from a list get the apiVersion and kind that list items lack.
    assert informer.store.get("default/c") == configmap("c", 18)
    assert rec.seen == [
        "add default/a@5",
        "add default/b@6",
        "add default/c@11",
        "update default/a@5->12",
        # relist: only what changed is reported
        "delete default/b@6",
        "update default/c@11->18",
        "add default/d@19",
        # second watch
        "delete default/d@19",
    ]
    first, second = env.api.watch_requests
    assert first.path == "/api/v1/namespaces/default/configmaps"
    assert first.query["resourceVersion"] == "10"
    assert first.query["allowWatchBookmarks"] == "true"
    assert int(first.query["timeoutSeconds"]) >= 300
    assert second.query["resourceVersion"] == "20"
    assert informer.lists == 2


async def test_a_clean_close_resumes_from_the_bookmark_without_relisting(
    env: Env, running: list[asyncio.Task[None]]
) -> None:
    env.api.lists.append(ListResponse(10, [configmap("a", 5)]))
    env.api.watches.extend(
        [[bookmark(15), Close()], [Event("MODIFIED", configmap("a", 16)), Close()], []]
    )
    informer = make_informer(env)
    running.append(asyncio.create_task(informer.run()))
    await eventually(lambda: len(env.api.watch_requests) == 3, what="three watches")
    assert [r.query["resourceVersion"] for r in env.api.watch_requests] == ["10", "15", "16"]
    assert informer.lists == 1
    assert versions(informer) == {"default/a": "16"}


async def test_http_410_on_the_watch_request_relists(
    env: Env, running: list[asyncio.Task[None]]
) -> None:
    env.api.lists.extend(
        [ListResponse(10, [configmap("a", 5)]), ListResponse(30, [configmap("b", 25)])]
    )
    env.api.watches.extend([[HttpStatus(410)], []])
    informer = make_informer(env)
    running.append(asyncio.create_task(informer.run()))
    await eventually(lambda: len(env.api.watch_requests) == 2, what="a watch after the relist")
    assert informer.lists == 2
    assert versions(informer) == {"default/b": "25"}
    assert env.api.watch_requests[1].query["resourceVersion"] == "30"


async def test_list_errors_back_off_and_recover(
    env: Env, running: list[asyncio.Task[None]], caplog: pytest.LogCaptureFixture
) -> None:
    env.api.lists.extend(
        [
            ListResponse(0, [], http_error=500),
            ListResponse(0, [], http_error=503),
            ListResponse(10, [configmap("a", 5)]),
        ]
    )
    informer = make_informer(env)
    assert informer.check()[0] is False
    with caplog.at_level(logging.WARNING, logger="kqueue.controller.informer"):
        running.append(asyncio.create_task(informer.run()))
        await asyncio.wait_for(informer.wait_synced(), 5)
    assert informer.check()[0] is True
    assert versions(informer) == {"default/a": "5"}
    retries = [r.getMessage() for r in caplog.records if "listing again" in r.getMessage()]
    assert len(retries) == 2
    assert "configmaps in namespace default" in retries[0] and "500" in retries[0]
    assert "etcd is sad" in retries[0]


async def test_pagination_selectors_and_all_namespaces(
    env: Env, running: list[asyncio.Task[None]]
) -> None:
    items = [configmap(f"cm{i}", 10 + i, namespace=f"ns{i % 2}") for i in range(5)]
    env.api.lists.append(ListResponse(40, items))
    informer = Informer(
        Kube(env.client),
        CONFIGMAPS,
        converter=as_dict,
        label_selector="app=kqueue",
        field_selector="metadata.name!=skip",
        page_size=2,
    )
    running.append(asyncio.create_task(informer.run()))
    await asyncio.wait_for(informer.wait_synced(), 5)
    await eventually(lambda: len(env.api.watch_requests) == 1, what="the watch")
    assert len(informer.store) == 5
    assert [r.query.get("continue") for r in env.api.list_requests] == [None, "2", "4"]
    assert all(r.path == "/api/v1/configmaps" for r in env.api.requests)
    assert all(r.query["labelSelector"] == "app=kqueue" for r in env.api.requests)
    assert all(r.query["fieldSelector"] == "metadata.name!=skip" for r in env.api.requests)
    assert env.api.watch_requests[0].query["resourceVersion"] == "40"
    assert [o["metadata"]["name"] for o in informer.store.objects("ns1")] == ["cm1", "cm3"]


@dataclass(frozen=True)
class ConfigMapModel:
    name: str
    size: int


def to_model(obj: Obj) -> ConfigMapModel:
    return ConfigMapModel(name=obj["metadata"]["name"], size=int(obj["data"]["size"]))


async def test_converter_runs_once_and_bad_objects_are_skipped(
    env: Env, running: list[asyncio.Task[None]], caplog: pytest.LogCaptureFixture
) -> None:
    big = "x" * 200_000  # one watch line far above aiohttp's 64 KiB readline limit
    env.api.lists.append(
        ListResponse(10, [configmap("a", 5, size="1"), configmap("bad", 6, size="NaN?")])
    )
    env.api.watches.append(
        [
            RawLine(b"this is not json\n"),
            Event("ADDED", configmap("big", 11, size="3", blob=big)),
            Event("MODIFIED", configmap("a", 12, size="2")),
        ]
    )
    informer = Informer(Kube(env.client), CONFIGMAPS, converter=to_model, namespace="default")
    informer.store.add_index("size", lambda m: [str(m.size)])
    running.append(asyncio.create_task(informer.run()))
    with caplog.at_level(logging.WARNING, logger="kqueue.controller.informer"):
        await eventually(
            lambda: informer.store.get("default/a") == ConfigMapModel("a", 2), what="a@12"
        )
    assert informer.store.get("default/big") == ConfigMapModel("big", 3)
    assert "default/bad" not in informer.store
    assert any("default/bad" in r.getMessage() for r in caplog.records)
    assert any("malformed watch line" in r.getMessage() for r in caplog.records)
    assert informer.store.by_index("size", "2") == [ConfigMapModel("a", 2)]
    assert informer.store.by_index("size", "1") == []


async def test_handler_errors_are_contained_and_late_handlers_get_a_replay(
    env: Env, running: list[asyncio.Task[None]], caplog: pytest.LogCaptureFixture
) -> None:
    env.api.lists.append(ListResponse(10, [configmap("a", 5)]))
    env.api.watches.append([Event("ADDED", configmap("b", 11))])
    informer = make_informer(env)
    rec = Recorder()

    def broken(key: str, obj: Obj) -> None:
        raise RuntimeError(f"cannot handle {key}")

    informer.add_handler(on_add=broken)
    informer.add_handler(on_add=rec.on_add)
    with caplog.at_level(logging.ERROR, logger="kqueue.controller.informer"):
        running.append(asyncio.create_task(informer.run()))
        await eventually(lambda: len(rec.seen) == 2, what="both adds")
    assert len([r for r in caplog.records if "handler" in r.getMessage()]) == 2
    late = Recorder()
    informer.add_handler(on_add=late.on_add)
    assert late.seen == ["add default/a@5", "add default/b@11"]


def test_resource_paths() -> None:
    workloads = Resource("kqueue.io", "v1alpha1", "workloads")
    assert workloads.collection_path("team") == "/apis/kqueue.io/v1alpha1/namespaces/team/workloads"
    assert workloads.collection_path() == "/apis/kqueue.io/v1alpha1/workloads"
    nodes = Resource("", "v1", "nodes", namespaced=False)
    assert nodes.collection_path("ignored") == "/api/v1/nodes"
    assert str(workloads) == "workloads.kqueue.io"


async def test_a_large_relist_freezes_the_heap(
    env: Env, running: list[asyncio.Task[None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen: list[int] = []
    monkeypatch.setattr(informer_module, "FREEZE_AFTER_RELIST", 2)
    monkeypatch.setattr(informer_module, "freeze_heap", lambda: frozen.append(1))
    env.api.lists.extend([
        ListResponse(10, [configmap("a", 5), configmap("b", 6)]),
        ListResponse(30, [configmap("a", 5), configmap("c", 25)]),
        ListResponse(40, [configmap("c", 25)]),
    ])
    env.api.watches.extend([[HttpStatus(410)], [HttpStatus(410)], []])
    informer = make_informer(env)
    running.append(asyncio.create_task(informer.run()))
    await eventually(lambda: len(env.api.watch_requests) == 3, what="a watch after two relists")
    # The first list is the manager's to freeze; the relist of 2 objects freezes, that of 1 not.
    assert informer.lists == 3
    assert frozen == [1]

    # Under collector_paused (a new term rebuilding its engine) the pause's owner freezes.
    env.api.lists.clear()
    env.api.lists.append(ListResponse(50, [configmap("a", 45), configmap("c", 25)]))
    env.api.watches.append([])
    with collector.collector_paused():
        await asyncio.wait_for(informer.relist(), 5)
    assert informer.lists == 4
    assert frozen == [1]


def test_freeze_heap_moves_live_objects_out_of_the_collectors_walk() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self  # a reference cycle: only the collector frees it

    kept = [{"n": i} for i in range(1000)]
    try:
        collector.freeze_heap()
        assert gc.get_freeze_count() >= len(kept)
        dead = Node()
        collector.freeze_heap()  # the cycle is alive: frozen with the rest
        probe = weakref.ref(dead)
        del dead
        collector.freeze_heap()  # frozen earlier, dead now: collected, not kept frozen
        assert probe() is None
    finally:
        gc.unfreeze()


async def test_relist_replaces_a_lagging_store_and_watches_on_from_the_new_list(
    env: Env, running: list[asyncio.Task[None]]
) -> None:
    # The first watch stays open and silent: a change committed meanwhile (a@12, b created)
    # is not seen until a relist, the way a lagging standby's watch misses the last admissions.
    env.api.lists.extend(
        [
            ListResponse(10, [configmap("a", 5)]),
            ListResponse(20, [configmap("a", 12, v="2"), configmap("b", 18)]),
        ]
    )
    env.api.watches.extend([[], []])
    informer = make_informer(env)
    rec = Recorder()
    informer.add_handler(on_add=rec.on_add, on_update=rec.on_update, on_delete=rec.on_delete)
    running.append(asyncio.create_task(informer.run()))
    await eventually(lambda: len(env.api.watch_requests) == 1, what="the first watch")
    assert versions(informer) == {"default/a": "5"}

    await asyncio.wait_for(informer.relist(), 5)
    # When relist() returns, the store already holds what the fresh list said.
    assert versions(informer) == {"default/a": "12", "default/b": "18"}
    assert informer.lists == 2
    assert rec.seen[-2:] == ["update default/a@5->12", "add default/b@18"]
    await eventually(lambda: len(env.api.watch_requests) == 2, what="a watch after the relist")
    assert env.api.watch_requests[1].query["resourceVersion"] == "20"

    # A second relist is a second list, not the one already done.
    env.api.lists.clear()  # the scripted server repeats its last list: replace it
    env.api.lists.append(ListResponse(30, [configmap("b", 25)]))
    env.api.watches.append([])
    await asyncio.wait_for(informer.relist(), 5)
    assert informer.lists == 3
    assert versions(informer) == {"default/b": "25"}
    # The informer keeps running: relist() is not a cancellation of the informer.
    assert not running[0].done()


# -- where lists are read from; page-by-page reading --------------------------------------------


async def test_every_list_is_a_consistent_read_paged_by_continue_tokens(
    env: Env, running: list[asyncio.Task[None]]
) -> None:
    # No resourceVersion=0 on the first list (client-go's reflector asks for it): the store
    # must not lag etcd, and v1.31+ API servers serve consistent pages from their cache.
    items = [configmap(f"cm{i}", 10 + i) for i in range(3)]
    env.api.lists.extend([ListResponse(20, items), ListResponse(30, items), ListResponse(40, items)])
    env.api.watches.extend([[HttpStatus(410)], [], []])
    informer = make_informer(env, page_size=2)
    running.append(asyncio.create_task(informer.run()))
    await eventually(lambda: len(env.api.watch_requests) == 2, what="a watch after the 410 relist")
    await asyncio.wait_for(informer.relist(), 5)
    rvs = [(r.query.get("resourceVersion"), r.query.get("continue")) for r in env.api.list_requests]
    assert rvs == [(None, None), (None, "2")] * 3  # first list, after 410 Gone, relist()


def _page(items: list[Obj]) -> Obj:
    return {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": items}


@settings(max_examples=200, deadline=None)
@given(
    before=st.dictionaries(st.sampled_from("abcdefgh"), st.integers(1, 3)),
    after=st.dictionaries(st.sampled_from("abcdefgh"), st.integers(1, 3)),
    page_size=st.integers(1, 4),
    unreadable=st.sets(st.sampled_from("abcdefgh")),
)
def test_a_list_read_page_by_page_gives_the_store_and_events_of_a_whole_list(
    before: dict[str, int], after: dict[str, int], page_size: int, unreadable: set[str]
) -> None:
    """Whatever the pages: the store equals the list (an unreadable object keeps its old
    version), deletes come first, then adds and updates in key order, and only objects whose
    version changed are converted."""
    converted: list[str] = []

    def convert(obj: Obj) -> Obj:
        name = obj["metadata"]["name"]
        converted.append(name)
        if name in unreadable and obj["metadata"]["resourceVersion"] != "1":
            raise ValueError("unreadable")
        return obj

    informer: Informer[Obj] = Informer(Kube(None), CONFIGMAPS, converter=convert)  # type: ignore[arg-type]
    informer._replace(set(), {
        f"default/{n}": (configmap(n, rv, namespace="default"), str(rv))
        for n, rv in before.items()
    })
    rec = Recorder()
    informer.add_handler(on_add=rec.on_add, on_update=rec.on_update, on_delete=rec.on_delete)
    rec.seen.clear()  # the replay of the store

    # As a list returns them: without apiVersion and kind.
    items = [
        {k: v for k, v in configmap(n, rv).items() if k not in ("apiVersion", "kind")}
        for n, rv in sorted(after.items())
    ]
    listed: set[str] = set()
    fresh: dict[str, tuple[Obj, str]] = {}
    for first in range(0, len(items), page_size):
        informer._read_page(_page(items[first:first + page_size]), listed, fresh)
    informer._replace(listed, fresh)

    changed = {n for n, rv in after.items() if before.get(n) != rv}
    kept = {n for n in changed if n in unreadable and after[n] != 1}
    assert sorted(converted) == sorted(changed)
    expected_store = {
        n: str(before[n] if n in kept else rv)
        for n, rv in after.items()
        if n not in kept or n in before
    }
    assert versions(informer) == {f"default/{n}": v for n, v in expected_store.items()}
    expected = [f"delete default/{n}@{before[n]}" for n in sorted(set(before) - set(after))]
    for n in sorted(changed - kept):
        if n in before:
            expected.append(f"update default/{n}@{before[n]}->{after[n]}")
        else:
            expected.append(f"add default/{n}@{after[n]}")
    assert rec.seen == expected
    # Every object read from the API carries the list's apiVersion and kind.
    assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in informer.store.objects())


def test_the_collector_is_paused_and_restored_as_it_was() -> None:
    assert gc.isenabled()
    with collector.collector_paused():
        assert not gc.isenabled()
        with collector.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # an inner pause does not end the outer one
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.collector_paused():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
