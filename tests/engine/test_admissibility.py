"""Workloads whose resources can never run stay pending as ``Misconfigured``.

Ported from Kueue, with its case names: ``TestSummarize`` and ``TestValidatePodSpec``
(``pkg/util/limitrange/limitrange_test.go``), ``TestAdjustResources``, ``TestValidateResources``
and ``TestValidateLimitRange`` (``pkg/workload/resources_test.go``), and the two
``Misconfigured`` cases of ``TestSchedule`` (``pkg/scheduler/scheduler_test.go``). Not ported:
the cases on RuntimeClass overhead (kqueue takes the overhead written in the pod spec) and on
pod-level resources (``spec.resources`` of a pod, not modelled yet). Then kqueue's own cases through the
engine: the pending reason and message, and what changes when LimitRanges come and go.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kqueue.api.v1alpha1.podtemplate import PodSpec
from kqueue.engine import from_api
from kqueue.engine.admissibility import adjust, effective_containers, misconfiguration
from kqueue.engine.limitrange import (
    ABOVE_MAX,
    BELOW_MIN,
    EMPTY,
    Summary,
    pod_requests,
    summarize,
    validate,
    with_defaults,
)
from kqueue.engine.types import (
    ContainerResources,
    LimitRangeItem,
    LimitType,
    PodSet,
    PodSetName,
    Workload,
)

from . import test_kueue_parity_scheduler as sched
from .builders import (
    amounts,
    container,
    key,
    make_cq,
    make_engine,
    make_flavor,
    make_workload,
    pending_reasons,
    t,
)
from .parity_support import build_engine, queue_dump

C = LimitType.CONTAINER
P = LimitType.POD


def item(type_: LimitType, **values: dict[str, str]) -> LimitRangeItem:
    """Kueue's ``MakeLimitRange().WithType(type_).WithValue(field, resource, value)``."""
    return LimitRangeItem(
        type_,
        max=amounts(values.get("max")),
        min=amounts(values.get("min")),
        default=amounts(values.get("default")),
        default_request=amounts(values.get("default_request")),
    )


def pod_set(
    name: str, *containers: ContainerResources, overhead: dict[str, str] | None = None
) -> PodSet:
    return PodSet(PodSetName(name), 1, containers=containers, overhead=amounts(overhead))


def workload(*pod_sets: PodSet) -> Workload:
    return Workload("default", "wl", "lq", pod_sets)


# -- TestSummarize --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummarizeCase:
    name: str
    ranges: list[list[LimitRangeItem]]
    want_pod: LimitRangeItem


SUMMARIZE_CASES = [
    SummarizeCase("empty", [], LimitRangeItem(P)),
    SummarizeCase(
        "podDefaults",
        [
            [item(P, default={"cpu": "2"}, default_request={"cpu": "500m", "memory": "1Gi"})],
            [item(P, default={"memory": "2Gi"}, default_request={"cpu": "1"})],
        ],
        item(
            P,
            default={"cpu": "2", "memory": "2Gi"},
            default_request={"cpu": "500m", "memory": "1Gi"},
        ),
    ),
    # Kueue's case also merges maxLimitRequestRatio, which neither Kueue nor kqueue checks.
    SummarizeCase(
        "limits",
        [
            [item(P, max={"cpu": "2"}, min={"cpu": "500m", "memory": "1Gi"})],
            [item(P, max={"memory": "2Gi"}, min={"cpu": "1"})],
        ],
        item(P, max={"cpu": "2", "memory": "2Gi"}, min={"cpu": "1", "memory": "1Gi"}),
    ),
]


@pytest.mark.parametrize("case", SUMMARIZE_CASES, ids=[c.name for c in SUMMARIZE_CASES])
def test_summarize(case: SummarizeCase) -> None:
    got = summarize(case.ranges)
    assert got.pod == case.want_pod
    assert got.container == LimitRangeItem(C)
    assert got.present == bool(case.ranges)


# -- TestValidatePodSpec --------------------------------------------------------------------------

POD_SPEC = (
    container("c0", {"cpu": "1", "memory": "2Gi", "example.com/mainContainerGpu": "2"}),
    container("c1", {"cpu": "1.5", "example.com/gpu": "2"}),
    container("i0", {"cpu": "4", "memory": "2Gi"}, init=True),
    container(
        "i1", {"cpu": "1.5", "example.com/gpu": "2", "example.com/initContainerGpu": "2"}, init=True
    ),
)
POD_OVERHEAD = amounts({"cpu": "1", "memory": "1Gi", "example.com/gpu": "1"})


