"""Two-phase admission: the state of a workload's AdmissionChecks and what it implies.

Kueue's ``pkg/workload/admissionchecks.go``, the check parts of its workload controller
(``syncAdmissionCheckConditions``, ``reconcileCheckBasedEviction``) and ``resetChecksOnEviction``,
as pure functions on ``Workload.status.admissionChecks`` (docs/admission-checks.md):

QuotaReserved -> every check that applies to the workload's flavors is Ready -> Admitted.
A check in Retry evicts the workload (its quota is released) and requeues it no earlier than
the check's ``lastTransitionTime + requeueAfterSeconds``; a check in Rejected deactivates it.
On eviction every check goes back to Pending.

Nothing here reads a clock or does I/O: ``now`` is passed in, and the results are new lists.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from kqueue.api.v1alpha1 import AdmissionCheckState

PENDING: Final = "Pending"
READY: Final = "Ready"
RETRY: Final = "Retry"
REJECTED: Final = "Rejected"

# Kueue's reasons and messages of the Admitted condition.
ADMITTED_REASON: Final = "Admitted"
ADMITTED_MESSAGE: Final = "The workload is admitted"
NO_RESERVATION: Final = "NoReservation"
NO_RESERVATION_MESSAGE: Final = "The workload has no reservation"
UNSATISFIED_CHECKS: Final = "UnsatisfiedAdmissionChecks"
UNSATISFIED_CHECKS_MESSAGE: Final = "The workload has not all checks ready"
# Kueue's WorkloadEvictedByAdmissionCheck: the Evicted reason of a Retry, the DeactivationTarget
# reason of a Rejected.
EVICTED_BY_ADMISSION_CHECK: Final = "AdmissionCheck"
DEACTIVATED_BY_ADMISSION_CHECK: Final = "DeactivatedDueToAdmissionCheck"


@dataclass(frozen=True, slots=True)
class CheckRule:
    """One entry of a ClusterQueue's admissionChecksStrategy: the check runs for workloads
    assigned any of ``on_flavors`` (empty: for every workload)."""

    name: str
    on_flavors: frozenset[str] = frozenset()


def checks_for(rules: Iterable[CheckRule], flavors: Iterable[str]) -> list[str]:
    """The checks a workload assigned ``flavors`` must pass, sorted (Kueue's
    ``admissionChecksForAdmission``)."""
    assigned = set(flavors)
    return sorted({r.name for r in rules if not r.on_flavors or r.on_flavors & assigned})


def set_state(
    states: Sequence[AdmissionCheckState], new: AdmissionCheckState, now: datetime
) -> list[AdmissionCheckState]:
    """``states`` with ``new`` set (Kueue's ``SetAdmissionCheckState``): the transition time
    changes only with the state; message, podSetUpdates and requeueAfterSeconds are replaced."""
    out = [s.model_copy() for s in states]
    for i, old in enumerate(out):
        if old.name != new.name:
            continue
        changed = old.state != new.state
        out[i] = old.model_copy(
            update={
                "state": new.state,
                "last_transition_time": (
                    (new.last_transition_time or now) if changed else old.last_transition_time
                ),
                "message": new.message,
                "pod_set_updates": list(new.pod_set_updates),
                "requeue_after_seconds": new.requeue_after_seconds,
            }
        )
        return out
    out.append(new.model_copy(update={"last_transition_time": new.last_transition_time or now}))
    return out


def sync(
    states: Sequence[AdmissionCheckState], required: Iterable[str], now: datetime
) -> tuple[list[AdmissionCheckState], bool]:
    """The check states a workload should have for ``required`` checks: missing ones added as
    Pending, others dropped, sorted by name; and whether that changed anything (Kueue's
    ``syncAdmissionCheckConditions``)."""
    want = set(required)
    if not want:
        return [], bool(states)
    out = list(states)
    changed = False
    have = {s.name for s in states}
    for name in sorted(want - have):
        out = set_state(out, AdmissionCheckState(name=name, state=PENDING), now)
        changed = True
    if len(out) > len(want):
        out = [s for s in out if s.name in want]
        changed = True
    out.sort(key=lambda s: s.name)
    return out, changed


def all_ready(states: Iterable[AdmissionCheckState]) -> bool:
    return all(s.state == READY for s in states)


def in_state(states: Iterable[AdmissionCheckState], state: str) -> list[AdmissionCheckState]:
    return [s for s in states if s.state == state]


def admitted_condition(
    has_reservation: bool, states: Sequence[AdmissionCheckState]
) -> tuple[bool, str, str]:
    """The Admitted condition a workload should carry: (status, reason, message) (Kueue's
    ``SyncAdmittedCondition``)."""
    if not has_reservation:
        return False, NO_RESERVATION, NO_RESERVATION_MESSAGE
    if not all_ready(states):
        return False, UNSATISFIED_CHECKS, UNSATISFIED_CHECKS_MESSAGE
    return True, ADMITTED_REASON, ADMITTED_MESSAGE


def max_retry_time(states: Iterable[AdmissionCheckState]) -> datetime | None:
    """The latest ``lastTransitionTime + requeueAfterSeconds`` of the checks in Retry; None
    when no such check says when (Kueue's ``GetMaxRetryTime``: retry at once)."""
    best: datetime | None = None
    for s in states:
        if s.state != RETRY or s.requeue_after_seconds is None or s.last_transition_time is None:
            continue
        at = s.last_transition_time + timedelta(seconds=s.requeue_after_seconds)
        if best is None or at > best:
            best = at
    return best


def reset_on_eviction(
    states: Sequence[AdmissionCheckState], now: datetime
) -> list[AdmissionCheckState]:
    """Every check back to Pending after an eviction; a Retry counts one more retry (Kueue's
    ``resetChecksOnEviction``)."""
    out: list[AdmissionCheckState] = []
    for s in states:
        if s.state == PENDING:
            out.append(s.model_copy())
            continue
        retries = s.retry_count
        if s.state == RETRY:
            retries = (retries or 0) + 1
        out.append(
            AdmissionCheckState(
                name=s.name,
                state=PENDING,
                message=f"Reset to Pending after eviction. Previously: {s.state}",
                last_transition_time=now,
                requeue_after_seconds=s.requeue_after_seconds,
                retry_count=retries,
            )
        )
    return out


def checks_message(states: Iterable[AdmissionCheckState], state: str) -> str:
    """``AdmissionCheck(s) in <state> state: "a" (message); "b"`` (Kueue's
    ``buildAdmissionChecksMessage``)."""
    chosen = sorted((s for s in states if s.state == state), key=lambda s: s.name)
    parts = [f'"{s.name}" ({s.message})' if s.message else f'"{s.name}"' for s in chosen]
    noun = "AdmissionChecks" if len(chosen) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


class Verdict(StrEnum):
    """What the checks of a workload that holds quota call for."""

    WAIT = "Wait"  # some check is Pending: keep the quota, keep the pods held
    ADMIT = "Admit"  # all Ready: Admitted, pods released
    RETRY = "Retry"  # evict, release the quota, requeue after the backoff
    REJECT = "Reject"  # deactivate


def verdict(states: Sequence[AdmissionCheckState]) -> Verdict:
    """Rejected wins over Retry, Retry over Pending (Kueue's ``reconcileCheckBasedEviction``)."""
    if in_state(states, REJECTED):
        return Verdict.REJECT
    if in_state(states, RETRY):
        return Verdict.RETRY
    return Verdict.ADMIT if all_ready(states) else Verdict.WAIT


def inactive_message(
    cluster_queue: str,
    rules: Iterable[CheckRule],
    checks: Mapping[str, str | None],
    *,
    multikueue: Collection[str] = (),
    provisioning: Collection[str] = (),
) -> tuple[str, str] | None:
    """Why a ClusterQueue cannot admit because of its checks: Kueue's reason and message, or
    None. ``checks``: every AdmissionCheck by name, with why it is inactive (None: active);
    ``multikueue`` and ``provisioning``: the names of the MultiKueue and ProvisioningRequest
    ones, whose combinations Kueue refuses (``updateQueueStatus``): a manager has one MultiKueue
    check for every flavor, and provisions nothing itself."""
    rules = list(rules)
    names = sorted({r.name for r in rules})
    missing = [n for n in names if n not in checks]
    if missing:
        return (
            "AdmissionCheckNotFound",
            f"ClusterQueue {cluster_queue} is inactive: references missing AdmissionCheck(s): "
            + ", ".join(missing),
        )
    inactive = [(n, checks[n]) for n in names if checks[n] is not None]
    if inactive:
        return (
            "AdmissionCheckInactive",
            f"ClusterQueue {cluster_queue} is inactive: references inactive AdmissionCheck(s): "
            + "; ".join(f"{n} ({why})" for n, why in inactive),
        )
    mk = [n for n in names if n in multikueue]
    if len(mk) > 1:
        return (
            "MultipleMultiKueueAdmissionChecks",
            f"ClusterQueue {cluster_queue} is inactive: Cannot use multiple MultiKueue "
            f"AdmissionChecks on the same ClusterQueue, found: {','.join(mk)}",
        )
    per_flavor = sorted({r.name for r in rules if r.name in multikueue and r.on_flavors})
    if per_flavor:
        return (
            "MultiKueueAdmissionCheckAppliedPerFlavor",
            f"ClusterQueue {cluster_queue} is inactive: Cannot specify MultiKueue AdmissionCheck "
            f"per flavor, found: {','.join(per_flavor)}",
        )
    prov = [n for n in names if n in provisioning]
    if mk and prov:
        return (
            "MultiKueueWithProvisioningRequest",
            f"ClusterQueue {cluster_queue} is inactive: Cannot use both MultiKueue and "
            f"ProvisioningRequest AdmissionChecks together, found: {','.join(mk)}, "
            f"{','.join(prov)}",
        )
    return None
