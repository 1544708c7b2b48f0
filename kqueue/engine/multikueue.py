"""MultiKueue's decisions, pure (docs/multikueue.md): which worker clusters a workload is
offered to, which copy wins, and what the manager does about one workload's copies.

Kueue's ``pkg/controller/admissionchecks/multikueue/workload.go`` (``reconcileGroup``,
``nominateAndSynchronizeWorkers``) and ``pkg/controller/workloaddispatcher`` (the Incremental
dispatcher), without the I/O: kqueue/controller/admission_checks/multikueue reads the copies on
the workers, calls :func:`plan`, and carries the plan out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from kqueue.api.config import DISPATCHER_ALL_AT_ONCE, DISPATCHER_INCREMENTAL

ALL_AT_ONCE = DISPATCHER_ALL_AT_ONCE
INCREMENTAL = DISPATCHER_INCREMENTAL

CheckValue = Literal["Pending", "Ready", "Retry", "Rejected"]


@dataclass(frozen=True)
class Remote:
    """What the manager reads of a workload's copy on one reachable worker."""

    quota_reserved: bool = False
    admitted_at: datetime | None = None
    """When its ``Admitted`` condition turned True there; None while not admitted."""
    finished: tuple[str, str] | None = None
    """``(reason, message)`` of its ``Finished`` condition."""
    evicted: str | None = None
    """The message of its ``Evicted=True`` condition."""


@dataclass(frozen=True)
class Group:
    """One manager workload and its copies, as the controller found them."""

    check: CheckValue
    cluster_name: str | None
    nominated: tuple[str, ...]
    clusters: tuple[str, ...]
    """The MultiKueueConfig's clusters, in its order."""
    active: frozenset[str]
    """Clusters whose MultiKueueCluster is Active (the manager is connected)."""
    remotes: Mapping[str, Remote | None]
    """Per reachable cluster: its copy, or None when it has none."""
    others_ready: bool = True
    """Every other admission check of the workload is Ready (dispatch waits for them)."""
    lost_for: timedelta | None = None
    """How long the worker of ``cluster_name`` has been unreachable (None: it is not)."""


@dataclass
class Plan:
    """What to do: deletes and creates on workers first, then the manager's writes."""

    delete: list[str] = field(default_factory=list)
    create: list[str] = field(default_factory=list)
    nominate: list[str] | None = None
    """New ``status.nominatedClusterNames``; None: unchanged."""
    winner: str | None = None
    """The worker that admitted the workload: the job goes there, ``status.clusterName`` is
    set to it, and the check becomes Ready."""
    sync_from: str | None = None
    """Copy the job's status from this worker."""
    finish: tuple[str, str] | None = None
    check: tuple[CheckValue, str] | None = None
    """The check's new state and message; None: unchanged."""
    again_after: float | None = None


def nominate_all_at_once(clusters: Sequence[str], active: frozenset[str]) -> list[str]:
    """Every active cluster of the config, in its order (Kueue: all connected ones)."""
    return [name for name in clusters if name in active]


def nominate_incremental(
    clusters: Sequence[str],
    active: frozenset[str],
    nominated: Sequence[str],
    step: int,
    round_started: datetime | None,
    now: datetime,
    round_timeout: timedelta,
) -> tuple[list[str] | None, float | None]:
    """Kueue's Incremental dispatcher: the first ``step`` active clusters in config order, and
    ``step`` more each time a round of ``round_timeout`` ends without an admission.

    Returns the new nomination (None: keep the current one) and the seconds until the round
    ends (None: no more clusters to add). A round that started before this manager did
    (``round_started`` None with clusters already nominated) starts now, so a restart never
    widens the nomination at once."""
    if round_started is not None and nominated:
        left = (round_timeout - (now - round_started)).total_seconds()
        if left > 0:
            return None, left
    elif nominated:
        return None, round_timeout.total_seconds()
    rest = [name for name in clusters if name in active and name not in nominated]
    if not rest:
        return None, None
    return [*nominated, *rest[:step]], round_timeout.total_seconds()


def admitting(group: Group) -> str | None:
    """The copy that won: the one on ``cluster_name`` if it is admitted there, else the first to
    be admitted (ties in config order)."""
    admitted = {
        name: r.admitted_at
        for name, r in group.remotes.items()
        if r is not None and r.admitted_at is not None
    }
    if group.cluster_name in admitted:
        return group.cluster_name
    if not admitted:
        return None
    order = {name: i for i, name in enumerate(group.clusters)}
    return min(admitted, key=lambda n: (admitted[n], order.get(n, len(order)), n))


