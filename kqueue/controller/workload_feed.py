"""Workload objects into the engine, and the engine kept converged with the API server.

The Workload informer's events (and, after a relist, the differences between its old store and
the new list) reach the engine through :class:`WorkloadFeed`. Three rules keep the engine's view
of each workload (pending, reserving, admitted, evicting) equal to what the API says:

1. **Never backwards.** The decision writer's own writes are answered before the informer sees
   them; each answer's resourceVersion is a floor for that workload (:meth:`written`), and an
   event older than it is not applied: it would undo what the engine already knows (an
   admission the engine confirmed, read as "released" from an event that predates it, would
   free quota the workload still holds). Kubernetes 1.34 made resourceVersions comparable
   (KEP-5504: decimal integers, ordered as numbers); one that is not a number is applied.
2. **Confirmed admissions.** A written admission is confirmed in the engine at once
   (``Engine.confirm``), so the informer's later view (admitted, evicted, released, in any
   number of steps, or all at once after a relist) is read as the state it is.
3. **A periodic resync** (:meth:`resync`) compares the engine with the informer's store and
   re-applies every workload where the two disagree, counting what it repaired; in a healthy
   process it finds nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kqueue.api.v1alpha1 import Workload, WorkloadSpec
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import Store
from kqueue.engine import from_api
from kqueue.engine.dra import DeviceClaims
from kqueue.engine.engine import Engine
from kqueue.engine.types import PodSet as EnginePodSet
from kqueue.engine.types import WorkloadKey
from kqueue.engine.workload import WorkloadState

logger = logging.getLogger(__name__)

__all__ = ["Repair", "WorkloadFeed", "resource_version_number"]


def resource_version_number(rv: str | None) -> int | None:
    """A resourceVersion as the number it is (KEP-5504); None when it is not one."""
    if not rv or not rv.isdigit():
        return None
    return int(rv)


def expected_state(wl: Workload) -> WorkloadState:
    """The engine state a Workload object implies on its own (a fresh engine's view)."""
    if wl.is_finished:
        return WorkloadState.ABSENT
    if wl.status.admission is not None:
        return WorkloadState.EVICTING if wl.is_true(c.EVICTED) else WorkloadState.ADMITTED
    return WorkloadState.PENDING


@dataclass(frozen=True)
class Repair:
    """One disagreement the resync found and repaired: the engine held ``was``, the API
    implied ``want``."""

    key: WorkloadKey
    was: WorkloadState
    want: WorkloadState


@dataclass
class WorkloadFeed:
    """Applies Workload objects to the engine (see the module docstring)."""

    engine: Callable[[], Engine]
    store: Store[Workload]
    # What sizes the DRA device claims of a namespace's pods (claim_templates.py); None: claims
    # take no quota (no resources.deviceClassMappings).
    claims: Callable[[str], DeviceClaims] | None = None
    # The engine's pod sets per workload, kept while the spec model is the same object: they
    # depend on the spec alone, and the reader reuses the spec across status-only events.
    _pod_sets: dict[str, tuple[WorkloadSpec, tuple[EnginePodSet, ...]]] = field(
        default_factory=dict
    )
    # resourceVersion of our last answered write per workload, until the informer reaches it.
    _floors: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    """Events not applied because the engine already knew a newer version (rule 1)."""

    # -- events ------------------------------------------------------------------------------

    def apply(self, key: str, wl: Workload, engine: Engine | None = None) -> bool:
        """Feed ``wl`` to the engine; False when it is older than what the engine knows."""
        floor = self._floors.get(key)
        if floor is not None:
            version = resource_version_number(wl.metadata.resource_version)
            if version is not None and version < floor:
                self.skipped += 1
                return False
            del self._floors[key]
        kept = self._pod_sets.get(key)
        view = from_api.apply_workload(
            engine if engine is not None else self.engine(),
            wl,
            owner_labels=wl.metadata.labels,
            pod_sets=kept[1] if kept is not None and kept[0] is wl.spec else None,
            claims=self.claims(wl.namespace or "default") if self.claims is not None else None,
        )
        if view is None:
            self._pod_sets.pop(key, None)  # finished: not converted again
        else:
            self._pod_sets[key] = (wl.spec, view.pod_sets)
        return True

    def reapply(self, key: str) -> None:
        """Feed the store's ``key`` again with its pod sets recomputed: what sizes them (a
        ResourceClaimTemplate it names) changed, not the Workload."""
        self._pod_sets.pop(key, None)
        wl = self.store.get(key)
        if wl is not None:
            self.apply(key, wl)

    def delete(self, key: str) -> None:
        self._pod_sets.pop(key, None)
        self._floors.pop(key, None)
        self.engine().delete_workload(WorkloadKey(key))

    def written(self, key: str, resource_version: str | None) -> None:
        """Our write to ``key`` was answered at ``resource_version``: older events are stale."""
        version = resource_version_number(resource_version)
        if version is not None and version > self._floors.get(key, -1):
            self._floors[key] = version

    def stale(self, key: str) -> bool:
        """Whether the store's copy of ``key`` is older than our last answered write to it."""
        floor = self._floors.get(key)
        if floor is None:
            return False
        version = resource_version_number(self.store.resource_version(key))
        return version is not None and version < floor

    def rebuild(self, engine: Engine) -> None:
        """Feed every Workload in the store to a fresh ``engine``."""
        for key, wl in self.store.items():
            self._floors.pop(key, None)  # a new term's store comes from a consistent list
            self.apply(key, wl, engine)

    # -- convergence -------------------------------------------------------------------------

    def resync(
        self, writing: Callable[[WorkloadKey], bool], keys: Iterable[str] | None = None
    ) -> list[Repair]:
        """Make the engine agree with the store wherever they differ; returns what it repaired.

        ``writing``: whether a decision write for the workload is in flight (its outcome is
        not known yet, so the engine's view of it is not compared). A workload whose store copy
        is older than our last write to it is left to the informer (rule 1). ``keys``: only
        these workloads (the manager walks the store a slice at a time, so that the event loop
        is never held for long); None: every workload the store or the engine holds.
        """
        engine = self.engine()
        repairs: list[Repair] = []
        wanted = list(self.store) if keys is None else keys
        for key in wanted:
            wkey = WorkloadKey(key)
            if writing(wkey) or self.stale(key):
                continue
            wl = self.store.get(key)
            was = engine.state(wkey)
            if wl is None:
                if was != WorkloadState.ABSENT:
                    self.delete(key)  # gone from the API: a delete event was missed
                    repairs.append(Repair(wkey, was, WorkloadState.ABSENT))
                continue
            if _agree(was, expected_state(wl)):
                continue
            if was == WorkloadState.RESERVING:
                engine.forget(wkey)  # no write in flight: an assumption nobody will resolve
            self._floors.pop(key, None)
            self.apply(key, wl, engine)
            repairs.append(Repair(wkey, was, engine.state(wkey)))
        if keys is None:
            repairs.extend(self.resync(writing, self.unknown_to_store()))
        return repairs

    def unknown_to_store(self) -> list[str]:
        """Workloads the engine holds that the store does not (deleted while unseen)."""
        return sorted(k for k in self.engine().workload_keys() if k not in self.store)


def _agree(engine: WorkloadState, api: WorkloadState) -> bool:
    """Whether the engine's state is one the API's object allows: an eviction the engine has
    decided is not in the API until it is written, and the workload still holds quota."""
    if engine == api:
        return True
    return engine == WorkloadState.EVICTING and api == WorkloadState.ADMITTED
