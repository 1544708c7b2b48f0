"""Suspended while queued: the mutating-webhook side, shared by every kind with a suspend switch.

* CREATE: the object gets the ``kqueue.io/admission`` gate and the managed label in each of its
  pod templates, and is suspended as kqueue's (``spec.suspend: true`` plus the annotation
  ``kqueue.io/suspended-by-kqueue``), so it has no pods until admitted. An object its user created
  suspended is left suspended without the annotation: it is the user's until resumed.
* UPDATE: a resume (``spec.suspend`` true -> false) by anyone but kqueue becomes queueing: the
  object stays suspended, now by kqueue, and the user is told so. kqueue resumes and drops the
  annotation in one patch, which is how its own resume is told apart.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.gate import add_gate
from kqueue.controller.integrations import registry
from kqueue.controller.integrations.advice import LocalQueueNames, queue_warnings
from kqueue.controller.integrations.framework import WebhookContext
from kqueue.controller.integrations.owners import controlled_by
from kqueue.controller.integrations.queue_labels import unsupported_annotation_errors
from kqueue.controller.webhook_server import AdmissionRequest, FieldError, Verdict

Obj = dict[str, Any]

QUEUED_WARNING = (
    "spec.suspend: kqueue holds this {kind} suspended until its Workload is admitted "
    "(see `kubectl get workloads.kqueue.io -n {namespace}`)"
)


def _annotations(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


SuspendPath = tuple[str, ...]
SPEC_SUSPEND: SuspendPath = ("spec", "suspend")


def suspended(obj: Obj, path: SuspendPath = SPEC_SUSPEND) -> bool:
    """The suspend switch at ``path`` (``spec.suspend``; some kinds keep it under
    ``spec.runPolicy``)."""
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return bool(value)


def _set(obj: Obj, path: SuspendPath, value: bool) -> None:
    for part in path[:-1]:
        obj = obj.setdefault(part, {})
    obj[path[-1]] = value


class SpecSuspendKind:
    """What every kind held through its own suspend switch (``spec.suspend``, or
    :attr:`suspend_path`) answers alike: which objects are watched, whether one is suspended,
    whether its user (not kqueue) suspended it, and how kqueue stops it."""

    suspend_path: SuspendPath = SPEC_SUSPEND

    def label_selector(self, *, without_queue_name: bool = False) -> str | None:
        return None if without_queue_name else c.QUEUE_NAME_LABEL

    def is_suspended(self, obj: Obj) -> bool:
        return suspended(obj, self.suspend_path)

    def user_suspended(self, obj: Obj) -> bool:
        return self.is_suspended(obj) and c.SUSPENDED_BY_KQUEUE_ANNOTATION not in _annotations(obj)

    def stop_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        """Suspended as kqueue's after an eviction; None if already suspended."""
        if self.is_suspended(obj):
            return None
        patch: Obj = {"metadata": {"annotations": {c.SUSPENDED_BY_KQUEUE_ANNOTATION: "true"}}}
        _set(patch, self.suspend_path, True)
        return patch


def gate_templates(templates: Iterable[Obj]) -> bool:
    """The gate and the managed label in each pod template (in place); whether any changed."""
    changed = False
    for template in templates:
        changed |= add_gate(template.setdefault("spec", {}))
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        if labels.get(c.MANAGED_LABEL) != "true":
            labels[c.MANAGED_LABEL] = "true"
            changed = True
    return changed


def hold_suspended(obj: Obj, path: SuspendPath = SPEC_SUSPEND) -> bool:
    """Suspend the object as kqueue's (in place); returns whether it changed anything."""
    meta = obj.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    if suspended(obj, path) and annotations.get(c.SUSPENDED_BY_KQUEUE_ANNOTATION) == "true":
        return False
    _set(obj, path, True)
    meta["annotations"] = {**annotations, c.SUSPENDED_BY_KQUEUE_ANNOTATION: "true"}
    return True


