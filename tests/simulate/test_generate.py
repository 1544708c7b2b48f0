"""Kueue's scheduler performance shapes: object counts and shapes, and a small run end to end."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from kqueue.cli.simulate import _write_manifests
from kqueue.sim.driver import Simulation
from kqueue.sim.generate import (
    BASELINE,
    LARGE_SCALE,
    TAS,
    TAS_BLOCK,
    TAS_RACK,
    KueueConfigError,
    Shape,
    WorkloadClass,
    documents,
    from_kueue_generator,
    generate,
    scaled,
)
from kqueue.sim.report import figures

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


def test_large_scale_shapes() -> None:
    """Kueue's configs/large-scale as its runner names and builds it: 1,000 ClusterQueues
    ``cq-0-<j>-cohort-<i>`` with the baseline's quota and preemption, 35 small, 11 medium and
    4 large workloads each, priorities 50/100/200 and 1/5/20 cpu."""
    docs = list(documents(LARGE_SCALE))
    assert Counter(d["kind"] for d in docs) == Counter(
        ResourceFlavor=1, Cohort=10, ClusterQueue=1000, Namespace=1000, LocalQueue=1000,
        Workload=50_000,
    )
    cqs = [d for d in docs if d["kind"] == "ClusterQueue"]
    assert cqs[0]["metadata"]["name"] == "cq-0-0-cohort-0"
    assert cqs[-1]["metadata"]["name"] == "cq-0-99-cohort-9"
    assert cqs[-1]["spec"]["cohortName"] == "cohort-9"
    assert cqs[0]["spec"]["preemption"] == {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
    }
    [res] = cqs[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert res == {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}
    workloads = [d for d in docs if d["kind"] == "Workload"]
    per_queue = Counter(
        (d["metadata"]["namespace"], d["metadata"]["labels"]["simulate.kqueue.io/class"])
        for d in workloads
    )
    assert len({ns for ns, _ in per_queue}) == 1000
    assert set(per_queue.values()) == {35, 11, 4}
    assert per_queue[("cq-0-99-cohort-9", "medium")] == 11

    def first(klass: str) -> dict[str, Any]:
        return next(
            w for w in workloads if w["metadata"]["labels"]["simulate.kqueue.io/class"] == klass
        )

    # Kueue's names: <class>-<workload set>-<n>-0; the n-th arrives after n+1 intervals.
    for klass, name, prio, cpu, arrival, run in (
        ("small", "small-0-0-0", 50, "1", "60ms", "150ms"),
        ("medium", "medium-1-0-0", 100, "5", "300ms", "350ms"),
        ("large", "large-2-0-0", 200, "20", "700ms", "700ms"),
    ):
        w = first(klass)
        assert w["metadata"]["name"] == name
        assert w["spec"]["priority"] == prio
        [container] = w["spec"]["podSets"][0]["template"]["spec"]["containers"]
        assert container["resources"] == {"requests": {"cpu": cpu}}
        assert w["metadata"]["annotations"] == {
            "simulate.kqueue.io/arrival": arrival,
            "simulate.kqueue.io/run-time": run,
        }
    arrivals = [w["metadata"]["annotations"]["simulate.kqueue.io/arrival"] for w in workloads]
    # The 11th medium (3.3 s) is the last; the 4th large arrives at 2.8 s.
    assert arrivals[-1] == "3.3s"
    assert workloads[-1]["metadata"]["name"] == "medium-1-10-0"


@pytest.mark.parametrize(
    ("shape", "factor", "per_queue", "cluster_queues", "workloads"),
    [
        pytest.param(BASELINE, "1", (350, 100, 50), 30, 15_000, id="baseline x1"),
        pytest.param(BASELINE, "0.2", (70, 20, 10), 30, 3_000, id="baseline x0.2"),
        pytest.param(LARGE_SCALE, "1", (35, 11, 4), 1000, 50_000, id="large-scale x1"),
        # 3.5 rounds half up to 4; 0.4 is raised to the minimum of 1 per class.
        pytest.param(LARGE_SCALE, "0.1", (4, 1, 1), 1000, 6_000, id="large-scale x0.1"),
        pytest.param(LARGE_SCALE, "0.2", (7, 2, 1), 1000, 10_000, id="large-scale x0.2"),
        pytest.param(LARGE_SCALE, Fraction(1, 100), (1, 1, 1), 1000, 3_000, id="large-scale x0.01"),
    ],
)
def test_scaled_shapes_keep_the_queues(
    shape: Shape,
    factor: str | Fraction,
    per_queue: tuple[int, ...],
    cluster_queues: int,
    workloads: int,
) -> None:
    """The benchmark runners' ``--scale``: counts per class scaled, ClusterQueues kept."""
    s = scaled(shape, factor)
    assert tuple(k.count for k in s.classes) == per_queue
    assert (s.cluster_queues, s.workloads) == (cluster_queues, workloads)
    assert [replace(k, count=0) for k in s.classes] == [replace(k, count=0) for k in shape.classes]
    kinds = Counter(d["kind"] for d in documents(s))
    assert kinds["ClusterQueue"] == cluster_queues and kinds["Workload"] == workloads


