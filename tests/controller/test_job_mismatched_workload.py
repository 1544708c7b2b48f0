"""A Job that is not elastic and changes size under its Workload gets a new Workload, as in
Kueue (``ensureOneWorkload``: the Workload no longer matches, it is deleted and the Job stopped
until the new one is admitted). With the Configuration's ElasticJobsViaWorkloadSlices false
this is also what happens to a Job annotated elastic: the annotation has no effect, and its
Workload is named as any Job's (no generation)."""

from __future__ import annotations

import pytest

from kqueue.api.config import Configuration
from kqueue.api.integrations import workload_name_for_job
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.integrations.job import FRAMEWORK, JobIntegration
from kqueue.controller.integrations.job.elastic import DELETED_WORKLOAD, MismatchedWorkload
from kqueue.controller.resources import JOBS, WORKLOADS
from tests.controller.fake_apiserver import FakeCluster
from tests.controller.test_job_reconciler import World, job, workload

Obj = dict[str, object]


async def _world(cluster: FakeCluster, *, slices: bool) -> World:
    # As the manager wires the Job integration under the gate.
    integration = FRAMEWORK.job_for(Configuration(feature_gates={"ElasticJobsViaWorkloadSlices": slices}))
    assert isinstance(integration, JobIntegration) and integration.slices is slices
    world = await World.start(cluster)
    world.reconciler.job = integration
    world.reconciler.workload_hooks.append(
        MismatchedWorkload(kube=cluster.kube, events=world.events, slices=slices).select
    )
    return world


def _elastic(name: str, **kw: object) -> dict:
    out = job(name, **kw)  # type: ignore[arg-type]
    out["metadata"]["annotations"] = {c.ELASTIC_JOB_ANNOTATION: "true"}
    out["metadata"]["generation"] = 2
    return out


def _grown(j: dict, count: int) -> dict:
    j["spec"]["parallelism"] = count
    j["spec"]["completions"] = count
    return j


@pytest.mark.parametrize(
    ("elastic", "slices"),
    [(True, False), (False, True), (False, False)],
    ids=["annotated-gate-off", "plain-gate-on", "plain-gate-off"],
)
async def test_an_admitted_job_grown_under_its_workload_gets_a_new_one_and_is_stopped(
    cluster: FakeCluster, elastic: bool, slices: bool
) -> None:
    world = await _world(cluster, slices=slices)
    make = _elastic if elastic else job
    before = make("grow", count=2, started=True)
    wl = workload(before, admitted=2)
    key = await world.add_job(_grown(make("grow", count=2, started=True), 4), wl)

    assert await world.reconciler(key) is None
    # The stale Workload is deleted, named in Kueue's event.
    assert [r.name for r in cluster.server.requests_to("DELETE", WORKLOADS) if r.ok] == [wl.name]
    [deleted] = [e for e in world.events.recorded if e[2] == DELETED_WORKLOAD]
    assert deleted[3] == f"Deleted not matching Workload: team-a/{wl.name}"

    for _ in range(3):  # the new Workload, then the Job stopped (each step on a fresh read)
        await cluster.synced()
        assert await world.reconciler(key) is None
    # Named as any Job's Workload (the annotation had no effect), for the new size.
    [created] = world.created()
    assert created["metadata"]["name"] == workload_name_for_job(job("grow"))
    assert created["spec"]["podSets"][0]["count"] == 4
    # Still running: stopped until the new Workload is admitted.
    stopped = cluster.server.get(JOBS, "grow", "team-a")
    assert stopped is not None and stopped["spec"]["suspend"] is True
    assert len([e for e in world.events.recorded if e[2] == DELETED_WORKLOAD]) == 1


async def test_with_the_gate_on_an_elastic_job_is_left_to_its_slices(cluster: FakeCluster) -> None:
    world = await _world(cluster, slices=True)
    before = _elastic("flex", count=2, started=True)
    wl = workload(before, admitted=2)
    key = await world.add_job(_grown(_elastic("flex", count=2, started=True), 4), wl)

    assert await world.reconciler(key) is None

    assert cluster.server.get(WORKLOADS, wl.name, "team-a") is not None
    assert DELETED_WORKLOAD not in world.events.reasons("flex")


@pytest.mark.parametrize("count", [2, 1], ids=["spec-count", "admitted-count"])
async def test_a_job_at_its_workload_s_spec_or_admitted_count_keeps_it(
    cluster: FakeCluster, count: int
) -> None:
    # Partial admission lowers parallelism to the admitted count while the Job runs.
    world = await _world(cluster, slices=False)
    wl = workload(job("keep", count=2, started=True), admitted=1)
    key = await world.add_job(_grown(job("keep", count=2, started=True), count), wl)

    assert await world.reconciler(key) is None

    assert cluster.server.get(WORKLOADS, wl.name, "team-a") is not None
    assert DELETED_WORKLOAD not in world.events.reasons("keep")


def test_an_annotated_job_s_workload_is_named_by_generation_only_with_the_gate_on() -> None:
    j = _elastic("named")
    plain = workload_name_for_job(job("named"))
    assert workload_name_for_job(j, slices=False) == plain
    assert workload_name_for_job(j, slices=True) != plain
