"""kqueue's part of every admission check, whoever owns it (Kueue's workload controller:
``reconcileSyncAdmissionChecks``, ``reconcileCheckBasedEviction``, ``SyncAdmittedCondition``).

For each Workload that holds quota, one status write (get-modify-write, so an external
controller's concurrent writes are kept) that:

* lists the checks its ClusterQueue requires for its flavors (new ones Pending);
* lets each built-in controller drive its checks (:class:`~.framework.CheckController`);
* then, from the states (kqueue/engine/checks.py): all Ready -> ``Admitted=True`` (the pods are
  released); a Retry -> ``Evicted`` (reason ``AdmissionCheck``) and requeued no earlier than the
  checks' ``requeueAfterSeconds``; a Rejected -> deactivated (``DeactivationTarget``, ``Evicted``
  reason ``DeactivatedDueToAdmissionCheck``, ``spec.active: false``), with the checks' messages.

A finished or evicted workload's built-in checks are cleaned up (their ProvisioningRequests).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from kqueue.api.v1alpha1 import (
    Admission,
    AdmissionCheck,
    AdmissionCheckState,
    ClusterQueue,
    ConditionStatus,
    RequeueState,
    Workload,
    set_condition,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.admission_checks.framework import CheckController
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Kube, KubeError
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import WORKLOADS
from kqueue.controller.workqueue import Requeue
from kqueue.engine import checks as ck
from kqueue.engine import from_api
from kqueue.engine.checks import CheckRule, Verdict
from kqueue.engine.tas import delayed
from kqueue.engine.types import Admission as EngineAdmission

logger = logging.getLogger(__name__)

Obj = dict[str, Any]


def required_checks(wl: Workload, cq: ClusterQueue | None) -> list[str]:
    """The checks ``wl``'s admission needs in ``cq`` (by its assigned flavors)."""
    adm = wl.status.admission
    if adm is None or cq is None or cq.spec.admission_checks_strategy is None:
        return []
    rules = [
        CheckRule(r.name, frozenset(r.on_flavors))
        for r in cq.spec.admission_checks_strategy.admission_checks
    ]
    required = ck.checks_for(
        rules, (f for psa in adm.pod_set_assignments for f in psa.flavors.values())
    )
    if wl.is_admitted:
        # Checks added to the ClusterQueue after this workload was admitted apply to later
        # admissions only: an edit of the ClusterQueue (or a check that turns out missing)
        # never stops what already runs. Kueue would list them Pending and set Admitted=False,
        # which stops the job (docs/admission-checks.md).
        had = {s.name for s in wl.status.admission_checks}
        required = [name for name in required if name in had]
    return required


def waits_for_placement(adm: Admission | None) -> bool:
    """A pod set waits with ``delayedTopologyRequest: Pending`` (Kueue's
    HasTopologyAssignmentsPending)."""
    return adm is not None and any(
        psa.delayed_topology_request == delayed.DELAYED_PENDING
        and psa.topology_assignment is None
        for psa in adm.pod_set_assignments
    )


