"""waitForPodsReady: timeouts for admitted workloads whose pods are not ready, and the requeue
backoff that follows (Kueue's workload controller, ``reconcileNotReadyTimeout``).

The controller feeds readiness (``Engine.pods_ready(key, ready, now)``); the engine keeps no
timers of its own: deadlines are derived from the clock it is given.

* An admitted workload whose pods are not all ready is evicted with ``PodsReadyTimeout`` once
  ``timeout`` has passed since it was admitted (its quota reservation, or with admission checks
  the moment all of them were Ready: ``Admitted``). A workload whose pods were
  ready and stopped being ready gets ``recoveryTimeout`` from that moment, when one is set.
* Each such eviction increments the workload's requeue count ``n`` and requeues it no earlier
  than ``backoffBaseSeconds * 2^(n-1)`` seconds later, capped at ``backoffMaxSeconds`` (Kueue's
  ``UpdateRequeueState`` without its random jitter, so that runs are reproducible). Its place in
  the queue then follows the eviction time (``requeuingStrategy.timestamp: Eviction``).
* When the count would exceed ``backoffLimitCount`` the workload is deactivated instead: evicted
  with reason ``Deactivated`` and marked as a deactivation target (``spec.active`` false).
* With ``blockAdmission``, nothing else is admitted while an admitted workload is not ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .types import EvictionReason, WorkloadKey
from .workload import AdmittedWorkload

if TYPE_CHECKING:
    # Only for the converter's signature: the engine does not load the configuration models.
    from kqueue.api.config import WaitForPodsReady

# Kueue's WorkloadRequeuingLimitExceeded, for the DeactivationTarget condition.
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
DEACTIVATION_MESSAGE = "exceeding the maximum number of re-queuing retries"


@dataclass(frozen=True, slots=True)
class PodsReadyConfig:
    timeout: timedelta = timedelta(minutes=5)
    recovery_timeout: timedelta | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600
    backoff_limit_count: int | None = None
    block_admission: bool = True
    # Requeued workloads are ordered by their eviction time (False: by creation time).
    order_by_eviction: bool = True

    @staticmethod
    def from_config(cfg: WaitForPodsReady) -> PodsReadyConfig | None:
        """The engine's settings from the controller Configuration (None when disabled)."""
        if not cfg.enable:
            return None
        rs = cfg.requeuing_strategy
        return PodsReadyConfig(
            timeout=cfg.timeout,
            recovery_timeout=cfg.recovery_timeout,
            backoff_base_seconds=rs.backoff_base_seconds,
            backoff_max_seconds=rs.backoff_max_seconds,
            backoff_limit_count=rs.backoff_limit_count,
            block_admission=cfg.blocks_admission,
            order_by_eviction=rs.timestamp == "Eviction",
        )


def backoff(count: int, base_seconds: int, max_seconds: int) -> timedelta:
    """Wait before the ``count``-th requeue: ``base * 2^(count-1)`` seconds, at most ``max``."""
    return timedelta(seconds=min(base_seconds * 2 ** (count - 1), max_seconds))


@dataclass(frozen=True, slots=True)
class Timeout:
    """A PodsReady timeout the engine decided: evict (and requeue later) or deactivate."""

    workload: WorkloadKey
    reason: EvictionReason
    message: str
    # The requeueState to write: the new count and when the workload may be queued again.
    requeue_count: int
    requeue_at: datetime | None
    deactivate: bool


@dataclass(frozen=True, slots=True)
class AfterEviction:
    """How an evicted workload goes back to its queue."""

    requeue_at: datetime | None
    queue_order_time: datetime | None
    deactivate: bool


@dataclass(slots=True)
class _State:
    ready: bool = False
    # When the pods stopped being ready after having been ready (recovery timer).
    unready_since: datetime | None = None


