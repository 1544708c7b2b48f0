"""MultiKueue with operators on the worker (docs/multikueue.md, "Operators on a worker"): the
session's cluster is the manager, one more local cluster the worker, each with its own kqueue
and the JobSet and Trainer operators. A TrainJob on the manager (``spec.managedBy:
kueue.x-k8s.io/multikueue``, the only MultiKueue value Trainer's CRD takes, so the manager's
Trainer leaves it alone) or a JobSet (``kqueue.io/multikueue``) is copied to the worker once its
Workload is admitted there, runs there under the worker's operator, and its status comes back;
the manager's Workload finishes and the copies go. The setup mirrors tests/controller_e2e/test_multikueue.py (kubeconfig in a Secret,
one MultiKueueCluster, config, check and ClusterQueue), with names of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME, ORIGIN_LABEL
from kqueue.controller.admission_checks.multikueue.adapters import KUEUE_MULTIKUEUE
from kqueue.controller.integrations.jobset.generic import JOBSETS
from kqueue.controller.integrations.trainjob.generic import TRAINJOBS
from kqueue.controller.kube import Kube, KubeError
from kqueue.controller.resources import ADMISSION_CHECKS, LOCAL_QUEUES, NAMESPACES, WORKLOADS
from kqueue.localcluster import multikueue as mk
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, condition, eventually, is_true, unique
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_jobset import jobset
from tests.controller_e2e.test_multikueue import (
    _apply,
    _create,
    _get,
    mk_check,
    mk_cluster,
    mk_config,
    secret,
)
from tests.controller_e2e.test_trainjob import runtime, trainjob
from tests.fixtures.cluster import gang_cluster
from tests.fixtures.operators import start_on

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
FRAMEWORKS = ["batch/job", "pod", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]
WORKER = "op-worker"
CHECK, CONFIG, FLAVOR, CQ, QUEUE = "mkop-check", "mkop-config", "mkop-default", "mkop-cq", "mkop-q"
RUNTIME = "mkop-runtime"


@pytest.fixture(scope="module")
def manager(
    cluster: LocalCluster, trainer_operator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    yield from configured_kqueue(
        cluster, Path(tmp_path_factory.mktemp("kqueue-mk-manager")),
        {"integrations": {"frameworks": FRAMEWORKS}, "multiKueue": {"gcInterval": "3s"}},
    )


@pytest.fixture(scope="module")
def worker(
    request: pytest.FixtureRequest, trainer_operator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    for lc in gang_cluster(f"MultiKueue {WORKER}"):
        start_on(request, lc, "trainer")  # and JobSet, which it requires
        yield from configured_kqueue(
            lc, Path(tmp_path_factory.mktemp("kqueue-mk-worker")),
            {"integrations": {"frameworks": FRAMEWORKS}},
        )


@pytest.fixture(scope="module")
def objects(manager: ConfiguredKqueue, worker: ConfiguredKqueue) -> None:
    """On the manager the Secret, MultiKueueCluster, config, check, ClusterQueue and the
    runtime; on the worker its flavor, ClusterQueue and the same runtime."""
    rt = runtime(RUNTIME, complete_after="5s")
    _apply(worker.cluster, [*mk.queue_objects(FLAVOR, CQ, "4", []), rt])
    _apply(manager.cluster, [
        secret(f"{WORKER}-kubeconfig", {"kubeconfig": mk.embedded_kubeconfig(worker.cluster.kubeconfig_path)}),
        mk_cluster(WORKER, f"{WORKER}-kubeconfig"),
        mk_config(CONFIG, [WORKER]),
        mk_check(CHECK, CONFIG),
        *mk.queue_objects(FLAVOR, CQ, "8", [CHECK]),
        rt,
    ])


@dataclass
class Setup:
    manager: Kube
    worker: Kube


@pytest.fixture
async def setup(
    manager: ConfiguredKqueue, worker: ConfiguredKqueue, objects: None, namespace: str
) -> AsyncIterator[Setup]:
    """Clients of both clusters; the test's namespace and LocalQueue on each."""
    from kubernetes_asyncio import config

    clients = [await config.new_client_from_config(config_file=str(lc.kubeconfig_path))
               for lc in (manager.cluster, worker.cluster)]
    s = Setup(Kube(clients[0]), Kube(clients[1]))
    lq = {"apiVersion": c.API_VERSION, "kind": "LocalQueue",
          "metadata": {"name": QUEUE, "namespace": namespace}, "spec": {"clusterQueue": CQ}}
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


