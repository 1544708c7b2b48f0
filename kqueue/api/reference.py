"""The API reference (api/reference.md), generated from the same schemas as the CRDs.

One table per kind: every field with its type, default and description, so the reference,
``kubectl explain`` and the models never disagree.
"""

from __future__ import annotations

import json

from kqueue.api.crds import Schema, openapi_schema, structural
from kqueue.api.v1alpha1 import KINDS, PodTemplateSpec
from kqueue.api.v1alpha1.constants import API_VERSION, CATEGORY


def _type(node: Schema) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "quantity"
    if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
        return "object (kept as given)"
    kind = node.get("type", "")
    if kind == "array":
        return f"[]{_type(node.get('items', {}))}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map[string]{_type(node['additionalProperties'])}"
    if "enum" in node:
        return f"{kind}: " + ", ".join(str(v) for v in node["enum"])
    if "format" in node and kind == "integer":
        return f"integer ({node['format']})"
    if node.get("format") == "date-time":
        return "time (RFC 3339)"
    return str(kind)


def _default(node: Schema) -> str:
    if "default" not in node:
        return ""
    value = node["default"]
    text = value if isinstance(value, str) and value else json.dumps(value, sort_keys=True)
    return f"`{text}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _rows(node: Schema, path: str, required: set[str]) -> list[str]:
    rows: list[str] = []
    for name, child in node.get("properties", {}).items():
        child_path = f"{path}.{name}" if path else name
        req = " (required)" if name in required else ""
        rows.append(
            f"| `{child_path}`{req} | {_type(child)} | {_default(child)} | "
            f"{_cell(child.get('description', ''))} |"
        )
        rows.extend(_nested(child, child_path))
    return rows


def _nested(node: Schema, path: str) -> list[str]:
    if node.get("type") == "array":
        items = node.get("items", {})
        return _rows(items, f"{path}[]", set(items.get("required", [])))
    if node.get("type") == "object" and "properties" in node:
        return _rows(node, path, set(node.get("required", [])))
    return []


def reference() -> str:
    """api/reference.md."""
    out = [
        f"# {API_VERSION} API reference",
        "",
        "Generated from `kqueue/api/v1alpha1` by `make crds`; do not edit. Every kind also has "
        "`apiVersion`, `kind` and the standard `metadata`. All kinds are in the category "
        f"`{CATEGORY}` (`kubectl get {CATEGORY}`). Quantities are Kubernetes quantities "
        "(`500m`, `2`, `4Gi`); kqueue stores them exactly and prints them in canonical form.",
        "",
    ]
    for kind, cls in KINDS.items():
        schema = openapi_schema(cls)
        scope = "namespaced" if cls.NAMESPACED else "cluster-scoped"
        short = ", ".join(f"`{s}`" for s in cls.SHORT_NAMES) or "none"
        out += [
            f"## {kind}",
            "",
            _cell(schema.get("description", "")),
            "",
            f"Resource `{cls.PLURAL}`, {scope}; short names: {short}.",
            "",
            "| Field | Type | Default | Description |",
            "| --- | --- | --- | --- |",
        ]
        top = {
            k: v
            for k, v in schema["properties"].items()
            if k not in ("apiVersion", "kind", "metadata")
        }
        out += _rows({"properties": top}, "", set(schema.get("required", [])))
        out.append("")
    out += [
        "### Pod template fields kqueue reads",
        "",
        "`spec.podSets[].template` is a PodTemplateSpec kept as given; kqueue reads these fields "
        "of it (and checks them when it reads a Workload):",
        "",
        "| Field | Type | Default | Description |",
        "| --- | --- | --- | --- |",
    ]
    template = template_schema()
    out += _rows(template, "template", set(template.get("required", [])))
    out.append("")
    return "\n".join(out)


def template_schema() -> Schema:
    """The schema of the pod template fields kqueue models."""
    raw = PodTemplateSpec.model_json_schema(by_alias=True, mode="validation")
    return structural(raw, raw.get("$defs", {}))
