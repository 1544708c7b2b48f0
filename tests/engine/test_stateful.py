"""Random sequences of events against the engine, with the invariants checked after each step.

* Admissions never take usage past what quota allows at any level of the cohort tree: the root's
  usage within its subtree quota, and every node within its subtree quota plus its borrowing
  limit, computed here from the specs independently of the engine's formulas. (A quota edit may
  leave the tree over-committed, as in Kueue; then the check resumes once usage is back within.)
* No workload holds quota twice, or holds quota and pends at the same time.
* Non-preemptible workloads are admitted only within their ClusterQueue's nominal quota.
* A twin engine fed the same events and clock makes the same decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from kqueue.engine.engine import Engine
from kqueue.engine.types import (
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    FlavorResource,
    Preemptibility,
    Usage,
    WorkloadKey,
)

from .builders import make_cohort, make_cq, make_flavor, make_lq, make_workload, t
from .fakes import LowerPriorityPreemptor

FLAVORS = ("f1", "f2")
# cq -> cohort; "solo" has none.
TOPOLOGY = {"a1": "team-a", "a2": "team-a", "b1": "team-b", "solo": None}
COHORTS = {"team-a": "root", "team-b": "root", "root": None}

# Mostly room for a few workloads, sometimes none (hypothesis favours the bounds).
quota = st.one_of(st.integers(min_value=2, max_value=10), st.just(0))
limit = st.one_of(st.none(), st.integers(min_value=0, max_value=6))


@dataclass(frozen=True)
class QuotaChoice:
    nominal: int
    borrowing: int | None
    lending: int | None


quota_choice = st.builds(QuotaChoice, quota, limit, limit)


def _cq_spec(name: str, q1: QuotaChoice, q2: QuotaChoice) -> ClusterQueueSpec:
    b = make_cq(name)
    cohort = TOPOLOGY[name]
    if cohort is not None:
        b = b.cohort(cohort)
    for flavor, qc in (("f1", q1), ("f2", q2)):
        # Limits only make sense (and are only valid) in a cohort; lending <= nominal.
        bl = str(qc.borrowing) if cohort and qc.borrowing is not None else None
        ll = str(min(qc.lending, qc.nominal)) if cohort and qc.lending is not None else None
        b = b.quota(flavor, cpu=str(qc.nominal), borrowing_limit=bl, lending_limit=ll)
    return b.obj()


def _cohort_spec(name: str, qc: QuotaChoice) -> CohortSpec:
    b = make_cohort(name)
    parent = COHORTS[name]
    if parent is not None:
        b = b.parent(parent)
    bl = str(qc.borrowing) if parent and qc.borrowing is not None else None
    ll = str(min(qc.lending, qc.nominal)) if parent and qc.lending is not None else None
    return b.quota("f1", cpu=str(qc.nominal), borrowing_limit=bl, lending_limit=ll).obj()


def _within_limits(engine: Engine) -> bool:
    """Independent check of the tree: root usage <= subtree quota, node usage <= subtree + BL."""
    cache = engine.cache
    specs = cache.cluster_queues
    frs: set[FlavorResource] = set()
    for s in specs.values():
        frs.update(s.quotas())
    for cs in cache.cohorts.values():
        frs.update(cs.quotas())
    children: dict[str, list[str]] = {}
    for name, s in specs.items():
        if s.cohort:
            children.setdefault(s.cohort, []).append(f"cq:{name}")
    for name, cs in cache.cohorts.items():
        if cs.parent:
            children.setdefault(cs.parent, []).append(f"co:{name}")

    def node(n: str, fr: FlavorResource) -> tuple[int, int, int | None, int | None]:
        """(subtree quota, usage, borrowing limit, lending limit) of a node."""
        kind, name = n.split(":", 1)
        if kind == "cq":
            q = specs[ClusterQueueName(name)].quotas().get(fr)
            usage = cache.usage(ClusterQueueName(name)).get(fr, 0)
            if q is None:
                return 0, usage, None, None
            return q.nominal, usage, q.borrowing_limit, q.lending_limit
        spec = cache.cohorts.get(CohortName(name))
        q = spec.quotas().get(fr) if spec else None
        subtree = q.nominal if q else 0
        usage = 0
        for child in children.get(name, []):
            c_sub, c_use, _, c_lend = node(child, fr)
            local = max(0, c_sub - c_lend) if c_lend is not None else 0
            subtree += c_sub - local
            usage += max(0, c_use - local)
        return subtree, usage, (q.borrowing_limit if q else None), (q.lending_limit if q else None)

    for fr in sorted(frs):
        nodes = [f"cq:{n}" for n in specs] + [f"co:{n}" for n in COHORTS]
        for n in nodes:
            sub, use, bl, _ = node(n, fr)
            kind, name = n.split(":", 1)
            parent = specs[ClusterQueueName(name)].cohort if kind == "cq" else COHORTS[name]
            if parent is None and use > sub:
                return False
            if parent is not None and bl is not None and use > sub + bl:
                return False
    return True


class EngineMachine(RuleBasedStateMachine):
    workloads = Bundle("workloads")

    def __init__(self) -> None:
        super().__init__()
        # A simple preemptor exercises the Preempt paths; it asserts that every simulation
        # leaves the snapshot exactly as it found it.
        self.engines = [Engine(LowerPriorityPreemptor(cohort_wide=True)) for _ in range(2)]
        self.clock = 0
        self.created = 0
        self.sound = True
        self.quotas: dict[str, tuple[QuotaChoice, QuotaChoice]] = {}

    def both(self, fn_name: str, *args: object, **kwargs: object) -> None:
        for e in self.engines:
            getattr(e, fn_name)(*args, **kwargs)

    @initialize(
        q=st.lists(st.tuples(quota_choice, quota_choice), min_size=4, max_size=4),
        cohort_q=st.lists(quota_choice, min_size=3, max_size=3),
    )
    def setup(self, q: list[tuple[QuotaChoice, QuotaChoice]], cohort_q: list[QuotaChoice]) -> None:
        for f in FLAVORS:
            self.both("upsert_flavor", make_flavor(f).obj())
        for name, qc in zip(sorted(COHORTS), cohort_q, strict=True):
            self.both("upsert_cohort", _cohort_spec(name, qc))
        for name, (q1, q2) in zip(sorted(TOPOLOGY), q, strict=True):
            self.quotas[name] = (q1, q2)
            self.both("upsert_cluster_queue", _cq_spec(name, q1, q2))
            self.both("upsert_local_queue", make_lq(name, name))

    @rule(
        target=workloads,
        cq=st.sampled_from(sorted(TOPOLOGY)),
        priority=st.integers(0, 3),
        cpu=st.integers(1, 4),
        count=st.integers(1, 3),
        partial=st.booleans(),
        non_preemptible=st.booleans(),
    )
    def create(
        self, cq: str, priority: int, cpu: int, count: int, partial: bool, non_preemptible: bool
    ) -> WorkloadKey:
        self.created += 1
        name = f"w{self.created}"
        b = make_workload(name).queue(cq).priority(priority).created(self.clock)
        b = b.count(count).request("cpu", str(cpu))
        if partial and count > 1:
            b = b.min_count(1)
        if non_preemptible:
            b = b.non_preemptible()
        self.both("upsert_workload", b.obj())
        return WorkloadKey(f"default/{name}")

    @rule(
        specs=st.lists(
            st.tuples(
                st.sampled_from(sorted(TOPOLOGY)),
                st.integers(0, 3),
                st.integers(1, 4),
                st.integers(1, 3),
                st.booleans(),
            ),
            min_size=1,
            max_size=6,
        )
    )
    def burst(self, specs: list[tuple[str, int, int, int, bool]]) -> None:
        """Several workloads arrive, then a cycle runs (keeps examples busy)."""
        for cq, priority, cpu, count, non_preemptible in specs:
            self.create(cq, priority, cpu, count, False, non_preemptible)
        self.schedule(1)

    @rule(wl=consumes(workloads))
    def finish(self, wl: WorkloadKey) -> None:
        self.both("finish", wl)

    @rule(wl=workloads)
    def evict(self, wl: WorkloadKey) -> None:
        self.both("evicted", wl)

    @rule()
    def complete_evictions(self) -> None:
        """The controller carries out every eviction the engine asked for."""
        for key in sorted(self.engines[0].cache.evicting):
            self.both("evicted", key)

    @rule(wl=workloads, priority=st.integers(0, 3))
    def change_priority(self, wl: WorkloadKey, priority: int) -> None:
        info = self.engines[0].pending_workload(wl)
        if info is None:
            return
        self.both("upsert_workload", replace(info.obj, priority=priority))

    @rule(cq=st.sampled_from(sorted(TOPOLOGY)), q1=quota_choice, q2=quota_choice)
    def edit_quota(self, cq: str, q1: QuotaChoice, q2: QuotaChoice) -> None:
        self.quotas[cq] = (q1, q2)
        self.both("upsert_cluster_queue", _cq_spec(cq, q1, q2))

    @rule(cohort=st.sampled_from(sorted(COHORTS)), qc=quota_choice)
    def edit_cohort(self, cohort: str, qc: QuotaChoice) -> None:
        self.both("upsert_cohort", _cohort_spec(cohort, qc))

    @rule(steps=st.integers(1, 3))
    def schedule(self, steps: int) -> None:
        for _ in range(steps):
            self.clock += 1
            sound_before = _within_limits(self.engines[0])
            before = {n: self.engines[0].usage(ClusterQueueName(n)) for n in TOPOLOGY}
            results = [e.schedule(t(self.clock)) for e in self.engines]
            assert results[0] == results[1], "same events and clock, different decisions"
            r = results[0]
            if sound_before:
                assert _within_limits(self.engines[0]), f"over-committed after {r.admitted}"
            keys = [a.workload for a in r.admitted]
            assert len(keys) == len(set(keys))
            self._check_non_preemptible(r.admitted, before)

    def _check_non_preemptible(self, admitted: object, before: dict[str, Usage]) -> None:
        engine = self.engines[0]
        running = {n: dict(u) for n, u in before.items()}
        for a in admitted:  # type: ignore[attr-defined]
            u = running[a.cluster_queue]
            for fr, v in a.usage.items():
                u[fr] = u.get(fr, 0) + v
            aw = engine.admitted_workload(a.workload)
            assert aw is not None
            spec = engine.cache.cluster_queues[a.cluster_queue]
            threshold = spec.preemption.preemptible_priority_threshold
            if aw.info.preemptibility(threshold) != Preemptibility.NON_PREEMPTIBLE:
                continue
            quotas = spec.quotas()
            for fr in a.usage:
                assert u[fr] <= quotas[fr].nominal, f"{a.workload} borrowed {fr}"

    @invariant()
    def holds_quota_once(self) -> None:
        engine = self.engines[0]
        seen: dict[WorkloadKey, ClusterQueueName] = {}
        for key, aw in engine.cache.workloads.items():
            assert key not in seen
            seen[key] = aw.cluster_queue
            assert key not in engine.queues.pending, f"{key} holds quota and pends"
        engine.cache.check_consistency()


EngineMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEngineMachine = EngineMachine.TestCase
