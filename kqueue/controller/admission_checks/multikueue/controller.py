"""The MultiKueue admission check (controllerName ``kqueue.io/multikueue``), Kueue's
``pkg/controller/admissionchecks/multikueue`` on kqueue's check framework (docs/multikueue.md).

For a workload that reserved quota on the manager, :meth:`MultiKueueController.sync` reads its
copies on the reachable workers of the check's MultiKueueConfig, asks the pure
:func:`kqueue.engine.multikueue.plan` what to do, and does it: copies the Workload to the
nominated workers (labelled with this manager's origin), keeps the first copy a worker admits
(``status.clusterName``) and deletes the others, creates the job there, copies the job's status
back, and finishes the workload when the copy finishes. The check is Ready while the copy runs;
Retry (the workload is evicted and dispatched again) when the copy is evicted there, is gone,
or its worker was unreachable for ``workerLostTimeout``. :meth:`cleanup` deletes the copies
when the workload finishes or is evicted here; the garbage collector (gc.py) deletes those
left on workers that were unreachable then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, Final

from kqueue.api import config as cfgmod
from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    AdmissionCheckState,
    MultiKueueCluster,
    MultiKueueConfig,
    Workload,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import (
    CONFIG_KIND,
    CONTROLLER_NAME,
    ORIGIN_LABEL,
    ORIGIN_UID_ANNOTATION,
)
from kqueue.controller import workload_status
from kqueue.controller.admission_checks.framework import Inactive, Synced
from kqueue.controller.admission_checks.framework import with_state as _with
from kqueue.controller.admission_checks.multikueue import adapters
from kqueue.controller.admission_checks.multikueue.clusters import RemoteClusters
from kqueue.controller.admission_checks.multikueue.remote_writes import (
    REMOTE_WRITE_TIMEOUT_SECONDS,
    RemoteWrites,
    WorkerBackoff,
)
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import WORKLOADS, Resource
from kqueue.engine import multikueue as mk

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

# How often a workload is looked at again while a worker it may be on is not watched yet (its
# watch has not listed, clusters.py): while its copies wait for a worker to admit one, and while
# its copy runs (status, finish, a lost worker).
PENDING_POLL_SECONDS: Final = 2.0
RUNNING_POLL_SECONDS: Final = 3.0
# Once its workers are watched a workload is synced on their events (a copy or its job
# changed, a worker connected or was lost), when a write on a worker ends or fails (after the
# worker's backoff, remote_writes.py: no event comes of a failure), and, as a safety net, every
# RESYNC_SECONDS: for
# what fails without this controller seeing it (a job's status not copied back, a job whose
# kind the worker would not let this manager watch). Kueue has no such resync; 60 s
# keeps the net's cost at 1,000 waiting workloads to 17 syncs a second, each one read of the
# manager's job and none of a worker (the copies are read from the watches).
RESYNC_SECONDS: Final = 60.0


class MultiKueueController:
    """The built-in MultiKueue check controller."""

    controller_name = CONTROLLER_NAME

    def __init__(
        self,
        *,
        configs: Store[MultiKueueConfig],
        clusters: Store[MultiKueueCluster],
        checks: Store[AdmissionCheck],
        remotes: RemoteClusters,
        kube: Kube,
        events: EventRecorder,
        settings: cfgmod.MultiKueue,
        metrics: Metrics | None = None,
        backoff: WorkerBackoff | None = None,
    ) -> None:
        self._metrics = metrics
        self._configs = configs
        self._clusters = clusters
        self._checks = checks
        self._remotes = remotes
        self._kube = kube
        self._events = events
        self._settings = settings
        # Incremental dispatcher: when each workload's current round started (by UID).
        self._rounds: dict[str, datetime] = {}
        # A write that outlasts its sync queues the workload again as a copy's event does.
        self.writes = RemoteWrites(wake=lambda key: self._remotes.on_copy(key))
        if backoff is not None:
            self.writes.backoff = backoff

    @property
    def origin(self) -> str:
        return self._settings.origin

    def config_for(self, check: AdmissionCheck) -> MultiKueueConfig | None:
        params = check.spec.parameters
        if params is None or params.kind != CONFIG_KIND or params.api_group != c.GROUP:
            return None
        return self._configs.get(params.name or "")

    def inactive(self, check: AdmissionCheck) -> Inactive | None:
        """Kueue's MultiKueue AdmissionCheck reconciler: active while its MultiKueueConfig
        exists and names at least one cluster that exists and is Active."""
        params = check.spec.parameters
        if params is None or params.api_group != c.GROUP or params.kind != CONFIG_KIND:
            got = "not set" if params is None else f"{params.api_group}/{params.kind}"
            return Inactive(
                "BadConfig",
                f"Cannot load the AdmissionCheck's parameters: spec.parameters is {got}; "
                f"allowed: apiGroup {c.GROUP}, kind {CONFIG_KIND}",
            )
        cfg = self._configs.get(params.name or "")
        if cfg is None:
            return Inactive(
                "BadConfig",
                f"Cannot load the AdmissionCheck's parameters: MultiKueueConfig {params.name} "
                "(spec.parameters.name) not found",
            )
        missing = [n for n in cfg.spec.clusters if self._clusters.get(n) is None]
        inactive = [
            n for n in cfg.spec.clusters
            if (mkc := self._clusters.get(n)) is not None and not mkc.is_active
        ]
        if len(missing) + len(inactive) < len(cfg.spec.clusters):
            return None
        parts = []
        if missing:
            parts.append(f"Missing clusters: [{' '.join(missing)}]")
        if inactive:
            parts.append(f"Inactive clusters: [{' '.join(inactive)}]")
        return Inactive(
            "NoUsableClusters",
            f"MultiKueueConfig {cfg.name}: " + ", ".join(parts),
        )

    # -- one workload ----------------------------------------------------------------------------

    async def sync(
        self, wl: Workload, check: AdmissionCheck, state: AdmissionCheckState, now: datetime
    ) -> Synced:
        cfg = self.config_for(check)
        if cfg is None:
            return Synced(_with(state, "Pending", "The MultiKueueConfig is missing", now))
        owner = _controller_owner(wl)
        adapter = adapters.adapter_for(owner[0], owner[1]) if owner is not None else None
        if owner is None or adapter is None:
            what = f" for owner kind {owner[1]!r} ({owner[0]})" if owner else ""
            return self._decided(
                wl, check, state, now, "Rejected",
                f"No multikueue adapter found{what}; kinds that can be dispatched: "
                + ", ".join(adapters.dispatchable_kinds()),
            )
        namespace = wl.namespace or "default"
        try:
            local = await self._kube.get(adapter.resource, owner[2], namespace)
        except NotFound:
            return Synced(state, again_after=PENDING_POLL_SECONDS)
        problem = adapters.managed_problem(adapter, local)
        if problem is not None:
            return self._decided(
                wl, check, state, now, "Rejected", f"The owner is not managed by MultiKueue: {problem}"
            )
        remotes = await self._read_remotes(wl, cfg.spec.clusters)
        waiting_for = [
            s.name for s in wl.status.admission_checks if s.name != check.name and s.state != "Ready"
        ]
        group = mk.Group(
            check=state.state,
            cluster_name=wl.status.cluster_name,
            nominated=tuple(wl.status.nominated_cluster_names),
            clusters=tuple(cfg.spec.clusters),
            active=frozenset(n for n in cfg.spec.clusters if self._remotes.client(n) is not None),
            remotes={
                n: mk.Remote() if r is None and self.writes.maybe_there(n, wl.key) else r
                for n, (r, _) in remotes.items()
            },
            others_ready=not waiting_for,
            lost_for=self._lost_for(wl.status.cluster_name),
        )
        plan = mk.plan(
            group,
            dispatcher=self._settings.dispatcher_name,
            worker_lost_timeout=self._settings.worker_lost_timeout,
            incremental=self._incremental(wl, group, now),
        )
        failed = await self._carry_out(wl, adapter, owner[2], local, plan, remotes, now)
        new = state
        if plan.check is not None:
            value, message = plan.check
            new = _with(state, value, message, now)
            self._events.record(wl.to_dict(), "Normal", "MultiKueue", message)
            if value == "Ready" and plan.winner is not None and self._metrics is not None:
                self._metrics.multikueue_admitted(_cluster_queue(wl), plan.winner)
        elif new.state == "Pending":
            message = mk.pending_message(
                group, plan, dispatcher=self._settings.dispatcher_name, waiting_for=waiting_for
            )
            new = _with(state, "Pending", message, now)
        if plan.finish is not None:
            return Synced(new)
        poll = RUNNING_POLL_SECONDS if new.state == "Ready" else PENDING_POLL_SECONDS
        if all(self._remotes.watched(n, WORKLOADS) is not None for n in group.active):
            poll = RESYNC_SECONDS
        if failed is not None:
            poll = min(poll, failed)
        again = poll if plan.again_after is None else min(poll, plan.again_after)
        return Synced(new, again_after=again if new.state in ("Pending", "Ready") else None)

    def _decided(
        self, wl: Workload, check: AdmissionCheck, state: AdmissionCheckState, now: datetime,
        value: str, message: str,
    ) -> Synced:
        if state.state != value:
            self._events.record(
                wl.to_dict(), "Warning", "MultiKueue", f"Admission check {check.name}: {message}"
            )
        return Synced(_with(state, value, message, now))

    def _lost_for(self, cluster: str | None) -> timedelta | None:
        if cluster is None or self._remotes.client(cluster) is not None:
            return None
        seconds = self._remotes.lost_for(cluster)
        return timedelta(seconds=seconds) if seconds is not None else timedelta(0)

    def _incremental(
        self, wl: Workload, group: mk.Group, now: datetime
    ) -> tuple[list[str] | None, float | None]:
        if self._settings.dispatcher_name != mk.INCREMENTAL:
            return None, None
        if group.check != "Pending" or group.cluster_name is not None:
            return None, None
        uid = wl.metadata.uid or wl.key
        inc = self._settings.incremental_dispatcher_config
        new, again = mk.nominate_incremental(
            group.clusters, group.active, group.nominated, inc.step_size,
            self._rounds.get(uid), now, inc.round_timeout,
        )
        if new is not None or uid not in self._rounds:
            self._rounds[uid] = now
        return new, again

    async def _read_remotes(
        self, wl: Workload, clusters: list[str]
    ) -> dict[str, tuple[mk.Remote | None, Obj | None]]:
        """Per reachable worker: its copy of ``wl`` (as the plan sees it, and as read), from
        the worker's watch once it has listed, else from the worker. A copy of another
        incarnation of the workload (another UID) is deleted and counts as none."""
        namespace = wl.namespace or "default"

        async def one(name: str) -> tuple[str, tuple[mk.Remote | None, Obj | None]] | None:
            kube = self._remotes.client(name)
            if kube is None:
                return None
            try:
                obj = await self._remote_object(name, kube, WORKLOADS, wl.name, namespace)
            except KubeError as exc:
                logger.info("MultiKueue: Workload %s on %s not read: %s", wl.key, name, exc)
                return None
            if obj is None:
                return name, (None, None)
            self.writes.confirmed(name, wl.key)
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if annotations.get(ORIGIN_UID_ANNOTATION) not in (None, wl.metadata.uid):
                with contextlib.suppress(KubeError):
                    await kube.delete(WORKLOADS, wl.name, namespace=namespace)
                return name, (None, None)
            return name, (_remote_view(Workload.model_validate(obj)), obj)

        found = await asyncio.gather(*(one(n) for n in clusters))
        return dict(x for x in found if x is not None)

    async def _remote_object(
        self, cluster: str, kube: Kube, resource: Resource, name: str, namespace: str
    ) -> Obj | None:
        """One of this manager's objects on a worker (None: not there): from the worker's
        watch of ``resource`` once it has listed, else read from the worker."""
        store = self._remotes.watched(cluster, resource)
        if store is not None:
            return store.get(f"{namespace}/{name}")
        try:
            return await kube.get(resource, name, namespace)
        except NotFound:
            return None

    async def _carry_out(
        self, wl: Workload, adapter: adapters.Adapter, job_name: str, local: Obj,
        plan: mk.Plan, remotes: dict[str, tuple[mk.Remote | None, Obj | None]], now: datetime,
    ) -> float | None:
        """Do what ``plan`` says; the seconds until the workload should be looked at again
        because a write on a worker failed or waits for the worker's backoff (no event will
        come of it), None when none did."""
        namespace = wl.namespace or "default"
        # The workers' writes go out together and the sync waits for them only briefly
        # (remote_writes.py): a slow worker does not hold up the others, nor the other syncs.
        tasks: list[asyncio.Task[bool]] = []
        deferred: list[float] = []

        def start(what: str, worker: str, write: Any) -> None:
            left = self.writes.backoff.left(worker)
            if left > 0:
                deferred.append(left)
                return
            task = self.writes.start(what, worker, wl.key, write)
            if task is not None:
                tasks.append(task)

        for name in plan.delete:
            self.writes.confirmed(name, wl.key)
            start("delete", name, _bind(
                self._delete_remote, name, wl.name, namespace, adapter, job_name
            ))
        for name in plan.create:
            start("create", name, _bind(self._copy_to, name, wl, namespace))
        # The objects that make the job (one, or a pod group's pods) go and come back together.
        members = (
            await adapter.members(self._kube, local)
            if plan.winner is not None or plan.sync_from is not None else []
        )
        if plan.winner is not None and members:
            winner = plan.winner

            async def jobs() -> bool:
                made = await asyncio.gather(*(
                    self._ensure_remote_job(winner, adapter, m, wl.name, _name(m))
                    for m in members
                ))
                return all(made)

            start("job", winner, jobs)
        ok = await self.writes.settle(wl.key, tasks)
        if plan.sync_from is not None:
            source, done = plan.sync_from, plan.finish is not None
            await asyncio.gather(*(
                self._sync_status(source, adapter, m, _name(m), done) for m in members
            ))
        if plan.nominate is not None or plan.winner is not None:
            await self._write_placement(wl, plan)
        if plan.finish is not None:
            reason, message = plan.finish

            def finish(obj: Obj) -> Obj | None:
                out = workload_status.finish(Workload.model_validate(obj), reason, message, now)
                return out.to_dict() if out is not None else None

            await self._kube.modify_status(WORKLOADS, wl.name, finish, namespace=namespace)
        if ok is False:
            # A failed write's worker backs off (a refusal of this workload's own: the first
            # step of a backoff); the workload is queued again then as well.
            left = [self.writes.backoff.left(n) for n in {*plan.delete, *plan.create}]
            deferred.append(max([self.writes.backoff.initial, *left]))
        return min(deferred) if deferred else None

    async def _copy_to(self, name: str, wl: Workload, namespace: str) -> bool:
        """The Workload's copy on worker ``name``; False when the worker refused or did not
        answer. A create not answered, or answered AlreadyExists, may have made the copy: it
        is waited for in the worker's watch, not sent again at once (remote_writes.py)."""
        kube = self._remotes.client(name)
        if kube is None:
            return True  # not connected: the worker's return brings the workload back
        try:
            await kube.create(
                WORKLOADS, remote_workload(wl, self.origin), namespace=namespace,
                time_limit=REMOTE_WRITE_TIMEOUT_SECONDS,
            )
        except Conflict:
            # Made by an earlier create (one whose answer was lost, or whose watch event has
            # not arrived yet).
            self.writes.succeeded(name)
            self.writes.unconfirmed(name, wl.key)
            return True
        except KubeError as exc:
            logger.warning("MultiKueue: Workload %s not copied to %s: %s", wl.key, name, exc)
            if exc.status == 0:
                self.writes.unconfirmed(name, wl.key)
            self.writes.failed(name, wl.key, exc)
            return False
        self.writes.succeeded(name)
        self.writes.unconfirmed(name, wl.key)
        self._events.record(
            wl.to_dict(), "Normal", "MultiKueue", f"Dispatched to worker cluster {name!r}"
        )
        if self._metrics is not None:
            self._metrics.multikueue_dispatched(_cluster_queue(wl), name)
        return True

    async def _ensure_remote_job(
        self, cluster: str, adapter: adapters.Adapter, local: Obj, workload: str, job_name: str
    ) -> bool:
        """The job on the winner; False when the worker failed the read or the create."""
        kube = self._remotes.client(cluster)
        if kube is None:
            return True
        namespace = (local.get("metadata") or {}).get("namespace") or "default"
        # From now on this kind's changes on the winner sync the workload (its status).
        self._remotes.watch(cluster, adapter.resource)
        try:
            # Read from the worker until the kind's watch has listed: a failed read is the
            # worker's failure too (this runs as a background write, its exception unseen).
            if await self._remote_object(
                cluster, kube, adapter.resource, job_name, namespace
            ) is not None:
                return True
            await kube.create(
                adapter.resource, adapter.remote_object(local, workload, self.origin),
                namespace=namespace, time_limit=REMOTE_WRITE_TIMEOUT_SECONDS,
            )
        except Conflict:
            return True
        except KubeError as exc:
            logger.warning("MultiKueue: %s %s/%s not created on %s: %s",
                           adapter.kind, namespace, job_name, cluster, exc)
            self.writes.failed(cluster, f"{namespace}/{workload}", exc)
            return False
        self.writes.succeeded(cluster)
        logger.info("MultiKueue: %s %s/%s created on %s", adapter.kind, namespace, job_name, cluster)
        return True

    async def _sync_status(
        self, cluster: str, adapter: adapters.Adapter, local: Obj, job_name: str, finished: bool
    ) -> None:
        kube = self._remotes.client(cluster)
        if kube is None:
            return
        namespace = (local.get("metadata") or {}).get("namespace") or "default"
        remote = await self._remote_object(cluster, kube, adapter.resource, job_name, namespace)
        if remote is None:
            return
        if adapter.status_update(local, remote, finished) is None:
            return

        def change(obj: Obj) -> Obj | None:
            status = adapter.status_update(obj, remote, finished)
            if status is None:
                return None
            return {**obj, "status": status}

        try:
            await self._kube.modify_status(adapter.resource, job_name, change, namespace=namespace)
        except KubeError as exc:
            logger.warning(
                "MultiKueue: status of %s %s/%s not copied from %s: %s",
                adapter.kind, namespace, job_name, cluster, exc,
            )

    async def _write_placement(self, wl: Workload, plan: mk.Plan) -> None:
        def change(obj: Obj) -> Obj | None:
            fresh = Workload.model_validate(obj)
            if fresh.status.admission is None:
                return None  # evicted meanwhile: dispatched afresh
            status = fresh.status
            before = (status.cluster_name, list(status.nominated_cluster_names))
            if plan.winner is not None and status.cluster_name is None:
                status.cluster_name = plan.winner
                status.nominated_cluster_names = []
            elif plan.nominate is not None and status.cluster_name is None:
                status.nominated_cluster_names = list(plan.nominate)
            if (status.cluster_name, list(status.nominated_cluster_names)) == before:
                return None
            return fresh.to_dict()

        await self._kube.modify_status(
            WORKLOADS, wl.name, change, namespace=wl.namespace or "default"
        )

    async def _delete_remote(
        self, cluster: str, workload: str, namespace: str, adapter: adapters.Adapter | None,
        job_name: str | None,
    ) -> bool:
        """Delete the job and the copy on worker ``cluster``; False when that failed."""
        kube = self._remotes.client(cluster)
        if kube is None:
            return True  # not connected: the garbage collector deletes them on its return
        try:
            if adapter is not None and job_name is not None:
                for name in await adapter.remote_names(kube, namespace, workload, job_name):
                    await kube.delete(
                        adapter.resource, name, namespace=namespace,
                        time_limit=REMOTE_WRITE_TIMEOUT_SECONDS,
                    )
            await kube.delete(
                WORKLOADS, workload, namespace=namespace, time_limit=REMOTE_WRITE_TIMEOUT_SECONDS
            )
        except KubeError as exc:
            logger.warning("MultiKueue: copies of %s/%s on %s not deleted: %s",
                           namespace, workload, cluster, exc)
            self.writes.failed(cluster, f"{namespace}/{workload}", exc)
            return False
        self.writes.succeeded(cluster)
        self.writes.confirmed(cluster, f"{namespace}/{workload}")  # gone on purpose
        return True

    async def cleanup(self, wl: Workload) -> None:
        """The workload finished or is evicted here: its copies go (on reachable workers; the
        garbage collector deletes the rest when their workers come back)."""
        self._rounds.pop(wl.metadata.uid or wl.key, None)
        self.writes.forget(wl.key)
        owner = _controller_owner(wl)
        adapter = adapters.adapter_for(owner[0], owner[1]) if owner is not None else None
        namespace = wl.namespace or "default"
        remotes = await self._read_remotes(wl, self._remotes.reachable())
        for name in mk.cleanup({n: r for n, (r, _) in remotes.items()}):
            await self._delete_remote(
                name, wl.name, namespace, adapter, owner[2] if owner is not None else None
            )


