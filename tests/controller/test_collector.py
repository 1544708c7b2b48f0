"""The controller's collector pace: less often than CPython's default, never more often."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kqueue.controller.collector import THRESHOLDS, pace_collector


@pytest.fixture(autouse=True)
def restore_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.mark.parametrize(
    ("already", "want"),
    [
        pytest.param((700, 10, 10), THRESHOLDS, id="cpython-default"),
        pytest.param((50_000, 5, 100), (50_000, 10, 100), id="each-threshold-the-larger"),
        pytest.param((0, 10, 10), (0, 10, 10), id="automatic-collection-off-stays-off"),
    ],
)
def test_the_collector_runs_at_the_controller_s_pace(
    already: tuple[int, int, int], want: tuple[int, int, int]
) -> None:
    gc.set_threshold(*already)
    pace_collector()
    assert gc.get_threshold() == want


def test_cycles_are_still_collected() -> None:
    class Node:
        other: object

    gc.set_threshold(700, 10, 10)
    pace_collector()
    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    # Net allocations (kept alive) past the young threshold: a young collection becomes due.
    kept: list[list[int]] = [[] for _ in range(THRESHOLDS[0] * 2)]
    assert len(kept) == THRESHOLDS[0] * 2
    assert ref() is None, "a dropped reference cycle is collected without an explicit collect"
