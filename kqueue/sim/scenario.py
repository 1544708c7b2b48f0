"""A simulation's inputs: the objects of a manifest set, ready to feed the engine.

Kqueue and Kueue objects arrive as models (the loader converted Kueue's); Namespaces and
PriorityClasses as dicts; Jobs and Pods become Workloads through ``kqueue.api.integrations``,
exactly as the controller builds them, and only those the controller manages
(``kqueue.api.integrations.management.manages``, under the input's Configuration or the default
one); the others are reported in ``warnings`` with the reason and what to do. A Workload already
in the input for a Job or Pod of the input (``kubectl get jobs,workloads`` prints both) is kept
and the owner adds its labels and simulation annotations, as the controller would find the
existing Workload rather than create one (and keeps following the owner, labelled or not).

Time: the simulation starts at ``start`` (default: the latest timestamp found in the input, so a
``kubectl get`` dump is replayed from the moment it was taken; ``DEFAULT_START`` if there is none).
A workload arrives at ``start + simulate.kqueue.io/arrival``, or else at its creationTimestamp
if that is later than the start, or else at the start. Without a creationTimestamp it gets its
arrival time. Workloads created at the same instant are ordered as they appear in the input:
each one without a UID gets ``sim-<n>`` with n in input order, since the engine breaks
queue-order ties by UID.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

from kqueue.api.config import Configuration
from kqueue.api.integrations import (
    IntegrationError,
    PriorityClasses,
    group_name,
    is_elastic,
    registry,
    workload_for_pod,
    workload_for_pod_group,
)
from kqueue.api.integrations.declaration import Integration, Workloads
from kqueue.api.integrations.management import (
    KUEUE_QUEUE_NAME_LABEL,
    ManagementPolicy,
    kueue_key_warnings,
    manages,
    namespace_labels_of,
)
from kqueue.api.loader import LoadedObject, LoadError, Location
from kqueue.api.suggest import did_you_mean
from kqueue.api.v1alpha1 import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    Topology,
    Workload,
    WorkloadPriorityClass,
    parse_time,
)
from kqueue.api.v1alpha1.constants import QUEUE_NAME_LABEL
from kqueue.engine import dra, from_api
from kqueue.engine.types import LimitRangeItem
from kqueue.sim import cronjob

from .annotations import SCALE, AnnotationError, Timing, read_timing
from .checks import RULE_ANNOTATION, Clause, RuleError, parse_rule

_T = TypeVar("_T")

DEFAULT_START: Final = datetime(2024, 1, 1, tzinfo=UTC)
# Every namespace carries it (the API server sets it), so selectors on it work in simulation.
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
# The LocalQueue an unlabelled Job goes to under manageJobsWithoutQueueName (Kueue's defaulting).
DEFAULT_LOCAL_QUEUE: Final = "default"
# Top-level kinds turned into one Workload each, as their integration in the controller does
# (the serving kinds, queued only when labelled, are read after the pods).
TOP_LEVEL: Final[dict[str, Integration]] = {
    i.kind: i
    for i in registry.INTEGRATIONS
    if i.workloads is Workloads.OWN and not i.queue_label_required
}


@dataclass(slots=True)
class SimWorkload:
    """One workload of the simulation and where it came from."""

    api: Workload
    timing: Timing
    location: Location
    # Kind and name of the object in the input (a Workload, Job, Pod or pod group).
    source: str
    # Labels of the top-level owner (the Job or Pod), for the preemptibility chain.
    owner_labels: Mapping[str, str] | None = None
    # The Job an elastic workload comes from: scaling builds new slices from it.
    job: dict[str, Any] | None = None
    # When it is created (start + arrival, or its creationTimestamp).
    arrives: datetime = DEFAULT_START
    # The name of the object at ``location`` (the first pod, for a pod group).
    location_name: str = ""

    @property
    def key(self) -> str:
        return f"{self.api.namespace or 'default'}/{self.api.name}"

    @property
    def source_kind(self) -> str:
        return "Pod" if self.source.startswith("pod group ") else self.source.partition(" ")[0]

    @property
    def source_name(self) -> str:
        if self.source.startswith("pod group "):
            return self.location_name
        return self.source.partition(" ")[2]

    @property
    def holds_quota(self) -> bool:
        return self.api.status.admission is not None and not self.api.is_finished


@dataclass(slots=True)
class Scenario:
    start: datetime
    flavors: list[ResourceFlavor] = field(default_factory=list)
    cohorts: list[Cohort] = field(default_factory=list)
    cluster_queues: list[ClusterQueue] = field(default_factory=list)
    local_queues: list[LocalQueue] = field(default_factory=list)
    workload_priority_classes: list[WorkloadPriorityClass] = field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    # (namespace, name, items) of each v1 LimitRange (from_api.limit_range).
    limit_ranges: list[tuple[str, str, tuple[LimitRangeItem, ...]]] = field(default_factory=list)
    # ResourceClaimTemplates (their ResourceClaimSpec) by namespace and name: they size the
    # DRA device claims of the namespace's pods (kqueue/engine/dra.py).
    claim_templates: dict[str, dict[str, Mapping[str, Any]]] = field(default_factory=dict)
    # ResourceSlices (their spec) and DeviceClasses (by name): partitionable devices' counters,
    # the classes' selectors and the extended resources they serve (kqueue/engine/dra.py).
    resource_slices: list[Mapping[str, Any]] = field(default_factory=list)
    device_classes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    workloads: list[SimWorkload] = field(default_factory=list)
    priorities: PriorityClasses = field(default_factory=PriorityClasses)
    warnings: list[str] = field(default_factory=list)
    # The controller Configuration among the inputs (kqueue's, or Kueue's converted), if any:
    # its fairSharing and admissionFairSharing apply as in the controller.
    config: Configuration | None = None
    # Topology-aware scheduling: Topologies, v1 Nodes, and v1 Pods bound to a node (they use
    # its capacity; they are not workloads to queue).
    topologies: list[Topology] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    bound_pods: list[dict[str, Any]] = field(default_factory=list)
    # ``namespace/cronjob`` -> the names of its Jobs (a CronJob's schedule expanded over the
    # window, kqueue.sim.cronjob, or its Jobs in a dump), for ``kqueue explain <cronjob>``.
    cron_jobs: dict[str, list[str]] = field(default_factory=dict)
    # Admission checks, and the simulated rule of each (sim/checks.py).
    admission_checks: list[AdmissionCheck] = field(default_factory=list)
    check_rules: dict[str, tuple[Clause, ...]] = field(default_factory=dict)


def _controller(obj: LoadedObject) -> tuple[str, str] | None:
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind")), str(ref.get("name"))
    return None


def _cron_jobs(sc: Scenario, obj: LoadedObject, window: timedelta) -> list[LoadedObject]:
    """The Jobs a CronJob creates in the window (kqueue.sim.cronjob), as loaded Jobs."""
    try:
        made, warnings = cronjob.jobs_of(obj.raw, sc.start, window)
    except IntegrationError as err:
        raise LoadError(obj.location, err.detail, kind=obj.kind, name=obj.display_name, path=err.path) from None
    sc.warnings.extend(f"{obj.location} ({obj.ref}): {w}" for w in warnings)
    sc.cron_jobs.setdefault(f"{obj.namespace or 'default'}/{obj.name}", [])
    return [
        LoadedObject(
            location=obj.location, api_version="batch/v1", kind="Job", name=job["metadata"]["name"],
            namespace=obj.namespace, model=None, raw=job,
        )
        for job in made
    ]


def _meta(obj: LoadedObject) -> dict[str, Any]:
    meta = obj.raw.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _annotations(raw: Mapping[str, Any]) -> dict[str, str]:
    meta = raw.get("metadata") or {}
    return {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}


def _timing(obj: LoadedObject, raw: Mapping[str, Any]) -> Timing:
    try:
        return read_timing(_annotations(raw))
    except AnnotationError as err:
        raise LoadError(
            obj.location, str(err), kind=obj.kind, name=obj.display_name, path=err.path
        ) from None


def _times(objects: Iterable[LoadedObject]) -> Iterable[datetime]:
    """Every timestamp of the input: creation times and condition transitions."""
    for obj in objects:
        created = _meta(obj).get("creationTimestamp")
        if created:
            yield _parse(obj, created, "metadata.creationTimestamp")
        if isinstance(obj.model, Workload):
            for cond in obj.model.status.conditions:
                yield cond.last_transition_time


def _parse(obj: LoadedObject, value: object, path: str) -> datetime:
    try:
        return parse_time(value if isinstance(value, str | datetime) else str(value))
    except ValueError as err:
        raise LoadError(
            obj.location, str(err), kind=obj.kind, name=obj.display_name, path=path
        ) from None


def _owner_key(namespace: str, ref_kind: str, ref_name: str) -> tuple[str, str, str]:
    return (namespace, ref_kind, ref_name)


def _policy(objects: Sequence[LoadedObject], given: ManagementPolicy | None) -> ManagementPolicy:
    configs = [o for o in objects if o.config is not None]
    if len(configs) > 1:
        raise LoadError(
            configs[1].location,
            f"a second Configuration (the first is at {configs[0].location}); give one",
            kind="Configuration",
        )
    if configs:
        assert configs[0].config is not None
        return ManagementPolicy.from_config(configs[0].config)
    return given if given is not None else ManagementPolicy()


def _names_a_queue(raw: Mapping[str, Any]) -> bool:
    labels = (raw.get("metadata") or {}).get("labels") or {}
    return QUEUE_NAME_LABEL in labels or KUEUE_QUEUE_NAME_LABEL in labels


def _unmanaged(obj: LoadedObject, reason: str) -> str:
    return f"{obj.location} ({obj.ref}): not managed by kqueue, skipped: {reason}"


def build_scenario(
    objects: Sequence[LoadedObject],
    *,
    start: datetime | None = None,
    policy: ManagementPolicy | None = None,
    window: timedelta | None = None,
) -> Scenario:
    """Sort the loaded objects into a Scenario; raise LoadError naming the bad object.

    ``policy`` decides which Jobs and Pods are managed when the input has no Configuration
    (default: the default Configuration's). A CronJob's schedule is expanded into Jobs over
    ``window`` from the start (default ``cronjob.DEFAULT_WINDOW``).
    """
    if start is None:
        start = max(_times(objects), default=DEFAULT_START)
    sc = Scenario(start=start)
    policy = _policy(objects, policy)
    sc.config = next((o.config for o in objects if o.config is not None), None)
    pod_classes: list[dict[str, Any]] = []
    jobs: list[LoadedObject] = []
    pods: list[LoadedObject] = []
    apps: list[LoadedObject] = []
    workloads: list[LoadedObject] = []
    made_by: dict[int, LoadedObject] = {}
    for obj in objects:
        m = obj.model
        if isinstance(m, Topology):
            sc.topologies.append(m)
        elif obj.kind == "Node":
            sc.nodes.append(obj.raw)
        elif obj.kind == "Pod" and (obj.raw.get("spec") or {}).get("nodeName"):
            sc.bound_pods.append(obj.raw)
        elif isinstance(m, ResourceFlavor):
            sc.flavors.append(m)
        elif isinstance(m, Cohort):
            sc.cohorts.append(m)
        elif isinstance(m, ClusterQueue):
            sc.cluster_queues.append(m)
        elif isinstance(m, LocalQueue):
            sc.local_queues.append(m)
            sc.namespaces.setdefault(m.namespace or "default", {})
        elif isinstance(m, WorkloadPriorityClass):
            sc.workload_priority_classes.append(m)
        elif isinstance(m, Workload):
            workloads.append(obj)
        elif isinstance(m, AdmissionCheck):
            sc.admission_checks.append(m)
            rule = m.metadata.annotations.get(RULE_ANNOTATION)
            if rule is not None:
                try:
                    sc.check_rules[m.name] = parse_rule(rule)
                except RuleError as err:
                    raise LoadError(
                        obj.location, str(err), kind=obj.kind, name=obj.display_name,
                        path=f"metadata.annotations[{RULE_ANNOTATION}]",
                    ) from None
        elif obj.kind == "Namespace":
            labels = {str(k): str(v) for k, v in (_meta(obj).get("labels") or {}).items()}
            sc.namespaces[obj.name] = labels
        elif obj.kind == "LimitRange":
            try:
                sc.limit_ranges.append(from_api.limit_range(obj.raw))
            except from_api.LimitRangeError as err:
                raise LoadError(
                    obj.location, err.detail, kind=obj.kind, name=obj.display_name, path=err.path
                ) from None
        elif obj.kind == "ResourceClaimTemplate":
            namespace = str(_meta(obj).get("namespace") or "default")
            sc.claim_templates.setdefault(namespace, {})[obj.name] = dra.claim_template_spec(
                obj.raw
            )
        elif obj.kind == "ResourceSlice":
            sc.resource_slices.append(obj.raw.get("spec") or {})
        elif obj.kind == "DeviceClass":
            sc.device_classes[obj.name] = dra.device_class_view(obj.raw)
        elif obj.kind == "PriorityClass":
            pod_classes.append(obj.raw)
        elif (obj.api_version, obj.kind) == (cronjob.API_VERSION, cronjob.KIND):
            made = _cron_jobs(sc, obj, window or cronjob.DEFAULT_WINDOW)
            jobs.extend(made)
            made_by.update({id(j): obj for j in made})
        elif obj.kind in TOP_LEVEL:
            jobs.append(obj)
        elif obj.kind == "Pod":
            pods.append(obj)
        elif (integration := registry.of(obj.api_version, obj.kind)) is not None and (
            integration.queue_label_required
        ):
            apps.append(obj)
    sc.priorities = PriorityClasses.from_objects(sc.workload_priority_classes, pod_classes)

    # Workloads already in the input, by the owner they belong to.
    owned: dict[tuple[str, str, str], SimWorkload] = {}
    entries: list[tuple[int, SimWorkload, object]] = []
    order = {id(o): i for i, o in enumerate(objects)}
    # A CronJob's Jobs come where it is in the input.
    order.update({job_id: order[id(source)] for job_id, source in made_by.items()})
    for obj in jobs:
        controller = _controller(obj)
        if controller is not None and controller[0] == cronjob.KIND:
            names = sc.cron_jobs.setdefault(f"{obj.namespace or 'default'}/{controller[1]}", [])
            if obj.name not in names:
                names.append(obj.name)
    for obj in workloads:
        assert isinstance(obj.model, Workload)
        sw = SimWorkload(obj.model, _timing(obj, obj.raw), obj.location, f"Workload {obj.name}")
        ns = obj.model.namespace or "default"
        for ref in obj.model.metadata.owner_references:
            owned[_owner_key(ns, ref.kind, ref.name)] = sw
        # A pod group's Workload is named after the group.
        owned.setdefault(_owner_key(ns, "PodGroup", obj.model.name), sw)
        entries.append((order[id(obj)], sw, _meta(obj).get("creationTimestamp")))

    local_queues = {(lq.namespace or "default", lq.name) for lq in sc.local_queues}

    def managed(obj: LoadedObject) -> bool:
        ns = obj.namespace or "default"
        decision = manages(
            obj.raw, namespace_labels=namespace_labels_of(ns, sc.namespaces), policy=policy
        )
        if not decision:
            # A pod without any queue label was never meant to queue (a dump of a namespace
            # lists every pod): only Jobs, and pods that name a queue, are worth a warning.
            if obj.kind in TOP_LEVEL or _names_a_queue(obj.raw):
                sc.warnings.append(_unmanaged(obj, decision.reason))
            return False
        sc.warnings.extend(
            f"{obj.location} ({obj.ref}): {w}" for w in kueue_key_warnings(obj.raw)
        )
        return True

    # What a kind's Workloads are built from besides the object (runtimes it names).
    inputs = {
        i.kind: i.inputs(o.raw for o in objects) for i in TOP_LEVEL.values() if i.inputs is not None
    }
    # An object whose Workload is in the input is the controller's whatever its labels say (its
    # reconciler keeps following an object it made a Workload for); the others only if managed.
    for obj in jobs:
        ns = obj.namespace or "default"
        existing = owned.get(_owner_key(ns, obj.kind, obj.name))
        if existing is None and not managed(obj):
            continue
        timing = _timing(obj, obj.raw)
        labels = dict(_meta(obj).get("labels") or {})
        if existing is not None:
            existing.owner_labels = labels
            existing.timing = _merge(existing.timing, timing)
            existing.job = obj.raw
            continue
        integration = TOP_LEVEL[obj.kind]
        done = integration.finished(obj.raw) if integration.finished is not None else None
        finished = done[0] if done is not None else None
        if finished is not None:
            sc.warnings.append(
                f"{obj.location} ({obj.ref}): finished (condition {finished}), so the "
                "controller creates no Workload for it; skipped"
            )
            continue
        job = obj.raw
        if not (job.get("metadata") or {}).get("generation"):
            # The API server starts every object at generation 1 (elastic slices are named
            # after it); a manifest usually leaves it out.
            job = {**job, "metadata": {**job["metadata"], "generation": 1}}
        assert integration.build is not None
        build = functools.partial(integration.build, **inputs.get(obj.kind, {}))
        wl = _integrate(obj, build, job, sc.priorities)
        if wl.spec.queue_name is None and (ns, DEFAULT_LOCAL_QUEUE) in local_queues:
            # manageJobsWithoutQueueName: the controller submits it to the namespace's
            # LocalQueue "default" (Kueue's LocalQueueDefaulting); without one it waits.
            wl.spec.queue_name = DEFAULT_LOCAL_QUEUE
        sw = SimWorkload(
            wl, timing, obj.location, f"{obj.kind} {obj.name}", labels,
            job if integration.elastic is not None else None,
        )
        entries.append((order[id(obj)], sw, _meta(obj).get("creationTimestamp")))

    groups: dict[tuple[str, str], list[LoadedObject]] = {}
    for obj in pods:
        ns = obj.namespace or "default"
        if owned.get(_owner_key(ns, "Pod", obj.name)) is None and not managed(obj):
            continue
        group = group_name(obj.raw)
        if group is not None:
            groups.setdefault((ns, group), []).append(obj)
            continue
        labels = dict(_meta(obj).get("labels") or {})
        timing = _timing(obj, obj.raw)
        existing = owned.get(_owner_key(ns, "Pod", obj.name))
        if existing is not None:
            existing.owner_labels = labels
            existing.timing = _merge(existing.timing, timing)
            continue
        wl = _integrate(obj, workload_for_pod, obj.raw, sc.priorities)
        sw = SimWorkload(wl, timing, obj.location, f"Pod {obj.name}", labels)
        entries.append((order[id(obj)], sw, _meta(obj).get("creationTimestamp")))
    for (ns, group), members in groups.items():
        first = members[0]
        timing = Timing()
        for member in members:
            t = _timing(member, member.raw)
            if t != Timing():
                timing = t
                break
        existing = owned.get(_owner_key(ns, "PodGroup", group))
        if existing is not None:
            existing.timing = _merge(existing.timing, timing)
            continue
        raws = [m.raw for m in members]
        wl = _integrate(first, workload_for_pod_group, raws, sc.priorities)
        earliest = min(
            (str(_meta(member).get("creationTimestamp") or "") for member in members), default=""
        )
        sw = SimWorkload(
            wl, timing, first.location, f"pod group {ns}/{group}", location_name=first.name
        )
        entries.append((order[id(first)], sw, earliest or None))

    # A serving kind is one gang Workload, one per pod group of its pods, or one per pod (as the
    # controller builds them: its declaration in kqueue.api.integrations).
    # A dump (``kubectl get deploy,pods``) lists the pods of a kind whose pods are each their own
    # Workload too: they are its Workloads already, so the object adds none (their owners are
    # named ``<object>-<hash>``, as a Deployment's ReplicaSets).
    pods_alone = [
        i for i in registry.INTEGRATIONS if i.workloads is Workloads.EACH_POD and i.pod_of
    ]
    replica_sets = {
        (p.namespace or "default", str(ref.get("name")))
        for p in pods
        if any(i.pod_of is not None and i.pod_of(p.raw) for i in pods_alone)
        for ref in _meta(p).get("ownerReferences") or []
        if ref.get("controller")
    }
    for obj in apps:
        ns = obj.namespace or "default"
        if owned.get(_owner_key(ns, obj.kind, obj.name)) is not None or not managed(obj):
            continue
        integration = registry.BY_KIND[(obj.api_version, obj.kind)]
        if integration.workloads is Workloads.EACH_POD and any(
            rs_ns == ns and rs.rpartition("-")[0] == obj.name for rs_ns, rs in replica_sets
        ):
            continue
        timing = _timing(obj, obj.raw)
        labels = dict(_meta(obj).get("labels") or {})
        if integration.workloads is Workloads.OWN:
            assert integration.build is not None
            if integration.empty is not None and _read(obj, integration.empty, obj.raw):
                sc.warnings.append(
                    f"{obj.location} ({obj.ref}): scaled to 0, so the controller keeps no "
                    "Workload for it; skipped"
                )
                continue
            wl = _integrate(obj, integration.build, obj.raw, sc.priorities)
            sw = SimWorkload(wl, timing, obj.location, f"{obj.kind} {obj.name}", labels)
            entries.append((order[id(obj)], sw, _meta(obj).get("creationTimestamp")))
            continue
        assert integration.pods is not None
        if integration.workloads is Workloads.EACH_POD_GROUP:
            # One gang Workload per group, built from the group's pods as the pod integration
            # builds it once the controller has labelled them with their group.
            by_group: dict[str, list[dict[str, Any]]] = {}
            for pod in _read(obj, integration.pods, obj.raw):
                by_group.setdefault(str(group_name(pod)), []).append(pod)
            for group, group_members in by_group.items():
                wl = _integrate(obj, workload_for_pod_group, group_members, sc.priorities)
                sw = SimWorkload(
                    wl, timing, obj.location, f"pod group {ns}/{group}", labels,
                    location_name=obj.name,
                )
                entries.append((order[id(obj)], sw, _meta(obj).get("creationTimestamp")))
            continue
        for pod in _read(obj, integration.pods, obj.raw):
            wl = _integrate(obj, workload_for_pod, pod, sc.priorities)
            sw = SimWorkload(
                wl, timing, obj.location, f"Pod {pod['metadata']['name']}", labels,
                location_name=obj.name,
            )
            entries.append((order[id(obj)], sw, _meta(obj).get("creationTimestamp")))

    for _, sw, _ in entries:
        if sw.timing.scale and (sw.job is None or not is_elastic(sw.job)):
            raise LoadError(
                sw.location,
                'only an elastic Job (annotation kqueue.io/elastic-job: "true") can scale',
                kind=sw.source_kind,
                name=sw.source_name,
                path=f"metadata.annotations[{SCALE}]",
            )
    entries.sort(key=lambda e: e[0])
    seen: dict[str, SimWorkload] = {}
    for n, (_, sw, created) in enumerate(entries, start=1):
        _place_in_time(sw, start, created, n)
        if sw.key in seen:
            raise LoadError(
                sw.location,
                f"workload {sw.key} is defined twice (also by {seen[sw.key].source} at "
                f"{seen[sw.key].location})",
                kind=sw.source_kind,
                name=sw.source_name,
            )
        seen[sw.key] = sw
        sc.workloads.append(sw)
        sc.namespaces.setdefault(sw.api.namespace or "default", {})
    for ns, labels in sc.namespaces.items():
        labels.setdefault(NAMESPACE_NAME_LABEL, ns)
    sc.warnings.extend(_missing_references(sc))
    return sc


def _missing_references(sc: Scenario) -> list[str]:
    """LocalQueues and ClusterQueues named but not defined, with the closest defined name:
    a typo in a queue name otherwise only shows as a pending workload."""
    out: list[str] = []
    cluster_queues = [cq.name for cq in sc.cluster_queues]
    for lq in sc.local_queues:
        cq = lq.spec.cluster_queue
        if cq and cq not in cluster_queues:
            hint = did_you_mean(cq, cluster_queues)
            out.append(
                f"LocalQueue {lq.namespace or 'default'}/{lq.name}: ClusterQueue {cq} is not "
                "defined" + (f"; {hint}" if hint else "")
            )
    by_namespace: dict[str, set[str]] = {}
    for lq in sc.local_queues:
        by_namespace.setdefault(lq.namespace or "default", set()).add(lq.name)
    for sw in sc.workloads:
        queue = sw.api.spec.queue_name
        ns = sw.api.namespace or "default"
        if not queue or queue in by_namespace.get(ns, set()):
            continue
        hint = did_you_mean(queue, by_namespace.get(ns, set()))
        what = sw.source if sw.source.startswith("pod group ") else (
            f"{sw.source_kind} {ns}/{sw.source_name}"
        )
        out.append(
            f"{sw.location} ({what}): LocalQueue {ns}/{queue} is not defined"
            + (f"; {hint}" if hint else f" (LocalQueues in {ns}: "
               + (", ".join(sorted(by_namespace.get(ns, set()))) or "none") + ")")
        )
    return out


def _merge(a: Timing, b: Timing) -> Timing:
    """The owner's annotations complete (and win over) the Workload's own."""
    return Timing(
        arrival=b.arrival or a.arrival,
        run_time=b.run_time if b.run_time is not None else a.run_time,
        scale=b.scale or a.scale,
        delete=b.delete if b.delete is not None else a.delete,
        deactivate=b.deactivate if b.deactivate is not None else a.deactivate,
    )


def _read(obj: LoadedObject, read: Callable[[Any], _T], raw: Any) -> _T:
    """What ``read`` finds in ``raw``, an IntegrationError becoming a LoadError on ``obj``."""
    try:
        return read(raw)
    except IntegrationError as err:
        raise LoadError(
            obj.location, err.detail, kind=obj.kind, name=obj.display_name, path=err.path or None
        ) from None


def _integrate(
    obj: LoadedObject, build: Callable[[Any, PriorityClasses], Workload], *args: Any
) -> Workload:
    try:
        wl = build(*args)
    except IntegrationError as err:
        raise LoadError(
            obj.location, err.detail, kind=obj.kind, name=obj.display_name, path=err.path or None
        ) from None
    assert isinstance(wl, Workload)
    return wl


def _place_in_time(sw: SimWorkload, start: datetime, created: object, n: int) -> None:
    meta = sw.api.metadata
    if not meta.uid:
        meta.uid = f"sim-{n:06d}"
    creation: datetime | None = meta.creation_timestamp
    if creation is None and created:
        creation = parse_time(created if isinstance(created, str | datetime) else str(created))
    if sw.holds_quota:
        sw.arrives = start
    elif sw.timing.arrival:
        sw.arrives = start + sw.timing.arrival
        creation = sw.arrives
    elif creation is not None and creation > start:
        sw.arrives = creation
    else:
        sw.arrives = start
    meta.creation_timestamp = creation if creation is not None else sw.arrives


def offset(sc: Scenario, at: datetime) -> timedelta:
    return at - sc.start
