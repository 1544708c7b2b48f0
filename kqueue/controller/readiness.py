"""waitForPodsReady: whether the pods of admitted workloads are ready, and what a timeout writes.

Kueue's ``PodsReady`` definition: a workload is ready once as many of its pods as were admitted
are Ready (condition ``Ready=True``) or have Succeeded. The leader:

1. Watches the managed pods and the Workloads; per admitted workload key, counts its ready pods
   (pods owned by its Job, or the pods it is owned by, for plain pods and pod groups).
2. Feeds the result to the engine (``Engine.pods_ready``), which owns the timers, and writes the
   Workload's ``PodsReady`` condition when it changes (reasons ``PodsReady``, ``WaitForStart``,
   ``WaitForRecovery``, as Kueue's).
3. After each scheduling cycle, for an eviction the engine decided for a PodsReady timeout
   and the scheduler wrote (an eviction given up is not one: the scheduler leaves it out of
   the hooks' result and the engine takes its count back), writes ``status.requeueState``
   (count and requeueAt: the backoff the engine applies); when the requeue limit is exceeded,
   sets ``spec.active: false`` and ``DeactivationTarget=True``. The eviction itself
   (``Evicted``) is written by the scheduler; the integration stops the pods.
4. Once released, such a workload carries ``Requeued=False`` (reason ``PodsReadyTimeout``) for
   as long as its backoff runs; when ``requeueAt`` has passed, writes ``Requeued=True`` with
   reason ``BackoffFinished`` and clears ``requeueAt`` (Kueue's workload controller), with an
   event. The key is processed again when the backoff ends, and at the start of every term, so
   a backoff that ended while no replica led is declared over too.

5. The same hook carries out the engine's other deactivation, for a workload admitted longer
   than ``spec.maximumExecutionTimeSeconds``: once its eviction
   (``DeactivatedDueToMaximumExecutionTimeExceeded``) is written, sets ``DeactivationTarget=True``
   (reason ``MaximumExecutionTimeExceeded``, Kueue's), clears
   ``status.accumulatedPastExecutionTimeSeconds`` (a reactivated workload has its whole budget
   again) and ``spec.active: false``, with a warning event.

The engine wakes the scheduler at its next deadline (``Engine.next_deadline``), so a timeout is
acted on when it is due, not at the next event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final

from kqueue.api.v1alpha1 import RequeueState, Workload, set_condition
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.gate import is_terminal
from kqueue.controller.informer import Store
from kqueue.controller.integrations.owners import object_index_key, pods_of_workload
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound, idempotent
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import WORKLOADS
from kqueue.controller.workqueue import Requeue, WorkQueue, run_workers
from kqueue.engine.cycle import CycleResult, Evict
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

# Kueue's reasons on the PodsReady condition and DeactivationTarget.
PODS_READY_REASON: Final = "PodsReady"
WAIT_FOR_START: Final = "WaitForStart"
WAIT_FOR_RECOVERY: Final = "WaitForRecovery"
REQUEUING_LIMIT_EXCEEDED: Final = "RequeuingLimitExceeded"


# Index on the Workload store: every owner's UID (a pod group's Workload is owned by each of its
# pods, none of them its controller).
BY_ANY_OWNER: Final = "any-owner-uid"


def any_owner_uids(wl: Workload) -> list[str]:
    """Every owner's UID, and its object key (how an integration's pods name their object)."""
    namespace = wl.namespace or "default"
    return [r.uid for r in wl.metadata.owner_references if r.uid] + [
        object_index_key(r.kind, f"{namespace}/{r.name}") for r in wl.metadata.owner_references
    ]


def pod_ready(pod: Obj) -> bool:
    """Ready (condition Ready=True) or Succeeded, and not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return True
    return any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in status.get("conditions") or []
    )


def admitted_pods(wl: Workload) -> int:
    adm = wl.status.admission
    if adm is None:
        return 0
    total = 0
    for psa in adm.pod_set_assignments:
        ps = wl.pod_set(psa.name)
        total += psa.count if psa.count is not None else (ps.count if ps is not None else 0)
    return total


