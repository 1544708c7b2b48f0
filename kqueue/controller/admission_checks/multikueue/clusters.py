"""The manager's connections to its worker clusters, one per MultiKueueCluster (Kueue's
``multikueuecluster.go`` and ``remote_client.go``), on kqueue's one client (kube.py).

Each cluster's kubeconfig comes from a Secret in the controller's namespace (key
``kubeconfig``) or from a path on the controller's disk. Every ``PROBE_SECONDS`` the kubeconfig
is read again (a changed Secret reconnects) and the worker is asked for its version: the
cluster's ``Active`` condition says whether that worked, and if not why, naming the problem
(``BadKubeConfig``: Secret or key missing, not a kubeconfig, no server; ``ClientConnectionFailed``:
the API server does not answer). A worker that stops answering is *lost* from then on; how long
is what the worker-lost timeout is measured against.

While connected, the manager watches each worker (Kueue's ``establishWatcher``): one
:class:`~kqueue.controller.informer.Informer` on the Workloads labelled with this manager's
origin, started with the connection, and one per job kind once a job of that kind was placed
there (:meth:`RemoteClusters.watch`). Their events call ``on_copy`` with the key of the
manager's Workload the object belongs to; their stores are what the controller reads the copies
from. A watch that cannot list or open again makes the worker unusable (``Active=False``,
``ClientConnectionFailed``, naming the watch) until it can, as a failed probe does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client import Configuration as ClientConfiguration
from kubernetes_asyncio.config import kube_config

from kqueue.api.v1alpha1 import ConditionStatus, MultiKueueCluster, set_condition
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import ACTIVE, ORIGIN_LABEL, SECRET_KEY
from kqueue.controller.clock import Now
from kqueue.controller.informer import Informer, Store, as_dict
from kqueue.controller.kube import (
    Kube,
    KubeError,
    NotFound,
    skip_environment_lookups,
)
from kqueue.controller.resources import (
    MULTIKUEUE_CLUSTERS,
    SECRETS,
    WORKLOADS,
    Resource,
    object_key,
)

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

PROBE_SECONDS: Final = 2.0
# A worker's requests give up quickly: a lost worker must not stall the manager's workers.
REMOTE_TIMEOUT_SECONDS: Final = 5.0

BAD_KUBECONFIG: Final = "BadKubeConfig"
CONNECTION_FAILED: Final = "ClientConnectionFailed"
NOT_SUPPORTED: Final = "ClusterProfileNotSupported"


class ConfigProblem(Exception):
    """Why a cluster's kubeconfig cannot be used; the message names the object and key."""


@dataclass
class Connection:
    """One worker: its client while connected, and since when it does not answer."""

    digest: str = ""
    kube: Kube | None = None
    api: ApiClient | None = None
    reachable: bool = False
    lost_at: float | None = None
    """Monotonic time the worker was first seen not answering (None: it answers)."""
    problem: tuple[str, str] | None = None
    watches: dict[Resource, Watch] = field(default_factory=dict)
    """The worker's watches (by resource) on the current client."""


@dataclass
class Watch:
    """One watch of a worker's objects from this manager, and the task running it."""

    informer: Informer[Obj]
    task: asyncio.Task[None]


