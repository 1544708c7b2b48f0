"""The integration framework: what one managed kind supplies, and what kqueue gives it back.

Kueue's job framework (pkg/controller/jobframework) has ``GenericJob`` (one object of a kind, as
the generic reconciler sees it) and ``IntegrationCallbacks`` (how the manager sets the kind up:
its webhooks, indexes, RBAC). kqueue keeps the same split:

* :class:`GenericJob`: pure questions about one object of the kind (its Workload, suspended or
  running, finished, the patches that start and stop it, which pod set a pod belongs to). It does
  no I/O; :mod:`~kqueue.controller.integrations.reconciler` applies what it returns.
* :class:`Framework`: the kind's registration. Its name is what ``integrations.frameworks``
  lists; from the registered frameworks kqueue derives the webhook handlers and configurations,
  the informers and the RBAC rules the chart grants. What the kind is (its name, kind, how its
  objects become Workloads, what it needs) it reads from the kind's API-level declaration
  (:class:`~kqueue.api.integrations.declaration.Integration`).
* :class:`IntegrationContext`: the public surface the manager hands a framework's ``install``
  (stores, the API client, events, hooks into the scheduler). A framework never reaches into the
  manager itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from kqueue.api.config import Configuration
from kqueue.api.integrations import PriorityResolver
from kqueue.api.integrations.declaration import Integration
from kqueue.api.integrations.pod import ExcessPod
from kqueue.api.v1alpha1 import ResourceFlavor, Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.clock import Now
from kqueue.controller.events import EventRecorder
from kqueue.controller.gate import PodSetRelease
from kqueue.controller.informer import Informer, Store
from kqueue.controller.kube import Kube
from kqueue.controller.metrics import Metrics
from kqueue.controller.resources import Resource
from kqueue.controller.webhook_server import AdmissionRequest, Verdict
from kqueue.engine.cycle import CycleResult
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey

if TYPE_CHECKING:
    from kqueue.controller.admission_checks.multikueue.adapters import Adapter
    from kqueue.controller.gang import GangPlacement
    from kqueue.controller.integrations.reconciler import JobReconciler
    from kqueue.controller.integrations.release import PodReleaser

Obj = dict[str, Any]
Handler = Callable[[AdmissionRequest], Awaitable[Verdict]]


@dataclass(frozen=True)
class WebhookContext:
    """What a webhook handler may consult: the Configuration, and the LocalQueues the
    controller's cache knows (for admission warnings; None for a namespace when unknown)."""

    config: Configuration
    local_queues: Callable[[str], list[str] | None] = lambda _namespace: None
AfterCycle = Callable[[Engine, CycleResult], Awaitable[None]]
LeaderTask = Callable[[], Coroutine[Any, Any, None]]


class GenericJob(Protocol):
    """One managed kind, as the generic reconciler drives it. ``obj`` is the object as the API
    returned it; every method is pure."""

    resource: Resource
    api_version: str
    kind: str

    def label_selector(self, *, without_queue_name: bool = False) -> str | None:
        """Which objects the informer lists: those that name a queue, or every one (None)
        when objects without a queue name are managed too."""
        ...

    def workload_for(self, obj: Obj, priorities: PriorityResolver) -> Workload:
        """The Workload the object needs; raises ``IntegrationError`` naming the field."""
        ...

    def is_suspended(self, obj: Obj) -> bool: ...

    def is_active(self, obj: Obj) -> bool:
        """Whether pods of the object may still be running (stop is not complete)."""
        ...

    def finished(self, obj: Obj) -> tuple[str, str] | None:
        """``(reason, message)`` once the object finished: reason Succeeded or Failed."""
        ...

    def run_patch(self, obj: Obj, wl: Workload, releases: Mapping[str, PodSetRelease]) -> Obj | None:
        """A merge patch that starts the object with its admission (resume, the flavors'
        scheduling directives in its pod templates, partial counts); None if it runs already."""
        ...

    def stop_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        """A merge patch that stops the object after an eviction (suspend, pod templates as the
        Workload recorded them); None if already stopped."""
        ...

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        """The pod set a pod of the object belongs to."""
        ...

    def holds_pods(self, obj: Obj) -> bool:
        """Whether the object's pods are created gated (the webhook saw the object)."""
        ...

    def hold_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        """A merge patch that makes the stopped object's future pods gated and puts its pod
        templates back as ``wl`` recorded them; None if nothing would change, or if the object
        cannot be changed yet."""
        ...

    def owner_of_pod(self, pod: Obj) -> str | None:
        """``namespace/name`` of the object of this kind a pod belongs to, or None.

        Through its controlling owner or the labels the kind's controller puts on its pods (pods
        owned by a child Job carry the top-level object's name in a label)."""
        ...

    def user_suspended(self, obj: Obj) -> bool:
        """Suspended by its user, not by kqueue: kqueue neither queues nor resumes it until the
        user resumes it."""
        ...


