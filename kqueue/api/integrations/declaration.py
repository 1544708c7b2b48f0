"""What one managed kind declares about itself, once, for every layer that reads kinds.

An :class:`Integration` is the API-level half of a kind's integration: its framework name (what
``integrations.frameworks`` lists), its group/version/kind, how its objects become Workloads and
when they are finished, what it needs (another framework, an operator), whether it is on by
default and how Kueue's labels on it are renamed. Each kind's module in this package declares
one (``INTEGRATION``); :mod:`kqueue.api.integrations.registry` collects them. Configuration
validation, the management decision, the manifest loader, ``kqueue simulate``/``explain``/
``convert`` and the controller's ``Framework`` all read that one list, so a new kind is added
by writing its module and its controller package (docs/architecture.md, "Adding an
integration").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kqueue.api.v1alpha1 import Workload

Obj = Mapping[str, Any]
# ``(object, priorities, **inputs) -> Workload``; raises IntegrationError naming the field.
Builder = Callable[..., Workload]


class Workloads(Enum):
    """How objects of the kind become Workloads (in the controller and in ``kqueue simulate``)."""

    OWN = "one Workload per object"
    EACH_POD = "each of its pods its own Workload, queued by the pod integration"
    EACH_POD_GROUP = "one Workload per pod group of its pods, queued by the pod integration"
    POD = "a plain pod, or a pod group, is one Workload"


class KueueKeys(Enum):
    """How Kueue's labels, annotations and gate on an object of the kind are read."""

    WORKLOAD_OBJECT = "checked on load; renamed on the object and its pod template"
    ANY_OBJECT = "checked on load; renamed wherever the kind nests pod templates"
    ON_CONVERT = "renamed wherever the kind nests pod templates, by `kqueue convert` only"


class MaxExecTime(Enum):
    """Where a kind's Workloads take ``spec.maximumExecutionTimeSeconds`` from: the
    ``kqueue.io/max-exec-time-seconds`` label (Kueue's ``kueue.x-k8s.io/max-exec-time-seconds``),
    as Kueue reads it for the kind (``jobframework.NewWorkload`` reads the object it builds the
    Workload from)."""

    OBJECT = "the object's label"
    PODS = "each pod's label (a pod group: its oldest pod's)"
    IGNORED = "not honoured: its webhook warns, naming the object"


@dataclass(frozen=True)
class Ranks:
    """Where a pod set's pods carry their rank (Kueue's podIndexLabel, subGroupIndexLabel and
    subGroupCount), so that kqueue pins rank r to the domain holding the assignment's r-th pod
    and consecutive ranks share a domain (kqueue/controller/topology.py, ``ranked_domains``).

    A pod's rank is ``index - offset``, or with sub-groups (the child Jobs of a kind that makes several, each
    ``count / sub_group_count`` pods) ``index + sub_group * (count / sub_group_count) - offset``.
    ``offset`` is the index of the pod set's first pod, where its pods share one index space
    with another pod set (workers numbered after a launcher that runs as a worker, or after
    their leader), as Kueue's pod-index-offset annotation and
    pod-set-group offsets give it."""

    pod_index_label: str
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    offset: int = 0


def same_ranks(ranks: Ranks) -> Callable[[Obj, Workload], Mapping[str, Ranks]]:
    """:attr:`Integration.ranks` of a kind whose every pod set reads its ranks alike."""

    def of(_: Obj, wl: Workload) -> Mapping[str, Ranks]:
        return {ps.name: ranks for ps in wl.spec.pod_sets}

    return of


@dataclass(frozen=True)
class Integration:
    """One managed kind, declared once."""

    framework: str
    """The name in ``integrations.frameworks`` (Kueue's name for the same integration)."""
    api_version: str
    kind: str
    workloads: Workloads
    build: Builder | None = None
    """The Workload of an object (:attr:`Workloads.OWN`)."""
    finished: Callable[[Obj], tuple[str, str] | None] | None = None
    """``(reason, message)`` once an object finished: it then gets no Workload."""
    empty: Callable[[Obj], bool] | None = None
    """An object that keeps no Workload while it has no pods (a StatefulSet scaled to 0)."""
    pods: Callable[[Obj], list[dict[str, Any]]] | None = None
    """The pods an object runs, as the pod integration will see them (:attr:`Workloads.EACH_POD`,
    :attr:`Workloads.EACH_POD_GROUP`)."""
    pod_of: Callable[[Obj], bool] | None = None
    """Whether a pod is one of the kind's pods that the pod integration queues (its controlling
    owner is the kind's child, which no integration queues)."""
    inputs: Callable[[Iterable[Obj]], Mapping[str, Any]] | None = None
    """Keyword arguments of :attr:`build` read from the other objects of a manifest (the
    runtimes an object names), for ``kqueue simulate``."""
    reads: tuple[tuple[str, str], ...] = ()
    """Other ``(apiVersion, kind)`` its Workloads are built from (loaded and converted with it)."""
    elastic: Callable[[Obj], bool] | None = None
    """Whether an object is resized through WorkloadSlices while it runs."""
    needs: tuple[str, ...] = ()
    """Frameworks that must be enabled with it (its pods are handled by the pod integration)."""
    operator: str | None = None
    """The operator that must run (with its CRD) for objects of the kind to exist; None for a
    built-in kind."""
    default_enabled: bool = False
    """On when the Configuration lists no frameworks: only built-in kinds, so kqueue never
    waits on an API a cluster lacks."""
    queue_label_required: bool = False
    """Managed only when it names a queue, whatever ``manageJobsWithoutQueueName`` says (serving
    kinds: queued only when asked to)."""
    kueue_keys: KueueKeys = KueueKeys.ANY_OBJECT
    max_exec_time: MaxExecTime = MaxExecTime.OBJECT
    """Where its Workloads' maximum execution time comes from (tests/controller/
    test_max_exec_per_kind.py builds each kind's sample with the label and checks this)."""
    max_exec_time_spans_slices: bool = False
    """Whether a WorkloadSlice that replaces an admitted one starts with the time the replaced
    slice used (its accumulated time plus the whole seconds it was admitted), so that the
    maximum execution time spans the object's resizes. On for a kind Kueue keeps one Workload
    for while it is resized (a StatefulSet), where kqueue resizes it through slices; off for an
    elastic Job, whose slice starts its own clock in Kueue too (kqueue/engine/slice.py)."""
    ranks: Callable[[Obj, Workload], Mapping[str, Ranks]] | None = None
    """Per pod set of the object's Workload (``(object, workload)``; for a kind whose pods the
    pod integration queues, the object is one of those pods), the labels its pods' ranks are
    read from; pods of other pod sets, or of a kind without ranks, are pinned oldest first."""

    @property
    def reported_when_off(self) -> bool:
        """Whether a queue label on an object of the kind is reported while its integration is
        off (kqueue/controller/webhooks/framework_off.py). Not on plain pods: the pods of Jobs
        and other owners may carry a queue label copied from their templates, and the owner,
        not the pod, is what would be queued."""
        return self.workloads is not Workloads.POD


__all__ = ["Builder", "Integration", "KueueKeys", "Ranks", "Workloads", "same_ranks"]
