"""CustomResourceDefinitions of kqueue.io/v1alpha1, generated from the models.

Pure functions: they return dicts and text; ``kqueue generate crds`` writes the files. The schema
is pydantic's JSON schema made *structural*, as the API server requires: references inlined,
``Optional`` unwrapped, every node typed (quantities are int-or-string, the pod template keeps
unknown fields), no ``additionalProperties: false``, and Kubernetes' extensions (list types, CEL
rules, defaults) carried over from the models' field metadata.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from kqueue.api.v1alpha1 import KINDS, KObject
from kqueue.api.v1alpha1.constants import CATEGORY, GROUP, VERSION

Schema = dict[str, Any]

GENERATED_HEADER: Final = "# Generated from kqueue/api/v1alpha1 by `make crds`. Do not edit.\n"

_API_VERSION_DESCRIPTION: Final = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should "
    "convert recognized schemas to the latest internal value, and may reject unrecognized values."
)
_KIND_DESCRIPTION: Final = (
    "Kind is a string value representing the REST resource this object represents. Servers may "
    "infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase."
)

# Columns kubectl prints, as Kueue's. priority 1 columns appear with -o wide.
PRINTER_COLUMNS: Final[dict[str, list[dict[str, Any]]]] = {
    "ClusterQueue": [
        {
            "name": "Cohort",
            "type": "string",
            "jsonPath": ".spec.cohortName",
            "description": "Cohort that this ClusterQueue belongs to",
        },
        {
            "name": "Strategy",
            "type": "string",
            "jsonPath": ".spec.queueingStrategy",
            "description": "The queueing strategy used to prioritize workloads",
            "priority": 1,
        },
        {
            "name": "Pending Workloads",
            "type": "integer",
            "jsonPath": ".status.pendingWorkloads",
            "description": "Number of pending workloads",
        },
        {
            "name": "Admitted Workloads",
            "type": "integer",
            "jsonPath": ".status.admittedWorkloads",
            "description": "Number of admitted workloads that haven't finished yet",
            "priority": 1,
        },
    ],
    "LocalQueue": [
        {
            "name": "ClusterQueue",
            "type": "string",
            "jsonPath": ".spec.clusterQueue",
            "description": "Backing ClusterQueue",
        },
        {
            "name": "Pending Workloads",
            "type": "integer",
            "jsonPath": ".status.pendingWorkloads",
            "description": "Number of pending workloads",
        },
        {
            "name": "Admitted Workloads",
            "type": "integer",
            "jsonPath": ".status.admittedWorkloads",
            "description": "Number of admitted workloads that haven't finished yet",
        },
    ],
    "Workload": [
        {
            "name": "Queue",
            "type": "string",
            "jsonPath": ".spec.queueName",
            "description": "Name of the queue this workload was submitted to",
        },
        {
            "name": "Reserved in",
            "type": "string",
            "jsonPath": ".status.admission.clusterQueue",
            "description": "Name of the ClusterQueue where the workload is reserving quota",
        },
        {
            "name": "Admitted",
            "type": "string",
            "jsonPath": ".status.conditions[?(@.type=='Admitted')].status",
            "description": "Admission status",
        },
        {
            "name": "Finished",
            "type": "string",
            "jsonPath": ".status.conditions[?(@.type=='Finished')].status",
            "description": "Workload finished",
        },
        {
            "name": "Cluster",
            "type": "string",
            "jsonPath": ".status.clusterName",
            "description": "MultiKueue: the worker cluster the workload runs on",
            "priority": 1,
        },
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": "Time this workload was created",
        },
    ],
    "WorkloadPriorityClass": [
        {
            "name": "Value",
            "type": "integer",
            "jsonPath": ".value",
            "description": "Value of workloadPriorityClass's Priority",
        }
    ],
    "MultiKueueCluster": [
        {
            "name": "Active",
            "type": "string",
            "jsonPath": ".status.conditions[?(@.type=='Active')].status",
            "description": "Whether the manager is connected to the worker cluster",
        },
        {
            "name": "Reason",
            "type": "string",
            "jsonPath": ".status.conditions[?(@.type=='Active')].reason",
            "description": "Why it is (not) active",
            "priority": 1,
        },
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": "Time this cluster was created",
        },
    ],
}

_DROP: Final = frozenset({"title", "additionalProperties", "$defs", "const"})


def structural(node: Schema, defs: dict[str, Schema]) -> Schema:
    """One pydantic JSON schema node as a structural OpenAPI v3 node."""
    node = dict(node)
    ref = node.pop("$ref", None)
    if ref is not None:
        target = defs[ref.rsplit("/", 1)[-1]]
        if node.get("x-kubernetes-preserve-unknown-fields"):
            # An opaque field (the pod template): kept as it is, checked by kqueue when read.
            node.setdefault("type", "object")
            return _clean(node)
        merged = structural(target, defs)
        merged.update(_clean(node))  # the field's description and default win over the type's
        return merged
    any_of = node.get("anyOf")
    if any_of is not None and {"type": "null"} in any_of:
        rest = [x for x in any_of if x != {"type": "null"}]
        node.pop("anyOf")
        if node.get("default", 0) is None:
            node.pop("default")
        if len(rest) != 1:
            raise ValueError(f"cannot make a structural schema of {any_of}")
        inner = structural(rest[0], defs)
        inner.update(_clean(node))
        return inner
    out = _clean(node)
    if "properties" in node:
        out["properties"] = {k: structural(v, defs) for k, v in node["properties"].items()}
        out.setdefault("type", "object")
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = structural(extra, defs)
    elif extra is True:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "items" in node:
        out["items"] = structural(node["items"], defs)
    return out


# Constraints pydantic leaves in its own vocabulary on Optional fields, in OpenAPI's.
_RENAME: Final = {
    "ge": "minimum",
    "le": "maximum",
    "min_length": "minLength",
    "max_length": "maxLength",
}


def _clean(node: Schema) -> Schema:
    out = {
        _RENAME.get(k, k): v
        for k, v in node.items()
        if k not in _DROP and k not in ("properties", "items")
    }
    if "default" in out and out["default"] is None:
        del out["default"]
    return out


def _sorted(node: Any) -> Any:
    """Schema keys in alphabetical order (as controller-gen writes them), for stable output."""
    if isinstance(node, dict):
        return {k: _sorted(node[k]) for k in sorted(node)}
    if isinstance(node, list):
        return [_sorted(v) for v in node]
    return node


def openapi_schema(cls: type[KObject]) -> Schema:
    """The structural openAPIV3Schema of one kind."""
    raw = cls.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Schema] = raw.get("$defs", {})
    schema = structural(raw, defs)
    props = schema["properties"]
    props["apiVersion"] = {"type": "string", "description": _API_VERSION_DESCRIPTION}
    props["kind"] = {"type": "string", "description": _KIND_DESCRIPTION}
    # Only name and generateName may be constrained in metadata; the API server validates it.
    props["metadata"] = {"type": "object"}
    schema["required"] = [r for r in schema.get("required", []) if r not in ("kind", "metadata")]
    if not schema["required"]:
        del schema["required"]
    schema.pop("default", None)
    return _sorted(schema)  # type: ignore[no-any-return]


def crd_name(cls: type[KObject]) -> str:
    return f"{cls.PLURAL}.{GROUP}"


def crd(cls: type[KObject]) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of one kind."""
    names: dict[str, Any] = {
        "kind": cls.KIND,
        "listKind": f"{cls.KIND}List",
        "plural": cls.PLURAL,
        "singular": cls.KIND.lower(),
        "categories": [CATEGORY],
    }
    if cls.SHORT_NAMES:
        names["shortNames"] = list(cls.SHORT_NAMES)
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": openapi_schema(cls)},
    }
    if "status" in cls.model_fields:
        version["subresources"] = {"status": {}}
    if cls.KIND in PRINTER_COLUMNS:
        version["additionalPrinterColumns"] = PRINTER_COLUMNS[cls.KIND]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name(cls)},
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": "Namespaced" if cls.NAMESPACED else "Cluster",
            "versions": [version],
        },
    }


def crds() -> dict[str, dict[str, Any]]:
    """Every CRD by file name (``<plural>.kqueue.io.yaml``)."""
    return {f"{crd_name(cls)}.yaml": crd(cls) for cls in KINDS.values()}


class _Dumper(yaml.SafeDumper):
    """Block style, no anchors: the same input always gives the same text."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(obj: Any) -> str:
    """Deterministic YAML: keys in the order given, no line wrapping, no aliases."""
    return yaml.dump(
        obj,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1_000_000,
    )


def render(crd_obj: dict[str, Any]) -> str:
    """A CRD file's text."""
    return GENERATED_HEADER + to_yaml(crd_obj)


def files() -> dict[str, str]:
    """Every generated file under api/ by name: the CRDs and the API reference."""
    from kqueue.api.reference import reference

    out = {name: render(obj) for name, obj in crds().items()}
    out["reference.md"] = reference()
    return out
