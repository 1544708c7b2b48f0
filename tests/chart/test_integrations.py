"""The chart and docs follow the integration registry: RBAC only for enabled integrations."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from kqueue.controller.integrations import frameworks
from tests.chart.conftest import Helm

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_integrations", ROOT / "hack" / "gen-integrations.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_current() -> None:
    gen = _generator()
    assert gen.CHART.read_text() == gen.chart_rbac_template() + gen.chart_webhooks_template(), (
        "run hack/gen-integrations.py"
    )
    assert gen.DOCS.read_text() == gen.docs_text(gen.DOCS.read_text()), (
        "docs/integrations.md is out of date: run hack/gen-integrations.py"
    )


def _cluster_rules(helm: Helm, values: dict[str, Any]) -> set[tuple[str, str, str]]:
    objs = helm.template(values)
    [role] = [o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-controller")]
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.mark.parametrize(
    "enabled",
    [
        ["batch/job"],
        ["pod"],
        ["batch/job", "pod"],
        ["jobset.x-k8s.io/jobset"],
        ["pod", "statefulset", "deployment"],
        None,
    ],
    ids=str,
)
def test_rbac_is_granted_only_for_enabled_integrations(helm: Helm, enabled: list[str] | None) -> None:
    values = {} if enabled is None else {"config": {"integrations": {"frameworks": enabled}}}
    rules = _cluster_rules(helm, values)
    on = {f.name for f in frameworks() if f.default_enabled} if enabled is None else set(enabled)
    for fw in frameworks():
        wanted = {
            (g, r, v) for rule in fw.rbac for g in rule.api_groups for r in rule.resources for v in rule.verbs
        }
        if fw.name in on:
            assert wanted <= rules, f"{fw.name}: missing {sorted(wanted - rules)}"
        else:
            # Core grants (pods list/watch/patch) are everyone's; the framework's own are not.
            assert not (wanted & rules), f"{fw.name} is off but granted {sorted(wanted & rules)}"
