"""Whether a waiting Workload's pod sets still match its object (kqueue/api/integrations/
matching.py): Kueue's TestComparePodSetSlices (pkg/util/equality/podset_test.go) as named cases.
Where kqueue compares differently on purpose, the case is ``xfail(strict=True)`` asserting
Kueue's answer, with the reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kqueue.api.integrations.matching import pod_set_changes
from kqueue.api.v1alpha1.workload import PodSet

Obj = dict[str, Any]


def ps(
    name: str = "ps",
    count: int = 10,
    *,
    min_count: int | None = 5,
    requests: Obj | None = None,
    init_requests: Obj | None = None,
    image: str = "img",
    **spec: Any,
) -> PodSet:
    """Kueue's MakePodSet(name, count).SetMinimumCount(5), with the options its cases use."""
    pod: Obj = {
        "containers": [{"name": "c", "image": image, "resources": {"requests": requests or {}}}],
        **spec,
    }
    if init_requests is not None:
        pod["initContainers"] = [
            {"name": "init", "image": "img1", "resources": {"requests": init_requests}}
        ]
    return PodSet.model_validate(
        {"name": name, "count": count, "minCount": min_count, "template": {"spec": pod}}
    )


SPOT = {"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
DEMAND = {**SPOT, "value": "demand"}


@dataclass(frozen=True)
class Case:
    a: list[PodSet]
    b: list[PodSet]
    want_equivalent: bool  # Kueue's answer
    xfail: str = ""  # why kqueue answers otherwise


KUEUE_CASES: dict[str, Case] = {
    "different name": Case(
        [ps("ps")],
        [ps("ps2")],
        True,
        xfail="kqueue releases and counts pods by pod set name: a renamed pod set is a change",
    ),
    "different min count": Case([ps(min_count=5)], [ps(min_count=2)], False),
    "different node selector": Case([ps()], [ps(nodeSelector={"key": "val"})], True),
    "different requests": Case([ps(requests={"res": "1"})], [ps(requests={"res": "2"})], False),
    "different requests in init containers": Case(
        [ps(init_requests={"res": "1"})], [ps(init_requests={"res": "2"})], False
    ),
    "different requests in toleration": Case(
        [ps(tolerations=[SPOT])],
        [ps(tolerations=[DEMAND])],
        False,
        xfail="an evicted object keeps the last admission's tolerations until kqueue restores "
        "the recorded ones; taking them into the Workload would pin the next admission",
    ),
    "different count": Case([ps(count=10)], [ps(count=20)], False),
    "different slice len": Case([ps("a"), ps("b")], [ps("a"), ps("b"), ps("c")], False),
    "different requests in toleration, ignore tolerations": Case(
        [ps(tolerations=[SPOT])], [ps(tolerations=[DEMAND])], True
    ),
    "different requests in node selector": Case(
        [ps(nodeSelector={"key": "val"})], [ps(nodeSelector={"key": "val2"})], True
    ),
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case,
            id=name,
            marks=[pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else [],
        )
        for name, case in KUEUE_CASES.items()
    ],
)
def test_kueue_compare_pod_set_slices(case: Case) -> None:
    assert (pod_set_changes(case.a, case.b) == []) is case.want_equivalent


def test_an_image_change_is_not_a_change_kqueue_admits_on() -> None:
    # Kueue compares whole containers; kqueue only what its admission reads.
    assert pod_set_changes([ps(image="v2")], [ps(image="v1")]) == []


def test_each_change_is_named_for_the_event() -> None:
    want = [ps("main", 4, min_count=None, requests={"cpu": "2", "memory": "1Gi"})]
    have = [ps("main", 2, min_count=None, requests={"cpu": "500m"})]
    assert pod_set_changes(want, have) == [
        "pod set main: 2 pods are now 4",
        "pod set main: a pod's requests cpu 500m are now cpu 2, memory 1Gi",
    ]
    assert pod_set_changes([ps("a"), ps("c")], [ps("a"), ps("b")]) == [
        "pod sets a, b are now a, c"
    ]


def test_a_limit_standing_in_for_a_request_is_the_same_request() -> None:
    limit = PodSet.model_validate(
        {
            "name": "main",
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}
            },
        }
    )
    request = ps("main", 1, min_count=None, requests={"cpu": "1000m"})
    assert pod_set_changes([limit], [request]) == []
