"""Builders for engine tests: short, readable objects with Kueue-like defaults.

    make_cq("cq").cohort("c").quota("on-demand", cpu="10", borrowing_limit="2").obj()
    make_workload("a").priority(5).request("cpu", "2").queue("lq").obj()
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Self

from kqueue.api.quantity import parse_quantity
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.gates import FeatureGates
from kqueue.engine.preemption.seam import Preemptor
from kqueue.engine.readiness import PodsReadyConfig
from kqueue.engine.transformations import QuotaResources
from kqueue.engine.types import (
    EPOCH,
    Admission,
    BorrowWithinCohortPolicy,
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    ContainerResources,
    FlavorFungibility,
    FlavorName,
    FlavorQuotas,
    FungibilityPolicy,
    FungibilityPreference,
    LabelSelector,
    LocalQueueSpec,
    PodSet,
    PodSetAssignment,
    PodSetName,
    Preemptibility,
    PreemptionConfig,
    PreemptionOrder,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    SelectorRequirement,
    StopPolicy,
    Taint,
    Toleration,
    Workload,
    WorkloadKey,
)
from kqueue.engine.workload import WorkloadInfo, make_info


def t(seconds: float) -> datetime:
    """A point in test time."""
    return EPOCH + timedelta(seconds=seconds)


def q(resource: str, value: str | int) -> int:
    return parse_quantity(value, resource)


# -- flavors ----------------------------------------------------------------------------------


class FlavorBuilder:
    def __init__(self, name: str) -> None:
        self._name = name
        self._labels: dict[str, str] = {}
        self._taints: list[Taint] = []
        self._tolerations: list[Toleration] = []

    def label(self, key: str, value: str) -> Self:
        self._labels[key] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        self._taints.append(Taint(key, value, effect))
        return self

    def toleration(self, key: str, value: str = "", effect: str = "", op: str = "Equal") -> Self:
        self._tolerations.append(Toleration(key, op, value, effect))
        return self

    def obj(self) -> ResourceFlavor:
        return ResourceFlavor(
            FlavorName(self._name), dict(self._labels), tuple(self._taints), tuple(self._tolerations)
        )


def make_flavor(name: str) -> FlavorBuilder:
    return FlavorBuilder(name)


# -- quota holders ----------------------------------------------------------------------------


def _limit(value: str | dict[str, str] | None, resource: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return q(resource, value[resource]) if resource in value else None
    return q(resource, value)


class _QuotaBuilder:
    def __init__(self) -> None:
        # Resource groups: list of (flavor name, {resource: quota}) lists.
        self._groups: list[list[tuple[str, dict[str, ResourceQuota]]]] = [[]]

    def group(self) -> Self:
        """Start a new resource group for the following ``quota`` calls."""
        if self._groups[-1]:
            self._groups.append([])
        return self

    def quota(
        self,
        flavor: str,
        *,
        borrowing_limit: str | dict[str, str] | None = None,
        lending_limit: str | dict[str, str] | None = None,
        **resources: str | int,
    ) -> Self:
        quotas = {
            res: ResourceQuota(
                q(res, value), _limit(borrowing_limit, res), _limit(lending_limit, res)
            )
            for res, value in resources.items()
        }
        self._groups[-1].append((flavor, quotas))
        return self

    def _resource_groups(self) -> tuple[ResourceGroup, ...]:
        out: list[ResourceGroup] = []
        for group in self._groups:
            if not group:
                continue
            covered: dict[str, None] = {}
            for _, quotas in group:
                for res in quotas:
                    covered.setdefault(res, None)
            flavors = tuple(
                FlavorQuotas(
                    FlavorName(name),
                    {ResourceName(r): quotas.get(r, ResourceQuota()) for r in covered},
                )
                for name, quotas in group
            )
            out.append(ResourceGroup(tuple(ResourceName(r) for r in covered), flavors))
        return tuple(out)


class ClusterQueueBuilder(_QuotaBuilder):
    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name
        self._cohort: str | None = None
        self._strategy = QueueingStrategy.BEST_EFFORT_FIFO
        self._selector: LabelSelector | None = LabelSelector()
        self._fungibility = FlavorFungibility()
        self._preemption = PreemptionConfig()
        self._stop = StopPolicy.NONE

    def cohort(self, name: str) -> Self:
        self._cohort = name
        return self

    def strict_fifo(self) -> Self:
        self._strategy = QueueingStrategy.STRICT_FIFO
        return self

    def namespace_selector(self, selector: dict[str, str] | None) -> Self:
        self._selector = None if selector is None else LabelSelector(dict(selector))
        return self

    def namespace_expression(self, key: str, op: str, *values: str) -> Self:
        base = self._selector or LabelSelector()
        self._selector = LabelSelector(
            base.match_labels, (*base.match_expressions, SelectorRequirement(key, op, values))
        )
        return self

    def fungibility(
        self,
        borrow: str = "MayStopSearch",
        preempt: str = "TryNextFlavor",
        preference: str | None = None,
    ) -> Self:
        self._fungibility = FlavorFungibility(
            FungibilityPolicy(borrow),
            FungibilityPolicy(preempt),
            FungibilityPreference(preference) if preference is not None else None,
        )
        return self

    def preemption(
        self,
        within: str = "Never",
        reclaim: str = "Never",
        borrow_within: str = "Never",
        threshold: int | None = None,
    ) -> Self:
        self._preemption = PreemptionConfig(
            within_cluster_queue=PreemptionPolicy(within),
            reclaim_within_cohort=PreemptionPolicy(reclaim),
            borrow_within_cohort=BorrowWithinCohortPolicy(borrow_within),
            preemptible_priority_threshold=threshold,
        )
        return self

    def preemptible_threshold(self, threshold: int) -> Self:
        p = self._preemption
        self._preemption = PreemptionConfig(
            p.within_cluster_queue,
            p.reclaim_within_cohort,
            p.borrow_within_cohort,
            p.borrow_within_cohort_max_priority_threshold,
            threshold,
            p.preemption_order,
        )
        return self

    def stop(self, policy: str = "Hold") -> Self:
        self._stop = StopPolicy(policy)
        return self

    def obj(self) -> ClusterQueueSpec:
        return ClusterQueueSpec(
            name=ClusterQueueName(self._name),
            cohort=CohortName(self._cohort) if self._cohort else None,
            resource_groups=self._resource_groups(),
            queueing_strategy=self._strategy,
            namespace_selector=self._selector,
            flavor_fungibility=self._fungibility,
            preemption=self._preemption,
            stop_policy=self._stop,
        )


def make_cq(name: str) -> ClusterQueueBuilder:
    return ClusterQueueBuilder(name)


class CohortBuilder(_QuotaBuilder):
    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name
        self._parent: str | None = None

    def parent(self, name: str) -> Self:
        self._parent = name
        return self

    def obj(self) -> CohortSpec:
        return CohortSpec(
            CohortName(self._name),
            CohortName(self._parent) if self._parent else None,
            self._resource_groups(),
        )


def make_cohort(name: str) -> CohortBuilder:
    return CohortBuilder(name)


def make_lq(name: str, cq: str, namespace: str = "default", stop: str = "None") -> LocalQueueSpec:
    return LocalQueueSpec(namespace, name, ClusterQueueName(cq), StopPolicy(stop))


# -- workloads --------------------------------------------------------------------------------


@dataclass
class _PS:
    name: str
    count: int
    requests: dict[str, int] = field(default_factory=dict)
    min_count: int | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: list[tuple[SelectorRequirement, ...]] | None = None
    tolerations: list[Toleration] = field(default_factory=list)
    containers: list[ContainerResources] = field(default_factory=list)


def amounts(values: dict[str, str] | None) -> dict[ResourceName, int]:
    return {ResourceName(r): q(r, v) for r, v in (values or {}).items()}


def container(
    name: str = "c",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    *,
    init: bool = False,
    sidecar: bool = False,
) -> ContainerResources:
    """A container's requests and limits as written (``sidecar`` implies ``init``)."""
    return ContainerResources(name, amounts(requests), amounts(limits), init or sidecar, sidecar)


class WorkloadBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._name = name
        self._ns = namespace
        self._queue = "lq"
        self._pod_sets = [_PS("main", 1)]
        self._priority: int | None = None
        self._priority_class: str | None = None
        self._preemption_priority: int | None = None
        self._created = EPOCH
        self._uid = name
        self._preemptibility: Preemptibility | None = None
        self._owner_label: str | None = None
        self._pod_label: str | None = None
        self._active = True
        self._admission: Admission | None = None
        self._requeue_at: datetime | None = None
        self._max_exec: int | None = None
        self._past_exec = 0

    def queue(self, name: str) -> Self:
        self._queue = name
        return self

    def priority(self, value: int) -> Self:
        self._priority = value
        return self

    def priority_class(self, name: str) -> Self:
        self._priority_class = name
        return self

    def preemption_priority(self, value: int) -> Self:
        self._preemption_priority = value
        return self

    def created(self, seconds: float) -> Self:
        self._created = t(seconds)
        return self

    def uid(self, uid: str) -> Self:
        self._uid = uid
        return self

    def pod_set(self, name: str, count: int = 1) -> Self:
        """Add a pod set; ``request`` and friends then apply to it."""
        if self._pod_sets == [_PS("main", 1)] and name != "main":
            self._pod_sets = []
        self._pod_sets.append(_PS(name, count))
        return self

    def count(self, n: int) -> Self:
        self._pod_sets[-1].count = n
        return self

    def min_count(self, n: int) -> Self:
        self._pod_sets[-1].min_count = n
        return self

    def request(self, resource: str, value: str | int) -> Self:
        """Per-pod request of the current pod set."""
        self._pod_sets[-1].requests[resource] = q(resource, value)
        return self

    def containers(self, *cs: ContainerResources) -> Self:
        """The current pod set's containers; the engine computes its requests from them."""
        self._pod_sets[-1].containers.extend(cs)
        return self

    def node_selector(self, key: str, value: str) -> Self:
        self._pod_sets[-1].node_selector[key] = value
        return self

    def affinity(self, *terms: Iterable[tuple[str, str, tuple[str, ...]]]) -> Self:
        """Required node affinity: each term is (key, operator, values) requirements."""
        self._pod_sets[-1].affinity = [
            tuple(SelectorRequirement(k, op, vals) for k, op, vals in term) for term in terms
        ]
        return self

    def toleration(self, key: str, value: str = "", effect: str = "", op: str = "Equal") -> Self:
        self._pod_sets[-1].tolerations.append(Toleration(key, op, value, effect))
        return self

    def non_preemptible(self) -> Self:
        self._preemptibility = Preemptibility.NON_PREEMPTIBLE
        return self

    def preemptible(self) -> Self:
        self._preemptibility = Preemptibility.PREEMPTIBLE
        return self

    def owner_label(self, value: str) -> Self:
        self._owner_label = value
        return self

    def pod_label(self, value: str) -> Self:
        self._pod_label = value
        return self

    def inactive(self) -> Self:
        self._active = False
        return self

    def max_exec(self, seconds: int) -> Self:
        """spec.maximumExecutionTimeSeconds."""
        self._max_exec = seconds
        return self

    def past_exec(self, seconds: int) -> Self:
        """status.accumulatedPastExecutionTimeSeconds."""
        self._past_exec = seconds
        return self

    def requeue_at(self, seconds: float) -> Self:
        self._requeue_at = t(seconds)
        return self

    def reserved_in(self, cq: str, flavors: dict[str, str] | str, at: float = 0) -> Self:
        """Hold quota in ``cq`` (flavor per resource, or one flavor for all)."""
        pod_sets = []
        for ps in self._pod_sets:
            fl = {r: flavors if isinstance(flavors, str) else flavors[r] for r in ps.requests}
            pod_sets.append(
                PodSetAssignment(
                    PodSetName(ps.name),
                    {ResourceName(r): FlavorName(f) for r, f in fl.items()},
                    {ResourceName(r): v * ps.count for r, v in ps.requests.items()},
                    ps.count,
                )
            )
        self._admission = Admission(ClusterQueueName(cq), tuple(pod_sets), t(at))
        return self

    def obj(self) -> Workload:
        return Workload(
            namespace=self._ns,
            name=self._name,
            queue_name=self._queue,
            pod_sets=tuple(
                PodSet(
                    PodSetName(ps.name),
                    ps.count,
                    {ResourceName(r): v for r, v in ps.requests.items()},
                    ps.min_count,
                    dict(ps.node_selector),
                    None if ps.affinity is None else tuple(ps.affinity),
                    tuple(ps.tolerations),
                    tuple(ps.containers),
                )
                for ps in self._pod_sets
            ),
            uid=self._uid,
            creation_time=self._created,
            priority=self._priority,
            priority_class=self._priority_class,
            preemption_priority=self._preemption_priority,
            preemptibility=self._preemptibility,
            owner_preemptibility_label=self._owner_label,
            pod_preemptibility_label=self._pod_label,
            active=self._active,
            requeue_at=self._requeue_at,
            admission=self._admission,
            max_execution_seconds=self._max_exec,
            past_execution_seconds=self._past_exec,
        )

    def info(self) -> WorkloadInfo:
        return make_info(self.obj(), {})


