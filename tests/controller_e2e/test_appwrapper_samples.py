"""Kueue's AppWrapper samples wrapping a Deployment and a LeaderWorkerSet (config/samples/,
converted), run on the real control plane with the real AppWrapper operator (v1.1.2, its
webhooks off) and, for the LeaderWorkerSet, the real LeaderWorkerSet operator; the Deployment
is run by kube-controller-manager. Each: held while the quota is short (the operator creates
nothing), admitted, its wrapped object created by the operator and its pods released with the
flavor's node selector and bound by kube-scheduler on kwok nodes, with only the AppWrapper
holding a Workload (the deployment and leaderworkerset integrations are on, and leave the
wrapped objects alone); neither finishes (they serve), so the AppWrapper is deleted and its
quota is freed. The LeaderWorkerSet sample declares the 4 workers its groups make (Kueue's
declares 3; see the test)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.integrations import appwrapper as aw
from kqueue.api.integrations import deployment, leaderworkerset
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import WORKLOADS, Resource
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import Api, eventually, is_true, stays
from tests.controller_e2e.support_extra import (
    ConfiguredKqueue,
    configured_kqueue,
    gated,
    quota_freed,
)
from tests.controller_e2e.test_appwrapper import APPWRAPPERS, SAMPLES, _pods, _setup_quota
from tests.controller_e2e.test_jobset import _setup, _wait_workload

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
FRAMEWORKS = [
    "batch/job",
    "pod",
    deployment.INTEGRATION.framework,
    leaderworkerset.INTEGRATION.framework,
    aw.INTEGRATION.framework,
]
DEPLOYMENTS = Resource("apps", "v1", "deployments")
LWS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster,
    appwrapper_operator: str,
    lws_operator: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-appwrapper-samples"))
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": FRAMEWORKS}})


def _sample(file: str, namespace: str) -> Obj:
    [obj] = [d for d in yaml.safe_load_all((SAMPLES / file).read_text()) if d]
    assert isinstance(obj, dict)
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["labels"][c.QUEUE_NAME_LABEL] = "q"
    return obj


async def _life(api: Api, namespace: str, obj: Obj, wrapped: Resource) -> None:
    cq = await _setup(api, namespace, "100m")
    name = obj["metadata"]["name"]
    declared = [(f"{name}-{i}", e.get("replicas", 1)) for i, e in enumerate(obj["spec"]["components"][0]["podSets"])]
    created = await api.kube.create(APPWRAPPERS, obj, namespace=namespace)
    assert created["spec"]["suspend"] is True

    wl = await _wait_workload(api, namespace, aw.KIND, name, lambda w: True, "created")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == declared

    async def held() -> bool:
        wl = await api.workload_of(namespace, name, kind=aw.KIND)
        return wl is not None and not is_true(wl, c.QUOTA_RESERVED) and not await api.kube.list(wrapped, namespace=namespace)

    await stays(held, for_s=3, what=f"the AppWrapper held, with no {wrapped.plural}, while the quota is short")

    await _setup_quota(api, cq, "2")
    await _wait_workload(api, namespace, aw.KIND, name, lambda w: is_true(w, c.ADMITTED), "admitted")

    async def bound() -> list[Obj] | None:
        pods = [p for p in await _pods(api, namespace, name) if p["spec"].get("nodeName")]
        return pods if len(pods) >= sum(n for _, n in declared) else None

    try:
        pods = await eventually(bound, within=180, what="the AppWrapper's admitted pods bound to kwok nodes")
    except pytest.fail.Exception as exc:
        seen = [
            (p["metadata"]["name"], p["spec"].get("nodeName"), bool(gated(p)), p["status"].get("conditions"))
            for p in await _pods(api, namespace, name)
        ]
        pytest.fail(f"{exc}; its pods (name, node, gated, conditions): {seen}")
    for pod in pods:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert not pod["spec"].get("schedulingGates")
    # Released per pod set as admitted, none held back.
    every = await _pods(api, namespace, name)
    released = Counter(p["metadata"]["labels"][aw.POD_SET_LABEL] for p in every if not gated(p))
    assert released == Counter(dict(declared))
    assert sum(1 for p in every if gated(p)) == len(every) - sum(n for _, n in declared)
    # One Workload, the AppWrapper's: the wrapped object and its pods are not queued again.
    owners = [
        ref["kind"]
        for w in await api.kube.list(WORKLOADS, namespace=namespace)
        for ref in w["metadata"].get("ownerReferences") or []
    ]
    assert owners == [aw.KIND]

    # It serves until deleted: deleting it frees the quota.
    await api.kube.delete(APPWRAPPERS, name, namespace=namespace)

    await quota_freed(api, cq)


async def test_kueue_s_deployment_sample(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    await _life(api, namespace, _sample("appwrapper-deployment.yaml", namespace), DEPLOYMENTS)


async def test_kueue_s_leaderworkerset_sample(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    obj = _sample("appwrapper-leaderworkerset.yaml", namespace)
    # Kueue's sample declares 3 workers, but its 2 groups of size 3 make 4; kqueue refuses that
    # count (tests/simulate/test_appwrapper_samples.py), so the sample here declares 4.
    lws = obj["spec"]["components"][0]["template"]["spec"]
    workers = obj["spec"]["components"][0]["podSets"][1]
    assert workers["path"].endswith(".workerTemplate")
    assert workers["replicas"] == lws["replicas"] * (lws["leaderWorkerTemplate"]["size"] - 1)
    await _life(api, namespace, obj, LWS)
