"""MultiKueue with the opt-in operators on the worker (docs/multikueue.md): an MPIJob (the MPI
operator) and each training-operator v1 kind (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob)
created on the manager run on a worker cluster under the worker's operator, their status comes
back, the manager's Workload finishes and the copies go (a JAXJob also gets gated pods on the
manager: the training-operator's JAXJob controller ignores its managedBy). The setup is the one the MultiKueue
operator modules share (tests/controller_e2e/multikueue_worker.py), with names of its own.

The operators are opt-in (tests/fixtures/operators.py): these tests run with
``KQUEUE_EXTRA_OPERATORS=1`` or ``=only`` (``make test-operators``), and are deselected,
saying so, otherwise. Each operator runs on the worker and on the manager, whose copy of it
must leave the manager-side object alone (``kueue.x-k8s.io/multikueue`` in its managedBy, which
kqueue's webhook sets; the MPI operator binds a fixed port, so on the manager only its CRD
stays once the worker's starts).
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.integrations import kubeflow as kf
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import is_gated
from kqueue.controller.resources import PODS
from tests.controller_e2e.harness import eventually, unique
from tests.controller_e2e.multikueue_worker import (
    Names,
    Setup,
    copies_gone,
    dispatched,
    finished_workload,
    module_fixtures,
    runs_on_the_worker,
)
from tests.controller_e2e.test_kubeflow import pytorchjob, sample
from tests.controller_e2e.test_kubeflow import resource as kubeflow_resource
from tests.controller_e2e.test_mpijob import MPIJOBS, mpijob

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("mpi_operator", "training_operator")]

Obj = dict[str, Any]
NAMES = Names("mkx", ["batch/job", "pod", "kubeflow.org/mpijob",
                      *(k.framework for k in kf.KINDS)])
OPERATORS = ("mpi-operator", "training-operator")

manager, worker, setup = module_fixtures(NAMES, OPERATORS)


async def test_an_mpijob_runs_on_a_worker_with_the_mpi_operator(
    setup: Setup, namespace: str
) -> None:
    await runs_on_the_worker(
        setup, namespace, MPIJOBS, mpijob(unique("mpi"), namespace, NAMES.queue, workers=1),
        ("Succeeded", "True"),
    )


async def test_a_pytorchjob_runs_on_a_worker_with_the_training_operator(
    setup: Setup, namespace: str
) -> None:
    job = pytorchjob(unique("pt"), namespace, workers=1, complete_after="5s")
    job["metadata"]["labels"][c.QUEUE_NAME_LABEL] = NAMES.queue
    await runs_on_the_worker(setup, namespace, kubeflow_resource(kf.PYTORCHJOB), job,
                             ("Succeeded", "True"))


def _sample(kind: kf.KubeflowKind, namespace: str) -> Obj:
    """The kind's sample (its pods complete on kwok after 10 s), in the module's queue."""
    job = sample(kind, namespace, NAMES.queue)
    job["metadata"]["name"] = unique(kind.kind.lower()[:3])
    return job


@pytest.mark.parametrize("kind", [kf.TFJOB, kf.XGBOOSTJOB, kf.PADDLEJOB], ids=lambda k: k.kind)
async def test_a_training_operator_job_runs_on_a_worker(
    setup: Setup, namespace: str, kind: kf.KubeflowKind
) -> None:
    """TFJob, XGBoostJob and PaddleJob: dispatched as the PyTorchJob is."""
    await runs_on_the_worker(setup, namespace, kubeflow_resource(kind), _sample(kind, namespace),
                             ("Succeeded", "True"))


async def test_a_jaxjob_runs_on_a_worker_and_the_manager_s_operator_makes_gated_pods(
    setup: Setup, namespace: str
) -> None:
    """The training-operator v1.9.2's JAXJob controller does not read
    ``spec.runPolicy.managedBy`` (its webhook does; its other kinds' controllers do): the
    manager's training-operator makes the dispatched JAXJob's pods on the manager too. They
    stay behind kqueue's gate (MultiKueue's Workload is placed on the worker, so the manager
    releases none): nothing runs twice, and the worker's status comes back
    (docs/multikueue.md)."""
    resource = kubeflow_resource(kf.JAXJOB)
    job = _sample(kf.JAXJOB, namespace)
    name = job["metadata"]["name"]
    await dispatched(setup, namespace, resource, job)
    wl = await finished_workload(setup, namespace, kf.JAXJOB.kind, name)
    local = await setup.manager.get(resource, name, namespace)
    conditions = (local.get("status") or {}).get("conditions") or []
    assert any((cd["type"], cd["status"]) == ("Succeeded", "True") for cd in conditions), local
    replicas = job["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"]

    async def manager_pods() -> list[Obj] | None:
        pods = await setup.manager.list(
            PODS, namespace=namespace, label_selector=f"{kf.JOB_NAME_LABEL}={name}")
        return pods if len(pods) == replicas else None

    pods = await eventually(manager_pods, within=60,
                            what="the manager's training-operator to make the JAXJob's pods")
    for pod in pods:
        assert is_gated(pod) and not pod["spec"].get("nodeName"), pod
    await copies_gone(setup, namespace, resource, name, wl["metadata"]["name"])
