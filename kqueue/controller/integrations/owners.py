"""Owner references: how a pod or a Workload finds the object that owns it.

The stores of pods and Workloads are indexed by their controlling owner's UID (:data:`BY_OWNER`),
so an integration finds an object's pods and Workloads without a scan. An integration whose pods
are not owned by its top-level object directly (its pods belong to child Jobs) finds them
through its own labels instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kqueue.api.v1alpha1 import Workload

if TYPE_CHECKING:
    from kqueue.controller.informer import Store

Obj = dict[str, Any]

# Index name on the shared pod and Workload stores: the UIDs of an object's controlling owners
# and, for pods, the object key of each integration's top-level object that claims them
# (:func:`object_index_key`: a pod owned by a child Job says which top-level object it belongs
# to only in its labels).
BY_OWNER = "owner-uid"


def object_index_key(kind: str, key: str) -> str:
    """The pod index key of a top-level object: ``Kind:namespace/name``."""
    return f"{kind}:{key}"


def owner_uids(obj: Obj | Workload) -> list[str]:
    if isinstance(obj, Workload):
        # Read from the models (an index function: runs twice on every Workload event).
        return [r.uid for r in obj.metadata.owner_references if r.controller and r.uid]
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(r.get("uid")) for r in refs if r.get("controller") and r.get("uid")]


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


def controlled_by(obj: Obj, kinds: frozenset[tuple[str, str]]) -> bool:
    """Whether the controller of ``obj`` is one of ``kinds`` (``(apiVersion, kind)``): a child
    another integration's object queues as part of itself (the child Jobs or clusters
    its operator creates), never on its own."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and (ref.get("apiVersion"), ref.get("kind")) in kinds:
            return True
    return False


def pods_of_workload(pods: Store[Obj], wl: Workload) -> list[Obj]:
    """The pods of any Workload, through its owners: a pod group's own pods, or the pods its
    top-level object controls or claims through its integration (``pods`` indexed
    :data:`BY_OWNER`)."""
    namespace = wl.namespace or "default"
    out: dict[str, Obj] = {}
    for ref in wl.metadata.owner_references:
        if ref.kind == "Pod":
            pod = pods.get(f"{namespace}/{ref.name}")
            if pod is not None and (pod.get("metadata") or {}).get("uid") == ref.uid:
                out[ref.uid] = pod
        elif ref.controller:
            for index_key in (ref.uid, object_index_key(ref.kind, f"{namespace}/{ref.name}")):
                for pod in pods.by_index(BY_OWNER, index_key):
                    out[str(pod["metadata"].get("uid"))] = pod
    return list(out.values())
