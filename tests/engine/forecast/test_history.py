"""Run-time history: decayed p50/p90 per LocalQueue and pod-set shape (forecast/history.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from kqueue.engine.forecast.history import RunTimeHistory, shape_of, weighted_quantile
from kqueue.engine.types import LocalQueueKey, Workload, local_queue_key

from ..builders import make_workload, t

LQ: LocalQueueKey = local_queue_key("default", "lq")
SMALL = make_workload("small").request("cpu", "1").obj()
BIG = make_workload("big").request("cpu", "8").obj()


def filled(
    runs: Sequence[tuple[int, float]], *, wl: Workload = SMALL, **kw: Any
) -> RunTimeHistory:
    """A history of ``wl``-shaped runs: (seconds, finished at)."""
    h = RunTimeHistory(**kw)
    for i, (seconds, done) in enumerate(runs):
        h.record(LQ, wl, t(done - seconds), t(done), uid=f"u{i}")
    return h


@dataclass(frozen=True)
class QuantileCase:
    name: str
    samples: list[tuple[int, float]]
    q: float
    want: int


@pytest.mark.parametrize(
    "case",
    [
        QuantileCase("median of equal weights", [(10, 1), (20, 1), (30, 1)], 0.5, 20),
        QuantileCase("p90 of equal weights", [(10, 1), (20, 1), (30, 1)], 0.9, 30),
        QuantileCase("a heavy sample pulls the median", [(10, 5), (20, 1), (30, 1)], 0.5, 10),
        QuantileCase("order of input does not matter", [(30, 1), (10, 1), (20, 1)], 0.5, 20),
    ],
    ids=lambda c: c.name,
)
def test_weighted_quantile(case: QuantileCase) -> None:
    assert weighted_quantile(case.samples, case.q) == case.want


def test_p50_and_p90_of_one_queue() -> None:
    h = filled([(s, 1000) for s in (60, 120, 180, 240, 300, 360, 420, 480, 540, 600)])
    rt = h.estimate(LQ, SMALL, t(2000))
    assert rt is not None
    assert (rt.p50, rt.p90, rt.samples) == (300, 540, 10)


def test_recent_runs_outweigh_old_ones() -> None:
    # Three old long runs, two recent short ones: undecayed the median is long, decayed short.
    runs = [(600, 0), (600, 0), (600, 0), (60, 86_400), (60, 86_400)]
    slow = filled(runs, half_life=timedelta(days=365)).estimate(LQ, SMALL, t(86_400))
    fast = filled(runs, half_life=timedelta(hours=1)).estimate(LQ, SMALL, t(86_400))
    assert slow is not None and fast is not None
    assert slow.p50 == 600
    assert fast.p50 == 60


def test_per_shape_when_enough_samples() -> None:
    h = filled([(100, 1000)] * 1)
    for i in range(3):
        h.record(LQ, BIG, t(0), t(900), uid=f"big{i}")
    big = h.estimate(LQ, BIG, t(2000))
    small = h.estimate(LQ, SMALL, t(2000))
    assert big is not None and small is not None
    assert (big.p50, big.per_shape, big.samples) == (900, True, 3)
    # One sample of its own shape is below min_shape_samples: the whole queue's history.
    assert (small.per_shape, small.samples) == (False, 4)
    assert shape_of(SMALL) != shape_of(BIG)


def test_no_history_no_estimate() -> None:
    h = filled([(100, 1000)])
    assert h.estimate(local_queue_key("default", "other"), SMALL, t(2000)) is None


def test_a_finish_seen_twice_counts_once() -> None:
    h = RunTimeHistory()
    assert h.record(LQ, SMALL, t(0), t(10), uid="a")
    assert not h.record(LQ, SMALL, t(0), t(10), uid="a")
    assert not h.record(LQ, SMALL, t(10), t(0), uid="b")
    assert h.samples(LQ) == 1


def test_only_the_most_recent_are_kept() -> None:
    h = filled([(s, 1000 + i) for i, s in enumerate([900] * 5 + [10] * 5)], keep=5)
    rt = h.estimate(LQ, SMALL, t(2000))
    assert rt is not None and (rt.p90, rt.samples) == (10, 5)


@pytest.mark.parametrize(
    "kw, field",
    [({"half_life": timedelta(0)}, "half_life"), ({"keep": 0}, "keep")],
)
def test_bad_settings_are_refused(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RunTimeHistory(**kw)  # type: ignore[arg-type]
