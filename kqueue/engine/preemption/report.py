"""What a victim search reports: ``VictimSearch`` for ``explain`` and the simulator, one
``CandidateNote`` per admitted workload the classical search looked at, and the figures the
Preempted condition message quotes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..resources import fmt
from ..types import ClusterQueueName, FlavorResource, PreemptionReason, Usage, WorkloadKey
from ..workload import AdmittedWorkload
from .search import SearchInput


@dataclass(frozen=True, slots=True)
class CandidateNote:
    """One admitted workload as the victim search saw it."""

    workload: WorkloadKey
    cluster_queue: ClusterQueueName
    priority: int
    preemption_priority: int
    usable: bool
    # A Variant name when usable, a Rejection value otherwise.
    why: str
    message: str
    evicting: bool = False
    chosen: bool = False


@dataclass(frozen=True, slots=True)
class VictimSearch:
    """The outcome of one victim search, for ``explain`` and the simulator.

    ``targets`` are the victims chosen (with their reasons); empty when no allowed set of
    candidates makes the preemptor fit, or when the preemptor waits for victims it already
    preempted (``waiting_for``).
    """

    preemptor: WorkloadKey
    cluster_queue: ClusterQueueName
    priority: int
    contested: tuple[FlavorResource, ...]
    candidates: tuple[CandidateNote, ...]
    targets: tuple[tuple[WorkloadKey, PreemptionReason], ...] = ()
    # The highest preemption priority among new victims (None: no new victims).
    max_victim_priority: int | None = None
    # Whether the chosen set lets the preemptor borrow (None: nothing chosen).
    borrowing: bool | None = None
    waiting_for: tuple[WorkloadKey, ...] = ()
    message: str = ""
    # Under fair sharing: one line per candidate the strategies compared shares for.
    fair_sharing: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """Human-readable lines: the outcome, then one line per candidate."""
        out = [self.message, *self.fair_sharing]
        for note in self.candidates:
            mark = "victim" if note.chosen else ("candidate" if note.usable else "not a candidate")
            out.append(f"{note.workload} ({note.cluster_queue}): {mark}: {note.message}")
        return out



def describe(usage: Mapping[FlavorResource, int]) -> str:
    """``cpu 3 in flavor default, memory 1Gi in flavor default``."""
    return ", ".join(f"{r} {fmt(v, r)} in flavor {f}" for (f, r), v in sorted(usage.items()))


def missing(ctx: SearchInput) -> Usage:
    """How much of each contested resource the preemptor lacks before any preemption."""
    out: Usage = {}
    for fr in sorted(ctx.contested):
        v = ctx.requests.get(fr, 0)
        short = v - max(0, ctx.cq.available(fr))
        if short > 0:
            out[fr] = short
    return out


@dataclass(frozen=True, slots=True)
class Numbers:
    """The figures a Preempted message quotes."""

    preemptor_priority: int
    cluster_queue: ClusterQueueName
    missing: Usage = field(default_factory=dict)


def victim_details(
    numbers: Numbers, victim: AdmittedWorkload, contested: frozenset[FlavorResource]
) -> str:
    frees = {fr: v for fr, v in victim.usage.items() if fr in contested}
    need = describe(numbers.missing) or "no more quota than it has"
    return (
        f"the preemptor (priority {numbers.preemptor_priority}) in ClusterQueue "
        f"{numbers.cluster_queue} lacks {need}; this workload (preemption priority "
        f"{victim.info.preemption_priority}) in ClusterQueue {victim.cluster_queue} frees "
        f"{describe(frees) or 'nothing contested'}"
    )
