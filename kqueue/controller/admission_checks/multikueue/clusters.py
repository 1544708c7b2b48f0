"""The manager's connections to its worker clusters, one per MultiKueueCluster (Kueue's
``multikueuecluster.go`` and ``remote_client.go``), on kqueue's one client (kube.py).

Each cluster's kubeconfig comes from a Secret in the controller's namespace (key
``kubeconfig``) or from a path on the controller's disk. Every ``PROBE_SECONDS`` the kubeconfig
is read again (a changed Secret reconnects) and the worker is asked for its version: the
cluster's ``Active`` condition says whether that worked, and if not why, naming the problem
(``BadKubeConfig``: Secret or key missing, not a kubeconfig, no server; ``ClientConnectionFailed``:
the API server does not answer). A worker that stops answering is *lost* from then on; how long
is what the worker-lost timeout is measured against.
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
from kqueue.api.v1alpha1.multikueue import ACTIVE, SECRET_KEY
from kqueue.controller.clock import Now
from kqueue.controller.informer import Store
from kqueue.controller.kube import (
    Kube,
    KubeError,
    NotFound,
    skip_environment_lookups,
)
from kqueue.controller.resources import MULTIKUEUE_CLUSTERS, SECRETS

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


@dataclass
class RemoteClusters:
    """The connections, kept in step with the MultiKueueClusters by :meth:`run`."""

    clusters: Store[MultiKueueCluster]
    kube: Kube
    namespace: str
    now: Now
    on_change: Callable[[str], None] = lambda _name: None
    """Called with a cluster's name when it connects, disconnects or its problem changes."""
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

    async def run(self) -> None:
        try:
            while True:
                await self.probe_all()
                await asyncio.sleep(PROBE_SECONDS)
        finally:
            # The clients close with the term; the connections go with them, so the next term
            # connects afresh (a closed client kept here failed every probe with "Session is
            # closed", which ended each later term of the leader at once).
            connections, self.connections = self.connections, {}
            for conn in connections.values():
                if conn.api is not None:
                    with contextlib.suppress(Exception):
                        await conn.api.close()

    async def probe_all(self) -> None:
        names = {mkc.name for mkc in self.clusters.objects()}
        for gone in set(self.connections) - names:
            conn = self.connections.pop(gone)
            if conn.api is not None:
                await conn.api.close()
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
        except ConfigProblem as exc:
            self._down(conn, (BAD_KUBECONFIG, str(exc)))
        except KubeError as exc:
            self._down(conn, (CONNECTION_FAILED, f"worker cluster {name}: {exc}"))
        except NotImplementedError as exc:
            self._down(conn, (NOT_SUPPORTED, str(exc)))
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
        if conn.api is not None:
            await conn.api.close()
            conn.api = conn.kube = None
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