async def test_a_trainjob_runs_on_a_worker_with_the_trainer(setup: Setup, namespace: str) -> None:
    name = unique("tj")
    tj = trainjob(name, namespace, QUEUE, RUNTIME, nodes=2)
    tj["spec"]["managedBy"] = KUEUE_MULTIKUEUE
    await setup.manager.create(TRAINJOBS, tj, namespace=namespace)
    manager_api = Api(setup.manager)

    # The copy on the worker: no managedBy (the worker's Trainer runs it), the Workload it adopts
    # and the origin; run there by the worker's Trainer (its JobSet).
    remote = await eventually(lambda: _get(setup.worker, TRAINJOBS, name, namespace), within=120,
                              what="the TrainJob copied to the worker")
    # Trainer's CRD defaults an unset managedBy to its own controller.
    assert remote["spec"].get("managedBy") in (None, "trainer.kubeflow.org/trainjob-controller")
    labels = remote["metadata"]["labels"]
    assert labels[ORIGIN_LABEL] == "multikueue"
    wl = await manager_api.workload_of(namespace, name, kind="TrainJob")
    assert wl is not None and labels[c.PREBUILT_WORKLOAD_LABEL] == wl["metadata"]["name"]
    await eventually(lambda: _get(setup.worker, JOBSETS, name, namespace), within=60,
                     what="the worker's Trainer to create the JobSet")

    async def finished() -> Obj | None:
        w = await manager_api.workload_of(namespace, name, kind="TrainJob")
        return w if w is not None and is_true(w, c.FINISHED) else None

    done = await eventually(finished, within=180, what="the manager's Workload to finish")
    assert done["status"]["clusterName"] == WORKER
    assert condition(done, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]
    # The worker's status came back: the manager's TrainJob is Complete, though it never ran
    # here (its Trainer made no JobSet for it).
    local = await setup.manager.get(TRAINJOBS, name, namespace)
    assert any(cd["type"] == "Complete" and cd["status"] == "True"
               for cd in (local.get("status") or {}).get("conditions") or []), local.get("status")
    assert await _get(setup.manager, JOBSETS, name, namespace) is None

    async def remote_gone() -> bool:
        return (await _get(setup.worker, WORKLOADS, done["metadata"]["name"], namespace) is None
                and await _get(setup.worker, TRAINJOBS, name, namespace) is None)

    await eventually(remote_gone, within=60, what="the copies on the worker to be deleted")


async def test_a_jobset_runs_on_a_worker_with_the_jobset_operator(
    setup: Setup, namespace: str
) -> None:
    name = unique("js")
    js = jobset(name, namespace, QUEUE, workers=1, complete_after="4s")
    js["spec"]["managedBy"] = CONTROLLER_NAME
    await setup.manager.create(JOBSETS, js, namespace=namespace)
    manager_api = Api(setup.manager)
    remote = await eventually(lambda: _get(setup.worker, JOBSETS, name, namespace), within=120,
                              what="the JobSet copied to the worker")
    assert remote["spec"].get("managedBy") in (None, "jobset.sigs.k8s.io/jobset-controller")
    assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"

    async def finished() -> Obj | None:
        w = await manager_api.workload_of(namespace, name, kind="JobSet")
        return w if w is not None and is_true(w, c.FINISHED) else None

    done = await eventually(finished, within=180, what="the manager's Workload to finish")
    assert done["status"]["clusterName"] == WORKER
    assert condition(done, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]
    local = await setup.manager.get(JOBSETS, name, namespace)
    assert any(cd["type"] == "Completed" and cd["status"] == "True"
               for cd in (local.get("status") or {}).get("conditions") or []), local.get("status")

    async def remote_gone() -> bool:
        return (await _get(setup.worker, WORKLOADS, done["metadata"]["name"], namespace) is None
                and await _get(setup.worker, JOBSETS, name, namespace) is None)

    await eventually(remote_gone, within=60, what="the copies on the worker to be deleted")