class ReadinessWatcher:
    def __init__(
        self,
        *,
        engine: Callable[[], Engine],
        workloads: Store[Workload],
        pods: Store[Obj],
        kube: Kube,
        events: EventRecorder,
        trigger: Callable[[], None],
        now: Now,
        pod_owner_keys: Callable[[Obj], list[str]] = lambda _pod: [],
        metrics: Metrics | None = None,
    ) -> None:
        self._pod_owner_keys = pod_owner_keys
        self._metrics = metrics if metrics is not None else Metrics()
        self._engine = engine
        self._workloads = workloads
        self._pods = pods
        self._kube = kube
        self._events = events
        self._trigger = trigger
        self._now = now
        self.queue: WorkQueue[str] = WorkQueue("pods-ready")

    # -- events ------------------------------------------------------------------------------

    def on_workload(self, key: str, *_: Any) -> None:
        self.queue.add(key)

    def on_pod(self, _key: str, pod: Obj, *rest: Obj) -> None:
        for wl in self.workloads_of(rest[-1] if rest else pod):
            self.queue.add(wl.key)

    def workloads_of(self, pod: Obj) -> list[Workload]:
        """The Workloads ``pod`` counts for (in its namespace)."""
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        # The pod's Job owns the Workload; a plain pod (or each pod of a group) owns it itself.
        uids = {str(r.get("uid")) for r in meta.get("ownerReferences") or [] if r.get("uid")}
        uids.add(str(meta.get("uid") or ""))
        uids.update(self._pod_owner_keys(pod))
        found: dict[str, Workload] = {}
        for uid in sorted(uids):
            for wl in self._workloads.by_index(BY_ANY_OWNER, uid):
                if (wl.namespace or "default") == namespace:
                    found[wl.key] = wl
        return list(found.values())

    # -- the leader's task -------------------------------------------------------------------

    async def run(self) -> None:
        # The engine was rebuilt for this term: its readiness signals start empty. Runs even
        # with waitForPodsReady off, so a backoff left from when it was on still ends.
        for key in self._workloads:
            self.queue.add(key)
        await run_workers(self.queue, self, workers=2)

    def pods_of(self, wl: Workload) -> list[Obj]:
        return pods_of_workload(self._pods, wl)

    async def __call__(self, key: str, /) -> Requeue | None:
        wl = self._workloads.get(key)
        if wl is not None and workload_status.in_backoff(wl):
            return await self._end_backoff(wl)
        if wl is None or not workload_status.holds_quota(wl) or workload_status.is_evicting(wl):
            return None
        engine = self._engine()
        if engine.pods_ready_config is None:
            return None
        pods = [p for p in self.pods_of(wl) if not (is_terminal(p) and not pod_ready(p))]
        ready_count = sum(1 for p in pods if pod_ready(p))
        want = admitted_pods(wl)
        ready = want > 0 and ready_count >= want
        now = self._now()
        was_ready = engine.is_pods_ready(WorkloadKey(key))
        engine.pods_ready(WorkloadKey(key), ready, now)
        if ready != was_ready:
            self._trigger()
        return await self._write_condition(wl, ready, ready_count, want)

    async def _write_condition(
        self, wl: Workload, ready: bool, ready_count: int, want: int
    ) -> Requeue | None:
        cond = wl.condition(c.PODS_READY)
        if ready:
            status, reason, message = "True", PODS_READY_REASON, "All pods reached readiness"
        else:
            status = "False"
            # A condition from before this admission (the workload was evicted and admitted
            # again) says nothing about these pods: they are starting, not recovering.
            admitted_at = wl.quota_reserved_at
            current = (
                cond is not None
                and cond.last_transition_time is not None
                and (admitted_at is None or cond.last_transition_time >= admitted_at)
            )
            recovering = current and cond is not None and (
                cond.is_true or cond.reason == WAIT_FOR_RECOVERY
            )
            reason = WAIT_FOR_RECOVERY if recovering else WAIT_FOR_START
            message = (
                f"Not all pods are ready or succeeded: {ready_count} of {want} admitted pods"
            )
        if cond is not None and (cond.status, cond.reason, cond.message) == (status, reason, message):
            return None
        out = wl.model_copy(deep=True)
        set_condition(
            out.status.conditions, c.PODS_READY, status, reason, message,  # type: ignore[arg-type]
            self._now(), wl.metadata.generation,
        )
        written = await self._put_status(out)
        if ready and written is True:
            self._metrics.pods_ready(wl, self._now())
        return written if isinstance(written, Requeue) else None

    async def _put_status(self, out: Workload) -> Requeue | bool:
        """Write ``out``'s status: True when written, False when the Workload is gone, and a
        Requeue on a conflict (the informer brings the newer version)."""
        try:
            await self._kube.replace_status(WORKLOADS, out.to_dict(), namespace=out.namespace)
        except NotFound:
            return False
        except Conflict:
            return Requeue(after=0.2)
        return True

    async def _end_backoff(self, wl: Workload) -> Requeue | None:
        """``Requeued=True`` once the PodsReady backoff is over; until then, come back then."""
        cfg = self._engine().pods_ready_config
        unwritten = timedelta(seconds=cfg.backoff_base_seconds if cfg is not None else 0)
        now = self._now()
        end = workload_status.backoff_end(wl, now, unwritten=unwritten)
        if end is not None and end > now:
            return Requeue(after=max((end - now).total_seconds(), 0.05))
        updated = workload_status.backoff_finished(wl, now, unwritten=unwritten)
        if updated is None:
            return None
        written = await self._put_status(updated)
        if written is not True:
            return written or None
        self._events.record(
            wl.to_dict(), "Normal", c.REQUEUED,
            f"{workload_status.BACKOFF_FINISHED_MESSAGE}: queued again after its PodsReady timeout",
        )
        self._trigger()
        return None

    # -- the scheduler's hook ----------------------------------------------------------------

    async def after_cycle(self, engine: Engine, result: CycleResult) -> None:
        # ``result.evicted`` holds the evictions that are in the API, no others: the requeue
        # state counts requeues that happened.
        for evict in result.evicted:
            if evict.requeue_count is not None:
                await self._write_timeout(evict)
            elif evict.deactivate and evict.reason == c.EVICTED_BY_MAXIMUM_EXECUTION_TIME:
                await self._write_max_exec_deactivation(evict)

    async def _write_max_exec_deactivation(self, evict: Evict) -> None:
        def change(obj: Obj) -> Obj:
            out = Workload.model_validate(obj)
            out.status.accumulated_past_execution_time_seconds = None
            set_condition(
                out.status.conditions,
                c.DEACTIVATION_TARGET,
                "True",
                c.MAXIMUM_EXECUTION_TIME_EXCEEDED,
                c.MAXIMUM_EXECUTION_TIME_EXCEEDED_MESSAGE,
                self._now(),
                out.metadata.generation,
            )
            return out.to_dict()

        wl = await self._modify(evict, change, "deactivation")
        if wl is None or not await self._deactivate(evict):
            return
        self._events.record(
            wl.to_dict(), "Warning", c.MAXIMUM_EXECUTION_TIME_EXCEEDED, evict.message
        )

    async def _modify(
        self, evict: Evict, change: Callable[[Obj], Obj], what: str
    ) -> Workload | None:
        """Get-modify-write the evicted Workload's status; None when gone or given up (logged:
        an after-cycle hook must not take the scheduler down with it)."""
        namespace, name = evict.workload.split("/", 1)
        try:
            written = await self._kube.modify_status(
                WORKLOADS, name, change, namespace=namespace
            )
        except KubeError as exc:
            logger.warning("%s of Workload %s not written: %s", what, evict.workload, exc)
            return None
        return Workload.model_validate(written) if written is not None else None

    async def _deactivate(self, evict: Evict) -> bool:
        namespace, name = evict.workload.split("/", 1)
        try:
            await idempotent(
                lambda: self._kube.patch(
                    WORKLOADS, name, {"spec": {"active": False}}, namespace=namespace
                )
            )
        except KubeError as exc:
            logger.warning("deactivating Workload %s: %s", evict.workload, exc)
            return False
        return True

    async def _write_timeout(self, evict: Evict) -> None:
        def change(obj: Obj) -> Obj:
            out = Workload.model_validate(obj)
            out.status.requeue_state = RequeueState(
                count=evict.requeue_count, requeue_at=evict.requeue_at
            )
            if out.status.admission is None and not evict.deactivate:
                # Released before this write (a workload no integration runs): the backoff
                # this write starts keeps Requeued False, whatever was seen in between.
                set_condition(
                    out.status.conditions, c.REQUEUED, "False", c.EVICTED_BY_PODS_READY_TIMEOUT,
                    evict.message, self._now(), out.metadata.generation,
                )
            if evict.deactivate:
                set_condition(
                    out.status.conditions,
                    c.DEACTIVATION_TARGET,
                    "True",
                    REQUEUING_LIMIT_EXCEEDED,
                    "exceeding the maximum number of re-queuing retries",
                    self._now(),
                    out.metadata.generation,
                )
            return out.to_dict()

        wl = await self._modify(evict, change, "requeue state")
        if wl is None:
            return
        if evict.deactivate:
            if not await self._deactivate(evict):
                return
            self._events.record(
                wl.to_dict(),
                "Warning",
                c.EVICTED_BY_DEACTIVATION,
                "Deactivated: its pods did not become ready in time too many times "
                "(waitForPodsReady.requeuingStrategy.backoffLimitCount); set spec.active to true "
                "to queue it again",
            )
        else:
            at = evict.requeue_at.isoformat() if evict.requeue_at is not None else "now"
            self._events.record(
                wl.to_dict(),
                "Normal",
                c.EVICTED_BY_PODS_READY_TIMEOUT,
                f"Pods not ready within the timeout: requeued (attempt {evict.requeue_count}) "
                f"after the backoff, at {at}",
            )
