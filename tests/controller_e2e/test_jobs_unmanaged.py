"""manageJobsWithoutQueueName on the real control plane.

With the option on, a Job without the ``kqueue.io/queue-name`` label is held like any other
(its pods are born gated) and gets a Workload. The Workload goes to the namespace's LocalQueue
named ``default``; without one it waits, and the Job gets a Warning event saying what to do.
Namespaces outside ``managedJobsNamespaceSelector`` (kube-system, kqueue's own) are left alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.config import default_managed_namespace_selector
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.webhook_server.certs import ensure_local_certs
from kqueue.controller.webhooks.config import webhook_configurations
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    KQUEUE_NAMESPACE,
    Api,
    eventually,
    is_true,
    job,
    local_queue,
    stays,
    unique,
)
from tests.controller_e2e.support_extra import (
    ConfiguredKqueue,
    configured_kqueue,
    gated,
    running_pods,
)
from tests.controller_e2e.test_jobs_before_webhooks import on_demand_queue

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


def select_every_job(proc: ConfiguredKqueue) -> None:
    """Point kqueue's Job webhooks at every Job (their objectSelector with the option on)."""
    mutating, validating = webhook_configurations(
        namespace_selector=default_managed_namespace_selector(KQUEUE_NAMESPACE),
        base_url=f"https://127.0.0.1:{proc.webhook_port}",
        ca_bundle=ensure_local_certs(proc.work_dir / "certs").ca_pem,
        manage_jobs_without_queue_name=True,
    )
    proc.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([mutating, validating]))


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConfiguredKqueue]:
    work_dir = Path(tmp_path_factory.mktemp("kqueue-unlabelled"))
    for proc in configured_kqueue(cluster, work_dir, {"manageJobsWithoutQueueName": True}):
        select_every_job(proc)
        yield proc


def unlabelled(name: str, namespace: str, count: int = 2) -> Obj:
    out = job(name, namespace, "", count=count, complete_after="60s")
    del out["metadata"]["labels"][c.QUEUE_NAME_LABEL]
    return out


async def test_unlabelled_job_waits_for_the_default_local_queue(
    api: Api, kqueue: ConfiguredKqueue, namespace: str
) -> None:
    cq = await on_demand_queue(api, namespace, lq="main")
    created = await api.apply(unlabelled("plain", namespace))
    # The Job webhook holds it like a labelled one.
    assert {"name": c.ADMISSION_GATE} in created["spec"]["template"]["spec"]["schedulingGates"]

    wl = await api.wait_workload(namespace, "plain", lambda w: True, what="created")
    assert "queueName" not in wl["spec"]

    async def told_what_to_do() -> list[Obj] | None:
        return [
            e for e in await api.events_for(namespace, "plain")
            if e["reason"] == "NoQueueName" and e["type"] == "Warning"
        ] or None

    [event] = await eventually(told_what_to_do, what="a NoQueueName warning on Job plain")
    assert "LocalQueue 'default'" in event["message"] and c.QUEUE_NAME_LABEL in event["message"]

    async def held() -> bool:
        w = await api.workload_of(namespace, "plain")
        j = await api.job(namespace, "plain")
        return (
            w is not None
            and "admission" not in w.get("status", {})
            and j["spec"].get("suspend") is True
            and await api.pods_of(namespace, "plain") == []
        )

    await eventually(held, what="the Job suspended with no pods, no admission")
    await stays(held, for_s=3, what="Job plain held without a queue")

    # A LocalQueue named "default" in the namespace: the waiting Workload moves to it.
    await api.apply(local_queue("default", namespace, cq))
    wl = await api.wait_workload(
        namespace, "plain", lambda w: is_true(w, c.ADMITTED), what="Admitted", within=60
    )
    assert wl["spec"]["queueName"] == "default"
    assert wl["status"]["admission"]["clusterQueue"] == cq
    await eventually(lambda: running_pods(api, namespace, "plain", 2), what="2 pods running")


async def test_unlabelled_job_in_kqueue_namespace_is_left_alone(
    api: Api, kqueue: ConfiguredKqueue
) -> None:
    name = unique("plain")
    await api.apply(unlabelled(name, KQUEUE_NAMESPACE, count=1))
    try:
        pods = await eventually(
            lambda: running_pods(api, KQUEUE_NAMESPACE, name, 1), what="its pod running"
        )
        assert not gated(pods[0])

        async def untouched() -> bool:
            j = await api.job(KQUEUE_NAMESPACE, name)
            return not j["spec"].get("suspend") and await api.workload_of(
                KQUEUE_NAMESPACE, name
            ) is None

        await stays(untouched, for_s=3, what=f"Job {name} neither suspended nor given a Workload")
    finally:
        kqueue.cluster.kubectl("delete", "job", name, "-n", KQUEUE_NAMESPACE, "--wait=false")
