"""The controller manager: informers, engine, scheduler, reconcilers, webhooks, probes.

Every replica lists and watches (so a standby's caches and engine are warm), serves the admission
webhooks, the probes and the metrics. Only the leader schedules and writes status:

1. Start the probe and metrics servers and the webhook server.
2. Start the informers; dicts become models once, here, and feed the engine as they change.
3. Wait until every informer has synced: the engine then holds every admission recorded in
   Workload status, so no quota is given twice after a restart.
4. Campaign for the Lease. On winning, rebuild the engine from the stores (dropping any
   assumption left from an earlier term), then run the scheduler loop, the job reconcilers and
   the queue status reconciler until leadership ends.
5. On cancellation (SIGTERM, Ctrl-C): stop the leader's work, release the Lease, stop serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from kqueue.api import feature_gates as fg
from kqueue.api.config import Configuration
from kqueue.api.integrations import PriorityClasses, PriorityResolver
from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    MultiKueueCluster,
    MultiKueueConfig,
    ProvisioningRequestConfig,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
    parse_object,
)
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller import engine_feed
from kqueue.controller.admission_checks import AdmissionChecks
from kqueue.controller.claim_templates import (
    BY_CLAIM_TEMPLATE,
    ClaimTemplates,
    claim_template_keys,
    object_spec,
    template_spec,
)
from kqueue.controller.clock import Now, utc_now
from kqueue.controller.collector import collector_paused, freeze_heap
from kqueue.controller.delegated_auth import DelegatedAuth
from kqueue.controller.engine_feed import LimitRangeDoc
from kqueue.controller.events import EventRecorder
from kqueue.controller.gang import GangPlacement
from kqueue.controller.gang_disruption import GangDisruptionWatcher
from kqueue.controller.informer import Informer, Obj, as_dict
from kqueue.controller.integrations import (
    ComposableJob,
    Framework,
    GenericJob,
    IntegrationContext,
    registry,
)
from kqueue.controller.integrations.management import Management
from kqueue.controller.integrations.owners import BY_OWNER, object_index_key, owner_uids
from kqueue.controller.integrations.reconciler import JobReconciler
from kqueue.controller.integrations.release import PodReleaser
from kqueue.controller.kube import Kube
from kqueue.controller.leader import LeaderElector
from kqueue.controller.metrics import Metrics, Probes, health_app, serve_app
from kqueue.controller.node_fit import NodeFitHold
from kqueue.controller.node_health import NodeHealth, placed_nodes
from kqueue.controller.pinned_pods import pinned_node
from kqueue.controller.ratelimit import background
from kqueue.controller.readiness import BY_ANY_OWNER, ReadinessWatcher, any_owner_uids
from kqueue.controller.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    DEVICE_CLASSES,
    LIMIT_RANGES,
    LOCAL_QUEUES,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    NAMESPACES,
    PODS,
    PRIORITY_CLASSES,
    PROVISIONING_REQUEST_CONFIGS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
    RESOURCE_SLICES,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Resource,
)
from kqueue.controller.scheduler import Scheduler
from kqueue.controller.secure_metrics import serve_metrics
from kqueue.controller.start_forecast import StartForecaster
from kqueue.controller.status import QueueStatusReconciler
from kqueue.controller.supervisor import Supervisor
from kqueue.controller.topology import TopologyFeed
from kqueue.controller.visibility_api import serve_visibility
from kqueue.controller.webhook_server import WebhookServer
from kqueue.controller.webhook_server.certs import CertRotator
from kqueue.controller.webhooks import register as register_webhooks
from kqueue.controller.webhooks.config import MUTATING_NAME, VALIDATING_NAME
from kqueue.controller.webhooks.multikueue import uses_multikueue
from kqueue.controller.workload_feed import Repair, WorkloadFeed
from kqueue.controller.workload_reader import WorkloadReader
from kqueue.controller.workqueue import WorkQueue, run_workers
from kqueue.engine import from_api
from kqueue.engine.dra import DeviceClaims, counter_sources, device_class_view
from kqueue.engine.engine import Engine
from kqueue.engine.preemption.seam import Preemptor
from kqueue.engine.readiness import PodsReadyConfig
from kqueue.engine.types import (
    ClusterQueueName,
    WorkloadKey,
    local_queue_key,
)

logger = logging.getLogger(__name__)


M = TypeVar("M")

# LocalQueues by the ClusterQueue they submit to.
_BY_CLUSTER_QUEUE = "cluster-queue"

# How often the leader re-reconciles everything, as a safety net for a missed event.
RESYNC_SECONDS = 60.0
# How often the engine's workloads are compared with the Workload store (workload_feed.py):
# about 80 ms per 10,000 Workloads, in slices (docs/reliability.md, "Dropped connections").
WORKLOAD_RESYNC_SECONDS = 30.0
# Workloads compared per slice of a resync, between which the event loop runs other work.
RESYNC_SLICE = 1000
# A term's heap is frozen once its first queue statuses are written, or after this long.
SETTLE_HEAP_WITHIN = 10.0


def _converter(cls: type[M]) -> Callable[[Obj], M]:
    def convert(doc: Obj) -> M:
        # Objects in the API passed the webhook and the schema: only the types are read here.
        obj = parse_object(doc, validate=False)
        if not isinstance(obj, cls):
            raise TypeError(f"expected a {cls.__name__}, got {type(obj).__name__}")
        return obj

    return convert


def _constant(claims: DeviceClaims | None) -> Callable[[str], DeviceClaims] | None:
    """The same claims for every namespace (DRA off: refusing), or None (claims ignored)."""
    return None if claims is None else lambda _namespace: claims


def _owner_job_key(obj: Obj | Workload, kind: str) -> str | None:
    if isinstance(obj, Workload):
        refs = [r.model_dump(by_alias=True) for r in obj.metadata.owner_references]
        namespace = obj.namespace
    else:
        meta = obj.get("metadata") or {}
        refs = meta.get("ownerReferences") or []
        namespace = meta.get("namespace")
    for ref in refs:
        if ref.get("controller") and ref.get("kind") == kind:
            return f"{namespace}/{ref.get('name')}"
    return None


class Manager:
    """One replica of the kqueue controller."""

    def __init__(
        self,
        api: ApiClient,
        config: Configuration,
        *,
        metrics: Metrics | None = None,
        preemptor: Callable[[], Preemptor] | None = None,
        identity: str | None = None,
        now: Now = utc_now,
    ) -> None:
        self.api = api
        self.config = config
        self.kube = Kube(api)
        self.metrics = metrics if metrics is not None else Metrics()
        self.events = EventRecorder(self.kube, instance=identity)
        self.probes = Probes()
        self.supervisor = Supervisor()
        self._preemptor = preemptor
        self._now = now
        self.engine = self._new_engine()
        self.identity = identity
        self.leading = False
        self._terms = 0  # leadership terms begun by this process
        # The collector's pause while the caches are first filled or a term's engine is built,
        # until the heap is frozen (run, lead, _settle_heap).
        self._heap_pause = contextlib.ExitStack()

        def informer(resource: Any, converter: Callable[[Obj], M], **kw: Any) -> Informer[M]:
            return Informer(self.kube, resource, converter=converter, **kw)

        self.flavors = informer(RESOURCE_FLAVORS, _converter(ResourceFlavor))
        self.cluster_queues = informer(CLUSTER_QUEUES, _converter(ClusterQueue))
        self.cohorts = informer(COHORTS, _converter(Cohort))
        self.local_queues = informer(LOCAL_QUEUES, _converter(LocalQueue))
        self.workload_priority_classes = informer(
            WORKLOAD_PRIORITY_CLASSES, _converter(WorkloadPriorityClass)
        )
        # Workload events mostly change the status: the reader reuses the spec it read last.
        self.workload_reader = WorkloadReader()
        self.workloads = informer(WORKLOADS, self.workload_reader)
        # DRA quota (claim_templates.py): with DeviceClass mappings, the ResourceClaimTemplates
        # that size the Workloads' device claims.
        # KueueDRAIntegration off: nothing is read, and claims are refused or ignored.
        dra_on = from_api.dra_on(config)
        classes = config.resources.device_classes() if dra_on else {}
        counters = counter_sources(config.resources) if dra_on else {}
        self.claim_templates: Informer[Mapping[str, Any]] | None = None
        # Partitionable devices: the counters drivers publish, the classes' selectors.
        self.resource_slices: Informer[Mapping[str, Any]] | None = None
        self.device_classes: Informer[Mapping[str, Any]] | None = None
        if classes:
            self.claim_templates = informer(RESOURCE_CLAIM_TEMPLATES, template_spec)
            self.workloads.store.add_index(BY_CLAIM_TEMPLATE, claim_template_keys)
            # The extended resources DeviceClasses serve, and their selectors.
            self.device_classes = informer(DEVICE_CLASSES, device_class_view)
        if counters:
            self.resource_slices = informer(RESOURCE_SLICES, object_spec)
        # Workload events into the engine, kept converged with the API (workload_feed.py).
        self.workload_feed = WorkloadFeed(
            lambda: self.engine,
            self.workloads.store,
            claims=(
                ClaimTemplates(
                    self.claim_templates.store,
                    classes,
                    counters,
                    self.resource_slices.store if self.resource_slices else None,
                    self.device_classes.store if self.device_classes else None,
                    extended_resources=fg.gate(
                        config.feature_gates, fg.KUEUE_DRA_EXTENDED_RESOURCE
                    ),
                )
                if self.claim_templates is not None
                else _constant(from_api.dra_off_claims(config))
            ),
        )
        # Predicted start times, recomputed off the admission path (start_forecast.py).
        self.start_forecast = StartForecaster(
            lambda: self.engine, config.predicted_start, now=now
        )
        self.namespaces = informer(NAMESPACES, as_dict)
        # Only what admission reads of a LimitRange: (namespace, name, Container/Pod items).
        self.limit_ranges = informer(LIMIT_RANGES, from_api.limit_range)
        self.priority_classes = informer(PRIORITY_CLASSES, as_dict)
        self.pods = informer(PODS, as_dict, label_selector=f"{c.MANAGED_LABEL}=true")
        # Topology-aware scheduling: Topologies, Nodes and bound Pods for the engine.
        self.topology = TopologyFeed(
            informer, lambda: self.engine, self._topology_changed, self._node_lost,
            self._check_nodes_of,
        )
        self.workloads.store.add_index(BY_OWNER, owner_uids)
        self.local_queues.store.add_index(
            _BY_CLUSTER_QUEUE, lambda lq: [lq.spec.cluster_queue] if lq.spec.cluster_queue else []
        )

        # The enabled integrations; those driven by the generic reconciler get an informer on
        # their kind (listing only objects that name a queue, unless unlabelled ones count).
        self.frameworks: list[Framework] = registry.enabled(config.integrations.frameworks)
        self.generic_jobs: dict[str, GenericJob] = {
            fw.name: job for fw in self.frameworks if (job := fw.job_for(config)) is not None
        }
        # Pods by the UID of every object they belong to: their controller, and the top-level
        # object of each integration that claims them (pods of a child Job).
        self.pods.store.add_index(BY_OWNER, self._pod_owner_uids)
        self.objects: dict[str, Informer[Obj]] = {}
        # A composable kind's members are pods, read from the pod informer (no informer of its
        # own); its jobs are keyed by owner_of_pod of any member.
        self.composed: dict[str, ComposableJob] = {
            name: job for name, job in self.generic_jobs.items() if isinstance(job, ComposableJob)
        }
        for fw in self.frameworks:
            if fw.job is None or fw.name in self.composed:
                continue
            generic = self.generic_jobs[fw.name]
            self.objects[fw.name] = informer(
                generic.resource,
                as_dict,
                label_selector=generic.label_selector(
                    without_queue_name=config.manage_jobs_without_queue_name
                ),
            )

        # Kinds an integration builds its Workloads from (runtimes it names): one informer
        # per kind, shared by the frameworks that watch it.
        self.watched: dict[Resource, Informer[Obj]] = {}
        for fw in self.frameworks:
            for resource in fw.watches:
                if resource not in self.watched:
                    self.watched[resource] = informer(resource, as_dict)

        self.scheduler = Scheduler(
            engine=lambda: self.engine,
            workloads=self.workloads.store,
            kube=self.kube,
            events=self.events,
            metrics=self.metrics,
            releases_itself=self._releases_itself,
            on_changed=self._queues_changed,
            on_written=self.workload_feed.written,
            now=now,
        )
        self.status_queue: WorkQueue[str] = WorkQueue("queue-status")
        self.status = QueueStatusReconciler(
            engine=lambda: self.engine,
            cluster_queues=self.cluster_queues.store,
            local_queues=self.local_queues.store,
            flavors=self.flavors.store,
            workloads=self.workloads.store,
            kube=self.kube,
            events=self.events,
            metrics=self.metrics,
            now=now,
            resource_metrics=config.metrics.enable_cluster_queue_resources,
            cohorts=self.cohorts.store,
        )
        # Nodes lost (and back) under admitted topology-aware workloads, per Workload key.
        self.node_health_queue: WorkQueue[str] = WorkQueue("node-health")
        self.node_health = NodeHealth(
            workloads=self.workloads.store,
            nodes=self.topology.nodes.store,
            kube=self.kube,
            events=self.events,
            now=now,
            engine=lambda: self.engine,
            pods=self.topology.pods.store,
            # Kueue's TASFailedNodeReplacement: off, a lost node is only reported.
            replace=fg.gate(config.feature_gates, fg.TAS_FAILED_NODE_REPLACEMENT),
            taints=fg.gate(config.feature_gates, fg.TAS_REPLACE_NODE_ON_NODE_TAINTS),
            flavors=self.flavors.store,
            # A Workload's pods, to fail those pinned to a node they cannot get.
            pods_of=lambda wl: self._readiness.pods_of(wl),
        )
        self.releaser = PodReleaser(kube=self.kube, metrics=self.metrics, now=now)
        # Whole-gang placement by kube-scheduler, when the cluster serves it (run() discovers).
        self.gang = GangPlacement(
            kube=self.kube, events=self.events, now=now, mode=config.gang_scheduling,
            topology=config.topology_hand_off,
        )
        # The node-fit guard: gangs held until their pods fit on the nodes (node_fit.py).
        self.node_fit = NodeFitHold(
            engine=lambda: self.engine, kube=self.kube, events=self.events, now=now
        )
        self.job_queues: dict[str, WorkQueue[str]] = {}
        self.job_reconcilers: dict[str, JobReconciler] = {}
        for fw in self.frameworks:
            if fw.job is None:
                continue
            self.job_queues[fw.name] = WorkQueue(f"jobs/{fw.name}")
            self.job_reconcilers[fw.name] = JobReconciler(
                job=self.generic_jobs[fw.name],
                objects=(
                    self.pods.store if fw.name in self.composed else self.objects[fw.name].store
                ),
                workloads=self.workloads.store,
                pods=self.pods.store,
                flavors=self.flavors.store,
                priorities=self.priority_resolver,
                kube=self.kube,
                events=self.events,
                releaser=self.releaser,
                now=now,
                management=Management.from_config(config),
                namespaces=self.namespaces.store,
                local_queues=self.local_queues.store,
                parent_kinds=self._parent_kinds(fw),
                metrics=self.metrics,
                gang=self.gang,
                engine=lambda: self.engine,
                node_fit=self.node_fit,
            )
            self.job_reconcilers[fw.name].requeue = self.job_queues[fw.name].add

        self.webhook_server = WebhookServer(
            cert_dir=Path(config.webhook.cert_dir),
            host=config.webhook.host,
            port=config.webhook.port,
            observe=self.metrics.webhook_request,
        )
        register_webhooks(
            self.webhook_server,
            config,
            local_queues=self._local_queue_names,
            gang=lambda: self.gang.enabled,
            per_size_groups=lambda: self.gang.per_size_groups,
            read_group=self.gang.read_group,
            kube=self.kube,
            events=self.events,
            multikueue_queue=self._multikueue_queue,
        )
        self._runners: list[web.AppRunner] = []
        self.health_port: int | None = None
        self.metrics_port: int | None = None
        self.visibility_port: int | None = None
        self._synced = asyncio.Event()
        self._wire_handlers()
        # Work only the leader runs next to the scheduler: waitForPodsReady, and what the
        # integrations add through their context.
        self.leader_tasks: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._install_readiness()
        self._install_integrations()
        self._install_admission_checks()

    # -- the engine's inputs -------------------------------------------------------------------

    def _new_engine(self) -> Engine:
        return Engine(
            preemptor=self._preemptor() if self._preemptor is not None else None,
            pods_ready=self._pods_ready(),
            fair_sharing=from_api.fair_sharing(self.config.fair_sharing),
            admission_fair_sharing=from_api.admission_fair_sharing(
                self.config.admission_fair_sharing
            ),
            node_fit_guard=self.config.node_fit_guard == "Gangs",
            preemption_protection=from_api.preemption_protection(
                self.config.preemption_protection
            ),
            gates=from_api.feature_gates(self.config),
            quota_resources=from_api.quota_resources(self.config),
        )

    def _pods_ready(self) -> PodsReadyConfig | None:
        return PodsReadyConfig.from_config(self.config.wait_for_pods_ready)

    def priority_resolver(self) -> PriorityResolver:
        return PriorityClasses.from_objects(
            self.workload_priority_classes.store.objects(), self.priority_classes.store.objects()
        )

    def _install_readiness(self) -> None:
        """waitForPodsReady: feeds pod readiness to the engine and writes ``PodsReady``."""
        self.workloads.store.add_index(BY_ANY_OWNER, any_owner_uids)
        readiness = ReadinessWatcher(
            engine=lambda: self.engine,
            workloads=self.workloads.store,
            pods=self.pods.store,
            kube=self.kube,
            events=self.events,
            trigger=self.scheduler.trigger,
            now=self._now,
            pod_owner_keys=self._pod_owner_uids,
            metrics=self.metrics,
        )
        self._readiness = readiness
        self.workloads.add_handler(
            on_add=readiness.on_workload,
            on_update=readiness.on_workload,
            on_delete=readiness.on_workload,
        )
        self.pods.add_handler(on_add=readiness.on_pod, on_update=readiness.on_pod)
        self.scheduler.after_cycle.append(readiness.after_cycle)
        self.leader_tasks.append(readiness.run)
        # A gang kube-scheduler preempted a pod of is evicted whole (gang_disruption.py).
        disruption = GangDisruptionWatcher(
            workloads=self.workloads.store,
            workloads_of_pod=readiness.workloads_of,
            pods_of=readiness.pods_of,
            kube=self.kube,
            events=self.events,
            now=self._now,
        )
        self.pods.add_handler(on_add=disruption.on_pod, on_update=disruption.on_pod)
        self.leader_tasks.append(disruption.run)

    def _install_admission_checks(self) -> None:
        """Two-phase admission: AdmissionChecks, ProvisioningRequestConfigs, the built-in
        check controllers (controller/admission_checks)."""
        self.admission_checks = AdmissionChecks(
            engine=lambda: self.engine,
            checks=Informer(self.kube, ADMISSION_CHECKS, converter=_converter(AdmissionCheck)),
            configs=Informer(
                self.kube, PROVISIONING_REQUEST_CONFIGS,
                converter=_converter(ProvisioningRequestConfig),
            ),
            workloads=self.workloads,
            cluster_queues=self.cluster_queues,
            flavors=self.flavors,
            kube=self.kube,
            events=self.events,
            releases_itself=self._releases_itself,
            trigger=self.scheduler.trigger,
            now=self._now,
            metrics=self.metrics,
            mk_configs=Informer(
                self.kube, MULTIKUEUE_CONFIGS, converter=_converter(MultiKueueConfig)
            ),
            mk_clusters=Informer(
                self.kube, MULTIKUEUE_CLUSTERS, converter=_converter(MultiKueueCluster)
            ),
            multikueue=self.config.multi_kueue,
            namespace=self.config.namespace,
        )
        self.leader_tasks.append(self.admission_checks.run)

    def integration_context(self) -> IntegrationContext:
        """What an integration's ``install`` may use: public parts of this manager only."""
        return IntegrationContext(
            config=self.config,
            engine=lambda: self.engine,
            workloads=self.workloads,
            pods=self.pods,
            flavors=self.flavors.store,
            priorities=self.priority_resolver,
            kube=self.kube,
            events=self.events,
            metrics=self.metrics,
            now=self._now,
            releaser=self.releaser,
            trigger=self.scheduler.trigger,
            watched={resource: inf.store for resource, inf in self.watched.items()},
            gang=self.gang,
        )

    def _install_integrations(self) -> None:
        ctx = self.integration_context()
        for fw in self.frameworks:
            if fw.install is not None:
                fw.install(ctx, self.job_reconcilers.get(fw.name))
        self.leader_tasks.extend(ctx.leader_tasks)
        for hook in ctx.after_cycle:
            self.scheduler.after_cycle.append(hook)
        logger.info(
            "integrations enabled: %s", ", ".join(fw.name for fw in self.frameworks) or "none"
        )

    def _local_queue_names(self, namespace: str) -> list[str] | None:
        """For admission warnings; None until the cache has synced (it would mislead)."""
        if not self.local_queues.has_synced:
            return None
        return [lq.name for lq in self.local_queues.store.objects() if lq.namespace == namespace]

    def _multikueue_queue(self, namespace: str, queue: str) -> bool:
        """For the job webhooks' managedBy defaulting (controller/webhooks/multikueue.py)."""
        return uses_multikueue(
            namespace, queue,
            local_queues=self.local_queues.store,
            cluster_queues=self.cluster_queues.store,
            checks=self.admission_checks.informers()["admissionchecks"].store,
        )

    def _pod_owner_uids(self, pod: Obj) -> list[str]:
        keys = owner_uids(pod)
        for name, generic in self.generic_jobs.items():
            if name in self.composed:
                continue  # its jobs are not objects pods are owned by
            owner = generic.owner_of_pod(pod)
            if owner is not None:
                keys.append(object_index_key(generic.kind, owner))
        return keys

    def _parent_kinds(self, fw: Framework) -> frozenset[tuple[str, str]]:
        """Kinds of the other enabled integrations: an object of ``fw``'s kind that one of them
        controls (its child Jobs) is queued through its parent, never on its own."""
        return frozenset((f.api_version, f.kind) for f in self.frameworks if f is not fw)

    def _releases_itself(self, wl: Workload) -> bool:
        """A Workload no enabled integration runs is released as soon as it is evicted."""
        return not any(fw.owns(wl) for fw in self.frameworks)

    def rebuild_engine(self) -> Engine:
        """A fresh engine fed from the stores: admissions come from Workload status only."""
        engine = engine_feed.rebuild(
            self._new_engine(),
            [
                (engine_feed.FLAVORS, self.flavors.store.objects()),
                (engine_feed.COHORTS, self.cohorts.store.objects()),
                (engine_feed.CLUSTER_QUEUES, self.cluster_queues.store.objects()),
                (engine_feed.LOCAL_QUEUES, self.local_queues.store.objects()),
                (engine_feed.PRIORITY_CLASSES, self.workload_priority_classes.store.objects()),
                (engine_feed.NAMESPACES, self.namespaces.store.objects()),
                (engine_feed.LIMIT_RANGES, self.limit_ranges.store.objects()),
            ],
        )
        self.topology.rebuild(engine)
        for pod in self.pods.store.objects():
            self.node_fit.apply(engine, pod)
        self.admission_checks.rebuild(engine)
        # With the pod sets the handlers computed for these very specs (they depend on the spec
        # alone): a term's first rebuild over a large backlog would otherwise read every spec.
        self.workload_feed.rebuild(engine)
        self.engine = engine
        return engine

    def _node_lost(self, node: str, what: str) -> None:
        """A node went away, stopped being Ready or was cordoned: each admitted workload with
        pods placed on it gets the node in status.unhealthyNodes, TopologyNodesReady=False and a
        Warning event (``node_health``; it reads the node's state itself, ``what`` is for the
        log)."""
        logger.info("node %s %s", node, what)
        self._check_nodes_of(node)

    def _check_nodes_of(self, node: str) -> None:
        if not self.leading:
            return
        for wl in self.workloads.store.objects():
            if wl.status.admission is None or wl.is_finished:
                continue
            if node in placed_nodes(wl) or any(n.name == node for n in wl.status.unhealthy_nodes):
                self.node_health_queue.add(wl.key)

    def _topology_changed(self) -> None:
        # A node, Topology or freed pod may make room for a pending workload, or a held one.
        self.node_fit.wake()
        if self.leading:
            self.scheduler.trigger()

    def _wire_handlers(self) -> None:
        self.topology.wire()
        def on_flavor(_: str, rf: ResourceFlavor, *rest: ResourceFlavor) -> None:
            new = rest[-1] if rest else rf
            engine_feed.FLAVORS.upsert(self.engine, new)
            self.status_queue.add(f"rf:{new.name}")
            self._enqueue_all_queues()
            self.scheduler.trigger()

        def on_flavor_delete(_: str, rf: ResourceFlavor) -> None:
            engine_feed.FLAVORS.delete(self.engine, rf)
            self._enqueue_all_queues()
            self.scheduler.trigger()

        self.flavors.add_handler(on_add=on_flavor, on_update=on_flavor, on_delete=on_flavor_delete)

        def on_cq(_: str, cq: ClusterQueue, *rest: ClusterQueue) -> None:
            new = rest[-1] if rest else cq
            engine_feed.CLUSTER_QUEUES.upsert(self.engine, new)
            self._queues_changed([ClusterQueueName(new.name)])
            self.scheduler.trigger()

        def on_cq_delete(_: str, cq: ClusterQueue) -> None:
            engine_feed.CLUSTER_QUEUES.delete(self.engine, cq)
            self._queues_changed([ClusterQueueName(cq.name)])
            self.scheduler.trigger()

        self.cluster_queues.add_handler(on_add=on_cq, on_update=on_cq, on_delete=on_cq_delete)

        def on_cohort(_: str, co: Cohort, *rest: Cohort) -> None:
            new_co = rest[-1] if rest else co
            engine_feed.COHORTS.upsert(self.engine, new_co)
            self.status_queue.add(f"co:{new_co.name}")
            # A cohort change (a new parent, a cycle made or broken) can change every queue's
            # Active condition, not only what fits: refresh their status too.
            self._enqueue_all_queues()
            self.scheduler.trigger()

        def on_cohort_delete(_: str, co: Cohort) -> None:
            engine_feed.COHORTS.delete(self.engine, co)
            self.status_queue.add(f"co:{co.name}")
            self._enqueue_all_queues()
            self.scheduler.trigger()

        self.cohorts.add_handler(on_add=on_cohort, on_update=on_cohort, on_delete=on_cohort_delete)

        def on_lq(key: str, lq: LocalQueue, *rest: LocalQueue) -> None:
            new = rest[-1] if rest else lq
            engine_feed.LOCAL_QUEUES.upsert(self.engine, new)
            self.status_queue.add(f"lq:{key}")
            self.scheduler.trigger()

        def on_lq_delete(key: str, lq: LocalQueue) -> None:
            engine_feed.LOCAL_QUEUES.delete(self.engine, lq)
            self.metrics.forget_local_queue(key)
            self.scheduler.trigger()

        self.local_queues.add_handler(on_add=on_lq, on_update=on_lq, on_delete=on_lq_delete)

        def on_wpc(_: str, wpc: WorkloadPriorityClass, *rest: WorkloadPriorityClass) -> None:
            engine_feed.PRIORITY_CLASSES.upsert(self.engine, rest[-1] if rest else wpc)
            self._enqueue_all_jobs()
            self.scheduler.trigger()

        def on_wpc_delete(_: str, wpc: WorkloadPriorityClass) -> None:
            engine_feed.PRIORITY_CLASSES.delete(self.engine, wpc)
            self.scheduler.trigger()

        self.workload_priority_classes.add_handler(
            on_add=on_wpc, on_update=on_wpc, on_delete=on_wpc_delete
        )

        def on_ns(_: str, ns: Obj, *rest: Obj) -> None:
            engine_feed.NAMESPACES.upsert(self.engine, rest[-1] if rest else ns)
            self.scheduler.trigger()

        def on_ns_delete(_: str, ns: Obj) -> None:
            engine_feed.NAMESPACES.delete(self.engine, ns)

        self.namespaces.add_handler(on_add=on_ns, on_update=on_ns, on_delete=on_ns_delete)

        def on_limit_range(_: str, lr: LimitRangeDoc, *rest: LimitRangeDoc) -> None:
            engine_feed.LIMIT_RANGES.upsert(self.engine, rest[-1] if rest else lr)
            self.scheduler.trigger()

        def on_limit_range_delete(_: str, lr: LimitRangeDoc) -> None:
            engine_feed.LIMIT_RANGES.delete(self.engine, lr)
            self.scheduler.trigger()

        self.limit_ranges.add_handler(
            on_add=on_limit_range, on_update=on_limit_range, on_delete=on_limit_range_delete
        )

        def on_claim_template(key: str, *_: Any) -> None:
            # The Workloads naming it are sized again (a claim refused as missing may count now).
            for wl_key in self.workloads.store.keys_by_index(BY_CLAIM_TEMPLATE, [key]):
                self.workload_feed.reapply(wl_key)
            self.scheduler.trigger()

        if self.claim_templates is not None:
            self.claim_templates.add_handler(
                on_add=on_claim_template, on_update=on_claim_template, on_delete=on_claim_template
            )

        def resize_pending(keys: list[str]) -> None:
            # An admitted Workload keeps the quota it was admitted with, as in Kueue.
            for wl_key in keys:
                wl = self.workloads.store.get(wl_key)
                if wl is not None and wl.status.admission is None:
                    self.workload_feed.reapply(wl_key)
            self.scheduler.trigger()

        def on_slice(*_: Any) -> None:
            # Published counters size the claims of the Workloads that name a template.
            templates = self.claim_templates.store if self.claim_templates else ()
            resize_pending(self.workloads.store.keys_by_index(BY_CLAIM_TEMPLATE, templates))

        def on_device_class(*_: Any) -> None:
            # Selectors size claims, and the extended resources a class serves any container's
            # requests: every pending Workload (DeviceClasses seldom change).
            resize_pending(list(self.workloads.store))

        if self.resource_slices is not None:
            self.resource_slices.add_handler(on_add=on_slice, on_update=on_slice, on_delete=on_slice)
        if self.device_classes is not None:
            self.device_classes.add_handler(
                on_add=on_device_class, on_update=on_device_class, on_delete=on_device_class
            )
        self.priority_classes.add_handler(
            on_add=lambda *_: self._enqueue_all_jobs(),
            on_update=lambda *_: self._enqueue_all_jobs(),
        )

        def on_wl(key: str, wl: Workload, *rest: Workload) -> None:
            new = rest[-1] if rest else wl
            old = wl if rest else None
            self.workload_feed.apply(key, new)
            # A topology assignment taken or given back changes what the node-fit guard reads.
            self.node_fit.wake()
            if self.leading:
                self.metrics.workload_changed(old, new)
            self._forecast_observed(old, new)
            self._workload_changed(new, old)

        def on_wl_delete(key: str, wl: Workload) -> None:
            self.workload_reader.forget(key)
            self.workload_feed.delete(key)
            self.node_fit.wake()
            self.start_forecast.observe(wl, None)
            self._workload_changed(wl, None)

        self.workloads.add_handler(on_add=on_wl, on_update=on_wl, on_delete=on_wl_delete)

        for name, informer in self.objects.items():
            queue = self.job_queues[name]
            informer.add_handler(
                on_add=lambda key, _obj, q=queue: q.add(key),
                on_update=lambda key, _old, _new, q=queue: q.add(key),
                on_delete=lambda key, _obj, q=queue: q.add(key),
            )

        for fw in self.frameworks:
            if fw.job is None or not fw.watches:
                continue

            def requeue_all(*_: Any, name: str = fw.name) -> None:
                for key in self.objects[name].store:
                    self.job_queues[name].add(key)

            for resource in fw.watches:
                self.watched[resource].add_handler(
                    on_add=requeue_all, on_update=requeue_all, on_delete=requeue_all
                )

        def on_pod(_: str, pod: Obj, *rest: Obj) -> None:
            for name, generic in self.generic_jobs.items():
                owner = generic.owner_of_pod(rest[-1] if rest else pod)
                if owner is not None:
                    self.job_queues[name].add(owner)

        self.pods.add_handler(on_add=on_pod, on_update=on_pod, on_delete=on_pod)

        def on_pinned_pod(_: str, pod: Obj, *rest: Obj) -> None:
            # A released pod waiting for its node: node_health looks whether it can get it
            # (Kueue's node controller is queued by such pods too).
            new = rest[-1] if rest else pod
            if self.leading and pinned_node(new) is not None:
                for wl in self._readiness.workloads_of(new):
                    self.node_health_queue.add(wl.key)

        self.pods.add_handler(on_add=on_pinned_pod, on_update=on_pinned_pod)
        self.pods.add_handler(
            on_add=self.node_fit.on_pod,
            on_update=self.node_fit.on_pod,
            on_delete=self.node_fit.on_pod_delete,
        )

    def _workload_changed(self, wl: Workload, old: Workload | None) -> None:
        for fw in self.frameworks:
            if fw.job is None:
                continue
            composed = self.composed.get(fw.name)
            if composed is not None:
                # The job of the members the Workload is owned by (a pod group's pods).
                for ref in wl.metadata.owner_references:
                    member = self.pods.store.get(f"{wl.namespace or 'default'}/{ref.name}")
                    key = composed.owner_of_pod(member) if ref.kind == fw.kind and member else None
                    if key is not None:
                        self.job_queues[fw.name].add(key)
                continue
            job_key = _owner_job_key(wl, fw.kind)
            if job_key is not None:
                self.job_queues[fw.name].add(job_key)
        cqs: set[ClusterQueueName] = set()
        for w in (wl, old):
            if w is not None and w.status.admission is not None:
                cqs.add(ClusterQueueName(w.status.admission.cluster_queue))
                # A flavor being deleted waits for its last user: check it again.
                for psa in w.status.admission.pod_set_assignments:
                    for flavor in set(psa.flavors.values()):
                        self.status_queue.add(f"rf:{flavor}")
        if wl.spec.queue_name:
            lq_key = local_queue_key(wl.namespace or "default", wl.spec.queue_name)
            lq = self.engine.local_queue(lq_key)
            if lq is not None:
                cqs.add(lq.cluster_queue)
            self.status_queue.add(f"lq:{lq_key}")
        self._queues_changed(sorted(cqs))
        self.scheduler.trigger()

    def _queues_changed(self, cqs: Iterable[ClusterQueueName]) -> None:
        cq_set = set(cqs)
        for cq in sorted(cq_set):
            self.status_queue.add(f"cq:{cq}")
        if self.config.fair_sharing is not None and cq_set:
            # Any usage change moves the shares of every cohort above it (few objects).
            for co in self.cohorts.store:
                self.status_queue.add(f"co:{co}")
        # Through the index (in key order, as a scan of the store would give): this runs on
        # every Workload event.
        store = self.local_queues.store
        for key in store.keys_by_index(_BY_CLUSTER_QUEUE, cq_set):
            lq = store.get(key)
            if lq is not None:
                self.status_queue.add(f"lq:{lq.key}")

    def _enqueue_all_queues(self) -> None:
        self._queues_changed(ClusterQueueName(k) for k in self.cluster_queues.store)

    def _enqueue_all_jobs(self) -> None:
        for name, informer in self.objects.items():
            for key in informer.store:
                self.job_queues[name].add(key)
        for name, composed in self.composed.items():
            for pod in self.pods.store.objects():
                job_key = composed.owner_of_pod(pod)
                if job_key is not None:
                    self.job_queues[name].add(job_key)

    def _enqueue_everything(self) -> None:
        self._enqueue_all_jobs()
        self._enqueue_all_queues()
        for key in self.flavors.store:
            self.status_queue.add(f"rf:{key}")
        for key in self.local_queues.store:
            self.status_queue.add(f"lq:{key}")
        for key in self.cohorts.store:
            self.status_queue.add(f"co:{key}")
        # A node lost while no replica led is noticed here (and on every resync).
        for wl in self.workloads.store.objects():
            if wl.status.unhealthy_nodes or (not wl.is_finished and placed_nodes(wl)):
                self.node_health_queue.add(wl.key)

    # -- running -------------------------------------------------------------------------------

    def informers(self) -> dict[str, Informer[Any]]:
        named: dict[str, Informer[Any]] = {
            "resourceflavors": self.flavors,
            "cohorts": self.cohorts,
            "clusterqueues": self.cluster_queues,
            "localqueues": self.local_queues,
            "workloadpriorityclasses": self.workload_priority_classes,
            "namespaces": self.namespaces,
            "limitranges": self.limit_ranges,
            "priorityclasses": self.priority_classes,
            "pods": self.pods,
            **self.topology.informers(),
            **self.admission_checks.informers(),
            **({"resourceclaimtemplates": self.claim_templates} if self.claim_templates else {}),
            **({"resourceslices": self.resource_slices} if self.resource_slices else {}),
            **({"deviceclasses": self.device_classes} if self.device_classes else {}),
            # Workloads last: the queues they name are known when they arrive.
            "workloads": self.workloads,
        }
        for name, informer in self.objects.items():
            named[f"integration/{name}"] = informer
        for resource, informer in self.watched.items():
            named[f"watched/{resource.group}/{resource.plural}"] = informer
        return named

    def _forecast_observed(self, old: Workload | None, new: Workload) -> None:
        """The forecaster's history and triggers; at an admission, how far its prediction was
        from the actual time (the leader's metric)."""
        self.start_forecast.observe(old, new)
        reserved = new.quota_reserved_at
        if old is None or old.status.admission is not None or reserved is None:
            return
        if new.status.admission is None:
            return
        error_s = self.start_forecast.admitted(WorkloadKey(new.key), reserved)
        if error_s is not None and self.leading:
            self.metrics.start_prediction_error(new.status.admission.cluster_queue, error_s)

    def _synced_check(self) -> tuple[bool, str]:
        waiting = [n for n, i in self.informers().items() if not i.has_synced]
        if waiting:
            return False, "informers not synced: " + ", ".join(waiting)
        return True, f"{len(self.informers())} informers synced"

    async def _serve_probes(self) -> None:
        self.probes.add_liveness_check("supervisor", lambda: (True, "running"))
        self.probes.add_readiness_check("informers", self._synced_check)
        self.probes.add_readiness_check("webhooks", self.webhook_server.check)
        self.probes.add_readiness_check("tasks", self.supervisor.check)
        health = await serve_app(health_app(self.probes), self.config.health.bind_address)
        # TokenReviews and SubjectAccessReviews are not leader writes: a client without the
        # leadership's write deadline, so standbys answer their callers too.
        auth = DelegatedAuth(Kube(self.api))
        metrics = await serve_metrics(self.metrics, self.config.metrics, auth)
        visibility = await serve_visibility(
            lambda: self.engine,
            self.config.visibility,
            auth,
            self.config.namespace,
            self.start_forecast.estimates if self.config.predicted_start.enable else None,
        )
        if visibility is not None:
            self._runners.append(visibility)
            self.visibility_port = int(visibility.addresses[0][1])
        if health is not None:
            self._runners.append(health)
            self.health_port = int(health.addresses[0][1])
        if metrics is not None:
            self._runners.append(metrics)
            self.metrics_port = int(metrics.addresses[0][1])

    async def run(self) -> None:
        """Run until cancelled; cancellation is the graceful shutdown."""
        try:
            await self._serve_probes()
            if self.config.internal_cert_management.enable:
                rotator = CertRotator(
                    self.api,
                    namespace=self.config.namespace,
                    secret_name=self.config.internal_cert_management.webhook_secret_name,
                    service_name=self.config.internal_cert_management.webhook_service_name,
                    cert_dir=Path(self.config.webhook.cert_dir),
                    webhook_configurations=[
                        ("MutatingWebhookConfiguration", MUTATING_NAME),
                        ("ValidatingWebhookConfiguration", VALIDATING_NAME),
                    ],
                )
                await rotator.ensure()
                self.probes.add_readiness_check("certificates", rotator.check)
                self.supervisor.spawn("certificates", rotator.run, restart="always")
            await self.gang.discover()
            await self.webhook_server.start()
            self.supervisor.spawn("webhook-certs", self.webhook_server.watch_certs, restart="always")
            # The initial lists build what this process keeps for its life: no automatic
            # collections over that growing heap (collector_paused), one freeze once it is
            # built. Without leader election the term starts right away and ends the pause once
            # its engine is rebuilt and its queue statuses written; a standby ends it itself
            # after a lease's time (see _settle_heap).
            self._heap_pause.enter_context(collector_paused())
            for name, informer in self.informers().items():
                self.supervisor.spawn(f"informer/{name}", informer.run, restart="always")
            self.supervisor.spawn("events", self.events.run, restart="always")
            if self.config.predicted_start.enable:
                self.supervisor.spawn(
                    "start-forecast", self.start_forecast.run, restart="always"
                )
            for informer in self.informers().values():
                await informer.wait_synced()
            le = self.config.leader_election
            if le.leader_elect:
                self.supervisor.spawn(
                    "settle-heap",
                    lambda: self._settle_heap_after(le.lease_duration.total_seconds()),
                    restart="on-failure",
                )
            self._synced.set()
            logger.info(
                "caches synced: %d workloads, %d ClusterQueues; %d hold quota",
                len(self.workloads.store),
                len(self.cluster_queues.store),
                sum(1 for w in self.workloads.store.objects() if w.status.admission is not None),
            )
            if le.leader_elect:
                # A standby reports 0, so "no replica leads" is visible (sum == 0).
                self.metrics.leader_status(le.resource_name, leading=False)
                elector = LeaderElector.from_config(
                    self.api,
                    self.config,
                    identity=self.identity,
                    on_started_leading=self.lead,
                )
                self.probes.add_liveness_check("leader-election", elector.check)
                # No write outlives the leadership it was issued under (leader.py).
                self.kube.write_deadline = elector.write_deadline
                self.supervisor.spawn("leader-election", elector.run, restart="always")
                await asyncio.Event().wait()
            else:
                await self.lead()
        finally:
            await self._shutdown()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def lead(self) -> None:
        """The leader's work: schedule, reconcile, write status, until cancelled."""
        self.leading = True
        self.metrics.leader_status(self.config.leader_election.resource_name, leading=True)
        # No automatic collections while the engine is rebuilt: the heap is frozen once it is,
        # after the queues' first statuses (see _settle_heap_when_counted).
        self._heap_pause.enter_context(collector_paused())
        try:
            if self.config.leader_election.leader_elect or self._terms:
                # A standby's caches are only as fresh as its watches, and a watch may lag
                # behind admissions the previous leader wrote: rebuilding from them could
                # over-commit quota. A consistent list first (a term right after the initial
                # sync needs none).
                await self.workloads.relist()
            self._terms += 1
            engine = self.rebuild_engine()
            holding, pending = engine.workload_counts()
            logger.info(
                "leading: engine rebuilt with %d workloads holding quota, %d pending",
                holding,
                pending,
            )
            self._enqueue_everything()
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self.scheduler.run(), name="scheduler")
                with background():  # queue status: the client's background lane
                    tasks.create_task(
                        run_workers(self.status_queue, self.status, workers=2),
                        name="queue-status",
                    )
                    tasks.create_task(
                        run_workers(self.node_health_queue, self.node_health, workers=1),
                        name="node-health",
                    )
                for name, queue in self.job_queues.items():
                    tasks.create_task(
                        run_workers(queue, self.job_reconcilers[name], workers=8),
                        name=f"jobs/{name}",
                    )
                tasks.create_task(self._resync(), name="resync")
                tasks.create_task(self._resync_workloads(), name="resync-workloads")
                tasks.create_task(self._settle_heap_when_counted(), name="settle-heap")
                for task in self.leader_tasks:
                    tasks.create_task(task(), name=getattr(task, "__name__", "extension"))
                self.scheduler.trigger()
        finally:
            self._heap_pause.close()  # a term ended before its heap was frozen
            self.leading = False
            self.metrics.leader_status(self.config.leader_election.resource_name, leading=False)

    def _settle_heap(self) -> None:
        """Freeze the heap (:func:`freeze_heap`) and end the collector's pause."""
        freeze_heap()
        self._heap_pause.close()

    async def _settle_heap_when_counted(self) -> None:
        """Freeze the term's heap once the queue statuses (their pending counts) are written.

        The freeze is one full collection over every Workload and the engine: seconds over a
        large backlog, holding the event loop. Kueue publishes pending counts before any
        per-workload work; so does this, and the freeze waits for them (at most
        SETTLE_HEAP_WITHIN seconds, the collector paused meanwhile)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SETTLE_HEAP_WITHIN):
                await asyncio.sleep(0)  # the status workers take their first keys
                await self.status_queue.wait_idle()
        self._settle_heap()

    async def _settle_heap_after(self, seconds: float) -> None:
        """A replica that has not begun a term soon after its caches synced (a standby) freezes
        its heap itself; a term begun meanwhile has done it with its engine."""
        await asyncio.sleep(seconds)
        if self._terms == 0 and not self.leading:
            self._settle_heap()

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(RESYNC_SECONDS)
            self._enqueue_everything()
            self.scheduler.trigger()

    async def _resync_workloads(self) -> None:
        """Every WORKLOAD_RESYNC_SECONDS, the engine's view of each workload against the
        Workload store (``WorkloadFeed.resync``), a slice of RESYNC_SLICE workloads at a time
        with the event loop free in between; a repair is logged and counted."""
        while True:
            await asyncio.sleep(WORKLOAD_RESYNC_SECONDS)
            await self.resync_workloads()

    async def resync_workloads(self) -> int:
        keys = list(self.workloads.store)
        repairs: list[Repair] = []
        busy = 0.0
        for i in range(0, len(keys) + 1, RESYNC_SLICE):
            started = time.perf_counter()
            chunk = keys[i : i + RESYNC_SLICE]
            if i + RESYNC_SLICE > len(keys):
                chunk += self.workload_feed.unknown_to_store()
            repairs += self.workload_feed.resync(self.scheduler.writer.writing, chunk)
            busy += time.perf_counter() - started
            await asyncio.sleep(0)
        self.metrics.workload_resync(busy)
        for r in repairs:
            self.metrics.workload_resync_repaired(str(r.was), str(r.want))
        if repairs:
            logger.warning(
                "resync repaired %d workloads the engine disagreed with the API on: %s",
                len(repairs),
                ", ".join(f"{r.key} ({r.was} -> {r.want})" for r in repairs[:10]),
            )
            self.scheduler.trigger()
        return len(repairs)

    async def _shutdown(self) -> None:
        await self.supervisor.stop(grace_period=10)
        self._heap_pause.close()  # the collector as it was, should start-up not have ended
        with contextlib.suppress(Exception):
            await self.events.drain()
        await self.webhook_server.stop()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
