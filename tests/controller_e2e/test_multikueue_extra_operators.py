"""MultiKueue with the opt-in operators on the worker (docs/multikueue.md): an MPIJob (the MPI
operator) and a PyTorchJob (the training-operator) created on the manager run on a worker
cluster under the worker's operator, their status comes back, the manager's Workload finishes
and the copies go. (A RayJob does not finish on these clusters: KubeRay reads its status from
the Ray dashboard, which no kwok pod serves.)

The operators are opt-in (tests/fixtures/operators.py): these tests run with
``KQUEUE_EXTRA_OPERATORS=1`` or ``=only`` (``make test-operators``), and are deselected,
saying so, otherwise. Each operator runs on the worker and on the manager, whose copy of it
must leave the manager-side object alone (``kueue.x-k8s.io/multikueue`` in its managedBy, which
kqueue's webhook sets; the MPI operator binds a fixed port, so on the manager only its CRD
stays once the worker's starts). Set up as tests/controller_e2e/test_multikueue_operators.py
sets up the JobSet and Trainer case, with names of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.integrations import kubeflow as kf
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import ORIGIN_LABEL
from kqueue.controller.admission_checks.multikueue import adapters
from kqueue.controller.admission_checks.multikueue.adapters import KUEUE_MULTIKUEUE
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
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_kubeflow import pytorchjob
from tests.controller_e2e.test_kubeflow import resource as kubeflow_resource
from tests.controller_e2e.test_mpijob import MPIJOBS, mpijob
from tests.controller_e2e.test_multikueue import _apply, _create, _get
from tests.fixtures.cluster import gang_cluster
from tests.fixtures.operators import start_on

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
FRAMEWORKS = ["batch/job", "pod", "kubeflow.org/mpijob", "kubeflow.org/pytorchjob"]
OPERATORS = ("mpi-operator", "training-operator")
WORKER = "opx-worker"
CHECK, CONFIG, FLAVOR, CQ, QUEUE = "mkx-check", "mkx-config", "mkx-default", "mkx-cq", "mkx-q"
PYTORCHJOBS = kubeflow_resource(kf.PYTORCHJOB)


@pytest.fixture(scope="module")
def manager(
    cluster: LocalCluster, mpi_operator: str, training_operator: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConfiguredKqueue]:
    yield from configured_kqueue(
        cluster, Path(tmp_path_factory.mktemp("kqueue-mkx-manager")),
        {"integrations": {"frameworks": FRAMEWORKS}, "multiKueue": {"gcInterval": "3s"}},
    )


@pytest.fixture(scope="module")
def worker(
    request: pytest.FixtureRequest, manager: ConfiguredKqueue,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConfiguredKqueue]:
    for lc in gang_cluster(f"MultiKueue {WORKER}"):
        for name in OPERATORS:
            start_on(request, lc, name)
        yield from configured_kqueue(
            lc, Path(tmp_path_factory.mktemp("kqueue-mkx-worker")),
            {"integrations": {"frameworks": FRAMEWORKS}},
        )


@dataclass
class Setup:
    manager: Kube
    worker: Kube


@pytest.fixture
async def setup(
    manager: ConfiguredKqueue, worker: ConfiguredKqueue, namespace: str
) -> AsyncIterator[Setup]:
    """The MultiKueue objects (once: applying them again changes nothing), clients of both
    clusters, and the test's namespace and LocalQueue on each."""
    from kubernetes_asyncio import config

    _apply(worker.cluster, mk.queue_objects(FLAVOR, CQ, "8", []))
    _apply(manager.cluster, [
        *mk.manager_objects({WORKER: worker.cluster.kubeconfig_path}, KQUEUE_NAMESPACE,
                            config=CONFIG, check=CHECK),
        *mk.queue_objects(FLAVOR, CQ, "8", [CHECK]),
    ])
    clients = [await config.new_client_from_config(config_file=str(lc.kubeconfig_path))
               for lc in (manager.cluster, worker.cluster)]
    s = Setup(Kube(clients[0]), Kube(clients[1]))
    lq = mk.local_queue(QUEUE, namespace, CQ)
    await _create(s.worker, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": namespace}})
    await _create(s.worker, LOCAL_QUEUES, lq)
    await _create(s.manager, LOCAL_QUEUES, lq)

    async def active() -> bool:
        ac = await _get(s.manager, ADMISSION_CHECKS, CHECK)
        return ac is not None and is_true(ac, "Active")

    await eventually(active, within=60, what="the MultiKueue check to be Active")
    try:
        yield s
    finally:
        with contextlib.suppress(KubeError):
            await s.worker.delete(NAMESPACES, namespace)
        for api in clients:
            await api.close()


async def _runs_on_the_worker(
    setup: Setup, namespace: str, resource: Resource, obj: Obj, done: tuple[str, str]
) -> None:
    """``obj`` (no managedBy) created on the manager: kqueue's webhook gives it its kind's
    MultiKueue managedBy; it runs on the worker and finishes there; its status (condition
    ``done``) comes back, no pod runs on the manager, and the copies go."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    adapter = adapters.adapter_for(obj["apiVersion"], kind)
    assert adapter is not None and adapter.managed_by_path is not None
    created = await setup.manager.create(resource, obj, namespace=namespace)
    assert adapters.managed_by(adapter, created) == KUEUE_MULTIKUEUE, created["spec"]
    remote = await eventually(lambda: _get(setup.worker, resource, name, namespace), within=120,
                              what=f"the {kind} copied to the worker")
    assert adapters.managed_by(adapter, remote) != KUEUE_MULTIKUEUE
    assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"
    manager_api = Api(setup.manager)

    async def finished() -> Obj | None:
        w = await manager_api.workload_of(namespace, name, kind=kind)
        return w if w is not None and is_true(w, c.FINISHED) else None

    wl = await eventually(finished, within=240, what="the manager's Workload to finish")
    assert wl["status"]["clusterName"] == WORKER
    assert condition(wl, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]
    local = await setup.manager.get(resource, name, namespace)
    conditions = (local.get("status") or {}).get("conditions") or []
    assert any((cd["type"], cd["status"]) == done for cd in conditions), local.get("status")
    # Its manager-side operator left it alone: no pod of it here.
    assert await setup.manager.list(PODS, namespace=namespace) == []

    async def remote_gone() -> bool:
        return (await _get(setup.worker, WORKLOADS, wl["metadata"]["name"], namespace) is None
                and await _get(setup.worker, resource, name, namespace) is None)

    await eventually(remote_gone, within=60, what="the copies on the worker to be deleted")


async def test_an_mpijob_runs_on_a_worker_with_the_mpi_operator(
    setup: Setup, namespace: str
) -> None:
    await _runs_on_the_worker(
        setup, namespace, MPIJOBS, mpijob(unique("mpi"), namespace, QUEUE, workers=1),
        ("Succeeded", "True"),
    )


async def test_a_pytorchjob_runs_on_a_worker_with_the_training_operator(
    setup: Setup, namespace: str
) -> None:
    job = pytorchjob(unique("pt"), namespace, workers=1, complete_after="5s")
    job["metadata"]["labels"][c.QUEUE_NAME_LABEL] = QUEUE
    await _runs_on_the_worker(setup, namespace, PYTORCHJOBS, job, ("Succeeded", "True"))

