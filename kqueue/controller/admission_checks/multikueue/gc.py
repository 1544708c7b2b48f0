"""MultiKueue's garbage collector (Kueue's ``runGC``): every ``multiKueue.gcInterval``, on each
reachable worker, the Workloads and jobs this manager made there (label
``kqueue.io/multikueue-origin`` = ``multiKueue.origin``) whose Workload on the manager is gone,
is another incarnation (another UID), finished, or now runs on another worker are deleted. So a
worker that was lost and comes back runs nothing twice.

It reads what the manager's watches of the worker hold (clusters.py: the Workloads from the
connection on, a job kind from when the manager placed one there) and asks the worker only for
what they do not: the Workloads until their watch has listed, and a job kind not watched until
a list of it found none of this manager's there (or the worker does not serve it), once per
connection: a job of that kind placed later is watched (the controller starts the watch before
it creates the job). So on a quiet worker a pass sends no request at all."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import ORIGIN_LABEL, ORIGIN_UID_ANNOTATION
from kqueue.controller.admission_checks.multikueue import adapters
from kqueue.controller.admission_checks.multikueue.clusters import RemoteClusters
from kqueue.controller.informer import Store
from kqueue.controller.kube import Kube, KubeError, NotFound
from kqueue.controller.resources import WORKLOADS, Resource

Obj = dict[str, Any]

logger = logging.getLogger(__name__)


def is_orphan(local: Workload | None, uid: str | None, cluster: str) -> bool:
    """Whether a worker's copy (of manager UID ``uid``, on ``cluster``) is no longer wanted."""
    if local is None or local.is_finished:
        return True
    if uid is not None and local.metadata.uid and uid != local.metadata.uid:
        return True
    return local.status.cluster_name is not None and local.status.cluster_name != cluster


class GarbageCollector:
    def __init__(
        self, *, remotes: RemoteClusters, workloads: Store[Workload], origin: str, interval: float
    ) -> None:
        self._remotes = remotes
        self._workloads = workloads
        self._origin = origin
        self._interval = interval
        # Per worker: the client the kinds below were listed on (a new connection lists them
        # again: the worker may have come back with orphans), and the job kinds a list found
        # none of this manager's of (or not served).
        self._clean: dict[str, tuple[Kube, set[Resource]]] = {}

    async def run(self) -> None:
        if self._interval <= 0:
            return  # gcInterval 0s: switched off
        while True:
            await asyncio.sleep(self._interval)
            for cluster in self._remotes.reachable():
                kube = self._remotes.client(cluster)
                if kube is None:
                    continue
                try:
                    await self.collect(cluster, kube)
                except KubeError as exc:
                    logger.info("MultiKueue GC on %s: %s", cluster, exc)

    async def collect(self, cluster: str, kube: Kube) -> int:
        """Delete this manager's orphans on one worker; how many Workloads went."""
        deleted = 0
        wanted: set[tuple[str, str]] = set()
        for obj in await self._objects(cluster, kube, WORKLOADS):
            meta = obj.get("metadata") or {}
            ns, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
            uid = (meta.get("annotations") or {}).get(ORIGIN_UID_ANNOTATION)
            if is_orphan(self._workloads.get(f"{ns}/{name}"), uid, cluster):
                logger.info("MultiKueue GC: deleting Workload %s/%s on %s", ns, name, cluster)
                await kube.delete(WORKLOADS, name, namespace=ns)
                deleted += 1
            else:
                wanted.add((ns, name))
        for adapter in adapters.ADAPTERS.values():
            try:
                jobs = await self._objects(cluster, kube, adapter.resource)
            except NotFound:
                self._clean_kinds(cluster, kube).add(adapter.resource)
                continue  # the kind is not served on this worker
            except KubeError as exc:
                # One kind the worker will not list (not granted) keeps the others collected.
                logger.info("MultiKueue GC on %s: %s not listed: %s", cluster, adapter.kind, exc)
                continue
            for obj in jobs:
                meta = obj.get("metadata") or {}
                ns = str(meta.get("namespace") or "default")
                workload = (meta.get("labels") or {}).get(c.PREBUILT_WORKLOAD_LABEL)
                if (ns, workload) not in wanted:
                    logger.info(
                        "MultiKueue GC: deleting %s %s/%s on %s",
                        adapter.kind, ns, meta.get("name"), cluster,
                    )
                    await kube.delete(adapter.resource, str(meta.get("name")), namespace=ns)
        return deleted

    def _clean_kinds(self, cluster: str, kube: Kube) -> set[Resource]:
        known = self._clean.get(cluster)
        if known is None or known[0] is not kube:
            known = self._clean[cluster] = (kube, set())
        return known[1]

    async def _objects(self, cluster: str, kube: Kube, resource: Resource) -> list[Obj]:
        """This manager's ``resource`` objects on worker ``cluster``: from its watch once that
        has listed, else (see the module) from the worker."""
        store = self._remotes.watched(cluster, resource)
        if store is not None:
            return store.objects()
        clean = self._clean_kinds(cluster, kube)
        if resource in clean:
            return []
        found = await kube.list(resource, label_selector=f"{ORIGIN_LABEL}={self._origin}")
        if not found and resource != WORKLOADS:
            clean.add(resource)
        return found