def resumed_by_other(
    old: Obj, new: Obj, *, started: bool = False, path: SuspendPath = SPEC_SUSPEND
) -> bool:
    """A resume kqueue did not make. ``started``: the old object still runs (its controller has
    not reset it since a suspension), so this is not a queued object being resumed."""
    if not suspended(old, path) or suspended(new, path) or started:
        return False
    return c.SUSPENDED_BY_KQUEUE_ANNOTATION in _annotations(new) or (
        c.SUSPENDED_BY_KQUEUE_ANNOTATION not in _annotations(old)
    )


def mutate_suspendable(
    req: AdmissionRequest,
    *,
    kind: str,
    pod_templates: Callable[[Obj], Iterable[Obj]],
    started: Callable[[Obj], bool] = lambda _old: False,
    path: SuspendPath = SPEC_SUSPEND,
) -> Verdict:
    """The mutating webhook of a suspendable kind, for an object kqueue manages."""
    obj = req.object or {}
    if req.operation == "UPDATE":
        old = req.old_object or {}
        if not resumed_by_other(old, obj, started=started(old), path=path):
            return Verdict.allow()
        out = copy.deepcopy(obj)
        hold_suspended(out, path)
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        return Verdict.patch(out, QUEUED_WARNING.format(kind=kind, namespace=namespace))
    if req.operation != "CREATE":
        return Verdict.allow()
    out = copy.deepcopy(obj)
    gate_templates(pod_templates(out))
    if not suspended(obj, path):
        hold_suspended(out, path)
    return Verdict.patch(out) if out != obj else Verdict.allow()


def _labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def managed(obj: Obj, *, without_queue_name: bool = False) -> bool:
    """Names a queue, or every object counts (``manageJobsWithoutQueueName``)."""
    return without_queue_name or bool(_labels(obj).get(c.QUEUE_NAME_LABEL))


def validate_suspendable(
    req: AdmissionRequest,
    *,
    kind: str,
    unsupported: Mapping[str, str],
    local_queues: LocalQueueNames,
    path: SuspendPath = SPEC_SUSPEND,
) -> Verdict:
    """The validating webhook of a suspendable kind, for an object kqueue manages: annotations
    the kind cannot honour refused (``unsupported``: annotation -> why), the queue and
    priority-class labels immutable unless the object stays suspended, and on creation the
    admission warnings of :mod:`.advice`."""
    obj = req.object or {}
    errors = unsupported_annotation_errors(obj, unsupported)
    old = req.old_object
    if req.operation == "UPDATE" and isinstance(old, dict):
        both_suspended = suspended(old, path) and suspended(obj, path)
        for key in (c.QUEUE_NAME_LABEL, c.PRIORITY_CLASS_LABEL):
            before, after = _labels(old).get(key), _labels(obj).get(key)
            if before != after and not both_suspended:
                errors.append(
                    FieldError(
                        f"metadata.labels[{key}]",
                        f"field is immutable while the {kind} is not suspended: cannot "
                        f"change from {before!r} to {after!r}",
                    )
                )
    if errors:
        return Verdict.deny(*errors)
    if req.operation == "CREATE":
        return Verdict.allow(*queue_warnings(obj, local_queues, kind=kind))
    return Verdict.allow()


