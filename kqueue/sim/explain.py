"""``kqueue explain``: why a workload is pending (or why it got the flavors it has), structured.

The objects (from a live cluster or manifests) are fed to an Engine as the controller would; then
cycles run at the current instant until the workload has been considered once. Admissions the
controller would make right away are made (and listed), but preemptions are only chosen, never
carried out, so the answer is about the cluster as it is. The engine's own explanations are
used as they are: pending details (reason, positions, per pod set flavors tried and shortfalls)
and the last victim search (every candidate and why it may or may not be evicted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from kqueue.engine import from_api
from kqueue.engine.explain import PendingDetails
from kqueue.engine.flavor import flavor_mismatch
from kqueue.engine.forecast.finished import history_of
from kqueue.engine.forecast.forward import Prediction, forecast
from kqueue.engine.forecast.state import capture
from kqueue.engine.preemption.report import VictimSearch
from kqueue.engine.preemption.seam import Preemptor
from kqueue.engine.types import (
    Admission,
    ClusterQueueName,
    FlavorName,
    ResourceName,
    WorkloadKey,
)

from .driver import NOT_ARRIVED, PENDING, STATE_FINISHED, STATE_QUOTA_RESERVED, Simulation
from .scenario import Scenario


@dataclass(frozen=True, slots=True)
class FlavorNote:
    """A flavor of the ClusterQueue for one pod set of an admitted workload."""

    flavor: FlavorName
    chosen: bool
    # Why the pod set cannot use it regardless of quota (taints, node labels), if so.
    mismatch: str | None


@dataclass(frozen=True, slots=True)
class PodSetFlavors:
    name: str
    count: int
    flavors: dict[ResourceName, FlavorName]
    # Per resource group (by its covered resources), the flavors in the ClusterQueue's order.
    groups: tuple[tuple[tuple[ResourceName, ...], tuple[FlavorNote, ...]], ...]


@dataclass(slots=True)
class Explanation:
    key: str
    found: bool
    state: str = ""
    local_queue: str = ""
    cluster_queue: str | None = None
    pending: PendingDetails | None = None
    preemption: VictimSearch | None = None
    # For a workload holding quota.
    admission: Admission | None = None
    pod_sets: list[PodSetFlavors] = field(default_factory=list)
    borrowing: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    # Workloads the controller would admit first, at this instant.
    admitted_now: list[str] = field(default_factory=list)
    # Victims the controller would evict now (for this or other workloads): victim, preemptor,
    # reason, and the Preempted message (for fair sharing, the strategy that allowed it).
    preempting_now: list[tuple[str, str, str, str]] = field(default_factory=list)
    cycles: int = 0
    # For a pending workload: when it is expected to start (None: no estimate can be made).
    expected_start: Prediction | None = None
    # The time the prediction counts from.
    predicted_at: datetime | None = None
    # Quota reserved, not admitted: the admission checks it waits for (name, state, message).
    waiting_checks: list[tuple[str, str, str]] = field(default_factory=list)
    # MultiKueue (the Workload's status): the worker cluster it runs (ran) on, else the workers
    # its copies are offered to.
    cluster_name: str | None = None
    nominated_clusters: list[str] = field(default_factory=list)


def _expected_start(
    scenario: Scenario, sim: Simulation, key: WorkloadKey, now: datetime
) -> Prediction | None:
    """The engine run forward from the explained state (engine/forecast), run times from the
    scenario's finished Workloads (and maximumExecutionTimeSeconds)."""
    history = history_of(sw.api for sw in scenario.workloads)
    return forecast(capture(sim.engine), now, history).predictions.get(key)


def explain(
    scenario: Scenario,
    key: str,
    *,
    preemptor: Preemptor | None = None,
    max_cycles: int = 0,
    now: datetime | None = None,
) -> Explanation:
    """``now``: the time to predict the start from (default: the scenario's start)."""
    config = scenario.config
    sim = Simulation(
        scenario,
        preemptor=preemptor,
        carry_out_evictions=False,
        # The controller's Configuration, when among the objects: fair sharing decides as there.
        fair_sharing=from_api.fair_sharing(config.fair_sharing) if config is not None else None,
        admission_fair_sharing=(
            from_api.admission_fair_sharing(config.admission_fair_sharing)
            if config is not None
            else None
        ),
        preemption_protection=(
            from_api.preemption_protection(config.preemption_protection)
            if config is not None
            else None
        ),
        gates=from_api.feature_gates(config),
        quota_resources=from_api.quota_resources(config),
    )
    sim.arrive_all()
    rec = sim.records.get(key)
    if rec is None:
        return Explanation(key, found=False)
    out = Explanation(
        key,
        found=True,
        local_queue=f"{rec.sw.api.namespace or 'default'}/{rec.sw.api.spec.queue_name or ''}",
        cluster_name=rec.sw.api.status.cluster_name,
        nominated_clusters=list(rec.sw.api.status.nominated_cluster_names),
    )
    # Enough cycles for every head ahead of it to be considered once.
    limit = max_cycles or (len(sim.records) + len(scenario.cluster_queues) + 2)
    while rec.state == PENDING and sim.engine.cycles < limit:
        result = sim.step()
        out.admitted_now.extend(a.workload for a in result.admitted if a.workload != key)
        out.preempting_now.extend(
            (p.victim, p.preemptor, p.reason, p.message) for p in result.preempted
        )
        if any(p.workload == key for p in result.pending) or result.heads == 0:
            break
    out.cycles = sim.engine.cycles
    out.state = rec.state if rec.state != NOT_ARRIVED else "NotCreated"
    out.cluster_queue = sim.cluster_queue_of(rec)
    wkey = WorkloadKey(key)
    if rec.state == PENDING:
        out.pending = sim.engine.explain(wkey)
        out.preemption = sim.engine.explain_preemption(wkey)
        out.predicted_at = sim.now if now is None else max(now, sim.now)
        out.expected_start = _expected_start(scenario, sim, wkey, out.predicted_at)
        return out
    if rec.state == STATE_FINISHED:
        return out
    held = sim.engine.admitted_workload(wkey)
    if held is None:
        return out
    out.admission = held.admission
    if rec.state == STATE_QUOTA_RESERVED:
        out.waiting_checks = [(s.name, s.state, s.message) for s in rec.checks if s.state != "Ready"]
    spec = sim.engine.cache.cluster_queues.get(held.cluster_queue)
    for ps, psa in zip(held.info.pod_sets, held.admission.pod_sets, strict=False):
        groups = []
        if spec is not None:
            for rg in spec.resource_groups:
                if not any(r in psa.flavors for r in rg.covered_resources):
                    continue
                chosen = {psa.flavors[r] for r in rg.covered_resources if r in psa.flavors}
                notes = tuple(
                    FlavorNote(
                        fq.name,
                        fq.name in chosen,
                        flavor_mismatch(ps, sim.engine.cache.flavors.get(fq.name), fq.name),
                    )
                    for fq in rg.flavors
                )
                groups.append((rg.covered_resources, notes))
        out.pod_sets.append(PodSetFlavors(psa.name, psa.count, dict(psa.flavors), tuple(groups)))
    if spec is not None:
        usage = sim.engine.usage(ClusterQueueName(held.cluster_queue))
        for fr, quota in sorted(spec.quotas().items()):
            used = usage.get(fr, 0)
            if used:
                out.borrowing[(str(fr[0]), str(fr[1]))] = (used, quota.nominal)
    return out
