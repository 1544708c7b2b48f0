"""Kueue's scheduler performance shapes: object counts and shapes, and a small run end to end."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

from kqueue.cli.simulate import _write_manifests
from kqueue.engine.sim.driver import Simulation
from kqueue.engine.sim.generate import (
    BASELINE,
    LARGE_SCALE,
    Shape,
    WorkloadClass,
    documents,
    generate,
)
from kqueue.engine.sim.report import figures
from kqueue.engine.sim.setup import default_preemptor

from .conftest import simulate_json


def test_baseline_counts_and_shapes() -> None:
    docs = list(documents(BASELINE))
    kinds = Counter(d["kind"] for d in docs)
    assert kinds == Counter(
        ResourceFlavor=1, Cohort=5, ClusterQueue=30, Namespace=30, LocalQueue=30, Workload=15_000
    )
    assert BASELINE.workloads == 15_000 and BASELINE.cluster_queues == 30
    cq = next(d for d in docs if d["kind"] == "ClusterQueue")
    assert cq["metadata"]["name"] == "cq-0-0-cohort-0"
    assert cq["spec"]["cohortName"] == "cohort-0"
    assert cq["spec"]["preemption"] == {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
    }
    [res] = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert res == {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}
    per_class: Counter[tuple[str, str]] = Counter()
    for d in docs:
        if d["kind"] == "Workload":
            per_class[
                (d["metadata"]["namespace"], d["metadata"]["labels"]["simulate.kqueue.io/class"])
            ] += 1
    assert set(per_class.values()) == {350, 100, 50}
    assert per_class[("cq-0-5-cohort-4", "small")] == 350
    workloads = [d for d in docs if d["kind"] == "Workload"]
    first = workloads[0]
    assert first["metadata"]["name"] == "small-0-0-0"
    assert first["metadata"]["annotations"] == {
        "simulate.kqueue.io/arrival": "100ms",
        "simulate.kqueue.io/run-time": "200ms",
    }
    assert first["spec"]["priority"] == 50
    large = [w for w in workloads if w["metadata"]["labels"]["simulate.kqueue.io/class"] == "large"]
    assert large[-1]["metadata"]["annotations"]["simulate.kqueue.io/arrival"] == "1m0s"
    assert large[-1]["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "20"}
    }
    # Creation order: arrival times never go back.
    arrivals = [w["metadata"]["annotations"]["simulate.kqueue.io/arrival"] for w in workloads]
    assert arrivals[0] == "100ms" and arrivals[-1] == "1m0s"


def test_large_scale_counts() -> None:
    kinds = Counter(d["kind"] for d in documents(LARGE_SCALE))
    assert kinds["Workload"] == 50_000 == LARGE_SCALE.workloads
    assert kinds["ClusterQueue"] == kinds["LocalQueue"] == kinds["Namespace"] == 1000
    assert kinds["Cohort"] == 10
    assert [(k.name, k.count, k.interval, k.run_time) for k in LARGE_SCALE.classes] == [
        ("small", 35, timedelta(milliseconds=60), timedelta(milliseconds=150)),
        ("medium", 11, timedelta(milliseconds=300), timedelta(milliseconds=350)),
        ("large", 4, timedelta(milliseconds=700), timedelta(milliseconds=700)),
    ]


TINY = Shape(
    name="tiny",
    cohorts=1,
    queues_per_cohort=2,
    nominal_quota="4",
    borrowing_limit="4",
    reclaim_within_cohort="Any",
    within_cluster_queue="LowerPriority",
    classes=(
        WorkloadClass(
            "small", 6, timedelta(milliseconds=100), timedelta(milliseconds=300), 50, "1"
        ),
        WorkloadClass(
            "large", 2, timedelta(milliseconds=250), timedelta(milliseconds=500), 200, "4"
        ),
    ),
)


def test_small_shape_runs_and_reports_figures() -> None:
    sim = Simulation(generate(TINY), preemptor=default_preemptor())
    sim.run()
    f = figures(sim)
    assert {k.name: (k.count, k.admitted) for k in f.classes} == {
        "small": (12, 12),
        "large": (4, 4),
    }
    assert all(r.state == "Finished" for r in sim.records.values())
    assert timedelta(milliseconds=600) <= f.wall < timedelta(seconds=5)
    assert 0 < f.usage_percent <= 200
    assert f.decisions >= 16


def test_written_manifests_replay_the_same_simulation(tmp_path: Path) -> None:
    _write_manifests(TINY, tmp_path)
    files = sorted(str(p) for p in tmp_path.glob("*.yaml"))
    assert [Path(f).name for f in files] == ["00-queues.yaml", "10-workloads.yaml"]
    from_files = simulate_json(*files)
    sim = Simulation(generate(TINY), preemptor=default_preemptor())
    sim.run()
    from kqueue.engine.sim.report import to_json

    assert from_files == to_json(sim)


def test_generate_cli_with_until() -> None:
    out = simulate_json("--generate", "baseline", "--until", "300ms")
    assert len(out["clusterQueues"]) == 30
    assert out["summary"]["workloadClasses"]["small"]["count"] == 90  # 3 per queue so far



def test_tas_shape_places_pod_sets_in_racks() -> None:
    """Kueue's configs/tas shape: 640 nodes in 10 racks, 15,000 workloads asking for a rack.
    A small copy runs to the end: every workload is admitted with a topologyAssignment that
    places all its pods, a required one within one rack, and finishes."""
    from dataclasses import replace

    from kqueue.engine.sim.generate import TAS, TasLayout

    assert TAS.workloads == 15_000
    assert sum(1 for d in documents(TAS) if d["kind"] == "Node") == 640
    small = replace(
        TAS,
        cohorts=1,
        queues_per_cohort=2,
        classes=(TAS.classes[0], TAS.classes[7]),  # small required, large preferred
        tas=TasLayout(racks=2, nodes_per_rack=4, cpu="4", memory="16Gi"),
    )
    small = replace(small, classes=tuple(replace(k, count=4) for k in small.classes))
    sim = Simulation(generate(small), preemptor=default_preemptor())
    sim.run()
    assert all(r.state == "Finished" for r in sim.records.values())
    for rec in sim.records.values():
        admission = rec.last_admission
        assert admission is not None
        (ps,) = admission.pod_sets
        assert ps.topology is not None and ps.topology.pod_count() == ps.count
        if rec.class_name.endswith("required-rack"):
            racks = {values[-1].rsplit("-", 1)[0] for values, _ in ps.topology.domains}
            assert len(racks) == 1
