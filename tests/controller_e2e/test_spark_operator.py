"""A SparkApplication under kqueue with the real Spark operator (v2.5.2) but no Spark: the
operator submits through spark-submit, which the local cluster does not have
(docs/integrations.md). What runs: Kueue's sample held while queued (the operator leaves a
suspended application alone), admitted and resumed; the operator's failed submission finishes
its Workload as Failed with the operator's message, and the quota is freed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kqueue.api.integrations import sparkapplication as spark
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import CLUSTER_QUEUES
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, condition, eventually, is_true
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_jobset import _setup, _wait_workload
from tests.controller_e2e.test_sparkapplication import SPARKAPPLICATIONS, sample

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, spark_operator: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-spark-operator"))
    frameworks = ["batch/job", "pod", spark.INTEGRATION.framework]
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": frameworks}})


async def test_held_then_admitted_and_the_failed_submission_reported(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    cq = await _setup(api, namespace, "4")
    await api.kube.create(SPARKAPPLICATIONS, sample(namespace), namespace=namespace)
    await _wait_workload(api, namespace, spark.KIND, "spark-pi", lambda w: is_true(w, c.ADMITTED), "admitted")
    wl = await _wait_workload(api, namespace, spark.KIND, "spark-pi", lambda w: is_true(w, c.FINISHED), "finished")
    finished = condition(wl, c.FINISHED)
    assert finished is not None and finished["reason"] == c.FINISHED_FAILED
    obj = await api.kube.get(SPARKAPPLICATIONS, "spark-pi", namespace)
    # SUBMISSION_FAILED, then FAILED once the operator gives up retrying: both finish it.
    assert obj["status"]["applicationState"]["state"] in ("SUBMISSION_FAILED", "FAILED")
    assert "spark-submit" in finished["message"]

    async def freed() -> bool:
        st = (await api.kube.get(CLUSTER_QUEUES, cq)).get("status") or {}
        return st.get("admittedWorkloads", 0) == 0

    await eventually(freed, within=60, what=f"ClusterQueue {cq}'s quota freed")