@dataclass(frozen=True)
class SuspendableKind:
    """What one suspendable kind tells its webhooks: its pod templates, whether an old object
    still has pods running, where its suspend switch is, what it refuses."""

    kind: str
    pod_templates: Callable[[Obj], Iterable[Obj]]
    """The object's pod templates, in place (missing ones created empty)."""
    started: Callable[[Obj], bool] = lambda _old: False
    """Pods still running from before a suspension: the object is stopping, not queued."""
    path: SuspendPath = SPEC_SUSPEND
    article: str = "a"
    """``a`` or ``an`` before the kind, in messages (``an`` before a kind read with a vowel sound)."""
    spec_errors: Callable[[Obj], list[FieldError]] = lambda _obj: []
    """The kind's own validation of an object kqueue manages (refused naming the fields)."""
    spec_errors_since: Callable[[Obj, Obj | None], list[FieldError]] | None = None
    """Instead of ``spec_errors``, given the object before an update too (None on create): for
    checks added later, which must not refuse an older object the updates it still needs."""
    skip: Callable[[Obj], bool] = lambda _obj: False
    """An object that needs no quota of its own, so its webhooks leave it alone."""
    unsupported: Mapping[str, str] | None = None
    """Annotation -> why the kind cannot honour it; default: elastic and partial admission."""

    def unsupported_annotations(self) -> Mapping[str, str]:
        if self.unsupported is not None:
            return self.unsupported
        return {
            c.ELASTIC_JOB_ANNOTATION: (
                f"{self.article} {self.kind} cannot be elastic (WorkloadSlices are for batch Jobs)"
            ),
            c.JOB_MIN_PARALLELISM_ANNOTATION: f"partial admission is not supported for {self.kind}s",
        }


class SuspendableWebhooks:
    """The mutating and validating webhooks of every suspendable kind (one class; the kind's
    :class:`SuspendableKind` says what differs): which objects kqueue manages, then
    :func:`mutate_suspendable` and :func:`validate_suspendable`."""

    def __init__(
        self,
        spec: SuspendableKind,
        *,
        manage_jobs_without_queue_name: bool = False,
        local_queues: LocalQueueNames = lambda _namespace: None,
        parent_kinds: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.spec = spec
        self._without_queue_name = manage_jobs_without_queue_name
        self._local_queues = local_queues
        self._parent_kinds = parent_kinds

    def _manages(self, obj: Obj) -> bool:
        """Managed, and not part of another integration's object (the child Jobs or
        clusters an operator creates for it are queued with their parent, never on their own:
        ``parent_kinds``)."""
        if self.spec.skip(obj) or controlled_by(obj, self._parent_kinds):
            return False
        return managed(obj, without_queue_name=self._without_queue_name)

    async def mutate(self, req: AdmissionRequest) -> Verdict:
        obj = req.object
        if not isinstance(obj, dict) or not self._manages(obj):
            return Verdict.allow()
        spec = self.spec
        return mutate_suspendable(
            req, kind=spec.kind, pod_templates=spec.pod_templates, started=spec.started, path=spec.path
        )

    async def validate(self, req: AdmissionRequest) -> Verdict:
        obj = req.object
        if not isinstance(obj, dict) or not self._manages(obj):
            return Verdict.allow()
        spec = self.spec
        if spec.spec_errors_since is not None:
            before = req.old_object if req.operation == "UPDATE" else None
            errors = spec.spec_errors_since(obj, before)
        else:
            errors = spec.spec_errors(obj)
        verdict = validate_suspendable(
            req,
            kind=spec.kind,
            unsupported=spec.unsupported_annotations(),
            local_queues=self._local_queues,
            path=spec.path,
        )
        if errors:
            return Verdict.deny(*errors, *verdict.errors)
        return verdict


def suspendable_hooks(spec: SuspendableKind, name: str) -> Callable[[WebhookContext], SuspendableWebhooks]:
    """The webhooks of the framework ``name`` (a suspendable kind) for a Configuration: objects
    another enabled integration's object controls are left to their parent."""

    def hooks(ctx: WebhookContext) -> SuspendableWebhooks:
        parents = frozenset(
            (f.api_version, f.kind)
            for f in registry.enabled(ctx.config.integrations.frameworks)
            if f.name != name
        )
        return SuspendableWebhooks(
            spec,
            manage_jobs_without_queue_name=ctx.config.manage_jobs_without_queue_name,
            local_queues=ctx.local_queues,
            parent_kinds=parents,
        )

    return hooks
