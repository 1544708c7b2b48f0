"""SparkApplications under kqueue on the real control plane, against the Spark operator's real
CRD (v2.5.2, installed from its Go module) but without the operator: it submits through
spark-submit, which needs Spark's distribution (docs/integrations.md says what was tried). What
runs: Kueue's sample created, held suspended with its driver and executor templates gated, its
Workload pending while the quota is short, admitted when it grows and resumed with the flavor's
node labels in the driver's and executors' node selectors, preempted whole by a higher-priority
Job (suspended again) and re-admitted, then deleted with its quota freed; one with dynamic
allocation is refused naming the field, with what was admitted kept."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.integrations import sparkapplication as spark
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import CLUSTER_QUEUES, Resource
from kqueue.localcluster import operators
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    Api,
    condition,
    eventually,
    is_true,
    job,
    priority_class,
    stays,
    unique,
)
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue, quota_freed
from tests.controller_e2e.test_jobset import _setup, _wait_workload

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
SPARKAPPLICATIONS = Resource(spark.GROUP, "v1beta2", spark.PLURAL)


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConfiguredKqueue]:
    op = operators.get("spark-operator")
    # Without the operator (an opt-in test of the same session may have started it): it would
    # submit the admitted application, fail without Spark, and finish it.
    if cluster.operator_running(op.name):
        cluster.stop_operator(op.name)
    operators.install_crds(cluster, op, operators.module_dir(op))
    work_dir = Path(tmp_path_factory.mktemp("kqueue-spark"))
    frameworks = ["batch/job", "pod", spark.INTEGRATION.framework]
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": frameworks}})


def sample(namespace: str, name: str = "spark-pi", labels: dict[str, str] | None = None) -> Obj:
    [obj] = [d for d in yaml.safe_load_all((SAMPLES / "sparkapplication.yaml").read_text()) if d]
    obj["metadata"].update(name=name, namespace=namespace)
    obj["metadata"]["labels"] = {c.QUEUE_NAME_LABEL: "q", **(labels or {})}
    return obj


async def test_kueue_s_sample_held_admitted_resumed_preempted_and_freed(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    low, high = unique("low"), unique("high")
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    cq = await _setup(api, namespace, "2", preemption={"withinClusterQueue": "LowerPriority"})
    created = await api.kube.create(
        SPARKAPPLICATIONS, sample(namespace, labels={c.PRIORITY_CLASS_LABEL: low}), namespace=namespace
    )
    # Held: suspended as kqueue's (the real CRD keeps spec.suspend), both roles' templates gated.
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] == "true"
    for role in (spark.DRIVER, spark.EXECUTOR):
        assert {"name": c.ADMISSION_GATE} in created["spec"][role]["template"]["spec"]["schedulingGates"]

    # 2 CPUs for a driver and 2 executors of 1 CPU each: pending.
    wl = await _wait_workload(api, namespace, spark.KIND, "spark-pi", lambda w: True, "created")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("driver", 1), ("executor", 2)]

    async def queued() -> bool:
        wl = await api.workload_of(namespace, "spark-pi", kind=spark.KIND)
        obj = await api.kube.get(SPARKAPPLICATIONS, "spark-pi", namespace)
        return wl is not None and not is_true(wl, c.QUOTA_RESERVED) and obj["spec"]["suspend"] is True

    await stays(queued, for_s=3, what="the SparkApplication suspended while the quota is short")

    current = await api.kube.get(CLUSTER_QUEUES, cq)
    groups = copy.deepcopy(current["spec"]["resourceGroups"])
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "4"
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"resourceGroups": groups}})
    await _wait_workload(api, namespace, spark.KIND, "spark-pi", lambda w: is_true(w, c.ADMITTED), "admitted")

    async def resumed() -> Obj | None:
        obj = await api.kube.get(SPARKAPPLICATIONS, "spark-pi", namespace)
        return obj if obj["spec"].get("suspend") is False else None

    obj = await eventually(resumed, within=60, what="the SparkApplication resumed")
    for role in (spark.DRIVER, spark.EXECUTOR):
        assert obj["spec"][role]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
    assert c.SUSPENDED_BY_KQUEUE_ANNOTATION not in (obj["metadata"].get("annotations") or {})

    # Preempted whole by a higher-priority Job: suspended again, its flavor's labels put back.
    await api.apply(job("urgent", namespace, "q", cpu="2", complete_after="5s", labels={c.PRIORITY_CLASS_LABEL: high}))
    victim = await _wait_workload(api, namespace, spark.KIND, "spark-pi", lambda w: is_true(w, c.PREEMPTED), "Preempted")
    assert condition(victim, c.PREEMPTED)["reason"] == c.IN_CLUSTER_QUEUE  # type: ignore[index]

    async def held_again() -> bool:
        obj = await api.kube.get(SPARKAPPLICATIONS, "spark-pi", namespace)
        return obj["spec"].get("suspend") is True and not obj["spec"]["driver"].get("nodeSelector")

    await eventually(held_again, within=60, what="the SparkApplication suspended with its node selector restored")
    await api.wait_workload(namespace, "urgent", lambda w: is_true(w, c.FINISHED), what="finished", within=90)
    await _wait_workload(api, namespace, spark.KIND, "spark-pi", lambda w: is_true(w, c.ADMITTED), "re-admitted")
    await eventually(resumed, within=60, what="the SparkApplication resumed again")

    await api.kube.delete(SPARKAPPLICATIONS, "spark-pi", namespace=namespace)

    await quota_freed(api, cq)


async def test_dynamic_allocation_is_refused_naming_the_field(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    await _setup(api, namespace, "3")
    await api.apply(job("kept", namespace, "q", cpu="1"))
    await api.wait_workload(namespace, "kept", lambda w: is_true(w, c.ADMITTED), what="admitted")
    bad = sample(namespace, "dynamic")
    bad["spec"]["dynamicAllocation"] = {"enabled": True}
    with pytest.raises(KubeError) as info:
        await api.kube.create(SPARKAPPLICATIONS, bad, namespace=namespace)
    assert info.value.status == 422
    assert "spec.dynamicAllocation.enabled" in info.value.message
    kept = await api.workload_of(namespace, "kept")
    assert kept is not None and is_true(kept, c.ADMITTED) and not is_true(kept, c.EVICTED)