def apply_checks(
    wl: Workload,
    required: list[str],
    driven: Mapping[str, AdmissionCheckState],
    now: datetime,
    *,
    releases_itself: bool = False,
    second_pass: Admission | str | None = None,
) -> tuple[Workload | None, Verdict]:
    """``wl`` with its check states synced, ``driven`` (the built-in controllers' states) set,
    and what the states call for applied; None when nothing changes. Pure.

    ``second_pass``: with every check Ready, the placement of its delayed topology requests
    (kqueue/engine/tas/delayed.py): the new admission, written with the Admitted condition; or
    why it does not fit, and then the workload stays unadmitted with reason
    ``PendingDelayedTopologyRequests`` (verdict Wait)."""
    out = wl.model_copy(update={"status": wl.status.model_copy(deep=True)})
    states, changed = ck.sync(out.status.admission_checks, required, now)
    for name, state in driven.items():
        if name not in required:
            continue
        old = next((s for s in states if s.name == name), None)
        if old is not None and old == state:
            continue
        states = ck.set_state(states, state, now)
        if state.retry_count != (old.retry_count if old else None):
            states = [s.model_copy(update={"retry_count": state.retry_count}) if s.name == name
                      else s for s in states]
        changed = True
    out.status.admission_checks = states
    verdict = ck.verdict(states)
    gen = wl.metadata.generation
    conds = out.status.conditions
    if verdict == Verdict.REJECT:
        # Kueue's SetDeactivationTarget: then spec.active false, and the eviction that follows
        # is the engine's, reason DeactivatedDueToAdmissionCheck with this message. The quota
        # is held until then, so the workload is never admitted again in between.
        message = ck.checks_message(states, ck.REJECTED)
        target = out.condition(c.DEACTIVATION_TARGET)
        if target is None or not target.is_true or target.message != message:
            set_condition(
                conds, c.DEACTIVATION_TARGET, "True", ck.EVICTED_BY_ADMISSION_CHECK, message,
                now, gen,
            )
            changed = True
    elif verdict == Verdict.RETRY:
        message = f"Evicted due to {ck.checks_message(states, ck.RETRY)}"
        set_condition(conds, c.EVICTED, "True", ck.EVICTED_BY_ADMISSION_CHECK, message, now, gen)
        at = ck.max_retry_time(states)
        if at is not None and at > now:
            count = out.status.requeue_state.count if out.status.requeue_state else None
            out.status.requeue_state = RequeueState(count=count, requeue_at=at)
        changed = True
    else:
        admitted, reason, message = ck.admitted_condition(True, states)
        if admitted and waits_for_placement(out.status.admission):
            if isinstance(second_pass, Admission):
                out.status.admission = second_pass
                changed = True
            else:
                # Never admitted without the placement (the pods would go anywhere).
                admitted, reason = False, delayed.PENDING_DELAYED_REASON
                message = delayed.PENDING_DELAYED_MESSAGE
                if isinstance(second_pass, str):
                    message += f": {second_pass}"
                verdict = Verdict.WAIT
        cond = out.condition(c.ADMITTED)
        status: ConditionStatus = "True" if admitted else "False"
        if (
            cond is None or cond.status != status or cond.reason != reason
            or (reason == delayed.PENDING_DELAYED_REASON and cond.message != message)
        ):
            set_condition(conds, c.ADMITTED, status, reason, message, now, gen)
            changed = True
    if verdict == Verdict.RETRY and releases_itself:
        out = workload_status.release(out, now) or out
    return (out if changed else None), verdict


def admitted_message(wl: Workload, now: datetime) -> str:
    """The Admitted event once the checks pass (Kueue's workload controller's)."""
    cq = wl.status.admission.cluster_queue if wl.status.admission else ""
    reserved = wl.quota_reserved_at or now
    waited = max((now - reserved).total_seconds(), 0.0)
    return f"Admitted by ClusterQueue {cq}, wait time since reservation was {waited:.0f}s"


