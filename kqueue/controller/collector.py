"""The cyclic garbage collector's pace for the controller process.

The controller allocates a burst of short-lived containers for every watch event, API request
and answer (decoded JSON, models, tasks). With CPython's default thresholds (700, 10, 10) a
young collection runs every 700 net allocations, objects that are merely in flight at that
moment (a request awaiting its answer) are promoted, and a full collection, which walks every
tracked object not frozen at start-up, becomes due after every ten middle ones: on the x0.2
benchmark (docs/benchmarks.md, section 8) the collector took 3.4 of the controller's 16.5 CPU
seconds, 2.1 s of it in 16 full collections of the growing heap.

Almost all of that garbage is freed by reference counting anyway, so collecting less often
frees the same objects: cycles are still found, by young collections every 10,000 net
allocations (about once a second under that benchmark's load) and full ones after about a
million net allocations instead of seventy thousand.
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["THRESHOLDS", "pace_collector"]

# (young, middle, old): a young collection after 10,000 net container allocations, a middle
# one after every 10 young, a full one after every 10 middle (and, as always in CPython, only
# once the objects promoted since the last one are a quarter of those it kept).
THRESHOLDS: Final = (10_000, 10, 10)


def pace_collector() -> None:
    """Collect at :data:`THRESHOLDS`, or less often if the process is already set so."""
    current = gc.get_threshold()
    if current[0] == 0:
        return  # automatic collection turned off (threshold 0): left so
    gc.set_threshold(*(max(a, b) for a, b in zip(current, THRESHOLDS, strict=True)))
