"""Which Jobs and Pods kqueue manages: one decision for the controller, its webhooks and simulate.

Kueue's rules (``jobframework``, ``manageJobsWithoutQueueName``, ``managedJobsNamespaceSelector``)
as kqueue's controller applies them:

1. The object's integration (kqueue.api.integrations.registry) must be enabled
   (``integrations.frameworks``).
2. A batch/v1 Job with a ``kqueue.io/queue-name`` label is managed, whatever its namespace
   (Kueue's "weak" namespace exemption for job kinds). Without the label it is managed only with
   ``manageJobsWithoutQueueName`` and in a namespace ``managedJobsNamespaceSelector`` selects.
3. A v1 Pod is managed on its own (a plain pod, or a member of a pod group) when it has the
   label, no controlling owner (a Job's pods belong to the Job's Workload) or is one of the
   pods of a kind whose every pod is its own Workload (its owner is the kind's child; the kind's
   webhook marked its template), and its namespace is selected: the "strong" exemption, since
   kqueue's pod webhook never sees pods elsewhere.
4. A kind declared ``queue_label_required`` (the serving kinds) is managed when it has the label
   (Kueue's ``manageJobsWithoutQueueName`` does not reach them in kqueue: serving workloads
   queue only when asked to).

Kueue's own label (``kueue.x-k8s.io/queue-name``) means nothing to kqueue: two controllers can
run side by side, each managing its own labels. A decision that an object is not managed says
why and what to do, naming that label when the object carries it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kqueue.api.config import (
    DEFAULT_NAMESPACE,
    Configuration,
    LabelSelector,
    default_managed_namespace_selector,
)
from kqueue.api.integrations.common import labels_of, queue_name
from kqueue.api.integrations.pod import pod_based
from kqueue.api.integrations.registry import BY_KIND, DEFAULT_FRAMEWORKS, INTEGRATIONS, Workloads
from kqueue.api.kueue import KEY_MAP, KUEUE_GROUP
from kqueue.api.v1alpha1 import constants as c

# (apiVersion, kind) -> the framework that manages it.
FRAMEWORK_OF: Final[dict[tuple[str, str], str]] = {k: i.framework for k, i in BY_KIND.items()}
KUEUE_QUEUE_NAME_LABEL: Final = f"{KUEUE_GROUP}/queue-name"
# kqueue's names that kqueue itself sets (Kueue's are its own bookkeeping): not user advice.
_SET_BY_KQUEUE: Final = frozenset(
    {c.MANAGED_LABEL, c.ADMISSION_GATE, c.WORKLOAD_SLICE_REPLACEMENT_FOR_ANNOTATION}
)
# Set by the API server on every namespace; the default selector reads it.
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class ManagementPolicy:
    """The parts of the Configuration that decide which objects kqueue manages."""

    frameworks: frozenset[str] = frozenset(DEFAULT_FRAMEWORKS)
    manage_jobs_without_queue_name: bool = False
    namespace_selector: LabelSelector | None = field(
        default_factory=lambda: default_managed_namespace_selector(DEFAULT_NAMESPACE)
    )
    """None selects every namespace."""

    @classmethod
    def from_config(cls, config: Configuration) -> ManagementPolicy:
        return cls(
            frameworks=frozenset(config.integrations.frameworks),
            manage_jobs_without_queue_name=config.manage_jobs_without_queue_name,
            namespace_selector=config.managed_jobs_namespace_selector,
        )

    def selects(self, namespace_labels: Mapping[str, str]) -> bool:
        return self.namespace_selector is None or self.namespace_selector.matches(
            namespace_labels
        )


@dataclass(frozen=True)
class Management:
    """Whether kqueue manages an object, and why (a sentence a person can act on)."""

    managed: bool
    reason: str

    def __bool__(self) -> bool:
        return self.managed


def namespace_labels_of(
    namespace: str, known: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, str]:
    """A namespace's labels, with the name label the API server always sets.

    A namespace not (yet) known has only that label, which is what the default selector reads.
    """
    labels = dict((known or {}).get(namespace) or {})
    labels.setdefault(NAMESPACE_NAME_LABEL, namespace)
    return labels


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def _queued_alone(pod: Mapping[str, Any]) -> bool:
    """A pod of a kind whose every pod is its own Workload (its controlling owner is the kind's
    child, which no integration queues), or of a pod-based workload's controller (Argo
    Workflows, Tekton: ``pod.POD_BASED_OWNERS``)."""
    return pod_based(pod) or any(
        i.workloads is Workloads.EACH_POD and i.pod_of is not None and i.pod_of(pod)
        for i in INTEGRATIONS
    )


def _what_to_do(obj: Mapping[str, Any]) -> str:
    """The end of a "not managed" reason: how to have kqueue manage the object."""
    value = labels_of(obj).get(KUEUE_QUEUE_NAME_LABEL)
    if value is None:
        return f": label it {c.QUEUE_NAME_LABEL}=<LocalQueue> to have kqueue admit it"
    return (
        f"; it has Kueue's label {KUEUE_QUEUE_NAME_LABEL}={value}, which kqueue ignores: "
        f"label it {c.QUEUE_NAME_LABEL}={value} instead, or run `kqueue convert` on its manifest"
    )


def manages(
    obj: Mapping[str, Any],
    *,
    namespace_labels: Mapping[str, str] | None = None,
    policy: ManagementPolicy | None = None,
) -> Management:
    """Whether kqueue manages ``obj`` (a decoded batch/v1 Job or v1 Pod) under ``policy``.

    ``namespace_labels`` are the labels of the object's namespace (default: only
    ``kubernetes.io/metadata.name``). ``policy`` defaults to the default Configuration's. Any
    other kind is not managed (kqueue has no integration for it).
    """
    policy = policy if policy is not None else ManagementPolicy()
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    ns_labels = dict(namespace_labels or {})
    ns_labels.setdefault(NAMESPACE_NAME_LABEL, namespace)
    integration = BY_KIND.get((api_version, kind))
    if integration is None:
        return Management(False, f"kqueue has no integration for {api_version} {kind}")
    framework = integration.framework
    if framework not in policy.frameworks:
        return Management(
            False,
            f"the {framework} integration is not enabled (Configuration "
            f"integrations.frameworks: {', '.join(sorted(policy.frameworks)) or 'none'})",
        )
    named = queue_name(obj)
    if integration.workloads is Workloads.POD:
        owner = _controller(obj)
        if owner is not None and not _queued_alone(obj):
            return Management(
                False,
                f"it is controlled by {owner.get('kind')} {owner.get('name')}: its pods are "
                "admitted with their owner's Workload, not on their own",
            )
        if not policy.selects(ns_labels):
            return Management(
                False,
                f"namespace {namespace} is not selected by managedJobsNamespaceSelector, so "
                "kqueue's pod webhook never holds its pods",
            )
        if named is None:
            return Management(False, f"it has no {c.QUEUE_NAME_LABEL} label{_what_to_do(obj)}")
        return Management(True, f"it is labelled {c.QUEUE_NAME_LABEL}={named}")
    if named is not None:
        return Management(True, f"it is labelled {c.QUEUE_NAME_LABEL}={named}")
    if integration.queue_label_required:
        return Management(
            False,
            f"it has no {c.QUEUE_NAME_LABEL} label (a {kind} queues only when it names a "
            f"queue, whatever manageJobsWithoutQueueName says){_what_to_do(obj)}",
        )
    if not policy.manage_jobs_without_queue_name:
        return Management(
            False,
            f"it has no {c.QUEUE_NAME_LABEL} label and manageJobsWithoutQueueName is off"
            + _what_to_do(obj),
        )
    if not policy.selects(ns_labels):
        return Management(
            False,
            f"it has no {c.QUEUE_NAME_LABEL} label and namespace {namespace} is not selected "
            "by managedJobsNamespaceSelector" + _what_to_do(obj),
        )
    return Management(
        True,
        f"manageJobsWithoutQueueName: managed without a {c.QUEUE_NAME_LABEL} label "
        f"(submitted to the namespace's LocalQueue \"default\")",
    )


def kueue_keys(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Kueue's labels and annotations on an object kqueue reads, with kqueue's name for each.

    ``(path, kqueue key)`` pairs, such as ``("metadata.labels[kueue.x-k8s.io/priority-class]",
    "kqueue.io/priority-class")``: kqueue ignores them, so a person should rename them (which
    ``kqueue convert`` does). Kueue's bookkeeping keys without a kqueue name are left out.
    """
    out: list[tuple[str, str]] = []

    def scan(meta: Any, path: str) -> None:
        if not isinstance(meta, Mapping):
            return
        for part in ("labels", "annotations"):
            mapping = meta.get(part)
            if not isinstance(mapping, Mapping):
                continue
            for key in mapping:
                if isinstance(key, str) and key in KEY_MAP and KEY_MAP[key] not in _SET_BY_KQUEUE:
                    out.append((f"{path}.{part}[{key}]", KEY_MAP[key]))

    scan(obj.get("metadata"), "metadata")
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    if isinstance(template, Mapping):
        scan(template.get("metadata"), "spec.template.metadata")
    return out


def kueue_key_warnings(obj: Mapping[str, Any]) -> Iterable[str]:
    """One line per Kueue key on ``obj`` (see :func:`kueue_keys`), saying what to do."""
    for path, key in kueue_keys(obj):
        yield (
            f"{path}: Kueue's key is ignored by kqueue; use {key} instead, or run "
            "`kqueue convert` on the manifest"
        )


__all__ = [
    "FRAMEWORK_OF",
    "KUEUE_QUEUE_NAME_LABEL",
    "Management",
    "ManagementPolicy",
    "kueue_key_warnings",
    "kueue_keys",
    "manages",
    "namespace_labels_of",
]
