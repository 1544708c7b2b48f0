"""MultiKueue with operators on the worker (docs/multikueue.md, "Operators on a worker"): the
session's cluster is the manager, one more local cluster the worker, each with its own kqueue
and the JobSet and Trainer operators (tests/controller_e2e/multikueue_worker.py). A TrainJob on
the manager (``spec.managedBy: kueue.x-k8s.io/multikueue``, the only MultiKueue value Trainer's
CRD takes, so the manager's Trainer leaves it alone) or a JobSet (``kqueue.io/multikueue``) is
copied to the worker once its Workload is admitted there, runs there under the worker's
operator, and its status comes back; the manager's Workload finishes and the copies go.
"""

from __future__ import annotations

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME, ORIGIN_LABEL
from kqueue.controller.admission_checks.multikueue.adapters import KUEUE_MULTIKUEUE
from kqueue.controller.integrations.jobset.generic import JOBSETS
from kqueue.controller.integrations.trainjob.generic import TRAINJOBS
from tests.controller_e2e.harness import Api, eventually, unique
from tests.controller_e2e.multikueue_worker import (
    Names,
    Setup,
    copies_gone,
    finished_workload,
    module_fixtures,
)
from tests.controller_e2e.test_jobset import jobset
from tests.controller_e2e.test_multikueue import _get
from tests.controller_e2e.test_trainjob import runtime, trainjob

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("trainer_operator")]

RUNTIME = "mkop-runtime"
NAMES = Names(
    "mkop", ["batch/job", "pod", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"],
    worker_cpu="4", shared=[runtime(RUNTIME, complete_after="5s")],
)

manager, worker, setup = module_fixtures(NAMES, ("trainer",))


async def test_a_trainjob_runs_on_a_worker_with_the_trainer(setup: Setup, namespace: str) -> None:
    name = unique("tj")
    tj = trainjob(name, namespace, NAMES.queue, RUNTIME, nodes=2)
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

    done = await finished_workload(setup, namespace, "TrainJob", name)
    # The worker's status came back: the manager's TrainJob is Complete, though it never ran
    # here (its Trainer made no JobSet for it).
    local = await setup.manager.get(TRAINJOBS, name, namespace)
    assert any(cd["type"] == "Complete" and cd["status"] == "True"
               for cd in (local.get("status") or {}).get("conditions") or []), local.get("status")
    assert await _get(setup.manager, JOBSETS, name, namespace) is None
    await copies_gone(setup, namespace, TRAINJOBS, name, done["metadata"]["name"])


async def test_a_jobset_runs_on_a_worker_with_the_jobset_operator(
    setup: Setup, namespace: str
) -> None:
    name = unique("js")
    js = jobset(name, namespace, NAMES.queue, workers=1, complete_after="4s")
    js["spec"]["managedBy"] = CONTROLLER_NAME
    await setup.manager.create(JOBSETS, js, namespace=namespace)
    remote = await eventually(lambda: _get(setup.worker, JOBSETS, name, namespace), within=120,
                              what="the JobSet copied to the worker")
    assert remote["spec"].get("managedBy") in (None, "jobset.sigs.k8s.io/jobset-controller")
    assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"

    done = await finished_workload(setup, namespace, "JobSet", name)
    local = await setup.manager.get(JOBSETS, name, namespace)
    assert any(cd["type"] == "Completed" and cd["status"] == "True"
               for cd in (local.get("status") or {}).get("conditions") or []), local.get("status")
    await copies_gone(setup, namespace, JOBSETS, name, done["metadata"]["name"])
