"""How a job kind is dispatched to a worker: the protocol every kind's adapter follows and the
helpers they share (Kueue's ``pkg/controller/jobs/*/*_multikueue_adapter.go``).

Each kind declares its adapter in its own integration package
(``kqueue/controller/integrations/<kind>/multikueue.py``), on its registered
:class:`~kqueue.controller.integrations.framework.Framework` (``multikueue``); :data:`ADAPTERS`,
:func:`adapter_for` and :func:`dispatchable_kinds` are derived from the registered frameworks,
so no list of kinds lives here.

The manager's object carries the kind's MultiKueue ``managedBy`` value (:attr:`Adapter.managed_by`
at :attr:`Adapter.managed_by_path`), so no controller on the manager runs it; its copy on the
worker is the same object without ``managedBy``, suspended as kqueue's, labelled with the
manager's origin and with the Workload it belongs to (``kqueue.io/prebuilt-workload-name``: the
worker's kqueue adopts that Workload, already admitted there, instead of making one). The copy's
status comes back to the manager's object. Kinds without an adapter (none registered, or the
kind's served version has no ``managedBy``) cannot be dispatched: their workloads' check is
Rejected, naming the kind.

A kind without a ``managedBy`` field that kqueue itself holds on the manager (plain pods: gated,
never released there once MultiKueue places them) has an adapter with ``managed_by_path``
None; and a job made of several objects (a pod group's pods) is copied, followed and deleted as
a whole (:meth:`Adapter.members`, :meth:`Adapter.remote_names`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME, ORIGIN_LABEL, ORIGIN_UID_ANNOTATION
from kqueue.controller.kube import Kube
from kqueue.controller.resources import Resource

Obj = dict[str, Any]
Path = tuple[str, ...]

SPEC_MANAGED_BY: Final[Path] = ("spec", "managedBy")
RUN_POLICY_MANAGED_BY: Final[Path] = ("spec", "runPolicy", "managedBy")
SPEC_SUSPEND: Final[Path] = ("spec", "suspend")
RUN_POLICY_SUSPEND: Final[Path] = ("spec", "runPolicy", "suspend")
# The only MultiKueue value the CRDs (or webhooks) of Trainer, KubeRay, the MPI operator and the
# training-operator accept in managedBy, and the one their controllers leave alone: their
# MultiKueue manager-side objects carry it instead of kqueue's (docs/multikueue.md).
KUEUE_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"

StatusRule = Callable[[Obj, Obj, bool], "Obj | None"]


class Adapter(Protocol):
    """One dispatchable kind."""

    @property
    def api_version(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def resource(self) -> Resource: ...

    @property
    def managed_by(self) -> str:
        """The ``managedBy`` value a manager-side object must carry to be dispatched (unused
        when :attr:`managed_by_path` is None)."""
        ...

    @property
    def managed_by_path(self) -> Path | None:
        """Where the kind keeps ``managedBy`` (``spec.managedBy``, or
        ``spec.runPolicy.managedBy``); None for a kind without one, which kqueue holds on the
        manager itself (plain pods stay gated there)."""
        ...

    @property
    def own_controller(self) -> str:
        """The ``managedBy`` value of the kind's own controller (the field's default): the job
        webhooks replace it with :attr:`managed_by` on a MultiKueue queue (Kueue's
        ``CanDefaultManagedBy``)."""
        ...

    def remote_object(self, local: Obj, workload: str, origin: str) -> Obj:
        """The worker's copy of the manager's ``local`` object."""
        ...

    def status_update(self, local: Obj, remote: Obj, remote_finished: bool) -> Obj | None:
        """The status to write on the manager's object from the worker's copy; None: keep it
        (unchanged, or a status the suspended object here may not carry yet)."""
        ...

    def dispatch_problem(self, local: Obj) -> str | None:
        """Why the manager's object cannot be dispatched (Kueue's ``IsJobManagedByKueue``);
        None if it can."""
        ...

    async def members(self, kube: Kube, local: Obj) -> list[Obj]:
        """The manager's objects that make one job with ``local`` (itself included), read with
        the manager's ``kube``: copied to the worker and followed together."""
        ...

    async def remote_names(self, kube: Kube, namespace: str, workload: str, name: str) -> list[str]:
        """The names of the objects on the worker (``kube``) that are the copies of job
        ``name`` of Workload ``workload``: deleted together."""
        ...


def _get(obj: Obj, path: Path) -> Any:
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _set(obj: Obj, path: Path, value: Any) -> None:
    for part in path[:-1]:
        obj = obj.setdefault(part, {})
    obj[path[-1]] = value


def _pop(obj: Obj, path: Path) -> None:
    parent = _get(obj, path[:-1])
    if isinstance(parent, dict):
        parent.pop(path[-1], None)