@dataclass(frozen=True)
class PodSpecCase:
    name: str
    summary: Summary
    # (container or "pod", message, resources), in Kueue's order.
    want: list[tuple[str, str, list[str]]] = field(default_factory=list)
    containers: tuple[ContainerResources, ...] = POD_SPEC


POD_SPEC_CASES = [
    PodSpecCase("empty", EMPTY),
    PodSpecCase(
        "init container over",
        summarize([[item(C, max={"example.com/initContainerGpu": "1"})]]),
        [("i1", ABOVE_MAX, ["example.com/initContainerGpu"])],
    ),
    PodSpecCase(
        "init container under",
        summarize([[item(C, min={"example.com/initContainerGpu": "3"})]]),
        [("i1", BELOW_MIN, ["example.com/initContainerGpu"])],
    ),
    PodSpecCase(
        "container over",
        summarize([[item(C, max={"example.com/mainContainerGpu": "1"})]]),
        [("c0", ABOVE_MAX, ["example.com/mainContainerGpu"])],
    ),
    PodSpecCase(
        "container under",
        summarize([[item(C, min={"example.com/mainContainerGpu": "3"})]]),
        [("c0", BELOW_MIN, ["example.com/mainContainerGpu"])],
    ),
    PodSpecCase(
        "pod over",
        summarize([[item(P, max={"cpu": "4"})]]),
        [("pod", ABOVE_MAX, ["cpu"])],
    ),
    PodSpecCase(
        "pod under",
        summarize([[item(P, min={"cpu": "6"})]]),
        [("pod", BELOW_MIN, ["cpu"])],
    ),
    PodSpecCase(
        "multiple",
        summarize(
            [
                [item(P, max={"cpu": "4"})],
                [item(C, min={"example.com/mainContainerGpu": "3"})],
                [item(C, max={"example.com/initContainerGpu": "1"})],
            ]
        ),
        [
            ("i1", ABOVE_MAX, ["example.com/initContainerGpu"]),
            ("c0", BELOW_MIN, ["example.com/mainContainerGpu"]),
            ("pod", ABOVE_MAX, ["cpu"]),
        ],
    ),
    PodSpecCase(
        "multiple valid",
        summarize(
            [
                [item(P, max={"cpu": "5"})],
                [item(C, min={"example.com/mainContainerGpu": "1"})],
                [item(C, max={"example.com/initContainerGpu": "2"})],
            ]
        ),
    ),
    PodSpecCase(
        "container under with explicit zero",
        summarize([[item(C, min={"example.com/mainContainerGpu": "3"})]]),
        [("c", BELOW_MIN, ["example.com/mainContainerGpu"])],
        (container("c", {"example.com/mainContainerGpu": "0"}),),
    ),
    PodSpecCase(
        "pod under with explicit zero",
        summarize([[item(P, min={"cpu": "6"})]]),
        [("pod", BELOW_MIN, ["cpu"])],
        (container("c", {"cpu": "0"}),),
    ),
]


@pytest.mark.parametrize("case", POD_SPEC_CASES, ids=[c.name for c in POD_SPEC_CASES])
def test_validate_pod_spec(case: PodSpecCase) -> None:
    overhead = POD_OVERHEAD if case.containers is POD_SPEC else {}
    got = validate(case.containers, overhead, case.summary)
    assert [
        (v.container.name if v.container else "pod", v.message, [r for r, _, _ in v.amounts])
        for v in got
    ] == case.want


# -- TestAdjustResources ------------------------------------------------------------------------


Row = tuple[str, dict[str, int], dict[str, int]]


def _view(cs: tuple[ContainerResources, ...]) -> list[Row]:
    return [(c.name, {str(r): v for r, v in c.requests.items()},
             {str(r): v for r, v in c.limits.items()}) for c in cs]


@dataclass(frozen=True)
class AdjustCase:
    name: str
    summary: Summary
    pod_sets: list[PodSet]
    # per pod set: the containers as their pods will run them (name, requests, limits)
    want: list[list[tuple[str, dict[str, str], dict[str, str]]]]


