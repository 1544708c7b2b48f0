"""MultiKueue with KubeRay and the AppWrapper operator on the worker (docs/multikueue.md): a
RayCluster, a RayJob and an AppWrapper created on the manager are dispatched to a worker
cluster and run there under the worker's operator; their status shows on the manager. The
setup is the one the MultiKueue operator modules share (tests/controller_e2e/
multikueue_worker.py), with names of its own.

A RayCluster never finishes (KubeRay has no end for one) and a RayJob's Ray job does not here
(KubeRay asks the Ray dashboard on the head pod for the job's status, which no kwok pod serves;
tests/controller_e2e/test_ray.py): their tests see the worker's status on the manager, then
delete the manager's object, after which its copies on the worker go. A RayJob past its
``spec.activeDeadlineSeconds`` is Failed by the worker's KubeRay itself: that finish comes back
to the manager, which frees the quota, and the copies go. The AppWrapper (wrapping a Job, whose pods complete on kwok)
finishes. Opt-in operators (tests/fixtures/operators.py): ``make test-operators``. KubeRay runs
on the manager too and leaves the manager's objects alone (``kueue.x-k8s.io/multikueue`` in their
``spec.managedBy``); the AppWrapper operator binds a fixed port, so on the manager only its CRD
stays once the worker's starts.
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.integrations import appwrapper as aw
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.appwrapper.generic import APPWRAPPERS
from kqueue.controller.integrations.ray.generic import RAYCLUSTERS, RAYJOBS
from kqueue.controller.resources import CLUSTER_QUEUES, PODS, WORKLOADS, Resource
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION
from tests.controller_e2e.harness import Api, condition, eventually, unique
from tests.controller_e2e.multikueue_worker import (
    Names,
    Setup,
    copies_gone,
    dispatched,
    finished_workload,
    module_fixtures,
)
from tests.controller_e2e.support_extra import quota_freed
from tests.controller_e2e.test_appwrapper import wrapped_job
from tests.controller_e2e.test_multikueue import _get
from tests.controller_e2e.test_ray import deadline_exceeded, deadline_rayjob, raycluster, rayjob

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("kuberay_operator", "appwrapper_operator")]

Obj = dict[str, Any]
NAMES = Names("mkr", ["batch/job", "pod", "ray.io/rayjob", "ray.io/raycluster",
                      aw.INTEGRATION.framework])
OPERATORS = ("kuberay", "appwrapper")

manager, worker, setup = module_fixtures(NAMES, OPERATORS)


async def _status_shown(
    setup: Setup, namespace: str, resource: Resource, name: str, ready: Any
) -> Obj:
    """The worker's status of ``name`` once ``ready(status)`` there, the same on the manager."""
    async def same() -> Obj | None:
        remote = await _get(setup.worker, resource, name, namespace)
        local = await _get(setup.manager, resource, name, namespace)
        st = (remote or {}).get("status") or {}
        return st if st and ready(st) and (local or {}).get("status") == st else None

    return await eventually(same, within=180,
                            what=f"the worker's {resource.plural} {name} status on the manager")


async def _deleted_everywhere(
    setup: Setup, namespace: str, resource: Resource, kind: str, name: str
) -> None:
    """The manager's object deleted: its Workload goes, and the gc deletes the copies."""
    wl = await Api(setup.manager).workload_of(namespace, name, kind=kind)
    assert wl is not None and wl["status"]["clusterName"] == NAMES.worker
    # No pod of it on the manager: its KubeRay left it alone.
    assert await setup.manager.list(PODS, namespace=namespace) == []
    await setup.manager.delete(resource, name, namespace=namespace)
    await copies_gone(setup, namespace, resource, name, wl["metadata"]["name"])
    assert await _get(setup.manager, WORKLOADS, wl["metadata"]["name"], namespace) is None


