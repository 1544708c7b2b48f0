"""A progress bar on stderr for long simulations: finished workloads out of all, simulated time."""

from __future__ import annotations

from datetime import datetime, timedelta

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kqueue.api.durations import format_duration
from kqueue.sim.driver import Simulation


def run_with_progress(sim: Simulation, *, cycles: int | None, until: timedelta | None) -> None:
    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("workloads finished, t={task.fields[at]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("simulate", total=len(sim.records), at="0s")
        last = [-1.0]

        def update(now: datetime, finished: int, total: int) -> None:
            # Redrawing is far slower than a cycle: refresh at most every 50 ms of simulated time.
            at = (now - sim.start).total_seconds()
            if at - last[0] < 0.05 and finished != total:
                return
            last[0] = at
            bar.update(task, completed=finished, total=total, at=format_duration(now - sim.start))

        sim.run(cycles=cycles, until=until, progress=update)
