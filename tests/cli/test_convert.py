"""`kqueue convert` end to end through the CLI."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from kqueue.cli.main import cli

SAMPLES = Path(__file__).parent.parent / "api" / "kueue_samples"


def test_convert_v1beta1_list() -> None:
    res = CliRunner().invoke(cli, ["convert", str(SAMPLES / "v1beta1.yaml")])
    assert res.exit_code == 0, res.output
    docs = list(yaml.safe_load_all(res.stdout))
    assert [d["kind"] for d in docs] == [
        "ResourceFlavor",
        "ResourceFlavor",
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "WorkloadPriorityClass",
        "Workload",
    ]
    assert all(d["apiVersion"] == "kqueue.io/v1alpha1" for d in docs)
    cq = docs[2]
    assert cq["spec"]["cohortName"] == "research"
    assert "status" not in cq and "uid" not in docs[0]["metadata"]
    assert "spec.admissionChecks: not supported by kqueue" in res.stderr


def test_convert_keep_status_and_jobs(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        cli, ["convert", "--keep-status", "-o", "json", str(SAMPLES / "v1beta2.yaml")]
    )
    assert res.exit_code == 0, res.output
    items = yaml.safe_load(res.stdout)["items"]
    job = next(d for d in items if d["kind"] == "Job")
    assert job["metadata"]["labels"]["kqueue.io/queue-name"] == "gpu"


def test_convert_reconverts_its_own_output(tmp_path: Path) -> None:
    first = CliRunner().invoke(cli, ["convert", str(SAMPLES / "v1beta1.yaml")])
    out = tmp_path / "kqueue.yaml"
    out.write_text(first.stdout)
    second = CliRunner().invoke(cli, ["convert", str(out)])
    assert second.exit_code == 0, second.output
    assert second.stdout == first.stdout


def test_convert_invalid_input_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: a}\n"
        "spec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
        "    - name: f\n      resources: [{name: cpu, nominalQuota: '-2'}]\n"
    )
    res = CliRunner().invoke(cli, ["convert", str(bad)])
    assert res.exit_code == 2
    assert (
        f"{bad}: document 1 (ClusterQueue a): spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
        in res.stderr
    )


def test_convert_missing_file_exit_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["convert", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2
    assert "nope.yaml: cannot read" in res.stderr
