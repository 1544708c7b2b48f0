"""Admission checks: two-phase admission and kqueue's built-in check controllers
(docs/admission-checks.md).

:class:`AdmissionChecks` wires them into the manager: the AdmissionCheck and
ProvisioningRequestConfig (and MultiKueueConfig, MultiKueueCluster) informers' events, the engine's view of each check, and the
leader's two work queues (workloads' check states, built-in checks' Active condition).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Final

from kqueue.api import config as cfgmod
from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    ClusterQueue,
    MultiKueueCluster,
    MultiKueueConfig,
    ProvisioningRequestConfig,
    ResourceFlavor,
    Workload,
)
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME as MULTIKUEUE
from kqueue.controller.admission_checks.framework import CheckController
from kqueue.controller.admission_checks.multikueue.clusters import RemoteClusters
from kqueue.controller.admission_checks.multikueue.controller import MultiKueueController
from kqueue.controller.admission_checks.multikueue.gc import GarbageCollector
from kqueue.controller.admission_checks.provisioning.controller import (
    ProvisioningController,
    checks_using,
)
from kqueue.controller.admission_checks.status import CheckStatus, feed
from kqueue.controller.admission_checks.workload_checks import WorkloadChecks
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Informer
from kqueue.controller.kube import Kube
from kqueue.controller.metrics import Metrics
from kqueue.controller.workqueue import WorkQueue, run_workers
from kqueue.engine.engine import Engine
from kqueue.engine.from_api import (
    admission_check_delegates,
    admission_check_inactive,
    admission_check_provisions,
)
from kqueue.engine.tas.delayed import DELAYED_READY, PodSetUpdate
from kqueue.engine.types import Admission as EngineAdmission
from kqueue.engine.types import WorkloadKey

__all__ = ["AdmissionChecks", "CheckController"]

# Workloads whose checks are synced at once. A sync waits on other clusters (MultiKueue's
# workers, a ProvisioningRequest) far more than it computes: with 4, a 10-worker MultiKueue run
# placed 26 of 1,000 workloads in 12 minutes while the manager used 5% of a core
# (docs/benchmarks.md section 12).
WORKLOAD_CHECK_WORKERS: Final = 16


class AdmissionChecks:
    """The admission-check machinery of one manager."""

    def __init__(
        self,
        *,
        engine: Callable[[], Engine],
        checks: Informer[AdmissionCheck],
        configs: Informer[ProvisioningRequestConfig],
        workloads: Informer[Workload],
        cluster_queues: Informer[ClusterQueue],
        flavors: Informer[ResourceFlavor],
        kube: Kube,
        events: EventRecorder,
        releases_itself: Callable[[Workload], bool],
        trigger: Callable[[], None],
        now: Now,
        metrics: Metrics | None = None,
        mk_configs: Informer[MultiKueueConfig] | None = None,
        mk_clusters: Informer[MultiKueueCluster] | None = None,
        multikueue: cfgmod.MultiKueue | None = None,
        namespace: str = cfgmod.DEFAULT_NAMESPACE,
    ) -> None:
        self._engine = engine
        self._checks = checks
        self._configs = configs
        self._workloads = workloads
        self._trigger = trigger
        provisioning = ProvisioningController(
            configs=configs.store, flavors=flavors.store, kube=kube, events=events,
            cluster_queues=cluster_queues.store,
        )
        self.controllers: dict[str, CheckController] = {
            provisioning.controller_name: provisioning
        }
        self._mk_configs = mk_configs
        self._mk_clusters = mk_clusters
        self.remote_clusters: RemoteClusters | None = None
        self._gc: GarbageCollector | None = None
        self._mkc: MultiKueueController | None = None
        if mk_configs is not None and mk_clusters is not None:
            settings = multikueue or cfgmod.MultiKueue()
            self.remote_clusters = RemoteClusters(
                clusters=mk_clusters.store, kube=kube, namespace=namespace, now=now,
                on_change=lambda _name: self._on_multikueue(),
                origin=settings.origin, on_copy=self._on_remote_copy,
            )
            mkc = MultiKueueController(
                configs=mk_configs.store, clusters=mk_clusters.store, checks=checks.store,
                remotes=self.remote_clusters, kube=kube, events=events, settings=settings,
                metrics=metrics,
            )
            self.controllers[mkc.controller_name] = mkc
            self._mkc = mkc
            self._gc = GarbageCollector(
                remotes=self.remote_clusters, workloads=workloads.store, origin=settings.origin,
                interval=settings.gc_interval.total_seconds(),
            )
            for inf in (mk_configs, mk_clusters):
                inf.add_handler(
                    on_add=self._on_multikueue_object, on_update=self._on_multikueue_object,
                    on_delete=self._on_multikueue_object,
                )
        self.workload_queue: WorkQueue[str] = WorkQueue("admission-checks")
        self.status_queue: WorkQueue[str] = WorkQueue("admission-check-status")
        self.workload_checks = WorkloadChecks(
            workloads=workloads.store,
            cluster_queues=cluster_queues.store,
            checks=checks.store,
            controllers=self.controllers,
            kube=kube,
            events=events,
            releases_itself=releases_itself,
            now=now,
            metrics=metrics,
            second_pass=self._second_pass,
        )
        self.status = CheckStatus(
            checks=checks.store, controllers=self.controllers, kube=kube, now=now
        )
        checks.add_handler(
            on_add=self._on_check, on_update=self._on_check, on_delete=self._on_check_delete
        )
        configs.add_handler(
            on_add=self._on_config, on_update=self._on_config, on_delete=self._on_config
        )
        workloads.add_handler(
            on_add=self._on_workload, on_update=self._on_workload, on_delete=self._on_workload
        )

    def _second_pass(
        self, wl: Workload, updates: Sequence[PodSetUpdate]
    ) -> EngineAdmission | str | None:
        """The engine's second pass for ``wl``'s delayed topology requests, on the nodes that
        match the Ready checks' ``updates``; when an earlier pass placed it but its write did
        not land (the engine holds the placement, the API still says Pending), that placement
        again."""
        engine = self._engine()
        key = WorkloadKey(wl.key)
        got = engine.place_delayed(key, updates)
        if got is None:
            held = engine.admitted_workload(key)
            if held is not None and any(
                ps.delayed_topology == DELAYED_READY for ps in held.admission.pod_sets
            ):
                return held.admission
        return got

    # -- events ------------------------------------------------------------------------------

    def _on_check(self, key: str, ac: AdmissionCheck, *rest: AdmissionCheck) -> None:
        new = rest[-1] if rest else ac
        self._engine().upsert_admission_check(
            new.name, admission_check_inactive(new), provisions=admission_check_provisions(new),
            delegates=admission_check_delegates(new),
        )
        self.status_queue.add(key)
        self._enqueue_workloads(new.name)
        self._trigger()

    def _on_check_delete(self, key: str, ac: AdmissionCheck) -> None:
        self._engine().delete_admission_check(ac.name)
        self._enqueue_workloads(ac.name)
        self._trigger()

    def _on_config(self, _: str, prc: ProvisioningRequestConfig, *rest: Any) -> None:
        for name in checks_using(prc.name, self._checks.store.objects()):
            self.status_queue.add(name)
            self._enqueue_workloads(name)

    def _on_multikueue_object(self, *_: Any) -> None:
        self._on_multikueue()

    def _on_multikueue(self) -> None:
        """A MultiKueueConfig or MultiKueueCluster changed (or a worker connected or was
        lost): the MultiKueue checks' Active condition, and their workloads."""
        for ac in self._checks.store.objects():
            if ac.spec.controller_name == MULTIKUEUE:
                self.status_queue.add(ac.name)
                self._enqueue_workloads(ac.name)

    def _on_remote_copy(self, key: str) -> None:
        """A worker's copy of Workload ``key`` (or its job there) changed: its checks."""
        if key in self._workloads.store:
            self.workload_queue.add(key)

    def _on_workload(self, key: str, wl: Workload, *rest: Workload) -> None:
        new = rest[-1] if rest else wl
        if new.status.admission is not None or new.status.admission_checks:
            self.workload_queue.add(key)

    def _enqueue_workloads(self, check: str) -> None:
        for wl in self._workloads.store.objects():
            if wl.admission_check(check) is not None or wl.status.admission is not None:
                self.workload_queue.add(wl.key)

    # -- the manager's hooks -------------------------------------------------------------------

    def rebuild(self, engine: Engine) -> None:
        feed(engine, self._checks.store)

    def informers(self) -> dict[str, Informer[Any]]:
        out: dict[str, Informer[Any]] = {
            "admissionchecks": self._checks, "provisioningrequestconfigs": self._configs
        }
        if self._mk_configs is not None and self._mk_clusters is not None:
            out["multikueueconfigs"] = self._mk_configs
            out["multikueueclusters"] = self._mk_clusters
        return out

    async def run(self) -> None:
        """The leader's work: every check's status, every workload's checks, then events."""
        for key in self._checks.store:
            self.status_queue.add(key)
        for wl in self._workloads.store.objects():
            self._on_workload(wl.key, wl)
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(run_workers(self.status_queue, self.status, workers=1))
                tasks.create_task(run_workers(
                    self.workload_queue, self.workload_checks, workers=WORKLOAD_CHECK_WORKERS
                ))
                if self.remote_clusters is not None:
                    tasks.create_task(self.remote_clusters.run())
                if self._gc is not None:
                    tasks.create_task(self._gc.run())
        finally:
            if self._mkc is not None:
                # MultiKueue's writes still in flight on the workers end with the term.
                await self._mkc.writes.close()