def plan(
    group: Group,
    *,
    dispatcher: str,
    worker_lost_timeout: timedelta,
    incremental: tuple[list[str] | None, float | None] = (None, None),
) -> Plan:
    """What the manager does for a workload that holds quota and is not finished or being
    evicted (those only get their copies deleted: :func:`cleanup`). ``incremental`` is
    :func:`nominate_incremental`'s answer when the dispatcher is Incremental.

    The steps are Kueue's ``reconcileGroup``: a finished copy finishes the workload; a copy
    evicted on its worker after admission sends the check to Retry; the admitted copy wins and
    the others are deleted; a Ready check whose copy is gone, or whose worker was unreachable
    for ``worker_lost_timeout``, goes to Retry; otherwise the nominated clusters get a copy and
    the others lose theirs."""
    out = Plan()
    copies = [name for name, r in group.remotes.items() if r is not None]
    # 1. A copy finished: the job's status comes back and the workload finishes.
    for name in _ordered(group, copies):
        remote = group.remotes[name]
        if remote is not None and remote.finished is not None:
            out.sync_from = name
            out.finish = remote.finished
            return out
    winner = admitting(group)
    # 2. Evicted on its worker after it was admitted there: dispatched again.
    if group.check == "Ready" and group.cluster_name is not None:
        remote = group.remotes.get(group.cluster_name)
        if remote is not None and remote.evicted is not None and winner != group.cluster_name:
            out.check = (
                "Retry",
                f"Workload evicted on worker cluster {group.cluster_name!r}, resetting for "
                f"re-admission: {remote.evicted}",
            )
            return out
    # 3. No admitted copy while the check is Ready.
    if winner is None and group.check == "Ready":
        lost = group.cluster_name
        if lost is not None and lost not in group.remotes:
            lost_for = group.lost_for or timedelta(0)
            left = (worker_lost_timeout - lost_for).total_seconds()
            if left > 0:
                out.again_after = left
                return out
            out.check = (
                "Retry",
                f"Worker cluster {lost!r} was unreachable for {_seconds(worker_lost_timeout)}; "
                "dispatching again",
            )
            return out
        out.check = (
            "Retry",
            f"The workload's copy on worker cluster {lost!r} no longer exists or is no longer "
            "admitted there",
        )
        return out
    # 4. A copy was admitted: it wins, the others go, the job follows it.
    if winner is not None:
        out.delete = [name for name in copies if name != winner]
        out.winner = winner
        out.sync_from = winner
        if group.check != "Ready":
            out.check = ("Ready", f"The workload was admitted on {winner!r}")
        if group.nominated:
            out.nominate = []
        return out
    # 5. Nominate and keep the copies where the nomination says.
    if group.check != "Pending" or group.cluster_name is not None or not group.others_ready:
        return out
    if dispatcher == ALL_AT_ONCE:
        nominated = nominate_all_at_once(group.clusters, group.active)
        if nominated != list(group.nominated):
            out.nominate = nominated
    elif dispatcher == INCREMENTAL:
        new, out.again_after = incremental
        nominated = new if new is not None else list(group.nominated)
        if new is not None:
            out.nominate = new
    else:
        nominated = list(group.nominated)  # an external dispatcher's
    out.create = [
        n for n in _ordered(group, nominated) if n in group.remotes and group.remotes[n] is None
    ]
    out.delete = [n for n in copies if n not in nominated]
    return out


def pending_message(
    group: Group, out: Plan, *, dispatcher: str, waiting_for: Sequence[str] = ()
) -> str:
    """The check's message while it stays Pending: where the workload was offered, or why it
    was not dispatched yet (``waiting_for``: the other admission checks not Ready yet). Kueue
    leaves the message as it was; kqueue says it, so that ``kqueue explain``, ``kubectl kqueue
    list -o wide`` and the web view, which show the check's message, say it too."""
    if waiting_for:
        return (
            "Not dispatched yet: waiting for admission checks "
            + ", ".join(waiting_for) + " to be Ready"
        )
    nominated = list(group.nominated) if out.nominate is None else out.nominate
    if nominated:
        names = ", ".join(repr(n) for n in nominated)
        return f"Dispatched to worker clusters {names}; the first to admit the workload runs it"
    if dispatcher not in (ALL_AT_ONCE, INCREMENTAL):
        return (
            f"Not dispatched yet: waiting for the dispatcher {dispatcher!r} to nominate worker "
            "clusters (status.nominatedClusterNames)"
        )
    if not any(n in group.active for n in group.clusters):
        return "Not dispatched yet: no worker cluster is active: " + ", ".join(group.clusters)
    return ""


def cleanup(remotes: Mapping[str, Remote | None]) -> list[str]:
    """The workers whose copy goes when the workload finished or is evicted here."""
    return [name for name, r in remotes.items() if r is not None]


def _ordered(group: Group, names: Sequence[str]) -> list[str]:
    order = {name: i for i, name in enumerate(group.clusters)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


def _seconds(d: timedelta) -> str:
    return f"{int(d.total_seconds())}s"
