"""kqueue explain: one test per pending reason, preemption candidates, admitted flavors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import HERE, run_cli

CLUSTER = str(HERE / "explain" / "cluster.yaml")


def explain_json(key: str) -> dict[str, Any]:
    result = run_cli("explain", key, "-f", CLUSTER, "-o", "json")
    assert result.exit_code == 0, result.stdout + result.stderr
    out = json.loads(result.stdout)
    assert isinstance(out, dict)
    return out


def explain_text(key: str) -> str:
    result = run_cli("explain", key, "-f", CLUSTER)
    assert result.exit_code == 0, result.stdout + result.stderr
    return result.stdout


def test_waiting_for_quota_with_shortfall_and_skipped_flavor() -> None:
    out = explain_json("ops/waiting")
    p = out["pending"]
    assert (p["reason"], p["positionInClusterQueue"], p["positionInLocalQueue"]) == (
        "WaitingForQuota",
        0,
        0,
    )
    [ps] = p["podSets"]
    assert ps["skippedFlavors"] == [
        {"flavor": "spot", "why": "untolerated taint spot=true:NoSchedule in flavor spot"}
    ]
    assert ps["shortfalls"] == [
        {
            "flavor": "on-demand",
            "resource": "cpu",
            "requested": "1",
            "available": "0",
            "nominal": "2",
            "borrowable": "0",
            "missing": "1",
            "maxCapacity": "2",
            "exceedsMaxQuota": False,
        }
    ]
    # Preemption cannot help: the only candidate is protected by the policy.
    [cand] = out["preemption"]["candidates"]
    assert (cand["workload"], cand["usable"], cand["why"]) == ("ops/busy", False, "PolicyNever")


def test_exceeds_max_quota() -> None:
    out = explain_json("ops/huge")
    assert out["pending"]["reason"] == "ExceedsMaxQuota"
    shortfalls = out["pending"]["podSets"][0]["shortfalls"]
    assert {s["flavor"]: (s["requested"], s["maxCapacity"]) for s in shortfalls} == {
        "spot": ("3", "2"),
        "on-demand": ("3", "2"),
    }
    assert all(s["exceedsMaxQuota"] for s in shortfalls)
    assert out["pending"]["positionInClusterQueue"] == 1


def test_no_matching_flavor() -> None:
    out = explain_json("ops/picky")
    assert out["pending"]["reason"] == "NoMatchingFlavor"
    skipped = {s["flavor"]: s["why"] for s in out["pending"]["podSets"][0]["skippedFlavors"]}
    assert skipped == {
        "spot": "untolerated taint spot=true:NoSchedule in flavor spot",
        "on-demand": "flavor on-demand doesn't match node affinity",
    }


@pytest.mark.parametrize(
    ("key", "reason", "message"),
    [
        ("ops/no-queue", "Misconfigured", "LocalQueue missing doesn't exist"),
        ("lab/lost", "Misconfigured", "ClusterQueue does-not-exist doesn't exist"),
        ("ops/held", "Suspended", "LocalQueue paused is stopped"),
        ("ops/off", "Suspended", "The workload is deactivated"),
    ],
)
def test_blocked_workloads(key: str, reason: str, message: str) -> None:
    p = explain_json(key)["pending"]
    assert (p["reason"], p["message"], p["positionInClusterQueue"]) == (reason, message, None)


def test_preemption_candidates_and_protected() -> None:
    out = explain_json("lab/urgent")
    assert out["pending"]["reason"] == "WaitingForPreemptedWorkloads"
    assert out["pending"]["preemptionTargets"] == ["lab/running-low"]
    cands = {c["workload"]: c for c in out["preemption"]["candidates"]}
    assert cands["lab/running-low"]["chosen"] is True
    assert cands["lab/running-peer"]["usable"] is False
    assert cands["lab/running-peer"]["why"] == "Priority"
    text = explain_text("lab/urgent")
    assert "would evict:\n    lab/running-low (research, priority 1)" in text
    assert "protected:\n    lab/running-peer (research): Priority:" in text


def test_admitted_workload_flavors_and_why() -> None:
    out = explain_json("lab/running-low")
    assert out["state"] == "Admitted"
    [ps] = out["admission"]["podSets"]
    assert ps["flavors"] == {"cpu": "on-demand"}
    order = ps["flavorOrder"][0]["flavors"]
    assert order == [
        {
            "flavor": "spot",
            "chosen": False,
            "mismatch": "untolerated taint spot=true:NoSchedule in flavor spot",
        },
        {"flavor": "on-demand", "chosen": True, "mismatch": None},
    ]


def test_job_name_finds_its_workload() -> None:
    out = explain_json("ops/report")
    assert out["workload"].startswith("ops/job-report-")
    assert out["state"] == "Admitted"
    assert out["admission"]["podSets"][0]["flavors"] == {"cpu": "spot"}


def test_text_output_names_positions_and_numbers() -> None:
    text = explain_text("ops/waiting")
    assert "position: 1 in ClusterQueue, 1 in LocalQueue" in text
    assert (
        "flavor on-demand, cpu: requested 1, available 0 (nominal 2, borrowable 0), missing 1"
        in (text)
    )


def test_unknown_workload_exits_1() -> None:
    result = run_cli("explain", "ops/nothing", "-f", CLUSTER)
    assert result.exit_code == 1
    assert "not found" in result.stdout


def test_bad_key_and_bad_file() -> None:
    assert run_cli("explain", "a/b/c", "-f", CLUSTER).exit_code == 2
    assert run_cli("explain", "/b", "-f", CLUSTER).exit_code == 2
    assert run_cli("explain", "a/b", "-f", "/nonexistent.yaml").exit_code == 2


# --- -n/--namespace and "did you mean" ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(["urgent", "-n", "lab"], "lab/urgent", id="name and -n"),
        pytest.param(["urgent", "--namespace", "lab"], "lab/urgent", id="name and --namespace"),
        pytest.param(["lab/urgent", "-n", "lab"], "lab/urgent", id="both, agreeing"),
        pytest.param(["report", "-n", "ops"], "ops/job-report-", id="a Job's name with -n"),
    ],
)
def test_namespace_option(args: list[str], want: str) -> None:
    result = run_cli("explain", *args, "-f", CLUSTER, "-o", "json")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["workload"].startswith(want)


def test_namespace_option_and_key_disagree() -> None:
    result = run_cli("explain", "lab/urgent", "-n", "ops", "-f", CLUSTER)
    assert result.exit_code == 2
    assert "names namespace 'lab' but --namespace is 'ops'" in result.stderr


def test_name_without_namespace_is_in_default_with_files() -> None:
    result = run_cli("explain", "urgent", "-f", CLUSTER)
    assert result.exit_code == 1
    assert result.stdout.strip() == 'workload default/urgent not found; did you mean "lab/urgent"?'


@pytest.mark.parametrize(
    ("key", "want"),
    [
        pytest.param("lab/urgnet", 'did you mean "lab/urgent"?', id="typo in the name"),
        pytest.param("ops/reprot", 'did you mean "ops/report"?', id="typo in a Job's name"),
        pytest.param("ops/urgent", 'did you mean "lab/urgent"?', id="right name, other namespace"),
        pytest.param(
            "labx/zzz",
            "namespace labx has no workloads (namespaces with workloads: lab, ops)",
            id="unknown namespace",
        ),
        pytest.param("ops/zzzzzz", None, id="nothing close"),
    ],
)
def test_unknown_workload_suggests(key: str, want: str | None) -> None:
    result = run_cli("explain", key, "-f", CLUSTER, "-o", "json")
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["found"] is False
    assert out.get("hints") == ([want] if want else None)
    text = run_cli("explain", key, "-f", CLUSTER).stdout.strip()
    assert text == f"workload {key} not found" + (f"; {want}" if want else "")


TYPO_QUEUE = """---
apiVersion: kqueue.io/v1alpha1
kind: Workload
metadata: {name: typo, namespace: lab, creationTimestamp: "2024-05-01T10:04:00Z"}
spec:
  queueName: mian
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"""


def test_unknown_local_queue_hint() -> None:
    text = (HERE / "explain" / "cluster.yaml").read_text() + TYPO_QUEUE
    result = run_cli("explain", "lab/typo", "-f", "-", "-o", "json", input=text)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["hints"] == ['LocalQueue lab/mian does not exist; did you mean "main"?']
    assert out["pending"]["message"] == "LocalQueue mian doesn't exist"
    text_out = run_cli("explain", "typo", "-n", "lab", "-f", "-", input=text).stdout
    assert text_out.splitlines()[1] == (
        'hint: LocalQueue lab/mian does not exist; did you mean "main"?'
    )


def test_unknown_cluster_queue_hint() -> None:
    out = explain_json("lab/lost")
    assert out["hints"] == [
        "LocalQueue lab/orphan points to ClusterQueue does-not-exist, which does not exist"
    ]


@pytest.mark.parametrize(
    ("context", "want"),
    [
        pytest.param({"cluster": "c", "user": "u", "namespace": "team"}, "team", id="set"),
        pytest.param({"cluster": "c", "user": "u"}, "default", id="unset"),
    ],
)
def test_cluster_mode_default_namespace_is_the_contexts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, context: dict[str, str], want: str
) -> None:
    from kqueue.cli.explain import context_namespace

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": context}],
                "current-context": "x",
            }
        )
    )
    assert context_namespace(str(kubeconfig)) == want
    assert context_namespace(str(tmp_path / "missing")) == "default"


# --- fair sharing and admission fair sharing: where they decided --------------------------------

EXPLAIN = HERE / "explain"
AFS = HERE / "admission_fair_sharing"


def _explain(*args: str) -> dict[str, Any]:
    result = run_cli("explain", *args, "-o", "json")
    assert result.exit_code == 0, result.stdout + result.stderr
    out = json.loads(result.stdout)
    assert isinstance(out, dict)
    return out


def test_fair_sharing_says_which_shares_the_tournament_compared() -> None:
    """The Configuration is one of the documents (Kueue's, without metadata)."""
    out = _explain("team-a/train", "-f", str(EXPLAIN / "fair.yaml"))
    assert out["pending"]["fairSharing"] == (
        "cohort ai: team-a 1000 (cpu) after admission vs team-b 500 (cpu), team-b first"
    )
    assert out["admittedFirst"] == ["team-b/train"]


def test_fair_sharing_preemption_names_the_strategy_that_allowed_it() -> None:
    out = _explain("team-b/train", "-f", str(EXPLAIN / "fair-preemption.yaml"))
    notes = out["preemption"]["fairSharing"]
    assert notes == [
        "team-a/train: LessThanOrEqualToFinalShare refused: share of team-b's side with the "
        "preemptor 500 (cpu) > share of team-a's side without this workload 0",
        "team-a/train: LessThanInitialShare allowed: share of team-b's side with the preemptor "
        "500 (cpu) < share of team-a's side now 1000 (cpu)",
    ]
    [preempted] = out["preemptedFirst"]
    assert (preempted["victim"], preempted["reason"]) == ("team-a/train", "InCohortFairSharing")
    assert preempted["message"].endswith("< share of team-a's side now 1000 (cpu)")


def test_admission_fair_sharing_lists_the_local_queue_usages() -> None:
    """With --config (Kueue's file), the LocalQueues' usages, lowest (next) first."""
    out = _explain(
        "team-a/a05", "-f", str(AFS / "teams.yaml"), "--config", str(AFS / "config.yaml")
    )
    usages = out["pending"]["admissionFairSharing"]
    assert [u["localQueue"] for u in usages] == ["team-a/main", "team-b/main"]
    # Two admissions each (penalties of 2 cpu x (1 - 0.5^(1m/10m))), so equal usages.
    assert usages[0]["usage"] == usages[1]["usage"] != "0"
    without = _explain("team-a/a05", "-f", str(AFS / "teams.yaml"))
    assert "admissionFairSharing" not in without["pending"]


def test_admission_fair_sharing_text() -> None:
    result = run_cli(
        "explain", "team-a/a05", "-f", str(AFS / "teams.yaml"), "--config", str(AFS / "config.yaml")
    )
    assert result.exit_code == 0
    assert "admission fair sharing in ClusterQueue shared: LocalQueue usages team-a/main" in (
        result.stdout
    )
