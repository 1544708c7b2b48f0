"""What every integration shares: Kueue's workload names, priorities, labels, errors.

These are pure functions over decoded objects (dicts as the API server returns them) so that the
controller and ``kqueue simulate`` build the very same Workload for the same Job or Pod.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from kqueue.api.v1alpha1 import WorkloadPriorityClass
from kqueue.api.v1alpha1 import constants as c

# Kueue's jobframework: a 5-hex hash suffix, names up to 253 characters (a CRD name).
HASH_LENGTH: Final = 5
MAX_WORKLOAD_NAME_LENGTH: Final = 253
MAX_PREFIX_LENGTH: Final = MAX_WORKLOAD_NAME_LENGTH - 1 - HASH_LENGTH

# Annotations a Workload keeps from its Job or Pod: the ones the engine or the controller read
# later. Kueue copies only provisioning-request annotations, which kqueue does not implement.
KEPT_ANNOTATIONS: Final = (c.ELASTIC_JOB_ANNOTATION,)


class IntegrationError(ValueError):
    """A Job or Pod that cannot be turned into a Workload; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.detail = message
        super().__init__(f"{path}: {message}" if path else message)


def workload_name(
    owner_name: str, owner_uid: str, kind: str, group: str, *, extra: str = ""
) -> str:
    """Kueue's ``GetWorkloadNameForOwnerWithGVK``: ``<kind>-<name>`` truncated, plus a hash.

    The hash covers kind, group, name and UID (and ``extra``, the generation of an elastic job's
    slice), so that a re-created owner with the same name gets a new Workload.
    """
    prefix = f"{kind.lower()}-{owner_name}"[:MAX_PREFIX_LENGTH]
    h = hashlib.sha1(usedforsecurity=False)
    h.update("\n".join((kind, group, owner_name, owner_uid)).encode())
    if extra:
        h.update(b"\n" + extra.encode())
    return f"{prefix}-{h.hexdigest()[:HASH_LENGTH]}"


def owner_workload_name(owner: Mapping[str, Any], kind: str, group: str) -> str:
    """:func:`workload_name` of a top-level object (one Workload per object), from its
    metadata's name and UID."""
    meta = owner.get("metadata") or {}
    return workload_name(str(meta.get("name", "")), str(meta.get("uid") or ""), kind, group)


# --- priorities ---------------------------------------------------------------------------------


class PriorityResolver(Protocol):
    """The priority classes the caller knows about (the controller's informers, or a manifest)."""

    def workload_priority_class(self, name: str) -> int | None:
        """Value of the WorkloadPriorityClass ``name``; None if it does not exist."""
        ...

    def priority_class(self, name: str) -> int | None:
        """Value of the scheduling.k8s.io/v1 PriorityClass ``name``; None if it does not exist."""
        ...

    def global_default_priority_class(self) -> tuple[str, int] | None:
        """The PriorityClass with ``globalDefault: true`` (name, value), if any."""
        ...


@dataclass
class PriorityClasses:
    """A PriorityResolver over known objects."""

    workload: dict[str, int] = field(default_factory=dict)
    pod: dict[str, int] = field(default_factory=dict)
    global_default: tuple[str, int] | None = None

    @classmethod
    def from_objects(
        cls,
        workload_classes: Iterable[WorkloadPriorityClass] = (),
        priority_classes: Iterable[Mapping[str, Any]] = (),
    ) -> PriorityClasses:
        """From WorkloadPriorityClass models and decoded scheduling.k8s.io/v1 PriorityClasses."""
        out = cls()
        for wpc in workload_classes:
            out.workload[wpc.name] = wpc.value
        defaults: list[tuple[str, int]] = []
        for pc in priority_classes:
            name = str((pc.get("metadata") or {}).get("name", ""))
            value = pc.get("value")
            if not name or not isinstance(value, int) or isinstance(value, bool):
                continue
            out.pod[name] = value
            if pc.get("globalDefault") is True:
                defaults.append((name, value))
        if defaults:
            # The API server admits one global default; if a listing shows more (a race), the
            # lowest value wins as in the kube-apiserver's priority admission plugin.
            out.global_default = min(defaults, key=lambda d: (d[1], d[0]))
        return out

    def workload_priority_class(self, name: str) -> int | None:
        return self.workload.get(name)

    def priority_class(self, name: str) -> int | None:
        return self.pod.get(name)

    def global_default_priority_class(self) -> tuple[str, int] | None:
        return self.global_default


