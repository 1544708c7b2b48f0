"""A run on which the engine would preempt in a circle stops with ``EndlessPreemption`` instead
of spinning at one instant (kqueue/sim/driver.py, MAX_PREEMPTIONS_AT_ONE_INSTANT).

kqueue's own preemption makes no such circle that is known (the last one found is pinned in
tests/engine/test_fair_preemption_outcome_props.py); the guard is there so that a run of
``kqueue simulate`` or a property test ends, saying where, if a new one is found. It is shown
here with a preemptor that evicts whatever holds the quota, for anyone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kqueue.api.loader import load_text
from kqueue.engine.assignment import Assignment
from kqueue.engine.preemption.seam import PreemptionOracle, PreemptionPossibility, Target
from kqueue.engine.snapshot import ClusterQueueSnapshot, Snapshot
from kqueue.engine.types import FlavorResource, PreemptionReason
from kqueue.engine.workload import WorkloadInfo
from kqueue.sim.driver import (
    MAX_PREEMPTIONS_AT_ONE_INSTANT,
    PREEMPTED,
    EndlessPreemption,
    Simulation,
)
from kqueue.sim.scenario import build_scenario
from tests.engine.builders import t
from tests.engine.test_protection_props import _COHORT, _CQ, _WL


class _Oracle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def simulate_preemption(
        self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionPossibility, int]:
        if any(fr in w.usage for w in cq.workloads.values()):
            return PreemptionPossibility.PREEMPT, 0
        return PreemptionPossibility.NO_CANDIDATES, 0


class _EvictsAnyone:
    """Each pending workload evicts every other workload of its ClusterQueue."""

    def oracle(self, snapshot: Snapshot) -> PreemptionOracle:
        return _Oracle(snapshot)

    def get_targets(
        self, wl: WorkloadInfo, assignment: Assignment, snapshot: Snapshot
    ) -> list[Target]:
        cq = snapshot.cluster_queues[assignment.cluster_queue]
        return [
            Target(w, PreemptionReason.IN_CLUSTER_QUEUE)
            for w in cq.workloads.values()
            if w.key != wl.key and w.key not in snapshot.evicting
        ]


def _scenario() -> str:
    docs = ["apiVersion: kqueue.io/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: default}\n"]
    docs.append(_COHORT % {"quota": 0})
    docs.append(_CQ % {"name": "a", "quota": 1, "protection": ""})
    for i in range(2):
        docs.append(_WL % {"name": f"w{i}", "ns": "a", "arrival": 10 * i, "priority": 0, "cpu": 1})
    return "".join(docs)


def test_a_circle_of_preemptions_stops_the_run_and_says_where() -> None:
    scenario = build_scenario(load_text(_scenario(), "circle.yaml").objects, start=t(0))
    sim = Simulation(scenario, preemptor=_EvictsAnyone())
    with pytest.raises(EndlessPreemption) as caught:
        sim.run(until=timedelta(hours=1))
    message = str(caught.value)
    assert f"preempted {MAX_PREEMPTIONS_AT_ONE_INSTANT + 1} times" in message, message
    assert "(10s in)" in message, message
    # Where it stopped: both workloads took turns at 10 s, nothing later happened.
    preempted = [e for e in sim.events if e.type == PREEMPTED]
    assert {int((e.time - sim.start).total_seconds()) for e in preempted} == {10}
    assert {e.workload for e in preempted} == {"a/w0", "a/w1"}