@dataclass(frozen=True)
class Composed:
    """A composable job as the generic reconciler sees it: the member objects that act as one
    job (a pod group's pods, terminal ones included), its Workload if there is one, and how many
    members make it whole."""

    name: str
    """For messages: what the members make (``Pod group g``)."""
    members: list[Obj]
    workload: Workload | None
    total: int
    """Members the job needs before its Workload is created."""
    barrier: WorkloadKey | None = None
    """The engine's barrier key (``Engine.pods_present``) when the Workload must wait for all
    members; None for a job of one member."""
    invalid: str | None = None
    """Why the members cannot make a job (a malformed count), reported on the first member."""
    prebuilt: str | None = None
    """The Workload the members name with ``kqueue.io/prebuilt-workload-name`` (a MultiKueue
    worker's copy of the manager's, docs/multikueue.md): adopted, never made; while it does
    not exist (``workload`` None) the members wait for it."""
    excess: list[ExcessPod] = field(default_factory=list)
    """Live members beyond ``total``, or once the Workload exists beyond their pod set's count
    in it (a pod group with more pods than it declares): the generic reconciler deletes them,
    as Kueue does (``members`` still lists them)."""


@runtime_checkable
class ComposableJob(GenericJob, Protocol):
    """A kind whose objects may act as one job (Kueue's ``ComposableJob``): a pod group. The
    generic reconciler keys it by :meth:`GenericJob.owner_of_pod` of any member (the composed
    job's key) and drives it through these instead of one object's patches: the Workload is
    built from all live members, it stops by evicting (deleting) the members, it finishes when
    all members are terminal, and each member is let go (:meth:`done_patch`) once kqueue no
    longer needs to see it."""

    def compose(self, key: str, members: Store[Obj], workloads: Store[Workload]) -> Composed | None:
        """The job ``key`` names, from the member store; None when it has no members."""
        ...

    def workload_for_members(self, live: list[Obj], priorities: PriorityResolver) -> Workload:
        """The one Workload of the live members; raises ``IntegrationError`` naming the field."""
        ...

    def finished_members(self, terminated: list[Obj]) -> tuple[str, str]:
        """``(reason, message)`` once every member is terminal: Succeeded or Failed."""
        ...

    def member_pod_set(self, wl: Workload, member: Obj) -> str:
        """The pod set of ``wl`` a member is counted in."""
        ...

    def done_patch(self, member: Obj) -> Obj | None:
        """A merge patch that lets a member go (kqueue's finalizer off); None if nothing holds it."""
        ...

    requeue_note: str
    """Added to the Requeued event once the members were stopped (what the user does next)."""


@dataclass(frozen=True)
class Webhook:
    """One admission webhook of a framework: its handler and how requests are routed to it."""

    name: str
    """The webhook's name in the configuration (``mbatch-job.kqueue.io``)."""
    path: str
    type: Literal["mutating", "validating"]
    rules: tuple[Obj, ...]
    handler: Callable[[WebhookContext], Handler]
    object_selector: Callable[[bool], Obj] = lambda _without_queue_name: {}
    """The objectSelector, given ``manageJobsWithoutQueueName``."""
    reinvocation_policy: str | None = None
    order: int = 50
    """Position among the mutating webhooks (lower first): a framework whose pods must be
    labelled before the generic pod webhook sees them comes before it."""


