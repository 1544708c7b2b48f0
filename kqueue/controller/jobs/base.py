"""The interface of a job integration, and the pure pod helpers every integration shares.

An integration answers questions about one kind of object (a batch/v1 Job, a pod group...):
which Workload it needs, whether it is suspended, running or finished, and how to start and stop
it. It does no I/O: it returns patches, and the generic reconciler applies them. Pods are held by
the ``kqueue.io/admission`` scheduling gate and released by :func:`ungate` once their workload is
admitted, with the assigned flavor's node labels and tolerations added.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kqueue.api.config import Configuration, LabelSelector
from kqueue.api.integrations import PriorityResolver
from kqueue.api.v1alpha1 import Workload
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import Resource

Obj = dict[str, Any]

DEFAULT_LOCAL_QUEUE = "default"
"""The LocalQueue a job without a queue label is submitted to, when its namespace has one
(Kueue's LocalQueueDefaulting)."""
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Management:
    """Which objects kqueue manages: Kueue's ``manageJobsWithoutQueueName`` and
    ``managedJobsNamespaceSelector``.

    An object with a queue label is always managed. One without is managed only with
    ``without_queue_name``, and only in namespaces the selector matches (by default every
    namespace but ``kube-system`` and kqueue's own).
    """

    without_queue_name: bool = False
    namespace_selector: LabelSelector | None = None

    @classmethod
    def from_config(cls, config: Configuration) -> Management:
        return cls(
            without_queue_name=config.manage_jobs_without_queue_name,
            namespace_selector=config.managed_jobs_namespace_selector,
        )

    def manages_unlabelled(self, namespace_labels: Mapping[str, str]) -> bool:
        if not self.without_queue_name:
            return False
        return self.namespace_selector is None or self.namespace_selector.matches(
            namespace_labels
        )


@dataclass(frozen=True)
class PodSetRelease:
    """What an admitted pod set's pods get when released: node labels and tolerations."""

    name: str
    count: int
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Obj] = ()


class Integration(Protocol):
    """One managed kind. Methods are pure; ``obj`` is the object as the API returned it."""

    name: str
    """The framework name in the configuration (``batch/job``)."""
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

    def run_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        """A merge patch that starts the object with its admission; None if it runs already."""
        ...

    def stop_patch(self, obj: Obj, wl: Workload) -> Obj | None:
        """A merge patch that stops the object after an eviction; None if already stopped."""
        ...

    def pod_set_of(self, obj: Obj, pod: Obj) -> str:
        """The pod set a pod of the object belongs to."""
        ...

    def holds_pods(self, obj: Obj) -> bool:
        """Whether the object's pods are created gated (the webhook saw the object)."""
        ...

    def hold_patch(self, obj: Obj) -> Obj | None:
        """A merge patch that makes the stopped object's future pods gated; None if they are
        already, or if the object cannot be changed yet."""
        ...


def owner_uid(obj: Obj) -> str | None:
    """UID of the controlling owner of ``obj``."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid") or "") or None
    return None


def controller_ref(obj: Obj) -> Obj | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def is_gated(pod: Obj) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(g.get("name") == c.ADMISSION_GATE for g in gates)


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def add_gate(pod_spec: Obj) -> bool:
    """Add the admission gate to a pod spec; returns whether it changed anything."""
    gates = pod_spec.setdefault("schedulingGates", [])
    if any(g.get("name") == c.ADMISSION_GATE for g in gates):
        return False
    gates.append({"name": c.ADMISSION_GATE})
    return True


def _toleration_key(t: Obj) -> tuple[Any, ...]:
    # An unset operator means Equal: the same toleration written two ways is one toleration.
    return (
        t.get("key"),
        t.get("operator") or "Equal",
        t.get("value"),
        t.get("effect"),
        t.get("tolerationSeconds"),
    )


def _same_toleration(a: Obj, b: Obj) -> bool:
    return _toleration_key(a) == _toleration_key(b)


def ungate(pod: Obj, release: PodSetRelease) -> Obj | None:
    """The pod released: gate removed, node labels and tolerations added; None if not gated.

    The API server allows exactly these changes on a gated pod (adding nodeSelector entries and
    tolerations), which is why they are made in the same update that removes the gate. A
    nodeSelector key the pod already sets is left alone: the flavor was chosen to match it.
    """
    if not is_gated(pod):
        return None
    out = copy.deepcopy(pod)
    spec = out.setdefault("spec", {})
    spec["schedulingGates"] = [
        g for g in spec.get("schedulingGates") or [] if g.get("name") != c.ADMISSION_GATE
    ]
    if not spec["schedulingGates"]:
        del spec["schedulingGates"]
    if release.node_selector:
        selector = spec.setdefault("nodeSelector", {})
        for k, v in sorted(release.node_selector.items()):
            selector.setdefault(k, v)
    if release.tolerations:
        tolerations = spec.setdefault("tolerations", [])
        for tol in release.tolerations:
            if not any(_same_toleration(tol, t) for t in tolerations):
                tolerations.append(dict(tol))
    return out



def release_ops(pod: Obj, new: Obj) -> list[Obj]:
    """The JSON patch that turns gated ``pod`` into ``new``, its :func:`ungate` result.

    It starts with a "test" of the admission gate, so a patch built from a stale copy of the pod
    fails (422) instead of removing someone else's gate; selector entries and tolerations are
    added, never rewritten.
    """
    old_spec, new_spec = pod["spec"], new["spec"]
    gates = old_spec.get("schedulingGates") or []
    index = next(i for i, g in enumerate(gates) if g.get("name") == c.ADMISSION_GATE)
    ops: list[Obj] = [
        {"op": "test", "path": f"/spec/schedulingGates/{index}", "value": gates[index]},
        {"op": "remove", "path": "/spec/schedulingGates" + ("" if len(gates) == 1 else f"/{index}")},
    ]
    if new_spec.get("nodeSelector") != old_spec.get("nodeSelector"):
        if old_spec.get("nodeSelector"):
            ops += [
                {"op": "add", "path": f"/spec/nodeSelector/{_escape(k)}", "value": v}
                for k, v in sorted(new_spec["nodeSelector"].items())
                if k not in old_spec["nodeSelector"]
            ]
        else:
            ops.append({"op": "add", "path": "/spec/nodeSelector", "value": new_spec["nodeSelector"]})
    if new_spec.get("tolerations") != old_spec.get("tolerations"):
        if old_spec.get("tolerations"):
            ops += [
                {"op": "add", "path": "/spec/tolerations/-", "value": tol}
                for tol in new_spec["tolerations"][len(old_spec["tolerations"]) :]
            ]
        else:
            ops.append({"op": "add", "path": "/spec/tolerations", "value": new_spec["tolerations"]})
    return ops


def _escape(token: str) -> str:
    """A JSON pointer token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")
