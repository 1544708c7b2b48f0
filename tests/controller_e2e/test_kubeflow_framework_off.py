"""A queue label on a training-operator v1 job while its integration is off, on the real control
plane with the real training-operator: kqueue runs with the default frameworks (batch/job and
pod), so a PyTorchJob labelled kqueue.io/queue-name is reported at creation (an admission
warning) and afterwards (a Warning event), naming the object, the label and
integrations.frameworks; it is not refused and kqueue leaves it alone (not suspended, no
Workload), while a Job already admitted in the queue keeps its admission."""

from __future__ import annotations

import pytest
import yaml

from kqueue.api.integrations import kubeflow as kf
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import WORKLOADS, Resource
from kqueue.controller.webhooks import framework_off
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    stays,
    unique,
)
from tests.controller_e2e.test_kubeflow import sample

pytestmark = pytest.mark.cluster

PYTORCHJOBS = Resource(kf.GROUP, "v1", kf.PYTORCHJOB.plural)


async def test_a_queue_label_on_a_pytorchjob_with_its_integration_off_is_reported(
    api: Api, kqueue: KqueueProcess, training_operator: str, cluster: LocalCluster, namespace: str
) -> None:
    assert kf.PYTORCHJOB.framework not in kqueue.config_yaml()
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "4")]))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("kept", namespace, "q", cpu="1"))
    await api.wait_workload(namespace, "kept", lambda w: is_true(w, c.ADMITTED), what="admitted")

    obj = sample(kf.PYTORCHJOB, namespace, "q")
    name = obj["metadata"]["name"]
    res = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(obj))
    warning = res.stderr
    assert "Warning:" in warning, (res.stdout, res.stderr)
    for part in (f"PyTorchJob {namespace}/{name}", f"{c.QUEUE_NAME_LABEL}=q", "integrations.frameworks",
                 f'"{kf.PYTORCHJOB.framework}"'):
        assert part in warning, (part, warning)

    async def event() -> dict[str, object] | None:
        for e in await api.events_for(namespace, name):
            if e.get("reason") == framework_off.REASON:
                return e
        return None

    found = await eventually(event, within=30, what=f"the {framework_off.REASON} event on PyTorchJob {name}")
    assert found["type"] == "Warning"
    assert found["involvedObject"]["kind"] == "PyTorchJob"  # type: ignore[index]

    created = await api.kube.get(PYTORCHJOBS, name, namespace)
    assert not (created["spec"].get("runPolicy") or {}).get("suspend")

    async def alone() -> bool:
        owners = {
            ref["kind"]
            for w in await api.kube.list(WORKLOADS, namespace=namespace)
            for ref in w["metadata"].get("ownerReferences") or []
        }
        kept = await api.workload_of(namespace, "kept")
        return owners == {"Job"} and kept is not None and is_true(kept, c.ADMITTED)

    await stays(alone, for_s=3, what="no Workload for the PyTorchJob, the admitted Job kept")
    await api.kube.delete(PYTORCHJOBS, name, namespace=namespace)
