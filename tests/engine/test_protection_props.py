"""Properties of preemption protection (preemption/protection.py), over random workloads driven
through the simulator, and the engine's report of a deferred preemption.

The scenario: ClusterQueue ``prod`` (quota ``P``) and its victims, admitted one by one before
``prod/urgent`` (high priority, ``X`` cpu) arrives, each protected for ``d`` on the path it would
be preempted on. On the reclaim path the victims are in ``dev`` (no quota of its own: everything
it holds is borrowed from prod); on the within-ClusterQueue path they are low-priority workloads
of prod itself; on the fair-sharing path, with fair sharing on, the quota ``P`` is the cohort's
and both ClusterQueues borrow all they use (urgent too, so its preemptions are fair-sharing
ones, which the shares decide). The protection comes from the Configuration or from the victims' ClusterQueue
(which then overrides a different Configuration value).

* **No early preemption**: no victim is preempted before its admission plus ``d``.
* **No late admission**: urgent is admitted at the first instant ``T >= arrival`` at which the
  free quota plus the victims whose protection ended by ``T`` make room for it: the first expiry
  that frees enough, not later (it is retried then, with no other event).
  (On the fair-sharing path the shares decide whether the free quota and the victims make
  room; the instants are pinned by tests/simulate/test_protection.py.)
* **No partial set**: every victim goes at urgent's admission, none before it (an unprotected
  victim is not evicted while urgent still waits for a protected one). On the fair-sharing path
  too: urgent, ordered first, takes what its victims freed, and a preemption its victims would
  undo is not made (``test_fair_sharing_no_preemption_that_its_victims_would_undo``).
* **Not taken back**: urgent, once admitted, is not preempted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kqueue.api.loader import load_text
from kqueue.controller.metrics import Metrics
from kqueue.engine.preemption.preemptor import ClassicalPreemptor
from kqueue.engine.types import FairSharingConfig, ProtectionConfig
from kqueue.sim.driver import ADMITTED, PREEMPTED, Simulation
from kqueue.sim.scenario import build_scenario

from .builders import t

_CQ = """
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata: {name: %(name)s}
spec:
  cohortName: org
  namespaceSelector: {}
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority%(protection)s}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: %(quota)d}]}]
---
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata: {name: q, namespace: %(name)s}
spec: {clusterQueue: %(name)s}
"""

_COHORT = """
---
apiVersion: kqueue.io/v1alpha1
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: %(quota)d}]}]
"""

_WL = """
---
apiVersion: kqueue.io/v1alpha1
kind: Workload
metadata:
  name: %(name)s
  namespace: %(ns)s
  annotations: {simulate.kqueue.io/arrival: %(arrival)ds, simulate.kqueue.io/run-time: 3h}
spec:
  queueName: q
  priority: %(priority)d
  podSets:
  - {name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "%(cpu)d"}}}]}}}