def _want(rows: list[tuple[str, dict[str, str], dict[str, str]]]) -> list[Row]:
    def ints(values: dict[str, str]) -> dict[str, int]:
        return {str(r): v for r, v in amounts(values).items()}

    return [(n, ints(r), ints(lim)) for n, r, lim in rows]


ADJUST_CASES = [
    AdjustCase(
        "Handle container limit range",
        summarize(
            [[item(C, default={"cpu": "4"}, default_request={"cpu": "3"}, max={"cpu": "5"},
                   min={"cpu": "2"})]]
        ),
        [
            pod_set("a", container("i", init=True), container("c")),
            pod_set("b", container("i", init=True), container("c", limits={"cpu": "6"})),
            pod_set("c", container("i", init=True), container("c", {"cpu": "1"})),
        ],
        [
            [("i", {"cpu": "3"}, {"cpu": "4"}), ("c", {"cpu": "3"}, {"cpu": "4"})],
            [("i", {"cpu": "3"}, {"cpu": "4"}), ("c", {"cpu": "3"}, {"cpu": "6"})],
            [("i", {"cpu": "3"}, {"cpu": "4"}), ("c", {"cpu": "1"}, {"cpu": "4"})],
        ],
    ),
    AdjustCase(
        "Handle empty container limit range",
        summarize([[item(C)]]),
        [pod_set("a", container("c")), pod_set("b", container("c", {"cpu": "1"}, {"cpu": "6"}))],
        [[("c", {}, {})], [("c", {"cpu": "1"}, {"cpu": "6"})]],
    ),
    AdjustCase(
        "Apply limits to requests",
        EMPTY,
        [
            pod_set(
                "a",
                container("i", limits={"cpu": "1", "memory": "1"}, init=True),
                container("c", limits={"cpu": "1", "memory": "1Gi"}),
            ),
            pod_set(
                "b",
                container("i", {"cpu": "2"}, {"cpu": "3", "memory": "1"}, init=True),
                container("c", {"cpu": "2"}, {"cpu": "3", "memory": "1Gi"}),
            ),
            pod_set(
                "c",
                container("i", {"memory": "1"}, {"cpu": "1", "memory": "3"}, init=True),
                container("c", {"memory": "1Gi"}, {"cpu": "1", "memory": "3Gi"}),
            ),
            pod_set("d", container("i", limits={"cpu": "1"}, init=True),
                    container("c", limits={"cpu": "1"})),
            pod_set("e", container("i", {"memory": "1"}, init=True),
                    container("c", {"memory": "1Gi"})),
        ],
        [
            [("i", {"cpu": "1", "memory": "1"}, {"cpu": "1", "memory": "1"}),
             ("c", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})],
            [("i", {"cpu": "2", "memory": "1"}, {"cpu": "3", "memory": "1"}),
             ("c", {"cpu": "2", "memory": "1Gi"}, {"cpu": "3", "memory": "1Gi"})],
            [("i", {"cpu": "1", "memory": "1"}, {"cpu": "1", "memory": "3"}),
             ("c", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "3Gi"})],
            [("i", {"cpu": "1"}, {"cpu": "1"}), ("c", {"cpu": "1"}, {"cpu": "1"})],
            [("i", {"memory": "1"}, {}), ("c", {"memory": "1Gi"}, {})],
        ],
    ),
]


@pytest.mark.parametrize("case", ADJUST_CASES, ids=[c.name for c in ADJUST_CASES])
def test_adjust_resources(case: AdjustCase) -> None:
    got = [_view(effective_containers(ps, case.summary)) for ps in case.pod_sets]
    assert got == [_want(rows) for rows in case.want]
    # The pod set's requests become the pods' requests with those containers.
    adjusted = adjust(workload(*case.pod_sets), case.summary)
    for ps in adjusted.pod_sets:
        assert ps.requests == pod_requests(effective_containers(ps, case.summary), {})


# -- TestValidateResources and TestValidateLimitRange ---------------------------------------------


@dataclass(frozen=True)
class MisconfiguredCase:
    name: str
    pod_sets: list[PodSet]
    want: str | None
    summary: Summary = EMPTY