def resolve_priority(
    labels: Mapping[str, str],
    pod_specs: Iterable[Mapping[str, Any]],
    resolver: PriorityResolver,
) -> tuple[dict[str, str] | None, int]:
    """``(priorityClassRef, priority)`` as Kueue's ``ExtractPriority``.

    The ``kqueue.io/priority-class`` label (a WorkloadPriorityClass) wins; otherwise the first
    pod spec's ``priorityClassName`` (a PriorityClass); otherwise the global default
    PriorityClass; otherwise 0 with no class. A named class that does not exist is an error
    (Kueue does not create the Workload until it does).
    """
    wpc = labels.get(c.PRIORITY_CLASS_LABEL)
    if wpc:
        value = resolver.workload_priority_class(wpc)
        if value is None:
            raise IntegrationError(
                f"metadata.labels[{c.PRIORITY_CLASS_LABEL}]",
                f"WorkloadPriorityClass {wpc!r} not found",
            )
        return {"group": c.GROUP, "kind": "WorkloadPriorityClass", "name": wpc}, value
    name = ""
    for spec in pod_specs:
        name = str(spec.get("priorityClassName") or "")
        if name:
            break
    if name:
        value = resolver.priority_class(name)
        if value is None:
            raise IntegrationError("spec.priorityClassName", f"PriorityClass {name!r} not found")
        return _pod_class_ref(name), value
    default = resolver.global_default_priority_class()
    if default is not None:
        return _pod_class_ref(default[0]), default[1]
    return None, 0


def _pod_class_ref(name: str) -> dict[str, str]:
    return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}


def resolve_preemption_priority(
    labels: Mapping[str, str], priority: int, resolver: PriorityResolver
) -> tuple[dict[str, str] | None, int | None]:
    """``(preemptionPriorityClassRef, preemptionPriority)`` from the preemption-class label.

    The label names a WorkloadPriorityClass. Without it both stay unset (the engine then uses
    the scheduling priority). A value below the scheduling priority is rejected (docs/contracts.md §1).
    """
    name = labels.get(c.PREEMPTION_PRIORITY_CLASS_LABEL)
    if not name:
        return None, None
    path = f"metadata.labels[{c.PREEMPTION_PRIORITY_CLASS_LABEL}]"
    value = resolver.workload_priority_class(name)
    if value is None:
        raise IntegrationError(path, f"WorkloadPriorityClass {name!r} not found")
    if value < priority:
        raise IntegrationError(
            path,
            f"preemption priority {value} (WorkloadPriorityClass {name!r}) is lower than the "
            f"scheduling priority {priority}",
        )
    return {"group": c.GROUP, "kind": "WorkloadPriorityClass", "name": name}, value


# --- maximum execution time ---------------------------------------------------------------------

# The Workload field is an int32 of at least 1.
MAX_EXEC_TIME_SECONDS_LIMIT: Final = 2**31 - 1
# What Go's strconv.Atoi accepts: an optional sign and ASCII digits.
_BASE10_INT: Final = re.compile(r"[+-]?[0-9]+")


def max_exec_time_seconds(labels: Mapping[str, str]) -> int | None:
    """``spec.maximumExecutionTimeSeconds`` from the ``kqueue.io/max-exec-time-seconds`` label
    of the top-level object (Kueue's ``MaximumExecutionTimeSecondsForObject``); None without it.

    Kueue's webhook refuses a value that is not a base-10 integer above 0 and its reconciler then
    ignores it; kqueue refuses to build the Workload instead, so a Job with a typo is reported
    rather than run without its limit.
    """
    raw = labels.get(c.MAX_EXEC_TIME_SECONDS_LABEL)
    if raw is None:
        return None
    path = f"metadata.labels[{c.MAX_EXEC_TIME_SECONDS_LABEL}]"
    allowed = f"a whole number of seconds from 1 to {MAX_EXEC_TIME_SECONDS_LIMIT}, e.g. \"3600\""
    if _BASE10_INT.fullmatch(raw) is None:
        raise IntegrationError(path, f"must be an integer, got {raw!r} (allowed: {allowed})")
    value = int(raw)
    if value < 1:
        raise IntegrationError(path, f"should be greater than 0, got {value} (allowed: {allowed})")
    if value > MAX_EXEC_TIME_SECONDS_LIMIT:
        raise IntegrationError(path, f"is too large, got {value} (allowed: {allowed})")
    return value


# --- metadata -----------------------------------------------------------------------------------


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}


def queue_name(obj: Mapping[str, Any]) -> str | None:
    """The LocalQueue a Job or Pod is submitted to (label ``kqueue.io/queue-name``)."""
    return labels_of(obj).get(c.QUEUE_NAME_LABEL) or None


def is_managed(obj: Mapping[str, Any]) -> bool:
    """Whether the object names a LocalQueue. Only part of the decision: which objects kqueue
    manages is ``kqueue.api.integrations.management.manages``."""
    return queue_name(obj) is not None


def workload_labels(labels: Mapping[str, str], label_keys_to_copy: Iterable[str]) -> dict[str, str]:
    """Labels a Workload takes from its owner: the configured keys, and the owner's
    preemptibility label, which the engine reads there as "the top-level owner's" label."""
    keys = {*label_keys_to_copy, c.PREEMPTIBILITY_LABEL}
    return {k: v for k, v in sorted(labels.items()) if k in keys}


