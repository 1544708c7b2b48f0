"""Admission fair sharing as the engine keeps it: which LocalQueues are sampled and when, the
entry penalty of each admission until it is settled, and its rollback when the API write fails.

The usage arithmetic (decay, penalties, weights) is ``usage_ledger.py``'s; this module decides
when to apply it, from the cache (what is admitted, by LocalQueue) and the queues (the
LocalQueues, what is waiting). The Engine facade only delegates here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from fractions import Fraction

from ..cache import Cache
from ..queue import FairOrder, QueueManager
from ..types import ClusterQueueName, LocalQueueKey, ResourceName, Usage, WorkloadKey
from .usage_ledger import AdmissionFairSharingConfig, FairUsage, UsageLedger, flatten


class AdmissionFairSharing:
    """The engine's admission-fair-sharing state; ``ledger`` is None while the Configuration has
    no ``admissionFairSharing``."""

    def __init__(
        self, cache: Cache, queues: QueueManager, config: AdmissionFairSharingConfig | None
    ) -> None:
        self._cache = cache
        self._queues = queues
        self.ledger: UsageLedger | None = UsageLedger(config) if config is not None else None
        # Admissions whose entry penalty is pending: workload -> LocalQueue.
        self._penalized: dict[WorkloadKey, LocalQueueKey] = {}
        # Penalties settled for admissions not yet confirmed by the API (the writes run while
        # the next cycle does): taken back if the write fails (``roll_back``).
        self._settled: dict[WorkloadKey, tuple[LocalQueueKey, dict[ResourceName, int]]] = {}

    @property
    def config(self) -> AdmissionFairSharingConfig | None:
        return self.ledger.config if self.ledger is not None else None

    def configure(self, config: AdmissionFairSharingConfig | None) -> bool:
        """Turn it on, change it or turn it off; whether anything changed (the ClusterQueues'
        order must then be set again, ``order_for``)."""
        if config == self.config:
            return False
        if config is None:
            self.ledger = None
            self._penalized.clear()
            self._settled.clear()
        elif self.ledger is None:
            self.ledger = UsageLedger(config)
        else:
            self.ledger.config = config
        return True

    def applies_to(self, cq: ClusterQueueName) -> bool:
        """Whether ``cq`` orders its heads by LocalQueue usage now: its admissionScope asks for
        it and the Configuration enables it."""
        spec = self._cache.cluster_queues.get(cq)
        return self.ledger is not None and spec is not None and spec.usage_based_admission

    def order_for(self, cq: ClusterQueueName) -> FairOrder | None:
        """How ``cq``'s LocalQueues are ordered (None: by the usual order only)."""
        return self.usage if self.applies_to(cq) else None

    def seed(
        self,
        key: LocalQueueKey,
        consumed: Mapping[ResourceName, int],
        last_update: datetime | None,
    ) -> None:
        if self.ledger is not None:
            self.ledger.seed(key, consumed, last_update)

    def usage(self, key: LocalQueueKey) -> FairUsage:
        """The weighted usage ``key`` is ordered by (0 when unknown or off)."""
        if self.ledger is None:
            return FairUsage(False, Fraction(0))
        spec = self._queues.local_queues.get(key)
        return self.ledger.usage(key, spec.fair_weight if spec is not None else Fraction(1))

    def consumed(self, key: LocalQueueKey) -> tuple[dict[ResourceName, int], datetime] | None:
        entry = self.ledger.entry(key) if self.ledger is not None else None
        if entry is None or entry.last_update is None:
            return None
        return dict(entry.consumed), entry.last_update

    def waiting_usages(self, cq: ClusterQueueName) -> tuple[tuple[str, str], ...]:
        """The usage of every LocalQueue with workloads waiting in ``cq``, in the order their
        heads are taken (empty when ``cq`` does not use admission fair sharing)."""
        if not self.applies_to(cq):
            return ()
        queue = self._queues.queues.get(cq)
        lqs = {info.local_queue for info in queue.infos()} if queue is not None else set()
        ranked = sorted((self.usage(lq), lq) for lq in lqs)
        return tuple((str(lq), str(usage)) for usage, lq in ranked)

    def _admitted_by_local_queue(self) -> dict[LocalQueueKey, dict[ResourceName, int]]:
        usage: dict[LocalQueueKey, Usage] = {}
        for key in sorted(self._cache.workloads):
            aw = self._cache.workloads[key]
            acc = usage.setdefault(aw.info.local_queue, {})
            for fr, amount in aw.usage.items():
                acc[fr] = acc.get(fr, 0) + amount
        return {lq: flatten(u) for lq, u in usage.items()}

    def sample(self, now: datetime) -> list[LocalQueueKey]:
        """Decay the usage of every LocalQueue of an admission-fair-sharing ClusterQueue whose
        last sample is ``usageSamplingInterval`` old (Kueue's LocalQueue reconcile); returns
        those sampled, for their status."""
        if self.ledger is None:
            return []
        lqs = [
            k
            for k, spec in sorted(self._queues.local_queues.items())
            if self.applies_to(spec.cluster_queue) and self.ledger.due(k, now)
        ]
        if not lqs:
            return []
        admitted = self._admitted_by_local_queue()
        for lq in lqs:
            self.ledger.sample(lq, admitted.get(lq, {}), now)
        return lqs

    def next_sample(self) -> datetime | None:
        """When the next usage sample is due for a LocalQueue whose usage still moves in a way
        that matters: it holds quota (the sample folds it in) or has workloads waiting (the
        order depends on it). An idle queue's decay is computed exactly at its next sample,
        however late."""
        if self.ledger is None:
            return None
        busy: set[LocalQueueKey] = {aw.info.local_queue for aw in self._cache.workloads.values()}
        busy.update(info.local_queue for info in self._queues.pending.values())
        times = []
        for lq in busy:
            spec = self._queues.local_queues.get(lq)
            if spec is None or not self.applies_to(spec.cluster_queue):
                continue
            entry = self.ledger.entry(lq)
            if entry is not None and entry.last_update is not None:
                times.append(entry.last_update + self.ledger.config.usage_sampling_interval)
        return min(times, default=None)

    def charge(self, key: WorkloadKey, cq: ClusterQueueName, now: datetime) -> None:
        """``key`` was just admitted in ``cq``: its entry penalty is pending until settled."""
        if self.ledger is None or not self.applies_to(cq):
            return
        aw = self._cache.get(key)
        if aw is None:
            return
        self.ledger.push_penalty(aw.info.local_queue, key, flatten(aw.usage), now)
        self._penalized[key] = aw.info.local_queue

    def settle(self, now: datetime) -> None:
        """Fold the entry penalties of the last cycle's admissions into the decayed usage
        (Kueue does it when the workload's Admitted condition is seen). An admission rolled
        back (``roll_back``) is not charged; one that has already finished or been evicted was
        admitted all the same, and is."""
        if self.ledger is None or not self._penalized:
            return
        admitted = self._admitted_by_local_queue()
        for key, lq in sorted(self._penalized.items()):
            folded = self.ledger.settle(lq, key, admitted.get(lq, {}), now)
            held = self._cache.get(key)
            if held is not None and held.assumed:
                self._settled[key] = (lq, folded)
        self._penalized.clear()

    def confirmed(self, key: WorkloadKey) -> None:
        """The admission of ``key`` is in the API, or over: its charge stays for good."""
        self._settled.pop(key, None)

    def roll_back(self, key: WorkloadKey) -> None:
        """The admission of ``key`` was not written: take back its penalty or its charge."""
        lq = self._penalized.pop(key, None)
        if lq is not None and self.ledger is not None:
            self.ledger.drop_penalty(lq, key)
        settled = self._settled.pop(key, None)
        if settled is not None and self.ledger is not None:
            self.ledger.unsettle(*settled)

    def forget_local_queue(self, key: LocalQueueKey) -> None:
        if self.ledger is not None:
            self.ledger.forget(key)
