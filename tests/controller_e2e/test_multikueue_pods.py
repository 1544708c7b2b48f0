"""MultiKueue with plain pods on real control planes (docs/multikueue.md): the session's cluster
is the manager and one more local cluster its worker, each with its own kqueue, set up as
tests/controller_e2e/test_multikueue.py sets them up (its fixtures, with worker1 alone).

A single pod and a 2-pod group created on the manager stay gated there; their copies run on the
worker and finish, the manager's pods show the copies' status (Running, then Succeeded), the
manager's Workload finishes and the copies go.
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import ORIGIN_LABEL
from kqueue.controller.kube import Kube
from kqueue.controller.resources import PODS, WORKLOADS
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION
from tests.controller_e2e.harness import Api, condition, eventually, is_true, unique
from tests.controller_e2e.support_extra import gated, pod
from tests.controller_e2e.test_multikueue import (  # noqa: F401 (fixtures, by name)
    QUEUE,
    ManagerProcess,
    Setup,
    Worker,
    _active,
    _get,
    install,
    manager,
    ns,
    setup,
    worker1,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
WORKER = "worker1"


@pytest.fixture(scope="module")
def objects(manager: ManagerProcess, worker1: Worker) -> dict[str, Worker]:  # noqa: F811
    return install(manager, [worker1])


async def _pods(kube: Kube, namespace: str, names: list[str]) -> list[Obj] | None:
    found = [await _get(kube, PODS, n, namespace) for n in names]
    return None if any(p is None for p in found) else found  # type: ignore[return-value]


async def _dispatched(clusters: Setup, namespace: str, names: list[str]) -> None:
    """Pods ``names`` on the manager run on the worker and finish there; the manager's pods
    never leave the gate, show the copies' status, and the copies go at the end."""
    mgr, remote = clusters.manager, clusters.workers[WORKER]

    async def placed() -> Obj | None:
        wl = await Api(mgr).workload_of(namespace, names[0], kind="Pod")
        return wl if wl is not None and (wl.get("status") or {}).get("clusterName") else None

    wl = await eventually(placed, within=90, what="the Workload to be placed on the worker")
    assert wl["status"]["clusterName"] == WORKER
    wl_name = wl["metadata"]["name"]
    copies = await eventually(lambda: _pods(remote, namespace, names), within=30,
                              what="the copies on the worker")
    for p in copies:
        labels = p["metadata"]["labels"]
        assert labels[c.PREBUILT_WORKLOAD_LABEL] == wl_name and ORIGIN_LABEL in labels

    async def running_there() -> list[Obj] | None:
        here = await _pods(mgr, namespace, names)
        ok = here is not None and all(
            (p.get("status") or {}).get("phase") in ("Running", "Succeeded") for p in here
        )
        return here if ok else None

    # The manager's pods follow their copies' status, but stay behind the gate.
    for p in await eventually(running_there, within=60, what="the manager's pods Running"):
        assert gated(p) and not p["spec"].get("nodeName"), p["spec"]

    async def finished() -> Obj | None:
        w = await _get(mgr, WORKLOADS, wl_name, namespace)
        return w if w is not None and is_true(w, c.FINISHED) else None

    done = await eventually(finished, within=90, what="the manager's Workload to finish")
    assert condition(done, c.FINISHED)["reason"] == "Succeeded"  # type: ignore[index]
    assert done["status"]["clusterName"] == WORKER
    here = await _pods(mgr, namespace, names)
    assert here is not None
    for p in here:
        assert p["status"]["phase"] == "Succeeded", p["status"]
        assert gated(p) and not p["spec"].get("nodeName")

    async def copies_gone() -> bool:
        return (await _get(remote, WORKLOADS, wl_name, namespace) is None
                and all([await _get(remote, PODS, n, namespace) is None for n in names]))

    await eventually(copies_gone, within=60, what="the copies on the worker to be deleted")


async def test_a_single_pod_runs_on_the_worker_and_the_manager_follows(
    setup: Setup, ns: str  # noqa: F811
) -> None:
    await _active(setup)
    name = unique("solo")
    body = pod(name, ns, QUEUE, cpu="250m", annotations={COMPLETE_AFTER_ANNOTATION: "8s"})
    await setup.manager.create(PODS, body, namespace=ns)
    await _dispatched(setup, ns, [name])


async def test_a_pod_group_runs_on_the_worker_together(
    setup: Setup, ns: str  # noqa: F811
) -> None:
    await _active(setup)
    group = unique("grp")
    names = [f"{group}-{i}" for i in range(2)]
    for n in names:
        body = pod(n, ns, QUEUE, cpu="250m", group=group, total=2,
                   annotations={COMPLETE_AFTER_ANNOTATION: "8s"})
        await setup.manager.create(PODS, body, namespace=ns)
    await _dispatched(setup, ns, names)
