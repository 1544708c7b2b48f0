"""Preemption protection in simulated time (docs/concepts.md, "Preemption protection").

Each case changes one thing in tests/simulate/protection/*.yaml (the Configuration, the victim's
ClusterQueue) and checks when the victim is preempted and when the preemptor is admitted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import run_cli, simulate_json

HERE = Path(__file__).parent / "protection"
START = "2024-01-01T00:00:00Z"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((HERE / name).read_text()) if d]


def _config(**protection: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "config.kqueue.io/v1alpha1", "kind": "Configuration"}
    if protection:
        doc["preemptionProtection"] = {
            path: {"minAdmitDuration": d} for path, d in protection.items()
        }
    return doc


def _cq_protection(docs: list[dict[str, Any]], cq: str, **protection: str) -> None:
    for d in docs:
        if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == cq:
            d["spec"].setdefault("preemption", {})["protection"] = {
                path: {"minAdmitDuration": v} for path, v in protection.items()
            }
            return
    raise AssertionError(f"no ClusterQueue {cq}")


def _run(docs: list[dict[str, Any]], config: dict[str, Any], until: str = "2h") -> dict[str, Any]:
    text = yaml.safe_dump_all([*docs, config])
    return simulate_json("-", "--start", START, "--until", until, input=text)


def _times(out: dict[str, Any], kind: str, workload: str) -> list[str]:
    return [e["time"] for e in out["events"] if e["type"] == kind and e["workload"] == workload]


def _preempted(out: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (e["time"], e["workload"], e["reason"]) for e in out["events"] if e["type"] == "Preempted"
    ]


def _clock(minutes: int) -> str:
    return f"2024-01-01T00:{minutes:02d}:00Z"


def test_borrowing_workload_protected_10m_is_preempted_at_10m_not_2m() -> None:
    unprotected = _run(_docs("reclaim.yaml"), _config())
    assert _preempted(unprotected) == [(_clock(2), "dev/batch", "InCohortReclamation")]
    out = _run(_docs("reclaim.yaml"), _config(reclaimWithinCohort="10m"))
    assert _preempted(out) == [(_clock(10), "dev/batch", "InCohortReclamation")]
    # Retried at the instant the protection ends: nothing else happens at 10m.
    assert _times(out, "Admitted", "prod/urgent") == [_clock(10)]


def test_waiting_preemptor_names_the_protected_workload_and_when_it_ends() -> None:
    out = _run(_docs("reclaim.yaml"), _config(reclaimWithinCohort="10m"), until="5m")
    [cond] = out["workloads"]["prod/urgent"]["conditions"]
    assert cond["reason"] == "WaitingForQuota"
    assert "dev/batch protected until 00:10:00" in cond["message"]
    assert "reclaimWithinCohort.minAdmitDuration 10m0s of the Configuration" in cond["message"]
    assert cond["message"].endswith("retrying at 00:10:00")
    # Nothing is evicted meanwhile.
    assert _preempted(out) == []


@pytest.mark.parametrize(
    ("own", "preempted_at"),
    [
        pytest.param("4m", 4, id="shorter-than-the-configuration"),
        pytest.param("15m", 15, id="longer-than-the-configuration"),
        pytest.param("0s", 2, id="zero-turns-it-off"),
    ],
)
def test_victims_cluster_queue_overrides_the_configuration(own: str, preempted_at: int) -> None:
    docs = _docs("reclaim.yaml")
    _cq_protection(docs, "dev", reclaimWithinCohort=own)
    out = _run(docs, _config(reclaimWithinCohort="10m"))
    assert _preempted(out) == [(_clock(preempted_at), "dev/batch", "InCohortReclamation")]
    assert _times(out, "Admitted", "prod/urgent") == [_clock(preempted_at)]


def test_preemptors_cluster_queue_setting_does_not_protect_other_queues_workloads() -> None:
    docs = _docs("reclaim.yaml")
    # prod's protection is for prod's own workloads as victims, not for dev's.
    _cq_protection(docs, "prod", reclaimWithinCohort="30m")
    out = _run(docs, _config())
    assert _preempted(out) == [(_clock(2), "dev/batch", "InCohortReclamation")]


def test_protection_already_expired_preempts_at_once() -> None:
    out = _run(_docs("reclaim.yaml"), _config(reclaimWithinCohort="1m"))
    assert _preempted(out) == [(_clock(2), "dev/batch", "InCohortReclamation")]


def test_other_paths_do_not_guard_reclaim() -> None:
    out = _run(_docs("reclaim.yaml"), _config(withinClusterQueue="1h", fairSharing="1h"))
    assert _preempted(out) == [(_clock(2), "dev/batch", "InCohortReclamation")]


def _within_queue() -> list[dict[str, Any]]:
    """reclaim.yaml's prod alone: urgent (high priority) preempts steady in its own queue."""
    docs = [
        d for d in _docs("reclaim.yaml")
        if d["metadata"].get("namespace") != "dev" and d["metadata"]["name"] != "dev"
    ]
    for d in docs:
        if d["kind"] == "ClusterQueue":
            d["spec"].pop("cohortName")
    steady = {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": "steady", "namespace": "prod",
            "annotations": {"simulate.kqueue.io/run-time": "1h"},
        },
        "spec": {
            "queueName": "q",
            "priority": 10,
            "podSets": [{
                "name": "main", "count": 4,
                "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "1"}}},
                ]}},
            }],
        },
    }
    return [*docs, steady]


