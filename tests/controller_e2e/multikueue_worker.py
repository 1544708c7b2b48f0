"""The setup the MultiKueue operator modules share (tests/controller_e2e/
test_multikueue_operators.py, test_multikueue_extra_operators.py): the session's cluster is the
manager, one more local cluster the worker, each with its own kqueue and the operators of the
kinds dispatched; the manager reads the worker's kubeconfig from a Secret, through one
MultiKueueCluster, config, check and ClusterQueue. Each module names its own objects (a
``Names``), so that modules sharing the session's cluster do not meet, and takes its fixtures
from :func:`module_fixtures`, asking for the operators' fixtures with ``usefixtures`` (they
start the operators on the manager, and build them before the tests run).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import ORIGIN_LABEL
from kqueue.controller.admission_checks.multikueue import adapters
from kqueue.controller.kube import Kube, KubeError
from kqueue.controller.resources import (
    ADMISSION_CHECKS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    WORKLOADS,
    Resource,
)
from kqueue.localcluster import multikueue as mk
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    KQUEUE_NAMESPACE,
    Api,
    condition,
    eventually,
    is_true,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_multikueue import _apply, _create, _get
from tests.fixtures.cluster import gang_cluster
from tests.fixtures.operators import start_on

Obj = dict[str, Any]


@dataclass(frozen=True)
class Names:
    """A module's worker and objects, and the integrations both kqueues run."""

    prefix: str
    frameworks: list[str]
    worker_cpu: str = "8"
    # Applied on both clusters before the first test (a TrainJob's runtime).
    shared: list[Obj] = field(default_factory=list)

    @property
    def worker(self) -> str:
        return f"{self.prefix}-worker"

    @property
    def check(self) -> str:
        return f"{self.prefix}-check"

    @property
    def config(self) -> str:
        return f"{self.prefix}-config"

    @property
    def flavor(self) -> str:
        return f"{self.prefix}-default"

    @property
    def cq(self) -> str:
        return f"{self.prefix}-cq"

    @property
    def queue(self) -> str:
        return f"{self.prefix}-q"


