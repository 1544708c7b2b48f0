"""Informers: a local, event-driven cache of one kind of Kubernetes object.

An :class:`Informer` lists the objects once, then watches from the list's resourceVersion
(with bookmarks, so an idle watch still advances its resourceVersion), keeps a :class:`Store`
keyed by ``namespace/name``, and calls handlers for every add, update and delete. When the
server answers 410 Gone (the resourceVersion is too old, after a long disconnection or an
etcd compaction) it lists again and reconciles the store with the list, emitting the adds,
updates and deletes it missed. Other errors are retried with exponential backoff.

kubernetes-asyncio has watch streams but no informer or cache; this module owns that layer,
for any resource (core, batch, coordination, CRDs) through the same REST paths, and turns dicts
into typed objects once, here at the I/O boundary, with the ``converter`` callback.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_never
from tenacity.wait import wait_exponential_jitter

from kqueue.controller.clock import Clock, LoopClock
from kqueue.controller.collector import freeze_heap
from kqueue.controller.kube import Gone, Kube, KubeError, loads
from kqueue.controller.resources import Resource, object_key

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


# A relist of at least this many objects freezes the heap again (see :func:`freeze_heap`).
FREEZE_AFTER_RELIST = 10_000
# The longest pause before resuming a cut watch (client-go's reflector backs off further, up
# to 30 s, but resets only after 2 minutes of calm; kqueue resets as soon as a watch opens).
_MAX_WATCH_BACKOFF = 5.0


def as_dict(obj: Obj) -> Obj:
    """The identity converter: keep objects as the API returned them."""
    return obj


# -- handlers ---------------------------------------------------------------------------------


class OnAdd(Protocol[T_contra]):
    def __call__(self, key: str, obj: T_contra, /) -> None: ...


class OnUpdate(Protocol[T_contra]):
    def __call__(self, key: str, old: T_contra, new: T_contra, /) -> None: ...


class OnDelete(Protocol[T_contra]):
    def __call__(self, key: str, obj: T_contra, /) -> None: ...


@dataclass(frozen=True)
class _Handlers(Generic[T]):
    on_add: OnAdd[T] | None
    on_update: OnUpdate[T] | None
    on_delete: OnDelete[T] | None


# -- store -------------------------------------------------------------------------------------


class Store(Generic[T]):
    """The informer's cache: objects by key, with optional secondary indexes.

    Read-only for everyone but the informer. Objects must not be mutated by readers: they are
    shared with every handler and reconciler.
    """

    def __init__(self) -> None:
        self._items: dict[str, T] = {}
        self._versions: dict[str, str] = {}
        self._index_funcs: dict[str, Callable[[T], Iterable[str]]] = {}
        self._indexes: dict[str, dict[str, set[str]]] = {}

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def get_by_name(self, name: str, namespace: str | None = None) -> T | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[str]:
        """Keys, in order."""
        return iter(sorted(self._items))

    def items(self) -> list[tuple[str, T]]:
        """All (key, object) pairs, in key order."""
        return [(k, self._items[k]) for k in sorted(self._items)]

    def objects(self, namespace: str | None = None) -> list[T]:
        """All objects (of one namespace), in key order."""
        if namespace is None:
            return [self._items[k] for k in sorted(self._items)]
        prefix = f"{namespace}/"
        return [self._items[k] for k in sorted(self._items) if k.startswith(prefix)]

    def resource_version(self, key: str) -> str | None:
        return self._versions.get(key)

    def add_index(self, name: str, func: Callable[[T], Iterable[str]]) -> None:
        """Index objects by the values ``func`` returns (e.g. workloads by queue name)."""
        self._index_funcs[name] = func
        index: dict[str, set[str]] = {}
        for key, obj in self._items.items():
            for value in func(obj):
                index.setdefault(value, set()).add(key)
        self._indexes[name] = index

    def by_index(self, name: str, value: str) -> list[T]:
        keys = self._indexes[name].get(value, set())
        return [self._items[k] for k in sorted(keys)]

    def keys_by_index(self, name: str, values: Iterable[str]) -> list[str]:
        """Keys of the objects indexed under any of ``values``, in order."""
        index = self._indexes[name]
        keys: set[str] = set()
        for value in values:
            keys.update(index.get(value, ()))
        return sorted(keys)

    def _put(self, key: str, obj: T, version: str) -> T | None:
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        self._versions[key] = version
        for name, func in self._index_funcs.items():
            for value in func(obj):
                self._indexes[name].setdefault(value, set()).add(key)
        return old

    def _delete(self, key: str) -> T | None:
        old = self._items.pop(key, None)
        self._versions.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _unindex(self, key: str, obj: T) -> None:
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


# -- informer ----------------------------------------------------------------------------------


class Informer(Generic[T]):
    """List-then-watch cache of one resource, with handlers; run it under a Supervisor.

    ``converter`` turns each API dict into ``T`` once (use :func:`as_dict` to keep dicts). A
    dict it rejects is logged and left out, never allowed to stop the informer.
    """

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        *,
        converter: Callable[[Obj], T],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        initial_backoff: float = 0.5,
        max_backoff: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        self._kube = kube
        self.resource = resource
        self._converter = converter
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._clock = clock if clock is not None else LoopClock()
        self.store: Store[T] = Store()
        self._handlers: list[_Handlers[T]] = []
        self._synced = asyncio.Event()
        self.resource_version: str | None = None
        self.lists = 0
        # relist(): list attempts started / the attempt whose list last completed, and the watch
        # request in flight (cancelled so the relist starts at once).
        self._list_attempts = 0
        self._listed_attempt = 0
        self._listed = asyncio.Condition()
        self._relist_requested = False
        self._watching: asyncio.Task[None] | None = None
        self.watches = 0
        # Watches cut (resumed from the last resourceVersion), and whether the current watch
        # request was answered (its stream opened): the resume backoff starts over then.
        self.cuts = 0
        self._opened = False
        # Why the informer cannot list or watch just now (None while it can): a list that
        # failed, or a cut watch that could not be opened again. Read by whoever must say so
        # (a MultiKueue worker's Active condition); cleared once a list or watch succeeds.
        self.failure: Exception | None = None
        self._where = str(resource) + (f" in namespace {namespace}" if namespace else "")

    # -- public API --------------------------------------------------------------------------

    def add_handler(
        self,
        *,
        on_add: OnAdd[T] | None = None,
        on_update: OnUpdate[T] | None = None,
        on_delete: OnDelete[T] | None = None,
    ) -> None:
        """Register callbacks; objects already in the store are replayed to ``on_add``.

        Callbacks run on the event loop and must be quick and not block: the usual one adds the
        key to a work queue. An exception in a callback is logged and does not affect others.
        """
        handlers = _Handlers(on_add, on_update, on_delete)
        self._handlers.append(handlers)
        if on_add is not None:
            for key in self.store:
                obj = self.store.get(key)
                if obj is not None:
                    self._call(on_add, key, obj)

    @property
    def has_synced(self) -> bool:
        """Whether the first list has been loaded into the store and handed to handlers."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def relist(self) -> None:
        """Replace the store with a list started after this call, then watch on from it.

        A list without a resourceVersion is a consistent read (from etcd, not a cache), so once
        this returns the store holds every change committed before the call, however far the
        watch lagged. A new leader does this before it rebuilds its engine from the store.
        """
        wanted = self._list_attempts + 1
        self._relist_requested = True
        if self._watching is not None and not self._watching.done():
            self._watching.cancel()
        async with self._listed:
            await self._listed.wait_for(lambda: self._listed_attempt >= wanted)

    def check(self) -> tuple[bool, str]:
        """Readiness: synced or not."""
        if self.has_synced:
            return True, f"{self._where} synced at resourceVersion {self.resource_version}"
        return False, f"{self._where} not synced yet"

    async def run(self) -> None:
        """List and watch until cancelled."""
        while True:
            # A fresh retry state per round: the backoff starts over once a watch made progress.
            retrying = AsyncRetrying(
                stop=stop_never,
                wait=wait_exponential_jitter(
                    multiplier=self._initial_backoff,
                    max=self._max_backoff,
                    jitter=self._initial_backoff,
                ),
                # Only Exception: cancellation (a BaseException) must end the informer.
                retry=retry_if_exception(lambda e: isinstance(e, Exception)),
                before_sleep=self._log_retry,
                sleep=self._clock.sleep,
                reraise=True,
            )
            async for attempt in retrying:
                with attempt:
                    await self._list_and_watch()

    # -- list and watch ------------------------------------------------------------------------

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, Exception):
            self.failure = exc
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        logger.warning(
            "informer %s: %s; listing again in %.2fs (attempt %d)",
            self._where,
            exc,
            delay,
            state.attempt_number,
        )

    async def _list_and_watch(self) -> None:
        """List, then watch until the watch needs a relist. Returns to reset the backoff.

        As client-go's reflector: a watch that is cut (a dropped connection, a refused or timed
        out request) is resumed from the last resourceVersion seen, after a brief backoff that
        starts over once a watch is open again; bookmarks keep that resourceVersion fresh. Only
        410 Gone (the resourceVersion is too old) or a request to relist lists again. A watch
        cut before its first event is no reason to list: nothing was missed.
        """
        await self._list()
        cuts = 0
        while True:
            if self._relist_requested:
                return
            self._opened = False
            delay = self._watch_backoff(cuts)
            self._watching = asyncio.ensure_future(self._watch_after(delay))
            try:
                await self._watching
            except asyncio.CancelledError:
                # Our own cancellation (relist) ends this round; the caller's is passed on.
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                if not self._relist_requested:
                    raise
                logger.info("informer %s: relisting on request", self._where)
                return
            except Gone:
                logger.info(
                    "informer %s: resourceVersion expired (410 Gone); relisting", self._where
                )
                return
            except KubeError as exc:
                if not _resumable(exc):
                    raise  # e.g. 403 or 404: listing again (with backoff) says what is wrong
                cuts = 1 if self._opened else cuts + 1
                self.cuts += 1
                if cuts > 1:
                    self.failure = exc  # the watch was not open again since it was cut
                logger.info(
                    "informer %s: watch cut (%s); resuming the watch at resourceVersion %s",
                    self._where,
                    exc,
                    self.resource_version,
                )
                continue
            cuts = 0  # the server ended the watch (timeoutSeconds): go on at once

    def _watch_backoff(self, cuts: int) -> float:
        """No wait after a clean end; 0.1 to 0.5 s after the cut of a watch that was open; then,
        while the watch cannot open, 0.5 s doubling up to 5 s. Jittered, so that informers cut
        together do not all reconnect at once."""
        if cuts <= 1:
            return 0.0 if cuts == 0 else self._initial_backoff * random.uniform(0.2, 1.0)
        delay = min(self._initial_backoff * 2 ** (cuts - 2), _MAX_WATCH_BACKOFF)
        return float(delay * random.uniform(0.8, 1.0))

    async def _watch_after(self, delay: float) -> None:
        if delay > 0:
            await self._clock.sleep(delay)
        await self._watch()

    def _selector_params(self) -> list[tuple[str, str]]:
        params: list[tuple[str, str]] = []
        if self._label_selector:
            params.append(("labelSelector", self._label_selector))
        if self._field_selector:
            params.append(("fieldSelector", self._field_selector))
        return params

    async def _list(self) -> None:
        self._list_attempts += 1
        attempt = self._list_attempts
        self._relist_requested = False
        # Every list is a consistent read (no resourceVersion), served page by page. Unlike
        # client-go's reflector the first list does not ask for resourceVersion=0: an API
        # server with consistent reads from its cache (v1.31+) serves these pages from the
        # cache too, and 0 there means one unpaged response of the whole collection, slower
        # to serve and read (docs/benchmarks.md, section 5), and a store that may lag etcd.
        params = [*self._selector_params(), ("limit", str(self._page_size))]
        # Each page is read into models as it comes, so that only one page of raw dicts is held
        # at a time; objects whose resourceVersion the store already has are not read again.
        # Handlers see the outcome once the list is complete, as before (see _replace).
        listed: set[str] = set()
        fresh: dict[str, tuple[T, str]] = {}
        token: str | None = None
        list_rv = ""
        while True:
            page_params = params + ([("continue", token)] if token else [])
            body = await self._kube.list_page(
                self.resource, namespace=self._namespace, query=page_params, time_limit=60
            )
            metadata = body.get("metadata") or {}
            self._read_page(body, listed, fresh)
            del body  # this page's dicts go before the next page arrives
            token = metadata.get("continue") or None
            if token is None:
                list_rv = str(metadata.get("resourceVersion", ""))
                break
        self.lists += 1
        self.failure = None
        self._replace(listed, fresh)
        self.resource_version = list_rv
        async with self._listed:
            self._listed_attempt = attempt
            self._listed.notify_all()
        if not self._synced.is_set():
            self._synced.set()
            logger.info("informer %s: synced %d objects", self._where, len(self.store))
        elif len(self.store) >= FREEZE_AFTER_RELIST and gc.isenabled():
            # A relist rebuilt a large store: its new objects join the frozen ones (the first
            # list is frozen by the manager once every informer has synced, and a relist under
            # collector_paused by whoever paused it, e.g. a new term after its engine rebuild).
            freeze_heap()

    def _read_page(self, body: Obj, listed: set[str], fresh: dict[str, tuple[T, str]]) -> None:
        """Note every key of one list page; convert the objects the store lacks or has at
        another resourceVersion."""
        list_kind = str(body.get("kind", ""))
        api_version = body.get("apiVersion", self.resource.api_version)
        kind = list_kind[: -len("List")] if list_kind.endswith("List") else None
        for item in body.get("items") or []:
            # List items carry no apiVersion/kind; models built from them usually need both.
            item.setdefault("apiVersion", api_version)
            if kind is not None:
                item.setdefault("kind", kind)
            key = object_key(item)
            version = _rv(item)
            listed.add(key)
            if self.store.resource_version(key) == version:
                fresh.pop(key, None)
                continue
            obj = self._convert(item)
            if obj is None:
                # Unreadable: the store keeps what it had (as for a watch event).
                fresh.pop(key, None)
                continue
            fresh[key] = (obj, version)

    async def _watch(self) -> None:
        """One watch request, until the server ends it. Raises Gone on 410."""
        assert self.resource_version is not None
        # Jittered like client-go's reflector, so many informers do not all reconnect at once.
        server_timeout = int(self._watch_timeout * (1 + random.random()))
        params = [
            *self._selector_params(),
            ("watch", "true"),
            ("resourceVersion", self.resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(server_timeout)),
        ]
        self.watches += 1
        # The client-side read timeout only catches a dead connection: the server ends the
        # stream itself after timeoutSeconds, and bookmarks keep an idle stream alive meanwhile.
        async with self._kube.stream(
            self.resource,
            namespace=self._namespace,
            query=params,
            read_timeout=server_timeout + 30,
        ) as content:
            self._opened = True
            self.failure = None
            async for line in _json_lines(content):
                try:
                    event = loads(line)
                    kind = event["type"]
                    obj = event["object"]
                except (ValueError, KeyError, TypeError):
                    logger.warning(
                        "informer %s: skipping malformed watch line %r", self._where, line[:200]
                    )
                    continue
                if kind == "ERROR":
                    status = obj if isinstance(obj, dict) else {}
                    raise KubeError.from_status(status, what=f"watch {self._where}")
                self.resource_version = _rv(obj) or self.resource_version
                if kind == "BOOKMARK":
                    continue
                self._apply(kind, obj)
        # The server closed the stream cleanly (timeoutSeconds): resume from where we are.

    # -- store updates -------------------------------------------------------------------------

    def _convert(self, obj: Obj) -> T | None:
        try:
            return self._converter(obj)
        except Exception:
            logger.exception(
                "informer %s: cannot read %s (resourceVersion %s); ignoring this version",
                self._where,
                object_key(obj),
                _rv(obj),
            )
            return None

    def _apply(self, kind: str, raw: Obj) -> None:
        key = object_key(raw)
        if kind == "DELETED":
            old = self.store._delete(key)
            gone = self._convert(raw) if old is None else old
            if gone is not None:
                self._emit_delete(key, gone)
            return
        if kind not in ("ADDED", "MODIFIED"):
            logger.warning(
                "informer %s: unknown watch event type %r for %s", self._where, kind, key
            )
            return
        obj = self._convert(raw)
        if obj is None:
            return
        old = self.store._put(key, obj, _rv(raw))
        if old is None:
            self._emit_add(key, obj)
        else:
            self._emit_update(key, old, obj)

    def _replace(self, listed: set[str], fresh: dict[str, tuple[T, str]]) -> None:
        """Make the store equal to a fresh list, emitting what changed since the last one.

        ``listed``: every key the list returned; ``fresh``: the converted objects among them
        that the store lacks or has at another resourceVersion. Deletes first, then adds and
        updates in key order.
        """
        for key in [k for k in self.store if k not in listed]:
            old = self.store._delete(key)
            if old is not None:
                self._emit_delete(key, old)
        for key in sorted(fresh):
            obj, version = fresh[key]
            old = self.store._put(key, obj, version)
            if old is None:
                self._emit_add(key, obj)
            else:
                self._emit_update(key, old, obj)

    def _emit_add(self, key: str, obj: T) -> None:
        for h in self._handlers:
            if h.on_add is not None:
                self._call(h.on_add, key, obj)

    def _emit_update(self, key: str, old: T, new: T) -> None:
        for h in self._handlers:
            if h.on_update is not None:
                self._call(h.on_update, key, old, new)

    def _emit_delete(self, key: str, obj: T) -> None:
        for h in self._handlers:
            if h.on_delete is not None:
                self._call(h.on_delete, key, obj)

    def _call(self, handler: Callable[..., None], *args: Any) -> None:
        try:
            handler(*args)
        except Exception:
            logger.exception("informer %s: handler %r failed for %s", self._where, handler, args[0])


def _resumable(exc: KubeError) -> bool:
    """Whether a watch that failed with ``exc`` may be resumed at its resourceVersion: no
    answer (a cut connection, a timeout) or a passing refusal (429, 5xx). Other refusals
    (403, 404: RBAC or a CRD changed) are not cured by watching again."""
    return exc.transient


def _rv(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("resourceVersion", ""))


async def _json_lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Split a watch stream into lines without aiohttp's per-line size limit.

    ``StreamReader.readline`` refuses lines above its buffer limit (64 KiB by default), and a
    single large object (a Workload with many pod sets) easily exceeds that.
    """
    buffer = bytearray()
    async for chunk in stream.iter_any():
        start = len(buffer)
        buffer += chunk
        newline = buffer.find(b"\n", start)
        while newline >= 0:
            line = bytes(buffer[:newline])
            del buffer[: newline + 1]
            if line.strip():
                yield line
            newline = buffer.find(b"\n")
    if buffer.strip():
        yield bytes(buffer)