@dataclass(frozen=True)
class PolicyRule:
    """One RBAC rule the framework needs, with the reason (shown in the chart)."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str

    def to_dict(self) -> Obj:
        return {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }


@dataclass
class IntegrationContext:
    """What the manager gives a framework's ``install``: shared stores, the API client, events,
    metrics and hooks. Everything here is public; nothing else of the manager is."""

    config: Configuration
    engine: Callable[[], Engine]
    workloads: Informer[Workload]
    pods: Informer[Obj]
    flavors: Store[ResourceFlavor]
    priorities: Callable[[], PriorityResolver]
    kube: Kube
    events: EventRecorder
    metrics: Metrics
    now: Now
    releaser: PodReleaser
    trigger: Callable[[], None]
    watched: Mapping[Resource, Store[Obj]] = field(default_factory=dict)
    """The stores of the enabled frameworks' :attr:`Framework.watches`."""
    leader_tasks: list[LeaderTask] = field(default_factory=list)
    after_cycle: list[AfterCycle] = field(default_factory=list)
    gang: GangPlacement | None = None
    """Whole-gang placement by kube-scheduler, for a framework's own hooks: size the PodGroup
    before releasing pods (``prepare``), copy the verdict after (``report``)."""


@dataclass(frozen=True)
class Framework:
    """A managed kind's registration: its API-level declaration (name, kind, how its objects
    become Workloads, what it needs, default on or off) plus how the controller runs it."""

    declares: Integration
    """The kind's declaration (kqueue.api.integrations.registry), the one list every layer reads."""
    summary: str
    """One line for the docs: what kqueue does with the kind."""
    suspendable: bool
    """Whether the kind has a suspend switch, so a queued object waits suspended (no pods)."""
    job: Callable[[], GenericJob] | None = None
    """The generic reconciler's view of the kind (a :class:`ComposableJob` for a kind whose
    objects act as one job, plain pod groups); None for a kind kqueue does not reconcile."""
    configured_job: Callable[[Configuration], GenericJob] | None = None
    """The generic reconciler's view when it depends on the Configuration (a feature gate);
    :attr:`job` otherwise."""
    install: Callable[[IntegrationContext, JobReconciler | None], None] | None = None
    """Extra wiring (indexes, hooks), given the generic reconciler if it has one."""
    webhooks: tuple[Webhook, ...] = ()
    rbac: tuple[PolicyRule, ...] = ()
    pod_workload: Callable[[Obj], tuple[str, str] | None] | None = None
    """For a composed kind (plain pods): ``(kind, name)`` of the multi-pod workload a pod
    belongs to, which names the PodGroup the pod webhook gives it; None
    for a pod that is a workload on its own (a single pod needs no gang)."""
    resizable: Callable[[Obj], bool] | None = None
    """Whether an object of the kind changes size while it runs (WorkloadSlices): with gang
    scheduling its pods then name one PodGroup per size (the object's generation at the pod's
    creation), so the pods a scale-up adds are placed all or nothing on their own."""
    configured_resizable: Callable[[Configuration], Callable[[Obj], bool]] | None = None
    """:attr:`resizable` when it depends on the Configuration (a feature gate)."""
    watches: tuple[Resource, ...] = ()
    """Other kinds the kind's Workloads are built from (runtimes an object names). The manager lists
    and watches each (their stores are in :attr:`IntegrationContext.watched`) and reconciles every
    object of the kind again when one of them changes; their RBAC goes in :attr:`rbac`."""
    multikueue: Adapter | None = None
    """How MultiKueue dispatches an object of the kind to a worker cluster (the kind's
    ``multikueue.py``, docs/multikueue.md); None: the kind cannot be dispatched (its workloads'
    MultiKueue check is Rejected, naming the kind)."""

    def job_for(self, config: Configuration) -> GenericJob | None:
        """The generic reconciler's view of the kind under ``config``; None if not reconciled."""
        if self.configured_job is not None:
            return self.configured_job(config)
        return self.job() if self.job is not None else None

    def resizable_for(self, config: Configuration) -> Callable[[Obj], bool] | None:
        """Whether an object of the kind changes size under ``config`` (:attr:`resizable`)."""
        if self.configured_resizable is not None:
            return self.configured_resizable(config)
        return self.resizable

    @property
    def name(self) -> str:
        """The name in ``integrations.frameworks`` (``batch/job``)."""
        return self.declares.framework

    @property
    def api_version(self) -> str:
        return self.declares.api_version

    @property
    def kind(self) -> str:
        return self.declares.kind

    @property
    def default_enabled(self) -> bool:
        """On when the Configuration lists no frameworks (kinds that need an operator are not)."""
        return self.declares.default_enabled

    def owns(self, wl: Workload) -> bool:
        """Whether the Workload is one this kind's objects own (its pods are stopped by them)."""
        return any(
            r.kind == self.kind and r.api_version == self.api_version for r in wl.metadata.owner_references
        )


