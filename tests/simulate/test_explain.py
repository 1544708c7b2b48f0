"""kqueue explain: one test per pending reason, preemption candidates, admitted flavors."""

from __future__ import annotations

import json
from typing import Any

import pytest

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
    assert run_cli("explain", "no-slash", "-f", CLUSTER).exit_code == 2
    assert run_cli("explain", "a/b", "-f", "/nonexistent.yaml").exit_code == 2