def test_within_cluster_queue_path() -> None:
    assert _preempted(_run(_within_queue(), _config())) == [
        (_clock(2), "prod/steady", "InClusterQueue")
    ]
    out = _run(_within_queue(), _config(withinClusterQueue="5m"))
    assert _preempted(out) == [(_clock(5), "prod/steady", "InClusterQueue")]
    assert _times(out, "Admitted", "prod/urgent") == [_clock(5)]
    # The reclaim path's protection does not guard preemption within the queue.
    out = _run(_within_queue(), _config(reclaimWithinCohort="1h"))
    assert _preempted(out) == [(_clock(2), "prod/steady", "InClusterQueue")]


def _fair(**protection: str) -> dict[str, Any]:
    return {**_config(**protection), "fairSharing": {}}


def test_fair_sharing_path() -> None:
    assert _preempted(_run(_docs("fair.yaml"), _fair())) == [
        (_clock(1), "team-a/a1", "InCohortFairSharing")
    ]
    out = _run(_docs("fair.yaml"), _fair(fairSharing="10m"))
    assert _preempted(out) == [(_clock(10), "team-a/a1", "InCohortFairSharing")]
    assert _times(out, "Admitted", "team-b/b2") == [_clock(10)]
    # team-a's own setting wins over the Configuration's.
    docs = _docs("fair.yaml")
    _cq_protection(docs, "team-a", fairSharing="3m")
    out = _run(docs, _fair(fairSharing="10m"))
    assert _preempted(out) == [(_clock(3), "team-a/a1", "InCohortFairSharing")]


def test_non_preemptible_workload_stays_non_preemptible_after_its_protection() -> None:
    docs = _within_queue()
    for d in docs:
        if d["kind"] == "Workload" and d["metadata"]["name"] == "steady":
            d["spec"]["preemptibility"] = "NonPreemptible"
    out = _run(docs, _config(withinClusterQueue="5m"))
    assert _preempted(out) == []
    # urgent waits for steady to finish (1h).
    assert _times(out, "Admitted", "prod/urgent") == ["2024-01-01T01:00:00Z"]


@pytest.mark.parametrize(
    ("preemption_priority", "preempted", "urgent_at"),
    [
        pytest.param(50, [(_clock(5), "prod/steady", "InClusterQueue")], _clock(5),
                     id="below the preemptor's priority: preempted when its protection ends"),
        pytest.param(1000, [], "2024-01-01T01:00:00Z",
                     id="above it: never a candidate, the preemptor waits for its end"),
    ],
)
def test_preemption_priority_decides_as_before(
    preemption_priority: int, preempted: list[tuple[str, str, str]], urgent_at: str
) -> None:
    docs = _within_queue()
    for d in docs:
        if d["kind"] == "Workload" and d["metadata"]["name"] == "steady":
            d["spec"]["preemptionPriority"] = preemption_priority
    out = _run(docs, _config(withinClusterQueue="5m"))
    assert _preempted(out) == preempted
    assert _times(out, "Admitted", "prod/urgent") == [urgent_at]


def test_explain_shows_the_protected_workload_and_when_it_ends(tmp_path: Path) -> None:
    """``kqueue explain`` on the cluster as given: batch admitted at 13:55, protected for 10m,
    urgent created at 14:00."""
    docs = _docs("reclaim.yaml")
    for d in docs:
        if d["kind"] != "Workload":
            continue
        d["metadata"]["annotations"] = {}
        name = d["metadata"]["name"]
        d["metadata"]["creationTimestamp"] = (
            "2024-01-01T13:55:00Z" if name == "batch" else "2024-01-01T14:00:00Z"
        )
        if name == "batch":
            since = "2024-01-01T13:55:00Z"
            d["status"] = {
                "admission": {"clusterQueue": "dev", "podSetAssignments": [{
                    "name": "main", "flavors": {"cpu": "default"},
                    "resourceUsage": {"cpu": "4"}, "count": 4,
                }]},
                "conditions": [
                    {"type": kind, "status": "True", "reason": kind, "message": "",
                     "lastTransitionTime": since}
                    for kind in ("QuotaReserved", "Admitted")
                ],
            }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([*docs, _config(reclaimWithinCohort="10m")]))
    res = run_cli("explain", "-f", str(path), "prod/urgent")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "dev/batch protected until 14:05:00" in res.stdout
    assert "retrying at 14:05:00" in res.stdout
    # Without the Configuration's protection, batch would be reclaimed now.
    path.write_text(yaml.safe_dump_all([*docs, _config()]))
    res = run_cli("explain", "-f", str(path), "prod/urgent")
    assert "protected" not in res.stdout
    assert "dev/batch" in res.stdout