def _kueue_config(shape: Shape) -> dict[str, Any]:
    """``shape`` written in the schema of Kueue's runner's generator config (cohorts >
    queuesSets > workloadsSets, and configs/tas's topology), as its configs/*/generator.yaml
    are."""
    doc: dict[str, Any] = {
        "cohorts": [{
            "className": "cohort",
            "count": shape.cohorts,
            "queuesSets": [{
                "className": "cq",
                "count": shape.queues_per_cohort,
                "nominalQuota": int(shape.nominal_quota),
                "borrowingLimit": int(shape.borrowing_limit),
                "reclaimWithinCohort": shape.reclaim_within_cohort,
                "withinClusterQueue": shape.within_cluster_queue,
                "workloadsSets": [
                    {
                        "count": k.count,
                        "creationIntervalMs": k.interval // timedelta(milliseconds=1),
                        "workloads": [{
                            "className": k.name,
                            "runtimeMs": k.run_time // timedelta(milliseconds=1),
                            "priority": k.priority,
                            # Kueue's configs write whole cpus as integers, the tas one "500m".
                            "request": int(k.cpu) if k.cpu.isdigit() else k.cpu,
                            **({"podCount": k.pods} if k.pods != 1 else {}),
                            **(
                                {"tasConstraint": k.constraint, "tasLevel": k.level}
                                if k.constraint else {}
                            ),
                        }],
                    }
                    for k in shape.classes
                ],
            }],
        }],
    }
    if shape.tas is not None:
        t = shape.tas
        doc["topology"] = {
            "name": "default-topology",
            "levels": [
                {"name": "block", "count": 1, "nodeLabel": TAS_BLOCK},
                {"name": "rack", "count": t.racks, "nodeLabel": TAS_RACK},
                {"name": "node", "count": t.nodes_per_rack, "nodeLabel": "kubernetes.io/hostname",
                 "capacity": {"cpu": t.cpu, "memory": t.memory}},
            ],
        }
    return doc


@pytest.mark.parametrize("shape", [BASELINE, LARGE_SCALE, TAS], ids=lambda s: s.name)
def test_kueue_generator_config_reads_back_as_the_shape(shape: Shape) -> None:
    """What bench/side_by_side.py checks before a run: Kueue's config, read back, is our shape
    (the integers Kueue's YAML has become the quantity strings the shape has)."""
    assert from_kueue_generator(shape.name, _kueue_config(shape)) == shape
    doc = _kueue_config(shape)
    doc["cohorts"][0]["queuesSets"][0]["workloadsSets"][0]["count"] += 1
    assert from_kueue_generator(shape.name, doc) != shape


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            lambda d: d["cohorts"].append(d["cohorts"][0]), "cohorts: 2 entries", id="two cohort classes"
        ),
        pytest.param(
            lambda d: d["cohorts"][0]["queuesSets"].clear(),
            "cohorts[0].queuesSets: 0 entries", id="no queue set",
        ),
        pytest.param(
            lambda d: d["cohorts"][0]["queuesSets"][0]["workloadsSets"][1]["workloads"].append({}),
            "workloadsSets[1].workloads: 2 entries", id="two classes in a workload set",
        ),
        pytest.param(
            lambda d: d["cohorts"][0]["queuesSets"][0]["workloadsSets"][2]["workloads"][0]
            .update(tasConstraint="required", tasLevel=TAS_RACK),
            "workloadsSets[2]: tasConstraint 'required'", id="topology request without a topology",
        ),
        pytest.param(
            lambda d: d.update(topology={"levels": []}), "topology.levels: node labels []",
            id="topology without levels",
        ),
        pytest.param(
            lambda d: d.update(topology=_kueue_config(TAS)["topology"])
            or d["topology"]["levels"][0].update(count=2),
            "topology.levels[0].count: 2", id="two blocks",
        ),
        pytest.param(
            lambda d: d.update(topology=_kueue_config(TAS)["topology"])
            or d["cohorts"][0]["queuesSets"][0]["workloadsSets"][0]["workloads"][0]
            .update(tasConstraint="unconstrained", tasLevel=TAS_RACK),
            "tasConstraint 'unconstrained'", id="unknown topology constraint",
        ),
    ],
)
def test_kueue_generator_config_a_shape_cannot_express(change: Any, message: str) -> None:
    doc = _kueue_config(LARGE_SCALE)
    change(doc)
    with pytest.raises(KueueConfigError, match=re.escape(message)) as err:
        from_kueue_generator("large-scale", doc)
    assert "'large-scale'" in str(err.value)


def test_kueue_balanced_placement_reads_as_preferred() -> None:
    """Kueue's configs/tas has "balanced" classes (a slice-required request with a slice size,
    alpha in Kueue); kqueue's tas shape places them as preferred, so the check in
    bench/side_by_side.py accepts Kueue's config as the same shape."""
    doc = _kueue_config(TAS)
    for ws in doc["cohorts"][0]["queuesSets"][0]["workloadsSets"]:
        wl = ws["workloads"][0]
        if "balanced" in wl["className"]:
            wl.update(tasConstraint="balanced", sliceSize=2)
    assert from_kueue_generator("tas", doc) == TAS


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
    sim = Simulation(generate(TINY))
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
    sim = Simulation(generate(TINY))
    sim.run()
    from kqueue.sim.report import to_json

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

    from kqueue.sim.generate import TAS, TasLayout

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
    sim = Simulation(generate(small))
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
