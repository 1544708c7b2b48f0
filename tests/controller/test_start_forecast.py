"""The controller's predicted start times (start_forecast.py): history from Workload events,
recomputation off the loop, estimates never in the past, the error observed at admission."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from kqueue.api.config import PredictedStart
from kqueue.api.v1alpha1 import Workload, format_time, parse_object
from kqueue.controller.metrics import Metrics
from kqueue.controller.start_forecast import LARGE_CHANGE, StartForecaster
from kqueue.engine.types import WorkloadKey, local_queue_key
from tests.engine.builders import make_cq, make_engine, make_flavor, make_workload, t

T0 = t(0)  # the engine builders' time base
Obj = dict[str, Any]


def api_workload(name: str, *, admitted: int | None = None, done: int | None = None) -> Workload:
    status: Obj = {"conditions": []}
    if admitted is not None:
        status["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "4"},
                 "count": 1}
            ],
        }
        for kind in ("QuotaReserved", "Admitted"):
            status["conditions"].append({
                "type": kind, "status": "True", "reason": kind, "message": "",
                "lastTransitionTime": format_time(T0 + timedelta(seconds=admitted)),
            })
    if done is not None:
        status["conditions"].append({
            "type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
            "lastTransitionTime": format_time(T0 + timedelta(seconds=done)),
        })
    doc = {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "queueName": "lq",
            "podSets": [{
                "name": "main", "count": 1,
                "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "4"}}}
                ]}},
            }],
        },
        "status": status,
    }
    obj = parse_object(doc, validate=False)
    assert isinstance(obj, Workload)
    return obj


class Clock:
    def __init__(self, at: int) -> None:
        self.at = T0 + timedelta(seconds=at)

    def __call__(self) -> datetime:
        return self.at


def inline(fn: Any) -> asyncio.Future[Any]:
    """The worker as a plain call (the thread is not what these tests are about)."""
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    fut.set_result(fn())
    return fut


def forecaster(clock: Clock) -> StartForecaster:
    # One ClusterQueue of 4 cpu: "running" (4 cpu, admitted at 1000 s) holds it all, "waiting"
    # (4 cpu) waits for it.
    engine = make_engine(
        make_flavor("default").obj(),
        make_cq("cq").quota("default", cpu="4").obj(),
        make_workload("running").request("cpu", "4").reserved_in("cq", "default", at=1000).obj(),
        make_workload("waiting").request("cpu", "4").created(1001).obj(),
    )
    return StartForecaster(lambda: engine, PredictedStart(), now=clock, worker=inline)


async def test_history_from_finished_workloads_gives_the_prediction() -> None:
    clock = Clock(1100)
    f = forecaster(clock)
    await f.recompute()
    assert f.estimates() == {}  # no history yet: unknown
    for i, run in enumerate((300, 600, 900)):
        f.observe(api_workload(f"old-{i}", admitted=0), api_workload(f"old-{i}", admitted=0,
                                                                     done=run))
    # The same finish seen again (a relist) counts once.
    f.observe(None, api_workload("old-0", admitted=0, done=300))
    assert f.history.samples(local_queue_key("default", "lq")) == 3
    await f.recompute()
    # "running" started at 1000 s; its queue's p50 is 600 s.
    want = T0 + timedelta(seconds=1600)
    assert f.estimates() == {WorkloadKey("default/waiting"): want}
    prediction = f.prediction(WorkloadKey("default/waiting"))
    assert prediction is not None and prediction.after == WorkloadKey("default/running")
    # Served later than predicted, it is never in the past.
    clock.at = T0 + timedelta(seconds=2000)
    assert f.estimates() == {WorkloadKey("default/waiting"): clock.at}
    # Admitted 30 s after the prediction: the error, then the prediction is used up.
    assert f.admitted(WorkloadKey("default/waiting"), want + timedelta(seconds=30)) == 30.0
    assert f.admitted(WorkloadKey("default/waiting"), want) is None


async def test_a_release_or_many_changes_bring_the_recomputation_forward() -> None:
    f = forecaster(Clock(1100))
    f._wake = asyncio.Event()
    f.observe(None, api_workload("new"))
    assert not f._wake.is_set()
    # A workload holding quota released it.
    f.observe(api_workload("x", admitted=10), api_workload("x"))
    assert f._wake.is_set()
    f._wake.clear()
    for i in range(LARGE_CHANGE):
        f.observe(None, api_workload(f"n{i}"))
    assert f._wake.is_set()


async def test_a_budget_of_zero_keeps_what_it_made() -> None:
    f = forecaster(Clock(1100))
    f.settings = PredictedStart(budget=timedelta(microseconds=1))
    result = await f.recompute()
    assert result.considered == 1
    assert f.recomputations == 1


def test_the_error_at_admission_is_a_histogram_per_cluster_queue_and_direction() -> None:
    metrics = Metrics()
    for error_s in (30.0, 90.0, -45.0):
        metrics.start_prediction_error("cq", error_s)
    text = metrics.exposition().decode()
    name = "kqueue_start_prediction_error_seconds"
    assert f'{name}_count{{cluster_queue="cq",direction="late"}} 2.0' in text
    assert f'{name}_sum{{cluster_queue="cq",direction="late"}} 120.0' in text
    # Early errors are observed by their size.
    assert f'{name}_sum{{cluster_queue="cq",direction="early"}} 45.0' in text
    # A deleted ClusterQueue's series go with it.
    metrics.forget_cluster_queue("cq")
    assert f'{name}_count{{cluster_queue="cq"' not in metrics.exposition().decode()