def job_status_finished(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(Succeeded|Failed, message)`` once a job with the Kubeflow ``JobStatus`` finished: the
    conditions the MPI operator and the training-operator (its v1 jobs) both
    report, so the kinds that share them read them here rather than from each other."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Succeeded", "Failed") and cond.get("status") == "True":
            return str(cond["type"]), str(cond.get("message") or cond.get("reason") or "")
    return None


def kept_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in annotations.items()
        if k in KEPT_ANNOTATIONS or k.startswith(c.PROVREQ_ANNOTATION_PREFIX)
    }


def preemptibility_labels(
    workload_labels: Mapping[str, str], pod_template_labels: Iterable[Mapping[str, str]]
) -> tuple[str | None, str | None]:
    """The raw inputs of the engine's preemptibility chain, read from a Workload.

    The top-level owner's ``kqueue.io/preemptibility`` label is copied onto the Workload's own
    labels; the pods' label is in the pod set templates (the first pod set carrying it wins).
    Values are returned unparsed: the chain skips invalid ones with a warning.
    """
    owner = workload_labels.get(c.PREEMPTIBILITY_LABEL)
    pod = None
    for labels in pod_template_labels:
        if c.PREEMPTIBILITY_LABEL in labels:
            pod = labels[c.PREEMPTIBILITY_LABEL]
            break
    return owner, pod


def owner_reference(
    obj: Mapping[str, Any], *, api_version: str, kind: str, controller: bool
) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ref: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid") or ""),
    }
    if controller:
        # ctrl.SetControllerReference: the owner controls the Workload and, with foreground
        # deletion, is not gone before it.
        ref["controller"] = True
        ref["blockOwnerDeletion"] = True
    return ref


def clean_template_metadata(template: dict[str, Any]) -> None:
    """Drop ``creationTimestamp: null`` that ``kubectl get -o yaml`` prints in templates."""
    meta = template.get("metadata")
    if isinstance(meta, dict):
        if meta.get("creationTimestamp", "") is None:
            del meta["creationTimestamp"]
        if not meta:
            del template["metadata"]


def workload_spec(
    owner: Mapping[str, Any],
    pod_sets: list[dict[str, Any]],
    pod_specs: Iterable[Mapping[str, Any]],
    priorities: PriorityResolver,
) -> dict[str, Any]:
    """A Workload's spec: its pod sets, and the queue, priority, preemption priority and maximum
    execution time the labels of ``owner`` (the object it is made for) ask for."""
    labels = labels_of(owner)
    priority_ref, priority = resolve_priority(labels, list(pod_specs), priorities)
    preemption_ref, preemption_priority = resolve_preemption_priority(labels, priority, priorities)
    spec: dict[str, Any] = {"podSets": pod_sets, "priority": priority}
    if queue_name(owner) is not None:
        spec["queueName"] = queue_name(owner)
    if priority_ref is not None:
        spec["priorityClassRef"] = priority_ref
    if preemption_ref is not None:
        spec["preemptionPriorityClassRef"] = preemption_ref
        spec["preemptionPriority"] = preemption_priority
    max_exec = max_exec_time_seconds(labels)
    if max_exec is not None:
        spec["maximumExecutionTimeSeconds"] = max_exec
    return spec


def top_level_workload_doc(
    obj: Mapping[str, Any],
    *,
    api_version: str,
    kind: str,
    name: str,
    pod_sets: list[dict[str, Any]],
    pod_specs: Iterable[Mapping[str, Any]],
    priorities: PriorityResolver,
    label_keys_to_copy: Iterable[str] = (),
    replacement_for: str | None = None,
) -> dict[str, Any]:
    """The Workload document of a top-level object (any kind with one Workload per object): its pod
    sets, the queue, priority, preemption priority and maximum execution time its labels ask
    for, owned by the object and carrying its kept annotations (``replacement_for``: the
    ``namespace/name`` of the WorkloadSlice this one replaces). Callers parse it with their own
    field paths for errors."""
    meta = obj.get("metadata") or {}
    labels = labels_of(obj)
    wl_spec = workload_spec(obj, pod_sets, pod_specs, priorities)
    wl_meta: dict[str, Any] = {
        "name": name,
        "namespace": str(meta.get("namespace") or "default"),
        "ownerReferences": [owner_reference(obj, api_version=api_version, kind=kind, controller=True)],
    }
    copied = workload_labels(labels, label_keys_to_copy)
    if copied:
        wl_meta["labels"] = copied
    annotations = kept_annotations(annotations_of(obj))
    if replacement_for is not None:
        annotations[c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION] = replacement_for
    if annotations:
        wl_meta["annotations"] = annotations
    return {"apiVersion": c.API_VERSION, "kind": "Workload", "metadata": wl_meta, "spec": wl_spec}
