"""The user documentation stays true: generated parts current, values and links complete."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.chart.conftest import CHART, ROOT, Helm

DOCS = ROOT / "docs"
USER_DOCS = ["install.md", "concepts.md", "configuration.md", "troubleshooting.md", "migration.md"]
# Values whose sub-keys are free-form Kubernetes objects, documented as a whole.
OPAQUE = {
    "podSecurityContext",
    "securityContext",
    "resources",
    "livenessProbe",
    "readinessProbe",
    "config",
}


def _gen_config_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_config_docs", ROOT / "hack" / "gen-config-docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configuration_reference_is_generated_from_the_model() -> None:
    expected = _gen_config_docs().render()
    current = (DOCS / "configuration.md").read_text()
    assert current == expected, "docs/configuration.md is out of date: run hack/gen-config-docs.py"


def _value_paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    paths = []
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value and key not in OPAQUE:
            paths += _value_paths(value, path)
        else:
            paths.append(path)
    return paths


def test_every_chart_value_is_documented_in_the_readme() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    documented = set(re.findall(r"^\| `([A-Za-z0-9_.]+)` \|", readme, re.MULTILINE))
    paths = _value_paths(values)
    missing = [p for p in paths if p not in documented]
    assert not missing, f"values not documented in charts/kqueue/README.md: {missing}"
    unknown = sorted(documented - set(paths))
    assert not unknown, f"README documents values that do not exist: {unknown}"


@pytest.mark.parametrize("name", [*USER_DOCS, "../charts/kqueue/README.md"])
def test_relative_links_resolve(name: str) -> None:
    path = (DOCS / name).resolve()
    text = path.read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"^[a-z]+://", target):
            continue
        assert (path.parent / target).exists(), f"{name}: broken link {target}"


def test_install_guide_lists_every_permission_of_the_chart(helm: Helm) -> None:
    text = (DOCS / "install.md").read_text()
    section = text[text.index("### RBAC") : text.index("### Metrics")]
    documented: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0] in ("resources", "---"):
            continue
        for resource in cells[0].split(", "):
            documented.setdefault(resource, set()).update(re.findall(r"[a-z]+", cells[1]))
    for role in helm.template():
        if (
            role["kind"] not in ("ClusterRole", "Role")
            or "controller" not in role["metadata"]["name"]
        ):
            continue
        for rule in role["rules"]:
            for resource in rule["resources"]:
                assert resource in documented, f"install.md RBAC table misses {resource}"
                missing = set(rule["verbs"]) - documented[resource]
                assert not missing, f"install.md RBAC table: {resource} misses {missing}"


def test_install_guide_says_no_image_is_built_here() -> None:
    text = (DOCS / "install.md").read_text()
    assert "No container image can be built" in text


def test_migration_guide_covers_every_converted_key() -> None:
    from kqueue.api import kueue

    text = (DOCS / "migration.md").read_text()
    for old, new in kueue.KEY_MAP.items():
        assert f"`{old}`" in text.replace("label ", "").replace("annotation ", "").replace(
            "scheduling gate ", ""
        ), old
        assert new in text, new


def test_samples_named_in_the_docs_exist() -> None:
    for name in USER_DOCS:
        for sample in re.findall(r"config/samples/([a-z0-9-]+\.yaml)", (DOCS / name).read_text()):
            assert (ROOT / "config" / "samples" / sample).exists(), (name, sample)


def test_user_docs_exist() -> None:
    for name in USER_DOCS:
        assert (DOCS / name).stat().st_size > 1000, name
    assert Path(CHART / "README.md").exists()
