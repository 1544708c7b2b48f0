"""WorkloadSlices (Kueue's KEP-77) for every resizable kind: an elastic Job
(``kqueue.io/elastic-job: "true"``), a StatefulSet. Each kind says how it is read (a
:class:`Sizing`); the machinery is the same. For an elastic Job:

An admitted elastic Job keeps running while its parallelism changes:

* **Scale-up**: a replacement slice is created, a new Workload for the whole new size (its name
  follows the Job's generation) annotated ``kqueue.io/workload-slice-replacement-for`` with the
  admitted slice. Only the delta is charged, on the old slice's flavors. The Job controller
  creates the new pods behind the admission gate (the Job's template carries it); they stay gated
  until the replacement is admitted. When the engine admits it, it returns ``FinishSlice`` and
  the old slice gets ``Finished=True`` with reason ``WorkloadSliceReplaced`` here; the running
  pods now count against the new slice and are never touched (a released pod is never gated
  again).
* **Scale-down**: the admitted slice shrinks in place (``Engine.scale_down``): its pod set count
  and ``status.admission`` are rewritten at the smaller size, and the difference is free as soon
  as the status is written (not before: a write that fails leaves the quota counted).
  The Job controller removes the surplus pods itself.

:class:`ElasticSlices` plugs into the generic job reconciler (``workload_hooks``: which of the
Job's Workloads the generic steps drive) and into the scheduler (``after_cycle``: finishing
replaced slices).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kqueue.api.integrations import IntegrationError, PriorityResolver
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import workload_status
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import JSON_PATCH, Conflict, Kube, KubeError, NotFound
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import WORKLOADS
from kqueue.engine import from_api
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.slice import scaled_down
from kqueue.engine.types import PodSetName, WorkloadKey

logger = logging.getLogger(__name__)

Obj = dict[str, Any]



def _key(wl: Workload) -> WorkloadKey:
    return WorkloadKey(f"{wl.namespace or 'default'}/{wl.name}")


def _spec_count(wl: Workload) -> int:
    ps = wl.pod_set(c.DEFAULT_POD_SET_NAME)
    return ps.count if ps is not None else 0


def _admitted_count(wl: Workload) -> int:
    adm = wl.status.admission
    psa = adm.assignment(c.DEFAULT_POD_SET_NAME) if adm is not None else None
    if psa is not None and psa.count is not None:
        return psa.count
    ps = wl.pod_set(c.DEFAULT_POD_SET_NAME)
    return ps.count if ps is not None else 0


def _replaces(wl: Workload) -> str | None:
    return wl.metadata.annotations.get(c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION) or None


@dataclass(frozen=True)
class Sizing:
    """How a resizable kind is read: whether it is elastic, its size, the name of its current
    slice, the slice that replaces an admitted one, whether it finished. A Job's is in
    :mod:`kqueue.controller.integrations.job.elastic`, a StatefulSet's in
    :mod:`kqueue.controller.integrations.statefulset.scaling`."""

    kind: str
    elastic: Callable[[Obj], bool]
    count: Callable[[Obj], int]
    current_name: Callable[[Obj], str]
    replacement: Callable[[Obj, PriorityResolver, str], Workload]
    finished: Callable[[Obj], bool]


class ElasticSlices:
    def __init__(
        self,
        *,
        engine: Callable[[], Engine],
        workloads: Store[Workload],
        priorities: Callable[[], PriorityResolver],
        kube: Kube,
        events: EventRecorder,
        metrics: Metrics,
        now: Now,
        sizing: Sizing,
    ) -> None:
        self._sizing = sizing
        self._engine = engine
        self._workloads = workloads
        self._priorities = priorities
        self._kube = kube
        self._events = events
        self._metrics = metrics
        self._now = now

    # -- the job reconciler's hook ---------------------------------------------------------

    async def select(self, job: Obj, owned: list[Workload]) -> list[Workload]:
        """The one slice the generic job steps drive; creates, shrinks and drops slices."""
        sizing = self._sizing
        if not sizing.elastic(job) or not owned:
            return owned
        live = [w for w in owned if not w.is_finished]
        if not live:
            return owned
        holding = [w for w in live if workload_status.holds_quota(w)]
        waiting = [w for w in live if not workload_status.holds_quota(w)]
        try:
            want = sizing.count(job)
        except IntegrationError:
            return owned
        current_name = sizing.current_name(job)
        if not holding:
            # Nothing runs: only the slice of the Job's current generation should wait. An
            # empty list makes the generic steps create it.
            stale = [w for w in waiting if w.name != current_name]
            for w in stale:
                await self._delete(w, f"the {sizing.kind} changed before it was admitted")
            return [w for w in waiting if w.name == current_name]
        active = await self._settle_replaced(holding)
        if sizing.finished(job):
            for w in waiting:
                await self._delete(w, f"the {sizing.kind} finished")
            return [active]
        if workload_status.is_evicting(active):
            # Stopping: once it is requeued, only the current generation's slice is kept.
            return [active]
        have = _admitted_count(active)
        if want > have:
            for w in waiting:
                if w.name != current_name:
                    await self._delete(w, "superseded by a newer scale-up")
            if not any(w.name == current_name for w in waiting):
                await self._create_replacement(job, active)
        else:
            for w in waiting:
                await self._delete(w, f"the {sizing.kind} is back to {want} pod(s)")
            # Parallelism 0 is a pause, not a size: the slice keeps its quota (as suspending).
            if 0 < want < have:
                await self._scale_down(job, active, want)
            elif 0 < want == have and _spec_count(active) > want:
                # A scale-down whose status write landed but whose spec patch did not (the
                # admission already says ``want``): finish it, or the spec keeps asking for pods
                # the quota no longer covers.
                await self._shrink_spec(active, want)
        return [active]

    async def _settle_replaced(self, holding: list[Workload]) -> Workload:
        """The newest slice holding quota; an older one it replaces is finished (normally done
        right after the cycle that admitted the replacement; this covers a leader change)."""
        if len(holding) == 1:
            return holding[0]
        keys = {_key(w) for w in holding}
        newest = [w for w in holding if _replaces(w) in keys]
        active = newest[-1] if newest else holding[-1]
        old = _replaces(active)
        for w in holding:
            if w is not active and _key(w) == old:
                adm = active.status.admission
                await self._finish_replaced(
                    _key(w),
                    _key(active),
                    f"Replaced by workload slice {_key(active)}",
                    adm.cluster_queue if adm is not None else "",
                )
        return active

    async def _create_replacement(self, job: Obj, active: Workload) -> None:
        try:
            wl = self._sizing.replacement(job, self._priorities(), str(_key(active)))
        except IntegrationError as exc:
            self._events.record(
                job, "Warning", "ErrWorkloadCompose", f"Cannot create the workload slice: {exc}"
            )
            return
        try:
            await self._kube.create(WORKLOADS, wl.to_dict(), namespace=wl.namespace)
        except Conflict:
            return  # exists; the informer has not shown it yet
        self._events.record(
            job,
            "Normal",
            "CreatedWorkloadSlice",
            f"Scaled up to {wl.spec.pod_sets[0].count} pod(s): created workload slice "
            f"{wl.namespace}/{wl.name} to replace {_key(active)}; new pods stay gated until it "
            f"is admitted",
        )
        logger.info("created workload slice %s/%s replacing %s", wl.namespace, wl.name, _key(active))

    async def _shrink_spec(self, wl: Workload, want: int) -> None:
        index = next(
            i for i, ps in enumerate(wl.spec.pod_sets) if ps.name == c.DEFAULT_POD_SET_NAME
        )
        await self._kube.patch(
            WORKLOADS,
            wl.name,
            [{"op": "replace", "path": f"/spec/podSets/{index}/count", "value": want}],
            namespace=wl.namespace,
            content_type=JSON_PATCH,
        )

    async def _scale_down(self, job: Obj, wl: Workload, want: int) -> None:
        key = _key(wl)
        have = _admitted_count(wl)
        counts = {PodSetName(c.DEFAULT_POD_SET_NAME): want}
        held = self._engine().admitted_workload(key)
        if held is None:
            return
        _, admission = scaled_down(held.info.obj, held.admission, counts)
        # Status first, and the engine frees the quota only once the API has the smaller
        # admission: freed before, a write that fails (or a cycle that runs while it is in
        # flight) would hand out quota the running pods still hold.
        smaller = workload_status.api_admission(admission)

        def shrink(obj: Obj) -> Obj | None:
            fresh = Workload.model_validate(obj)
            if fresh.status.admission is None:
                return None  # released meanwhile: nothing to shrink
            fresh.status.admission = smaller
            return fresh.to_dict()

        try:
            written = await self._kube.modify_status(
                WORKLOADS, wl.name, shrink, namespace=wl.namespace
            )
        except Conflict as exc:
            # Not written (other errors go to the job reconciler, which retries): the engine
            # still counts the admission the API has; the Job's next reconcile tries again.
            logger.info("scale-down of workload slice %s not written: %s", key, exc)
            return
        if written is None:
            return  # gone, or released meanwhile
        # Cycles that ran while the write was in flight counted the larger admission (more than
        # the API, never less). The informer may have brought the smaller one already: then
        # this changes nothing.
        self._engine().scale_down(key, counts)
        await self._shrink_spec(wl, want)
        message = f"Scaled down from {have} to {want} pod(s); quota of {have - want} pod(s) freed"
        self._events.record(wl.to_dict(), "Normal", "ScaledDown", message)
        self._events.record(job, "Normal", "ScaledDown", message)

    async def _delete(self, wl: Workload, why: str) -> None:
        try:
            await self._kube.delete(WORKLOADS, wl.name, namespace=wl.namespace)
        except NotFound:
            return
        logger.info("deleted workload slice %s: %s", _key(wl), why)

    # -- the scheduler's hook --------------------------------------------------------------

    def _mine(self, key: WorkloadKey) -> bool:
        """A slice of this kind (each resizable kind's hook finishes its own slices)."""
        wl = self._workloads.get(key)
        refs = wl.metadata.owner_references if wl is not None else []
        return not refs or any(r.kind == self._sizing.kind for r in refs)

    async def after_cycle(self, engine: Engine, result: CycleResult) -> None:
        for done in result.finished:
            if not self._mine(done.old):
                continue
            if not engine.holds_quota(done.new):
                # The replacement's admission was not written (rolled back): the old slice
                # keeps running and holds its quota again.
                old = self._workloads.get(done.old)
                if old is not None:
                    from_api.apply_workload(engine, old, owner_labels=old.metadata.labels)
                continue
            await self._finish_replaced(done.old, done.new, done.message, done.cluster_queue)

    async def _finish_replaced(
        self, old: WorkloadKey, new: WorkloadKey, message: str, cluster_queue: str
    ) -> None:
        namespace, name = old.split("/", 1)

        def finish(obj: Obj) -> Obj | None:
            updated = workload_status.finish(
                Workload.model_validate(obj), c.WORKLOAD_SLICE_REPLACED, message, self._now()
            )
            return updated.to_dict() if updated is not None else None

        try:
            written = await self._kube.modify_status(WORKLOADS, name, finish, namespace=namespace)
        except KubeError as exc:
            logger.warning("finishing replaced slice %s: %s", old, exc)
            return
        if written is None:
            return  # gone, or already finished
        self._metrics.slice_replaced(cluster_queue)
        self._events.record(written, "Normal", c.WORKLOAD_SLICE_REPLACED, message)
        logger.info("workload slice %s replaced by %s", old, new)
