"""Predicted starts over a cluster's objects (kqueue/visibility/estimates.py) and their place in
the pendingworkloads answer (``estimatedStartTime``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import yaml

from kqueue.api.loader import load_text
from kqueue.api.v1alpha1 import Workload as ApiWorkload
from kqueue.api.v1alpha1 import format_time, parse_object
from kqueue.cli.explain import explain_with_hints, format_text, to_json
from kqueue.engine.types import WorkloadKey
from kqueue.sim.scenario import build_scenario
from kqueue.visibility import estimates, pending

from .scenario import (
    T0,
    cluster_queue,
    engine_of,
    finished,
    flavor,
    local_queue,
    running,
    workload,
)

Obj = dict[str, Any]


def api(doc: Obj) -> ApiWorkload:
    obj = parse_object(doc, validate=False)
    assert isinstance(obj, ApiWorkload)
    return obj


def test_run_span_of_a_finished_workload() -> None:
    assert estimates.run_span(api(finished("f", 100, 700))) == (
        T0 + timedelta(seconds=100), T0 + timedelta(seconds=700)
    )
    assert estimates.run_span(api(running("r", 100))) is None
    assert estimates.run_span(api(workload("p", "a"))) is None


def one_busy_queue(*history: Obj) -> list[Obj]:
    """A ClusterQueue of 1 cpu: "busy" holds it since 1000 s, "next" waits; ``history``: its
    LocalQueue's finished Workloads."""
    return [
        flavor(),
        cluster_queue("cq", "1"),
        local_queue("a", "cq"),
        *history,
        running("busy", 1000),
        workload("next", "a", created=1001),
    ]


def test_the_finished_workloads_predict_when_the_waiting_one_starts() -> None:
    docs = one_busy_queue(*(finished(f"done-{i}", 0, s) for i, s in enumerate((500, 600, 700))))
    engine = engine_of(docs)
    now = T0 + timedelta(seconds=1100)
    starts = estimates.starts_from_documents(engine, docs, now)
    # busy started at 1000; its queue's p50 run time is 600 s.
    assert starts == {WorkloadKey("team/next"): T0 + timedelta(seconds=1600)}
    items = pending.in_cluster_queue(engine, "cq", estimates=starts)
    assert [i.to_dict()["estimatedStartTime"] for i in items] == [
        format_time(T0 + timedelta(seconds=1600))
    ]


def test_no_history_no_estimated_start_time() -> None:
    docs = one_busy_queue()
    engine = engine_of(docs)
    starts = estimates.starts_from_documents(engine, docs, T0 + timedelta(seconds=1100))
    assert starts == {}
    items = pending.in_cluster_queue(engine, "cq", estimates=starts)
    assert [i.name for i in items] == ["next"]
    assert "estimatedStartTime" not in items[0].to_dict()


def _explained(docs: list[Obj]) -> tuple[str, dict[str, Any]]:
    scenario = build_scenario(load_text(yaml.safe_dump_all(docs), "<test>").objects)
    result, hints = explain_with_hints(scenario, "team/next")
    return format_text(result, hints), to_json(result, hints)


def test_explain_says_when_and_after_what() -> None:
    # busy started at 1000 s (00:16:40); the queue's runs took 400, 500 and 600 s: p50 500 s.
    runs = (finished(f"done-{i}", 0, s) for i, s in enumerate((400, 500, 600)))
    text, doc = _explained(one_busy_queue(*runs))
    assert (
        "expected to start around 00:25 UTC (in 8 min), when team/busy finishes "
        "(its queue's p50 run time: 8 min)"
    ) in text.splitlines()
    assert doc["expectedStart"] == {
        "time": "2026-01-01T00:25:00Z",
        "after": "team/busy",
        "basis": "its queue's p50 run time: 8 min",
    }


def test_explain_without_history_says_unknown() -> None:
    text, doc = _explained(one_busy_queue())
    assert any(line.startswith("expected start: unknown") for line in text.splitlines())
    assert doc["expectedStart"] is None
