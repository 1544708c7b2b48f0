"""Objects from create flags: kueuectl's syntax, errors naming the flag and the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kqueue.cli.kubectl import objects
from kqueue.cli.kubectl.objects import FlagError


@dataclass
class QuotaCase:
    name: str
    nominal: list[str]
    borrowing: list[str] = field(default_factory=list)
    lending: list[str] = field(default_factory=list)
    want: list[dict[str, Any]] | None = None
    want_error: str = ""


def _rq(name: str, nominal: str, **limits: str) -> dict[str, Any]:
    return {"name": name, "nominalQuota": nominal, **limits}


QUOTA_CASES = [
    QuotaCase(
        "one flavor, two resources",
        ["default:cpu=9;memory=36Gi"],
        want=[
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {"name": "default", "resources": [_rq("cpu", "9"), _rq("memory", "36Gi")]}
                ],
            }
        ],
    ),
    QuotaCase(
        "flavors covering the same resources share a group, in the group's resource order",
        ["alpha:cpu=9;memory=36Gi,beta:memory=72Gi;cpu=18"],
        want=[
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {"name": "alpha", "resources": [_rq("cpu", "9"), _rq("memory", "36Gi")]},
                    {"name": "beta", "resources": [_rq("cpu", "18"), _rq("memory", "72Gi")]},
                ],
            }
        ],
    ),
    QuotaCase(
        "repeated flags and disjoint resources make separate groups",
        ["default:cpu=4", "gpu:nvidia.com/gpu=8"],
        want=[
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [_rq("cpu", "4")]}],
            },
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "gpu", "resources": [_rq("nvidia.com/gpu", "8")]}],
            },
        ],
    ),
    QuotaCase(
        "borrowing and lending limits join the flavor's resources",
        ["default:cpu=9;memory=36Gi"],
        borrowing=["default:cpu=1"],
        lending=["default:memory=1Gi;cpu=2"],
        want=[
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default",
                        "resources": [
                            _rq("cpu", "9", borrowingLimit="1", lendingLimit="2"),
                            _rq("memory", "36Gi", lendingLimit="1Gi"),
                        ],
                    }
                ],
            }
        ],
    ),
    QuotaCase("no flavor", ["cpu=9"], want_error="expected FLAVOR:RESOURCE=QUANTITY"),
    QuotaCase("no quantity", ["default:cpu"], want_error="'cpu' is not RESOURCE=QUANTITY"),
    QuotaCase(
        "bad quantity", ["default:cpu=lots"], want_error="cpu: 'lots' is not a quantity (allowed:"
    ),
    QuotaCase("resource twice", ["default:cpu=1;cpu=2"], want_error="resource cpu is given twice"),
    QuotaCase(
        "flavor twice",
        ["default:cpu=1", "default:cpu=2"],
        want_error="flavor default is given twice",
    ),
    QuotaCase(
        "overlapping resource sets",
        ["a:cpu=1;memory=1Gi,b:cpu=1"],
        want_error="flavor b covers cpu but flavor a covers cpu, memory",
    ),
    QuotaCase(
        "limit for a flavor without nominal quota",
        ["default:cpu=1"],
        borrowing=["spot:cpu=1"],
        want_error="--borrowing-limit 'spot:cpu=1': flavor spot has no --nominal-quota",
    ),
    QuotaCase(
        "limit for a resource without nominal quota",
        ["default:cpu=1"],
        lending=["default:memory=1Gi"],
        want_error="resource memory of flavor default has no --nominal-quota",
    ),
]


@pytest.mark.parametrize("case", QUOTA_CASES, ids=lambda c: c.name)
def test_resource_groups(case: QuotaCase) -> None:
    if case.want_error:
        with pytest.raises(FlagError, match=None) as err:
            objects.resource_groups(case.nominal, case.borrowing, case.lending)
        assert case.want_error in str(err.value)
        return
    assert objects.resource_groups(case.nominal, case.borrowing, case.lending) == case.want


def test_cluster_queue_from_flags_is_kueuectls() -> None:
    cq = objects.cluster_queue(
        "cq",
        cohort="c",
        queuing_strategy="StrictFIFO",
        namespace_selector=["team=a"],
        reclaim_within_cohort="Any",
        preemption_within_cluster_queue="LowerPriority",
        nominal_quota=["default:cpu=9;memory=36Gi"],
    )
    spec = cq["spec"]
    assert cq["metadata"] == {"name": "cq"}
    assert spec["cohortName"] == "c"
    assert spec["queueingStrategy"] == "StrictFIFO"
    assert spec["namespaceSelector"] == {"matchLabels": {"team": "a"}}
    assert spec["preemption"]["reclaimWithinCohort"] == "Any"
    assert spec["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert spec["resourceGroups"][0]["flavors"][0]["name"] == "default"


def test_cluster_queue_without_selector_admits_every_namespace() -> None:
    assert objects.cluster_queue("cq")["spec"]["namespaceSelector"] == {}


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        pytest.param(
            {"queuing_strategy": "Fifo"},
            "ClusterQueue cq: spec.queueingStrategy: unsupported value 'Fifo' (allowed: "
            "'StrictFIFO' or 'BestEffortFIFO') (from --queuing-strategy)",
            id="unknown queueing strategy",
        ),
        pytest.param(
            {"cohort": "Bad_Name"},
            "ClusterQueue cq: spec.cohortName: 'Bad_Name' is not a valid name",
            id="invalid cohort name",
        ),
        pytest.param(
            {"reclaim_within_cohort": "Always"},
            "spec.preemption.reclaimWithinCohort: unsupported value 'Always'",
            id="unknown reclaim policy",
        ),
        pytest.param(
            {"namespace_selector": ["team"]},
            "--namespace-selector 'team': expected KEY=VALUE",
            id="selector without a value",
        ),
    ],
)
def test_cluster_queue_errors_name_the_field_and_flag(kwargs: dict[str, Any], want: str) -> None:
    with pytest.raises(FlagError) as err:
        objects.cluster_queue("cq", **kwargs)
    assert want in str(err.value)


def test_bad_name_names_the_argument() -> None:
    with pytest.raises(FlagError) as err:
        objects.local_queue("Not_A_Name", "team", "cq")
    assert "LocalQueue team/Not_A_Name: metadata.name" in str(err.value)
    assert "(from NAME)" in str(err.value)


@pytest.mark.parametrize(
    ("values", "want"),
    [
        pytest.param(
            ["key1=value:NoSchedule"],
            [{"key": "key1", "value": "value", "effect": "NoSchedule"}],
            id="key, value and effect",
        ),
        pytest.param(
            ["key2:NoExecute"], [{"key": "key2", "effect": "NoExecute"}], id="key and effect"
        ),
        pytest.param(
            ["a:NoSchedule,b=1:PreferNoSchedule"],
            [
                {"key": "a", "effect": "NoSchedule"},
                {"key": "b", "value": "1", "effect": "PreferNoSchedule"},
            ],
            id="comma-separated",
        ),
    ],
)
def test_taints(values: list[str], want: list[dict[str, str]]) -> None:
    assert objects.taints(values) == want


@pytest.mark.parametrize(
    ("values", "want"),
    [
        pytest.param(["key1"], "expected KEY[=VALUE]:EFFECT", id="taint without effect"),
        pytest.param(
            ["k:Sometimes"],
            "unknown effect 'Sometimes' (allowed: NoSchedule, PreferNoSchedule, NoExecute)",
            id="unknown effect",
        ),
        pytest.param(
            ["k:NoSchedule,k=v:NoSchedule"],
            "taint k:NoSchedule is given twice",
            id="same key and effect twice",
        ),
    ],
)
def test_bad_taints(values: list[str], want: str) -> None:
    with pytest.raises(FlagError) as err:
        objects.taints(values)
    assert want in str(err.value)


def test_tolerations_in_kueuectls_forms() -> None:
    got = objects.tolerations(
        ["key1=value:NoSchedule,key2:NoExecute,key3=value,key4,:PreferNoSchedule"]
    )
    assert got == [
        {"key": "key1", "operator": "Equal", "value": "value", "effect": "NoSchedule"},
        {"key": "key2", "operator": "Exists", "effect": "NoExecute"},
        {"key": "key3", "operator": "Equal", "value": "value"},
        {"key": "key4", "operator": "Exists"},
        {"operator": "Exists", "effect": "PreferNoSchedule"},
    ]


def test_resource_flavor_from_flags_validates() -> None:
    rf = objects.resource_flavor(
        "spot",
        node_labels=["instance-type=spot,zone=a"],
        node_taints=["spot=true:NoSchedule"],
        toleration_specs=["spot=true:NoSchedule"],
    )
    assert rf["spec"]["nodeLabels"] == {"instance-type": "spot", "zone": "a"}
    assert rf["spec"]["nodeTaints"] == [{"key": "spot", "value": "true", "effect": "NoSchedule"}]