async def test_a_raycluster_runs_on_a_worker_with_kuberay(setup: Setup, namespace: str) -> None:
    name = unique("rc")
    await dispatched(setup, namespace, RAYCLUSTERS, raycluster(name, namespace, NAMES.queue))
    # KubeRay on the worker makes the head and 2 workers; their counts come back.
    st = await _status_shown(setup, namespace, RAYCLUSTERS, name,
                             lambda s: s.get("readyWorkerReplicas") == 2)
    assert st["desiredWorkerReplicas"] == 2, st
    await _deleted_everywhere(setup, namespace, RAYCLUSTERS, "RayCluster", name)


async def test_a_rayjob_runs_on_a_worker_with_kuberay(setup: Setup, namespace: str) -> None:
    name = unique("rj")
    await dispatched(setup, namespace, RAYJOBS, rayjob(name, namespace, NAMES.queue))
    # KubeRay on the worker made the job's RayCluster (named in the status that comes back);
    # the job stays Running there (no Ray dashboard on kwok).
    st = await _status_shown(setup, namespace, RAYJOBS, name,
                             lambda s: s.get("jobDeploymentStatus") == "Running")
    assert await _get(setup.worker, RAYCLUSTERS, st["rayClusterName"], namespace) is not None
    assert await _get(setup.manager, RAYCLUSTERS, st["rayClusterName"], namespace) is None
    await _deleted_everywhere(setup, namespace, RAYJOBS, "RayJob", name)


async def test_a_rayjob_past_its_deadline_finishes_on_a_worker(
    setup: Setup, namespace: str
) -> None:
    name = unique("rj")
    await dispatched(setup, namespace, RAYJOBS, deadline_rayjob(name, namespace, NAMES.queue))

    async def holds_quota() -> bool:
        st = (await setup.manager.get(CLUSTER_QUEUES, NAMES.cq)).get("status") or {}
        return st.get("admittedWorkloads") == 1

    # Admitted on the manager (the worker admitted its copy) before the deadline ends it.
    await eventually(holds_quota, within=60, what=f"the manager's {NAMES.cq} to admit the RayJob")
    wl = await finished_workload(setup, namespace, "RayJob", name, reason=c.FINISHED_FAILED)
    # The worker's KubeRay failed it (DeadlineExceeded, not retried); that status came back to
    # the manager's RayJob, and its message is the manager's Workload's.
    local = await setup.manager.get(RAYJOBS, name, namespace)
    deadline_exceeded(local["status"])
    done = condition(wl, c.FINISHED)
    assert done is not None and done["message"] == local["status"]["message"], (done, local["status"])
    assert await setup.manager.list(PODS, namespace=namespace) == []
    await copies_gone(setup, namespace, RAYJOBS, name, wl["metadata"]["name"])
    await quota_freed(Api(setup.manager), NAMES.cq)
    # Freed by the finish: the manager's RayJob and its Workload stay, Failed.
    assert (await setup.manager.get(RAYJOBS, name, namespace))["status"] == local["status"]
    assert await _get(setup.manager, WORKLOADS, wl["metadata"]["name"], namespace) is not None


async def test_an_appwrapper_runs_on_a_worker_with_its_operator(
    setup: Setup, namespace: str
) -> None:
    obj = wrapped_job(unique("aw"), namespace, pods=1)
    obj["metadata"]["labels"] = {**obj["metadata"]["labels"], c.QUEUE_NAME_LABEL: NAMES.queue}
    inner = obj["spec"]["components"][0]["template"]["spec"]["template"]
    inner.setdefault("metadata", {}).setdefault("annotations", {})[COMPLETE_AFTER_ANNOTATION] = "4s"
    name = obj["metadata"]["name"]
    await dispatched(setup, namespace, APPWRAPPERS, obj)
    wl = await finished_workload(setup, namespace, aw.KIND, name)
    local = await setup.manager.get(APPWRAPPERS, name, namespace)
    assert (local.get("status") or {}).get("phase") == "Succeeded", local.get("status")
    assert await setup.manager.list(PODS, namespace=namespace) == []
    await copies_gone(setup, namespace, APPWRAPPERS, name, wl["metadata"]["name"])
