"""Kueue's AppWrapper samples (site/static/examples/appwrapper), converted into config/samples/,
are admitted by ``kqueue simulate`` with the appwrapper framework enabled, each as one Workload
whose pod sets are its components' podSets; ``kqueue explain`` finds one by its name; with the
framework off they are skipped with the reason, and one wrapping a kind kqueue does not manage is
reported naming the component's field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kqueue.api.integrations.appwrapper import infer_pod_sets, pod_set_name

from .conftest import run_cli, simulate_json

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"

CONFIG = (
    "---\napiVersion: config.kqueue.io/v1alpha1\nkind: Configuration\n"
    "integrations:\n  frameworks: [batch/job, pod, workload.codeflare.dev/appwrapper]\n"
)
NAMES = ["appwrapper.yaml", "appwrapper-deployment.yaml", "appwrapper-leaderworkerset.yaml"]


def _expected_pod_sets(doc: dict) -> list[tuple[str, int]]:
    entries = [
        entry
        for component in doc["spec"]["components"]
        for entry in component.get("podSets") or infer_pod_sets(component["template"]) or []
    ]
    return [(pod_set_name(doc, i), entry.get("replicas", 1)) for i, entry in enumerate(entries)]


@pytest.mark.parametrize("name", NAMES)
def test_kueue_s_sample_converted_is_admitted_as_one_workload(name: str) -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    text = (SAMPLES / name).read_text()
    out = simulate_json("-", input=setup + "\n---\n" + text + CONFIG)
    [(key, wl)] = out["workloads"].items()
    [doc] = [d for d in yaml.safe_load_all(text) if d]
    assert key.startswith(f"default/appwrapper-{doc['metadata']['name']}-") and wl["state"] == "Admitted"
    assert [(ps["name"], ps["count"]) for ps in wl["podSets"]] == _expected_pod_sets(doc)
    assert len(wl["podSets"]) >= 1


def test_explain_finds_an_appwrapper_by_its_name() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    text = (SAMPLES / "appwrapper.yaml").read_text()
    result = run_cli("explain", "-f", "-", "sample-appwrapper-pytorch-job", input=setup + "\n---\n" + text + CONFIG)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Workload default/appwrapper-sample-appwrapper-pytorch-job-")
    assert "pod set sample-appwrapper-pytorch-job-1 (1 pod" in result.stdout


def test_with_its_framework_off_it_is_skipped_with_the_reason() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    result = run_cli("simulate", "-", "--output", "json", input=setup + "\n---\n" + (SAMPLES / "appwrapper.yaml").read_text())
    assert result.exit_code == 0
    assert json.loads(result.stdout)["workloads"] == {}
    assert "workload.codeflare.dev/appwrapper integration is not enabled" in result.stderr


def test_an_appwrapper_wrapping_a_kind_kqueue_does_not_manage_is_reported_naming_the_field() -> None:
    setup = (SAMPLES / "quickstart.yaml").read_text()
    [doc] = [d for d in yaml.safe_load_all((SAMPLES / "appwrapper-deployment.yaml").read_text()) if d]
    doc["spec"]["components"][0]["template"].update(apiVersion="example.com/v1", kind="Widget")
    result = run_cli("simulate", "-", "--output", "json", input=setup + "\n---\n" + yaml.safe_dump(doc) + CONFIG)
    assert json.loads(result.stdout or "{}").get("workloads", {}) == {}
    assert "spec.components[0].template.kind" in result.output
    assert "Widget (example.com/v1) is not a kind kqueue manages" in result.output


@pytest.mark.parametrize(("replicas", "made"), [(3, 4), (5, 4)], ids=["under", "over"])
def test_kueue_s_leaderworkerset_sample_with_a_wrong_worker_count_is_refused_naming_it(
    replicas: int, made: int
) -> None:
    """Kueue's sample declares 3 workers for 2 groups of size 3, which make 4 (Kueue accepts
    it): the 4th would stay gated in the gang's PodGroup, where kube-scheduler places no pod
    while one is gated. An over-count is a minCount never met. Both are refused, naming the
    field and the count allowed."""
    setup = (SAMPLES / "quickstart.yaml").read_text()
    [doc] = [
        d for d in yaml.safe_load_all((SAMPLES / "appwrapper-leaderworkerset.yaml").read_text()) if d
    ]
    doc["spec"]["components"][0]["podSets"][1]["replicas"] = replicas
    result = run_cli(
        "simulate", "-", "--output", "json", input=setup + "\n---\n" + yaml.safe_dump(doc) + CONFIG
    )
    assert json.loads(result.stdout or "{}").get("workloads", {}) == {}
    assert "spec.components[0].podSets[1].replicas" in result.output
    assert (
        f"{replicas}, but the LeaderWorkerSet makes {made} pods from "
        "template.spec.leaderWorkerTemplate.workerTemplate"
    ) in result.output
    assert f"allowed: {made}" in result.output