class WorkloadChecks:
    """Reconciles the admission checks of one Workload key (see the module docstring)."""

    def __init__(
        self,
        *,
        workloads: Store[Workload],
        cluster_queues: Store[ClusterQueue],
        checks: Store[AdmissionCheck],
        controllers: Mapping[str, CheckController],
        kube: Kube,
        events: EventRecorder,
        releases_itself: Callable[[Workload], bool],
        now: Now,
        metrics: Metrics | None = None,
        second_pass: Callable[
            [Workload, Sequence[delayed.PodSetUpdate]], EngineAdmission | str | None
        ] | None = None,
    ) -> None:
        self._metrics = metrics
        # The engine's second pass for delayed topology requests (Engine.place_delayed), and
        # how many times it failed per workload (its retry backoff).
        self._second_pass = second_pass
        self._second_pass_failures: dict[str, int] = {}
        self._workloads = workloads
        self._cluster_queues = cluster_queues
        self._checks = checks
        self._controllers = controllers
        self._kube = kube
        self._events = events
        self._releases_itself = releases_itself
        self._now = now

    def _owned(self, wl: Workload) -> list[CheckController]:
        out = []
        for state in wl.status.admission_checks:
            ac = self._checks.get(state.name)
            ctrl = self._controllers.get(ac.spec.controller_name) if ac is not None else None
            if ctrl is not None and ctrl not in out:
                out.append(ctrl)
        return out

    async def __call__(self, key: str) -> Requeue | None:
        wl = self._workloads.get(key)
        if wl is None:
            return None
        if wl.is_finished or workload_status.is_evicting(wl):
            for ctrl in self._owned(wl):
                await ctrl.cleanup(wl)
            return None
        target = wl.condition(c.DEACTIVATION_TARGET)
        if (
            wl.spec.active and wl.status.admission is not None and target is not None
            and target.is_true and target.reason == ck.EVICTED_BY_ADMISSION_CHECK
        ):
            await self._deactivate(wl)  # the patch after the DeactivationTarget write was lost
            return None
        if wl.status.admission is None:
            return None
        now = self._now()
        required = required_checks(wl, self._cluster_queues.get(wl.status.admission.cluster_queue))
        states, _ = ck.sync(wl.status.admission_checks, required, now)
        driven: dict[str, AdmissionCheckState] = {}
        again: float | None = None
        for state in states:
            ac = self._checks.get(state.name)
            owner = self._controllers.get(ac.spec.controller_name) if ac is not None else None
            if ac is None or owner is None:
                continue  # an external controller's check: it writes the state itself
            synced = await owner.sync(wl, ac, state, now)
            driven[state.name] = synced.state
            if synced.again_after is not None:
                again = synced.again_after if again is None else min(again, synced.again_after)
        placed = self._place_delayed(wl, required, driven, now)
        verdict = await self._write(wl, required, driven, now, placed)
        if verdict == Verdict.REJECT:
            await self._deactivate(wl)
        if isinstance(placed, str):
            # Kueue's secondPassQueue: retried after a backoff while the quota is held.
            tries = self._second_pass_failures.get(wl.key, 0) + 1
            self._second_pass_failures[wl.key] = tries
            self._events.record(wl.to_dict(), "Warning", delayed.SECOND_PASS_FAILED, placed)
            retry = delayed.retry_delay(tries).total_seconds()
            again = retry if again is None else min(again, retry)
        else:
            self._second_pass_failures.pop(wl.key, None)
        return Requeue(after=again) if again is not None else None

    def _place_delayed(
        self, wl: Workload, required: list[str], driven: Mapping[str, AdmissionCheckState],
        now: datetime,
    ) -> Admission | str | None:
        """With every check Ready and a pod set waiting with ``delayedTopologyRequest:
        Pending``: the engine's second pass, as the admission to write or why it does not fit."""
        if self._second_pass is None or not waits_for_placement(wl.status.admission):
            return None
        states, _ = ck.sync(wl.status.admission_checks, required, now)
        current = [driven.get(s.name, s) for s in states]
        if ck.verdict(current) != Verdict.ADMIT:
            return None
        # The checks' podSetUpdates (a ProvisioningRequest's node selector) narrow the nodes.
        got = self._second_pass(wl, from_api.pod_set_updates(current))
        if got is None:
            # The engine does not hold it (yet): tried again after the backoff.
            return "the scheduler does not hold the workload's quota reservation yet"
        if isinstance(got, str):
            return got
        return workload_status.api_admission(got)

    async def _write(
        self, wl: Workload, required: list[str], driven: Mapping[str, AdmissionCheckState],
        now: datetime, second_pass: Admission | str | None = None,
    ) -> Verdict | None:
        decided: list[Verdict] = []

        def change(obj: Obj) -> Obj | None:
            fresh = Workload.model_validate(obj)
            if fresh.status.admission is None or fresh.is_finished or fresh.is_true(c.EVICTED):
                return None
            out, verdict = apply_checks(
                fresh, required, driven, now, releases_itself=self._releases_itself(fresh),
                second_pass=second_pass,
            )
            decided.append(verdict)
            return out.to_dict() if out is not None else None

        try:
            written = await self._kube.modify_status(
                WORKLOADS, wl.name, change, namespace=wl.namespace or "default"
            )
        except KubeError as exc:
            logger.warning("admission checks of Workload %s not written: %s", wl.key, exc)
            raise
        if written is None or not decided:
            return None
        verdict = decided[-1]
        out = Workload.model_validate(written)
        if verdict == Verdict.ADMIT and out.is_admitted and not wl.is_admitted:
            self._events.record(written, "Normal", c.ADMITTED, admitted_message(out, now))
        if verdict == Verdict.RETRY and self._metrics is not None:
            # A Rejected check's eviction is the engine's, counted where it is written.
            cq = wl.status.admission.cluster_queue if wl.status.admission else ""
            self._metrics.workload_evicted(out, cq, ck.EVICTED_BY_ADMISSION_CHECK)
        if verdict == Verdict.RETRY:
            evicted = out.condition(c.EVICTED)
            self._events.record(
                written, "Normal", c.EVICTED, evicted.message if evicted else "AdmissionCheck"
            )
        elif verdict == Verdict.REJECT:
            self._events.record(
                written, "Warning", "AdmissionCheckRejected",
                f"Deactivated due to {ck.checks_message(out.status.admission_checks, ck.REJECTED)}",
            )
        return verdict

    async def _deactivate(self, wl: Workload) -> None:
        await self._kube.patch(
            WORKLOADS, wl.name, {"spec": {"active": False}}, namespace=wl.namespace or "default"
        )
