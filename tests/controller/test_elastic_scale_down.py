"""An elastic slice's scale-down frees quota in the engine only once the API has it.

Freed in the engine first, a scale-down whose status write fails would leave the engine
counting the smaller admission while the API (and the running pods) still hold the larger one:
the next cycles would hand that quota out twice.
"""

from __future__ import annotations

from typing import Any

import pytest

from kqueue.api.v1alpha1 import Workload
from kqueue.controller.integrations.slices import ElasticSlices
from kqueue.controller.kube import KubeError
from kqueue.controller.resources import WORKLOADS
from kqueue.controller.scheduler import Scheduler
from kqueue.engine.engine import Engine
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_scheduler import NS, Api, elastic_slices, key, make, workload

Obj = dict[str, Any]
JOB: Obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "flex", "namespace": NS}}


async def _four_pods_admitted(
    cluster: FakeCluster,
) -> tuple[Scheduler, Api, ElasticSlices, Engine]:
    scheduler, api, events, engine = make(cluster, cpu="4")
    slices = elastic_slices(api, events)
    flex = workload("flex", "1")
    flex["spec"]["podSets"][0]["count"] = 4
    api.create(flex)
    await scheduler.run_once()
    await scheduler.drain()
    api.sync()
    assert api.admitted() == {key("flex")}
    return scheduler, api, slices, engine


def _engine_count(engine: Engine) -> int:
    held = engine.admitted_workload(key("flex"))
    assert held is not None
    return held.admission.pod_sets[0].count


def _api_count(api: Api) -> int:
    adm = Workload.model_validate(api.objects[key("flex")]).status.admission
    assert adm is not None and adm.pod_set_assignments[0].count is not None
    return adm.pod_set_assignments[0].count


@pytest.mark.parametrize(
    ("failure", "raised"),
    [
        # Raised to the job reconciler, which retries.
        (500, True),
        # On every attempt: given up until the Job's next reconcile.
        (409, False),
    ],
    ids=["error", "conflicts"],
)
async def test_a_scale_down_whose_write_fails_keeps_the_quota(
    cluster: FakeCluster, failure: int, raised: bool
) -> None:
    scheduler, api, slices, engine = await _four_pods_admitted(cluster)
    api.server.fail("PUT", WORKLOADS, "flex", code=failure)
    scale_down = slices._scale_down(JOB, api.store.get(key("flex")), 2)  # type: ignore[arg-type]
    if raised:
        with pytest.raises(KubeError):
            await scale_down
    else:
        await scale_down
    api.server.clear_faults()
    assert _api_count(api) == 4
    assert _engine_count(engine) == 4
    assert api.patches == []  # the spec is not shrunk below an admission still in the API
    # The four pods still run on all of the quota: nothing else fits.
    api.create(workload("x", "2", created_s=1))
    await scheduler.run_once()
    await scheduler.drain()
    assert not engine.holds_quota(key("x"))
    assert api.admitted() == {key("flex")}


async def test_a_scale_down_frees_the_quota_once_written(cluster: FakeCluster) -> None:
    scheduler, api, slices, engine = await _four_pods_admitted(cluster)
    await slices._scale_down(JOB, api.store.get(key("flex")), 2)  # type: ignore[arg-type]
    assert _api_count(api) == 2 and _engine_count(engine) == 2
    assert [name for name, _ in api.patches] == ["flex"]
    api.create(workload("x", "2", created_s=1))
    await scheduler.run_once()
    await scheduler.drain()
    assert api.admitted() == {key("flex"), key("x")}


async def test_a_scale_down_whose_spec_patch_failed_is_finished_on_the_next_reconcile(
    cluster: FakeCluster,
) -> None:
    # The status write landed (2 pods admitted) but the spec patch after it did not (the spec
    # still asks for 4): the next reconcile of the Job, still at parallelism 2, shrinks the spec.
    _, api, slices, _ = await _four_pods_admitted(cluster)
    flex = api.objects[key("flex")]
    flex["status"]["admission"]["podSetAssignments"][0]["count"] = 2
    api.server.add(WORKLOADS, flex)
    api.sync()
    wl = api.store.get(key("flex"))
    assert wl is not None and wl.spec.pod_sets[0].count == 4
    assert wl.status.admission is not None
    assert wl.status.admission.pod_set_assignments[0].count == 2
    job = {
        **JOB,
        "metadata": {**JOB["metadata"], "annotations": {"kqueue.io/elastic-job": "true"}},
        "spec": {"parallelism": 2},
    }
    assert await slices.select(job, [wl]) == [wl]
    assert api.patches == [
        ("flex", [{"op": "replace", "path": "/spec/podSets/0/count", "value": 2}])
    ]
    # Nothing to do once the spec agrees (the informer has seen the patch).
    assert api.objects[key("flex")]["spec"]["podSets"][0]["count"] == 2
    api.sync()
    wl = api.store.get(key("flex"))
    assert wl is not None
    await slices.select(job, [wl])
    assert len(api.patches) == 1  # the one above
