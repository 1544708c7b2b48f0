"""Partial admission: the largest pod counts, down to ``minCount``, that can be admitted.

Kueue's PodSetReducer: every pod set with ``minCount`` gives up a share of its slack
(``count - minCount``) proportional to a reduction step ``i`` out of the total slack, and a
binary search finds the smallest step whose counts fit. Fitting is monotone in the step (fewer
pods never need more quota), which is what makes the binary search valid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from .types import PodSet

R = TypeVar("R")


def counts_for_step(pod_sets: Sequence[PodSet], step: int, total_slack: int) -> tuple[int, ...]:
    out: list[int] = []
    for ps in pod_sets:
        slack = ps.count - (ps.min_count if ps.min_count is not None else ps.count)
        out.append(ps.count - slack * step // total_slack)
    return tuple(out)


def reduce_counts(
    pod_sets: Sequence[PodSet], fits: Callable[[tuple[int, ...]], R | None]
) -> R | None:
    """``fits`` of the largest counts that fit (None when not even the minimum counts fit).

    ``fits`` returns a result for counts that can be admitted and None otherwise; it is called
    O(log(total slack)) times.
    """
    total = sum(
        ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in pod_sets
    )
    if total <= 0:
        return None
    lo, hi = 0, total + 1
    best: R | None = None
    while lo < hi:
        mid = (lo + hi) // 2
        result = fits(counts_for_step(pod_sets, mid, total))
        if result is None:
            lo = mid + 1
        else:
            best = result
            hi = mid
    return best if lo <= total else None
