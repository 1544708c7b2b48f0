"""PodGroups on a control plane with ``WorkloadAwarePreemption``: kqueue gives them
``disruptionMode: PodGroup`` and the workload's PriorityClass, and the API server resolves
``priority`` from it."""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import gang
from kqueue.controller.kube import NotFound
from kqueue.controller.resources import PRIORITY_CLASSES, WORKLOAD_PRIORITY_CLASSES
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    eventually,
    flavor,
    job,
    local_queue,
    priority_class,
    unique,
)
from tests.controller_e2e.support_extra import running_pods
from tests.fixtures.cluster import PODGROUPS, RESIZES_IN_PLACE

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


async def _group(api: Api, namespace: str, name: str) -> Obj | None:
    uid = (await api.job(namespace, name))["metadata"]["uid"]
    try:
        return await api.kube.get(PODGROUPS, gang.group_name("Job", name, uid), namespace)
    except NotFound:
        return None


@pytest.mark.parametrize(
    ("source", "want_class", "want_priority"),
    [
        pytest.param("PriorityClass", True, 1000, id="pod-priority-class"),
        pytest.param("WorkloadPriorityClass", False, 0, id="workload-priority-class"),
    ],
)
async def test_pod_group_gets_disruption_mode_and_the_workloads_priority_class(
    api: Api,
    kqueue: KqueueProcess,
    namespace: str,
    source: str,
    want_class: bool,
    want_priority: int,
) -> None:
    od, cq, pc = unique("od"), unique("cq"), unique("high")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "2")]))
    await api.apply(local_queue("lq", namespace, cq))
    obj = job("prio", namespace, "lq", count=2)
    if source == "PriorityClass":
        await api.kube.create(
            PRIORITY_CLASSES,
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": pc},
                "value": 1000,
            },
        )
        api.created.append((PRIORITY_CLASSES, pc, None))
        obj["spec"]["template"]["spec"]["priorityClassName"] = pc
    else:
        await api.apply(priority_class(pc, 1000))
        assert WORKLOAD_PRIORITY_CLASSES.plural == "workloadpriorityclasses"
        obj["metadata"]["labels"][c.PRIORITY_CLASS_LABEL] = pc
    await api.apply(obj)
    await eventually(lambda: running_pods(api, namespace, "prio", 2), what="2 pods Running")
    pg = await _group(api, namespace, "prio")
    assert pg is not None
    spec = pg["spec"]
    assert spec["disruptionMode"] == ({"all": {}} if RESIZES_IN_PLACE else "PodGroup")
    assert spec["schedulingPolicy"]["gang"]["minCount"] == 2
    if want_class:
        assert spec["priorityClassName"] == pc
    else:
        assert not spec.get("priorityClassName")
    # Resolved by the API server's priority admission, never written by kqueue.
    assert spec.get("priority", 0) == want_priority
    assert "workload-aware preemption: on" in kqueue.log_path.read_text()
