"""Invalid kqueue objects, Jobs and Pods, and who must reject each one.

One table serves two tests: ``test_bad_input.py`` sends every case to the real API server (with
kqueue's CRDs and its validating webhooks installed) and ``test_bad_input_models.py`` runs the
same objects through ``kqueue.api`` validation (and, for Jobs, the webhook handler called
directly). Both must name the same field, so a user gets the same answer from ``kqueue convert``
or ``kqueue simulate`` as from ``kubectl apply``.

Names in the bodies carry the placeholder ``SFX`` (replaced by a unique suffix, so cluster-scoped
objects of different runs never meet) and namespaced objects the namespace ``NS``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from kqueue.api.v1alpha1 import constants as c

Obj = dict[str, Any]

API: Final = c.API_VERSION
# Every object a case creates carries this label: kqueue's validating webhook is registered for
# objects with it only, so the test's webhook cannot disturb the rest of the shared cluster.
CASE_LABEL: Final = "reliability.kqueue.io/bad-input"
LABELS: Final = {CASE_LABEL: "true"}


class Layer(StrEnum):
    """Who stops a bad object. The API server runs them in this order: built-in validation
    (names, metadata, Job/Pod fields), the CRD's structural schema, its CEL rules, then the
    validating admission webhooks."""

    BUILTIN = "API server (built-in)"
    SCHEMA = "CRD schema"
    CEL = "CRD CEL rule"
    WEBHOOK = "kqueue webhook"
    FALLBACK = "accepted, documented fallback"


@dataclass(frozen=True)
class Case:
    """One invalid object.

    ``path`` is the field the API server's message must name. kqueue's own validation may be
    more precise than a CEL rule attached to a parent (``spec`` for a rule over all resource
    groups): ``model_path`` is then what it names, and must lie under ``path``.
    For an update, ``old`` is created first (with ``old_status`` written through the status
    subresource), then ``change`` is applied to what the server returned and the result sent.
    """

    id: str
    body: Obj
    path: str
    layer: Layer
    wrong: str
    message: str
    model_path: str | None = None
    old_status: Obj | None = None
    change: Callable[[Obj], None] | None = None
    # Whether kqueue.api (or the Job webhook handler) checks it too; False only for what the API
    # server alone owns (e.g. the Job's own fields).
    modelled: bool = True

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def is_update(self) -> bool:
        return self.change is not None

    @property
    def expected_model_path(self) -> str:
        return self.model_path or self.path


def normalize_path(path: str) -> str:
    """One spelling for map keys: kqueue writes ``nodeLabels[zone]``, the API server's schema
    errors ``nodeLabels.zone``."""
    return re.sub(r"\[([^\]]*[^\]0-9][^\]]*)\]", r".\1", path)


def instantiate(obj: Obj, suffix: str, namespace: str) -> Obj:
    """``obj`` with the name suffix and namespace placeholders filled in."""
    text = json.dumps(obj).replace("SFX", suffix).replace('"NS"', json.dumps(namespace))
    out: Obj = json.loads(text)
    return out


# --- builders of valid objects ------------------------------------------------------------------


def meta(name: str, *, namespaced: bool = False, **extra: Any) -> Obj:
    m: Obj = {"name": name, "labels": dict(LABELS), **extra}
    if namespaced:
        m["namespace"] = "NS"
    return m


def flavor(**spec: Any) -> Obj:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": meta("rf-SFX"), "spec": spec}


def quota(name: str = "cpu", nominal: Any = "4", **limits: Any) -> Obj:
    return {"name": name, "nominalQuota": nominal, **limits}


def group(resources: list[str], flavors: list[str], **per_resource: Any) -> Obj:
    return {
        "coveredResources": list(resources),
        "flavors": [
            {"name": f, "resources": [quota(r, **per_resource) for r in resources]}
            for f in flavors
        ],
    }


def cluster_queue(groups: list[Obj] | None = None, name: str = "cq-SFX", **spec: Any) -> Obj:
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": meta(name),
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": groups if groups is not None else [group(["cpu"], ["default-SFX"])],
            **spec,
        },
    }


def cq_with_quota(**resource: Any) -> Obj:
    """A ClusterQueue whose single quota entry is ``quota(**resource)``."""
    return cluster_queue(
        [{"coveredResources": ["cpu"], "flavors": [{"name": "default-SFX",
                                                     "resources": [quota(**resource)]}]}]
    )


def cohort(name: str = "co-SFX", **spec: Any) -> Obj:
    return {"apiVersion": API, "kind": "Cohort", "metadata": meta(name), "spec": spec}


def local_queue(**spec: Any) -> Obj:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": meta("lq-SFX", namespaced=True),
        "spec": {"clusterQueue": "cq-SFX", **spec},
    }


def priority_class(**fields: Any) -> Obj:
    return {
        "apiVersion": API,
        "kind": "WorkloadPriorityClass",
        "metadata": meta("wpc-SFX"),
        **fields,
    }


def pod_template(cpu: str = "1", **spec: Any) -> Obj:
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": cpu}}}
            ],
            **spec,
        }
    }


def pod_set(name: str = "main", count: Any = 1, **extra: Any) -> Obj:
    return {"name": name, "count": count, "template": pod_template(), **extra}


def workload(pod_sets: list[Obj] | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": meta("wl-SFX", namespaced=True),
        "spec": {"queueName": "lq", "podSets": pod_sets or [pod_set()], **spec},
    }


def job(
    *, parallelism: Any = 2, labels: Obj | None = None, annotations: Obj | None = None
) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "job-SFX",
            "namespace": "NS",
            "labels": {c.QUEUE_NAME_LABEL: "lq", **LABELS, **(labels or {})},
            "annotations": annotations or {},
        },
        "spec": {"parallelism": parallelism, "completions": 2, "template": pod_template()},
    }


def pod(*, cpu: str = "1", labels: Obj | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pod-SFX",
            "namespace": "NS",
            "labels": {c.QUEUE_NAME_LABEL: "lq", **LABELS, **(labels or {})},
        },
        "spec": pod_template(cpu)["spec"],
    }


def _set(path: list[str | int], value: Any) -> Callable[[Obj], None]:
    def change(obj: Obj) -> None:
        target: Any = obj
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


ADMITTED_STATUS: Final[Obj] = {
    "admission": {
        "clusterQueue": "cq-SFX",
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default-SFX"},
             "resourceUsage": {"cpu": "2"}, "count": 2}
        ],
    },
    "conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime":
         "2025-01-01T00:00:00Z"},
        {"type": "Admitted", "status": "True", "reason": "Admitted",
         "message": "The workload is admitted", "lastTransitionTime": "2025-01-01T00:00:00Z"},
    ],
}

QUOTA = "spec.resourceGroups[0].flavors[0].resources[0]"
MIN_PARALLELISM = f"metadata.annotations[{c.JOB_MIN_PARALLELISM_ANNOTATION}]"


def _many_groups(n: int) -> list[Obj]:
    return [group([f"example.com/r{i}"], [f"f{i}-SFX"]) for i in range(n)]


CASES: Final[list[Case]] = [
    # --- quantities -----------------------------------------------------------------------------
    Case("quota-negative", cq_with_quota(nominal="-1"), f"{QUOTA}.nominalQuota", Layer.WEBHOOK,
         'nominalQuota "-1"', "must be greater than or equal to 0"),
    Case("quota-word", cq_with_quota(nominal="lots"), f"{QUOTA}.nominalQuota", Layer.SCHEMA,
         'nominalQuota "lots"', "should match"),
    # Kubernetes' quantity pattern (kept in the CRD) allows any exponent; kqueue's parser allows
    # at most ±30, so only the webhook catches it.
    Case("quota-huge-exponent", cq_with_quota(nominal="1e999"), f"{QUOTA}.nominalQuota",
         Layer.WEBHOOK, 'nominalQuota "1e999"', "is not a quantity"),
    Case("quota-two-dots", cq_with_quota(nominal="1.5.2"), f"{QUOTA}.nominalQuota", Layer.SCHEMA,
         'nominalQuota "1.5.2"', "should match"),
    Case("quota-object", cq_with_quota(nominal={"amount": 4}), f"{QUOTA}.nominalQuota",
         Layer.SCHEMA, "nominalQuota is an object", "must be of type"),
    Case("quota-negative-integer", cq_with_quota(nominal=-3), f"{QUOTA}.nominalQuota",
         Layer.WEBHOOK, "nominalQuota -3 (a JSON number)", "must be greater than or equal to 0"),
    Case("borrowing-limit-negative",
         {**cq_with_quota(borrowingLimit="-2"), "spec": {
             **cq_with_quota(borrowingLimit="-2")["spec"], "cohortName": "co-SFX"}},
         f"{QUOTA}.borrowingLimit", Layer.WEBHOOK, 'borrowingLimit "-2"',
         "must be greater than or equal to 0"),
    Case("workload-request-word",
         workload([{"name": "main", "count": 1, "template": pod_template(cpu="lots")}]),
         "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]", Layer.WEBHOOK,
         'a pod set requests cpu "lots"', "is not a quantity"),
    # --- lists too long or too short ------------------------------------------------------------
    Case("resource-groups-17", cluster_queue(_many_groups(17)), "spec.resourceGroups",
         Layer.SCHEMA, "17 resource groups", "must have at most 16 items"),
    Case("flavors-65", cluster_queue([group(["cpu"], [f"f{i}-SFX" for i in range(65)])]),
         "spec.resourceGroups[0].flavors", Layer.SCHEMA, "65 flavors in a group",
         "must have at most 64 items"),
    Case("covered-resources-65",
         cluster_queue([group([f"example.com/r{i}" for i in range(65)], ["default-SFX"])]),
         "spec.resourceGroups[0].coveredResources", Layer.SCHEMA, "65 covered resources",
         "must have at most 64 items"),
    Case("pod-sets-9", workload([pod_set(f"ps{i}") for i in range(9)]), "spec.podSets",
         Layer.SCHEMA, "9 pod sets", "must have at most 8 items"),
    Case("pod-sets-empty", workload([]) | {"spec": {"queueName": "lq", "podSets": []}},
         "spec.podSets", Layer.SCHEMA, "no pod set", "should have at least 1 items"),
    Case("covered-resources-empty",
         cluster_queue([{"coveredResources": [], "flavors": [
             {"name": "default-SFX", "resources": [quota()]}]}]),
         "spec.resourceGroups[0].coveredResources", Layer.SCHEMA, "no covered resource",
         "should have at least 1 items"),
    # --- wrong types ----------------------------------------------------------------------------
    Case("count-string", workload([pod_set(count="three")]), "spec.podSets[0].count",
         Layer.SCHEMA, 'count "three"', "must be of type integer"),
    Case("node-labels-list", flavor(nodeLabels=["spot"]), "spec.nodeLabels", Layer.SCHEMA,
         "nodeLabels is a list", "must be of type object"),
    Case("node-label-value-list", flavor(nodeLabels={"instance-type": ["spot"]}),
         "spec.nodeLabels.instance-type", Layer.SCHEMA, "a nodeLabels value is a list",
         "must be of type string", model_path="spec.nodeLabels[instance-type]"),
    Case("resource-groups-string", cluster_queue() | {"spec": {"resourceGroups": "cpu"}},
         "spec.resourceGroups", Layer.SCHEMA, "resourceGroups is a string",
         "must be of type array"),
    Case("priority-value-string", priority_class(value="high"), "value", Layer.SCHEMA,
         'value "high"', "must be of type integer"),
    Case("priority-value-int64", priority_class(value=2**31), "value", Layer.SCHEMA,
         "value 2^31 (beyond int32)", "must be of type integer with format int32"),
    Case("priority-value-missing", priority_class(), "value", Layer.SCHEMA, "value missing",
         "Required value"),
    Case("active-string", workload(active="yes"), "spec.active", Layer.SCHEMA,
         'active "yes"', "must be of type boolean"),
    # --- enums and formats ----------------------------------------------------------------------
    Case("queueing-strategy", cluster_queue(queueingStrategy="Random"), "spec.queueingStrategy",
         Layer.SCHEMA, 'queueingStrategy "Random"', "Unsupported value"),
    Case("stop-policy", cluster_queue(stopPolicy="Pause"), "spec.stopPolicy", Layer.SCHEMA,
         'stopPolicy "Pause"', "Unsupported value"),
    Case("within-cluster-queue", cluster_queue(preemption={"withinClusterQueue": "Always"}),
         "spec.preemption.withinClusterQueue", Layer.SCHEMA, 'withinClusterQueue "Always"',
         "Unsupported value"),
    Case("preemption-order", cluster_queue(preemption={"preemptionOrder": "Random"}),
         "spec.preemption.preemptionOrder", Layer.SCHEMA, 'preemptionOrder "Random"',
         "Unsupported value"),
    Case("fungibility", cluster_queue(flavorFungibility={"whenCanBorrow": "Borrow"}),
         "spec.flavorFungibility.whenCanBorrow", Layer.SCHEMA, 'whenCanBorrow "Borrow"',
         "Unsupported value"),
    Case("fungibility-preference-may-stop-search",
         cluster_queue(flavorFungibility={
             "whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor",
             "preference": "PreemptionOverBorrowing"}),
         "spec.flavorFungibility", Layer.CEL, "preference with whenCanBorrow MayStopSearch",
         "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
         model_path="spec.flavorFungibility.preference"),
    Case("selector-operator",
         cluster_queue(namespaceSelector={"matchExpressions": [
             {"key": "team", "operator": "Within", "values": ["a"]}]}),
         "spec.namespaceSelector.matchExpressions[0].operator", Layer.SCHEMA,
         'selector operator "Within"', "Unsupported value"),
    Case("selector-in-without-values",
         cluster_queue(namespaceSelector={"matchExpressions": [
             {"key": "team", "operator": "In"}]}),
         "spec.namespaceSelector.matchExpressions[0].values", Layer.WEBHOOK,
         "operator In with no values", "must be non-empty"),
    Case("preemptibility-enum", workload(preemptibility="Sometimes"), "spec.preemptibility",
         Layer.SCHEMA, 'preemptibility "Sometimes"', "Unsupported value"),
    # The enum on the field answers before the CEL rule over the list (which also checks it).
    Case("taint-effect", flavor(nodeTaints=[{"key": "spot", "value": "x", "effect": "Sometimes"}]),
         "spec.nodeTaints[0].effect", Layer.SCHEMA, 'taint effect "Sometimes"',
         "Unsupported value"),
    Case("toleration-without-key",
         flavor(tolerations=[{"operator": "Equal", "value": "x", "effect": "NoSchedule"}]),
         "spec.tolerations", Layer.CEL, "toleration with no key and operator Equal",
         "operator must be Exists when 'key' is empty",
         model_path="spec.tolerations[0].operator"),
    Case("toleration-exists-with-value",
         flavor(tolerations=[{"key": "spot", "operator": "Exists", "value": "x",
                              "effect": "NoSchedule"}]),
         "spec.tolerations", Layer.CEL, "toleration operator Exists with a value",
         "a value must be empty when 'operator' is 'Exists'",
         model_path="spec.tolerations[0].value"),
    # --- names ----------------------------------------------------------------------------------
    Case("name-uppercase", flavor() | {"metadata": meta("Spot_Flavor-SFX")}, "metadata.name",
         Layer.BUILTIN, 'name "Spot_Flavor"', "a lowercase RFC 1123 subdomain"),
    Case("name-too-long", flavor() | {"metadata": meta("a" * 254 + "-SFX")}, "metadata.name",
         Layer.BUILTIN, "a name over 253 characters", "must be no more than 253 characters"),
    Case("cohort-name-format", cluster_queue(cohortName="Team A"), "spec.cohortName",
         Layer.SCHEMA, 'cohortName "Team A"', "should match"),
    Case("flavor-name-format", cluster_queue([group(["cpu"], ["On_Demand"])]),
         "spec.resourceGroups[0].flavors[0].name", Layer.SCHEMA, 'flavor name "On_Demand"',
         "should match"),
    Case("pod-set-name-format", workload([pod_set("Main")]), "spec.podSets[0].name",
         Layer.SCHEMA, 'pod set name "Main"', "should match"),
    Case("local-queue-target-format", local_queue(clusterQueue="CQ!"), "spec.clusterQueue",
         Layer.SCHEMA, 'clusterQueue "CQ!"', "should match"),
    Case("label-key-invalid",
         flavor(nodeLabels={"bad key!": "x"}), "spec.nodeLabels[bad key!]", Layer.WEBHOOK,
         'nodeLabels key "bad key!"', "is not a valid label key"),
    # --- duplicates -----------------------------------------------------------------------------
    Case("duplicate-flavor-in-group", cluster_queue([group(["cpu"], ["a-SFX", "a-SFX"])]),
         "spec.resourceGroups[0].flavors[1]", Layer.SCHEMA, "a flavor twice in one group",
         "Duplicate value", model_path="spec.resourceGroups[0].flavors[1].name"),
    Case("duplicate-flavor-across-groups",
         cluster_queue([group(["cpu"], ["a-SFX"]), group(["memory"], ["a-SFX"])]),
         "spec.resourceGroups[1].flavors[0].name", Layer.WEBHOOK,
         "a flavor in two resource groups", "duplicate flavor"),
    Case("duplicate-covered-resource",
         cluster_queue([{"coveredResources": ["cpu", "cpu"], "flavors": [
             {"name": "default-SFX", "resources": [quota("cpu"), quota("memory")]}]}]),
         "spec.resourceGroups[0].coveredResources[1]", Layer.WEBHOOK,
         "cpu covered twice", "duplicate resource"),
    Case("duplicate-pod-set", workload([pod_set("main"), pod_set("main")]), "spec.podSets[1]",
         Layer.SCHEMA, "two pod sets named main", "Duplicate value",
         model_path="spec.podSets[1].name"),
    # --- quotas that contradict each other ------------------------------------------------------
    Case("covered-resources-mismatch",
         cluster_queue([{"coveredResources": ["cpu", "memory"], "flavors": [
             {"name": "default-SFX", "resources": [quota("cpu")]}]}]),
         "spec.resourceGroups[0]", Layer.CEL, "a flavor lists 1 of 2 covered resources",
         "flavors must have the same number of resources as the coveredResources",
         model_path="spec.resourceGroups[0].flavors[0].resources"),
    Case("covered-resources-order",
         cluster_queue([{"coveredResources": ["cpu"], "flavors": [
             {"name": "default-SFX", "resources": [quota("memory")]}]}]),
         f"{QUOTA}.name", Layer.WEBHOOK, "a flavor's resource is not the covered one",
         "must match coveredResources[0]"),
    Case("borrowing-limit-without-cohort", cq_with_quota(borrowingLimit="2"), "spec",
         Layer.CEL, "borrowingLimit without cohortName",
         "borrowingLimit must be nil when cohort is empty", model_path=f"{QUOTA}.borrowingLimit"),
    Case("lending-limit-without-cohort", cq_with_quota(lendingLimit="2"), "spec", Layer.CEL,
         "lendingLimit without cohortName", "lendingLimit must be nil when cohort is empty",
         model_path=f"{QUOTA}.lendingLimit"),
    Case("lending-above-nominal",
         {**cq_with_quota(nominal="4", lendingLimit="5"), "spec": {
             **cq_with_quota(nominal="4", lendingLimit="5")["spec"], "cohortName": "co-SFX"}},
         f"{QUOTA}.lendingLimit", Layer.WEBHOOK, "lendingLimit 5 > nominalQuota 4",
         "must be less than or equal to nominalQuota"),
    Case("reclaim-never-borrow-lower",
         cluster_queue(cohortName="co-SFX", preemption={
             "reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}),
         "spec.preemption", Layer.CEL,
         "reclaimWithinCohort Never with borrowWithinCohort LowerPriority",
         "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
         model_path="spec.preemption.borrowWithinCohort.policy"),
    Case("cohort-own-parent", cohort(parentName="co-SFX"), "spec.parentName", Layer.WEBHOOK,
         "a Cohort naming itself as parent", "must not be the Cohort itself"),
    Case("cohort-lending-without-parent",
         cohort(resourceGroups=[group(["cpu"], ["default-SFX"], lendingLimit="1")]),
         f"{QUOTA}.lendingLimit", Layer.WEBHOOK, "a Cohort's lendingLimit without parentName",
         "must be unset when spec.parentName is empty"),
    # --- workloads ------------------------------------------------------------------------------
    Case("min-count-above-count", workload([pod_set(count=2, minCount=3)]), "spec.podSets[0]",
         Layer.CEL, "minCount 3 > count 2",
         "minCount should be positive and less or equal to count",
         model_path="spec.podSets[0].minCount"),
    Case("min-count-zero", workload([pod_set(count=2, minCount=0)]),
         "spec.podSets[0].minCount", Layer.SCHEMA, "minCount 0", "should be greater than or equal to 1"),
    Case("count-negative", workload([pod_set(count=-1)]), "spec.podSets[0].count",
         Layer.SCHEMA, "count -1", "should be greater than or equal to 0"),
    Case("two-min-counts",
         workload([pod_set("a", count=2, minCount=1), pod_set("b", count=2, minCount=1)]),
         "spec.podSets[1].minCount", Layer.WEBHOOK, "minCount on two pod sets",
         "at most one pod set can use minCount"),
    Case("preemption-priority-below-priority",
         workload(priority=100, preemptionPriority=10), "spec", Layer.CEL,
         "preemptionPriority 10 < priority 100", "preemptionPriority must not be lower than priority",
         model_path="spec.preemptionPriority"),
    Case("priority-class-wrong-kind",
         workload(priority=1, priorityClassRef={"group": "kqueue.io", "kind": "PriorityClass",
                                                "name": "high"}),
         "spec.priorityClassRef", Layer.CEL, "a kqueue.io priorityClassRef of kind PriorityClass",
         "only the WorkloadPriorityClass kind is allowed",
         model_path="spec.priorityClassRef.kind"),
    Case("priority-ref-without-priority",
         workload(priorityClassRef={"group": "kqueue.io", "kind": "WorkloadPriorityClass",
                                    "name": "high"}),
         "spec", Layer.CEL, "priorityClassRef without the resolved priority",
         "priority should not be nil when priorityClassRef is set", model_path="spec.priority"),
    Case("reserved-resource-pods",
         workload([{"name": "main", "count": 1, "template": {"spec": {"containers": [
             {"name": "c", "image": "x", "resources": {"requests": {"pods": "1"}}}]}}}]),
         "spec.podSets[0].template.spec.containers[0].resources.requests[pods]", Layer.WEBHOOK,
         "a pod set requests the reserved resource pods", "is reserved"),
    # --- immutable fields -----------------------------------------------------------------------
    Case("local-queue-retarget", local_queue(), "spec.clusterQueue", Layer.CEL,
         "LocalQueue.spec.clusterQueue changed", "field is immutable",
         change=_set(["spec", "clusterQueue"], "other-queue")),
    Case("admitted-pod-set-grows", workload([pod_set(count=2)]), "spec.podSets[0].count",
         Layer.WEBHOOK, "an admitted Workload's pod set count raised",
         "cannot grow while the workload holds quota", old_status=ADMITTED_STATUS,
         change=_set(["spec", "podSets", 0, "count"], 3)),
    Case("admitted-pod-set-template", workload([pod_set(count=2)]),
         "spec.podSets[0].template", Layer.WEBHOOK, "an admitted Workload's pod template changed",
         "field is immutable while the workload holds quota", old_status=ADMITTED_STATUS,
         change=_set(["spec", "podSets", 0, "template", "spec", "containers", 0, "image"],
                     "registry.k8s.io/pause:3.9")),
    Case("admitted-queue-name", workload([pod_set(count=2)]), "spec.queueName", Layer.WEBHOOK,
         "an admitted Workload moved to another queue",
         "field is immutable while the workload holds quota", old_status=ADMITTED_STATUS,
         change=_set(["spec", "queueName"], "other")),
    # --- Jobs and Pods ----------------------------------------------------------------------------
    Case("job-elastic-and-partial",
         job(annotations={c.ELASTIC_JOB_ANNOTATION: "true",
                          c.JOB_MIN_PARALLELISM_ANNOTATION: "1"}),
         MIN_PARALLELISM, Layer.WEBHOOK, "an elastic Job asking for partial admission",
         "cannot be combined with an elastic job"),
    Case("job-min-parallelism-word", job(annotations={c.JOB_MIN_PARALLELISM_ANNOTATION: "half"}),
         MIN_PARALLELISM, Layer.WEBHOOK, 'job-min-parallelism "half"', "must be an integer"),
    Case("job-min-parallelism-too-high",
         job(annotations={c.JOB_MIN_PARALLELISM_ANNOTATION: "2"}), MIN_PARALLELISM,
         Layer.WEBHOOK, "job-min-parallelism 2 with parallelism 2", "should be between 0 and 1"),
    Case("job-queue-label-change", job(), f"metadata.labels[{c.QUEUE_NAME_LABEL}]",
         Layer.WEBHOOK, "a running Job's queue label changed",
         "field is immutable while the Job is not suspended",
         change=_set(["metadata", "labels", c.QUEUE_NAME_LABEL], "other")),
    Case("job-parallelism-string", job(parallelism="two"), "spec.parallelism", Layer.BUILTIN,
         'a Job\'s parallelism "two"', "spec.parallelism", modelled=False),
    # (A Pod requesting cpu "lots" is refused while decoding, by a message that names no field.)
    Case("pod-request-negative", pod(cpu="-1"), "spec.containers[0].resources.requests[cpu]",
         Layer.BUILTIN, 'a Pod requests cpu "-1"', "must be greater than or equal to 0",
         modelled=False),
    # --- admission fair sharing: a LocalQueue's weight, a ClusterQueue's admissionMode --------
    Case("local-queue-weight-negative", local_queue(fairSharing={"weight": "-1"}),
         "spec.fairSharing.weight", Layer.WEBHOOK, 'LocalQueue fairSharing.weight "-1"',
         "must be greater than or equal to 0"),
    Case("local-queue-weight-word", local_queue(fairSharing={"weight": "heavy"}),
         "spec.fairSharing.weight", Layer.SCHEMA, 'LocalQueue fairSharing.weight "heavy"',
         "should match"),
    Case("admission-mode-unknown", cluster_queue(admissionScope={"admissionMode": "ByUsage"}),
         "spec.admissionScope.admissionMode", Layer.SCHEMA, 'admissionMode "ByUsage"',
         "Unsupported value"),
]

# What the API server accepts on purpose; the controller reports the problem instead.
FALLBACKS: Final[list[tuple[str, str, str, str]]] = [
    # (object, field, what is wrong, documented fallback)
    ("ClusterQueue", "spec.resourceGroups[].flavors[].name",
     "names a ResourceFlavor that does not exist",
     "accepted; Active=False reason FlavorNotFound until the flavor exists"),
    ("Cohort", "spec.parentName", "a→b→a cycle of parents",
     "accepted; ClusterQueues in the cycle are Active=False, message 'cohort … is part of a "
     "cycle'; their workloads stay pending"),
    ("ClusterQueue", "spec.admissionScope.admissionMode",
     "UsageBasedAdmissionFairSharing without the Configuration's admissionFairSharing",
     "accepted; condition AdmissionFairSharing=False reason NotConfigured and a Warning event; "
     "heads are ordered by priority and creation time"),
    ("Job", f"metadata.labels[{c.PREEMPTIBILITY_LABEL}]", "value other than preemptible/"
     "non-preemptible", "accepted with an admission warning and an InvalidPreemptibility "
     "event; the label is ignored"),
    ("Job", f"metadata.annotations[{c.ELASTIC_JOB_ANNOTATION}]", 'value other than "true"',
     "accepted with an admission warning naming the annotation; the Job is not elastic (Kueue "
     'reads any value but "true" so); other kinds refuse the annotation'),
]


def deep(obj: Obj) -> Obj:
    return copy.deepcopy(obj)
