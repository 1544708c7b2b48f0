"""The simulator: the controller's loop over the engine, in simulated time.

The engine is the one the controller drives; the simulator plays the controller and the jobs:
it creates workloads when they arrive, carries out the engine's decisions at once (an admission
is final, a preemption's eviction completes at the end of the cycle that chose it, as the
docs/contracts.md §4 requires), finishes workloads when their run time is over, deletes, deactivates and
scales them when their annotations say so. A workload past its maximum execution time is
deactivated by the engine (a ``Deactivated`` event, then its eviction) at the simulated time its
budget runs out: the clock stops there as it does for any engine deadline.

Cycle model: Kueue's scheduler runs cycles back to back. By default a cycle takes no simulated
time: at each instant where something happens, cycles run until nothing more changes, then the
clock jumps to the next timed action. With ``decision_time`` set, a cycle that considers k heads
takes k x decision_time: timed actions that fall due meanwhile happen before the next cycle, as
they would while a real scheduler is busy. Decisions carry the time their cycle started. "Nothing more changes" means: a cycle had no head to consider,
or admitted, preempted and evicted nothing and left the same workloads pending for the same
reasons as the cycle before it (a StrictFIFO head blocked on quota repeats forever otherwise).

The clock is injected (``Scenario.start``); nothing reads the real time, so the same inputs
give the same events.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import IntEnum
from typing import Final

from kqueue.api import feature_gates as fg
from kqueue.api.durations import format_duration
from kqueue.api.integrations import is_elastic, workload_for_job
from kqueue.api.v1alpha1 import AdmissionCheckState
from kqueue.api.v1alpha1 import constants as c
from kqueue.engine import checks as checks_of
from kqueue.engine import dra, from_api
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.fairness.usage_ledger import AdmissionFairSharingConfig
from kqueue.engine.gates import FeatureGates
from kqueue.engine.preemption.seam import Preemptor
from kqueue.engine.tas import delayed
from kqueue.engine.transformations import QuotaResources
from kqueue.engine.types import (
    Admission,
    ClusterQueueName,
    FairSharingConfig,
    ProtectionConfig,
    WorkloadKey,
    local_queue_key,
)

from .annotations import CLASS_LABEL
from .checks import decide
from .scenario import Scenario, SimWorkload

# Event types (docs/contracts.md §4): the Workload condition types, and Deactivated (the
# eviction reason) for a workload taken out of its queue.
QUOTA_RESERVED: Final = c.QUOTA_RESERVED
ADMITTED: Final = c.ADMITTED
PREEMPTED: Final = c.PREEMPTED
EVICTED: Final = c.EVICTED
REQUEUED: Final = c.REQUEUED
FINISHED: Final = c.FINISHED
DEACTIVATED: Final = c.EVICTED_BY_DEACTIVATION

# Workload states.
PENDING: Final = "Pending"
STATE_QUOTA_RESERVED: Final = "QuotaReserved"
STATE_ADMITTED: Final = "Admitted"
STATE_FINISHED: Final = "Finished"
NOT_ARRIVED: Final = "NotArrived"

# Reason of the Finished condition of a deleted workload (the simulator's own: a deleted
# Workload has no status in a cluster, but the report still says where its quota went).
DELETED_REASON: Final = "Deleted"


@dataclass(frozen=True, slots=True)
class SimEvent:
    cycle: int
    time: datetime
    type: str
    workload: str
    cluster_queue: str | None
    reason: str
    message: str
    preemptor: str | None = None


@dataclass(slots=True)
class Condition:
    status: str
    reason: str
    message: str
    time: datetime


@dataclass(slots=True)
class WorkloadRecord:
    sw: SimWorkload
    state: str = NOT_ARRIVED
    admission: Admission | None = None
    # The admission the workload last held (kept after it finishes, for the report).
    last_admission: Admission | None = None
    conditions: dict[str, Condition] = field(default_factory=dict)
    arrived: datetime | None = None
    first_admitted: datetime | None = None
    admitted_at: datetime | None = None
    finished_at: datetime | None = None
    evictions: int = 0
    # Bumped on every admission: a finish timer of an earlier admission is void.
    epoch: int = 0
    counts: tuple[int, ...] = ()
    # A slice being replaced by this one (elastic scale-up), and when the job's run ends.
    replaces: str | None = None
    run_until: datetime | None = None
    # Two-phase admission: the workload's admission checks and when its quota was reserved.
    checks: list[AdmissionCheckState] = field(default_factory=list)
    reserved_at: datetime | None = None

    @property
    def key(self) -> str:
        return self.sw.key

    @property
    def class_name(self) -> str:
        return self.sw.api.metadata.labels.get(CLASS_LABEL, "")


@dataclass(frozen=True, slots=True)
class Sample:
    """A ClusterQueue's state from ``time`` on (until its next sample)."""

    time: datetime
    cluster_queue: str
    usage: Mapping[tuple[str, str], int]
    pending: int
    reserving: int
    # Status fairSharing.weightedShare (None when fair sharing is off).
    weighted_share: int | None = None


