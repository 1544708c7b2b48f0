"""A SparkApplication under kqueue with the real Spark operator (v2.5.2) and a real spark-submit
(Spark 4.2.0 assembled from Maven Central, kqueue/localcluster/spark_dist.py).

What runs for real: Kueue's sample held while queued (the operator submits nothing while it is
suspended), admitted and resumed; the operator's spark-submit creates the driver pod with the
flavor's node selector, kqueue releases it and kube-scheduler binds it on a kwok node. kwok runs
no container, so no Spark driver asks for executors: the test plays the driver's part, creating
the executor pods as Spark's driver does (from the executor's pod template, with Spark's labels,
owned by the driver pod), which kqueue releases into their gang and kube-scheduler binds; kwok
completes every pod, the operator reports COMPLETED, the Workload finishes and the quota is
freed. Without the driver's ServiceAccount the submission fails, which finishes the Workload as
Failed with the operator's message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqueue.api.integrations import sparkapplication as spark
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import PODS, Resource
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION, INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import Api, condition, eventually, is_true, stays
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue, quota_freed
from tests.controller_e2e.test_appwrapper import _setup_quota
from tests.controller_e2e.test_jobset import _setup, _wait_workload
from tests.controller_e2e.test_sparkapplication import SPARKAPPLICATIONS, sample

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts")
# Labels Spark's driver puts on the executor pods it creates (BasicExecutorFeatureStep), besides
# the operator's (spark.kubernetes.executor.label.*), copied from the driver pod.
SPARK_APP_ID_LABEL = "spark-app-selector"
SPARK_EXEC_ID_LABEL = "spark-exec-id"
OPERATOR_LABEL_PREFIX = "sparkoperator.k8s.io/"
# spark-submit is a JVM: on a loaded 2-core machine one submission took 75 to 105 s.
SUBMIT_S = 300


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, spark_operator: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-spark-operator"))
    frameworks = ["batch/job", "pod", spark.INTEGRATION.framework]
    yield from configured_kqueue(cluster, work_dir, {"integrations": {"frameworks": frameworks}})


def executor_pod(app: Obj, driver: Obj, index: int, complete_after: str) -> Obj:
    """Executor ``index`` as Spark's driver creates it: the application's executor template (the
    operator hands it to spark-submit as spark.kubernetes.executor.podTemplateFile, with the
    role's resources, node selector and labels), named ``<driver's prefix>-exec-<n>``, labelled
    as Spark labels executors, owned by the driver pod."""
    template = spark.pod_template(app, spark.EXECUTOR)
    meta = template["metadata"]
    driver_labels = driver["metadata"]["labels"]
    meta["labels"] = {
        **(meta.get("labels") or {}),
        **{k: v for k, v in driver_labels.items() if k.startswith(OPERATOR_LABEL_PREFIX)},
        SPARK_APP_ID_LABEL: driver_labels[SPARK_APP_ID_LABEL],
        spark.ROLE_LABEL: spark.EXECUTOR,
        SPARK_EXEC_ID_LABEL: str(index),
    }
    meta["annotations"] = {**(meta.get("annotations") or {}), COMPLETE_AFTER_ANNOTATION: complete_after}
    meta["name"] = f"{driver['metadata']['name'].removesuffix('-driver')}-exec-{index}"
    meta["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": driver["metadata"]["name"],
            "uid": driver["metadata"]["uid"],
            "controller": True,
        }
    ]
    pod = template["spec"]
    pod["restartPolicy"] = "Never"
    pod["containers"][0]["image"] = app["spec"]["image"]
    return {"apiVersion": "v1", "kind": "Pod", **template}


async def _role_pods(api: Api, namespace: str, name: str, role: str) -> list[Obj]:
    return [
        p
        for p in await api.kube.list(
            PODS, namespace=namespace, label_selector=f"{spark.APP_NAME_LABEL}={name},{spark.ROLE_LABEL}={role}"
        )
        if not p["metadata"].get("deletionTimestamp")
    ]


async def _finished(api: Api, namespace: str, *, within: float) -> Obj:
    async def probe() -> Obj | None:
        wl = await api.workload_of(namespace, "spark-pi", kind=spark.KIND)
        return wl if wl is not None and is_true(wl, c.FINISHED) else None

    return await eventually(probe, within=within, what="the SparkApplication's Workload finished")


async def test_kueue_s_sample_full_life_with_spark_submit(api: Api, kqueue: ConfiguredKqueue, namespace: str) -> None:
    cq = await _setup(api, namespace, "2")
    await api.kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": "spark"}}, namespace=namespace)
    obj = sample(namespace)
    # The driver runs (on kwok) until its executors have run theirs.
    obj["spec"]["driver"]["annotations"] = {COMPLETE_AFTER_ANNOTATION: "40s"}
    created = await api.kube.create(SPARKAPPLICATIONS, obj, namespace=namespace)
    assert created["spec"]["suspend"] is True

    # 2 CPUs for a driver and 2 executors of 1 CPU each: held, and nothing submitted.
    wl = await _wait_workload(api, namespace, spark.KIND, "spark-pi", lambda w: True, "created")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("driver", 1), ("executor", 2)]

    async def held() -> bool:
        wl = await api.workload_of(namespace, "spark-pi", kind=spark.KIND)
        pods = await api.kube.list(PODS, namespace=namespace)
        return wl is not None and not is_true(wl, c.QUOTA_RESERVED) and not pods

    await stays(held, for_s=3, what="the SparkApplication held, with no driver pod, while the quota is short")

    await _setup_quota(api, cq, "4")
    await _wait_workload(api, namespace, spark.KIND, "spark-pi", lambda w: is_true(w, c.ADMITTED), "admitted")

    async def driver_bound() -> Obj | None:
        pods = await _role_pods(api, namespace, "spark-pi", spark.DRIVER)
        return pods[0] if len(pods) == 1 and pods[0]["spec"].get("nodeName") else None

    # spark-submit made the driver pod (behind the gate, from the template the operator wrote);
    # kqueue released it alone: Spark's executors exist only once it runs.
    driver = await eventually(driver_bound, within=SUBMIT_S, what="the driver pod spark-submit created bound to a kwok node")
    assert driver["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
    assert not driver["spec"].get("schedulingGates")
    assert driver["metadata"]["annotations"][c.GANG_SCHEDULING_ANNOTATION] == "false"

    # The test plays the driver: it creates the executors as Spark's driver would.
    app = await api.kube.get(SPARKAPPLICATIONS, "spark-pi", namespace)
    for index in (1, 2):
        made = await api.kube.create(PODS, executor_pod(app, driver, index, "10s"), namespace=namespace)
        assert {"name": c.ADMISSION_GATE} in made["spec"]["schedulingGates"]

    async def executors_bound() -> list[Obj] | None:
        pods = await _role_pods(api, namespace, "spark-pi", spark.EXECUTOR)
        return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else None

    executors = await eventually(executors_bound, within=120, what="the 2 executor pods bound to kwok nodes")
    for pod in executors:
        assert pod["spec"]["nodeSelector"][INSTANCE_TYPE_LABEL] == "on-demand"
        assert not pod["spec"].get("schedulingGates")

    finished = await _finished(api, namespace, within=120)
    assert condition(finished, c.FINISHED)["reason"] == c.FINISHED_SUCCEEDED  # type: ignore[index]
    app = await api.kube.get(SPARKAPPLICATIONS, "spark-pi", namespace)
    assert app["status"]["applicationState"]["state"] == "COMPLETED"
    await quota_freed(api, cq)


async def test_a_failed_submission_is_reported_and_frees_the_quota(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    # No ServiceAccount `spark`: the API server refuses spark-submit's driver pod.
    cq = await _setup(api, namespace, "4")
    await api.kube.create(SPARKAPPLICATIONS, sample(namespace), namespace=namespace)
    await _wait_workload(api, namespace, spark.KIND, "spark-pi", lambda w: is_true(w, c.ADMITTED), "admitted")
    wl = await _finished(api, namespace, within=SUBMIT_S)
    finished = condition(wl, c.FINISHED)
    assert finished is not None and finished["reason"] == c.FINISHED_FAILED
    obj = await api.kube.get(SPARKAPPLICATIONS, "spark-pi", namespace)
    # SUBMISSION_FAILED, then FAILED once the operator gives up retrying: both finish it.
    assert obj["status"]["applicationState"]["state"] in ("SUBMISSION_FAILED", "FAILED")
    assert "serviceaccount" in finished["message"].lower()
    await quota_freed(api, cq)
