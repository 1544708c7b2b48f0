"""``ClassicalPreemptor``: kqueue's implementation of the ``Preemptor`` seam, and its oracle.

The victim searches themselves are in ``classical.py`` and ``fair.py``. This module adds what spans cycles:

* **Delayed preemption** (KEP-5710): once a preemptor's victims have been told to go, it issues
  no new preemptions while they terminate. It keeps waiting for them as long as its assignment
  fits once they (and other workloads already being evicted) are gone; otherwise it pends until
  they are gone and searches again. A different assignment is taken meanwhile only if it needs no
  preemption at all (the flavor assigner finds a ``Fit``). The preemptor's victims are inferred
  from the targets it was given and ``Snapshot.evicting``: the cycle issues an entry's targets all
  together or not at all.
* **Explanations**: the last search for each preemptor is kept (``explain``) as a
  ``VictimSearch`` naming every candidate considered and why it was or was not usable.
* **Messages**: every target carries the Preempted message with the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..assignment import Assignment
from ..hierarchy import find_height_of_lowest_subtree_that_fits
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..tas.fit import placer as topology_placer
from ..types import (
    ClusterQueueName,
    FairSharingConfig,
    FlavorResource,
    Preemptibility,
    WorkloadKey,
)
from ..workload import AdmittedWorkload, WorkloadInfo
from .classical import Found, Search, contested_resources
from .fair import FairSearch
from .protection import Protected, ProtectionWait
from .report import Numbers, VictimSearch, describe, missing, victim_details
from .seam import PreemptionOracle, PreemptionPossibility, Target, preemption_message
from .search import SearchInput
from .undo import undone_by


class ClassicalPreemptor:
    """Kueue's classical preemption with the priorities of docs/contracts.md §3 and delayed preemption."""

    def __init__(self) -> None:
        self._snapshot: Snapshot | None = None
        # Victims (and their ClusterQueues) told to go for each preemptor in earlier cycles.
        self._issued: dict[WorkloadKey, dict[WorkloadKey, ClusterQueueName]] = {}
        # This cycle's newest non-empty set of new victims per preemptor: nomination may search
        # several times (full counts, then partial ones), and the last success is the one used.
        self._current: dict[WorkloadKey, dict[WorkloadKey, ClusterQueueName]] = {}
        self._searches: dict[WorkloadKey, VictimSearch] = {}
        # This cycle's preemptors that found no victims while protected workloads were passed
        # over (protection.py): the engine retries each when the first protection ends.
        self._waits: dict[WorkloadKey, ProtectionWait] = {}
        # This cycle's workloads whose only preemption the oracle refused as undone at once
        # (undo.py), and why: the flavor assigner sees no candidates, the message says why.
        self._refusals: dict[WorkloadKey, str] = {}

    # -- the seam ----------------------------------------------------------------------------

    def oracle(self, snapshot: Snapshot) -> PreemptionOracle:
        self._roll(snapshot)
        return _Oracle(self, snapshot)

    def get_targets(
        self, wl: WorkloadInfo, assignment: Assignment, snapshot: Snapshot
    ) -> list[Target]:
        self._roll(snapshot)
        cq = snapshot.cluster_queues.get(assignment.cluster_queue)
        if cq is None:
            return []
        waiting = self._outstanding(wl.key)
        ctx = SearchInput(
            preemptor=wl,
            cq=cq,
            requests=dict(assignment.usage),
            contested=contested_resources(assignment),
            within_nominal=_non_preemptible(wl, cq),
            only_evicting=bool(waiting),
            placement=topology_placer(wl, assignment, cq, snapshot.topology),
        )
        if snapshot.fair_sharing is not None:
            return self._fair_targets(wl, ctx, snapshot, snapshot.fair_sharing, waiting)
        search = Search(ctx, snapshot)
        found = search.run()
        wait = self._wait(wl.key, found is not None, search.protected)
        targets: list[Target] = []
        numbers = Numbers(wl.priority, cq.cq_name, missing(ctx))
        if found is not None:
            for c in found.targets:
                base = preemption_message(wl, c.variant.reason)
                detail = victim_details(numbers, c.workload, ctx.contested)
                targets.append(Target(c.workload, c.variant.reason, f"{base}; {detail}"))
            new = {
                c.workload.key: c.workload.cluster_queue for c in found.targets if not c.evicting
            }
            if new:
                self._current[wl.key] = new
        self._searches[wl.key] = VictimSearch(
            preemptor=wl.key,
            cluster_queue=cq.cq_name,
            priority=wl.priority,
            contested=tuple(sorted(ctx.contested)),
            candidates=search.notes(t.workload.key for t in targets),
            targets=tuple((t.workload.key, t.reason) for t in targets),
            max_victim_priority=found.threshold if found is not None else None,
            borrowing=found.borrowing if found is not None else None,
            waiting_for=tuple(sorted(waiting)),
            message=_outcome(wl, ctx, found, waiting, wait, _now(snapshot)),
        )
        return targets

    def _fair_targets(
        self,
        wl: WorkloadInfo,
        ctx: SearchInput,
        snapshot: Snapshot,
        config: FairSharingConfig,
        waiting: set[WorkloadKey],
    ) -> list[Target]:
        """The victims under fair sharing (fair.py), with their messages."""
        search = FairSearch(ctx, snapshot, config.strategies)
        found = search.run()
        undone = undone_by(search, found) if found is not None else None
        if undone is not None:
            found = None
        wait = self._wait(wl.key, found is not None, search.protected)
        targets: list[Target] = []
        numbers = Numbers(wl.priority, ctx.cq.cq_name, missing(ctx))
        if found is not None:
            for t in found.targets:
                base = preemption_message(wl, t.reason)
                detail = victim_details(numbers, t.workload, ctx.contested)
                targets.append(Target(t.workload, t.reason, f"{base}; {detail}; {t.why}"))
            new = {t.workload.key: t.workload.cluster_queue for t in found.targets if not t.evicting}
            if new:
                self._current[wl.key] = new
        fresh = [t for t in found.targets if not t.evicting] if found is not None else []
        if found is not None:
            message = f"fair sharing: preempting {len(fresh)} workload(s) to free " + (
                describe(missing(ctx)) or "nothing"
            )
        elif undone is not None:
            message = _UNDONE + undone
        elif waiting or wait is not None:
            message = _outcome(wl, ctx, None, waiting, wait, _now(snapshot))
        else:
            message = (
                f"fair sharing: no candidate may be preempted under the strategies "
                f"{', '.join(s.value for s in config.strategies)} to free "
                f"{describe(missing(ctx)) or 'nothing'}"
            )
        self._searches[wl.key] = VictimSearch(
            preemptor=wl.key,
            cluster_queue=ctx.cq.cq_name,
            priority=wl.priority,
            contested=tuple(sorted(ctx.contested)),
            candidates=(),
            targets=tuple((t.workload.key, t.reason) for t in targets),
            max_victim_priority=max((t.priority for t in fresh), default=None),
            borrowing=True if found is not None else None,
            waiting_for=tuple(sorted(waiting)),
            message=message,
            fair_sharing=tuple(found.notes) if found is not None else (),
        )
        return targets

    def _wait(
        self, key: WorkloadKey, found: bool, passed_over: list[Protected]
    ) -> ProtectionWait | None:
        """Keep (or drop, once victims are found) what ``key`` waits for in this cycle; a
        later search of the same cycle (fewer pods) adds the workloads it passed over."""
        if found:
            self._waits.pop(key, None)
            return None
        wait = ProtectionWait.of(passed_over)
        if wait is None:
            return self._waits.get(key)
        wait = wait.merged(self._waits.get(key))
        self._waits[key] = wait
        return wait

    # -- reading -----------------------------------------------------------------------------

    def protection_wait(self, key: WorkloadKey) -> ProtectionWait | None:
        """In the cycle just run: the protected workloads ``key`` found no victims without."""
        return self._waits.get(key)

    def refusal(self, key: WorkloadKey) -> str | None:
        """In the cycle just run: why a preemption for ``key`` was not made though fair
        sharing allowed it (undo.py)."""
        return self._refusals.get(key)

    def explain(self, key: WorkloadKey) -> VictimSearch | None:
        """The last victim search for ``key`` (None when it never needed preemption)."""
        return self._searches.get(key)

    def forget(self, key: WorkloadKey) -> None:
        """``key`` is admitted, finished or gone: drop what was kept about its searches."""
        self._searches.pop(key, None)
        self._issued.pop(key, None)
        self._current.pop(key, None)

    # -- cycles ------------------------------------------------------------------------------

    def _roll(self, snapshot: Snapshot) -> None:
        """A new snapshot means a new cycle: settle what the previous cycle issued."""
        if snapshot is self._snapshot:
            return
        self._snapshot = snapshot
        self._issued.update(self._current)
        self._current = {}
        self._waits = {}
        self._refusals = {}
        # Searches of workloads now holding quota explain nothing any more.
        for key in sorted(self._searches):
            if snapshot.workload(key, self._searches[key].cluster_queue) is not None:
                del self._searches[key]
        for preemptor in sorted(self._issued):
            victims = self._issued[preemptor]
            present = {
                v: cq for v, cq in victims.items() if snapshot.workload(v, cq) is not None
            }
            if not present or any(v not in snapshot.evicting for v in present):
                # All gone (search afresh), or never issued (the cycle skipped the preemptor).
                del self._issued[preemptor]
            else:
                self._issued[preemptor] = present

    def _outstanding(self, key: WorkloadKey) -> set[WorkloadKey]:
        return set(self._issued.get(key, {}))