"""


@dataclass(frozen=True)
class Case:
    path: str  # "reclaim", "fair" or "within"
    quota: int
    # (cpu, arrival second) of each victim; they all fit in ``quota``.
    victims: tuple[tuple[int, int], ...]
    urgent_cpu: int
    urgent_arrival: int
    protection_s: int
    # Where the protection is set: the Configuration, or the victims' ClusterQueue (overriding a
    # Configuration that says something else).
    on_cluster_queue: bool

    @property
    def victim_cq(self) -> str:
        return "prod" if self.path == "within" else "dev"

    def field(self) -> str:
        return {
            "reclaim": "reclaimWithinCohort", "fair": "fairSharing", "within": "withinClusterQueue",
        }[self.path]

    def reason(self) -> str:
        return {
            "reclaim": "InCohortReclamation", "fair": "InCohortFairSharing",
            "within": "InClusterQueue",
        }[self.path]

    def config(self) -> ProtectionConfig:
        own = timedelta(seconds=self.protection_s)
        # Overridden by the victims' ClusterQueue: a value that would give other results.
        value = timedelta(hours=2) if self.on_cluster_queue else own
        if self.path == "reclaim":
            return ProtectionConfig(reclaim_within_cohort=value)
        if self.path == "fair":
            return ProtectionConfig(fair_sharing=value)
        return ProtectionConfig(within_cluster_queue=value)

    def yaml(self) -> str:
        def protection(cq: str) -> str:
            if not self.on_cluster_queue or cq != self.victim_cq:
                return ""
            return f", protection: {{{self.field()}: {{minAdmitDuration: {self.protection_s}s}}}}"

        docs = ["apiVersion: kqueue.io/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: default}\n"]
        prod_quota = self.quota
        if self.path == "fair":
            docs.append(_COHORT % {"quota": self.quota})
            prod_quota = 0
        docs.append(_CQ % {"name": "prod", "quota": prod_quota, "protection": protection("prod")})
        docs.append(_CQ % {"name": "dev", "quota": 0, "protection": protection("dev")})
        for i, (cpu, arrival) in enumerate(self.victims):
            docs.append(_WL % {
                "name": f"v{i}", "ns": self.victim_cq, "arrival": arrival, "priority": 0,
                "cpu": cpu,
            })
        docs.append(_WL % {
            "name": "urgent", "ns": "prod", "arrival": self.urgent_arrival, "priority": 100,
            "cpu": self.urgent_cpu,
        })
        return "".join(docs)

    def expected_admission(self) -> int:
        """The first instant at which the free quota and the unprotected victims make room."""
        free = self.quota - sum(cpu for cpu, _ in self.victims)
        instants = sorted(
            {self.urgent_arrival}
            | {a + self.protection_s for _, a in self.victims
               if a + self.protection_s > self.urgent_arrival}
        )
        for at in instants:
            released = sum(cpu for cpu, a in self.victims if a + self.protection_s <= at)
            if free + released >= self.urgent_cpu:
                return at
        raise AssertionError("urgent never fits")


@st.composite
def cases(draw: st.DrawFn) -> Case:
    victims = tuple(draw(st.lists(
        st.tuples(st.integers(1, 3), st.integers(0, 300)), min_size=1, max_size=5
    )))
    used = sum(cpu for cpu, _ in victims)
    quota = used + draw(st.integers(0, 2))
    return Case(
        path=draw(st.sampled_from(["reclaim", "fair", "within"])),
        quota=quota,
        victims=victims,
        urgent_cpu=draw(st.integers(quota - used + 1, quota)),
        urgent_arrival=draw(st.integers(301, 400)),
        protection_s=draw(st.sampled_from([0, 30, 120, 300, 600, 900])),
        on_cluster_queue=draw(st.booleans()),
    )


def _simulate(case: Case) -> Simulation:
    scenario = build_scenario(load_text(case.yaml(), "protection.yaml").objects, start=t(0))
    if case.path == "fair":
        sim = Simulation(
            scenario, fair_sharing=FairSharingConfig(), preemption_protection=case.config()
        )
    else:
        sim = Simulation(
            scenario, preemptor=ClassicalPreemptor(), preemption_protection=case.config()
        )
    sim.run(until=timedelta(hours=1))
    return sim


def _seconds(sim: Simulation, kind: str, workload: str) -> list[int]:
    return [
        int((e.time - sim.start).total_seconds())
        for e in sim.events
        if e.type == kind and e.workload == workload
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
@example(case=Case("reclaim", 4, ((2, 0), (2, 100)), 3, 301, 600, False))
@example(case=Case("within", 5, ((2, 0), (2, 200)), 3, 350, 300, True))
@example(case=Case("fair", 6, ((3, 0), (3, 250)), 2, 320, 600, True))
def test_no_preemption_before_protection_ends_and_no_admission_after_it(case: Case) -> None:
    sim = _simulate(case)
    for i, (_, arrival) in enumerate(case.victims):
        victim = f"{case.victim_cq}/v{i}"
        [admitted, *_] = _seconds(sim, ADMITTED, victim)
        assert admitted == arrival, (victim, sim.events)
        for preempted in _seconds(sim, PREEMPTED, victim):
            assert preempted >= admitted + case.protection_s, (victim, preempted)
    admitted_at = _seconds(sim, ADMITTED, "prod/urgent")[:1]
    if case.path != "fair":
        assert admitted_at == [case.expected_admission()]
    preemptions = [
        s for i in range(len(case.victims))
        for s in _seconds(sim, PREEMPTED, f"{case.victim_cq}/v{i}")
    ]
    assert all([s] == admitted_at for s in preemptions), (admitted_at, preemptions)
    assert _seconds(sim, PREEMPTED, "prod/urgent") == []
    # Each on the path the case protects.
    reasons = {e.reason for e in sim.events if e.type == PREEMPTED}
    assert reasons <= {case.reason()}, reasons


def test_a_deferred_preemption_is_reported_and_counted() -> None:
    case = Case("reclaim", 4, ((3, 0),), 2, 301, 600, False)
    scenario = build_scenario(load_text(case.yaml(), "protection.yaml").objects, start=t(0))
    sim = Simulation(
        scenario, preemptor=ClassicalPreemptor(), preemption_protection=case.config()
    )
    sim.run(until=timedelta(seconds=300))
    sim.now = t(301)
    sim.arrive_all()
    result = sim.step()
    [deferred] = result.protection_deferred
    assert (deferred.cluster_queue, deferred.workload) == ("prod", "prod/urgent")
    # prod holds back what urgent waits for: its 2 cpu (all of its nominal quota that is free).
    assert deferred.holds == {("default", "cpu"): 2000}
    [pending] = [p for p in result.pending if p.workload == "prod/urgent"]
    assert "dev/v0 protected until 00:10:00" in pending.message
    assert pending.details.message == pending.message
    assert sim.engine.next_deadline() == t(600)
    explained = sim.engine.explain(pending.workload)
    assert explained is not None and "retrying at 00:10:00" in explained.message
    metrics = Metrics()
    metrics.protection_deferred(result.protection_deferred)
    text = metrics.exposition().decode()
    assert 'kqueue_preemptions_deferred_by_protection_total{cluster_queue="prod"} 1.0' in text
    # Retried at 10m without any other event: dev/v0 goes, urgent follows.
    sim.run(until=timedelta(minutes=11))
    assert _seconds(sim, PREEMPTED, "dev/v0") == [600]
    assert _seconds(sim, ADMITTED, "prod/urgent") == [600]


def test_fair_sharing_path_waits_for_the_victims_protection() -> None:
    """The fair-sharing example above: dev/v0 (admitted at 0) is the one fair sharing takes, at
    600 s when its protection ends, not at urgent's arrival (320 s)."""
    sim = _simulate(Case("fair", 6, ((3, 0), (3, 250)), 2, 320, 600, True))
    assert [(e.workload, e.reason) for e in sim.events if e.type == PREEMPTED] == [
        ("dev/v0", "InCohortFairSharing")
    ]
    assert _seconds(sim, PREEMPTED, "dev/v0") == [600]
    assert _seconds(sim, ADMITTED, "prod/urgent") == [600]


