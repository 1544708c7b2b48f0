"""A pending preemptor goes before the other heads of its cycle (cycle.py ``_order_key``,
fairness/tournament.py ``less``), as Kueue's PrioritizePreemptorWorkloads does; Kueue's own
cases, named after them (pkg/scheduler/scheduler_test.go: TestEntryOrdering and the fair-sharing
entryComparer cases)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pytest

from kqueue.engine.assignment import Assignment
from kqueue.engine.cycle import _order_key
from kqueue.engine.fairness.dominant_share import Share
from kqueue.engine.fairness.tournament import less
from kqueue.engine.nominate import Entry
from kqueue.engine.types import ClusterQueueName, FlavorName, ResourceName

from .builders import make_workload

_CPU = (FlavorName("default"), ResourceName("cpu"))
_COHORT = "cohort"


def _entry(name: str, *, created: int, priority: int, preemptor: bool, borrowing: int = 0) -> Entry:
    info = make_workload(name).priority(priority).created(created).request("cpu", 1).info()
    assignment = Assignment(ClusterQueueName("cq"), (), borrowing=borrowing, usage={_CPU: 1000})
    return Entry(info, ClusterQueueName("cq"), assignment, preemptor=preemptor)


def _preemptor_inputs() -> list[Entry]:
    """Kueue's inputForOrderingPreemptorWorkloads."""
    return [
        _entry("preemptor-borrowing", created=1, priority=1, preemptor=True, borrowing=1),
        _entry("preemptor-not-borrowing", created=2, priority=1, preemptor=True),
        _entry("not-preemptor-not-borrowing", created=0, priority=2, preemptor=False),
    ]


def test_kueue_entry_ordering_some_workloads_are_preemptors_prioritize_preemptor_workloads_enabled(
) -> None:
    """TestEntryOrdering, "Some workloads are preemptors; PrioritizePreemptorWorkloads is
    enabled": preemptors first, then not borrowing before borrowing, then priority."""
    order = [e.info.key.split('/')[1] for e in sorted(_preemptor_inputs(), key=_order_key)]
    assert order == [
        "preemptor-not-borrowing", "preemptor-borrowing", "not-preemptor-not-borrowing",
    ]


def test_without_preemptors_the_order_is_kueues_default() -> None:
    """TestEntryOrdering, "... PrioritizePreemptorWorkloads is disabled": with no preemptor
    marked, the same entries go not-borrowing and higher priority first."""
    entries = _preemptor_inputs()
    for e in entries:
        e.preemptor = False
    order = [e.info.key.split('/')[1] for e in sorted(entries, key=_order_key)]
    assert order == [
        "not-preemptor-not-borrowing", "preemptor-not-borrowing", "preemptor-borrowing",
    ]


_BORROWING = Share(Fraction(1), Fraction(0), None, frozenset({_CPU}))
_NOMINAL = Share()


@dataclass(frozen=True)
class LessCase:
    name: str
    a_preemptor: bool
    a_share: Share
    b_preemptor: bool
    b_share: Share
    want_less: bool


@pytest.mark.parametrize("case", [
    # "a is preemptor, b not, feature enabled": a borrows, b does not, a still goes first.
    LessCase("a is preemptor, b not, feature enabled", True, _BORROWING, False, _NOMINAL, True),
    # "both are preemptors, feature enabled": the usual rules decide (b does not borrow).
    LessCase("both are preemptors, feature enabled", True, _BORROWING, True, _NOMINAL, False),
    # Kueue's "a is preemptor, b not, feature disabled" is this order without the mark.
    LessCase("a is preemptor, b not, feature disabled", False, _BORROWING, False, _NOMINAL, False),
], ids=lambda c: c.name)
def test_kueue_entry_comparer_less(case: LessCase) -> None:
    a = _entry("preemptor-borrowing", created=0, priority=0, preemptor=case.a_preemptor)
    b = _entry("b", created=0, priority=0, preemptor=case.b_preemptor)
    shares = {(_COHORT, a.info.key): case.a_share, (_COHORT, b.info.key): case.b_share}
    assert less(a, b, _COHORT, shares) is case.want_less
    # Never both ways: the tournament's comparison stays a strict order.
    assert not (case.want_less and less(b, a, _COHORT, shares))