def managed_by(adapter: Adapter, obj: Obj) -> Any:
    path = adapter.managed_by_path
    return None if path is None else _get(obj, path)


def is_dispatched(adapter: Adapter, obj: Obj) -> bool:
    """Whether ``obj`` is a manager-side object of MultiKueue (it runs on a worker), as its
    ``managedBy`` says; a kind without one cannot tell from the object alone."""
    path = adapter.managed_by_path
    return path is not None and bool(_get(obj, path) == adapter.managed_by)


def managed_problem(adapter: Adapter, local: Obj) -> str | None:
    """Why the manager's object cannot be dispatched (Kueue's IsJobManagedByKueue); None if
    it can."""
    return adapter.dispatch_problem(local)


def managed_by_problem(adapter: Adapter, local: Obj) -> str | None:
    """A kind with ``managedBy``: dispatched only with the kind's MultiKueue value there."""
    path = adapter.managed_by_path
    if path is None or is_dispatched(adapter, local):
        return None
    meta = local.get("metadata") or {}
    field = ".".join(path)
    return (
        f"{local.get('kind')} {meta.get('namespace')}/{meta.get('name')}: {field} is "
        f"{managed_by(adapter, local)!r}; set it to {adapter.managed_by!r} so that no controller "
        "of the manager cluster runs it"
    )


def remote_meta(local: Obj, workload: str, origin: str) -> Obj:
    """The copy's metadata (Kueue's CloneObjectMetaForCreation and SetMultiKueueMeta): name,
    namespace, labels and annotations, plus the origin, the Workload to adopt and the UID of the
    manager's object."""
    meta = local.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    labels[ORIGIN_LABEL] = origin
    labels[c.PREBUILT_WORKLOAD_LABEL] = workload
    annotations = dict(meta.get("annotations") or {})
    annotations[ORIGIN_UID_ANNOTATION] = str(meta.get("uid") or "")
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "labels": labels,
        "annotations": annotations,
    }


def copy_status(local: Obj, remote: Obj, remote_finished: bool) -> Obj | None:
    """Kueue's SyncJob for every kind but the batch Job: once the copy exists, its status is the
    manager object's, suspended here or not."""
    status = remote.get("status") or {}
    return status if status != (local.get("status") or {}) else None


@dataclass(frozen=True)
class CopyAdapter:
    """An adapter whose copy is the manager's object (its spec deep-copied) with ``managedBy``
    removed, suspended as kqueue's (queued on the worker until its kqueue resumes it with the
    adopted Workload's admission; a user's suspension would be left alone there), and with the
    kind's own ``clean`` applied (in place: what the manager's controllers wrote that the worker's
    write again)."""

    api_version: str
    kind: str
    resource: Resource
    own_controller: str
    managed_by: str = CONTROLLER_NAME
    managed_by_path: Path = SPEC_MANAGED_BY
    suspend_path: Path = SPEC_SUSPEND
    clean: Callable[[Obj], None] | None = None
    status: StatusRule = copy_status

    def remote_object(self, local: Obj, workload: str, origin: str) -> Obj:
        meta = remote_meta(local, workload, origin)
        meta["annotations"][c.SUSPENDED_BY_KQUEUE_ANNOTATION] = "true"
        out: Obj = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": meta,
            "spec": copy.deepcopy(local.get("spec") or {}),
        }
        _pop(out, self.managed_by_path)
        _set(out, self.suspend_path, True)
        if self.clean is not None:
            self.clean(out)
        return out

    def status_update(self, local: Obj, remote: Obj, remote_finished: bool) -> Obj | None:
        return self.status(local, remote, remote_finished)

    def dispatch_problem(self, local: Obj) -> str | None:
        return managed_by_problem(self, local)

    async def members(self, kube: Kube, local: Obj) -> list[Obj]:
        return [local]

    async def remote_names(self, kube: Kube, namespace: str, workload: str, name: str) -> list[str]:
        return [name]


class _Registered(Mapping[tuple[str, str], Adapter]):
    """The registered frameworks' adapters by ``(apiVersion, kind)``, in registration order."""

    def _all(self) -> dict[tuple[str, str], Adapter]:
        # Imported here: the kinds' packages import this module for the protocol and helpers,
        # and importing the registry imports the integrations package, which registers them all.
        from kqueue.controller.integrations import registry

        return {
            (f.api_version, f.kind): f.multikueue
            for f in registry.frameworks()
            if f.multikueue is not None
        }

    def __getitem__(self, key: tuple[str, str]) -> Adapter:
        return self._all()[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


ADAPTERS: Final[Mapping[tuple[str, str], Adapter]] = _Registered()


def adapter_for(api_version: str, kind: str) -> Adapter | None:
    return ADAPTERS.get((api_version, kind))


def dispatchable_kinds() -> list[str]:
    return [f"{a.kind} ({a.api_version})" for a in ADAPTERS.values()]
