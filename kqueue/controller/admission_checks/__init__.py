"""Admission checks: two-phase admission and kqueue's built-in check controllers
(docs/admission-checks.md).

:class:`AdmissionChecks` wires them into the manager: the AdmissionCheck and
ProvisioningRequestConfig informers' events, the engine's view of each check, and the
leader's two work queues (workloads' check states, built-in checks' Active condition).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    ClusterQueue,
    ProvisioningRequestConfig,
    ResourceFlavor,
    Workload,
)
from kqueue.controller.admission_checks.framework import CheckController
from kqueue.controller.admission_checks.provisioning.controller import ProvisioningController
from kqueue.controller.admission_checks.status import CheckStatus, feed
from kqueue.controller.admission_checks.workload_checks import WorkloadChecks
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Informer
from kqueue.controller.kube import Kube
from kqueue.controller.metrics import Metrics
from kqueue.controller.workqueue import WorkQueue, run_workers
from kqueue.engine.engine import Engine
from kqueue.engine.from_api import admission_check_inactive

__all__ = ["AdmissionChecks", "CheckController"]


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
    ) -> None:
        self._engine = engine
        self._checks = checks
        self._configs = configs
        self._workloads = workloads
        self._trigger = trigger
        provisioning = ProvisioningController(
            configs=configs.store, flavors=flavors.store, kube=kube, events=events
        )
        self.controllers: dict[str, CheckController] = {
            provisioning.controller_name: provisioning
        }
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

    # -- events ------------------------------------------------------------------------------

    def _on_check(self, key: str, ac: AdmissionCheck, *rest: AdmissionCheck) -> None:
        new = rest[-1] if rest else ac
        self._engine().upsert_admission_check(new.name, admission_check_inactive(new))
        self.status_queue.add(key)
        self._enqueue_workloads(new.name)
        self._trigger()

    def _on_check_delete(self, key: str, ac: AdmissionCheck) -> None:
        self._engine().delete_admission_check(ac.name)
        self._enqueue_workloads(ac.name)
        self._trigger()

    def _on_config(self, _: str, prc: ProvisioningRequestConfig, *rest: Any) -> None:
        for ac in self._checks.store.objects():
            params = ac.spec.parameters
            if params is not None and params.name == prc.name:
                self.status_queue.add(ac.name)
                self._enqueue_workloads(ac.name)

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
        return {"admissionchecks": self._checks, "provisioningrequestconfigs": self._configs}

    async def run(self) -> None:
        """The leader's work: every check's status, every workload's checks, then events."""
        for key in self._checks.store:
            self.status_queue.add(key)
        for wl in self._workloads.store.objects():
            self._on_workload(wl.key, wl)
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(run_workers(self.status_queue, self.status, workers=1))
            tasks.create_task(run_workers(self.workload_queue, self.workload_checks, workers=4))
