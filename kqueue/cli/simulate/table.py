"""``--output table``: a readable summary of a simulation (rich tables).

Per ClusterQueue: usage against quota and counts; then the workloads holding quota, those that
were preempted (by whom and why), those still pending (and why), and for generated shapes the
figures Kueue's performance checker reports.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from rich.console import Console
from rich.table import Table

from kqueue.api.durations import format_duration
from kqueue.api.quantity import format_quantity
from kqueue.api.v1alpha1 import format_time
from kqueue.engine.types import ClusterQueueName
from kqueue.sim.driver import (
    PENDING,
    PREEMPTED,
    STATE_ADMITTED,
    STATE_FINISHED,
    Simulation,
    WorkloadRecord,
)
from kqueue.sim.report import Figures

MAX_ROWS = 40


def _rows_note(table: Table, shown: int, total: int) -> None:
    if total > shown:
        table.caption = f"... and {total - shown} more (use --output json for all)"


def _offset(sim: Simulation, at: datetime | None) -> str:
    if at is None:
        return "-"
    offset = format_duration(at - sim.start)
    return offset if offset.startswith("-") else "+" + offset


def _flavors(rec: WorkloadRecord) -> str:
    adm = rec.admission or rec.last_admission
    if adm is None:
        return ""
    parts = []
    for ps in adm.pod_sets:
        flavors = ", ".join(f"{r}={f}" for r, f in sorted(ps.flavors.items()))
        parts.append(f"{ps.name} ({ps.count}): {flavors}")
    return "; ".join(parts)


def print_summary(sim: Simulation, figs: Figures | None, cpu_seconds: float) -> None:
    console = Console(width=max(Console().width, 120))
    records = list(sim.arrived())
    console.print(
        f"Simulated {sim.engine.cycles} cycles from {format_time(sim.start)} to "
        f"{format_time(sim.now)} (+{format_duration(sim.now - sim.start)}): "
        f"{len(records)} workloads, {len(sim.events)} events, {sim.decisions} decisions"
    )

    cqs = Table(title="ClusterQueues", title_justify="left")
    for col in ("ClusterQueue", "Cohort", "Usage / nominal quota", "Admitted", "Pending"):
        cqs.add_column(col, justify="right" if col in ("Admitted", "Pending") else "left")
    for cq in sorted(sim.scenario.cluster_queues, key=lambda q: q.name):
        name = ClusterQueueName(cq.name)
        spec = sim.engine.cache.cluster_queues.get(name)
        usage = sim.engine.usage(name)
        parts = []
        if spec is not None:
            for (flavor, resource), quota in sorted(spec.quotas().items()):
                used = usage.get((flavor, resource), 0)
                parts.append(
                    f"{flavor}/{resource} {format_quantity(used, resource)}"
                    f"/{format_quantity(quota.nominal, resource)}"
                )
        active, parked = sim.engine.pending_counts(name)
        cqs.add_row(
            cq.name,
            cq.spec.cohort_name or "",
            ", ".join(parts),
            str(len(sim.engine.reserving(name))),
            str(active + parked),
        )
    console.print(cqs)

    admitted = [r for r in records if r.state == STATE_ADMITTED]
    table = Table(title=f"Admitted ({len(admitted)})", title_justify="left")
    for col in ("Workload", "ClusterQueue", "Flavors", "Since"):
        table.add_column(col)
    for rec in admitted[:MAX_ROWS]:
        table.add_row(
            rec.key, sim.cluster_queue_of(rec) or "", _flavors(rec), _offset(sim, rec.admitted_at)
        )
    _rows_note(table, min(len(admitted), MAX_ROWS), len(admitted))
    console.print(table)

    preemptions = [ev for ev in sim.events if ev.type == PREEMPTED]
    table = Table(title=f"Preempted ({len(preemptions)} preemptions)", title_justify="left")
    for col in ("Workload", "At", "Preemptor", "Reason", "Now"):
        table.add_column(col)
    for ev in preemptions[:MAX_ROWS]:
        now = sim.records[ev.workload].state if ev.workload in sim.records else ""
        table.add_row(
            ev.workload,
            "+" + format_duration(ev.time - sim.start),
            ev.preemptor or "",
            ev.reason,
            now,
        )
    _rows_note(table, min(len(preemptions), MAX_ROWS), len(preemptions))
    console.print(table)

    pending = [r for r in records if r.state == PENDING]
    table = Table(title=f"Pending ({len(pending)})", title_justify="left")
    for col in ("Workload", "ClusterQueue", "Reason", "Message"):
        table.add_column(col)
    for rec in pending[:MAX_ROWS]:
        cond = rec.conditions.get("QuotaReserved")
        table.add_row(
            rec.key,
            sim.cluster_queue_of(rec) or "-",
            cond.reason if cond is not None else "",
            cond.message if cond is not None else "",
        )
    _rows_note(table, min(len(pending), MAX_ROWS), len(pending))
    console.print(table)

    finished = sum(1 for r in records if r.state == STATE_FINISHED)
    console.print(f"Finished: {finished}")
    if figs is not None:
        _print_figures(console, figs, cpu_seconds)


def _ms(d: timedelta) -> str:
    return f"{d / timedelta(seconds=1):.3f} s"


def _print_figures(console: Console, f: Figures, cpu_seconds: float) -> None:
    table = Table(title="Figures (Kueue's scheduler performance checker)", title_justify="left")
    table.add_column("Figure")
    table.add_column("Value", justify="right")
    table.add_row("wall time (simulated)", _ms(f.wall))
    table.add_row(
        f"ClusterQueue {f.usage_resource} usage (class average, % of nominal)",
        f"{f.usage_percent:.1f} %",
    )
    table.add_row("lowest single ClusterQueue usage", f"{f.min_cq_usage_percent:.1f} %")
    for k in f.classes:
        table.add_row(
            f"average time to admission, {k.name} ({k.admitted}/{k.count} admitted, "
            f"{k.evictions} evictions)",
            _ms(k.avg_time_to_admission),
        )
    table.add_row("cycles", str(f.cycles))
    table.add_row("decisions (heads considered)", str(f.decisions))
    table.add_row("CPU seconds (simulation)", f"{cpu_seconds:.1f}")
    rate = f.decisions / cpu_seconds if cpu_seconds > 0 else 0.0
    table.add_row("decisions per CPU second", f"{rate:.0f}")
    console.print(table)