class Readiness:
    """Readiness signals and requeue counts; disabled (no timeouts) without a config."""

    def __init__(self, config: PodsReadyConfig | None = None) -> None:
        self.config = config
        self._state: dict[WorkloadKey, _State] = {}
        self._counts: dict[WorkloadKey, int] = {}
        self._after: dict[WorkloadKey, AfterEviction] = {}

    @property
    def enabled(self) -> bool:
        return self.config is not None

    # -- signals -----------------------------------------------------------------------------

    def pods_ready(self, key: WorkloadKey, ready: bool, now: datetime) -> None:
        st = self._state.setdefault(key, _State())
        if ready:
            st.ready = True
            st.unready_since = None
        elif st.ready:
            st.ready = False
            st.unready_since = now
        # Not ready before either: the admission timer keeps running.

    def known_count(self, key: WorkloadKey, count: int) -> None:
        """The requeue count recorded in the workload's status (e.g. after a restart)."""
        if count > self._counts.get(key, 0):
            self._counts[key] = count

    def forget(self, key: WorkloadKey) -> None:
        """Finished or deleted: nothing is kept."""
        self._state.pop(key, None)
        self._counts.pop(key, None)
        self._after.pop(key, None)

    def is_ready(self, key: WorkloadKey) -> bool:
        st = self._state.get(key)
        return st is not None and st.ready

    # -- deadlines ---------------------------------------------------------------------------

    def deadline(self, wl: AdmittedWorkload) -> datetime | None:
        """When ``wl`` times out if nothing changes (None: never)."""
        cfg = self.config
        if cfg is None or not wl.info.obj.active:
            return None
        st = self._state.get(wl.key)
        if st is not None and st.ready:
            return None
        if st is not None and st.unready_since is not None:
            if cfg.recovery_timeout is None:
                return None
            return st.unready_since + cfg.recovery_timeout
        admitted = wl.admission.admitted_since
        if admitted is None:
            return None  # still waiting for its admission checks: pods are not released yet
        return admitted + cfg.timeout

    def next_deadline(
        self, workloads: Mapping[WorkloadKey, AdmittedWorkload], evicting: set[WorkloadKey]
    ) -> datetime | None:
        best: datetime | None = None
        for key, wl in workloads.items():
            if key in evicting:
                continue
            d = self.deadline(wl)
            if d is not None and (best is None or d < best):
                best = d
        return best

    def all_ready(
        self, workloads: Mapping[WorkloadKey, AdmittedWorkload], evicting: set[WorkloadKey]
    ) -> bool:
        """Whether no admitted workload is waiting for its pods (for ``blockAdmission``)."""
        return all(
            self.is_ready(key) or key in evicting or not wl.info.obj.active
            for key, wl in workloads.items()
        )

    def expired(
        self,
        workloads: Mapping[WorkloadKey, AdmittedWorkload],
        evicting: set[WorkloadKey],
        now: datetime,
    ) -> list[Timeout]:
        """Workloads whose deadline passed by ``now``, with what to do about each."""
        cfg = self.config
        if cfg is None:
            return []
        out: list[Timeout] = []
        for key in sorted(workloads):
            wl = workloads[key]
            if key in evicting:
                continue
            d = self.deadline(wl)
            if d is None or d > now:
                continue
            count = self._counts.get(key, 0)
            limit = cfg.backoff_limit_count
            if limit is not None and count + 1 > limit:
                out.append(
                    Timeout(
                        key,
                        EvictionReason.DEACTIVATED,
                        f"The workload is deactivated due to {DEACTIVATION_MESSAGE}",
                        count,
                        None,
                        True,
                    )
                )
                self._after[key] = AfterEviction(None, None, True)
                continue
            count += 1
            self._counts[key] = count
            at = now + backoff(count, cfg.backoff_base_seconds, cfg.backoff_max_seconds)
            out.append(
                Timeout(
                    key,
                    EvictionReason.PODS_READY_TIMEOUT,
                    f"Exceeded the PodsReady timeout {key}",
                    count,
                    at,
                    False,
                )
            )
            self._after[key] = AfterEviction(at, now if cfg.order_by_eviction else None, False)
        return out

    def undo_timeout(self, key: WorkloadKey, requeue_count: int, deactivate: bool) -> None:
        """A timeout :meth:`expired` decided was not carried out (its eviction was never
        written): forget its requeue settings and take back the count it added, so that the
        count grows once per eviction that happened. A count learnt since (``known_count``) is
        kept."""
        self._after.pop(key, None)
        if deactivate or self._counts.get(key) != requeue_count:
            return  # a deactivation adds nothing; a different count is not this timeout's
        if requeue_count > 1:
            self._counts[key] = requeue_count - 1
        else:
            self._counts.pop(key, None)

    def after_eviction(self, key: WorkloadKey) -> AfterEviction | None:
        """The workload's quota is released: its readiness starts over with its next admission
        (its pods are new); returns the requeue settings if the engine evicted it for readiness."""
        self._state.pop(key, None)
        return self._after.pop(key, None)

    def count(self, key: WorkloadKey) -> int:
        return self._counts.get(key, 0)
