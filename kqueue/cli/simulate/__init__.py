"""``kqueue simulate``: play manifests (or a generated shape) through the engine in simulated time.

Reading files, printing, plotting and the progress bar live here; the simulation itself is
``kqueue.sim`` (pure, clock injected), driving the same Engine as the controller.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click
import yaml

from kqueue.api import feature_gates
from kqueue.api.config import Configuration, ConfigurationError, load_configuration
from kqueue.api.durations import DurationError, parse_duration
from kqueue.api.integrations.management import ManagementPolicy
from kqueue.api.kueue_config import is_kueue_configuration
from kqueue.api.loader import LoadError
from kqueue.api.v1alpha1 import parse_time
from kqueue.cli.manifests import InvalidInput, read_manifests
from kqueue.engine import from_api
from kqueue.sim import generate as gen
from kqueue.sim.driver import EndlessPreemption, Simulation
from kqueue.sim.report import Figures, figures, to_json
from kqueue.sim.scenario import DEFAULT_START, build_scenario

# Simulated time per head considered when a shape is generated: without a cost per decision,
# every quota release re-examines every parked workload at the same instant and the run grows
# quadratically with the backlog (see docs/simulate.md, "Cycle model").
GENERATED_DECISION_TIME = timedelta(milliseconds=1)


class _Duration(click.ParamType[timedelta]):
    name = "DURATION"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return parse_duration(str(value), allow_negative=False)
        except DurationError as err:
            self.fail(str(err), param, ctx)


class _Time(click.ParamType[datetime]):
    name = "RFC3339"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_time(str(value))
        except ValueError:
            self.fail(f"{value!r} is not an RFC 3339 time such as 2024-05-01T12:00:00Z", param, ctx)


@click.command()
@click.argument("files", nargs=-1, metavar="[FILE ...]")
@click.option("--cycles", type=click.IntRange(min=0), help="Run exactly N scheduling cycles.")
@click.option("--until", type=_Duration(), help="Stop after this much simulated time.")
@click.option(
    "--output",
    "-o",
    type=click.Choice(["table", "json", "yaml"]),
    default="table",
    show_default=True,
)
@click.option("--start", type=_Time(), help="Simulated start time (default: see docs).")
@click.option(
    "--decision-time",
    type=_Duration(),
    help="Simulated time the scheduler spends per workload it considers "
    "(default 0; 1ms with --generate).",
)
@click.option(
    "--generate",
    type=click.Choice(sorted(gen.SHAPES)),
    help="Simulate one of Kueue's scheduler performance shapes instead of files.",
)
@click.option(
    "--write-manifests",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --generate: write the shape's manifests to DIR and exit.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Draw quota usage and pending workloads over time to FILE.png or FILE.svg.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The controller's Configuration (config.kqueue.io/v1alpha1, or Kueue's "
    "config.kueue.x-k8s.io/v1beta2); its fairSharing and admissionFairSharing apply as in the "
    "controller. It may instead be one of the documents of FILEs.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar on stderr (default: when stderr is a terminal and not --output json).",
)
def simulate(
    files: tuple[str, ...],
    cycles: int | None,
    until: timedelta | None,
    output: str,
    start: datetime | None,
    decision_time: timedelta | None,
    generate: str | None,
    write_manifests: Path | None,
    plot: Path | None,
    config_file: Path | None,
    progress: bool | None,
) -> None:
    """Simulate admission of the workloads in FILEs (`-` reads stdin).

    FILEs hold kqueue or Kueue objects (Topologies too), Namespaces, LimitRanges,
    PriorityClasses, Nodes, a kqueue or Kueue Configuration (at most one, or --config), and Jobs
    and Pods (those kqueue manages: a kqueue.io/queue-name label, see docs/simulate.md; a Pod
    bound to a node is that node's usage), as multi-document YAML or `kubectl get -o yaml`
    Lists; objects with only
    generateName get reproducible names.
    Annotations `simulate.kqueue.io/{arrival,run-time,scale,delete,deactivate}` say what
    happens in simulated time. Exit status 2 on invalid input.
    """
    if plot is not None and plot.suffix.lower() not in (".png", ".svg"):
        raise click.BadParameter("the file name must end in .png or .svg", param_hint="--plot")
    if generate is not None:
        if files:
            raise click.UsageError("--generate does not read FILEs")
        shape = gen.SHAPES[generate]
        if write_manifests is not None:
            _write_manifests(shape, write_manifests)
            return
        scenario = gen.generate(shape, start=start or DEFAULT_START)
        if decision_time is None:
            decision_time = GENERATED_DECISION_TIME
    else:
        if write_manifests is not None:
            raise click.UsageError("--write-manifests needs --generate")
        if not files:
            raise click.UsageError("give FILEs to simulate (or - for stdin), or --generate")
        loaded = read_manifests(files)
        # --config is read first: its integrations.frameworks decide which kinds are managed.
        given = _read_config(config_file) if config_file is not None else None
        if given is not None and any(o.config is not None for o in loaded.objects):
            raise InvalidInput(
                f"--config {config_file}: the input already has a Configuration; give one"
            )
        try:
            scenario = build_scenario(
                loaded.objects,
                start=start,
                window=until,
                policy=ManagementPolicy.from_config(given) if given is not None else None,
            )
        except LoadError as err:
            raise InvalidInput(str(err)) from err
        for line in scenario.warnings:
            click.echo(f"warning: {line}", err=True)
        if given is not None:
            scenario.config = given
    config = scenario.config
    if config_file is not None and generate is not None:
        config = _read_config(config_file)
        # The simulation reads it too (resources.deviceClassMappings size DRA claims).
        scenario.config = config
    # Not warnings: what the honoured gates set against their defaults change (both kinds of
    # Configuration, given by --config or among the inputs).
    for line in feature_gates.honoured(config.feature_gates if config is not None else {}):
        click.echo(f"note: {line}", err=True)
    sim = Simulation(
        scenario,
        decision_time=decision_time or timedelta(0),
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
    show_progress = progress if progress is not None else (output != "json" and sys.stderr.isatty())
    cpu = time.process_time()
    try:
        if show_progress:
            from kqueue.cli.simulate.progress import run_with_progress

            run_with_progress(sim, cycles=cycles, until=until)
        else:
            sim.run(cycles=cycles, until=until)
    except EndlessPreemption as err:
        raise click.ClickException(str(err)) from None
    cpu = time.process_time() - cpu
    figs = figures(sim) if generate is not None else None
    if plot is not None:
        from kqueue.cli.simulate.plot import draw

        draw(sim, plot)
    if output == "table":
        from kqueue.cli.simulate.table import print_summary

        print_summary(sim, figs, cpu)
        return
    doc = to_json(sim)
    if figs is not None:
        doc["summary"] = summary_dict(figs, cpu)
    if output == "json":
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False), nl=False)


def _read_config(path: Path) -> Configuration:
    """A Configuration file: kqueue's, or Kueue's (converted, what is dropped warned about)."""
    text = path.read_text()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InvalidInput(f"{path}: not YAML: {err}") from err
    if isinstance(doc, dict) and is_kueue_configuration(doc):
        loaded = read_manifests((str(path),))
        configs = [o.config for o in loaded.objects if o.config is not None]
        if len(configs) != 1:
            raise InvalidInput(f"{path}: expected one Configuration document")
        return configs[0]
    try:
        config = load_configuration(text, source=str(path))
    except ConfigurationError as err:
        raise InvalidInput(str(err)) from err
    for line in feature_gates.warnings(config.feature_gates):
        click.echo(f"warning: {path}: {line}", err=True)
    return config


def summary_dict(f: Figures, cpu_seconds: float) -> dict[str, Any]:
    """Kueue's checker figures (and the run's cost) as plain data."""
    return {
        "wallSeconds": f.wall.total_seconds(),
        "cycles": f.cycles,
        "decisions": f.decisions,
        "cpuSeconds": round(cpu_seconds, 3),
        "decisionsPerSecond": round(f.decisions / cpu_seconds) if cpu_seconds > 0 else None,
        "clusterQueueUsagePercent": round(f.usage_percent, 2),
        "minClusterQueueUsagePercent": round(f.min_cq_usage_percent, 2),
        "workloadClasses": {
            k.name: {
                "count": k.count,
                "admitted": k.admitted,
                "evictions": k.evictions,
                "averageTimeToAdmissionMs": k.avg_time_to_admission // timedelta(milliseconds=1),
                "averageTimeToFinishMs": k.avg_time_to_finish // timedelta(milliseconds=1),
            }
            for k in f.classes
        },
    }


def _write_manifests(shape: gen.Shape, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    setup: list[dict[str, Any]] = []
    workloads: list[dict[str, Any]] = []
    for doc in gen.documents(shape):
        (workloads if doc["kind"] == "Workload" else setup).append(doc)
    for name, docs in (("00-queues.yaml", setup), ("10-workloads.yaml", workloads)):
        path = directory / name
        with path.open("w", encoding="utf-8") as fh:
            yaml.safe_dump_all(docs, fh, sort_keys=False, default_flow_style=False)
        click.echo(f"wrote {path} ({len(docs)} objects)")


__all__ = ["simulate"]
