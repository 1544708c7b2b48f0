"""Kubernetes Events (core/v1) about the objects kqueue manages, posted in the background.

``kubectl describe workload`` and ``kubectl get events`` are where users look first, so every
state change kqueue makes (quota reserved, admitted, preempted, evicted, requeued, pending with a
reason) is also an Event. Recording never blocks or fails the caller: events go through a bounded
queue to a background task, and one that cannot be posted is logged and dropped (an Event is a
hint, the conditions on the object are the truth). Repeats of the same event for the same object
within a short window are counted on the existing Event instead of creating new ones, as
client-go's event correlator does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import Kube, KubeError
from kqueue.controller.ratelimit import background
from kqueue.controller.resources import EVENTS

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
EventType = Literal["Normal", "Warning"]

COMPONENT: Final = "kqueue-controller"
_MAX_QUEUED: Final = 4096
# How long a repeat is folded into the existing Event (client-go uses ten minutes).
_REPEAT_WINDOW_S: Final = 600.0
# At most one warning about dropped events this often: under load (thousands of admissions a
# minute) the queue overflows for a while, and a line per dropped event would flood the log.
_DROP_WARNING_EVERY_S: Final = 30.0


@dataclass(frozen=True)
class ObjectRef:
    """The object an event is about."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str = ""

    @classmethod
    def of(cls, obj: Obj) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            name=str(meta.get("name", "")),
            namespace=meta.get("namespace") or None,
            uid=str(meta.get("uid") or ""),
        )

    def manifest(self) -> Obj:
        out: Obj = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


@dataclass(frozen=True)
class _Event:
    ref: ObjectRef
    type: EventType
    reason: str
    message: str


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(self, kube: Kube, *, instance: str | None = None) -> None:
        self._kube = kube
        self._queue: asyncio.Queue[_Event] = asyncio.Queue(maxsize=_MAX_QUEUED)
        self._instance = instance or f"{socket.gethostname()}-{os.getpid()}"
        # (uid or ref, type, reason, message) -> (event name, namespace, count, first seen)
        self._recent: dict[tuple[Any, ...], tuple[str, str, int, float]] = {}
        self.posted = 0
        self.dropped = 0
        self._dropped_unreported = 0
        self._drop_warned_at = float("-inf")

    def record(self, obj: Obj | ObjectRef, type_: EventType, reason: str, message: str) -> None:
        """Queue an event about ``obj``; never blocks, never raises."""
        ref = obj if isinstance(obj, ObjectRef) else ObjectRef.of(obj)
        try:
            self._queue.put_nowait(_Event(ref, type_, reason, message[:1024]))
        except asyncio.QueueFull:
            self.dropped += 1
            self._dropped_unreported += 1
            now = time.monotonic()
            if now - self._drop_warned_at >= _DROP_WARNING_EVERY_S:
                logger.warning(
                    "event queue full (%d events); dropped %d event(s) since the last warning, "
                    "the latest %s %s on %s %s",
                    _MAX_QUEUED,
                    self._dropped_unreported,
                    type_,
                    reason,
                    ref.kind,
                    ref.name,
                )
                self._drop_warned_at = now
                self._dropped_unreported = 0

    async def run(self) -> None:
        """Post queued events until cancelled (run it under a Supervisor), in the client's
        background lane: an event never goes ahead of a decision."""
        with background():
            await self._run()

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._post(event)
            except KubeError as exc:
                # An object in a namespace being deleted: the event would go with it.
                log = logger.debug if exc.namespace_terminating else logger.info
                log("could not post event %s on %s: %s", event.reason, event.ref.name, exc)

    async def drain(self) -> None:
        """Post what is queued (at shutdown); bound it with ``asyncio.timeout``."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                while not self._queue.empty():
                    event = self._queue.get_nowait()
                    with contextlib.suppress(KubeError, OSError):
                        await self._post(event)

    async def _post(self, event: _Event) -> None:
        now = datetime.now(UTC)
        loop_now = asyncio.get_running_loop().time()
        ref = event.ref
        # Cluster-scoped objects' events go to "default", as client-go records them.
        namespace = ref.namespace or "default"
        key = (ref.uid or (ref.kind, ref.namespace, ref.name), event.type, event.reason, event.message)
        seen = self._recent.get(key)
        if seen is not None and loop_now - seen[3] < _REPEAT_WINDOW_S:
            name, ns, count, first = seen
            patch = {"count": count + 1, "lastTimestamp": _time(now)}
            try:
                await self._kube.patch(EVENTS, name, patch, namespace=ns)
                self._recent[key] = (name, ns, count + 1, first)
                self.posted += 1
                return
            except KubeError:
                self._recent.pop(key, None)  # expired or deleted: create a new one
        name = f"{ref.name}.{now.strftime('%Y%m%d%H%M%S')}{now.microsecond:06d}"
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name[:253], "namespace": namespace},
            "involvedObject": ref.manifest(),
            "type": event.type,
            "reason": event.reason,
            "message": event.message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": _time(now),
            "lastTimestamp": _time(now),
            "eventTime": None,
            "count": 1,
        }
        await self._kube.create(EVENTS, body, namespace=namespace)
        self.posted += 1
        if len(self._recent) > 10_000:
            self._recent.clear()
        self._recent[key] = (body["metadata"]["name"], namespace, 1, loop_now)


__all__ = ["EventRecorder", "EventType", "ObjectRef"]


def workload_ref(wl: Workload) -> Obj:
    """What an Event about a Workload needs of it, without serializing the whole object."""
    meta: Obj = {"name": wl.name, "namespace": wl.namespace, "uid": wl.metadata.uid}
    return {"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": "Workload", "metadata": meta}
