"""A case per validation rule: the manifest that breaks it, and the field path the error names."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kqueue.api.v1alpha1 import (
    ClusterQueue,
    FieldError,
    ValidationFailed,
    Workload,
    parse_object,
    validate,
    validate_update,
)
from kqueue.api.v1alpha1.validation import check, check_update

Doc = dict[str, Any]


def cluster_queue(cohort: str | None = "all") -> Doc:
    spec: Doc = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "on-demand",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "10"},
                            {"name": "memory", "nominalQuota": "32Gi"},
                        ],
                    },
                    {
                        "name": "spot",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "5"},
                            {"name": "memory", "nominalQuota": "16Gi"},
                        ],
                    },
                ],
            },
            {
                "coveredResources": ["example.com/gpu"],
                "flavors": [
                    {"name": "a100", "resources": [{"name": "example.com/gpu", "nominalQuota": 8}]}
                ],
            },
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": spec,
    }


def cohort() -> Doc:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": "4"}]}
                    ],
                }
            ]
        },
    }


def resource_flavor() -> Doc:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "spot"},
        "spec": {
            "nodeLabels": {"lifecycle": "spot"},
            "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
            "tolerations": [
                {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
            ],
        },
    }


def local_queue() -> Doc:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": "team-a"},
        "spec": {"clusterQueue": "team-a"},
    }


def priority_class() -> Doc:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"},
        "value": 100,
    }


def pod_set(name: str = "main", count: int = 2, cpu: str = "1") -> Doc:
    return {
        "name": name,
        "count": count,
        "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        },
    }


def workload(reserved: bool = False) -> Doc:
    doc: Doc = {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "job-a", "namespace": "team-a"},
        "spec": {"queueName": "main", "podSets": [pod_set()], "priority": 10},
    }
    if reserved:
        doc["status"] = {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "reserved",
                    "lastTransitionTime": "2024-05-01T12:00:00Z",
                }
            ],
            "admission": {
                "clusterQueue": "team-a",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": "on-demand"},
                        "resourceUsage": {"cpu": "2"},
                        "count": 2,
                    }
                ],
            },
        }
    return doc


def many_flavors(n: int, resources: list[str]) -> list[Doc]:
    return [
        {"name": f"f{i}", "resources": [{"name": r, "nominalQuota": 1} for r in resources]}
        for i in range(n)
    ]


@dataclass
class Case:
    name: str
    make: Callable[[], Doc]
    edit: Callable[[Doc], object]
    want_path: str
    want_ref: str


def _cq(
    edit: Callable[[Doc], object], path: str, name: str, cohort_name: str | None = "all"
) -> Case:
    return Case(name, lambda: cluster_queue(cohort_name), edit, path, "ClusterQueue team-a")


RG0 = "spec.resourceGroups[0]"
Q00 = f"{RG0}.flavors[0].resources[0]"


def _set(path: list[str | int], value: object) -> Callable[[Doc], object]:
    def edit(doc: Doc) -> None:
        node: Any = doc
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value

    return edit


def _spec(doc: Doc) -> Doc:
    spec = doc["spec"]
    assert isinstance(spec, dict)
    return spec


def _q00(doc: Doc) -> Doc:
    q = _spec(doc)["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert isinstance(q, dict)
    return q


CASES: list[Case] = [
    # --- ClusterQueue ---
    _cq(
        lambda d: _spec(d)["resourceGroups"][0]["flavors"][1].update(name="on-demand"),
        f"{RG0}.flavors[1].name",
        "duplicate flavor in a group",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][1]["flavors"][0].update(name="spot"),
        "spec.resourceGroups[1].flavors[0].name",
        "flavor in two groups",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][0].update(coveredResources=["cpu", "cpu"]),
        f"{RG0}.coveredResources[1]",
        "duplicate resource in a group",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][1].update(coveredResources=["cpu"]),
        "spec.resourceGroups[1].coveredResources[0]",
        "resource covered by two groups",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][0]["flavors"][0]["resources"].pop(),
        f"{RG0}.flavors[0].resources",
        "flavor lists fewer resources than covered",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][0]["flavors"][0]["resources"].reverse(),
        Q00 + ".name",
        "flavor resources out of order",
    ),
    _cq(
        lambda d: _q00(d).update(borrowingLimit="1"),
        Q00 + ".borrowingLimit",
        "borrowingLimit without cohort",
        None,
    ),
    _cq(
        lambda d: _q00(d).update(lendingLimit="1"),
        Q00 + ".lendingLimit",
        "lendingLimit without cohort",
        None,
    ),
    _cq(
        lambda d: _q00(d).update(lendingLimit="11"),
        Q00 + ".lendingLimit",
        "lendingLimit above nominalQuota",
    ),
    _cq(
        lambda d: _q00(d).update(nominalQuota="-1"), Q00 + ".nominalQuota", "negative nominalQuota"
    ),
    _cq(
        lambda d: _q00(d).update(borrowingLimit="-500m"),
        Q00 + ".borrowingLimit",
        "negative borrowingLimit",
    ),
    _cq(
        lambda d: _q00(d).update(lendingLimit="-1"), Q00 + ".lendingLimit", "negative lendingLimit"
    ),
    _cq(
        lambda d: _q00(d).update(nominalQuota="ten"),
        Q00 + ".nominalQuota",
        "quantity that does not parse",
    ),
    _cq(
        _set(
            ["spec", "preemption"],
            {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}},
        ),
        "spec.preemption.borrowWithinCohort.policy",
        "borrowWithinCohort without reclaimWithinCohort",
    ),
    _cq(
        lambda d: _spec(d).update(
            resourceGroups=[
                {"coveredResources": [f"r{i}"], "flavors": many_flavors(1, [f"r{i}"])}
                for i in range(17)
            ]
        ),
        "spec.resourceGroups",
        "more than 16 resource groups",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][0].update(
            coveredResources=["cpu"], flavors=many_flavors(65, ["cpu"])
        ),
        f"{RG0}.flavors",
        "more than 64 flavors in a group",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][0].update(
            coveredResources=[f"r{i}" for i in range(65)],
            flavors=many_flavors(1, [f"r{i}" for i in range(65)]),
        ),
        f"{RG0}.coveredResources",
        "more than 64 covered resources in a group",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][0].update(coveredResources=[], flavors=[]),
        f"{RG0}.coveredResources",
        "empty coveredResources",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][0]["flavors"][0].update(resources=[]),
        f"{RG0}.flavors[0].resources",
        "flavor without resources",
    ),
    _cq(
        lambda d: _spec(d).update(
            resourceGroups=[
                {
                    "coveredResources": [f"g{g}"],
                    "flavors": [
                        {"name": f"g{g}-f{i}", "resources": [{"name": f"g{g}", "nominalQuota": 1}]}
                        for i in range(52)
                    ],
                }
                for g in range(5)
            ]
        ),
        "spec.resourceGroups",
        "more than 256 flavors in total",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][0].update(
            coveredResources=[f"r{i}" for i in range(9)],
            flavors=many_flavors(64, [f"r{i}" for i in range(9)]),
        ),
        RG0,
        "more than 512 flavor-resource combinations in a group",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][0]["flavors"][0].update(name="On_Demand"),
        f"{RG0}.flavors[0].name",
        "invalid flavor name",
    ),
    _cq(
        lambda d: _spec(d)["resourceGroups"][1].update(coveredResources=["bad resource"]),
        "spec.resourceGroups[1].coveredResources[0]",
        "invalid resource name",
    ),
    _cq(_set(["spec", "cohortName"], "Research"), "spec.cohortName", "invalid cohort name"),
    _cq(
        _set(["spec", "queueingStrategy"], "FIFO"),
        "spec.queueingStrategy",
        "unknown queueing strategy",
    ),
    _cq(_set(["spec", "stopPolicy"], "Drain"), "spec.stopPolicy", "unknown stop policy"),
    _cq(
        _set(["spec", "preemption"], {"withinClusterQueue": "Any"}),
        "spec.preemption.withinClusterQueue",
        "withinClusterQueue Any",
    ),
    _cq(
        _set(["spec", "preemption"], {"preemptionOrder": "Random"}),
        "spec.preemption.preemptionOrder",
        "unknown preemptionOrder",
    ),
    _cq(
        _set(["spec", "preemption"], {"preemptiblePriorityThreshold": 2**31}),
        "spec.preemption.preemptiblePriorityThreshold",
        "threshold out of int32 range",
    ),
    _cq(
        _set(["spec", "flavorFungibility"], {"whenCanBorrow": "Borrow"}),
        "spec.flavorFungibility.whenCanBorrow",
        "v1beta1 fungibility value",
    ),
    _cq(
        _set(
            ["spec", "namespaceSelector"], {"matchExpressions": [{"key": "team", "operator": "In"}]}
        ),
        "spec.namespaceSelector.matchExpressions[0].values",
        "In without values",
    ),
    _cq(
        _set(["spec", "namespaceSelector"], {"matchLabels": {"team": "not valid!"}}),
        "spec.namespaceSelector.matchLabels[team]",
        "invalid label value in selector",
    ),
    _cq(_set(["spec", "cohort"], "all"), "spec.cohort", "unknown field (v1beta1 name)"),
    Case(
        "invalid object name",
        cluster_queue,
        _set(["metadata", "name"], "Team_A"),
        "metadata.name",
        "ClusterQueue Team_A",
    ),
    _cq(
        _set(["metadata", "labels"], {"bad key!": "x"}),
        "metadata.labels[bad key!]",
        "invalid label key",
    ),
    _cq(
        _set(
            ["status"],
            {
                "conditions": [
                    {
                        "type": "Active",
                        "status": "True",
                        "reason": "Ready",
                        "lastTransitionTime": "2024-05-01T12:00:00Z",
                    },
                    {
                        "type": "Active",
                        "status": "False",
                        "reason": "Stopped",
                        "lastTransitionTime": "2024-05-01T12:00:00Z",
                    },
                ]
            },
        ),
        "status.conditions[1].type",
        "duplicate condition type",
    ),
    _cq(
        _set(
            ["status"],
            {
                "conditions": [
                    {
                        "type": "Active",
                        "status": "Yes",
                        "reason": "Ready",
                        "lastTransitionTime": "2024-05-01T12:00:00Z",
                    }
                ]
            },
        ),
        "status.conditions[0].status",
        "condition status not True/False/Unknown",
    ),
    _cq(
        _set(
            ["status"],
            {
                "conditions": [
                    {
                        "type": "Active",
                        "status": "True",
                        "reason": "Ready",
                        "lastTransitionTime": "yesterday",
                    }
                ]
            },
        ),
        "status.conditions[0].lastTransitionTime",
        "bad timestamp",
    ),
    _cq(_set(["spec", "fairSharing"], {"weight": "-1"}), "spec.fairSharing.weight", "negative weight"),
    _cq(_set(["spec", "fairSharing"], {"weight": "heavy"}), "spec.fairSharing.weight", "weight not a quantity"),
    # --- Cohort ---
    Case(
        "cohort negative weight",
        cohort,
        _set(["spec", "fairSharing"], {"weight": "-0.5"}),
        "spec.fairSharing.weight",
        "Cohort research",
    ),
    Case(
        "cohort weight not a quantity",
        cohort,
        _set(["spec", "fairSharing"], {"weight": [1]}),
        "spec.fairSharing.weight",
        "Cohort research",
    ),
    Case(
        "parent is itself",
        cohort,
        _set(["spec", "parentName"], "research"),
        "spec.parentName",
        "Cohort research",
    ),
    Case(
        "cohort borrowingLimit without parent",
        cohort,
        lambda d: _q00(d).update(borrowingLimit="1"),
        Q00 + ".borrowingLimit",
        "Cohort research",
    ),
    Case(
        "cohort lendingLimit without parent",
        cohort,
        lambda d: _q00(d).update(lendingLimit="1"),
        Q00 + ".lendingLimit",
        "Cohort research",
    ),
    Case(
        "cohort negative quota",
        cohort,
        lambda d: _q00(d).update(nominalQuota=-2),
        Q00 + ".nominalQuota",
        "Cohort research",
    ),
    Case(
        "cohort invalid parent",
        cohort,
        _set(["spec", "parentName"], "a/b"),
        "spec.parentName",
        "Cohort research",
    ),
    # --- ResourceFlavor ---
    Case(
        "more than 8 node labels",
        resource_flavor,
        _set(["spec", "nodeLabels"], {f"k{i}": "v" for i in range(9)}),
        "spec.nodeLabels",
        "ResourceFlavor spot",
    ),
    Case(
        "invalid node label value",
        resource_flavor,
        _set(["spec", "nodeLabels"], {"zone": "a b"}),
        "spec.nodeLabels[zone]",
        "ResourceFlavor spot",
    ),
    Case(
        "unknown taint effect",
        resource_flavor,
        _set(["spec", "nodeTaints"], [{"key": "spot", "effect": "NoAdmit"}]),
        "spec.nodeTaints[0].effect",
        "ResourceFlavor spot",
    ),
    Case(
        "duplicate taint",
        resource_flavor,
        _set(
            ["spec", "nodeTaints"],
            [
                {"key": "spot", "effect": "NoSchedule"},
                {"key": "spot", "value": "x", "effect": "NoSchedule"},
            ],
        ),
        "spec.nodeTaints[1]",
        "ResourceFlavor spot",
    ),
    Case(
        "toleration Exists with value",
        resource_flavor,
        _set(["spec", "tolerations"], [{"key": "spot", "operator": "Exists", "value": "true"}]),
        "spec.tolerations[0].value",
        "ResourceFlavor spot",
    ),
    Case(
        "toleration without key must be Exists",
        resource_flavor,
        _set(["spec", "tolerations"], [{"operator": "Equal", "value": "x"}]),
        "spec.tolerations[0].operator",
        "ResourceFlavor spot",
    ),
    Case(
        "tolerationSeconds needs NoExecute",
        resource_flavor,
        _set(
            ["spec", "tolerations"],
            [{"key": "spot", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}],
        ),
        "spec.tolerations[0].effect",
        "ResourceFlavor spot",
    ),
    Case(
        "more than 8 tolerations",
        resource_flavor,
        _set(["spec", "tolerations"], [{"key": f"k{i}", "operator": "Exists"} for i in range(9)]),
        "spec.tolerations",
        "ResourceFlavor spot",
    ),
    # --- LocalQueue ---
    Case(
        "invalid clusterQueue name",
        local_queue,
        _set(["spec", "clusterQueue"], "Team A"),
        "spec.clusterQueue",
        "LocalQueue team-a/main",
    ),
    Case(
        "unknown LocalQueue stop policy",
        local_queue,
        _set(["spec", "stopPolicy"], "Pause"),
        "spec.stopPolicy",
        "LocalQueue team-a/main",
    ),
    Case(
        "invalid namespace",
        local_queue,
        _set(["metadata", "namespace"], "Team.A"),
        "metadata.namespace",
        "LocalQueue Team.A/main",
    ),
    # --- WorkloadPriorityClass ---
    Case(
        "value out of int32 range",
        priority_class,
        _set(["value"], 2**31),
        "value",
        "WorkloadPriorityClass high",
    ),
    Case(
        "value missing",
        priority_class,
        lambda d: d.pop("value"),
        "value",
        "WorkloadPriorityClass high",
    ),
    Case(
        "description too long",
        priority_class,
        _set(["description"], "x" * 2049),
        "description",
        "WorkloadPriorityClass high",
    ),
    # --- Workload ---
    Case(
        "minCount above count",
        workload,
        lambda d: _spec(d)["podSets"][0].update(minCount=3),
        "spec.podSets[0].minCount",
        "Workload team-a/job-a",
    ),
    Case(
        "minCount zero",
        workload,
        lambda d: _spec(d)["podSets"][0].update(minCount=0),
        "spec.podSets[0].minCount",
        "Workload team-a/job-a",
    ),
    Case(
        "negative count",
        workload,
        lambda d: _spec(d)["podSets"][0].update(count=-1),
        "spec.podSets[0].count",
        "Workload team-a/job-a",
    ),
    Case(
        "two pod sets with minCount",
        workload,
        _set(
            ["spec", "podSets"], [{**pod_set("a"), "minCount": 1}, {**pod_set("b"), "minCount": 1}]
        ),
        "spec.podSets[1].minCount",
        "Workload team-a/job-a",
    ),
    Case(
        "duplicate pod set names",
        workload,
        _set(["spec", "podSets"], [pod_set("a"), pod_set("a")]),
        "spec.podSets[1].name",
        "Workload team-a/job-a",
    ),
    Case(
        "more than 8 pod sets",
        workload,
        _set(["spec", "podSets"], [pod_set(f"p{i}") for i in range(9)]),
        "spec.podSets",
        "Workload team-a/job-a",
    ),
    Case(
        "no pod sets",
        workload,
        _set(["spec", "podSets"], []),
        "spec.podSets",
        "Workload team-a/job-a",
    ),
    Case(
        "invalid pod set name",
        workload,
        _set(["spec", "podSets"], [pod_set("Main")]),
        "spec.podSets[0].name",
        "Workload team-a/job-a",
    ),
    Case(
        "pod set without template",
        workload,
        lambda d: _spec(d)["podSets"][0].pop("template"),
        "spec.podSets[0].template",
        "Workload team-a/job-a",
    ),
    Case(
        "reserved pods resource",
        workload,
        lambda d: _spec(d)["podSets"][0]["template"]["spec"]["containers"][0]["resources"][
            "requests"
        ].update(pods=1),
        "spec.podSets[0].template.spec.containers[0].resources.requests[pods]",
        "Workload team-a/job-a",
    ),
    Case(
        "bad request quantity",
        workload,
        _set(["spec", "podSets"], [pod_set(cpu="1 core")]),
        "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]",
        "Workload team-a/job-a",
    ),
    Case(
        "pod toleration Exists with value",
        workload,
        lambda d: _spec(d)["podSets"][0]["template"]["spec"].update(
            tolerations=[{"key": "a", "operator": "Exists", "value": "b"}]
        ),
        "spec.podSets[0].template.spec.tolerations[0].value",
        "Workload team-a/job-a",
    ),
    Case(
        "priorityClassRef without priority",
        workload,
        lambda d: (
            _spec(d).pop("priority"),
            _spec(d).update(
                priorityClassRef={
                    "group": "kqueue.io",
                    "kind": "WorkloadPriorityClass",
                    "name": "high",
                }
            ),
        ),
        "spec.priority",
        "Workload team-a/job-a",
    ),
    Case(
        "priorityClassRef kind of the other group",
        workload,
        _set(
            ["spec", "priorityClassRef"],
            {"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
        ),
        "spec.priorityClassRef.kind",
        "Workload team-a/job-a",
    ),
    Case(
        "priorityClassRef Kueue group",
        workload,
        _set(
            ["spec", "priorityClassRef"],
            {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
        ),
        "spec.priorityClassRef.group",
        "Workload team-a/job-a",
    ),
    Case(
        "preemptionPriority below priority",
        workload,
        _set(["spec", "preemptionPriority"], 5),
        "spec.preemptionPriority",
        "Workload team-a/job-a",
    ),
    Case(
        "preemptionPriorityClassRef without preemptionPriority",
        workload,
        _set(
            ["spec", "preemptionPriorityClassRef"],
            {"group": "kqueue.io", "kind": "WorkloadPriorityClass", "name": "low"},
        ),
        "spec.preemptionPriority",
        "Workload team-a/job-a",
    ),
    Case(
        "unknown preemptibility",
        workload,
        _set(["spec", "preemptibility"], "Maybe"),
        "spec.preemptibility",
        "Workload team-a/job-a",
    ),
    Case(
        "label value for preemptibility",
        workload,
        _set(["spec", "preemptibility"], "non-preemptible"),
        "spec.preemptibility",
        "Workload team-a/job-a",
    ),
    Case(
        "invalid queueName",
        workload,
        _set(["spec", "queueName"], "Main Queue"),
        "spec.queueName",
        "Workload team-a/job-a",
    ),
    Case(
        "active as a string",
        workload,
        _set(["spec", "active"], "yes"),
        "spec.active",
        "Workload team-a/job-a",
    ),
    Case(
        "assignment for an unknown pod set",
        lambda: workload(reserved=True),
        lambda d: d["status"]["admission"]["podSetAssignments"][0].update(name="other"),
        "status.admission.podSetAssignments[0].name",
        "Workload team-a/job-a",
    ),
    Case(
        "one assignment per pod set",
        lambda: workload(reserved=True),
        lambda d: _spec(d)["podSets"].append(pod_set("second")),
        "status.admission.podSetAssignments",
        "Workload team-a/job-a",
    ),
    Case(
        "resourceUsage not a multiple of count",
        lambda: workload(reserved=True),
        lambda d: d["status"]["admission"]["podSetAssignments"][0].update(
            resourceUsage={"cpu": "2001m"}
        ),
        "status.admission.podSetAssignments[0].resourceUsage[cpu]",
        "Workload team-a/job-a",
    ),
    Case(
        "reclaimable pods above count",
        workload,
        _set(["status"], {"reclaimablePods": [{"name": "main", "count": 3}]}),
        "status.reclaimablePods[0].count",
        "Workload team-a/job-a",
    ),
    Case(
        "reclaimable pods of an unknown pod set",
        workload,
        _set(["status"], {"reclaimablePods": [{"name": "other", "count": 1}]}),
        "status.reclaimablePods[0].name",
        "Workload team-a/job-a",
    ),
    # Kueue's webhook cases "invalid maximumExexcutionTimeSeconds" (0) and beyond int32.
    Case(
        "invalid maximumExexcutionTimeSeconds",
        workload,
        _set(["spec", "maximumExecutionTimeSeconds"], 0),
        "spec.maximumExecutionTimeSeconds",
        "Workload team-a/job-a",
    ),
    Case(
        "maximumExecutionTimeSeconds not an integer",
        workload,
        _set(["spec", "maximumExecutionTimeSeconds"], "10m"),
        "spec.maximumExecutionTimeSeconds",
        "Workload team-a/job-a",
    ),
    Case(
        "maximumExecutionTimeSeconds beyond int32",
        workload,
        _set(["spec", "maximumExecutionTimeSeconds"], 2**31),
        "spec.maximumExecutionTimeSeconds",
        "Workload team-a/job-a",
    ),
    Case(
        "negative accumulated past execution time",
        workload,
        _set(["status"], {"accumulatedPastExecutionTimeSeconds": -1}),
        "status.accumulatedPastExecutionTimeSeconds",
        "Workload team-a/job-a",
    ),
    Case(
        "negative requeue count",
        workload,
        _set(["status"], {"requeueState": {"count": -1}}),
        "status.requeueState.count",
        "Workload team-a/job-a",
    ),
]


def _errors(doc: Doc) -> list[FieldError]:
    try:
        parse_object(doc)
    except ValidationFailed as err:
        return err.errors
    return []


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_valid_before_the_edit(case: Case) -> None:
    assert _errors(case.make()) == []


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rule(case: Case) -> None:
    doc = case.make()
    case.edit(doc)
    errors = _errors(doc)
    paths = [e.path for e in errors]
    assert case.want_path in paths, "\n".join(str(e) for e in errors)
    for e in errors:
        assert e.obj == case.want_ref
        assert str(e).startswith(f"{case.want_ref}: {e.path}: ")
    wanted = next(e for e in errors if e.path == case.want_path)
    assert wanted.message


def test_error_sentence_names_object_field_and_allowed() -> None:
    doc = cluster_queue()
    _q00(doc).update(lendingLimit="12")
    (err,) = _errors(doc)
    assert str(err) == (
        "ClusterQueue team-a: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: "
        "must be less than or equal to nominalQuota (10), got 12 (allowed: at most 10)"
    )


def test_quantity_error_lists_the_allowed_forms() -> None:
    doc = cluster_queue()
    _q00(doc).update(nominalQuota="1.5 cores")
    (err,) = _errors(doc)
    assert "Ki, Mi, Gi" in err.allowed
    assert "'1.5 cores' is not a quantity" in err.message


def test_unknown_field_lists_known_ones() -> None:
    doc = local_queue()
    doc["spec"]["clusterqueue"] = "x"
    (err,) = _errors(doc)
    assert err.path == "spec.clusterqueue"
    assert err.allowed == "clusterQueue, fairSharing, stopPolicy"


def test_cohort_may_lend_beyond_its_own_nominal_quota() -> None:
    doc = cohort()
    doc["spec"]["parentName"] = "company"
    _q00(doc).update(lendingLimit="100", borrowingLimit="1")
    assert _errors(doc) == []


def test_validation_failed_carries_every_error() -> None:
    doc = cluster_queue(cohort=None)
    _q00(doc).update(nominalQuota="-1", borrowingLimit="1")
    with pytest.raises(ValidationFailed) as info:
        parse_object(doc)
    assert {e.path for e in info.value.errors} == {Q00 + ".nominalQuota", Q00 + ".borrowingLimit"}
    assert len(str(info.value).splitlines()) == 2


def test_validate_without_parsing() -> None:
    obj = parse_object(cohort(), validate=False)
    assert validate(obj) == []
    check(obj)


# --- updates -------------------------------------------------------------------------------------


@dataclass
class UpdateCase:
    name: str
    make: Callable[[], Doc]
    edit: Callable[[Doc], object]
    want_path: str | None  # None: the update is allowed


def _ps0(doc: Doc) -> Doc:
    ps = _spec(doc)["podSets"][0]
    assert isinstance(ps, dict)
    return ps


def _reserved() -> Doc:
    return workload(reserved=True)


def _admitted() -> Doc:
    doc = _reserved()
    doc["status"]["conditions"].append(
        {
            "type": "Admitted",
            "status": "True",
            "reason": "Admitted",
            "message": "The workload is admitted",
            "lastTransitionTime": "2024-05-01T12:00:00Z",
        }
    )
    return doc


UPDATE_CASES: list[UpdateCase] = [
    UpdateCase(
        "LocalQueue clusterQueue",
        local_queue,
        _set(["spec", "clusterQueue"], "team-b"),
        "spec.clusterQueue",
    ),
    UpdateCase(
        "LocalQueue stopPolicy", local_queue, _set(["spec", "stopPolicy"], "HoldAndDrain"), None
    ),
    UpdateCase("object name", local_queue, _set(["metadata", "name"], "other"), "metadata.name"),
    UpdateCase(
        "object namespace",
        local_queue,
        _set(["metadata", "namespace"], "other"),
        "metadata.namespace",
    ),
    UpdateCase(
        "pod template while reserved",
        _reserved,
        lambda d: _ps0(d)["template"]["spec"]["containers"][0].update(image="x"),
        "spec.podSets[0].template",
    ),
    UpdateCase(
        "pod template while pending",
        workload,
        lambda d: _ps0(d)["template"]["spec"]["containers"][0].update(image="x"),
        None,
    ),
    UpdateCase(
        "count grows while reserved",
        _reserved,
        lambda d: _ps0(d).update(count=3),
        "spec.podSets[0].count",
    ),
    UpdateCase(
        "count shrinks while reserved (scale-down)",
        _reserved,
        lambda d: (
            _ps0(d).update(count=1),
            d["status"].pop("admission"),
            d["status"].pop("conditions"),
        ),
        None,
    ),
    UpdateCase(
        "minCount while reserved",
        _reserved,
        lambda d: _ps0(d).update(minCount=1),
        "spec.podSets[0].minCount",
    ),
    UpdateCase(
        "pod set added while reserved",
        _reserved,
        lambda d: (_spec(d)["podSets"].append(pod_set("b")), d["status"].pop("admission")),
        "spec.podSets",
    ),
    UpdateCase(
        "queueName while reserved",
        _reserved,
        _set(["spec", "queueName"], "other"),
        "spec.queueName",
    ),
    UpdateCase("queueName while pending", workload, _set(["spec", "queueName"], "other"), None),
    UpdateCase(
        "priorityClassRef set while reserved",
        _reserved,
        _set(
            ["spec", "priorityClassRef"],
            {"group": "kqueue.io", "kind": "WorkloadPriorityClass", "name": "high"},
        ),
        "spec.priorityClassRef",
    ),
    UpdateCase(
        "pod PriorityClass name while reserved",
        lambda: _with_ref(_reserved(), "scheduling.k8s.io", "PriorityClass"),
        lambda d: _spec(d)["priorityClassRef"].update(name="other"),
        "spec.priorityClassRef.name",
    ),
    UpdateCase(
        "WorkloadPriorityClass name while reserved",
        lambda: _with_ref(_reserved(), "kqueue.io", "WorkloadPriorityClass"),
        lambda d: (_spec(d)["priorityClassRef"].update(name="other"), _spec(d).update(priority=20)),
        None,
    ),
    UpdateCase(
        "priorityClassRef group while reserved",
        lambda: _with_ref(_reserved(), "kqueue.io", "WorkloadPriorityClass"),
        lambda d: _spec(d)["priorityClassRef"].update(
            group="scheduling.k8s.io", kind="PriorityClass"
        ),
        "spec.priorityClassRef.group",
    ),
    UpdateCase(
        "preemption priority class while reserved",
        _reserved,
        lambda d: _spec(d).update(
            preemptionPriorityClassRef={
                "group": "kqueue.io",
                "kind": "WorkloadPriorityClass",
                "name": "vip",
            },
            preemptionPriority=100,
        ),
        None,
    ),
    UpdateCase(
        "admission changed",
        _reserved,
        lambda d: d["status"]["admission"].update(clusterQueue="team-b"),
        "status.admission",
    ),
    UpdateCase("admission cleared", _reserved, lambda d: d["status"].pop("admission"), None),
    UpdateCase(
        "reclaimable pods decrease",
        lambda: _with_reclaimable(_reserved(), 2),
        lambda d: d["status"]["reclaimablePods"][0].update(count=1),
        "status.reclaimablePods[0].count",
    ),
    UpdateCase(
        "reclaimable pods removed",
        lambda: _with_reclaimable(_reserved(), 1),
        lambda d: d["status"].pop("reclaimablePods"),
        "status.reclaimablePods[main]",
    ),
    # Kueue's webhook cases on maximumExecutionTimeSeconds, under their names.
    UpdateCase(
        "can add maximum execution time when not admitted",
        workload,
        _set(["spec", "maximumExecutionTimeSeconds"], 1),
        None,
    ),
    UpdateCase(
        "can update maximum execution time when not admitted",
        lambda: _with_max_exec(workload(), 1),
        _set(["spec", "maximumExecutionTimeSeconds"], 2),
        None,
    ),
    UpdateCase(
        "cannot add maximum execution time when admitted",
        _admitted,
        _set(["spec", "maximumExecutionTimeSeconds"], 1),
        "spec.maximumExecutionTimeSeconds",
    ),
    UpdateCase(
        "cannot update maximum execution time when admitted",
        lambda: _with_max_exec(_admitted(), 1),
        _set(["spec", "maximumExecutionTimeSeconds"], 2),
        "spec.maximumExecutionTimeSeconds",
    ),
    UpdateCase(
        "maximum execution time may change as the admission is cleared",
        lambda: _with_max_exec(_admitted(), 1),
        lambda d: (
            _spec(d).update(maximumExecutionTimeSeconds=2),
            d["status"].pop("admission"),
            d["status"].pop("conditions"),
        ),
        None,
    ),
    UpdateCase(
        "ClusterQueue quota", cluster_queue, lambda d: _q00(d).update(nominalQuota="20"), None
    ),
    UpdateCase("Cohort parent", cohort, _set(["spec", "parentName"], "company"), None),
]


def _with_ref(doc: Doc, group: str, kind: str) -> Doc:
    _spec(doc)["priorityClassRef"] = {"group": group, "kind": kind, "name": "high"}
    return doc


def _with_max_exec(doc: Doc, seconds: int) -> Doc:
    _spec(doc)["maximumExecutionTimeSeconds"] = seconds
    return doc


def test_max_exec_time_error_names_the_field_and_what_is_allowed() -> None:
    doc = workload()
    _spec(doc)["maximumExecutionTimeSeconds"] = 0
    (err,) = _errors(doc)
    assert str(err) == (
        "Workload team-a/job-a: spec.maximumExecutionTimeSeconds: must be greater than or "
        "equal to 1, got 0 (allowed: >= 1)"
    )
    before = parse_object(_with_max_exec(_admitted(), 600))
    after_doc = _with_max_exec(_admitted(), 1200)
    (change,) = validate_update(before, parse_object(after_doc))
    assert str(change) == (
        "Workload team-a/job-a: spec.maximumExecutionTimeSeconds: field is immutable while the "
        "workload is admitted: cannot change from 600 to 1200 (allowed: 600 until the workload "
        "is no longer admitted)"
    )


def _with_reclaimable(doc: Doc, count: int) -> Doc:
    doc["status"]["reclaimablePods"] = [{"name": "main", "count": count}]
    return doc


@pytest.mark.parametrize("case", UPDATE_CASES, ids=[c.name for c in UPDATE_CASES])
def test_update_rule(case: UpdateCase) -> None:
    before = case.make()
    after = copy.deepcopy(before)
    case.edit(after)
    old, new = parse_object(before), parse_object(after)
    errors = validate_update(old, new)
    if case.want_path is None:
        assert errors == [], "\n".join(str(e) for e in errors)
        check_update(old, new)
    else:
        assert case.want_path in [e.path for e in errors], "\n".join(str(e) for e in errors)
        with pytest.raises(ValidationFailed):
            check_update(old, new)


def test_update_to_another_kind() -> None:
    errors = validate_update(parse_object(local_queue()), parse_object(cohort()))
    assert [e.path for e in errors] == ["kind"]


def test_workload_helpers_after_parse() -> None:
    wl = parse_object(workload(reserved=True))
    assert isinstance(wl, Workload)
    assert wl.has_quota_reservation
    assert wl.status.admission is not None
    assert wl.status.admission.assignment("main") is not None


def test_validate_rechecks_types_of_a_changed_model() -> None:
    cq = parse_object(cluster_queue())
    assert validate(cq) == []
    assert isinstance(cq, ClusterQueue)
    cq.spec.resource_groups = cq.spec.resource_groups * 9  # 18 groups, past the limit of 16
    cq.spec.cohort_name = "Not Valid"
    paths = {e.path for e in validate(cq)}
    assert {"spec.resourceGroups", "spec.cohortName"} <= paths
    with pytest.raises(ValidationFailed):
        check(cq)
