"""waitForPodsReady for a training-operator v1 job, with the real training-operator (v1.9.2): a
PyTorchJob whose pods all run gets PodsReady; one whose pods never become ready (a node selector
no node matches keeps them Pending) is evicted whole with PodsReadyTimeout (suspended again, no
pod left) and requeued."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kqueue.api.integrations import kubeflow as kf
from kqueue.api.v1alpha1 import constants as c
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, condition, eventually, is_true
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_jobset import _setup, _wait_workload
from tests.controller_e2e.test_kubeflow import FRAMEWORKS, _pods, pytorchjob, resource

pytestmark = pytest.mark.cluster

TIMEOUT_S = 5


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, training_operator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    yield from configured_kqueue(
        cluster,
        Path(tmp_path_factory.mktemp("kqueue-kubeflow-ready")),
        {
            "integrations": {"frameworks": FRAMEWORKS},
            "waitForPodsReady": {
                "enable": True,
                "timeout": f"{TIMEOUT_S}s",
                "blockAdmission": False,
                "requeuingStrategy": {"backoffBaseSeconds": 60, "backoffLimitCount": 3},
            },
        },
    )


async def test_a_pytorchjob_whose_pods_run_gets_pods_ready(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    await _setup(api, namespace, "4")
    await api.kube.create(resource(kf.PYTORCHJOB), pytorchjob("ready", namespace, workers=2), namespace=namespace)
    wl = await _wait_workload(api, namespace, "PyTorchJob", "ready", lambda w: is_true(w, c.PODS_READY), "PodsReady")
    assert is_true(wl, c.ADMITTED) and not is_true(wl, c.EVICTED)
    assert condition(wl, c.PODS_READY)["reason"] == "PodsReady"  # type: ignore[index]
    assert len(await _pods(api, namespace, "ready")) == 3


async def test_a_pytorchjob_never_ready_is_evicted_whole_and_requeued(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    await _setup(api, namespace, "4")
    obj = pytorchjob("stuck", namespace, workers=1)
    # The worker never runs: the gang is never ready, though the master does.
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["nodeSelector"] = {"e2e.kqueue.io/no-such-node": "true"}
    await api.kube.create(resource(kf.PYTORCHJOB), obj, namespace=namespace)
    await _wait_workload(api, namespace, "PyTorchJob", "stuck", lambda w: is_true(w, c.ADMITTED), "admitted")

    wl = await _wait_workload(
        api, namespace, "PyTorchJob", "stuck",
        lambda w: ((w.get("status") or {}).get("requeueState") or {}).get("count") == 1,
        "evicted by the timeout (requeueState.count 1)",
    )
    evicted = condition(wl, c.EVICTED)
    assert evicted is not None and evicted["reason"] == c.EVICTED_BY_PODS_READY_TIMEOUT

    async def stopped() -> bool:
        got = await api.kube.get(resource(kf.PYTORCHJOB), "stuck", namespace)
        return got["spec"]["runPolicy"].get("suspend") is True and not await _pods(api, namespace, "stuck")

    # Whole: the master that ran goes with the worker that never did.
    await eventually(stopped, within=90, what="the PyTorchJob suspended with no pods left")
    requeued = await _wait_workload(
        api, namespace, "PyTorchJob", "stuck", lambda w: (w.get("status") or {}).get("admission") is None, "released"
    )
    assert not is_true(requeued, c.ADMITTED)