def make_workload(name: str, namespace: str = "default") -> WorkloadBuilder:
    return WorkloadBuilder(name, namespace)


def key(name: str, namespace: str = "default") -> WorkloadKey:
    return WorkloadKey(f"{namespace}/{name}")


# -- engines ----------------------------------------------------------------------------------

Obj = ResourceFlavor | ClusterQueueSpec | CohortSpec | LocalQueueSpec | Workload


def make_engine(
    *objects: Obj,
    preemptor: Preemptor | None = None,
    gates: FeatureGates | None = None,
    pods_ready: PodsReadyConfig | None = None,
    quota_resources: QuotaResources | None = None,
) -> Engine:
    """An engine fed with ``objects``.

    Without LocalQueues among ``objects``, each ClusterQueue gets a LocalQueue of the same name in
    namespace ``default``, and with a single ClusterQueue also the LocalQueue ``lq``.
    """
    engine = Engine(
        preemptor, gates=gates, pods_ready=pods_ready, quota_resources=quota_resources
    )
    given_lq = any(isinstance(o, LocalQueueSpec) for o in objects)
    single = sum(isinstance(o, ClusterQueueSpec) for o in objects) == 1
    for o in objects:
        if isinstance(o, ResourceFlavor):
            engine.upsert_flavor(o)
    for o in objects:
        if isinstance(o, CohortSpec):
            engine.upsert_cohort(o)
    for o in objects:
        if isinstance(o, ClusterQueueSpec):
            engine.upsert_cluster_queue(o)
            if not given_lq:
                engine.upsert_local_queue(make_lq(o.name, o.name))
                if single:
                    engine.upsert_local_queue(make_lq("lq", o.name))
    for o in objects:
        if isinstance(o, LocalQueueSpec):
            engine.upsert_local_queue(o)
    for o in objects:
        if isinstance(o, Workload):
            engine.upsert_workload(o)
    return engine