MISCONFIGURED_CASES = [
    # resources_test.go TestValidateResources
    MisconfiguredCase(
        "valid workload",
        [
            pod_set("a", container("c", {"cpu": "100m", "memory": "100Mi"},
                                   {"cpu": "200m", "memory": "200Mi"})),
            pod_set("b", container("i", {"cpu": "100m"}, {"cpu": "200m"}, init=True),
                    container("c")),
        ],
        None,
    ),
    MisconfiguredCase(
        "invalid workload; multiple PodSet has invalid initContainers and containers",
        [
            pod_set(
                "a",
                container("i", {"memory": "200Mi", "cpu": "100m"},
                          {"memory": "100Mi", "cpu": "200m"}, init=True),
                container("c", {"cpu": "300m"}, {"cpu": "200m"}),
            ),
            pod_set(
                "b",
                container("i", {"cpu": "300m"}, {"cpu": "200m"}, init=True),
                container("c", {"cpu": "100m"}, {"cpu": "200m"}),
            ),
        ],
        "resources validation failed: "
        "pod set a, init container i: requests must not exceed its limits (memory: 200Mi > 100Mi); "
        "pod set a, container c: requests must not exceed its limits (cpu: 300m > 200m); "
        "pod set b, init container i: requests must not exceed its limits (cpu: 300m > 200m)",
    ),
    # resources_test.go TestValidateLimitRange
    MisconfiguredCase(
        "valid case with LimitRange",
        [pod_set("alpha", container("c", {"cpu": "300m"})),
         pod_set("beta", container("c", {"cpu": "200m"}))],
        None,
        summarize([[item(P, max={"cpu": "1000m"})]]),
    ),
    MisconfiguredCase(
        "valid case without LimitRange",
        [pod_set("alpha", container("c", {"cpu": "300m"})),
         pod_set("beta", container("c", {"cpu": "200m"}))],
        None,
    ),
    MisconfiguredCase(
        "pod doesn't satisfy LimitRange constraints",
        [pod_set("alpha", container("s", {"cpu": "300m"}, sidecar=True),
                 container("c", {"cpu": "300m"}))],
        "resources didn't satisfy LimitRange constraints: pod set alpha: requests must not be "
        "above the limitRange max (cpu: 600m > 500m)",
        summarize([[item(P, max={"cpu": "500m"})]]),
    ),
    # kqueue's cases
    MisconfiguredCase(
        "limits only: the limits are the requests",
        [pod_set("main", container("train", limits={"cpu": "2"}))],
        None,
        summarize([[item(C, min={"cpu": "1"}, max={"cpu": "2"})]]),
    ),
    MisconfiguredCase(
        "a default limit below the request: requests exceed limits",
        [pod_set("main", container("train", {"cpu": "2"}))],
        "resources validation failed: pod set main, container train: requests must not exceed "
        "its limits (cpu: 2 > 1)",
        summarize([[item(C, default={"cpu": "1"})]]),
    ),
    MisconfiguredCase(
        "container below a LimitRange min",
        [pod_set("main", container("train", {"memory": "64Mi"}))],
        "resources didn't satisfy LimitRange constraints: pod set main, container train: "
        "requests must not be below the limitRange min (memory: 64Mi < 128Mi)",
        summarize([[item(C, min={"memory": "128Mi"})]]),
    ),
    MisconfiguredCase(
        "requests above limits are reported alone, before LimitRange violations",
        [pod_set("main", container("train", {"cpu": "3"}, {"cpu": "2"}))],
        "resources validation failed: pod set main, container train: requests must not exceed "
        "its limits (cpu: 3 > 2)",
        summarize([[item(C, max={"cpu": "1"})]]),
    ),
    MisconfiguredCase(
        "a pod set without containers is not checked",
        [PodSet(PodSetName("main"), 1, {})],
        None,
        summarize([[item(P, min={"cpu": "1"})]]),
    ),
]


@pytest.mark.parametrize("case", MISCONFIGURED_CASES, ids=[c.name for c in MISCONFIGURED_CASES])
def test_misconfiguration(case: MisconfiguredCase) -> None:
    assert misconfiguration(workload(*case.pod_sets), case.summary) == case.want


# -- through the engine -------------------------------------------------------------------------