def manager_kqueue(
    cluster: LocalCluster, names: Names, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    """The manager's kqueue (a short ``gcInterval``: the copies go within the test)."""
    yield from configured_kqueue(
        cluster, Path(tmp_path_factory.mktemp(f"kqueue-{names.prefix}-manager")),
        {"integrations": {"frameworks": names.frameworks}, "multiKueue": {"gcInterval": "3s"}},
    )


def worker_kqueue(
    request: pytest.FixtureRequest, names: Names, operators: tuple[str, ...],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConfiguredKqueue]:
    """A local cluster, ``operators`` started on it (the module must also ask for their
    fixtures, so that they are built), and its kqueue."""
    for lc in gang_cluster(f"MultiKueue {names.worker}"):
        for name in operators:
            start_on(request, lc, name)
        yield from configured_kqueue(
            lc, Path(tmp_path_factory.mktemp(f"kqueue-{names.prefix}-worker")),
            {"integrations": {"frameworks": names.frameworks}},
        )


def module_fixtures(names: Names, worker_operators: tuple[str, ...]) -> tuple[Any, Any, Any]:
    """The module's ``manager`` and ``worker`` kqueues (module scope; the worker started after
    the manager, so that an operator binding a fixed port moves to the worker) and ``setup``."""

    @pytest.fixture(scope="module")
    def manager(
        cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[ConfiguredKqueue]:
        yield from manager_kqueue(cluster, names, tmp_path_factory)

    @pytest.fixture(scope="module")
    def worker(
        request: pytest.FixtureRequest, manager: ConfiguredKqueue,
        tmp_path_factory: pytest.TempPathFactory,
    ) -> Iterator[ConfiguredKqueue]:
        yield from worker_kqueue(request, names, worker_operators, tmp_path_factory)

    @pytest.fixture
    async def setup(
        manager: ConfiguredKqueue, worker: ConfiguredKqueue, namespace: str
    ) -> AsyncIterator[Setup]:
        async with connected(manager, worker, names, namespace) as s:
            yield s

    return manager, worker, setup


@dataclass
class Setup:
    manager: Kube
    worker: Kube
    names: Names


@contextlib.asynccontextmanager
async def connected(
    manager: ConfiguredKqueue, worker: ConfiguredKqueue, names: Names, namespace: str
) -> AsyncIterator[Setup]:
    """The MultiKueue objects (applying them again changes nothing), clients of both clusters,
    and the test's namespace and LocalQueue on each, once the check is Active."""
    from kubernetes_asyncio import config

    _apply(worker.cluster, [*mk.queue_objects(names.flavor, names.cq, names.worker_cpu, []),
                            *names.shared])
    _apply(manager.cluster, [
        *mk.manager_objects({names.worker: worker.cluster.kubeconfig_path}, KQUEUE_NAMESPACE,
                            config=names.config, check=names.check),
        *mk.queue_objects(names.flavor, names.cq, "8", [names.check]),
        *names.shared,
    ])
    clients = [await config.new_client_from_config(config_file=str(lc.kubeconfig_path))
               for lc in (manager.cluster, worker.cluster)]
    s = Setup(Kube(clients[0]), Kube(clients[1]), names)
    lq = mk.local_queue(names.queue, namespace, names.cq)
    await _create(s.worker, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": namespace}})
    await _create(s.worker, LOCAL_QUEUES, lq)
    await _create(s.manager, LOCAL_QUEUES, lq)

    async def active() -> bool:
        ac = await _get(s.manager, ADMISSION_CHECKS, names.check)
        return ac is not None and is_true(ac, "Active")

    await eventually(active, within=60, what="the MultiKueue check to be Active")
    try:
        yield s
    finally:
        with contextlib.suppress(KubeError):
            await s.worker.delete(NAMESPACES, namespace)
        for api in clients:
            await api.close()


async def finished_workload(
    setup: Setup, namespace: str, kind: str, name: str, reason: str = c.FINISHED_SUCCEEDED
) -> Obj:
    """The manager's Workload of ``kind`` ``name`` once Finished (``reason``) on the worker."""
    manager_api = Api(setup.manager)

    async def finished() -> Obj | None:
        w = await manager_api.workload_of(namespace, name, kind=kind)
        return w if w is not None and is_true(w, c.FINISHED) else None

    wl = await eventually(finished, within=240, what=f"the manager's {kind} Workload to finish")
    assert wl["status"]["clusterName"] == setup.names.worker
    assert condition(wl, c.FINISHED)["reason"] == reason  # type: ignore[index]
    return wl


async def copies_gone(
    setup: Setup, namespace: str, resource: Resource, name: str, workload: str
) -> None:
    async def remote_gone() -> bool:
        return (await _get(setup.worker, WORKLOADS, workload, namespace) is None
                and await _get(setup.worker, resource, name, namespace) is None)

    await eventually(remote_gone, within=60, what="the copies on the worker to be deleted")


async def dispatched(setup: Setup, namespace: str, resource: Resource, obj: Obj) -> Obj:
    """``obj`` (no managedBy) created on the manager: kqueue's webhook gives it its kind's
    MultiKueue managedBy; its copy on the worker (returned) has another, and the origin."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    adapter = adapters.adapter_for(obj["apiVersion"], kind)
    assert adapter is not None and adapter.managed_by_path is not None
    created = await setup.manager.create(resource, obj, namespace=namespace)
    assert adapters.managed_by(adapter, created) == adapter.managed_by, created["spec"]
    remote = await eventually(lambda: _get(setup.worker, resource, name, namespace), within=120,
                              what=f"the {kind} copied to the worker")
    assert adapters.managed_by(adapter, remote) != adapter.managed_by
    assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"
    return remote


async def runs_on_the_worker(
    setup: Setup, namespace: str, resource: Resource, obj: Obj, done: tuple[str, str]
) -> None:
    """``obj`` is dispatched (``dispatched``), runs on the worker and finishes there; its status
    (condition ``done``) comes back, no pod runs on the manager, and the copies go."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    await dispatched(setup, namespace, resource, obj)
    wl = await finished_workload(setup, namespace, kind, name)
    local = await setup.manager.get(resource, name, namespace)
    conditions = (local.get("status") or {}).get("conditions") or []
    assert any((cd["type"], cd["status"]) == done for cd in conditions), local.get("status")
    # Its manager-side operator left it alone: no pod of it here.
    assert await setup.manager.list(PODS, namespace=namespace) == []
    await copies_gone(setup, namespace, resource, name, wl["metadata"]["name"])
