"""The pod-group barrier: a gang is not a candidate until all its declared pods exist.

Pods labelled ``kqueue.io/pod-group-name`` form one workload whose size is declared by the
``kqueue.io/pod-group-total-count`` annotation (KEP-4671's barrier before enqueueing). The
controller counts the pods it sees and feeds ``Engine.pods_present(key, present, total)``; until
``present`` reaches ``total`` the workload stays out of its queue, pending with a message that
gives both numbers. Admission itself is all-or-nothing for every workload (all pod sets at their
counts, or at least ``minCount`` with partial admission), so nothing else is needed for gangs.
"""

from __future__ import annotations

from dataclasses import dataclass

from .queue import Blocked
from .types import PendingReason, WorkloadKey
from .workload import WorkloadInfo


@dataclass(frozen=True, slots=True)
class GroupSize:
    present: int
    total: int

    @property
    def complete(self) -> bool:
        return self.present >= self.total


class Barrier:
    """Pod counts of gangs; ``gate`` is the queue's check (see ``QueueManager.gates``)."""

    def __init__(self) -> None:
        self._groups: dict[WorkloadKey, GroupSize] = {}

    def set(self, key: WorkloadKey, present: int, total: int) -> bool:
        """Record the counts; returns whether the barrier opened or closed."""
        before = self._groups.get(key)
        size = GroupSize(max(0, present), max(0, total))
        self._groups[key] = size
        was_open = before is None or before.complete
        return was_open != size.complete

    def forget(self, key: WorkloadKey) -> None:
        self._groups.pop(key, None)

    def size(self, key: WorkloadKey) -> GroupSize | None:
        return self._groups.get(key)

    def gate(self, info: WorkloadInfo) -> Blocked | None:
        size = self._groups.get(info.key)
        if size is None or size.complete:
            return None
        return Blocked(
            PendingReason.SUSPENDED,
            f"Waiting for all pods of the group to be created: {size.present} of {size.total} "
            f"pods exist",
        )
