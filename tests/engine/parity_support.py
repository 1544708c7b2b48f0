"""Support for the Kueue parity tests: Kueue's test fixtures rebuilt with kqueue objects.

Kueue's table tests (``pkg/scheduler/scheduler_test.go``, ``.../flavorassigner_test.go``,
``.../preemption/preemption_test.go``) describe each case with Kueue's test wrappers
(``MakeClusterQueue(...).ResourceGroup(...)``, ``MakeWorkload(...).ReserveQuota(...)``) and
compare against ``want*`` fields. This module gives the same vocabulary on top of
``tests/engine/builders.py`` so that a ported case reads like the original, and turns the
engine's results into the shapes Kueue's assertions use (admissions by workload key, queue dumps,
preemption ``key:reason`` sets).

Conventions carried over from Kueue's fixtures:

* ``MakeWorkload(name, ns)`` has one pod set ``main`` of count 1 and no creation timestamp;
  kqueue's builders default the creation time to the epoch, which keeps ties equal as in Kueue.
* ``Resource(name, nominal, borrowingLimit, lendingLimit)``: ``fq("on-demand", cpu=("50", "10"))``
  means nominal 50 with borrowing limit 10; ``lending=`` gives the lending limit.
* ``MakeAdmission(cq[, podSet]).Assignment(res, flavor, qty)`` is ``adm(cq, psa(...))``.
* Kueue's ``now`` is ``NOW`` seconds of test time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from kqueue.api.loader import load_text
from kqueue.engine import from_api
from kqueue.engine.assignment import Assignment, FlavorChoice, PodSetResult
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.preemption.seam import PreemptionPossibility, Preemptor
from kqueue.engine.snapshot import ClusterQueueSnapshot
from kqueue.engine.types import (
    Admission,
    BorrowWithinCohortPolicy,
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    FlavorFungibility,
    FlavorName,
    FlavorQuotas,
    FlavorResource,
    FungibilityPolicy,
    FungibilityPreference,
    LabelSelector,
    LocalQueueSpec,
    Mode,
    PodSetAssignment,
    PodSetName,
    PreemptionConfig,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    SelectorRequirement,
    Workload,
    WorkloadKey,
)
from kqueue.engine.workload import WorkloadInfo

from .builders import make_lq, make_workload, q, t

# Kueue's ``now`` in its tests; cycles run after it.
NOW = 1000.0
CYCLE = t(2000)

# -- quotas --------------------------------------------------------------------------------------

Quota = str | tuple[str, str | None] | tuple[str, str | None, str | None]


@dataclass(frozen=True)
class FQ:
    """One entry of a resource group: a flavor and its quotas (Kueue's MakeFlavorQuotas)."""

    flavor: str
    quotas: Mapping[str, ResourceQuota]


def fq(flavor: str, quotas: Mapping[str, Quota] | None = None, **resources: Quota) -> FQ:
    """``fq("spot", cpu=("0", "100"))``: Kueue's ``Resource(cpu, "0", "100")``.

    A value is the nominal quota, or (nominal, borrowingLimit[, lendingLimit]) with None for
    "unset" (Kueue's empty string). Resource names that are not identifiers go in ``quotas``.
    """
    out: dict[str, ResourceQuota] = {}
    for res, value in {**(quotas or {}), **resources}.items():
        if isinstance(value, str):
            out[res] = ResourceQuota(q(res, value))
            continue
        nominal, borrowing, *rest = value
        lending = rest[0] if rest else None
        out[res] = ResourceQuota(
            q(res, nominal),
            None if borrowing is None else q(res, borrowing),
            None if lending is None else q(res, lending),
        )
    return FQ(flavor, out)


def groups(*rgs: Sequence[FQ]) -> tuple[ResourceGroup, ...]:
    """Resource groups; covered resources are the union over the group's flavors (Kueue requires
    every flavor of a group to list the same resources, so a missing one is quota 0)."""
    out: list[ResourceGroup] = []
    for rg in rgs:
        covered: dict[str, None] = {}
        for f in rg:
            for res in f.quotas:
                covered.setdefault(res, None)
        flavors = tuple(
            FlavorQuotas(
                FlavorName(f.flavor),
                {ResourceName(r): f.quotas.get(r, ResourceQuota()) for r in covered},
            )
            for f in rg
        )
        out.append(ResourceGroup(tuple(ResourceName(r) for r in covered), flavors))
    return tuple(out)


def cohort(name: str, *rgs: Sequence[FQ], parent: str | None = None) -> CohortSpec:
    """Kueue's ``MakeCohort(name).ResourceGroup(...).Parent(parent)``."""
    return CohortSpec(CohortName(name), CohortName(parent) if parent else None, groups(*rgs))


def cluster_queue(
    name: str,
    *rgs: Sequence[FQ],
    cohort: str | None = None,
    within: str = "Never",
    reclaim: str = "Never",
    borrow_within: str = "Never",
    max_priority_threshold: int | None = None,
    when_can_borrow: str = "MayStopSearch",
    when_can_preempt: str = "TryNextFlavor",
    preference: str | None = None,
    strict_fifo: bool = False,
    namespace_in: tuple[str, ...] | None = None,
) -> ClusterQueueSpec:
    """Kueue's ``MakeClusterQueue(name)`` with its defaults: a namespace selector matching every
    namespace (``namespace_in`` gives Kueue's ``dep In (...)`` selector), BestEffortFIFO, no
    preemption, v1beta2 fungibility defaults (``Borrow``/``Preempt`` of v1beta1 are
    ``MayStopSearch``)."""
    selector = LabelSelector()
    if namespace_in is not None:
        selector = LabelSelector({}, (SelectorRequirement("dep", "In", namespace_in),))
    return ClusterQueueSpec(
        name=ClusterQueueName(name),
        cohort=CohortName(cohort) if cohort else None,
        resource_groups=groups(*rgs),
        queueing_strategy=QueueingStrategy.STRICT_FIFO if strict_fifo else QueueingStrategy.BEST_EFFORT_FIFO,
        namespace_selector=selector,
        flavor_fungibility=FlavorFungibility(
            FungibilityPolicy(when_can_borrow),
            FungibilityPolicy(when_can_preempt),
            FungibilityPreference(preference) if preference is not None else None,
        ),
        preemption=PreemptionConfig(
            within_cluster_queue=PreemptionPolicy(within),
            reclaim_within_cohort=PreemptionPolicy(reclaim),
            borrow_within_cohort=BorrowWithinCohortPolicy(borrow_within),
            borrow_within_cohort_max_priority_threshold=max_priority_threshold,
        ),
    )


@dataclass(frozen=True)
class PS:
    """A pod set of Kueue's ``MakePodSet(name, count).Request(...).SetMinimumCount(...)``."""

    name: str
    count: int
    requests: Mapping[str, str]
    min_count: int | None = None


def ps(name: str, count: int, requests: Mapping[str, str], min_count: int | None = None) -> PS:
    return PS(name, count, dict(requests), min_count)


def kwl(
    name: str,
    ns: str = "",
    *,
    queue: str = "",
    priority: int | None = None,
    created: float | None = None,
    requests: Mapping[str, str] | None = None,
    pod_sets: Sequence[PS] = (),
) -> Workload:
    """Kueue's ``MakeWorkload(name, ns)``: one pod set ``main`` of one pod with ``requests``,
    or the given ``pod_sets``; no creation timestamp unless ``created``."""
    b = make_workload(name, ns).queue(queue)
    if priority is not None:
        b.priority(priority)
    if created is not None:
        b.created(created)
    for i, p in enumerate(pod_sets):
        if i == 0 and p.name == "main":
            b.count(p.count)  # the builder starts with pod set main; reuse it
        else:
            b.pod_set(p.name, p.count)
        for res, value in p.requests.items():
            b.request(res, value)
        if p.min_count is not None:
            b.min_count(p.min_count)
    if not pod_sets:
        for res, value in (requests or {}).items():
            b.request(res, value)
    return b.obj()


# -- admissions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PSA:
    """An expected (or given) pod set assignment: flavors, total usage and count."""

    name: str
    count: int
    resources: Mapping[str, tuple[str, str]]  # resource -> (flavor, total quantity)

    def assignment(self) -> PodSetAssignment:
        return PodSetAssignment(
            PodSetName(self.name),
            {ResourceName(r): FlavorName(f) for r, (f, _) in self.resources.items()},
            {ResourceName(r): q(r, v) for r, (_, v) in self.resources.items()},
            self.count,
        )


def psa(name: str = "main", count: int = 1, **resources: tuple[str, str]) -> PSA:
    return PSA(name, count, resources)


def psa_of(name: str, count: int, resources: Mapping[str, tuple[str, str]]) -> PSA:
    return PSA(name, count, dict(resources))


@dataclass(frozen=True)
class Adm:
    cq: str
    pod_sets: tuple[PSA, ...]

    def admission(self, at: float = NOW) -> Admission:
        return Admission(
            ClusterQueueName(self.cq), tuple(p.assignment() for p in self.pod_sets), t(at)
        )

    def view(self) -> tuple[object, ...]:
        return admission_view(self.admission())


def adm(cq: str, *pod_sets: PSA, cpu: tuple[str, str] | None = None) -> Adm:
    """``adm("cq", cpu=("default", "2"))`` is Kueue's ``MakeAdmission("cq").Assignment(cpu, ...)``."""
    if cpu is not None:
        pod_sets = (*pod_sets, psa(cpu=cpu))
    return Adm(cq, pod_sets)


def admission_view(a: Admission) -> tuple[object, ...]:
    """What Kueue's wantAssignments compare: ClusterQueue and per pod set flavors, usage, count."""
    return (
        str(a.cluster_queue),
        tuple(
            (
                str(ps.name),
                tuple(sorted((str(r), str(f)) for r, f in ps.flavors.items())),
                tuple(sorted((str(r), v) for r, v in ps.resource_usage.items() if v)),
                ps.count,
            )
            for ps in a.pod_sets
        ),
    )


def reserve(wl: Workload, a: Adm, at: float = NOW) -> Workload:
    """Kueue's ``ReserveQuota``/``ReserveQuotaAt``/``SimpleReserveQuota``: hold ``a`` since ``at``."""
    return replace(wl, admission=a.admission(at))


def simple(wl: Workload, cq: str, flavor: str, at: float = NOW) -> Workload:
    """Kueue's ``SimpleReserveQuota(cq, flavor, at)``: every request of every pod set in one
    flavor, usage as requested."""
    pod_sets = tuple(
        PodSetAssignment(
            ps.name,
            {r: FlavorName(flavor) for r in ps.requests},
            {r: v * ps.count for r, v in ps.requests.items()},
            ps.count,
        )
        for ps in wl.pod_sets
    )
    return replace(wl, admission=Admission(ClusterQueueName(cq), pod_sets, t(at)))


# -- engines -------------------------------------------------------------------------------------

Obj = ResourceFlavor | ClusterQueueSpec | CohortSpec | LocalQueueSpec | Workload


def build_engine(
    objects: Iterable[Obj],
    *,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    preemptor: Preemptor | None = None,
) -> Engine:
    """An engine fed as Kueue's tests feed their cache and queue manager: flavors, cohorts,
    ClusterQueues, LocalQueues, namespaces, then workloads (holding quota or pending)."""
    objs = list(objects)
    engine = Engine(preemptor if preemptor is not None else ClassicalPreemptor())
    for ns, labels in (namespaces or {}).items():
        engine.set_namespace_labels(ns, labels)
    for kind in (ResourceFlavor, CohortSpec, ClusterQueueSpec, LocalQueueSpec, Workload):
        for o in objs:
            if not isinstance(o, kind):
                continue
            if isinstance(o, ResourceFlavor):
                engine.upsert_flavor(o)
            elif isinstance(o, CohortSpec):
                engine.upsert_cohort(o)
            elif isinstance(o, ClusterQueueSpec):
                engine.upsert_cluster_queue(o)
            elif isinstance(o, LocalQueueSpec):
                engine.upsert_local_queue(o)
            else:
                engine.upsert_workload(o)
    return engine


def lq(namespace: str, name: str, cq: str) -> LocalQueueSpec:
    """Kueue's ``MakeLocalQueue(name, namespace).ClusterQueue(cq)``."""
    return make_lq(name, cq, namespace=namespace)


def scheduled(result: CycleResult) -> dict[str, tuple[object, ...]]:
    """Kueue's gotScheduled: admissions written in the cycle, by workload key."""
    return {str(a.workload): admission_view(a.admission) for a in result.admitted}


def holding(engine: Engine) -> dict[str, tuple[object, ...]]:
    """Kueue's gotAssignments: every workload holding quota in the cache, with its admission."""
    return {str(k): admission_view(w.admission) for k, w in engine.cache.workloads.items()}


def queue_dump(engine: Engine) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Kueue's ``qManager.Dump()`` and ``DumpInadmissible()``: pending workloads per ClusterQueue,
    in the active heaps and parked as inadmissible (empty queues left out)."""
    active: dict[str, list[str]] = {}
    parked: dict[str, list[str]] = {}
    for name, queue in sorted(engine.queues.queues.items()):
        inadmissible = sorted(str(k) for k in queue.inadmissible)
        heap = sorted({str(i.key) for i in queue.infos()} - set(inadmissible))
        if heap:
            active[str(name)] = heap
        if inadmissible:
            parked[str(name)] = inadmissible
    return active, parked


def preempted_keys(result: CycleResult) -> set[str]:
    return {str(p.victim) for p in result.preempted}


def pending_reasons(result: CycleResult) -> dict[str, str]:
    return {str(p.workload): str(p.reason) for p in result.pending}


# Kinds in the order Kueue's controllers make them known to the cache before scheduling.
_MANIFEST_ORDER = (
    "Namespace",
    "WorkloadPriorityClass",
    "ResourceFlavor",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "Workload",
)


def engine_from_manifests(text: str, source: str) -> Engine:
    """An engine fed with Kueue manifests: read by ``kqueue.api.loader.load_text`` (Kueue kinds
    are converted to kqueue's) and turned into engine objects by ``kqueue.engine.from_api``."""
    loaded = load_text(text, source)
    assert not loaded.warnings, loaded.warnings
    engine = Engine(ClassicalPreemptor())
    for kind in _MANIFEST_ORDER:
        for o in loaded.objects:
            if o.kind != kind:
                continue
            m = o.model
            if kind == "Namespace":
                labels = (o.raw.get("metadata") or {}).get("labels") or {}
                engine.set_namespace_labels(o.name, labels)
            elif kind == "WorkloadPriorityClass":
                engine.upsert_priority_class(*from_api.priority_class(m))  # type: ignore[arg-type]
            elif kind == "ResourceFlavor":
                engine.upsert_flavor(from_api.flavor(m))  # type: ignore[arg-type]
            elif kind == "Cohort":
                engine.upsert_cohort(from_api.cohort(m))  # type: ignore[arg-type]
            elif kind == "ClusterQueue":
                engine.upsert_cluster_queue(from_api.cluster_queue(m))  # type: ignore[arg-type]
            elif kind == "LocalQueue":
                engine.upsert_local_queue(from_api.local_queue(m))  # type: ignore[arg-type]
            else:
                from_api.apply_workload(engine, m)  # type: ignore[arg-type]
    return engine


def decisions(result: CycleResult) -> dict[str, object]:
    """A cycle's decisions in the scenario tests' shape: admissions (pod set -> count and flavors),
    preemptions (victim -> reason) and pending reasons."""
    return {
        "admitted": {
            str(a.workload): {
                str(p.name): (p.count, {str(r): str(f) for r, f in sorted(p.flavors.items())})
                for p in a.pod_sets
            }
            for a in result.admitted
        },
        "preempted": {str(p.victim): str(p.reason) for p in result.preempted},
    }


# -- flavor assignment ---------------------------------------------------------------------------


@dataclass
class ScriptedOracle:
    """Kueue's ``testOracle`` in flavorassigner_test.go: a preemption possibility (and borrowing
    after preemption) per flavor/resource, ``Preempt`` with no borrowing by default."""

    results: Mapping[FlavorResource, tuple[PreemptionPossibility, int]] = field(
        default_factory=dict
    )

    def simulate_preemption(
        self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionPossibility, int]:
        return self.results.get(fr, (PreemptionPossibility.PREEMPT, 0))


def fr(flavor: str, resource: str) -> FlavorResource:
    return (FlavorName(flavor), ResourceName(resource))


def assignment_view(a: Assignment) -> dict[str, object]:
    """The parts of Kueue's wantAssignment the tests compare: representative mode, borrowing,
    per pod set flavor and mode per resource, and usage."""
    return {
        "mode": a.mode().name,
        "borrowing": a.borrowing,
        "pod_sets": {
            str(ps.name): {str(r): (str(c.flavor), c.mode.name) for r, c in ps.flavors.items()}
            for ps in a.pod_sets
        },
        "usage": {f"{f}/{r}": v for (f, r), v in sorted(a.usage.items()) if v},
    }


def given_assignment(
    cq: str,
    pod_sets: Sequence[tuple[str, int, Mapping[str, tuple[str, Mode]]]],
    wl: Workload,
) -> Assignment:
    """An assignment as Kueue's preemption tests give one (``singlePodSetAssignment``): flavors and
    modes per resource, with the workload's own requests as usage (Kueue's TotalRequests)."""
    by_name = {str(p.name): p for p in wl.pod_sets}
    results: list[PodSetResult] = []
    usage: dict[FlavorResource, int] = {}
    for name, count, flavors in pod_sets:
        spec = by_name[name]
        requests = {r: v * count for r, v in spec.requests.items()}
        choices = {
            ResourceName(r): FlavorChoice(FlavorName(f), mode, 0) for r, (f, mode) in flavors.items()
        }
        needs = any(mode != Mode.FIT for _, mode in flavors.values())
        results.append(
            PodSetResult(
                PodSetName(name),
                count,
                requests,
                choices,
                reasons=("insufficient unused quota",) if needs else (),
            )
        )
        for r, c in choices.items():
            amount = requests.get(r, 0)
            if amount:
                key = (c.flavor, r)
                usage[key] = usage.get(key, 0) + amount
    return Assignment(ClusterQueueName(cq), tuple(results), 0, usage)


def key_reasons(targets: Iterable[tuple[WorkloadKey | str, object]]) -> set[str]:
    """Kueue's ``targetKeyReason``: ``namespace/name:Reason``."""
    return {f"{k}:{r}" for k, r in targets}


def at(seconds: float) -> datetime:
    return t(seconds)
