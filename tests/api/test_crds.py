"""The generated CRDs: committed copies up to date, schemas structural, and in step with the models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api import crds
from kqueue.api.v1alpha1 import KINDS, parse_object
from tests.api import samples

API_DIR = Path(__file__).resolve().parents[2] / "api"
Schema = dict[str, Any]

# Short names of the built-in resources of a Kubernetes cluster (kubectl api-resources), and
# their plural names: kqueue's short names must not shadow any of them.
BUILTIN_NAMES = {
    "cm", "cs", "csr", "crd", "crds", "cj", "deploy", "ds", "ep", "ev", "hpa", "ing", "limits",
    "netpol", "no", "ns", "pc", "pdb", "po", "psp", "pv", "pvc", "quota", "rc", "rs", "sa", "sc",
    "svc", "sts", "ingclass", "endpointslices", "pods", "nodes", "namespaces", "jobs",
    "cronjobs", "deployments", "services", "events", "secrets", "configmaps", "leases",
    "priorityclasses", "resourcequotas", "limitranges", "storageclasses", "csinodes",
    "csidrivers", "runtimeclasses", "podtemplates", "replicasets", "statefulsets", "daemonsets",
    "ingresses", "networkpolicies", "poddisruptionbudgets", "serviceaccounts", "roles",
    "rolebindings", "clusterroles", "clusterrolebindings", "apiservices", "bindings",
    "componentstatuses", "controllerrevisions", "endpoints", "persistentvolumes",
    "persistentvolumeclaims", "replicationcontrollers", "tokenreviews", "volumeattachments",
    "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "flowschemas",
    "prioritylevelconfigurations", "certificatesigningrequests", "horizontalpodautoscalers",
}  # fmt: skip


def test_committed_files_match_the_generator() -> None:
    expected = crds.files()
    stale = [
        name
        for name, text in expected.items()
        if not (API_DIR / name).exists() or (API_DIR / name).read_text() != text
    ]
    extra = sorted(p.name for p in API_DIR.glob("*.kqueue.io.yaml") if p.name not in expected)
    assert not stale and not extra, (
        f"api/ is out of date with the models ({', '.join(stale + extra)}): run `make crds` "
        "and commit the result"
    )


def test_generation_is_deterministic() -> None:
    assert crds.files() == crds.files()


def test_files_are_valid_yaml_crds() -> None:
    for name, text in crds.files().items():
        if not name.endswith(".yaml"):
            continue
        doc = yaml.safe_load(text)
        assert doc["kind"] == "CustomResourceDefinition"
        assert name == f"{doc['metadata']['name']}.yaml"


def _nodes(node: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")


def _schemas() -> Iterator[tuple[str, Schema]]:
    for cls in KINDS.values():
        yield cls.KIND, crds.crd(cls)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize(("kind", "schema"), list(_schemas()), ids=list(KINDS))
def test_schema_is_structural(kind: str, schema: Schema) -> None:
    for path, node in _nodes(schema, kind):
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
        assert "type" in node or int_or_string or preserve, f"{path} has no type"
        for key in ("$ref", "$defs", "allOf", "oneOf", "not", "const", "title", "nullable"):
            assert key not in node, f"{path} has {key}"
        if "anyOf" in node:
            assert int_or_string and node["anyOf"] == [{"type": "integer"}, {"type": "string"}], (
                path
            )
        assert node.get("additionalProperties") is not False, f"{path}: additionalProperties false"
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("type") == "array":
            assert "items" in node, f"{path} is an array without items"
        if node.get("x-kubernetes-list-type") == "map":
            keys = node["x-kubernetes-list-map-keys"]
            item = node["items"]
            for key in keys:
                assert key in item.get("required", []) or "default" in item["properties"][key], (
                    f"{path}: map key {key} must be required or defaulted"
                )
        if "enum" in node and "default" in node:
            assert node["default"] in node["enum"], path
    assert schema["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize(("kind", "schema"), list(_schemas()), ids=list(KINDS))
def test_every_field_is_described(kind: str, schema: Schema) -> None:
    for path, node in _nodes(schema, kind):
        if path.endswith((".metadata", "[]", "{}")) or path == kind:
            continue
        assert node.get("description"), f"{path} has no description (it is kubectl explain's text)"


def test_crd_names_and_scope() -> None:
    short: list[str] = []
    for cls in KINDS.values():
        spec = crds.crd(cls)["spec"]
        assert spec["group"] == "kqueue.io"
        assert spec["scope"] == ("Namespaced" if cls.NAMESPACED else "Cluster")
        assert spec["names"]["categories"] == ["kqueue"]
        assert spec["names"]["plural"] == cls.PLURAL
        version = spec["versions"][0]
        assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
        short += spec["names"].get("shortNames", [])
        assert ("status" in version.get("subresources", {})) == ("status" in cls.model_fields)
    assert len(short) == len(set(short))
    assert not set(short) & BUILTIN_NAMES
    assert {"rf", "cq", "lq", "wl", "wpc"} <= set(short)


def test_printer_columns() -> None:
    def columns(kind: str) -> list[str]:
        version = crds.crd(KINDS[kind])["spec"]["versions"][0]
        return [c["name"] for c in version.get("additionalPrinterColumns", [])]

    assert columns("Workload") == [
        "Queue", "Reserved in", "Admitted", "Finished", "Cluster", "Age"
    ]
    assert columns("MultiKueueCluster") == ["Active", "Reason", "Age"]
    assert columns("ClusterQueue") == [
        "Cohort",
        "Strategy",
        "Pending Workloads",
        "Admitted Workloads",
    ]
    assert columns("LocalQueue") == ["ClusterQueue", "Pending Workloads", "Admitted Workloads"]
    assert columns("WorkloadPriorityClass") == ["Value"]


def test_quantities_are_int_or_string_with_the_kubernetes_pattern() -> None:
    schema = dict(_schemas())["ClusterQueue"]
    quota = schema["properties"]["spec"]["properties"]["resourceGroups"]["items"]["properties"][
        "flavors"
    ]["items"]["properties"]["resources"]["items"]
    node = quota["properties"]["nominalQuota"]
    assert node["x-kubernetes-int-or-string"] is True
    assert node["pattern"].startswith(r"^(\+|-)?")
    assert quota["required"] == ["name", "nominalQuota"]


def test_pod_template_keeps_unknown_fields() -> None:
    schema = dict(_schemas())["Workload"]
    pod_set = schema["properties"]["spec"]["properties"]["podSets"]["items"]
    template = pod_set["properties"]["template"]
    assert template["type"] == "object"
    assert template["x-kubernetes-preserve-unknown-fields"] is True


def _pruned(value: Any, node: Schema, path: str) -> list[str]:
    """Fields the API server would drop from ``value`` (not in the schema)."""
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(value, dict) and "properties" in node:
        for key, child in value.items():
            if key not in node["properties"]:
                out.append(f"{path}.{key}")
            else:
                out += _pruned(child, node["properties"][key], f"{path}.{key}")
    elif isinstance(value, dict) and isinstance(node.get("additionalProperties"), dict):
        for key, child in value.items():
            out += _pruned(child, node["additionalProperties"], f"{path}[{key}]")
    elif isinstance(value, list) and "items" in node:
        for i, child in enumerate(value):
            out += _pruned(child, node["items"], f"{path}[{i}]")
    return out


@pytest.mark.parametrize("kind", sorted(samples.ALL))
def test_schema_keeps_every_field_of_the_models(kind: str) -> None:
    schema = dict(_schemas())[kind]
    doc = parse_object(samples.load(kind)).to_dict()
    doc["metadata"] = {}
    assert _pruned(doc, schema, kind) == []


def test_generate_command_writes_the_files(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kqueue.cli.generate import generate

    result = CliRunner().invoke(generate, ["crds", "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    written = {p.name: p.read_text() for p in (tmp_path / "out").iterdir()}
    assert written == crds.files()
    again = CliRunner().invoke(generate, ["crds", "--output-dir", str(tmp_path / "out")])
    assert again.exit_code == 0 and again.output == ""