def test_waiting_preemptor_holds_its_quota_against_borrowers_of_the_same_cycle() -> None:
    """dev/late (4 cpu) arrives with urgent, which goes first (it does not borrow). Were late
    admitted into the quota urgent waits for, it would be protected in turn and urgent would
    wait until 12m; reclaimWithinCohort: Any cannot reclaim a protected workload, so urgent
    holds back its quota as a ClusterQueue that cannot always reclaim does (Kueue's
    quotaResourcesToReserve), and is admitted at 10m."""
    docs = _docs("reclaim.yaml")
    late = next(d for d in docs if d["metadata"]["name"] == "batch")
    late = yaml.safe_load(yaml.safe_dump(late))
    late["metadata"]["name"] = "late"
    late["metadata"]["annotations"]["simulate.kqueue.io/arrival"] = "2m"
    out = _run([*docs, late], _config(reclaimWithinCohort="10m"))
    assert _preempted(out) == [(_clock(10), "dev/batch", "InCohortReclamation")]
    assert _times(out, "Admitted", "prod/urgent") == [_clock(10)]
    assert all(at >= _clock(15) for at in _times(out, "Admitted", "dev/late"))


def test_protection_counts_from_the_current_admission_after_a_requeue() -> None:
    """batch is reclaimed at 10m, admitted again once urgent (5m) is done, then reclaimed by
    urgent-2 (arriving at 17m): its protection counts from the second Admitted condition, so it
    goes 10m after that admission, not at 17m (10m after its first would be long over)."""
    docs = _docs("reclaim.yaml")
    urgent = next(d for d in docs if d["metadata"]["name"] == "urgent")
    second = yaml.safe_load(yaml.safe_dump(urgent))
    second["metadata"]["name"] = "urgent-2"
    second["metadata"]["annotations"]["simulate.kqueue.io/arrival"] = "17m"
    out = _run([*docs, second], _config(reclaimWithinCohort="10m"))
    # Admitted again at 15m, when urgent is done.
    assert _times(out, "Admitted", "dev/batch")[:2] == [_clock(0), _clock(15)]
    assert _preempted(out) == [
        (_clock(10), "dev/batch", "InCohortReclamation"),
        (_clock(25), "dev/batch", "InCohortReclamation"),
    ]
    assert _times(out, "Admitted", "prod/urgent-2") == [_clock(25)]


def test_no_partial_set_is_evicted_while_the_preemptor_waits() -> None:
    """urgent (6 cpu) needs both of dev's borrowers gone: batch (3 cpu, admitted at 0) is past
    its 10m at 12m, late (3 cpu, admitted at 5m) is protected until 15m. Evicting batch alone at
    12m would not make room: nothing is evicted until 15m, then both go and urgent starts."""
    docs = _docs("reclaim.yaml")
    batch = next(d for d in docs if d["metadata"]["name"] == "batch")
    batch["spec"]["podSets"][0]["count"] = 3
    late = yaml.safe_load(yaml.safe_dump(batch))
    late["metadata"]["name"] = "late"
    late["metadata"]["annotations"]["simulate.kqueue.io/arrival"] = "5m"
    urgent = next(d for d in docs if d["metadata"]["name"] == "urgent")
    urgent["metadata"]["annotations"]["simulate.kqueue.io/arrival"] = "12m"
    out = _run([*docs, late], _config(reclaimWithinCohort="10m"))
    assert _times(out, "Admitted", "dev/late")[:1] == [_clock(5)]
    assert sorted(_preempted(out)) == [
        (_clock(15), "dev/batch", "InCohortReclamation"),
        (_clock(15), "dev/late", "InCohortReclamation"),
    ]
    assert _times(out, "Admitted", "prod/urgent") == [_clock(15)]


def test_simulate_text_output_shows_the_wait_and_the_preemption_at_its_end() -> None:
    """``kqueue simulate``'s tables: at 14:05 urgent is pending with the protected workload and
    when its protection ends; by 14:15 batch was preempted at 14:10 (+10m)."""
    files = [str(HERE / "reclaim.yaml"), str(HERE / "config-10m.yaml")]

    def text(until: str) -> str:
        res = run_cli("simulate", *files, "--start", "2024-01-01T14:00:00Z", "--until", until)
        assert res.exit_code == 0, res.stdout + res.stderr
        # One line per table row: the cells' wrapped lines joined, box drawing dropped.
        return " ".join(re.sub(r"[│┃┏┓┗┛┡┩└┘━─┳┻╇┼┬┴]", " ", res.stdout).split())

    waiting = text("5m")
    assert "Preempted (0 preemptions)" in waiting
    assert "dev/batch protected until 14:10:00 (reclaimWithinCohort.minAdmitDuration 10m0s" in (
        waiting
    )
    assert "retrying at 14:10:00" in waiting
    done = text("15m")
    assert "Preempted (1 preemptions)" in done
    assert re.search(r"dev/batch \+10m0s prod/urgent InCohortReclamation", done), done
