"""ClusterQueue and LocalQueue status, the resource-in-use finalizer, and the queue metrics.

Keyed reconcilers over the informers' stores and the engine's view: ``cq:<name>``,
``lq:<ns>/<name>``, ``rf:<name>``. Status is written only when it changed. The
``kqueue.io/resource-in-use`` finalizer keeps a ClusterQueue or ResourceFlavor that admitted
workloads still use from vanishing under them; it is removed once nothing uses it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from kqueue.api.quantity import Quantity
from kqueue.api.v1alpha1 import (
    ClusterQueue,
    Cohort,
    Condition,
    FairSharingStatus,
    FlavorUsage,
    LocalQueue,
    LocalQueueAdmissionFairSharingStatus,
    LocalQueueFairSharingStatus,
    LocalQueueFlavorUsage,
    LocalQueueResourceUsage,
    ResourceFlavor,
    ResourceUsage,
    Workload,
    set_condition,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.informer import Store
from kqueue.controller.kube import Conflict, Kube, KubeError, NotFound
from kqueue.controller.metrics import ClusterQueueStatus, Metrics
from kqueue.controller.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    Resource,
)
from kqueue.controller.workqueue import Requeue
from kqueue.engine.engine import Engine
from kqueue.engine.types import (
    ClusterQueueName,
    CohortName,
    FlavorName,
    LocalQueueKey,
    ResourceName,
    Usage,
    WorkloadKey,
)

logger = logging.getLogger(__name__)

# A new ClusterQueue whose flavors are not known yet is looked at again after FLAVOR_GRACE_S,
# for up to FLAVOR_GRACE_WINDOW_S after its creation, before FlavorNotFound is reported.
FLAVOR_GRACE_S = 1.0
FLAVOR_GRACE_WINDOW_S = 5.0

Obj = dict[str, Any]

# Workloads by the LocalQueue they name (``namespace/queueName``): a LocalQueue's status reads
# its own workloads, not every workload of the cluster.
BY_LOCAL_QUEUE = "local-queue"


def local_queue_of(wl: Workload) -> list[str]:
    if not wl.spec.queue_name:
        return []
    return [f"{wl.namespace or 'default'}/{wl.spec.queue_name}"]


def _conditions_equal(a: list[Condition], b: list[Condition]) -> bool:
    def key(conds: list[Condition]) -> list[tuple[str, str, str, str]]:
        return sorted((x.type, x.status, x.reason, x.message) for x in conds)

    return key(a) == key(b)


class QueueStatusReconciler:
    def __init__(
        self,
        *,
        engine: Callable[[], Engine],
        cluster_queues: Store[ClusterQueue],
        local_queues: Store[LocalQueue],
        flavors: Store[ResourceFlavor],
        workloads: Store[Workload],
        kube: Kube,
        events: EventRecorder,
        metrics: Metrics,
        now: Now,
        resource_metrics: bool = False,
        cohorts: Store[Cohort] | None = None,
    ) -> None:
        self._cohorts = cohorts
        self._engine = engine
        self._cqs = cluster_queues
        self._lqs = local_queues
        self._flavors = flavors
        self._workloads = workloads
        workloads.add_index(BY_LOCAL_QUEUE, local_queue_of)
        self._kube = kube
        self._events = events
        self._metrics = metrics
        self._now = now
        self._resource_metrics = resource_metrics

    async def __call__(self, key: str, /) -> Requeue | None:
        kind, _, name = key.partition(":")
        if kind == "cq":
            return await self._cluster_queue(name)
        if kind == "lq":
            return await self._local_queue(name)
        if kind == "rf":
            return await self._flavor(name)
        if kind == "co":
            return await self._cohort(name)
        return None

    # -- Cohort ----------------------------------------------------------------------------------

    async def _cohort(self, name: str) -> Requeue | None:
        """A Cohort's status is its fair-sharing share (nothing without fair sharing)."""
        co = self._cohorts.get(name) if self._cohorts is not None else None
        if co is None:
            self._metrics.forget_cohort(name)
            return None
        share = self._engine().cohort_share(CohortName(name))
        want = FairSharingStatus(weighted_share=share.rounded()) if share is not None else None
        if share is not None:
            self._metrics.report_cohort_weighted_share(name, share.precise())
        if co.status.fair_sharing == want:
            return None
        new = _with_status_copy(co)
        new.status.fair_sharing = want
        return await self._put_status(COHORTS, new.to_dict(), None)

    # -- ClusterQueue ----------------------------------------------------------------------------

    def cluster_queue_active(self, cq: ClusterQueue) -> tuple[str, str, str]:
        """(status, reason, message) of the Active condition, with Kueue's reasons."""
        if cq.metadata.deletion_timestamp is not None:
            return "False", c.CLUSTER_QUEUE_ACTIVE_TERMINATING, (
                "Can't admit new workloads; clusterQueue is terminating"
            )
        missing = sorted(
            {fq.name for rg in cq.spec.resource_groups for fq in rg.flavors}
            - set(self._flavors)
        )
        if missing:
            return "False", c.CLUSTER_QUEUE_ACTIVE_FLAVOR_NOT_FOUND, (
                "Can't admit new workloads: references missing ResourceFlavor(s): "
                + ", ".join(missing)
            )
        if cq.spec.stop_policy not in (None, "None"):
            return "False", c.CLUSTER_QUEUE_ACTIVE_STOPPED, (
                f"Can't admit new workloads: ClusterQueue is stopped (stopPolicy "
                f"{cq.spec.stop_policy}); set stopPolicy to None to resume"
            )
        inactive = self._engine().inactive(ClusterQueueName(cq.name))
        if inactive is not None:
            if inactive.cause:
                # Kueue's wording of the ClusterQueue's own condition (AdmissionCheckNotFound,
                # AdmissionCheckInactive); the engine's message names the queue for workloads.
                detail = inactive.message.split(" is inactive: ", 1)[-1]
                return "False", inactive.cause, f"Can't admit new workloads: {detail}"
            return "False", c.CLUSTER_QUEUE_ACTIVE_UNKNOWN, inactive.message
        return "True", c.CLUSTER_QUEUE_ACTIVE_READY, "Can admit new workloads"

    def _just_created(self, cq: ClusterQueue) -> bool:
        created = cq.metadata.creation_timestamp
        if created is None or cq.status.conditions:
            return False
        return (self._now() - created).total_seconds() < FLAVOR_GRACE_WINDOW_S

    async def _cluster_queue(self, name: str) -> Requeue | None:
        cq = self._cqs.get(name)
        if cq is None:
            self._metrics.forget_cluster_queue(name)
            return None
        engine = self._engine()
        cq_name = ClusterQueueName(name)
        active, parked = engine.pending_counts(cq_name)
        reserving = engine.reserving(cq_name)
        usage = engine.usage(cq_name)
        status, reason, message = self.cluster_queue_active(cq)
        if reason == c.CLUSTER_QUEUE_ACTIVE_FLAVOR_NOT_FOUND and self._just_created(cq):
            # Flavors and ClusterQueues applied together (one manifest) reach kqueue through
            # separate watches, the queue often first: look again before calling it missing.
            return Requeue(after=FLAVOR_GRACE_S)
        new = _with_status_copy(cq)
        st = new.status
        now = self._now()
        set_condition(st.conditions, c.ACTIVE, status, reason, message, now, cq.metadata.generation)  # type: ignore[arg-type]
        afs_condition = self._admission_fair_sharing_condition(cq, engine)
        if afs_condition is None:
            st.conditions = [x for x in st.conditions if x.type != c.ADMISSION_FAIR_SHARING]
        else:
            set_condition(st.conditions, c.ADMISSION_FAIR_SHARING, *afs_condition, now, cq.metadata.generation)  # type: ignore[arg-type]
        st.pending_workloads = active + parked
        st.reserving_workloads = len(reserving)
        st.admitted_workloads = len(reserving)
        st.flavors_reservation = self._flavor_usage(cq, usage)
        st.flavors_usage = self._flavor_usage(cq, usage)
        share = engine.cluster_queue_share(cq_name)
        st.fair_sharing = (
            FairSharingStatus(weighted_share=share.rounded()) if share is not None else None
        )
        if share is not None:
            self._metrics.report_cluster_queue_weighted_share(
                name, cq.spec.cohort_name or "", share.precise()
            )
        self._report(cq, active, parked, len(reserving), usage, status, reason)
        self._metrics.report_cluster_queue(cq, engine, resources=self._resource_metrics)
        finalizer_patch = self._finalizer_patch(
            new.metadata.finalizers,
            deleting=cq.metadata.deletion_timestamp is not None,
            in_use=bool(reserving),
            resource_version=cq.metadata.resource_version,
        )
        if finalizer_patch is not None:
            try:
                await self._kube.patch(CLUSTER_QUEUES, name, finalizer_patch)
            except NotFound:
                return None
            except KubeError as exc:
                logger.info("ClusterQueue %s finalizer: %s", name, exc)
                return Requeue()
        old = cq.status
        if (
            _conditions_equal(old.conditions, st.conditions)
            and old.pending_workloads == st.pending_workloads
            and old.reserving_workloads == st.reserving_workloads
            and old.admitted_workloads == st.admitted_workloads
            and old.flavors_reservation == st.flavors_reservation
            and old.flavors_usage == st.flavors_usage
            and old.fair_sharing == st.fair_sharing
        ):
            return None
        before = next((x for x in old.conditions if x.type == c.ACTIVE), None)
        if before is None or (before.status, before.reason) != (status, reason):
            self._events.record(
                cq.to_dict(), "Normal" if status == "True" else "Warning", reason, message
            )
        afs_before = next((x for x in old.conditions if x.type == c.ADMISSION_FAIR_SHARING), None)
        if (
            afs_condition is not None
            and afs_condition[0] == "False"
            and (afs_before is None or afs_before.status != "False")
        ):
            self._events.record(cq.to_dict(), "Warning", afs_condition[1], afs_condition[2])
        return await self._put_status(CLUSTER_QUEUES, new.to_dict(), None)

    def _admission_fair_sharing_condition(
        self, cq: ClusterQueue, engine: Engine
    ) -> tuple[str, str, str] | None:
        """The AdmissionFairSharing condition: present only while spec.admissionScope asks for
        usage-based admission. Kueue silently orders such a ClusterQueue as usual when its
        Configuration has no admissionFairSharing; kqueue says so."""
        scope = cq.spec.admission_scope
        if scope is None or scope.admission_mode != c.USAGE_BASED_ADMISSION_FAIR_SHARING:
            return None
        if engine.uses_admission_fair_sharing(ClusterQueueName(cq.name)):
            return "True", c.ADMISSION_FAIR_SHARING_ENABLED, (
                "Heads are taken from the LocalQueue with the lowest weighted usage first"
            )
        return "False", c.ADMISSION_FAIR_SHARING_NOT_CONFIGURED, (
            "spec.admissionScope.admissionMode is UsageBasedAdmissionFairSharing, but the "
            "controller Configuration has no admissionFairSharing: heads are ordered by priority "
            "and creation time. Set admissionFairSharing in the Configuration, or remove "
            "spec.admissionScope"
        )

    def _flavor_usage(self, cq: ClusterQueue, usage: Usage) -> list[FlavorUsage]:
        out: list[FlavorUsage] = []
        for rg in cq.spec.resource_groups:
            for fq in rg.flavors:
                resources = []
                for r in fq.resources:
                    used = usage.get((FlavorName(fq.name), ResourceName(r.name)), 0)
                    nominal = r.nominal()
                    resources.append(
                        ResourceUsage(
                            name=r.name,
                            total=Quantity.from_units(used, r.name),
                            borrowed=Quantity.from_units(max(used - nominal, 0), r.name),
                        )
                    )
                out.append(FlavorUsage(name=fq.name, resources=resources))
        return out

    def _report(
        self,
        cq: ClusterQueue,
        active: int,
        parked: int,
        reserving: int,
        usage: Usage,
        status: str,
        reason: str,
    ) -> None:
        m = self._metrics
        m.report_pending(cq.name, active, parked, queue_active=status == "True")
        m.report_active_workloads(cq.name, reserving, reserving)
        cq_status: ClusterQueueStatus = (
            "active" if status == "True"
            else "terminating" if reason == c.CLUSTER_QUEUE_ACTIVE_TERMINATING
            else "pending"
        )
        m.report_cluster_queue_status(cq.name, cq_status)
        if not self._resource_metrics:
            return  # per flavor/resource series only when enableClusterQueueResources is on
        for rg in cq.spec.resource_groups:
            for fq in rg.flavors:
                for r in fq.resources:
                    m.report_cluster_queue_quotas(
                        cohort=cq.spec.cohort_name,
                        cluster_queue=cq.name,
                        flavor=fq.name,
                        resource=r.name,
                        nominal=r.nominal(),
                        borrowing_limit=r.borrowing(),
                        lending_limit=r.lending(),
                    )
                    used = usage.get((FlavorName(fq.name), ResourceName(r.name)), 0)
                    m.report_cluster_queue_usage(
                        cohort=cq.spec.cohort_name,
                        cluster_queue=cq.name,
                        flavor=fq.name,
                        resource=r.name,
                        reserved=used,
                        used=used,
                    )

    @staticmethod
    def _finalizer_patch(
        finalizers: list[str], *, deleting: bool, in_use: bool, resource_version: str | None
    ) -> Obj | None:
        has = c.RESOURCE_IN_USE_FINALIZER in finalizers
        if not deleting and not has:
            new = [*finalizers, c.RESOURCE_IN_USE_FINALIZER]
        elif deleting and has and not in_use:
            new = [f for f in finalizers if f != c.RESOURCE_IN_USE_FINALIZER]
        else:
            return None
        # The resourceVersion makes the list replacement conditional on what we read.
        return {"metadata": {"finalizers": new, "resourceVersion": resource_version}}

    # -- ResourceFlavor --------------------------------------------------------------------------

    async def _flavor(self, name: str) -> Requeue | None:
        rf = self._flavors.get(name)
        if rf is None:
            return None
        in_use = self._engine().uses_flavor(name)
        patch = self._finalizer_patch(
            rf.metadata.finalizers,
            deleting=rf.metadata.deletion_timestamp is not None,
            in_use=in_use,
            resource_version=rf.metadata.resource_version,
        )
        if patch is None:
            return None
        try:
            await self._kube.patch(RESOURCE_FLAVORS, name, patch)
        except NotFound:
            return None
        except KubeError as exc:
            logger.info("ResourceFlavor %s finalizer: %s", name, exc)
            return Requeue()
        return None

    # -- LocalQueue ------------------------------------------------------------------------------

    async def _local_queue(self, key: str) -> Requeue | None:
        lq = self._lqs.get(key)
        if lq is None:
            return None
        engine = self._engine()
        lq_key = LocalQueueKey(key)
        pending = 0
        holding = []
        for wl in self._workloads.by_index(BY_LOCAL_QUEUE, key):
            wl_key = WorkloadKey(wl.key)
            info = engine.pending_workload(wl_key)
            if info is not None and info.local_queue == lq_key:
                pending += 1
                continue
            aw = engine.admitted_workload(wl_key)
            if aw is not None and aw.info.local_queue == lq_key:
                holding.append(aw)
        usage: Usage = {}
        for aw in holding:
            for fr, v in aw.usage.items():
                usage[fr] = usage.get(fr, 0) + v
        cq = self._cqs.get(lq.spec.cluster_queue or "")
        if lq.spec.stop_policy not in (None, "None"):
            status, reason, message = "False", c.LOCAL_QUEUE_ACTIVE_STOPPED, (
                "Can't submit new workloads to clusterQueue: LocalQueue is stopped"
            )
        elif cq is None:
            status, reason, message = "False", c.LOCAL_QUEUE_CLUSTER_QUEUE_DOES_NOT_EXIST, (
                f"Can't submit new workloads to clusterQueue: ClusterQueue "
                f"{lq.spec.cluster_queue} does not exist"
            )
        elif self.cluster_queue_active(cq)[0] != "True":
            status, reason, message = "False", c.LOCAL_QUEUE_CLUSTER_QUEUE_IS_INACTIVE, (
                f"Can't submit new workloads to clusterQueue: ClusterQueue {cq.name} is inactive"
            )
        else:
            status, reason, message = "True", c.LOCAL_QUEUE_ACTIVE_READY, (
                "Can submit new workloads to localQueue"
            )
        self._metrics.report_local_queue(lq, status, self._workloads.by_index(BY_LOCAL_QUEUE, key), engine)
        new = _with_status_copy(lq)
        st = new.status
        set_condition(st.conditions, c.ACTIVE, status, reason, message, self._now(), lq.metadata.generation)  # type: ignore[arg-type]
        st.pending_workloads = pending
        st.reserving_workloads = len(holding)
        st.admitted_workloads = len(holding)
        flavors: dict[str, list[LocalQueueResourceUsage]] = {}
        for (flavor, resource), amount in sorted(usage.items()):
            flavors.setdefault(flavor, []).append(
                LocalQueueResourceUsage(name=resource, total=Quantity.from_units(amount, resource))
            )
        st.flavors_reservation = [
            LocalQueueFlavorUsage(name=f, resources=r) for f, r in sorted(flavors.items())
        ]
        st.flavors_usage = list(st.flavors_reservation)
        again = self._admission_fair_sharing_status(lq, lq_key, engine, st.fair_sharing)
        if again is not None:
            st.fair_sharing = again[0]
        old = lq.status
        if (
            _conditions_equal(old.conditions, st.conditions)
            and old.pending_workloads == st.pending_workloads
            and old.reserving_workloads == st.reserving_workloads
            and old.admitted_workloads == st.admitted_workloads
            and old.flavors_reservation == st.flavors_reservation
            and old.fair_sharing == st.fair_sharing
        ):
            return Requeue(after=again[1]) if again is not None else None
        result = await self._put_status(LOCAL_QUEUES, new.to_dict(), lq.namespace)
        if result is None and again is not None:
            return Requeue(after=again[1])
        return result

    def _admission_fair_sharing_status(
        self,
        lq: LocalQueue,
        key: LocalQueueKey,
        engine: Engine,
        current: LocalQueueFairSharingStatus | None,
    ) -> tuple[LocalQueueFairSharingStatus | None, float] | None:
        """``status.fairSharing`` of a LocalQueue of an admission-fair-sharing ClusterQueue,
        and when to look again (the sampling interval: Kueue's LocalQueue reconciler samples the
        decayed usage that often); None when the ClusterQueue does not use it."""
        cq = ClusterQueueName(lq.spec.cluster_queue or "")
        config = engine.admission_fair_sharing
        if config is None or not engine.uses_admission_fair_sharing(cq):
            return None
        # The sampling runs here as well as in the scheduling cycle, so that the usage decays
        # (and the status follows) while nothing is scheduled.
        engine.sample_fair_usage(self._now())
        usage = engine.local_queue_fair_usage(key)
        self._metrics.report_local_queue_admission_fair_sharing_usage(lq, cq, usage.precise())
        interval = config.usage_sampling_interval.total_seconds()
        consumed = engine.local_queue_consumed(key)
        if consumed is None:
            return current, interval
        amounts, last_update = consumed
        status = LocalQueueAdmissionFairSharingStatus(
            consumed_resources={
                str(r): Quantity.from_nanos(n) for r, n in sorted(amounts.items())
            },
            last_update=last_update,
        )
        weighted = current.weighted_share if current is not None else 0
        return (
            LocalQueueFairSharingStatus(
                weighted_share=weighted, admission_fair_sharing_status=status
            ),
            interval,
        )

    async def _put_status(
        self, resource: Resource, body: Obj, namespace: str | None
    ) -> Requeue | None:
        # A whole-status PUT with the resourceVersion read: counters that drop to zero are
        # written too (a merge patch of omitted-when-empty fields would leave them), and a
        # concurrent change makes it fail and retry with fresh data.
        try:
            # The answer is not read: the informer brings the object written.
            await self._kube.write_status(resource, body, namespace=namespace)
        except NotFound:
            return None
        except Conflict:
            return Requeue(after=0.2)
        return None


_Q = TypeVar("_Q", Cohort, ClusterQueue, LocalQueue)


def _with_status_copy(obj: _Q) -> _Q:
    """A copy of ``obj`` whose status may be changed in place; metadata and spec are shared
    with the informer's object (only read here), so they are not deep-copied on every write."""
    return obj.model_copy(update={"status": obj.status.model_copy(deep=True)})
