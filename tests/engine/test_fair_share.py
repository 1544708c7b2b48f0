"""The weighted dominant resource share of ClusterQueues and Cohorts.

Ports of Kueue's ``TestDominantResourceShare``, ``TestIsBorrowingOn`` and
``TestPreciseWeightedShareSerialized`` (``pkg/cache/scheduler/fair_sharing_test.go``), each
carrying its name. As in Kueue, a ClusterQueue ``cq`` holds ``usage``, ``extra`` (Kueue's
``flvResQ``) is added to every node's usage when its share is computed, and the rounded share,
dominant resource and borrowing of every ClusterQueue and Cohort are compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

import pytest

from kqueue.engine.engine import Engine
from kqueue.engine.fairness.dominant_share import MAX_SHARE, Share, share_of
from kqueue.engine.hierarchy import Node
from kqueue.engine.types import (
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    FairSharingConfig,
    FlavorName,
    ResourceName,
)

from .builders import make_flavor, q
from .parity_support import FQ, build_engine, cluster_queue, cohort, fq, kwl, simple

GPU = "example.com/gpu"
D = "default"


def gq(flavor: str = D, *, cpu: str | None = None, gpu: str | tuple[str, str | None, str | None] | None = None) -> FQ:
    quotas: dict[str, object] = {}
    if cpu is not None:
        quotas["cpu"] = cpu
    if gpu is not None:
        quotas[GPU] = gpu
    return fq(flavor, quotas)  # type: ignore[arg-type]


def cq(name: str, *flavors: FQ, cohort_name: str | None = "test-cohort", weight: str = "1") -> ClusterQueueSpec:
    return replace(cluster_queue(name, list(flavors), cohort=cohort_name), fair_weight=Fraction(weight))


def co(name: str, *flavors: FQ, parent: str | None = None, weight: str = "1") -> CohortSpec:
    spec = cohort(name, list(flavors), parent=parent) if flavors else cohort(name, parent=parent)
    return replace(spec, fair_weight=Fraction(weight))


Usage = Mapping[tuple[str, str], str]


@dataclass
class Case:
    name: str
    usage: Usage
    cq: ClusterQueueSpec
    # name -> (rounded share, dominant resource or None, borrowing)
    want: Mapping[str, tuple[int, str | None, bool]]
    lending: ClusterQueueSpec | None = None
    cohorts: Sequence[CohortSpec] = ()
    extra: Usage = field(default_factory=dict)


ZERO = (0, None, False)

CASES = [
    Case(
        "no cohort",
        {(D, "cpu"): "1", (D, GPU): "2"},
        cq("cq", gq(cpu="2000", gpu="5"), cohort_name=None),
        {"cq": ZERO},
    ),
    Case(
        "usage below nominal",
        {(D, "cpu"): "1", (D, GPU): "2"},
        cq("cq", gq(cpu="2", gpu="5")),
        {"cq": ZERO, "lending-cq": ZERO, "test-cohort": ZERO},
        lending=cq("lending-cq", gq(cpu="8", gpu="5")),
    ),
    Case(
        "usage above nominal",
        {(D, "cpu"): "3", (D, GPU): "7"},
        cq("cq", gq(cpu="2", gpu="5")),
        {"cq": (200, GPU, True), "lending-cq": ZERO, "test-cohort": ZERO},  # (7-5)*1000/10
        lending=cq("lending-cq", gq(cpu="8", gpu="5")),
    ),
    Case(
        "usage slightly above nominal in a cohort with large quotas",
        {(D, GPU): "501"},
        cq("cq", gq(gpu="500")),
        {"cq": (1, GPU, True), "lending-cq": ZERO, "test-cohort": ZERO},
        lending=cq("lending-cq", gq(gpu="1000"), weight="300"),
    ),
    Case(
        "usage way above nominal in a cohort with large quotas and weights",
        {(D, GPU): "800"},
        cq("cq", gq(gpu="500"), weight="300"),
        {"cq": (1, GPU, True), "lending-cq": ZERO, "test-cohort": ZERO},
        lending=cq("lending-cq", gq(gpu="1000"), weight="300"),
    ),
    Case(
        "one resource above nominal",
        {(D, "cpu"): "3", (D, GPU): "3"},
        cq("cq", gq(cpu="2", gpu="5")),
        {"cq": (100, "cpu", True), "lending-cq": ZERO, "test-cohort": ZERO},  # (3-2)*1000/10
        lending=cq("lending-cq", gq(cpu="8", gpu="5")),
    ),
    Case(
        "usage with workload above nominal",
        {(D, "cpu"): "1", (D, GPU): "2"},
        cq("cq", gq(cpu="2", gpu="5")),
        {"cq": (300, "cpu", True), "lending-cq": ZERO, "test-cohort": ZERO},  # (1+4-2)*1000/10
        lending=cq("lending-cq", gq(cpu="8", gpu="5")),
        extra={(D, "cpu"): "4", (D, GPU): "4"},
    ),
    Case(
        "A resource with zero lendable",
        {(D, "cpu"): "1", (D, GPU): "1"},
        cq("cq", gq(cpu="2", gpu=("2", None, "0"))),
        {"cq": (300, "cpu", True), "lending-cq": ZERO, "test-cohort": ZERO},
        lending=cq("lending-cq", gq(cpu="8", gpu=("64", None, "0"))),
        extra={(D, "cpu"): "4", (D, GPU): "4"},
    ),
    Case(
        "multiple flavors",
        {("on-demand", "cpu"): "15", ("spot", "cpu"): "5"},
        cq("cq", gq("on-demand", cpu="20"), gq("spot", cpu="80")),
        # ((15+10-20)+0)*1000/200 (spot under nominal)
        {"cq": (25, "cpu", True), "lending-cq": ZERO, "test-cohort": ZERO},
        lending=cq("lending-cq", gq(cpu="100")),
        extra={("on-demand", "cpu"): "10"},
    ),
    Case(
        "above nominal with integer weight",
        {(D, GPU): "7"},
        cq("cq", gq(gpu="5"), weight="2"),
        {"cq": (100, GPU, True), "lending-cq": ZERO, "test-cohort": ZERO},  # ((7-5)*1000/10)/2
        lending=cq("lending-cq", gq(gpu="5")),
    ),
    Case(
        "above nominal with decimal weight",
        {(D, GPU): "7"},
        cq("cq", gq(gpu="5"), weight="0.5"),
        {"cq": (400, GPU, True), "lending-cq": ZERO, "test-cohort": ZERO},  # ((7-5)*1000/10)/(1/2)
        lending=cq("lending-cq", gq(gpu="5")),
    ),
    Case(
        "above nominal with zero weight",
        {(D, GPU): "7"},
        cq("cq", gq(gpu="5"), weight="0"),
        {"cq": (MAX_SHARE, GPU, True), "lending-cq": ZERO, "test-cohort": ZERO},
        lending=cq("lending-cq", gq(gpu="10")),
    ),
    Case(
        "cohort has resource share",
        {(D, GPU): "10"},
        cq("cq", gq(gpu="5"), cohort_name="child-cohort"),
        {"cq": (100, GPU, True), "child-cohort": (50, GPU, True), "root": ZERO},
        cohorts=[co("child-cohort", parent="root", weight="2"), co("root", gq(gpu="45"))],
    ),
    Case(
        "resource share defined for resources only available at the root cohort",
        {(D, GPU): "10"},
        cq("cq", gq(gpu="0"), cohort_name="child-cohort"),
        {"cq": (200, GPU, True), "child-cohort": (100, GPU, True), "root": ZERO},
        cohorts=[co("child-cohort", parent="root", weight="2"), co("root", gq(gpu="50"))],
    ),
    # Kueue: the Cohort's resources seen from cq are 10, from child-cohort 50.
    Case(
        "resource share affected by borrowing limit",
        {(D, GPU): "10"},
        cq("cq", gq(gpu="0"), cohort_name="child-cohort"),
        {"cq": (1000, GPU, True), "child-cohort": (200, GPU, True), "root": ZERO},
        cohorts=[co("child-cohort", gq(gpu=("0", "10", None)), parent="root"), co("root", gq(gpu="50"))],
    ),
    # Kueue saturates 1E cpu to its "unlimited" amount; kqueue's exact integers give the same
    # rounded value: a tiny positive ratio rounds up to 1.
    Case(
        "borrowing against unlimited lendable capacity (exabyte-scale quota)",
        {(D, "cpu"): "1"},
        cq("cq", gq(cpu="0")),
        {"cq": (1, "cpu", True), "lending-cq": ZERO, "test-cohort": ZERO},
        lending=cq("lending-cq", gq(cpu="1E")),
    ),
]


def _engine(case: Case) -> Engine:
    flavors = [make_flavor(f).obj() for f in (D, "on-demand", "spot")]
    objects: list[object] = [*flavors, *case.cohorts, case.cq]
    if case.lending is not None:
        objects.append(case.lending)
    for i, ((flavor, res), amount) in enumerate(sorted(case.usage.items())):
        objects.append(simple(kwl(f"workload-{i}", "default-namespace", requests={res: amount}), "cq", flavor))
    engine = build_engine(objects)  # type: ignore[arg-type]
    engine.set_fair_sharing(FairSharingConfig())
    return engine


def _view(share: Share) -> tuple[int, str | None, bool]:
    return (share.rounded(), share.dominant, share.borrowing)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_dominant_resource_share(case: Case) -> None:
    engine = _engine(case)
    extra = {(FlavorName(f), ResourceName(r)): q(r, v) for (f, r), v in case.extra.items()}
    snapshot = engine.cache.snapshot()
    nodes: dict[str, Node] = {str(k): v for k, v in snapshot.cluster_queues.items()}
    nodes.update({str(k): v for k, v in snapshot.cohorts.items()})
    got = {name: _view(share_of(node, extra)) for name, node in nodes.items()}
    assert got == case.want
    # Without extra usage, the engine's public accessors give the status values.
    if not case.extra:
        for cq_name in snapshot.cluster_queues:
            share = engine.cluster_queue_share(ClusterQueueName(cq_name))
            assert share is not None and _view(share) == case.want[cq_name]
        for cohort_name in snapshot.cohorts:
            share = engine.cohort_share(CohortName(cohort_name))
            assert share is not None and _view(share) == case.want[cohort_name]


def test_shares_are_none_with_fair_sharing_off() -> None:
    engine = _engine(CASES[2])
    engine.set_fair_sharing(None)
    assert engine.cluster_queue_share(ClusterQueueName("cq")) is None
    assert engine.cohort_share(CohortName("test-cohort")) is None


ON_DEMAND = (FlavorName("on-demand"), ResourceName("cpu"))
SPOT = (FlavorName("spot"), ResourceName("cpu"))


@pytest.mark.parametrize(
    ("borrowed", "requested", "want"),
    [
        pytest.param({ON_DEMAND}, {ON_DEMAND: 1}, True, id="borrows on requested flavor"),
        pytest.param({SPOT}, {ON_DEMAND: 1}, False, id="borrows on unrequested flavor only"),
        pytest.param({ON_DEMAND, SPOT}, {SPOT: 1}, True, id="borrows on both, requests one"),
        pytest.param(set(), {ON_DEMAND: 1}, False, id="no borrowing"),
        pytest.param({ON_DEMAND}, {}, False, id="nil requestedFRs"),
    ],
)
def test_is_borrowing_on(borrowed: set[tuple[FlavorName, ResourceName]], requested: dict[tuple[FlavorName, ResourceName], int], want: bool) -> None:
    share = Share(Fraction(1), Fraction(1) if borrowed else Fraction(0), None, frozenset(borrowed))
    assert share.borrowing_on(requested) is want


@pytest.mark.parametrize(
    ("weight", "ratio", "want"),
    [
        pytest.param(Fraction(0), Fraction(100), math.inf, id="zero weight returning Inf"),
        pytest.param(Fraction(1), Fraction(0), 0.0, id="zero unweighted ratio returns 0"),
        pytest.param(Fraction(2), Fraction(400), 200.0, id="regular integer division"),
        pytest.param(Fraction(4), Fraction(10), 2.5, id="decimal division"),
    ],
)
def test_precise_weighted_share(weight: Fraction, ratio: Fraction, want: float) -> None:
    """Kueue's TestPreciseWeightedShareSerialized, on the float the metrics export."""
    assert Share(weight, ratio).precise() == want
