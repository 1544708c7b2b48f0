"""``Job.spec.scheduling`` with the ``WorkloadWithJob`` gate: the Job controller makes the Job's
own scheduling Workload and PodGroup, and kqueue cooperates with it.

kqueue makes no second PodGroup: the pods keep the Job controller's group, whose ``minCount``
the Job controller keeps equal to ``spec.parallelism`` (gang policy without a minCount), and
kqueue sets parallelism to the admitted count. An explicit ``minCount`` is refused, naming the
field (a fixed size could exceed a partial admission and never be placed).
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.job.webhook import SCHEDULING_MIN_COUNT_FIELD
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import JOBS
from tests.controller_e2e.harness import (
    Api,
    KqueueProcess,
    cluster_queue,
    eventually,
    flavor,
    job,
    local_queue,
    unique,
)
from tests.controller_e2e.support_extra import running_pods
from tests.fixtures.cluster import PODGROUPS, RESIZES_IN_PLACE

pytestmark = [
    pytest.mark.cluster,
    # Found by `make test-k136`: v1.36.4's Job has no spec.scheduling (k8s.io/api v0.36.4
    # batch/v1; v0.37.2 adds it behind WorkloadWithJob), so the API server prunes it and the
    # Job controller makes no group of its own. The same versions serve v1beta1 PodGroups.
    pytest.mark.skipif(
        not RESIZES_IN_PLACE,
        reason="Job.spec.scheduling is a 1.37 field (k8s.io/api v0.37.2 batch/v1): v1.36.4's "
        "Job has none",
    ),
]

Obj = dict[str, Any]


async def _queues(api: Api, namespace: str, cpu: str) -> None:
    od, cq = unique("od"), unique("cq")
    await api.apply(flavor(od, "on-demand"))
    await api.apply(cluster_queue(cq, [(od, cpu)]))
    await api.apply(local_queue("lq", namespace, cq))


def _gang_job(name: str, namespace: str, count: int, **policy: Any) -> Obj:
    obj = job(name, namespace, "lq", count=count)
    del obj["spec"]["completions"]  # a work queue: one wave
    obj["spec"]["scheduling"] = {"schedulingPolicy": {"gang": dict(policy)}}
    return obj


@pytest.mark.parametrize(
    ("count", "min_parallelism", "quota", "admitted"),
    [
        pytest.param(3, None, "3", 3, id="whole"),
        pytest.param(4, "2", "3", 3, id="partial-admission"),
    ],
)
async def test_job_controllers_pod_group_follows_the_admission(
    api: Api,
    kqueue: KqueueProcess,
    namespace: str,
    count: int,
    min_parallelism: str | None,
    quota: str,
    admitted: int,
) -> None:
    await _queues(api, namespace, quota)
    obj = _gang_job("own", namespace, count)
    if min_parallelism is not None:
        obj["metadata"].setdefault("annotations", {})[c.JOB_MIN_PARALLELISM_ANNOTATION] = (
            min_parallelism
        )
    await api.apply(obj)
    pods = await eventually(
        lambda: running_pods(api, namespace, "own", admitted), what=f"{admitted} pods Running"
    )
    [group] = {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods}
    # The Job controller's group, the only one: kqueue made none of its own.
    [pg] = await api.kube.list(PODGROUPS, namespace=namespace)
    assert pg["metadata"]["name"] == group
    owner = [r for r in pg["metadata"]["ownerReferences"] if r.get("controller")]
    assert [(r["kind"], r["name"]) for r in owner] == [("Job", "own")]

    async def sized() -> Obj | None:
        got = await api.kube.get(PODGROUPS, group, namespace)
        return got if got["spec"]["schedulingPolicy"]["gang"]["minCount"] == admitted else None

    await eventually(sized, what=f"PodGroup {group} minCount {admitted} (the admitted count)")


async def test_explicit_min_count_is_refused_naming_the_field(
    api: Api, kqueue: KqueueProcess, namespace: str
) -> None:
    await _queues(api, namespace, "3")
    with pytest.raises(KubeError) as err:
        await api.kube.create(JOBS, _gang_job("fixed", namespace, 3, minCount=3), namespace=namespace)
    assert err.value.status in (400, 422)
    assert SCHEDULING_MIN_COUNT_FIELD in err.value.message
