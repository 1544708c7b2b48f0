"""A Job that started before kqueue's webhooks were installed, on the real control plane.

Its template carries no scheduling gate, so its pods run without an admission. kqueue suspends
it (the Job controller deletes the pods without counting a failure), gates its template, and
once the Workload is admitted resumes it: the new pods are gated and released with the flavor's
node labels, like any other Job's.
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.resources import CLUSTER_QUEUES
from kqueue.controller.webhooks.config import MUTATING_NAME, VALIDATING_NAME
from kqueue.localcluster.nodes import INSTANCE_TYPE_LABEL
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    eventually,
    flavor,
    is_true,
    job,
    local_queue,
    unique,
)
from tests.controller_e2e.support_extra import running_pods

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


def live(pods: list[Obj]) -> list[Obj]:
    return [
        p for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and p["status"].get("phase") not in ("Succeeded", "Failed")
    ]


def gates(obj: Obj) -> list[Obj]:
    return list((obj.get("spec") or {}).get("schedulingGates") or [])


async def on_demand_queue(
    api: Api, namespace: str, *, stop_policy: str | None = None, lq: str = "lq"
) -> str:
    """LocalQueue ``lq`` in ``namespace`` onto a new ClusterQueue of 4 on-demand cpus."""
    od, cq = unique("on-demand"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, "4")], stop_policy=stop_policy))
    await api.apply(local_queue(lq, namespace, cq))
    return cq


async def test_job_created_before_the_webhooks_is_suspended_until_admitted(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    # Held, so the Job is seen running without an admission.
    cq = await on_demand_queue(api, namespace, stop_policy="Hold")

    # kqueue not installed yet: no controller, no webhook configurations.
    kqueue.stop()
    for kind, name in (
        ("mutatingwebhookconfiguration", MUTATING_NAME),
        ("validatingwebhookconfiguration", VALIDATING_NAME),
    ):
        kqueue.cluster.kubectl("delete", kind, name, "--ignore-not-found")
    try:
        # The pods would complete after a minute: long after kqueue stopped them.
        created = await api.apply(job("early", namespace, "lq", count=2, complete_after="60s"))
        assert gates(created["spec"]["template"]) == []

        async def running_ungated() -> list[Obj] | None:
            pods = live(await api.pods_of(namespace, "early"))
            ok = len(pods) == 2 and all(
                p["status"].get("phase") == "Running" and not gates(p) for p in pods
            )
            return pods if ok else None

        await eventually(running_ungated, what="2 ungated pods running without kqueue")
    finally:
        kqueue.setup()
        kqueue.start()

    async def suspended() -> Obj | None:
        j = await api.job(namespace, "early")
        return j if j["spec"].get("suspend") else None

    await eventually(suspended, what="Job early suspended by kqueue")

    async def told_why() -> list[Obj] | None:
        return [
            e for e in await api.events_for(namespace, "early")
            if e.get("reason") == "Stopped"
            and "started before kqueue admitted it" in e.get("message", "")
        ] or None

    await eventually(told_why, what="a Stopped event on Job early saying why")

    async def stopped_and_gated() -> Obj | None:
        j = await api.job(namespace, "early")
        template = j["spec"]["template"]
        ok = (
            not live(await api.pods_of(namespace, "early"))
            and {"name": c.ADMISSION_GATE} in gates(template)
            and template["metadata"]["labels"].get(c.MANAGED_LABEL) == "true"
        )
        return j if ok else None

    stopped = await eventually(stopped_and_gated, what="pods gone and the template gated")
    # Suspension is not a failure: with backoffLimit 0 one counted failure would fail the Job.
    assert not stopped["status"].get("failed")
    wl = await api.workload_of(namespace, "early")
    assert wl is not None and "admission" not in wl.get("status", {})

    # Admission resumes it; its new pods are born gated and released with the flavor's labels.
    await api.kube.patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": "None"}})
    await api.wait_workload(namespace, "early", lambda w: is_true(w, c.ADMITTED), what="Admitted")

    async def running_on_flavor() -> list[Obj] | None:
        pods = live(await api.pods_of(namespace, "early"))
        ok = len(pods) == 2 and all(
            p["status"].get("phase") == "Running"
            and not gates(p)
            and p["spec"].get("nodeSelector", {}).get(INSTANCE_TYPE_LABEL) == "on-demand"
            for p in pods
        )
        return pods if ok else None

    await eventually(running_on_flavor, what="2 pods released onto the on-demand flavor")
    resumed = await api.job(namespace, "early")
    assert resumed["spec"].get("suspend") is False
    assert not resumed["status"].get("failed")
    assert not is_true(resumed, "Failed")


async def test_job_admitted_before_a_restart_keeps_running(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    await on_demand_queue(api, namespace)
    await api.apply(job("steady", namespace, "lq", count=2, complete_after="60s"))
    pods = await eventually(
        lambda: running_pods(api, namespace, "steady", 2), what="2 running pods"
    )
    before = {p["metadata"]["uid"] for p in pods}
    kqueue.restart()
    # The restarted kqueue has reconciled the Job (it re-lists everything on start); the
    # admitted Job keeps its pods and is not suspended.
    await api.apply(job("probe", namespace, "lq", count=1))
    await api.wait_workload(namespace, "probe", lambda w: is_true(w, c.ADMITTED), what="Admitted")
    steady = await api.job(namespace, "steady")
    assert not steady["spec"].get("suspend")
    assert {p["metadata"]["uid"] for p in live(await api.pods_of(namespace, "steady"))} == before