def test_fair_sharing_no_preemption_that_its_victims_would_undo() -> None:
    """Found by the property above (protection plays no part: 0 s). The cohort's 8 cpu are all
    dev's (1, 1, 3 and 3 cpu); urgent (5 cpu) arrives in prod at 301 s. Fair sharing would let
    it preempt dev/v0, v1 and v2 (LessThanInitialShare: 5 of 8 below dev's 8 of 8), but dev/v0,
    requeued, would preempt urgent back under the same rule (dev's 4 of 8 below urgent's 5 of
    8): the three would have been evicted for nothing (they were, before: readmitted ahead of
    urgent). kqueue makes no such preemption (preemption/undo.py); urgent waits and says why."""
    sim = _simulate(Case("fair", 8, ((1, 0), (1, 0), (3, 0), (3, 0)), 5, 301, 0, False))
    assert [e for e in sim.events if e.type == PREEMPTED] == []
    assert _seconds(sim, ADMITTED, "prod/urgent") == []
    assert [_seconds(sim, ADMITTED, f"dev/v{i}") for i in range(4)] == [[0]] * 4
    assert isinstance(sim.engine.preemptor, ClassicalPreemptor)
    search = sim.engine.preemptor.explain("prod/urgent")
    assert search is not None and search.targets == ()
    assert (
        "no preemption that would be undone at once: dev/v0, requeued, would preempt it back "
        "under LessThanInitialShare: share of dev's side with it 500 (cpu) against 625 (cpu) "
        "for prod's side with the preemptor"
    ) in search.message


def test_fair_sharing_preemption_that_holds_admits_the_preemptor_at_once() -> None:
    """Two 4-cpu workloads of dev fill the cohort; urgent (4 cpu) takes one's place, and the
    victim, requeued (dev back at 8 of 8 against prod's 4 of 8), cannot take it back."""
    sim = _simulate(Case("fair", 8, ((4, 0), (4, 0)), 4, 301, 0, False))
    assert [(e.workload, e.preemptor) for e in sim.events if e.type == PREEMPTED] == [
        ("dev/v0", "prod/urgent")
    ]
    assert _seconds(sim, PREEMPTED, "dev/v0") == [301]
    assert _seconds(sim, ADMITTED, "prod/urgent") == [301]
    assert _seconds(sim, PREEMPTED, "prod/urgent") == []
    assert _seconds(sim, ADMITTED, "dev/v0") == [0]  # not readmitted
