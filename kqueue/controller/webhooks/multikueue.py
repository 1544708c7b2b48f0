"""MultiKueue's ``spec.managedBy`` defaulting (Kueue's ``jobframework.ApplyDefaultForManagedBy``,
called by every job webhook's Default).

On the manager cluster, a job created in a LocalQueue whose ClusterQueue uses an admission
check of controller ``kqueue.io/multikueue`` gets its kind's MultiKueue ``managedBy``, so
that no controller of the manager runs it (its copy runs on a worker; docs/multikueue.md).
Only for kinds that have a MultiKueue adapter
(:func:`kqueue.controller.admission_checks.multikueue.adapters.adapter_for`): the others cannot
be dispatched, and their check says so. A ``managedBy`` the user set is kept, unless it names
the kind's own controller (the field's default): as in Kueue's ``CanDefaultManagedBy``, that
one is replaced. Only at creation: the field is immutable afterwards.

The mutating handler of each such kind is wrapped (:func:`defaulting`), so the integrations'
webhooks do not change.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kqueue.api.integrations.common import queue_name
from kqueue.api.v1alpha1 import AdmissionCheck, ClusterQueue, LocalQueue
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME
from kqueue.controller.admission_checks.multikueue.adapters import adapter_for
from kqueue.controller.informer import Store
from kqueue.controller.webhook_server import AdmissionRequest, Handler, Verdict

Obj = dict[str, Any]

# (namespace, LocalQueue name) -> whether its ClusterQueue uses a MultiKueue admission check.
MultiKueueQueue = Callable[[str, str], bool]


@dataclass(frozen=True)
class ManagedByField:
    """Where a kind keeps its managedBy, the value its own controller answers to, and the value
    MultiKueue sets (the kind's adapter's: some operators accept only Kueue's)."""

    path: tuple[str, ...]
    own_controller: str
    multikueue: str = CONTROLLER_NAME


def defaulted_kind(api_version: str, kind: str) -> ManagedByField | None:
    """The managedBy field of a kind that MultiKueue can dispatch; None for the others."""
    adapter = adapter_for(api_version, kind)
    if adapter is None or adapter.managed_by_path is None:
        return None  # none, or no managedBy (plain pods: held by kqueue's gate instead)
    # The kind's adapter declares where the manager's object carries the value, which value
    # it is, and its own controller's name.
    return ManagedByField(
        tuple(adapter.managed_by_path), adapter.own_controller, adapter.managed_by
    )


def uses_multikueue(
    namespace: str,
    queue: str,
    *,
    local_queues: Store[LocalQueue],
    cluster_queues: Store[ClusterQueue],
    checks: Store[AdmissionCheck],
) -> bool:
    """Whether LocalQueue ``namespace/queue`` points to a ClusterQueue with an admission check
    of controller ``kqueue.io/multikueue`` (Kueue: AdmissionChecksForClusterQueue; a check that
    does not exist counts as none)."""
    lq = local_queues.get(f"{namespace}/{queue}")
    cq = cluster_queues.get(lq.spec.cluster_queue or "") if lq is not None else None
    if cq is None or cq.spec.admission_checks_strategy is None:
        return False
    for rule in cq.spec.admission_checks_strategy.admission_checks:
        ac = checks.get(rule.name)
        if ac is not None and ac.spec.controller_name == CONTROLLER_NAME:
            return True
    return False


def default_managed_by(
    obj: Obj, field: ManagedByField, namespace: str, multikueue_queue: MultiKueueQueue
) -> Obj | None:
    """``obj`` with managedBy set to MultiKueue's value for its kind; None when it stays."""
    queue = queue_name(obj)
    if queue is None or not multikueue_queue(namespace, queue):
        return None
    *parents, leaf = field.path
    holder: Any = obj
    for key in parents:
        holder = holder.get(key) if isinstance(holder, dict) else None
    current = holder.get(leaf) if isinstance(holder, dict) else None
    if current not in (None, field.own_controller):
        return None  # the user's choice (MultiKueue's own value included) stands
    out = copy.deepcopy(obj)
    holder = out
    for key in parents:
        if not isinstance(holder.get(key), dict):
            holder[key] = {}
        holder = holder[key]
    holder[leaf] = field.multikueue
    return out


def defaulting(
    handler: Handler, field: ManagedByField, multikueue_queue: MultiKueueQueue
) -> Handler:
    """``handler`` (a kind's mutating webhook), then managedBy defaulted on what it allowed at
    creation (after it, as Kueue defaults managedBy after the queue name)."""

    async def mutate(req: AdmissionRequest) -> Verdict:
        verdict = await handler(req)
        if req.operation != "CREATE" or not verdict.allowed:
            return verdict
        obj = verdict.patched if verdict.patched is not None else req.object
        if obj is None:
            return verdict
        namespace = (obj.get("metadata") or {}).get("namespace") or req.namespace or "default"
        out = default_managed_by(obj, field, namespace, multikueue_queue)
        return verdict if out is None else Verdict.patch(out, *verdict.warnings)

    return mutate