@dataclass
class RemoteClusters:
    """The connections, kept in step with the MultiKueueClusters by :meth:`run`."""

    clusters: Store[MultiKueueCluster]
    kube: Kube
    namespace: str
    now: Now
    on_change: Callable[[str], None] = lambda _name: None
    """Called with a cluster's name when it connects, disconnects or its problem changes."""
    origin: str = ""
    """The origin label's value this manager puts on what it makes on the workers."""
    on_copy: Callable[[str], None] = lambda _key: None
    """Called with a manager Workload's key when a watch sees its copy (or job) change."""
    connections: dict[str, Connection] = field(default_factory=dict)

    def client(self, name: str) -> Kube | None:
        """The client of a reachable worker; None otherwise."""
        conn = self.connections.get(name)
        return conn.kube if conn is not None and conn.reachable else None

    def lost_for(self, name: str) -> float | None:
        """Seconds since the worker was first seen not answering; None while it answers."""
        conn = self.connections.get(name)
        if conn is None or conn.lost_at is None:
            return None
        return time.monotonic() - conn.lost_at

    def reachable(self) -> list[str]:
        return [name for name, conn in self.connections.items() if conn.reachable]

    def watched(self, name: str, resource: Resource) -> Store[Obj] | None:
        """What the watch of ``resource`` on reachable worker ``name`` holds (this manager's
        objects there), once it has listed them; None otherwise (read from the worker)."""
        conn = self.connections.get(name)
        if conn is None or not conn.reachable:
            return None
        watch = conn.watches.get(resource)
        return watch.informer.store if watch is not None and watch.informer.has_synced else None

    def watch(self, name: str, resource: Resource) -> None:
        """Watch this manager's ``resource`` objects on worker ``name`` from now on (a job
        kind: once one was placed there; a kind a worker does not serve is never watched)."""
        conn = self.connections.get(name)
        if conn is not None and conn.kube is not None and resource not in conn.watches:
            conn.watches[resource] = self._start_watch(conn.kube, name, resource)

    def _start_watch(self, kube: Kube, name: str, resource: Resource) -> Watch:
        informer: Informer[Obj] = Informer(
            kube, resource, converter=as_dict, label_selector=f"{ORIGIN_LABEL}={self.origin}"
        )
        key_of = object_key if resource == WORKLOADS else _job_workload_key

        def event(_key: str, obj: Obj, *rest: Obj) -> None:
            key = key_of(rest[-1] if rest else obj)
            if key is not None:
                self.on_copy(key)

        informer.add_handler(on_add=event, on_update=event, on_delete=event)
        task = asyncio.create_task(informer.run(), name=f"multikueue watch {resource} on {name}")
        return Watch(informer, task)

    def _watch_problem(self, conn: Connection, name: str) -> tuple[str, str] | None:
        for resource, watch in sorted(conn.watches.items(), key=lambda kv: str(kv[0])):
            if watch.informer.failure is not None:
                return CONNECTION_FAILED, (
                    f"worker cluster {name}: watch of {resource}: {watch.informer.failure}"
                )
        return None

    async def run(self) -> None:
        try:
            while True:
                await self.probe_all()
                await asyncio.sleep(PROBE_SECONDS)
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop every watch and close every client. The clients close with the term; the
        connections go with them, so the next term connects afresh (a closed client kept here
        failed every probe with "Session is closed", which ended each later term at once)."""
        connections, self.connections = self.connections, {}
        for conn in connections.values():
            with contextlib.suppress(Exception):
                await _disconnect(conn)

    async def probe_all(self) -> None:
        names = {mkc.name for mkc in self.clusters.objects()}
        for gone in set(self.connections) - names:
            await _disconnect(self.connections.pop(gone))
            self.on_change(gone)
        await asyncio.gather(*(self.probe(name) for name in sorted(names)))

    async def probe(self, name: str) -> None:
        mkc = self.clusters.get(name)
        if mkc is None:
            return
        conn = self.connections.setdefault(name, Connection())
        was = (conn.reachable, conn.problem)
        try:
            text = await self._kubeconfig(mkc)
            digest = hashlib.sha256(text.encode()).hexdigest()
            if digest != conn.digest or conn.kube is None:
                await self._connect(conn, name, text, digest)
            assert conn.kube is not None
            await _probe(conn.kube, name)
            watch_problem = self._watch_problem(conn, name)
            if watch_problem is not None:
                raise _WatchFailing(watch_problem)
        except ConfigProblem as exc:
            self._down(conn, (BAD_KUBECONFIG, str(exc)))
        except KubeError as exc:
            self._down(conn, (CONNECTION_FAILED, f"worker cluster {name}: {exc}"))
        except NotImplementedError as exc:
            self._down(conn, (NOT_SUPPORTED, str(exc)))
        except _WatchFailing as exc:
            self._down(conn, exc.problem)
        else:
            conn.reachable, conn.problem, conn.lost_at = True, None, None
        if (conn.reachable, conn.problem) != was:
            logger.info(
                "MultiKueueCluster %s: %s", name,
                "connected" if conn.reachable else f"not usable: {conn.problem}",
            )
            self.on_change(name)
        await self._write_active(mkc, conn)

    def _down(self, conn: Connection, problem: tuple[str, str]) -> None:
        # From the first failure seen, also when this manager never reached the worker (it
        # started while the worker was down): the worker-lost timeout counts from then.
        if conn.lost_at is None:
            conn.lost_at = time.monotonic()
        conn.reachable, conn.problem = False, problem

    async def _kubeconfig(self, mkc: MultiKueueCluster) -> str:
        source = mkc.spec.cluster_source
        kc = source.kube_config
        if kc is None:
            raise NotImplementedError(
                f"MultiKueueCluster {mkc.name}: spec.clusterSource.clusterProfileRef is not "
                "supported by kqueue; use spec.clusterSource.kubeConfig"
            )
        if kc.location_type == "Path":
            try:
                return await asyncio.to_thread(Path(kc.location).read_text)
            except OSError as exc:
                raise ConfigProblem(
                    f"spec.clusterSource.kubeConfig.location: cannot read {kc.location}: "
                    f"{exc.strerror}"
                ) from None
        try:
            secret = await self.kube.get(SECRETS, kc.location, self.namespace)
        except NotFound:
            raise ConfigProblem(
                f"Secret {self.namespace}/{kc.location} (spec.clusterSource.kubeConfig.location) "
                "not found"
            ) from None
        data = secret.get("data") or {}
        if SECRET_KEY not in data:
            raise ConfigProblem(
                f"Secret {self.namespace}/{kc.location} has no key {SECRET_KEY!r} (it has: "
                f"{', '.join(sorted(data)) or 'none'})"
            )
        try:
            return base64.b64decode(data[SECRET_KEY]).decode()
        except (ValueError, UnicodeDecodeError):
            raise ConfigProblem(
                f"Secret {self.namespace}/{kc.location}: key {SECRET_KEY!r} is not text"
            ) from None

    async def _connect(self, conn: Connection, name: str, text: str, digest: str) -> None:
        await _disconnect(conn)
        config = parse_kubeconfig(text, name)
        configuration = type.__call__(ClientConfiguration)
        try:
            await kube_config.load_kube_config_from_dict(
                config, client_configuration=configuration
            )
        except Exception as exc:  # the loader raises several kinds for a bad file
            raise ConfigProblem(f"worker cluster {name}: kubeconfig not usable: {exc}") from None
        api = ApiClient(configuration=configuration)
        skip_environment_lookups(api)
        conn.api = api
        conn.kube = Kube(api, timeout=REMOTE_TIMEOUT_SECONDS)
        conn.digest = digest
        conn.watches[WORKLOADS] = self._start_watch(conn.kube, name, WORKLOADS)

    async def _write_active(self, mkc: MultiKueueCluster, conn: Connection) -> None:
        want: tuple[ConditionStatus, str, str]
        if conn.reachable:
            want = ("True", "Active", "Connected")
        else:
            reason, message = conn.problem or (CONNECTION_FAILED, "not connected")
            want = ("False", reason, message)
        cond = mkc.condition_active()
        if cond is not None and (cond.status, cond.reason, cond.message) == want:
            return

        def change(obj: Obj) -> Obj | None:
            fresh = MultiKueueCluster.model_validate(obj)
            if not set_condition(
                fresh.status.conditions, ACTIVE, want[0], want[1], want[2], self.now(),
                fresh.metadata.generation,
            ):
                return None
            return fresh.to_dict()

        try:
            await self.kube.modify_status(MULTIKUEUE_CLUSTERS, mkc.name, change)
        except KubeError as exc:
            logger.warning("MultiKueueCluster %s: Active not written: %s", mkc.name, exc)


class _WatchFailing(Exception):
    def __init__(self, problem: tuple[str, str]) -> None:
        super().__init__(problem[1])
        self.problem = problem


async def _disconnect(conn: Connection) -> None:
    """Stop the connection's watches and close its client."""
    watches, conn.watches = conn.watches, {}
    for watch in watches.values():
        watch.task.cancel()
    for watch in watches.values():
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watch.task
    if conn.api is not None:
        api, conn.api, conn.kube = conn.api, None, None
        await api.close()