def _non_preemptible(wl: WorkloadInfo, cq: ClusterQueueSnapshot) -> bool:
    threshold = cq.spec.preemption.preemptible_priority_threshold
    return wl.preemptibility(threshold) == Preemptibility.NON_PREEMPTIBLE


def _now(snapshot: Snapshot) -> datetime | None:
    return snapshot.protection.now if snapshot.protection is not None else None


def _outcome(
    wl: WorkloadInfo,
    ctx: SearchInput,
    found: Found | None,
    waiting: set[WorkloadKey],
    wait: ProtectionWait | None = None,
    now: datetime | None = None,
) -> str:
    lacks = describe(missing(ctx))
    if ctx.placement is not None:
        # Quota may be there while the topology domain is not (fragmented capacity).
        lacks = f"{lacks} and " if lacks else ""
        lacks += "room in a topology domain"
    lacks = lacks or "nothing"
    if found is not None:
        new = [c for c in found.targets if not c.evicting]
        old = len(found.targets) - len(new)
        parts = [f"preempting {len(new)} workload(s)"]
        if found.threshold is not None:
            parts.append(f"with preemption priority at most {found.threshold}")
        if old:
            parts.append(f"and waiting for {old} already being evicted")
        if ctx.cq.parent is not None:
            parts.append("(borrowing allowed)" if found.borrowing else "(without borrowing)")
        return f"{' '.join(parts)} to free {lacks}"
    if waiting:
        return (
            f"waiting for {len(waiting)} preempted workload(s) to terminate "
            f"({', '.join(sorted(waiting))}); no new preemptions until then"
        )
    if wait is not None:
        return wait.message(now)
    return (
        f"no allowed set of preemption candidates frees {lacks} for priority {wl.priority} "
        f"in ClusterQueue {ctx.cq.name}"
    )


