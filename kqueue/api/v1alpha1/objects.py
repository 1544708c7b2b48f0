"""The kinds of kqueue.io/v1alpha1, and reading one object from a decoded manifest."""

from __future__ import annotations

from typing import Any, Final

from pydantic import ValidationError

from kqueue.api.v1alpha1.admissioncheck import AdmissionCheck, ProvisioningRequestConfig
from kqueue.api.v1alpha1.clusterqueue import ClusterQueue
from kqueue.api.v1alpha1.cohort import Cohort
from kqueue.api.v1alpha1.constants import API_VERSION
from kqueue.api.v1alpha1.errors import FieldError, ValidationFailed, from_pydantic
from kqueue.api.v1alpha1.localqueue import LocalQueue
from kqueue.api.v1alpha1.meta import KObject
from kqueue.api.v1alpha1.multikueue import MultiKueueCluster, MultiKueueConfig
from kqueue.api.v1alpha1.priorityclass import WorkloadPriorityClass
from kqueue.api.v1alpha1.resourceflavor import ResourceFlavor
from kqueue.api.v1alpha1.topology import Topology
from kqueue.api.v1alpha1.validation import validate_rules
from kqueue.api.v1alpha1.workload import Workload

KQueueObject = (
    Topology
    | ResourceFlavor
    | ClusterQueue
    | Cohort
    | LocalQueue
    | WorkloadPriorityClass
    | Workload
    | AdmissionCheck
    | ProvisioningRequestConfig
    | MultiKueueConfig
    | MultiKueueCluster
)

# In dependency order: what a manifest should create first.
KINDS: Final[dict[str, type[KObject]]] = {
    cls.KIND: cls
    for cls in (
        Topology,
        ResourceFlavor,
        ProvisioningRequestConfig,
        MultiKueueCluster,
        MultiKueueConfig,
        AdmissionCheck,
        Cohort,
        ClusterQueue,
        LocalQueue,
        WorkloadPriorityClass,
        Workload,
    )
}


def object_ref(doc: Any) -> str:
    """``Kind ns/name`` (or ``Kind name``) of a decoded manifest, as far as it can be read."""
    if not isinstance(doc, dict):
        return ""
    kind = doc.get("kind")
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is not None and cls.NAMESPACED and isinstance(name, str):
        namespace = namespace if isinstance(namespace, str) and namespace else "default"
        return f"{kind} {namespace}/{name}"
    return " ".join(str(p) for p in (kind, name) if p)


def parse_object(doc: Any, *, validate: bool = True) -> KQueueObject:
    """Read a kqueue.io/v1alpha1 object from a decoded manifest.

    Raises :class:`ValidationFailed` listing every problem: wrong types, unknown fields, and (with
    ``validate``) every rule of :mod:`kqueue.api.v1alpha1.validation`.
    """
    ref = object_ref(doc)
    if not isinstance(doc, dict):
        raise ValidationFailed([FieldError("", "expected an object (a mapping)", obj=ref)])
    api_version = doc.get("apiVersion")
    if api_version != API_VERSION:
        raise ValidationFailed(
            [FieldError("apiVersion", f"unsupported apiVersion {api_version!r}", API_VERSION, ref)]
        )
    kind = doc.get("kind")
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValidationFailed(
            [FieldError("kind", f"unsupported kind {kind!r}", ", ".join(KINDS), ref)]
        )
    try:
        obj = cls.model_validate(doc)
    except ValidationError as exc:
        raise ValidationFailed(from_pydantic(cls, exc, ref)) from None
    assert isinstance(
        obj,
        Topology
        | ResourceFlavor
        | ClusterQueue
        | Cohort
        | LocalQueue
        | WorkloadPriorityClass
        | Workload
        | AdmissionCheck
        | ProvisioningRequestConfig
        | MultiKueueConfig
        | MultiKueueCluster,
    )
    if validate:
        errors = validate_rules(obj)
        if errors:
            raise ValidationFailed(errors)
    return obj


def to_dict(obj: KObject) -> dict[str, Any]:
    """The object as its manifest: camelCase keys, canonical quantities, empty fields omitted."""
    return obj.to_dict()