def _job_workload_key(obj: Obj) -> str | None:
    """The manager Workload's key of a job this manager made on a worker (the job carries its
    Workload's name in the prebuilt-workload label)."""
    meta = obj.get("metadata") or {}
    workload = (meta.get("labels") or {}).get(c.PREBUILT_WORKLOAD_LABEL)
    if not workload:
        return None
    return f"{meta.get('namespace') or 'default'}/{workload}"


def parse_kubeconfig(text: str, name: str) -> Obj:
    """The kubeconfig as a dict, refused when it cannot name a server (Kueue's
    validateKubeconfig, less its file-path checks)."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigProblem(f"worker cluster {name}: kubeconfig is not YAML: {exc}") from None
    if not isinstance(config, dict) or not config.get("clusters"):
        raise ConfigProblem(
            f"worker cluster {name}: not a kubeconfig (no 'clusters' list)"
        )
    for entry in config.get("clusters") or []:
        cluster = (entry or {}).get("cluster") or {}
        if not cluster.get("server"):
            raise ConfigProblem(
                f"worker cluster {name}: kubeconfig cluster {(entry or {}).get('name')!r} has "
                "no server URL"
            )
    return config


async def _probe(kube: Kube, name: str) -> None:
    status, body = await kube.request("GET", "/version", time_limit=REMOTE_TIMEOUT_SECONDS)
    if status != 200:
        raise KubeError.of(f"GET /version of worker cluster {name}", status, body)
