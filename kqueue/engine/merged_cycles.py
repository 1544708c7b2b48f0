"""Several cycles at one ``now``, reported as one result (Kueue issue #14477).

A cycle pops at most one head per ClusterQueue, so a ClusterQueue with a long backlog of
workloads that fit admits one per cycle, and the controller's cycle rate (debounce, hand-off to
the writers) caps admissions. ``Engine.schedule(now, admissions=n)`` instead runs cycle after
cycle while they admit, until ``n`` admissions: the decisions are those of the same cycles run
one call at a time (``tests/engine/test_batch_props.py`` compares the two on random scenarios),
only handed over at once, so a busy ClusterQueue admits at the rate its writes go out.

:func:`merge` folds the cycles' results into one: decisions in the order they were taken, and
for a workload considered by more than one of the cycles only its last outcome (a head pending
in one cycle and admitted by the next is admitted, not pending).
"""

from __future__ import annotations

from collections.abc import Sequence

from .cycle import CycleResult, Pending, Requeued
from .types import ClusterQueueName, WorkloadKey


def merge(results: Sequence[CycleResult]) -> CycleResult:
    """One result for ``results``, cycles run one after another at the same ``now``."""
    last = results[-1]
    admitted = tuple(a for r in results for a in r.admitted)
    done: set[WorkloadKey] = {a.workload for a in admitted}
    pending: dict[WorkloadKey, Pending] = {}
    requeued: dict[WorkloadKey, Requeued] = {}
    for r in results:
        for p in r.pending:
            pending[p.workload] = p
        for q in r.requeued:
            requeued[q.workload] = q
        for a in r.admitted:
            # Admitted after pending in an earlier cycle: the pending is over.
            pending.pop(a.workload, None)
            requeued.pop(a.workload, None)
    skips: dict[ClusterQueueName, int] = {}
    for r in results:
        for cq, n in r.preemption_skips:
            skips[cq] = skips.get(cq, 0) + n
    return CycleResult(
        cycle=last.cycle,
        now=last.now,
        admitted=admitted,
        preempted=tuple(p for r in results for p in r.preempted),
        evicted=tuple(e for r in results for e in r.evicted),
        pending=tuple(sorted((p for k, p in pending.items() if k not in done), key=_by_key)),
        requeued=tuple(sorted(requeued.values(), key=lambda q: q.workload)),
        heads=sum(r.heads for r in results),
        finished=tuple(f for r in results for f in r.finished),
        preemption_skips=tuple(sorted(skips.items())),
        cycles=sum(r.cycles for r in results),
        protection_deferred=tuple(d for r in results for d in r.protection_deferred),
    )


def _by_key(p: Pending) -> WorkloadKey:
    return p.workload