# A workload preempted this many times at one simulated instant means the engine preempts in a
# circle there (each preemption allowed, together never ending): the run stops and says so
# rather than spin. A real chain at one instant preempts a workload once or twice.
MAX_PREEMPTIONS_AT_ONE_INSTANT: Final = 10


class EndlessPreemption(RuntimeError):
    """The engine kept preempting the same workloads at one instant (a bug in the engine)."""


class _Action(IntEnum):
    # Order of actions due at the same instant: frees before arrivals, so an arriving
    # workload sees the quota a finishing one leaves.
    FINISH = 0
    DELETE = 1
    DEACTIVATE = 2
    SCALE = 3
    ARRIVE = 4
    CHECK = 5


Progress = Callable[[datetime, int, int], None]


class Simulation:
    """Feed a Scenario to an Engine and play it out; see the module docstring."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        preemptor: Preemptor | None = None,
        decision_time: timedelta = timedelta(0),
        carry_out_evictions: bool = True,
        fair_sharing: FairSharingConfig | None = None,
        admission_fair_sharing: AdmissionFairSharingConfig | None = None,
        preemption_protection: ProtectionConfig | None = None,
        gates: FeatureGates | None = None,
        quota_resources: QuotaResources | None = None,
    ) -> None:
        self.scenario = scenario
        # False for ``explain``: victims are chosen but stay, so the state is not changed.
        self.carry_out_evictions = carry_out_evictions
        # Simulated time the scheduler spends per head it considers (see module docstring).
        self.decision_time = decision_time
        self.engine = Engine(
            preemptor=preemptor,
            fair_sharing=fair_sharing,
            admission_fair_sharing=admission_fair_sharing,
            preemption_protection=preemption_protection,
            gates=gates,
            quota_resources=quota_resources,
        )
        self.start = scenario.start
        self.now = scenario.start
        self.events: list[SimEvent] = []
        self.samples: list[Sample] = []
        self.records: dict[str, WorkloadRecord] = {}
        # Heads considered (one decision each: admit, preempt or pending), over all cycles.
        self.decisions = 0
        self._timeline: list[tuple[datetime, int, int, str, int]] = []
        self._seq = 0
        self._quiet = False
        self._last_idle: tuple[tuple[str, str, str], ...] | None = None
        self._idle_streak = 0
        # Preemptions per victim at the current instant (EndlessPreemption).
        self._preempted_now: tuple[datetime, dict[str, int]] = (scenario.start, {})
        self._pending = 0
        self._finished = 0
        self._dirty: set[str] = set()
        # Workloads whose delayed topology placement did not fit yet (_place_delayed).
        self._second_pass: set[str] = set()
        self._last_sample: dict[str, tuple[object, ...]] = {}
        # Integral of usage over time per ClusterQueue and (flavor, resource), in unit-us.
        self.usage_integral: dict[str, dict[tuple[str, str], int]] = {}
        self._usage_since: dict[str, tuple[datetime, Mapping[tuple[str, str], int]]] = {}
        self._lq_cq: dict[str, str] = {
            f"{lq.namespace or 'default'}/{lq.name}": lq.spec.cluster_queue or ""
            for lq in scenario.local_queues
        }
        self._setup()

    # -- setup -------------------------------------------------------------------------------

    def _setup(self) -> None:
        sc = self.scenario
        e = self.engine
        for topo in sc.topologies:
            e.upsert_topology(from_api.topology(topo))
        for node in sc.nodes:
            e.upsert_node(from_api.node(node))
        for raw in sc.bound_pods:
            bound = from_api.bound_pod(raw)
            if bound is not None:
                e.upsert_pod(bound)
        for rf in sc.flavors:
            e.upsert_flavor(from_api.flavor(rf))
        for ac in sc.admission_checks:
            # Active unless the input says otherwise: a simulation plays a configured system.
            active = ac.condition_active()
            e.upsert_admission_check(
                ac.name, None if active is None or active.is_true else active.message or "inactive",
                provisions=from_api.admission_check_provisions(ac),
                delegates=from_api.admission_check_delegates(ac),
            )
        for co in sc.cohorts:
            e.upsert_cohort(from_api.cohort(co))
        for cq in sc.cluster_queues:
            e.upsert_cluster_queue(from_api.cluster_queue(cq))
        for lq in sc.local_queues:
            spec = from_api.local_queue(lq)
            e.upsert_local_queue(spec)
            usage = from_api.local_queue_usage(lq)
            if usage is not None:
                # A LocalQueue's consumedResources is its usage at the start: the decay counts
                # from there (not from its lastUpdate, which belongs to another clock).
                e.seed_local_queue_usage(spec.key, usage[0], self.start)
        for wpc in sc.workload_priority_classes:
            e.upsert_priority_class(*from_api.priority_class(wpc))
        for ns, labels in sorted(sc.namespaces.items()):
            e.set_namespace_labels(ns, labels)
        for ns, name, items in sc.limit_ranges:
            e.set_limit_range(ns, name, items)
        for cq in sc.cluster_queues:
            self._usage_since[cq.name] = (self.start, {})
            self._dirty.add(cq.name)
        for sw in sc.workloads:
            rec = WorkloadRecord(sw, counts=tuple(ps.count for ps in sw.api.spec.pod_sets))
            self.records[sw.key] = rec
            self._schedule(sw.arrives, _Action.ARRIVE, sw.key)
            t = sw.timing
            if t.delete is not None:
                self._schedule(self.start + t.delete, _Action.DELETE, sw.key)
            if t.deactivate is not None:
                self._schedule(self.start + t.deactivate, _Action.DEACTIVATE, sw.key)
            for at, count in t.scale:
                self._schedule(self.start + at, _Action.SCALE, sw.key, count)

    def _schedule(self, at: datetime, action: _Action, key: str, arg: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._timeline, (at, int(action), self._seq, key, arg))

    # -- the loop ----------------------------------------------------------------------------

    def run(
        self,
        *,
        cycles: int | None = None,
        until: timedelta | None = None,
        progress: Progress | None = None,
    ) -> None:
        """Run ``cycles`` cycles, or until nothing can change, or until ``start + until``."""
        end = self.start + until if until is not None else None
        self._apply_due()
        while cycles is None or self.engine.cycles < cycles:
            if not self._quiet:
                heads = self._cycle()
                if heads and self.decision_time:
                    self._sample()
                    busy_until = self.now + self.decision_time * heads
                    if end is not None and busy_until > end:
                        self.now = end
                        break
                    self.now = busy_until
                    self._apply_due()
                    if progress is not None:
                        progress(self.now, self._finished, len(self.records))
                continue
            self._sample()
            if progress is not None:
                progress(self.now, self._finished, len(self.records))
            nxt = self._next_time()
            if nxt is None or (end is not None and nxt > end):
                if cycles is None:
                    break
                # Exactly ``cycles`` cycles: the rest find nothing new to do.
                self._cycle()
                continue
            self.now = nxt
            if not self._apply_due() and nxt == self.engine.next_deadline():
                # A requeue backoff or PodsReady timeout expires: the engine may decide anew.
                self._wake()
        if end is not None and self.now < end and (cycles is None or not self._timeline):
            self.now = end
        self._sample()
        self._explain_pending()
        if progress is not None:
            progress(self.now, self._finished, len(self.records))

    def _explain_pending(self) -> None:
        """Pending conditions from the engine's explanation, which also covers workloads that
        never reached a cycle (missing LocalQueue, stopped queue, deactivated)."""
        for key in sorted(self.records):
            rec = self.records[key]
            if rec.state != PENDING:
                continue
            details = self.engine.explain(WorkloadKey(key))
            if details is not None:
                self._set(rec, c.QUOTA_RESERVED, "False", str(details.reason), details.message)

    def arrive_all(self) -> None:
        """Create every workload now, whatever its arrival time (``explain``: the objects
        given are the cluster as it is)."""
        arrivals = [e for e in self._timeline if e[1] == _Action.ARRIVE]
        self._timeline = [e for e in self._timeline if e[1] != _Action.ARRIVE]
        heapq.heapify(self._timeline)
        for _, _, _, key, _ in sorted(arrivals, key=lambda e: e[2]):
            self._arrive(self.records[key])

    def step(self) -> CycleResult:
        """One scheduling cycle at the current time, its decisions carried out."""
        result = self.engine.schedule(self.now)
        self.decisions += result.heads
        self._carry_out(result)
        return result

    def _next_time(self) -> datetime | None:
        times = [self._timeline[0][0]] if self._timeline else []
        deadline = self.engine.next_deadline()
        if deadline is not None and deadline > self.now:
            times.append(deadline)
        return min(times, default=None)

    def _wake(self) -> None:
        self._quiet = False
        self._last_idle = None
        self._idle_streak = 0

    def _apply_due(self) -> bool:
        """Carry out the timed actions due by now; whether any changed something."""
        changed = False
        now = self.now
        while self._timeline and self._timeline[0][0] <= now:
            due, action, _, key, arg = heapq.heappop(self._timeline)
            # While the scheduler was busy, things happened at their own time: so say the
            # events; the engine sees them before its next cycle.
            self.now = due
            if self._act(_Action(action), key, arg):
                changed = True
                self._wake()
        self.now = now
        return changed

    def _cycle(self) -> int:
        self._retry_second_passes()
        result = self.step()
        if result.heads == 0:
            self._quiet = True
        elif result.admitted or result.preempted or result.evicted:
            self._quiet = False
            self._last_idle = None
            self._idle_streak = 0
        else:
            sig = tuple((p.workload, p.reason, p.message) for p in result.pending)
            self._idle_streak += 1
            self._quiet = sig == self._last_idle or self._idle_streak > self._pending + 2
            self._last_idle = sig
        return result.heads

    # -- timed actions -----------------------------------------------------------------------

    def _act(self, action: _Action, key: str, arg: int) -> bool:
        rec = self.records.get(key)
        if rec is None:
            return False
        if action == _Action.ARRIVE:
            return self._arrive(rec)
        if action == _Action.FINISH:
            if rec.state not in (STATE_ADMITTED, STATE_QUOTA_RESERVED) or rec.epoch != arg:
                return False  # evicted (or gone) since: this run never completed
            self._finish(rec, c.FINISHED_SUCCEEDED, self._ran_message(rec))
            return True
        if action == _Action.DELETE:
            return self._delete(rec)
        if action == _Action.DEACTIVATE:
            return self._deactivate(rec)
        if action == _Action.CHECK:
            if rec.state != STATE_QUOTA_RESERVED or rec.epoch != arg:
                return False
            return self._settle_checks(rec)
        return self._scale(rec, arg)

    def _claims(self, namespace: str) -> dra.DeviceClaims | None:
        """What sizes the namespace's DRA device claims, as in the controller: only with
        resources.deviceClassMappings configured (docs/dra.md)."""
        config = self.scenario.config
        if not from_api.dra_on(config):
            return from_api.dra_off_claims(config)
        classes = config.resources.device_classes() if config is not None else {}
        if not classes:
            return None
        assert config is not None
        return dra.DeviceClaims(
            self.scenario.claim_templates.get(namespace, {}),
            classes,
            dra.counter_sources(config.resources),
            self.scenario.resource_slices,
            self.scenario.device_classes,
            extended_resources=fg.gate(config.feature_gates, fg.KUEUE_DRA_EXTENDED_RESOURCE),
        )

    def _arrive(self, rec: WorkloadRecord) -> bool:
        sw = rec.sw
        rec.arrived = self.now
        if sw.api.is_finished:
            rec.state = STATE_FINISHED
            rec.finished_at = self.now
            self._finished += 1
            return False
        wl = from_api.workload(
            sw.api,
            owner_labels=sw.owner_labels or sw.api.metadata.labels,
            claims=self._claims(sw.api.namespace or "default"),
        )
        if wl.admission is not None and wl.admission.admitted_at is None:
            # Without admission checks kqueue admits a reservation at once (below): admitted
            # now, which is where its preemption protection counts from.
            wl = replace(wl, admission=replace(wl.admission, admitted_at=self.now))
        self.engine.upsert_workload(wl)
        if wl.admission is not None:
            # Pre-admitted: it holds its quota since QuotaReserved's lastTransitionTime.
            rec.admission = rec.last_admission = wl.admission
            rec.admitted_at = rec.first_admitted = wl.admission.reserved_at
            rec.epoch += 1
            self._mark(wl.admission.cluster_queue)
            for cond in sw.api.status.conditions:
                rec.conditions[cond.type] = Condition(
                    cond.status, cond.reason, cond.message, cond.last_transition_time
                )
            if wl.admission.awaiting_checks:
                # Reserved and waiting for its admission checks, as the input says.
                rec.state = STATE_QUOTA_RESERVED
                rec.reserved_at = wl.admission.reserved_at
                rec.checks = [s.model_copy() for s in sw.api.status.admission_checks]
                self._start_checks(rec)
                return True
            if sw.api.is_admitted:
                rec.state = STATE_ADMITTED
            else:
                # Without admission checks, kqueue admits a reservation at once.
                rec.state = STATE_ADMITTED
                self._set(rec, c.ADMITTED, "True", c.ADMITTED_REASON, "The workload is admitted")
                self._event(ADMITTED, rec, c.ADMITTED_REASON, "The workload is admitted")
            if sw.timing.run_time is not None:
                ends = max(self.now, wl.admission.reserved_at + sw.timing.run_time)
                rec.run_until = ends
                self._schedule(ends, _Action.FINISH, rec.key, rec.epoch)
        else:
            rec.state = PENDING
            self._pending += 1
            cq = self._lq_cq.get(f"{wl.namespace}/{wl.queue_name}")
            if cq:
                self._mark(cq)
        return True

    def _finish(self, rec: WorkloadRecord, reason: str, message: str) -> None:
        held = rec.admission
        self.engine.finish(WorkloadKey(rec.key))
        if rec.state == PENDING:
            self._pending -= 1
        rec.state = STATE_FINISHED
        rec.admission = None
        rec.finished_at = self.now
        self._finished += 1
        self._set(rec, c.FINISHED, "True", reason, message)
        self._event(FINISHED, rec, reason, message, cq=held.cluster_queue if held else None)
        if held is not None:
            self._mark(held.cluster_queue)

    def _ran_message(self, rec: WorkloadRecord) -> str:
        ran = self.now - rec.admitted_at if rec.admitted_at is not None else timedelta(0)
        return f"Finished after running for {format_duration(ran)}"

    def _delete(self, rec: WorkloadRecord) -> bool:
        if rec.state == STATE_FINISHED:
            return False
        if rec.state == NOT_ARRIVED:
            rec.state = STATE_FINISHED
            rec.finished_at = self.now
            self._finished += 1
            return False
        self._finish(rec, DELETED_REASON, "The workload was deleted")
        return True

    def _deactivate(self, rec: WorkloadRecord) -> bool:
        if rec.state in (STATE_FINISHED, NOT_ARRIVED):
            rec.sw.api.spec.active = False
            return False
        aw = self.engine.admitted_workload(WorkloadKey(rec.key))
        info = self.engine.pending_workload(WorkloadKey(rec.key))
        if aw is not None:
            # As the controller sees it: spec.active false on a Workload holding its admission;
            # the engine then evicts it (reason Deactivated).
            obj = replace(aw.info.obj, admission=aw.admission)
        elif info is not None:
            obj = info.obj
        else:
            return False
        self._event(DEACTIVATED, rec, c.EVICTED_BY_DEACTIVATION, "The workload is deactivated")
        rec.sw.api.spec.active = False
        self.engine.upsert_workload(replace(obj, active=False, generation=obj.generation + 1))
        return True

    def _scale(self, rec: WorkloadRecord, count: int) -> bool:
        """An elastic Job's parallelism changes (see annotations.SCALE)."""
        if rec.state == STATE_FINISHED:
            return False
        key = WorkloadKey(rec.key)
        if rec.state == NOT_ARRIVED:
            for ps in rec.sw.api.spec.pod_sets:
                ps.count = count
                ps.min_count = min(ps.min_count, count) if ps.min_count else None
            rec.counts = tuple(ps.count for ps in rec.sw.api.spec.pod_sets)
            return False
        if rec.state == PENDING:
            info = self.engine.pending_workload(key)
            if info is None:
                return False
            obj = info.obj
            pod_sets = tuple(
                replace(
                    ps, count=count, min_count=min(ps.min_count, count) if ps.min_count else None
                )
                for ps in obj.pod_sets
            )
            rec.counts = tuple(ps.count for ps in pod_sets)
            self.engine.upsert_workload(
                replace(obj, pod_sets=pod_sets, generation=obj.generation + 1)
            )
            return True
        aw = self.engine.admitted_workload(key)
        if aw is None or rec.admission is None:
            return False
        current = rec.admission.pod_sets[0].count
        if count == current:
            return False
        if not self._slices_on():
            return self._recreate(rec, count)
        if count < current:
            # Scale-down: counts change in place and the quota of the removed pods is freed.
            admission = self.engine.scale_down(
                key, {ps.name: count for ps in aw.admission.pod_sets}
            )
            if admission is None:
                return False
            rec.admission = rec.last_admission = admission
            rec.counts = tuple(ps.count for ps in admission.pod_sets)
            self._mark(admission.cluster_queue)
            return True
        return self._scale_up(rec, count)

    def _slices_on(self) -> bool:
        config = self.scenario.config
        return config is None or fg.gate(config.feature_gates, fg.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)

    def _recreate(self, rec: WorkloadRecord, count: int) -> bool:
        """ElasticJobsViaWorkloadSlices off: the annotation has no effect, and a parallelism
        change under an admitted Workload is any Job's (Kueue's and the controller's
        MismatchedWorkload): the Workload is deleted, the Job suspended, and a new Workload of
        the new size queued; its run starts over."""
        job = rec.sw.job
        if job is None:
            return False
        self._finish(
            rec,
            DELETED_REASON,
            f"The workload was deleted: its Job's parallelism changed to {count} "
            "(ElasticJobsViaWorkloadSlices is off: no WorkloadSlice)",
        )
        return self._follow_job(rec, count, replaces=None, run_until=None)

    def _follow_job(
        self, rec: WorkloadRecord, count: int, *, replaces: str | None, run_until: datetime | None
    ) -> bool:
        """The Workload of ``rec``'s Job at parallelism ``count`` (its next generation)."""
        job = copy.deepcopy(rec.sw.job or {})
        job.setdefault("spec", {})["parallelism"] = count
        meta = job.setdefault("metadata", {})
        meta["generation"] = int(meta.get("generation") or 1) + 1
        api = workload_for_job(job, self.scenario.priorities, replacement_for=replaces)
        api.metadata.uid = f"{rec.sw.api.metadata.uid}-g{meta['generation']}"
        api.metadata.creation_timestamp = rec.sw.api.metadata.creation_timestamp
        sw = SimWorkload(
            api, rec.sw.timing, rec.sw.location, rec.sw.source, rec.sw.owner_labels, job, self.now
        )
        new = WorkloadRecord(sw, counts=(count,), replaces=replaces, run_until=run_until)
        # Later scale events of the Job apply to the newest Workload.
        for i, (at, action, seq, key, arg) in enumerate(self._timeline):
            if key == rec.key and action in (_Action.SCALE, _Action.DELETE, _Action.DEACTIVATE):
                self._timeline[i] = (at, action, seq, sw.key, arg)
        heapq.heapify(self._timeline)
        self.records[sw.key] = new
        return self._arrive(new)

    def _scale_up(self, rec: WorkloadRecord, count: int) -> bool:
        """A scale-up of an admitted elastic Job: a new WorkloadSlice replacing this one."""
        job = rec.sw.job
        if job is None or not is_elastic(job):
            return False
        return self._follow_job(rec, count, replaces=rec.key, run_until=rec.run_until)

    # -- decisions ---------------------------------------------------------------------------

    def _carry_out(self, result: CycleResult) -> None:
        evicting: list[tuple[WorkloadRecord, str, str]] = []
        for ev in result.evicted:
            rec = self.records[ev.workload]
            if ev.deactivate and ev.reason == c.EVICTED_BY_MAXIMUM_EXECUTION_TIME:
                # The engine deactivates it (Kueue's DeactivationTarget, then spec.active false),
                # then evicts it, as for a deactivation by its owner.
                rec.sw.api.spec.active = False
                self._event(
                    DEACTIVATED, rec, c.MAXIMUM_EXECUTION_TIME_EXCEEDED,
                    c.MAXIMUM_EXECUTION_TIME_EXCEEDED_MESSAGE, cq=ev.cluster_queue,
                )
            self._set(rec, c.EVICTED, "True", ev.reason, ev.message)
            self._event(EVICTED, rec, ev.reason, ev.message, cq=ev.cluster_queue)
            evicting.append((rec, ev.reason, ev.message))
        for p in result.preempted:
            self._count_preemption(p.victim, p.preemptor)
            rec = self.records[p.victim]
            self._set(rec, c.PREEMPTED, "True", p.reason, p.message)
            self._set(rec, c.EVICTED, "True", c.EVICTED_BY_PREEMPTION, p.message)
            self._event(PREEMPTED, rec, p.reason, p.message, cq=p.cluster_queue, by=p.preemptor)
            self._event(EVICTED, rec, c.EVICTED_BY_PREEMPTION, p.message, cq=p.cluster_queue)
            evicting.append((rec, c.EVICTED_BY_PREEMPTION, p.message))
        for a in result.admitted:
            self._admit(self.records[a.workload], a.admission)
        for done in result.finished:
            # A WorkloadSlice replaced by its scale-up, in the same step; the engine has
            # already moved its quota to the new slice.
            old = self.records.get(done.old)
            if old is not None and old.state != STATE_FINISHED:
                self._finish(old, done.reason, done.message)
        for pend in result.pending:
            waiting = self.records.get(pend.workload)
            if waiting is not None and waiting.state == PENDING:
                self._set(waiting, c.QUOTA_RESERVED, "False", pend.reason, pend.message)
        # Evictions chosen in this cycle complete at its end (docs/contracts.md §4).
        if self.carry_out_evictions:
            for rec, reason, message in evicting:
                self._evicted(rec, reason, message)

    def _count_preemption(self, victim: str, preemptor: str) -> None:
        at, counts = self._preempted_now
        if at != self.now:
            counts = {}
            self._preempted_now = (self.now, counts)
        counts[victim] = n = counts.get(victim, 0) + 1
        if n > MAX_PREEMPTIONS_AT_ONE_INSTANT:
            raise EndlessPreemption(
                f"at {self.now.isoformat()} ({format_duration(self.now - self.start)} in) "
                f"workload {victim} was preempted {n} times (the last by {preemptor}); the engine "
                "preempts in a circle here and the simulation stopped. This is a bug in kqueue: "
                "please report it with the scenario"
            )

    def _admit(self, rec: WorkloadRecord, admission: Admission) -> None:
        if rec.state == PENDING:
            self._pending -= 1
        cq = admission.cluster_queue
        rec.state = STATE_ADMITTED
        rec.admission = rec.last_admission = admission
        rec.admitted_at = self.now
        if rec.first_admitted is None:
            rec.first_admitted = self.now
        rec.epoch += 1
        rec.counts = tuple(ps.count for ps in admission.pod_sets)
        reserved = f"Quota reserved in ClusterQueue {cq}"
        self._set(rec, c.QUOTA_RESERVED, "True", c.QUOTA_RESERVED_REASON, reserved)
        for kind in (c.EVICTED, c.PREEMPTED):
            old = rec.conditions.get(kind)
            if old is not None and old.status == "True":
                # Kueue's SetQuotaReservation: a new reservation resets these.
                self._set(rec, kind, "False", c.QUOTA_RESERVED_REASON, "Previously: " + old.message)
        self._event(QUOTA_RESERVED, rec, c.QUOTA_RESERVED_REASON, reserved, cq=cq)
        self._mark(cq)
        rec.replaces = None
        if admission.awaiting_checks:
            # Two-phase admission: admitted once every check is Ready (_settle_checks).
            rec.state = STATE_QUOTA_RESERVED
            rec.reserved_at = self.now
            given = rec.checks or rec.sw.api.status.admission_checks
            rec.checks, _ = checks_of.sync(
                given, self.engine.admission_checks_for(admission), self.now
            )
            self._set(rec, c.ADMITTED, "False", checks_of.UNSATISFIED_CHECKS,
                      checks_of.UNSATISFIED_CHECKS_MESSAGE)
            self._start_checks(rec)
            return
        self._admitted(rec)

    def _admitted(self, rec: WorkloadRecord) -> None:
        """Admitted (at reservation, or once its checks are Ready): its run starts."""
        assert rec.admission is not None
        cq = rec.admission.cluster_queue
        rec.state = STATE_ADMITTED
        rec.admitted_at = self.now
        self._set(rec, c.ADMITTED, "True", c.ADMITTED_REASON, "The workload is admitted")
        self._event(ADMITTED, rec, c.ADMITTED_REASON, "The workload is admitted", cq=cq)
        if rec.run_until is not None and rec.sw.job is not None and rec.epoch == 1:
            # A new slice of a running job: the job keeps its end time.
            self._schedule(max(self.now, rec.run_until), _Action.FINISH, rec.key, rec.epoch)
        elif rec.sw.timing.run_time is not None:
            rec.run_until = self.now + rec.sw.timing.run_time
            self._schedule(rec.run_until, _Action.FINISH, rec.key, rec.epoch)

    # -- admission checks (sim/checks.py) ---------------------------------------------------

    def _flavors(self, rec: WorkloadRecord) -> set[str]:
        adm = rec.admission
        return {str(f) for ps in adm.pod_sets for f in ps.flavors.values()} if adm else set()

    def _start_checks(self, rec: WorkloadRecord) -> None:
        """Schedule each Pending check's rule, then settle what is due now."""
        since = rec.reserved_at or self.now
        for state in rec.checks:
            if state.state != checks_of.PENDING:
                continue
            clause = decide(self.scenario.check_rules, state.name, self._flavors(rec))
            if clause is not None and clause.after:
                self._schedule(since + clause.after, _Action.CHECK, rec.key, rec.epoch)
        self._settle_checks(rec)

    def _settle_checks(self, rec: WorkloadRecord) -> bool:
        """Apply the rules due by now; admit, requeue or deactivate as the states say."""
        since = rec.reserved_at or self.now
        for state in list(rec.checks):
            if state.state != checks_of.PENDING:
                continue
            clause = decide(self.scenario.check_rules, state.name, self._flavors(rec))
            if clause is None or since + clause.after > self.now:
                continue
            rec.checks = checks_of.set_state(
                rec.checks,
                AdmissionCheckState(name=state.name, state=clause.state,  # type: ignore[arg-type]
                                    message=clause.message(), retry_count=state.retry_count),
                self.now,
            )
        verdict = checks_of.verdict(rec.checks)
        if verdict == checks_of.Verdict.ADMIT:
            if not self._place_delayed(rec):
                return False
            self._admitted(rec)
            return True
        if verdict == checks_of.Verdict.WAIT:
            return False
        held = rec.admission
        cq = held.cluster_queue if held else None
        if verdict == checks_of.Verdict.REJECT:
            message = checks_of.checks_message(rec.checks, checks_of.REJECTED)
            rec.sw.api.spec.active = False
            self._event(DEACTIVATED, rec, checks_of.EVICTED_BY_ADMISSION_CHECK, message, cq=cq)
            reason = checks_of.DEACTIVATED_BY_ADMISSION_CHECK
            message = f"Deactivated due to {message}"
        else:
            reason = checks_of.EVICTED_BY_ADMISSION_CHECK
            message = f"Evicted due to {checks_of.checks_message(rec.checks, checks_of.RETRY)}"
        self._set(rec, c.EVICTED, "True", reason, message)
        self._event(EVICTED, rec, reason, message, cq=cq)
        self._evicted(rec, reason, message, requeue_at=checks_of.max_retry_time(rec.checks),
                      deactivate=verdict == checks_of.Verdict.REJECT)
        return True

    def _place_delayed(self, rec: WorkloadRecord) -> bool:
        """The second pass of a delayed topology request (engine/tas/delayed.py), once every
        check is Ready: whether the workload may be admitted now. Without room it keeps its
        quota, its Admitted condition says why, and the pass is tried again at the next cycle
        (the simulated nodes never change: only another workload leaving makes room)."""
        if not delayed.has_pending(rec.admission):
            self._second_pass.discard(rec.key)
            return True
        got = self.engine.place_delayed(WorkloadKey(rec.key))
        if isinstance(got, str):
            self._second_pass.add(rec.key)
            self._set(rec, c.ADMITTED, "False", delayed.PENDING_DELAYED_REASON,
                      f"{delayed.PENDING_DELAYED_MESSAGE}: {got}")
            return False
        self._second_pass.discard(rec.key)
        if got is not None:
            rec.admission = got
        return True

    def _retry_second_passes(self) -> None:
        for key in sorted(self._second_pass):
            rec = self.records.get(key)
            if rec is None or rec.state != STATE_QUOTA_RESERVED:
                self._second_pass.discard(key)
                continue
            self._settle_checks(rec)

    def _evicted(
        self, rec: WorkloadRecord, reason: str, message: str, *,
        requeue_at: datetime | None = None, deactivate: bool = False,
    ) -> None:
        held = rec.admission
        if held is None or rec.state == STATE_FINISHED:
            return
        if deactivate:
            aw = self.engine.admitted_workload(WorkloadKey(rec.key))
            if aw is not None:
                self.engine.upsert_workload(replace(aw.info.obj, admission=aw.admission, active=False))
        self.engine.evicted(WorkloadKey(rec.key), now=self.now, requeue_at=requeue_at)
        rec.checks = checks_of.reset_on_eviction(rec.checks, self.now)
        rec.evictions += 1
        rec.admission = None
        rec.state = PENDING
        self._pending += 1
        self._set(rec, c.QUOTA_RESERVED, "False", "Pending", message)
        self._set(rec, c.ADMITTED, "False", "NoReservation", "The workload has no reservation")
        if reason.startswith(c.EVICTED_BY_DEACTIVATION):
            # Deactivated by its owner, or by kqueue (DeactivatedDueTo...): not requeued.
            self._set(rec, c.REQUEUED, "False", reason, message)
        else:
            self._set(rec, c.REQUEUED, "True", reason, message)
            self._event(REQUEUED, rec, reason, message, cq=held.cluster_queue)
        self._mark(held.cluster_queue)

    # -- bookkeeping -------------------------------------------------------------------------

    def _set(self, rec: WorkloadRecord, kind: str, status: str, reason: str, message: str) -> None:
        old = rec.conditions.get(kind)
        if old is not None and old.status == status:
            old.reason = reason
            old.message = message
        else:
            rec.conditions[kind] = Condition(status, reason, message, self.now)

    def _event(
        self,
        kind: str,
        rec: WorkloadRecord,
        reason: str,
        message: str,
        *,
        cq: str | None = None,
        by: str | None = None,
    ) -> None:
        if cq is None and rec.admission is not None:
            cq = rec.admission.cluster_queue
        self.events.append(
            SimEvent(self.engine.cycles, self.now, kind, rec.key, cq, reason, message, by)
        )

    def _mark(self, cq: str) -> None:
        self._dirty.add(cq)

    def _sample(self) -> None:
        """Record the ClusterQueues that changed since the last sample."""
        for cq in sorted(self._dirty):
            name = ClusterQueueName(cq)
            usage = {(str(f), str(r)): v for (f, r), v in self.engine.usage(name).items()}
            active, parked = self.engine.pending_counts(name)
            reserving = len(self.engine.reserving(name))
            since, before = self._usage_since.get(cq, (self.now, {}))
            if before:
                span = (self.now - since) // timedelta(microseconds=1)
                acc = self.usage_integral.setdefault(cq, {})
                for fr, amount in before.items():
                    acc[fr] = acc.get(fr, 0) + amount * span
            self._usage_since[cq] = (self.now, usage)
            share = self.engine.cluster_queue_share(name)
            weighted = share.rounded() if share is not None else None
            state = (tuple(sorted(usage.items())), (active + parked, reserving, weighted))
            if self._last_sample.get(cq) == state:
                continue
            self._last_sample[cq] = state
            self.samples.append(
                Sample(self.now, cq, usage, active + parked, reserving, weighted)
            )
        self._dirty.clear()

    # -- reading -----------------------------------------------------------------------------

    def cluster_queue_of(self, rec: WorkloadRecord) -> str | None:
        if rec.admission is not None:
            return rec.admission.cluster_queue
        if rec.state == STATE_FINISHED and rec.last_admission is not None:
            return rec.last_admission.cluster_queue
        lq = self.engine.local_queue(
            local_queue_key(rec.sw.api.namespace or "default", rec.sw.api.spec.queue_name or "")
        )
        return lq.cluster_queue if lq is not None else None

    def arrived(self) -> Iterator[WorkloadRecord]:
        for key in sorted(self.records):
            rec = self.records[key]
            if rec.state != NOT_ARRIVED:
                yield rec

    def usage_integral_until(self, until: datetime) -> dict[str, dict[tuple[str, str], int]]:
        """Usage integrated from the start to ``until`` (no earlier than the last sample), in
        unit-microseconds per flavor and resource."""
        out = {cq: dict(v) for cq, v in self.usage_integral.items()}
        for cq, (since, usage) in self._usage_since.items():
            span = max(0, (until - since) // timedelta(microseconds=1))
            acc = out.setdefault(cq, {})
            for fr, amount in usage.items():
                acc[fr] = acc.get(fr, 0) + amount * span
        return out
