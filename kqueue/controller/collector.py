"""The cyclic garbage collector in the controller process: its pace, its pause while the caches
are first filled, and the freeze of what the process keeps for its life.

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

import contextlib
import gc
from collections.abc import Iterator
from typing import Final

__all__ = ["THRESHOLDS", "collector_paused", "freeze_heap", "pace_collector"]

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


def freeze_heap() -> None:
    """Take what is alive now out of the cyclic garbage collector's work.

    A controller keeps its caches (and the engine built from them) for its whole life, yet every
    full collection walks every tracked object: with 100,000 pending Workloads that is most of a
    scheduling cycle (bench/engine_gc.py: freezing after loading halves it). What an earlier
    call froze is let go first and collected with the rest (a replaced engine, a relisted store:
    frozen garbage in reference cycles would never be freed), so nothing dead is frozen; it
    costs one full collection, on the rare occasions this is called.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector off while a large, long-lived heap is being built.

    Reading tens of thousands of objects allocates millions of container objects that all stay
    alive: the collector's automatic full collections walk the whole growing heap again and
    again, for nothing (50,000 Workloads: 63 s of reading instead of 10 s, bench/gc_load.py).
    The caller ends the pause with :func:`freeze_heap` (one full collection, which frees the
    little cyclic garbage made meanwhile; an informer's large relist leaves that freeze to it);
    the collector is re-enabled on leaving, unless it was already off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
