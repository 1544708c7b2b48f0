"""Pending workloads of a queue in admission order, with positions, reason and message."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kqueue.cli.main import cli
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey
from kqueue.visibility import pending

from .scenario import cluster_queue, engine_of, flavor, local_queue, workload


def _base(*workloads: dict, cpu: str = "1", **cq: str) -> list[dict]:
    return [
        flavor(),
        cluster_queue("cq", cpu, **cq),
        local_queue("a", "cq"),
        local_queue("b", "cq"),
        *workloads,
    ]


@dataclass
class Case:
    name: str
    workloads: list[dict]
    cq: dict[str, str] = field(default_factory=dict)
    # (name, position in ClusterQueue, position in LocalQueue), in order.
    want: list[tuple[str, int, int]] = field(default_factory=list)
    want_reason: str = ""


CASES = [
    Case(
        "higher priority first, then earlier creation; the head that fits is admitted",
        [
            workload("first", "b", priority=20, created=0),
            workload("w1", "a", created=1),
            workload("w2", "b", priority=10, created=2),
            workload("w3", "a", created=3),
        ],
        want=[("w2", 0, 0), ("w1", 1, 0), ("w3", 2, 1)],
        want_reason="Pending",
    ),
    Case(
        "a stopped ClusterQueue admits nothing: every workload is queued with reason Suspended",
        [workload("x", "a", created=0), workload("y", "b", created=1)],
        cq={"stop_policy": "Hold"},
        want=[("x", 0, 0), ("y", 1, 0)],
        want_reason="Suspended",
    ),
    Case(
        "StrictFIFO: a head too big for the quota blocks the smaller ones behind it",
        [workload("big", "a", cpu="2", created=0), workload("small", "a", created=1)],
        cq={"strategy": "StrictFIFO"},
        want=[("big", 0, 0), ("small", 1, 1)],
        want_reason="",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pending_in_cluster_queue(case: Case) -> None:
    engine = engine_of(_base(*case.workloads, **case.cq))
    items = pending.in_cluster_queue(engine, "cq")
    got = [(i.name, i.position_in_cluster_queue, i.position_in_local_queue) for i in items]
    assert got == case.want
    for item in items:
        assert item.reason, f"{item.key} has no pending reason"
        assert item.message
        if case.want_reason == "Suspended":
            assert item.reason == "Suspended"
            assert "ClusterQueue cq is stopped" in item.message


def test_pending_in_local_queue_keeps_cluster_queue_positions() -> None:
    engine = engine_of(_base(*CASES[0].workloads))
    items = pending.in_local_queue(engine, "team", "a")
    assert [(i.name, i.position_in_cluster_queue, i.position_in_local_queue) for i in items] == [
        ("w1", 1, 0),
        ("w3", 2, 1),
    ]
    assert all(i.local_queue == "a" and i.cluster_queue == "cq" for i in items)


def test_offset_and_limit_slice_the_queue() -> None:
    engine = engine_of(_base(*[workload(f"w{i}", "a", created=i) for i in range(6)]))
    everything = pending.in_cluster_queue(engine, "cq")
    assert [i.name for i in everything] == ["w1", "w2", "w3", "w4", "w5"]  # w0 admitted
    page = pending.in_cluster_queue(engine, "cq", offset=1, limit=2)
    assert page == everything[1:3]
    assert pending.in_cluster_queue(engine, "cq", offset=10) == []
    with pytest.raises(ValueError, match="offset must be >= 0"):
        pending.in_cluster_queue(engine, "cq", offset=-1)
    with pytest.raises(ValueError, match="limit must be >= 0"):
        pending.in_cluster_queue(engine, "cq", limit=-1)


@pytest.mark.parametrize(
    ("call", "want"),
    [
        pytest.param(
            lambda e: pending.in_cluster_queue(e, "nope"),
            'ClusterQueue "nope" not found',
            id="unknown ClusterQueue",
        ),
        pytest.param(
            lambda e: pending.in_local_queue(e, "team", "c"),
            'LocalQueue "team/c" not found',
            id="unknown LocalQueue",
        ),
        pytest.param(
            lambda e: pending.in_cluster_queue(e, "cqq"),
            'ClusterQueue "cqq" not found; did you mean "cq"?',
            id="a typo gets the closest name",
        ),
        pytest.param(
            lambda e: pending.in_local_queue(e, "other", "a"),
            'LocalQueue "other/a" not found',
            id="LocalQueue of another namespace",
        ),
    ],
)
def test_unknown_queue_is_named(call: Callable[[Engine], object], want: str) -> None:
    engine = engine_of(_base(workload("w", "a")))
    with pytest.raises(pending.UnknownQueue) as err:
        call(engine)
    assert str(err.value) == want


def test_unknown_local_queue_lists_those_of_its_namespace() -> None:
    engine = engine_of(_base(workload("w", "a")))
    with pytest.raises(pending.UnknownQueue) as err:
        pending.in_local_queue(engine, "team", "c")
    assert err.value.known == ["a", "b"]


def test_summary_has_the_visibility_api_shape() -> None:
    engine = engine_of(
        _base(workload("first", "a", priority=5), workload("w", "b", priority=3, created=1))
    )
    [item] = pending.in_cluster_queue(engine, "cq")
    out = pending.summary([item])
    assert out["apiVersion"] == "visibility.kqueue.io/v1alpha1"
    assert out["kind"] == "PendingWorkloadsSummary"
    assert out["items"] == [
        {
            "metadata": {
                "name": "w",
                "namespace": "team",
                "creationTimestamp": "2026-01-01T00:00:01Z",
            },
            "priority": 3,
            "localQueueName": "b",
            "positionInClusterQueue": 0,
            "positionInLocalQueue": 0,
            "reason": item.reason,
            "message": item.message,
        }
    ]


def test_positions_agree_with_the_order_simulate_admits_in() -> None:
    """Give every workload a run time: simulate then admits the pending ones one by one as
    quota frees, and that order is the order of their positions."""
    run = {"simulate.kqueue.io/run-time": "1m"}
    docs = _base(
        workload("first", "b", priority=20, created=0, annotations=run),
        workload("w1", "a", created=1, annotations=run),
        workload("w2", "b", priority=10, created=2, annotations=run),
        workload("w3", "a", created=3, annotations=run),
        workload("w4", "b", priority=5, created=4, annotations=run),
    )
    items = pending.in_cluster_queue(engine_of(docs), "cq")
    result = CliRunner().invoke(
        cli, ["simulate", "-o", "json", "-"], input=yaml.safe_dump_all(docs), catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    events = json.loads(result.stdout)["events"]
    reserved = [e["workload"] for e in events if e["type"] == "QuotaReserved"]
    assert reserved[0] == "team/first"
    assert reserved[1:] == [i.key for i in items] == ["team/w2", "team/w4", "team/w1", "team/w3"]


@st.composite
def _workloads(draw: st.DrawFn) -> list[dict]:
    n = draw(st.integers(min_value=1, max_value=12))
    return [
        workload(
            f"w{i}",
            draw(st.sampled_from(["a", "b"])),
            cpu=draw(st.sampled_from(["1", "2", "3"])),
            priority=draw(st.integers(min_value=0, max_value=3)),
            created=draw(st.integers(min_value=0, max_value=5)),
        )
        for i in range(n)
    ]


@settings(max_examples=40, deadline=None)
@given(wls=_workloads(), strategy=st.sampled_from(["BestEffortFIFO", "StrictFIFO"]))
def test_positions_are_the_engines_and_follow_queue_order(wls: list[dict], strategy: str) -> None:
    engine = engine_of(_base(*wls, cpu="3", strategy=strategy))
    items = pending.in_cluster_queue(engine, "cq", limit=None)
    # Every queued workload once, positions 0..n-1 in order.
    assert [i.position_in_cluster_queue for i in items] == list(range(len(items)))
    assert len(items) == sum(
        1 for w in wls if engine.pending_workload(WorkloadKey(f"team/{w['metadata']['name']}"))
    )
    for lq in ("a", "b"):
        mine = [i.position_in_local_queue for i in items if i.local_queue == lq]
        assert mine == list(range(len(mine)))
    # Queue order: higher priority first, then earlier creation (no preemptor waits here).
    keys = [(-i.priority, i.created) for i in items]
    assert keys == sorted(keys)
    # The same positions the engine's own explanation gives.
    for i in items:
        details = engine.explain(WorkloadKey(i.key))
        assert details is not None
        assert (details.position_in_cluster_queue, details.position_in_local_queue) == (
            i.position_in_cluster_queue,
            i.position_in_local_queue,
        )
        assert (str(details.reason), details.message) == (i.reason, i.message)


def test_positions_for_a_listing_are_those_of_the_queue() -> None:
    engine = engine_of(_base(*CASES[0].workloads))
    queue = {i.key: i for i in pending.in_cluster_queue(engine, "cq")}
    got = pending.positions(engine, ["team/w3", "team/w1", "team/first", "team/nope"])
    # "first" holds quota and "nope" does not exist: neither is queued.
    assert got == {"team/w1": queue["team/w1"], "team/w3": queue["team/w3"]}