def test_misconfigured_workload_stays_pending_and_others_are_admitted() -> None:
    engine = make_engine(
        make_flavor("default").obj(), make_cq("cq").quota("default", cpu="10").obj()
    )
    engine.upsert_workload(
        make_workload("bad").containers(container("train", {"cpu": "2"}, {"cpu": "1"})).obj()
    )
    engine.upsert_workload(
        make_workload("good").created(1).containers(container("train", {"cpu": "2"})).obj()
    )
    # The older one is the head first: set aside, it does not hold back the other.
    result = engine.schedule(t(10))
    assert pending_reasons(result) == {"bad": "Misconfigured"}
    [pending] = result.pending
    assert pending.message == (
        "resources validation failed: pod set main, container train: requests must not exceed "
        "its limits (cpu: 2 > 1)"
    )
    result = engine.schedule(t(11))
    assert [a.workload for a in result.admitted] == [key("good")]
    assert result.pending == ()
    # Fixing the workload (limits raised) admits it.
    engine.upsert_workload(
        make_workload("bad").containers(container("train", {"cpu": "2"}, {"cpu": "2"})).obj()
    )
    result = engine.schedule(t(20))
    assert [a.workload for a in result.admitted] == [key("bad")]


def test_limit_range_max_then_deleted() -> None:
    engine = make_engine(
        make_flavor("default").obj(), make_cq("cq").quota("default", cpu="10").obj()
    )
    engine.set_limit_range("default", "max-cpu", [item(C, max={"cpu": "2"})])
    engine.upsert_workload(make_workload("big").containers(container("train", {"cpu": "4"})).obj())
    result = engine.schedule(t(10))
    assert pending_reasons(result) == {"big": "Misconfigured"}
    assert result.pending[0].message == (
        "resources didn't satisfy LimitRange constraints: pod set main, container train: "
        "requests must not be above the limitRange max (cpu: 4 > 2)"
    )
    # Set aside: the next cycle has nothing to try until something changes.
    assert engine.schedule(t(20)).pending == ()
    engine.delete_limit_range("default", "max-cpu")
    result = engine.schedule(t(30))
    assert [a.workload for a in result.admitted] == [key("big")]


def test_limit_range_of_another_namespace_does_not_apply() -> None:
    engine = make_engine(
        make_flavor("default").obj(), make_cq("cq").quota("default", cpu="10").obj()
    )
    engine.set_limit_range("other", "max-cpu", [item(C, max={"cpu": "2"})])
    engine.upsert_workload(make_workload("big").containers(container("train", {"cpu": "4"})).obj())
    assert [a.workload for a in engine.schedule(t(10)).admitted] == [key("big")]


def test_default_request_is_charged_and_follows_the_limit_range() -> None:
    """A container without a cpu request runs with the LimitRange's default request, so that is
    what its workload is charged; when the LimitRange goes, the pending workload's charge goes
    back to what it writes."""
    engine = make_engine(
        make_flavor("default").obj(), make_cq("cq").quota("default", cpu="3", memory="1Gi").obj()
    )
    engine.set_limit_range("default", "defaults", [item(C, default_request={"cpu": "4"})])
    engine.upsert_workload(
        make_workload("a").containers(container("train", {"memory": "64Mi"})).obj()
    )
    info = engine.pending_workload(key("a"))
    assert info is not None
    assert dict(info.obj.pod_sets[0].requests) == amounts({"cpu": "4", "memory": "64Mi"})
    result = engine.schedule(t(10))
    assert pending_reasons(result) == {"a": "ExceedsMaxQuota"}
    engine.delete_limit_range("default", "defaults")
    info = engine.pending_workload(key("a"))
    assert info is not None
    assert dict(info.obj.pod_sets[0].requests) == amounts({"memory": "64Mi"})
    result = engine.schedule(t(20))
    assert [a.workload for a in result.admitted] == [key("a")]
    [admitted] = result.admitted
    assert engine.usage(admitted.cluster_queue) == {("default", "memory"): 64 * 1024 * 1024}


# -- the adapter --------------------------------------------------------------------------------


def test_limit_range_gets_the_api_servers_defaults() -> None:
    ns, name, items = from_api.limit_range(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "limits", "namespace": "team-a"},
            "spec": {
                "limits": [
                    {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}},
                    {"type": "Pod", "max": {"cpu": "4"}},
                    {"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}},
                ]
            },
        }
    )
    assert (ns, name) == ("team-a", "limits")
    assert items == (
        item(C, max={"cpu": "2"}, min={"memory": "64Mi"}, default={"cpu": "2"},
             default_request={"cpu": "2", "memory": "64Mi"}),
        item(P, max={"cpu": "4"}),
    )


