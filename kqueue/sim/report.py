"""The simulation's result as the JSON object of docs/contracts.md §4, plus figures.

Quantities are printed canonically (``format_quantity``), times as RFC 3339. Workloads that have
not arrived when the simulation stops are left out: they do not exist yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kqueue.api.quantity import Quantity, format_quantity
from kqueue.api.v1alpha1 import encode_assignment, format_time
from kqueue.engine.types import ClusterQueueName, local_queue_key

from .driver import STATE_FINISHED, Simulation, WorkloadRecord


def _pod_sets(rec: WorkloadRecord) -> list[dict[str, Any]]:
    admission = rec.admission
    if admission is None and rec.state == STATE_FINISHED:
        admission = rec.last_admission
    if admission is not None:
        out: list[dict[str, Any]] = []
        for ps in admission.pod_sets:
            entry: dict[str, Any] = {
                "name": ps.name, "count": ps.count, "flavors": dict(sorted(ps.flavors.items()))
            }
            if ps.topology is not None:
                # The Workload status shape (Kueue v1beta2's compact slices).
                entry["topologyAssignment"] = encode_assignment(
                    list(ps.topology.levels),
                    [(list(v), n) for v, n in ps.topology.domains],
                ).to_dict()
            if ps.delayed_topology is not None:
                entry["delayedTopologyRequest"] = ps.delayed_topology
            out.append(entry)
        return out
    return [
        {"name": ps.name, "count": count, "flavors": {}}
        for ps, count in zip(rec.sw.api.spec.pod_sets, rec.counts, strict=False)
    ]


def _conditions(sim: Simulation, rec: WorkloadRecord) -> list[dict[str, str]]:
    out = [
        {"type": kind, "status": cond.status, "reason": cond.reason, "message": cond.message}
        for kind, cond in rec.conditions.items()
    ]
    return out


def workload_entry(sim: Simulation, rec: WorkloadRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "state": rec.state,
        "clusterQueue": sim.cluster_queue_of(rec),
        "podSets": _pod_sets(rec),
        "conditions": _conditions(sim, rec),
    }
    if rec.checks:
        # Only with admission checks (docs/admission-checks.md): the other keys are pinned.
        out["admissionChecks"] = [
            {"name": s.name, "state": s.state, "message": s.message} for s in rec.checks
        ]
    return out


def cluster_queue_entry(sim: Simulation, name: str) -> dict[str, Any]:
    cq = ClusterQueueName(name)
    active, parked = sim.engine.pending_counts(cq)
    reserving = len(sim.engine.reserving(cq))
    spec = sim.engine.cache.cluster_queues.get(cq)
    usage: dict[str, dict[str, str]] = {}
    held = sim.engine.usage(cq)
    if spec is not None:
        for (flavor, resource), _ in sorted(spec.quotas().items()):
            usage.setdefault(flavor, {})[resource] = format_quantity(
                held.get((flavor, resource), 0), resource
            )
    for (flavor, resource), amount in sorted(held.items()):
        usage.setdefault(flavor, {})[resource] = format_quantity(amount, resource)
    out: dict[str, Any] = {
        "pendingWorkloads": active + parked,
        "reservingWorkloads": reserving,
        "admittedWorkloads": reserving,
        "usage": usage,
    }
    share = sim.engine.cluster_queue_share(cq)
    if share is not None:
        out["fairSharing"] = {"weightedShare": share.rounded()}
    return out


def to_json(sim: Simulation) -> dict[str, Any]:
    events = []
    for ev in sim.events:
        e: dict[str, Any] = {
            "cycle": ev.cycle,
            "time": format_time(ev.time),
            "type": ev.type,
            "workload": ev.workload,
            "clusterQueue": ev.cluster_queue,
            "reason": ev.reason,
            "message": ev.message,
        }
        if ev.preemptor is not None:
            e["preemptor"] = ev.preemptor
        events.append(e)
    out: dict[str, Any] = {
        "cycles": sim.engine.cycles,
        "events": events,
        "workloads": {rec.key: workload_entry(sim, rec) for rec in sim.arrived()},
        "clusterQueues": {
            cq.name: cluster_queue_entry(sim, cq.name)
            for cq in sorted(sim.scenario.cluster_queues, key=lambda q: q.name)
        },
    }
    fair = local_queue_fair_usage(sim)
    if fair:
        out["localQueues"] = fair
    return out


def local_queue_fair_usage(sim: Simulation) -> dict[str, Any]:
    """Per LocalQueue of an admission-fair-sharing ClusterQueue, at the end: its status
    ``consumedResources`` and the usage its heads are ordered by."""
    engine = sim.engine
    out: dict[str, Any] = {}
    for lq in sorted(sim.scenario.local_queues, key=lambda q: (q.namespace or "", q.name)):
        key = local_queue_key(lq.namespace or "default", lq.name)
        spec = engine.local_queue(key)
        if spec is None or not engine.uses_admission_fair_sharing(spec.cluster_queue):
            continue
        consumed = engine.local_queue_consumed(key)
        amounts = consumed[0] if consumed is not None else {}
        out[key] = {
            "consumedResources": {r: str(Quantity.from_nanos(n)) for r, n in sorted(amounts.items())},
            "admissionFairSharingUsage": str(engine.local_queue_fair_usage(key)),
        }
    return out


# --- figures as Kueue's scheduler performance checker reports them ------------------------------


@dataclass(frozen=True, slots=True)
class ClassFigures:
    name: str
    count: int
    admitted: int
    evictions: int
    # Mean from creation to first admission, over the admitted ones.
    avg_time_to_admission: timedelta
    avg_time_to_finish: timedelta


@dataclass(frozen=True, slots=True)
class Figures:
    # From the start to the last thing that happened (Kueue's runner wall time).
    wall: timedelta
    cycles: int
    decisions: int
    classes: tuple[ClassFigures, ...]
    # Kueue's ClusterQueue-class usage: CPU used over (nominal quota x monitored time), %.
    usage_percent: float
    # The lowest single ClusterQueue's usage, %.
    min_cq_usage_percent: float
    usage_resource: str
    extra: dict[str, Any] = field(default_factory=dict)


def _mean(values: list[timedelta]) -> timedelta:
    if not values:
        return timedelta(0)
    return sum(values, timedelta(0)) / len(values)


def figures(sim: Simulation, resource: str = "cpu") -> Figures:
    last = sim.start
    for ev in sim.events:
        last = max(last, ev.time)
    wall = last - sim.start
    by_class: dict[str, list[WorkloadRecord]] = {}
    for rec in sim.arrived():
        by_class.setdefault(rec.class_name or "-", []).append(rec)
    classes = []
    for name, recs in sorted(by_class.items()):
        to_admit: list[timedelta] = []
        finished: list[timedelta] = []
        for r in recs:
            if r.arrived is None:
                continue
            if r.first_admitted is not None:
                to_admit.append(r.first_admitted - r.arrived)
            if r.finished_at is not None:
                finished.append(r.finished_at - r.arrived)
        classes.append(
            ClassFigures(
                name,
                len(recs),
                len(to_admit),
                sum(r.evictions for r in recs),
                _mean(to_admit),
                _mean(finished),
            )
        )
    integral = sim.usage_integral_until(last)
    span = (last - sim.start) // timedelta(microseconds=1)
    used_total = 0
    nominal_total = 0
    per_cq: list[float] = []
    for cq in sim.scenario.cluster_queues:
        spec = sim.engine.cache.cluster_queues.get(ClusterQueueName(cq.name))
        if spec is None:
            continue
        nominal = sum(q.nominal for (_, r), q in spec.quotas().items() if r == resource)
        used = sum(v for (_, r), v in integral.get(cq.name, {}).items() if r == resource)
        used_total += used
        nominal_total += nominal
        if nominal and span:
            per_cq.append(100 * used / (nominal * span))
    usage = 100 * used_total / (nominal_total * span) if nominal_total and span else 0.0
    return Figures(
        wall=wall,
        cycles=sim.engine.cycles,
        decisions=sim.decisions,
        classes=tuple(classes),
        usage_percent=usage,
        min_cq_usage_percent=min(per_cq, default=0.0),
        usage_resource=resource,
    )