def remote_workload(wl: Workload, origin: str) -> Obj:
    """The copy of ``wl`` a worker gets: its spec, labels and annotations, this manager's
    origin label and ``wl``'s UID (Kueue's cloneForCreate)."""
    labels = dict(wl.metadata.labels or {})
    labels[ORIGIN_LABEL] = origin
    annotations = dict(wl.metadata.annotations or {})
    annotations[ORIGIN_UID_ANNOTATION] = wl.metadata.uid or ""
    return {
        "apiVersion": c.API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": wl.name,
            "namespace": wl.namespace or "default",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": wl.to_dict()["spec"],
    }


def _remote_view(remote: Workload) -> mk.Remote:
    admitted = remote.condition(c.ADMITTED)
    finished = remote.condition(c.FINISHED)
    evicted = remote.condition(c.EVICTED)
    return mk.Remote(
        quota_reserved=remote.has_quota_reservation,
        admitted_at=admitted.last_transition_time
        if admitted is not None and admitted.is_true else None,
        finished=(finished.reason, finished.message)
        if finished is not None and finished.is_true else None,
        evicted=evicted.message if evicted is not None and evicted.is_true else None,
    )


def _bind(fn: Callable[..., Awaitable[bool]], *args: Any) -> Callable[[], Awaitable[bool]]:
    """``fn(*args)``, called when the write starts (after its worker's turn comes)."""
    return lambda: fn(*args)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _cluster_queue(wl: Workload) -> str:
    return wl.status.admission.cluster_queue if wl.status.admission is not None else ""


def _controller_owner(wl: Workload) -> tuple[str, str, str] | None:
    """``(apiVersion, kind, name)`` of the object that controls ``wl``; else of its first owner
    (a pod group's Workload is owned by its pods, none controlling: the first stands for the
    group, whose pods the adapter finds from it)."""
    for ref in wl.metadata.owner_references:
        if ref.controller:
            return ref.api_version, ref.kind, ref.name
    for ref in wl.metadata.owner_references:
        return ref.api_version, ref.kind, ref.name
    return None