def admitted_flavors(result: CycleResult) -> dict[str, dict[str, str]]:
    """name -> {resource: flavor} over all pod sets (pod set prefix when several)."""
    out: dict[str, dict[str, str]] = {}
    for a in result.admitted:
        name = a.workload.split("/", 1)[1]
        flavors: dict[str, str] = {}
        many = len(a.pod_sets) > 1
        for ps in a.pod_sets:
            for r, f in ps.flavors.items():
                flavors[f"{ps.name}.{r}" if many else r] = f
        out[name] = flavors
    return out


def pending_reasons(result: CycleResult) -> dict[str, str]:
    return {p.workload.split("/", 1)[1]: str(p.reason) for p in result.pending}


def run_until_quiet(engine: Engine, start: float = 1, max_cycles: int = 50) -> list[CycleResult]:
    """Run cycles until one admits and preempts nothing and no head was left active."""
    results: list[CycleResult] = []
    for i in range(max_cycles):
        r = engine.schedule(t(start + i))
        results.append(r)
        if not r.admitted and not r.preempted and not any(x.active for x in r.requeued):
            break
    return results


# -- preemption, slices, readiness ------------------------------------------------------------


def with_preemption(cq: ClusterQueueSpec, **changes: Any) -> ClusterQueueSpec:
    """``cq`` with fields of its PreemptionConfig replaced (``preemption_order="Oldest"``,
    ``borrow_within_cohort_max_priority_threshold=3``, ...); strings become the enums."""
    enums: dict[str, Any] = {
        "within_cluster_queue": PreemptionPolicy,
        "reclaim_within_cohort": PreemptionPolicy,
        "borrow_within_cohort": BorrowWithinCohortPolicy,
        "preemption_order": PreemptionOrder,
    }
    typed = {k: enums[k](v) if k in enums and isinstance(v, str) else v for k, v in changes.items()}
    return replace(cq, preemption=replace(cq.preemption, **typed))


def preempted(result: CycleResult) -> dict[str, str]:
    """victim name -> Preempted reason."""
    return {p.victim.split("/", 1)[1]: str(p.reason) for p in result.preempted}

