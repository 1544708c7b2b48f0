"""``--plot``: quota usage and pending workloads over simulated time (matplotlib, Agg backend).

One panel per ClusterQueue, or per cohort when there are more than ``MAX_PANELS`` ClusterQueues
(usage and quota summed over its members; up to ``MAX_LINES`` members appear as stacked bands,
one per ClusterQueue, so borrowing shows), so that 30 or 1000 queues still read at a glance.
Each panel shows usage as a percentage of nominal quota per flavor/resource (100% dashed: above
it the queue borrows), admissions as green ticks along the bottom, preemptions as red crosses
along the top, and the number of pending workloads as a black line on the right-hand axis.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from kqueue.engine.types import ClusterQueueName
from kqueue.sim.driver import ADMITTED, PREEMPTED, Simulation

MAX_PANELS = 12
# Up to this many ClusterQueues per cohort panel, each also gets its own thin line.
MAX_LINES = 10
COLORS = ("#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
# Bands of the ClusterQueues of a cohort (blues and teals, so red and green marks stand out).
BANDS = ("#4c72b0", "#64b5cd", "#8172b3", "#55a8a8", "#9fb7e0", "#2f5d8a", "#a1c9f4", "#6a8caf")


def _groups(sim: Simulation) -> dict[str, list[str]]:
    cqs = sorted(cq.name for cq in sim.scenario.cluster_queues)
    if len(cqs) <= MAX_PANELS:
        return {cq: [cq] for cq in cqs}
    groups: dict[str, list[str]] = defaultdict(list)
    for cq in sim.scenario.cluster_queues:
        groups[f"cohort {cq.spec.cohort_name}" if cq.spec.cohort_name else cq.name].append(cq.name)
    return dict(sorted(groups.items()))


def _seconds(sim: Simulation, t: datetime) -> float:
    return (t - sim.start).total_seconds()


def _steps(
    sim: Simulation, members: Iterable[str]
) -> tuple[list[float], dict[str, dict[tuple[str, str], list[int]]], list[int]]:
    """Times, and at each: usage per member and (flavor, resource), and pending summed."""
    names = sorted(set(members))
    current: dict[str, tuple[dict[tuple[str, str], int], int]] = {}
    times: list[float] = []
    usage: dict[str, dict[tuple[str, str], list[int]]] = {n: defaultdict(list) for n in names}
    pending: list[int] = []
    keys: set[tuple[str, str]] = set()
    for s in sim.samples:
        if s.cluster_queue in usage:
            keys.update(s.usage)
    for s in sim.samples:
        if s.cluster_queue not in usage:
            continue
        current[s.cluster_queue] = (dict(s.usage), s.pending)
        t = _seconds(sim, s.time)
        if times and times[-1] == t:
            times.pop()
            pending.pop()
            for n in names:
                for k in keys:
                    usage[n][k].pop()
        times.append(t)
        pending.append(sum(p for _, p in current.values()))
        for n in names:
            held = current.get(n, ({}, 0))[0]
            for k in keys:
                usage[n][k].append(held.get(k, 0))
    return times, {n: dict(u) for n, u in usage.items()}, pending


def _nominal(sim: Simulation, members: Iterable[str]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = defaultdict(int)
    for name in members:
        spec = sim.engine.cache.cluster_queues.get(ClusterQueueName(name))
        if spec is None:
            continue
        for (flavor, resource), q in spec.quotas().items():
            out[(flavor, resource)] += q.nominal
    return out


def draw(sim: Simulation, path: Path) -> None:
    groups = _groups(sim)
    n = max(1, len(groups))
    cols = 1 if n == 1 else 2 if n <= 4 else 3
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(6.0 * cols, 2.6 * rows + 0.9), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    end = max(_seconds(sim, sim.now), 1e-9)
    marks: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for ev in sim.events:
        if ev.type in (ADMITTED, PREEMPTED) and ev.cluster_queue is not None:
            marks[ev.cluster_queue][ev.type].append(_seconds(sim, ev.time))
    resources_seen: dict[tuple[str, str], str] = {}
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    stacked = False
    drawn_lines: set[tuple[str, str]] = set()
    for index, (title, members) in enumerate(groups.items()):
        ax = axes[index // cols][index % cols]
        times, per_member, pending = _steps(sim, members)
        nominal = _nominal(sim, members)
        if times:
            times = [*times, end]
            pending = [*pending, pending[-1]]
        keys = sorted({k for u in per_member.values() for k in u if nominal.get(k)})
        peak = 100.0
        if len(members) > 1 and len(members) <= MAX_LINES and keys and times:
            # One band per ClusterQueue, stacked: the cohort's quota and who is using it.
            stacked = True
            fr = max(keys, key=lambda k: nominal[k])
            resources_seen.setdefault(fr, COLORS[len(resources_seen) % len(COLORS)])
            samples = len(times) - 1
            bands = []
            for m in sorted(members):
                band = [100 * v / nominal[fr] for v in per_member[m].get(fr, [0] * samples)]
                bands.append([*band, band[-1]])
            ax.stackplot(
                times,
                bands,
                step="post",
                alpha=0.75,
                linewidth=0,
                colors=[BANDS[i % len(BANDS)] for i in range(len(bands))],
            )
            peak = max(peak, *(sum(col) for col in zip(*bands, strict=True)))
            keys = [k for k in keys if k != fr]
        for fr in keys:
            color = resources_seen.setdefault(fr, COLORS[len(resources_seen) % len(COLORS)])
            totals = [
                sum(vals)
                for vals in zip(*(u.get(fr, []) for u in per_member.values()), strict=True)
            ]
            values = [100 * v / nominal[fr] for v in totals]
            if not values:
                continue
            values.append(values[-1])
            peak = max(peak, *values)
            ax.step(times, values, where="post", color=color, linewidth=1.2)
            drawn_lines.add(fr)
        ax.axhline(100, color="black", linestyle="--", linewidth=0.8)
        admitted = [t for cq in members for t in marks[cq][ADMITTED]]
        preempted = [t for cq in members for t in marks[cq][PREEMPTED]]
        top = peak * 1.12
        ax.set_ylim(0, top)
        # Marks stay readable from a handful of events to thousands (they merge into a band).
        if admitted:
            ax.plot(
                admitted,
                [top * 0.03] * len(admitted),
                "|",
                color="#2ca02c",
                markersize=10,
                markeredgewidth=1.5,
                alpha=1.0 if len(admitted) < 200 else 0.3,
            )
        if preempted:
            ax.plot(
                preempted,
                [top * 0.95] * len(preempted),
                "x",
                color="#d62728",
                markersize=6,
                alpha=1.0 if len(preempted) < 200 else 0.5,
            )
        ax.set_xlim(-end * 0.01, end * 1.01)
        ax.set_title(
            f"{title} ({len(members)} ClusterQueues)" if len(members) > 1 else title,
            fontsize=10,
        )
        ax.set_ylabel("% of nominal", fontsize=8)
        ax.tick_params(labelsize=8)
        twin = ax.twinx()
        # The pending line in front of the usage bands.
        twin.set_zorder(ax.get_zorder() + 1)
        twin.patch.set_visible(False)
        if times:
            twin.step(times, pending, where="post", color="black", linewidth=1.1)
        twin.set_ylim(0, max([*pending, 1]) * 1.15)
        twin.yaxis.set_major_locator(MaxNLocator(integer=True))
        twin.set_ylabel("pending", fontsize=8, color="dimgrey")
        twin.tick_params(labelsize=8, colors="dimgrey")
    for index in range(n, rows * cols):
        axes[index // cols][index % cols].set_visible(False)
    for col in range(cols):
        axes[rows - 1][col].set_xlabel("simulated seconds", fontsize=8)
    handles: list[Artist] = [
        Line2D([], [], color=color, label=f"{f}/{r} usage")
        for (f, r), color in sorted(resources_seen.items())
        if (f, r) in drawn_lines
    ]
    if stacked:
        handles.insert(
            0, Patch(color=BANDS[0], alpha=0.75, label="usage, one band per ClusterQueue")
        )
    handles += [
        Line2D([], [], color="black", linestyle="--", label="nominal quota"),
        Line2D([], [], color="#2ca02c", marker="|", linestyle="", label="admission"),
        Line2D([], [], color="#d62728", marker="x", linestyle="", label="preemption"),
        Line2D([], [], color="black", label="pending workloads (right axis)"),
    ]
    fig.legend(
        handles=handles,
        loc="outside upper center",
        ncols=min(len(handles), 6),
        fontsize=8,
        frameon=False,
    )
    fig.savefig(path)