# -- registration helpers for a top-level kind kqueue queues by its queue label ------------------


def queue_label_selector(without_queue_name: bool) -> Obj:
    """Objects that name a queue; every object with ``manageJobsWithoutQueueName``."""
    if without_queue_name:
        return {}
    return {"matchExpressions": [{"key": c.QUEUE_NAME_LABEL, "operator": "Exists"}]}


def always_queue_label_selector(_without_queue_name: bool) -> Obj:
    """Objects that name a queue, whatever ``manageJobsWithoutQueueName`` says (serving kinds:
    docs/integrations.md)."""
    return queue_label_selector(False)


class KindWebhooks(Protocol):
    async def mutate(self, req: AdmissionRequest) -> Verdict: ...

    async def validate(self, req: AdmissionRequest) -> Verdict: ...


def queue_label_webhooks(
    *,
    short: str,
    rule: Obj,
    mutate_path: str,
    validate_path: str,
    hooks: Callable[[WebhookContext], KindWebhooks],
    selector: Callable[[bool], Obj] = queue_label_selector,
) -> tuple[Webhook, Webhook]:
    """The mutating (``m<short>.kqueue.io``) and validating (``v<short>.kqueue.io``) webhooks of a
    kind selected by its queue label (``selector``, given ``manageJobsWithoutQueueName``), on
    CREATE and UPDATE of ``rule``'s resources."""
    rules = ({**rule, "operations": ["CREATE", "UPDATE"]},)
    return (
        Webhook(
            name=f"m{short}.kqueue.io",
            path=mutate_path,
            type="mutating",
            rules=rules,
            handler=lambda ctx: hooks(ctx).mutate,
            object_selector=selector,
            reinvocation_policy="Never",
            order=10,
        ),
        Webhook(
            name=f"v{short}.kqueue.io",
            path=validate_path,
            type="validating",
            rules=rules,
            handler=lambda ctx: hooks(ctx).validate,
            object_selector=selector,
        ),
    )


def suspendable_kind_rbac(group: str, plural: str, kind: str, how: str = "") -> tuple[PolicyRule, ...]:
    """What the generic reconciler needs on a suspendable kind: watch and patch it (suspend,
    resume with the admission), and update its finalizers (a Workload's owner reference)."""
    return (
        PolicyRule(
            (group,),
            (plural,),
            ("list", "watch", "patch"),
            f"{kind}s naming a queue are watched, suspended while queued or evicted, and resumed "
            f"with the admission's node labels and tolerations{how}",
        ),
        PolicyRule(
            (group,),
            (f"{plural}/finalizers",),
            ("update",),
            f"a Workload's owner reference to its {kind} blocks the {kind}'s deletion, which "
            "OwnerReferencesPermissionEnforcement allows only with update on its finalizers",
        ),
    )