_UNDONE = "fair sharing: no preemption that would be undone at once: "


@dataclass(slots=True)
class _Oracle:
    """Kueue's PreemptionOracle: the victim search for one flavor/resource, nothing kept."""

    preemptor: ClassicalPreemptor
    snapshot: Snapshot

    def simulate_preemption(
        self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionPossibility, int]:
        own = self.snapshot.cluster_queues.get(cq.cq_name, cq)
        ctx = SearchInput(
            preemptor=wl,
            cq=own,
            requests={fr: quantity},
            contested=frozenset({fr}),
            within_nominal=_non_preemptible(wl, own),
            only_evicting=bool(self.preemptor._outstanding(wl.key)),
        )
        victims: list[AdmittedWorkload] | None = None
        if self.snapshot.fair_sharing is not None:
            search = FairSearch(
                ctx, self.snapshot, self.snapshot.fair_sharing.strategies, record=False
            )
            fair = search.run()
            undone = undone_by(search, fair) if fair is not None else None
            if fair is not None and undone is None:
                victims = [t.workload for t in fair.targets]
            elif undone is not None:
                self.preemptor._refusals[wl.key] = _UNDONE + undone
        else:
            found = Search(ctx, self.snapshot, record=False).run()
            if found is not None:
                victims = [c.workload for c in found.targets]
        if not victims:
            borrow, _ = find_height_of_lowest_subtree_that_fits(cq, fr, quantity)
            return PreemptionPossibility.NO_CANDIDATES, borrow
        restore = self.snapshot.simulate_removal(victims)
        borrow, _ = find_height_of_lowest_subtree_that_fits(cq, fr, quantity)
        restore()
        if any(v.cluster_queue == cq.name for v in victims):
            return PreemptionPossibility.PREEMPT, borrow
        return PreemptionPossibility.RECLAIM, borrow
