"""An engine in the state the controller's would be in, built from a cluster's objects.

The objects (listed from the API server, or a ``kubectl get -o yaml`` dump) are fed to an engine
as the controller feeds its own, the way ``kqueue explain`` does (``kqueue.sim``): every
workload arrives, then scheduling cycles run at the current instant until the queues settle, so
each pending workload has the reason a cycle gave it. Admissions the controller would make right
away are made; preemptions are only chosen, never carried out, so the answer is about the
cluster as it is.
"""

from __future__ import annotations

from kqueue.engine.engine import Engine
from kqueue.engine.preemption.seam import Preemptor
from kqueue.sim.driver import Simulation
from kqueue.sim.scenario import Scenario


def settled_engine(scenario: Scenario, *, preemptor: Preemptor | None = None) -> Engine:
    """The engine after every workload arrived and the queues settled at the current instant.

    Settled: a cycle had no head left to consider (BestEffortFIFO parks what does not fit), or
    a cycle decided the same as the one before (a StrictFIFO head blocked on quota, a preemptor
    waiting for its victims), or every workload and ClusterQueue had a cycle of its own.
    """
    sim = Simulation(
        scenario,
        preemptor=preemptor,
        carry_out_evictions=False,
    )
    sim.arrive_all()
    limit = len(sim.records) + len(scenario.cluster_queues) + 2
    last: tuple[tuple[str, str, str], ...] | None = None
    while sim.engine.cycles < limit:
        result = sim.step()
        if result.heads == 0:
            break
        decided = tuple((p.workload, str(p.reason), p.message) for p in result.pending)
        if not result.admitted and not result.preempted and decided == last:
            break
        last = decided
    return sim.engine
