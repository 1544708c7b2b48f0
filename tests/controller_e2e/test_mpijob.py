"""MPIJobs under kqueue, with the real MPI operator on the real control plane (an opt-in
operator: `make test-operators`): the whole life, launcher and workers admitted as one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import Resource
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import Api, eventually, is_true
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_jobset import _pods, _setup, _wait_workload, pod_template

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
MPIJOBS = Resource("kubeflow.org", "v2beta1", "mpijobs")


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, mpi_operator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-mpijob"))
    frameworks = ["batch/job", "pod", "kubeflow.org/mpijob"]
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": frameworks}})


def mpijob(name: str, namespace: str, queue: str, workers: int = 2) -> Obj:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.QUEUE_NAME_LABEL: queue}},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod_template("1", "5s")},
                "Worker": {"replicas": workers, "template": pod_template("1", None)},
            },
        },
    }


async def test_mpijob_full_life(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    await _setup(api, namespace, "4")
    created = await api.kube.create(MPIJOBS, mpijob("pi", namespace, "q"), namespace=namespace)
    assert created["spec"]["runPolicy"]["suspend"] is True
    wl = await _wait_workload(api, namespace, "MPIJob", "pi", lambda w: is_true(w, c.ADMITTED), "admitted")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("launcher", 1), ("worker", 2)]
    selector = "training.kubeflow.org/job-name=pi"

    async def bound() -> list[Obj] | None:
        pods = await _pods(api, namespace, selector)
        roles = sorted(p["metadata"]["labels"].get("training.kubeflow.org/job-role", "") for p in pods)
        ok = roles == ["launcher", "worker", "worker"] and all(p["spec"].get("nodeName") for p in pods)
        return pods if ok else None

    pods = await eventually(bound, within=120, what="the MPIJob's launcher and 2 workers bound")
    for pod in pods:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
    # The launcher Job is the MPIJob's: no Workload of its own.
    assert await api.workload_of(namespace, "pi-launcher") is None
    await _wait_workload(api, namespace, "MPIJob", "pi", lambda w: is_true(w, c.FINISHED), "finished")
