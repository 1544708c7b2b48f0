"""Accuracy of predicted start times (kqueue.engine.forecast) against a replayed trace.

    python bench/eta_accuracy.py [--trace baseline|bursty ...] [--scale 0.2] [--seed 1]
                                 [--out bench/results/eta_accuracy.json] [--plot docs/img/eta_accuracy.png]

Traces (simulated time, driven by the simulator as ``kqueue simulate`` does):

- ``baseline``: Kueue's baseline shape (kqueue/sim/generate.py: 5 cohorts x 6 ClusterQueues of
  nominal 20 cpu, classes small/medium/large at 1/5/20 cpu and priorities 50/100/200), counts
  scaled by ``--scale``, its times stretched x600 (an interval of 100 ms becomes 1 min) so that
  "every minute" means something: small, medium and large workloads arrive every 1, 5 and 12 min
  per ClusterQueue, with run times drawn per workload from a log-normal distribution whose
  median is the class's (2, 5 and 10 min) and sigma 0.5 (``--sigma``), seeded.
- ``bursty``: the same queues and classes, but every workload of a ClusterQueue arrives in
  bursts: one burst every 20 min, each bringing the next fifth of its workloads at once.

Every simulated minute the simulator's engine state is captured and run forward
(``forecast``), with the run-time history of the workloads finished so far (per LocalQueue,
half-life 1 h); each pending workload that gets a prediction is scored once admitted: the
error is |predicted start - actual admission|, as a share of the workload's actual wait
(arrival to admission) and of its remaining wait at the time of the prediction. Predictions made
after a workload's first admission (it was preempted) are not scored.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kqueue.api.durations import format_duration
from kqueue.api.loader import Location, load_object
from kqueue.engine import from_api
from kqueue.engine.forecast.forward import forecast
from kqueue.engine.forecast.history import RunTimeHistory
from kqueue.engine.forecast.state import capture
from kqueue.engine.types import WorkloadKey
from kqueue.sim import generate as gen
from kqueue.sim.annotations import ARRIVAL, CLASS_LABEL, RUN_TIME
from kqueue.sim.driver import STATE_FINISHED, Simulation, WorkloadRecord
from kqueue.sim.scenario import Scenario, build_scenario

STRETCH = 600
STEP = timedelta(minutes=1)
HALF_LIFE = timedelta(hours=1)
BURST_EVERY = timedelta(minutes=20)
BURSTS = 5


def _stretched(shape: gen.Shape, scale: str) -> gen.Shape:
    shape = gen.scaled(shape, scale)
    return replace(
        shape,
        classes=tuple(
            replace(k, interval=k.interval * STRETCH, run_time=k.run_time * STRETCH)
            for k in shape.classes
        ),
    )


def trace(name: str, scale: str, sigma: float, seed: int) -> Scenario:
    """The trace as a scenario (see the module docstring)."""
    shape = _stretched(gen.BASELINE, scale)
    runs = {k.name: k.run_time for k in shape.classes}
    counts = {k.name: k.count for k in shape.classes}
    rng = random.Random(seed)
    objects = []
    for index, doc in enumerate(gen.documents(shape), start=1):
        if doc.get("kind") == "Workload":
            notes = doc["metadata"]["annotations"]
            cls = doc["metadata"]["labels"][CLASS_LABEL]
            median = runs[cls].total_seconds()
            seconds = max(1, round(rng.lognormvariate(math.log(median), sigma)))
            notes[RUN_TIME] = format_duration(timedelta(seconds=seconds))
            if name == "bursty":
                n = int(doc["metadata"]["name"].split("-")[2])
                burst = n * BURSTS // counts[cls]
                notes[ARRIVAL] = format_duration(BURST_EVERY * burst + STEP)
        obj = load_object(doc, Location(f"<eta {name}>", index))
        assert obj is not None
        objects.append(obj)
    return build_scenario(objects)


def _overtaking(sim: Simulation, scenario: Scenario) -> Callable[[WorkloadRecord, datetime], bool]:
    """Whether a workload that arrived after ``at`` in ``rec``'s cohort was admitted before
    ``rec`` (per cohort: arrivals sorted, the earliest admission among the later arrivals)."""
    cohort_of = {cq.name: cq.spec.cohort_name or cq.name for cq in scenario.cluster_queues}
    per: dict[str, list[tuple[datetime, datetime]]] = {}
    for r in sim.records.values():
        cq = sim.cluster_queue_of(r)
        if r.arrived is not None and r.first_admitted is not None and cq is not None:
            per.setdefault(cohort_of.get(cq, cq), []).append((r.arrived, r.first_admitted))
    index: dict[str, tuple[list[datetime], list[datetime]]] = {}
    for cohort, pairs in per.items():
        pairs.sort()
        suffix: list[datetime] = [pairs[-1][1]] * len(pairs)
        for i in range(len(pairs) - 2, -1, -1):
            suffix[i] = min(pairs[i][1], suffix[i + 1])
        index[cohort] = ([a for a, _ in pairs], suffix)

    def overtaken(rec: WorkloadRecord, at: datetime) -> bool:
        cq = sim.cluster_queue_of(rec)
        if cq is None or rec.first_admitted is None:
            return False
        arrivals, suffix = index[cohort_of.get(cq, cq)]
        i = bisect.bisect_right(arrivals, at)
        return i < len(arrivals) and suffix[i] < rec.first_admitted

    return overtaken


def replay(scenario: Scenario) -> dict[str, Any]:
    sim = Simulation(scenario)
    history = RunTimeHistory(half_life=HALF_LIFE)
    counted: set[str] = set()
    # (workload, predicted at, predicted start)
    predictions: list[tuple[str, datetime, datetime]] = []
    pending_seen = unknown = forecasts = 0
    forecast_cpu: list[float] = []
    step = 0
    while True:
        step += 1
        sim.run(until=STEP * step)
        now = sim.now
        for rec in sim.records.values():
            if rec.state == STATE_FINISHED and rec.key not in counted and rec.admitted_at:
                counted.add(rec.key)
                wl = from_api.workload(rec.sw.api)
                assert rec.finished_at is not None
                history.record(wl.local_queue, wl, rec.admitted_at, rec.finished_at, uid=rec.key)
        waiting = [
            r for r in sim.records.values()
            if r.state == "Pending" and r.arrived is not None and r.first_admitted is None
        ]
        if waiting:
            t0 = time.process_time()
            fc = forecast(capture(sim.engine), now, history)
            forecast_cpu.append(time.process_time() - t0)
            forecasts += 1
            for r in waiting:
                pending_seen += 1
                p = fc.predictions.get(WorkloadKey(r.key))
                if p is None:
                    unknown += 1
                else:
                    predictions.append((r.key, now, p.start))
        if all(r.state == STATE_FINISHED for r in sim.records.values()):
            break
        if step > 10_000:
            raise RuntimeError("the trace did not finish in 10,000 simulated minutes")
    errors_total: list[float] = []
    errors_left: list[float] = []
    signed: list[float] = []
    by_age: dict[int, list[float]] = {}
    by_class: dict[str, list[float]] = {}
    # Split by whether a workload that arrived after the prediction, in the same cohort, was
    # admitted first: what "arrivals are not guessed" costs.
    overtaken_errors: list[float] = []
    clean_errors: list[float] = []
    overtaken = _overtaking(sim, scenario)
    for key, at, start in predictions:
        rec = sim.records[key]
        assert rec.first_admitted is not None and rec.arrived is not None
        wait = (rec.first_admitted - rec.arrived).total_seconds()
        left = (rec.first_admitted - at).total_seconds()
        err = (start - rec.first_admitted).total_seconds()
        if wait <= 0 or left <= 0:
            continue
        share = abs(err) / wait
        errors_total.append(share)
        errors_left.append(abs(err) / left)
        signed.append(err)
        by_age.setdefault(int((at - rec.arrived).total_seconds() // 600), []).append(share)
        by_class.setdefault(rec.class_name, []).append(share)
        (overtaken_errors if overtaken(rec, at) else clean_errors).append(share)
    waits = [
        (r.first_admitted - r.arrived).total_seconds()
        for r in sim.records.values()
        if r.first_admitted is not None and r.arrived is not None
    ]
    within = sum(e <= 0.2 for e in errors_total) / len(errors_total) if errors_total else 0.0
    return {
        "workloads": len(sim.records),
        "simulatedMinutes": step,
        "medianWaitSeconds": statistics.median(waits),
        "forecasts": forecasts,
        "forecastCpuSecondsMedian": round(statistics.median(forecast_cpu), 4) if forecast_cpu else 0,
        "forecastCpuSecondsMax": round(max(forecast_cpu), 4) if forecast_cpu else 0,
        "predictionsScored": len(errors_total),
        "pendingObservations": pending_seen,
        "noEstimateShare": round(unknown / pending_seen, 4) if pending_seen else 0,
        "medianAbsErrorShareOfWait": round(statistics.median(errors_total), 4) if errors_total else None,
        "withinTwentyPercentOfWait": round(within, 4),
        "medianAbsErrorShareOfRemainingWait": (
            round(statistics.median(errors_left), 4) if errors_left else None
        ),
        "medianSignedErrorSeconds": statistics.median(signed) if signed else None,
        "medianAbsErrorShareByClass": {
            k: round(statistics.median(v), 4) for k, v in sorted(by_class.items())
        },
        "predictionsOvertakenByLaterArrivals": len(overtaken_errors),
        "medianAbsErrorShareOvertaken": (
            round(statistics.median(overtaken_errors), 4) if overtaken_errors else None
        ),
        "medianAbsErrorShareNotOvertaken": (
            round(statistics.median(clean_errors), 4) if clean_errors else None
        ),
        "withinTwentyPercentNotOvertaken": (
            round(sum(e <= 0.2 for e in clean_errors) / len(clean_errors), 4)
            if clean_errors else None
        ),
        "medianAbsErrorShareByAgeTenMinutes": {
            str(k * 10): round(statistics.median(v), 4) for k, v in sorted(by_age.items())
        },
    }


def plot(results: dict[str, dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name, r in results.items():
        ages = r["medianAbsErrorShareByAgeTenMinutes"]
        xs = [int(k) for k in ages]
        ax.plot(xs, [100 * v for v in ages.values()], marker="o", label=(
            f"{name}: median {100 * r['medianAbsErrorShareOfWait']:.0f}%, "
            f"{100 * r['withinTwentyPercentOfWait']:.0f}% within ±20%"
        ))
    ax.axhline(25, color="grey", linestyle="--", linewidth=1, label="target 25%")
    ax.set_xlabel("minutes since arrival when predicted")
    ax.set_ylabel("median |error| / actual wait (%)")
    ax.set_title("Predicted start time accuracy (bench/eta_accuracy.py)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="append", choices=["baseline", "bursty"])
    parser.add_argument("--scale", default="0.2")
    parser.add_argument("--sigma", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/results/eta_accuracy.json"))
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for name in args.trace or ["baseline", "bursty"]:
        t0, w0 = time.process_time(), time.perf_counter()
        r = replay(trace(name, args.scale, args.sigma, args.seed))
        r.update(
            trace=name, scale=args.scale, sigma=args.sigma, seed=args.seed,
            cpuSeconds=round(time.process_time() - t0, 1),
            wallSeconds=round(time.perf_counter() - w0, 1),
        )
        results[name] = r
        print(json.dumps(r, indent=1))
    machine = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadAverage": [round(x, 2) for x in os.getloadavg()],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": machine, "results": results}, indent=1) + "\n")
    print("machine:", machine)
    if args.plot is not None:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