def test_bad_limit_range_quantity_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"spec.limits\[0\].max\[cpu\]"):
        from_api.limit_range(
            {
                "metadata": {"name": "x"},
                "spec": {"limits": [{"type": "Pod", "max": {"cpu": "lots"}}]},
            }
        )


_QTY = st.sampled_from(["0", "100m", "1", "2", "1500m", "4"])
_RES = st.sampled_from(["cpu", "memory", "example.com/gpu"])
_LIST = st.dictionaries(_RES, _QTY, max_size=3)
_CONTAINER = st.fixed_dictionaries(
    {"requests": _LIST, "limits": _LIST, "kind": st.sampled_from(["main", "init", "sidecar"])}
)


@given(st.lists(_CONTAINER, min_size=1, max_size=5), _LIST)
def test_engine_pod_requests_match_the_api_models(
    specs: list[dict[str, object]], overhead: dict[str, str]
) -> None:
    """The engine recomputes a pod's requests from its containers (for LimitRange defaults):
    without LimitRanges it must give what the API model computes for the Workload."""
    main = [
        {"name": f"c{i}", "resources": {"requests": s["requests"], "limits": s["limits"]}}
        for i, s in enumerate(specs)
        if s["kind"] == "main"
    ] or [{"name": "only"}]
    init = [
        {
            "name": f"i{i}",
            "resources": {"requests": s["requests"], "limits": s["limits"]},
            **({"restartPolicy": "Always"} if s["kind"] == "sidecar" else {}),
        }
        for i, s in enumerate(specs)
        if s["kind"] != "main"
    ]
    spec = PodSpec.model_validate(
        {"containers": main, "initContainers": init, "overhead": overhead}, strict=False
    )
    containers = from_api._containers(spec)
    engine_requests = pod_requests((with_defaults(c, EMPTY) for c in containers), amounts(overhead))
    assert engine_requests == spec.pod_requests()


# -- TestSchedule (scheduler_test.go): the two Misconfigured cases --------------------------------


@dataclass(frozen=True)
class ScheduleCase:
    name: str
    container: ContainerResources
    limit_ranges: list[LimitRangeItem]
    want_message: str


SCHEDULE_CASES = [
    ScheduleCase(
        "container does not satisfy limitRange constraints",
        container("c", {"cpu": "500m"}),
        [item(C, max={"cpu": "300m"})],
        "resources didn't satisfy LimitRange constraints: pod set one, container c: requests must "
        "not be above the limitRange max (cpu: 500m > 300m)",
    ),
    ScheduleCase(
        "container resource requests exceed limits",
        container("c", {"cpu": "200m"}, {"cpu": "100m"}),
        [],
        "resources validation failed: pod set one, container c: requests must not exceed its "
        "limits (cpu: 200m > 100m)",
    ),
]


@pytest.mark.parametrize("case", SCHEDULE_CASES, ids=[c.name for c in SCHEDULE_CASES])
def test_schedule(case: ScheduleCase) -> None:
    """On TestSchedule's fixtures: ClusterQueue sales is StrictFIFO, so the workload stays at
    the head of its queue (Kueue's wantLeft), Misconfigured."""
    wl = make_workload("new", "sales").queue("main").pod_set("one", 1).containers(
        case.container
    ).obj()
    engine = build_engine(
        [*sched.SCHEDULE_FLAVORS, *sched.SCHEDULE_CQS, *sched.SCHEDULE_LQS],
        namespaces=sched.SCHEDULE_NAMESPACES,
    )
    if case.limit_ranges:
        engine.set_limit_range("sales", "alpha", case.limit_ranges)
    engine.upsert_workload(wl)
    result = engine.schedule(t(2000))
    assert result.admitted == ()
    assert [(p.workload, str(p.reason), p.message) for p in result.pending] == [
        ("sales/new", "Misconfigured", case.want_message)
    ]
    left, inadmissible = queue_dump(engine)
    assert left == {"sales": ["sales/new"]}
    assert inadmissible == {}
