"""Preemption protection on the real control plane (docs/concepts.md, "Preemption protection"):
a Job is preempted only once its ClusterQueue's minimum admitted time is over, and the preemptor
is admitted then without any other event; a bad duration is refused by the API server, naming
the field."""

from __future__ import annotations

from datetime import datetime

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import CLUSTER_QUEUES
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    condition,
    flavor,
    is_true,
    job,
    local_queue,
    pending_reason,
    priority_class,
    stays,
    unique,
)

pytestmark = pytest.mark.cluster

PROTECTION_S = 20


def _time(wl: dict[str, object], kind: str) -> datetime:
    cond = condition(wl, kind)
    assert cond is not None, kind
    return datetime.fromisoformat(str(cond["lastTransitionTime"]).replace("Z", "+00:00"))


async def test_job_is_preempted_only_after_its_protection(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    od, cq, low, high = unique("od"), unique("cq"), unique("low"), unique("high")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(priority_class(low, 100))
    await api.apply(priority_class(high, 1000))
    await api.apply(cluster_queue(cq, [(od, "2")], preemption={
        "withinClusterQueue": "LowerPriority",
        "protection": {"withinClusterQueue": {"minAdmitDuration": f"{PROTECTION_S}s"}},
    }))
    await api.apply(local_queue("q", namespace, cq))
    await api.apply(job("victim", namespace, "q", count=2, cpu="1",
                        labels={c.PRIORITY_CLASS_LABEL: low}))
    victim = await api.wait_workload(
        namespace, "victim", lambda w: is_true(w, c.ADMITTED), what="victim admitted"
    )
    admitted = _time(victim, c.ADMITTED)

    await api.apply(job("urgent", namespace, "q", cpu="2", complete_after="2s",
                        labels={c.PRIORITY_CLASS_LABEL: high}))
    urgent = await api.wait_workload(
        namespace, "urgent", lambda w: pending_reason(w) is not None, what="urgent pending"
    )
    wl_name = victim["metadata"]["name"]
    message = str((condition(urgent, c.QUOTA_RESERVED) or {}).get("message"))
    assert f"{namespace}/{wl_name} protected until" in message, message
    assert f"withinClusterQueue.minAdmitDuration {PROTECTION_S}s of ClusterQueue {cq}" in message

    async def untouched() -> bool:
        wl = await api.workload_of(namespace, "victim")
        return wl is not None and is_true(wl, c.ADMITTED) and not is_true(wl, c.EVICTED)

    # Well inside the protection: the victim keeps running.
    await stays(untouched, for_s=PROTECTION_S / 2, what="the protected Job keeps running")

    victim = await api.wait_workload(
        namespace, "victim", lambda w: is_true(w, c.PREEMPTED), what="Preempted=True",
        within=PROTECTION_S + 30,
    )
    preempted = _time(victim, c.PREEMPTED)
    assert (preempted - admitted).total_seconds() >= PROTECTION_S
    assert (condition(victim, c.PREEMPTED) or {}).get("reason") == c.IN_CLUSTER_QUEUE
    await api.wait_workload(
        namespace, "urgent", lambda w: is_true(w, c.ADMITTED), what="urgent admitted", within=60
    )
    assert kqueue.metric(
        "kqueue_preemptions_deferred_by_protection_total", cluster_queue=cq
    ) >= 1


@pytest.mark.parametrize(
    ("path", "value", "want_words"),
    [
        pytest.param("reclaimWithinCohort", "-5m", "is negative", id="negative"),
        pytest.param("fairSharing", "10 minutes", "is not a duration", id="not a Go duration"),
    ],
)
async def test_a_bad_duration_is_refused_naming_the_field(
    api: Api, path: str, value: str, want_words: str
) -> None:
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    bad = cluster_queue(cq, [(od, "2")], preemption={
        "protection": {path: {"minAdmitDuration": value}},
    })
    with pytest.raises(KubeError) as info:
        await api.apply(bad)
    assert info.value.status == 422, info.value.message
    field = f"spec.preemption.protection.{path}.minAdmitDuration"
    assert field in info.value.message and want_words in info.value.message, info.value.message
    with pytest.raises(KubeError) as missing:
        await api.kube.get(CLUSTER_QUEUES, cq)
    assert missing.value.status == 404
