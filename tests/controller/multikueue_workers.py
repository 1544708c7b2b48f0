"""The MultiKueue controller's view of its workers, for tests that drive the controller against
in-process API servers: every worker given is reachable and none is watched, so the copies are
read from the workers themselves (tests/controller/test_multikueue_watch.py covers the watches).
"""

from __future__ import annotations

from typing import Any

from kqueue.controller.resources import Resource


class ReachableWorkers:
    """RemoteClusters as the controller reads it: every worker reachable, none watched."""

    def __init__(self, kubes: dict[str, Any]) -> None:
        self._kubes = kubes
        self.woken: list[str] = []
        """The workloads queued again (as a copy's watch event queues one)."""

    def on_copy(self, key: str) -> None:
        self.woken.append(key)

    def client(self, name: str) -> Any:
        return self._kubes.get(name)

    def lost_for(self, name: str) -> float | None:
        return None

    def reachable(self) -> list[str]:
        return sorted(self._kubes)

    def watched(self, name: str, resource: Resource) -> None:
        return None  # not watched: the copies are read from the workers

    def watch(self, name: str, resource: Resource) -> None:
        pass
