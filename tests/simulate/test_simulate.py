"""kqueue simulate: inputs, decisions checked rule by rule, time, options, invalid inputs."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.api.durations import DurationError, format_duration, parse_duration
from kqueue.sim.annotations import AnnotationError, Timing, read_timing, write_timing

from .conftest import SCENARIOS, run_cli, simulate_json


def events(out: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in out["events"] if e["type"] == kind]


def at(out: dict[str, Any], kind: str, workload: str) -> list[str]:
    return [e["time"] for e in out["events"] if e["type"] == kind and e["workload"] == workload]


# --- decisions, rule by rule (the goldens hold the rest) ---------------------------------------


def test_reclaim_within_cohort_evicts_the_borrower_not_the_lower_priority_peer() -> None:
    out = simulate_json(str(SCENARIOS / "reclaim.yaml"))
    [pre] = events(out, "Preempted")
    assert (pre["workload"], pre["preemptor"], pre["reason"]) == (
        "dev/batch",
        "prod/urgent",
        "InCohortReclamation",
    )
    assert pre["clusterQueue"] == "dev" and pre["time"] == "2024-01-01T00:00:10Z"
    # The eviction completes at the end of the cycle: the preemptor is admitted in the next one.
    [adm] = [e for e in events(out, "Admitted") if e["workload"] == "prod/urgent"]
    assert adm["cycle"] == pre["cycle"] + 1
    assert at(out, "Requeued", "dev/batch") == ["2024-01-01T00:00:10Z"]
    # Re-admitted when urgent finishes; it runs its whole run time again.
    assert at(out, "Admitted", "dev/batch") == ["2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z"]
    assert at(out, "Finished", "dev/batch") == ["2024-01-01T00:02:40Z"]
    assert not events(out, "Preempted")[1:]


def test_preemption_order_newest_and_oldest() -> None:
    out = simulate_json(str(SCENARIOS / "within-queue.yaml"))
    victims = {e["preemptor"]: (e["workload"], e["reason"]) for e in events(out, "Preempted")}
    assert victims == {
        "n/high": ("n/b", "InClusterQueue"),
        "o/high": ("o/a", "InClusterQueue"),
    }


def test_strict_fifo_blocks_best_effort_does_not() -> None:
    out = simulate_json(str(SCENARIOS / "strict-fifo.yaml"))
    start = "2024-06-01T11:59:50Z"
    assert out["events"][0] == {
        "cycle": 0,
        "time": start,
        "type": "Admitted",
        "workload": "b/holder",
        "clusterQueue": "best-effort",
        "reason": "Admitted",
        "message": "The workload is admitted",
    }
    assert at(out, "Admitted", "b/second") == [start]
    assert at(out, "Admitted", "s/second") == ["2024-06-01T12:00:30Z"]
    assert at(out, "Finished", "s/holder") == ["2024-06-01T12:00:30Z"]


def test_one_cycle_considers_one_head_per_cluster_queue() -> None:
    out = simulate_json(str(SCENARIOS / "one-cycle.yaml"), "--cycles", "1")
    assert out["cycles"] == 1
    assert sorted(e["workload"] for e in events(out, "Admitted")) == ["one/a", "two/c"]
    for key in ("one/b", "two/d"):
        w = out["workloads"][key]
        assert w["state"] == "Pending" and w["podSets"][0]["flavors"] == {}
        assert w["conditions"][0]["reason"] == "WaitingForQuota"


def test_cycles_runs_exactly_n() -> None:
    assert simulate_json(str(SCENARIOS / "one-cycle.yaml"), "--cycles", "7")["cycles"] == 7
    assert simulate_json(str(SCENARIOS / "one-cycle.yaml"), "--cycles", "0")["events"] == []


def test_jobs_and_pods_become_the_controllers_workloads() -> None:
    out = simulate_json(str(SCENARIOS / "jobs-and-pods.yaml"))
    wls = out["workloads"]
    train = next(k for k in wls if k.startswith("ml/job-train-"))
    assert len(train) == len("ml/job-train-") + 5
    assert "ml/group" in wls and [p["count"] for p in wls["ml/group"]["podSets"]] == [1, 2]
    tuning = next(k for k in wls if k.startswith("ml/job-tuning-"))
    assert wls[tuning]["podSets"][0]["count"] == 3  # partial admission down from 4
    stray = next(k for k in wls if k.startswith("other/job-stray-"))
    assert wls[stray]["conditions"][0]["reason"] == "Misconfigured"
    assert not any("unmanaged" in k for k in wls)
    # Priority 1000 from the PriorityClass puts train first.
    assert out["events"][0]["workload"] == train


def test_kueue_dumps_are_read_as_they_are() -> None:
    v1 = simulate_json(str(SCENARIOS / "kueue-v1beta1-dump.yaml"))
    assert v1["workloads"]["team-a/job-train-6bc3e"]["state"] == "Admitted"
    assert at(v1, "Admitted", "team-a/job-eval-91f0d") == ["2025-03-10T09:02:00Z"]
    big = v1["workloads"]["team-a/job-big-0d2e1"]["conditions"][0]
    assert big["reason"] == "ExceedsMaxQuota" and big["message"].endswith("(10 > 8)")
    v2 = simulate_json(str(SCENARIOS / "kueue-v1beta2-dump.yaml"))
    [pre] = events(v2, "Preempted")
    assert (pre["workload"], pre["preemptor"]) == (
        "ml/job-pretrain-5d1f0",
        "ml/job-serve-eval-8e2a7",
    )
    assert v2["clusterQueues"]["gpu-team"]["usage"] == {
        "a100": {"cpu": "16", "nvidia.com/gpu": "4"}
    }


def test_pre_admitted_workload_holds_quota_from_its_reservation() -> None:
    out = simulate_json(str(SCENARIOS / "kqueue-dump.yaml"))
    assert out["workloads"]["analytics/job-sweep-1-4f3a9"]["podSets"][0]["flavors"] == {
        "cpu": "spot"
    }
    assert out["clusterQueues"]["batch"]["usage"] == {
        "spot": {"cpu": "6"},
        "on-demand": {"cpu": "4"},
    }


def test_elastic_job_scales_by_slices() -> None:
    out = simulate_json(str(SCENARIOS / "elastic.yaml"))
    finished = {e["workload"]: e["reason"] for e in events(out, "Finished")}
    assert sorted(finished.values()) == ["Succeeded", "WorkloadSliceReplaced"]
    assert at(out, "Admitted", "ns/job-other-f4ada") == ["2024-01-01T00:00:20Z"]


def test_delete_and_deactivate() -> None:
    out = simulate_json(str(SCENARIOS / "lifecycle.yaml"))
    assert [(e["type"], e["reason"]) for e in out["events"] if e["workload"] == "ns/b"][2:] == [
        ("Deactivated", "Deactivated"),
        ("Evicted", "Deactivated"),
    ]
    reasons = {k: w["conditions"][0]["reason"] for k, w in out["workloads"].items()}
    assert reasons["ns/held"] == "Suspended"
    assert reasons["ns/lost"] == "Misconfigured"
    assert reasons["ns/off"] == "Suspended"
    assert out["workloads"]["ns/lost"]["clusterQueue"] is None


# --- time ------------------------------------------------------------------------------------


def test_until_stops_in_simulated_time() -> None:
    out = simulate_json(str(SCENARIOS / "reclaim.yaml"), "--until", "30s")
    assert not at(out, "Finished", "prod/urgent")
    assert out["workloads"]["prod/urgent"]["state"] == "Admitted"
    assert max(e["time"] for e in out["events"]) == "2024-01-01T00:00:10Z"


def test_start_moves_every_timestamp() -> None:
    out = simulate_json(str(SCENARIOS / "basic.yaml"), "--start", "2030-02-03T04:05:06Z")
    assert out["events"][0]["time"] == "2030-02-03T04:05:06Z"
    assert at(out, "Finished", "a/second") == ["2030-02-03T04:06:36Z"]


def test_same_input_same_output() -> None:
    path = str(SCENARIOS / "within-queue.yaml")
    assert simulate_json(path) == simulate_json(path)


def test_reads_stdin_and_lists() -> None:
    docs = list(yaml.safe_load_all((SCENARIOS / "basic.yaml").read_text()))
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs})
    assert simulate_json("-", input=text) == simulate_json(str(SCENARIOS / "basic.yaml"))


def test_yaml_output_equals_json() -> None:
    result = run_cli("simulate", str(SCENARIOS / "basic.yaml"), "-o", "yaml")
    assert yaml.safe_load(result.stdout) == simulate_json(str(SCENARIOS / "basic.yaml"))


def test_table_output() -> None:
    result = run_cli("simulate", str(SCENARIOS / "reclaim.yaml"), "--until", "20s")
    assert result.exit_code == 0
    text = result.stdout
    for want in (
        "ClusterQueues",
        "default/cpu 6/6",
        "Preempted (1 preemptions)",
        "prod/urgent",
        "InCohortReclamation",
        "Pending (1)",
        "dev/batch",
    ):
        assert want in text


def test_plot(tmp_path: Path) -> None:
    png = tmp_path / "out.png"
    svg = tmp_path / "out.svg"
    for path in (png, svg):
        result = run_cli(
            "simulate", str(SCENARIOS / "reclaim.yaml"), "-o", "json", "--plot", str(path)
        )
        assert result.exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert svg.read_text().lstrip().startswith("<?xml")
    bad = run_cli("simulate", str(SCENARIOS / "reclaim.yaml"), "--plot", str(tmp_path / "x.gif"))
    assert bad.exit_code == 2


def test_progress_bar_only_when_asked() -> None:
    quiet = run_cli("simulate", str(SCENARIOS / "basic.yaml"), "-o", "json")
    assert quiet.stderr == ""
    loud = run_cli("simulate", str(SCENARIOS / "basic.yaml"), "-o", "json", "--progress")
    assert loud.exit_code == 0
    json.loads(loud.stdout)  # the bar never reaches stdout


# --- invalid input: exit 2 and a message naming file, document, object and field ------------


BASE = (SCENARIOS / "basic.yaml").read_text()


@pytest.mark.parametrize(
    ("doc", "want"),
    [
        (
            "apiVersion: kqueue.io/v1alpha1\nkind: ClusterQueue\nmetadata: {name: bad}\n"
            "spec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
            "    - {name: on-demand, resources: [{name: cpu, nominalQuota: lots}]}\n",
            "document 9 (ClusterQueue bad): "
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        ),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  namespace: a\n"
            "  labels: {kqueue.io/queue-name: lq}\n"
            "  annotations: {kqueue.io/job-min-parallelism: '5'}\n"
            "spec:\n  parallelism: 2\n  template: {spec: {containers: [{name: c}]}}\n",
            "document 9 (Job j): metadata.annotations[kqueue.io/job-min-parallelism]: "
            "should be between 0 and 1",
        ),
        (
            "apiVersion: kqueue.io/v1alpha1\nkind: Workload\nmetadata:\n  name: w\n"
            "  namespace: a\n  annotations: {simulate.kqueue.io/arrival: soon}\n"
            "spec: {queueName: lq, podSets: [{name: main, count: 1, template: {spec: "
            "{containers: [{name: c}]}}}]}\n",
            "document 9 (Workload w): metadata.annotations[simulate.kqueue.io/arrival]: "
            "'soon' is not a duration",
        ),
        (
            "apiVersion: kqueue.io/v1alpha1\nkind: Workload\nmetadata:\n  name: w\n"
            "  namespace: a\n  annotations: {simulate.kqueue.io/runtime: 1s}\n"
            "spec: {queueName: lq, podSets: [{name: main, count: 1, template: {spec: "
            "{containers: [{name: c}]}}}]}\n",
            "metadata.annotations[simulate.kqueue.io/runtime]: unknown simulation annotation",
        ),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  namespace: a\n"
            "  labels: {kqueue.io/queue-name: lq}\n"
            "  annotations: {simulate.kqueue.io/scale: 10s=3}\n"
            "spec:\n  template: {spec: {containers: [{name: c}]}}\n",
            "document 9 (Job j): metadata.annotations[simulate.kqueue.io/scale]: only an elastic Job",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: a\n"
            "  labels: {kqueue.io/queue-name: lq, kqueue.io/pod-group-name: g}\n"
            "  annotations: {kqueue.io/pod-group-total-count: '2'}\n"
            "spec: {containers: [{name: c}]}\n",
            "document 9 (Pod p): metadata.annotations[kqueue.io/pod-group-total-count]: "
            "'g' group has fewer runnable pods than expected: 1 of 2",
        ),
        (
            "apiVersion: kqueue.io/v1alpha1\nkind: Workload\nmetadata: {name: first, namespace: a}\n"
            "spec: {queueName: lq, podSets: [{name: main, count: 1, template: {spec: "
            "{containers: [{name: c}]}}}]}\n",
            "document 9 (Workload first): workload a/first is defined twice",
        ),
        ("kind: [unclosed\n", "invalid YAML"),
    ],
    ids=[
        "quantity",
        "min-parallelism",
        "duration",
        "unknown-annotation",
        "scale",
        "pod-group",
        "duplicate",
        "yaml",
    ],
)
def test_invalid_input_exits_2_naming_the_place(tmp_path: Path, doc: str, want: str) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(BASE + "---\n" + doc)
    result = run_cli("simulate", str(path))
    assert result.exit_code == 2, result.stdout
    assert str(path) in result.stderr
    assert want in result.stderr


def test_missing_file_exits_2(tmp_path: Path) -> None:
    result = run_cli("simulate", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "cannot read" in result.stderr


def test_usage_errors() -> None:
    assert run_cli("simulate").exit_code == 2
    assert run_cli("simulate", "--generate", "baseline", "x.yaml").exit_code == 2
    assert run_cli("simulate", str(SCENARIOS / "basic.yaml"), "--until", "3x").exit_code == 2
    assert run_cli("simulate", str(SCENARIOS / "basic.yaml"), "--start", "yesterday").exit_code == 2


# --- durations and annotations --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("30s", "30s"),
        ("1m30s", "1m30s"),
        ("200ms", "200ms"),
        ("1.5h", "1h30m0s"),
        ("0", "0s"),
        ("250us", "250us"),
        ("1.25s", "1.25s"),
    ],
)
def test_durations(text: str, want: str) -> None:
    assert format_duration(parse_duration(text)) == want


@pytest.mark.parametrize("text", ["", "5", "-1s", "1x", "1ns", "s"])
def test_bad_durations(text: str) -> None:
    # As the simulator reads its annotations and flags: no negative offsets.
    with pytest.raises(DurationError):
        parse_duration(text, allow_negative=False)


def test_timing_round_trip() -> None:
    t = Timing(
        arrival=timedelta(seconds=30),
        run_time=timedelta(milliseconds=200),
        scale=((timedelta(seconds=60), 4), (timedelta(seconds=120), 2)),
        delete=timedelta(minutes=5),
    )
    assert read_timing(write_timing(t)) == t
    assert write_timing(t)["simulate.kqueue.io/scale"] == "1m0s=4,2m0s=2"
    with pytest.raises(AnnotationError):
        read_timing({"simulate.kqueue.io/scale": "60s"})


# --- fair sharing (--config) --------------------------------------------------------------------

FAIR = Path(__file__).parent / "fair_sharing"


def test_fair_sharing_splits_the_cohort_evenly_with_the_configuration() -> None:
    args = [str(FAIR / "teams.yaml"), "--until", "5m", "--start", "2024-01-01T00:00:00Z"]
    classical = simulate_json(*args)
    # Without fair sharing team-b only reclaims its nominal quota.
    assert classical["clusterQueues"]["team-b"]["usage"] == {"default": {"cpu": "4"}}
    assert "fairSharing" not in classical["clusterQueues"]["team-b"]
    fair = simulate_json(*args, "--config", str(FAIR / "config.yaml"))
    for team in ("team-a", "team-b"):
        entry = fair["clusterQueues"][team]
        assert entry["usage"] == {"default": {"cpu": "10"}}
        # 6 cpu borrowed of the 20 the cohort can lend.
        assert entry["fairSharing"] == {"weightedShare": 300}
    reasons = sorted(e["reason"] for e in events(fair, "Preempted"))
    assert reasons == ["InCohortFairSharing"] * 3 + ["InCohortReclamation"] * 2
    assert all(e["clusterQueue"] == "team-a" for e in events(fair, "Preempted"))


def test_invalid_configuration_is_refused_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text("fairSharing:\n  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n")
    result = run_cli("simulate", str(FAIR / "teams.yaml"), "--config", str(bad))
    assert result.exit_code == 2
    assert "fairSharing.preemptionStrategies: unsupported list" in result.stderr


# --- LimitRanges ---------------------------------------------------------------------------


def test_limit_ranges_decide_as_in_the_controller() -> None:
    out = simulate_json(str(SCENARIOS / "limit-range.yaml"))
    conditions = {k.split("-")[1] if k.startswith("ml/job-") else k: w["conditions"][0]
                  for k, w in out["workloads"].items()}
    assert conditions["small"]["reason"] == "QuotaReserved"
    assert {n: (conditions[n]["reason"], conditions[n]["message"])
            for n in ("big", "unbounded", "ml/skewed")} == {
        "big": (
            "Misconfigured",
            "resources didn't satisfy LimitRange constraints: pod set main, container train: "
            "requests must not be above the limitRange max (cpu: 3 > 2)",
        ),
        "unbounded": (
            "Misconfigured",
            "resources validation failed: pod set main, container train: requests must not "
            "exceed its limits (cpu: 3 > 2)",
        ),
        "ml/skewed": (
            "Misconfigured",
            "resources validation failed: pod set main, container train: requests must not "
            "exceed its limits (cpu: 2 > 1)",
        ),
    }


def test_bad_limit_range_is_refused_naming_the_field() -> None:
    text = (SCENARIOS / "limit-range.yaml").read_text().replace(
        "max: {cpu: \"2\"}", "max: {cpu: lots}"
    )
    result = run_cli("simulate", "-", input=text)
    assert result.exit_code == 2
    assert "LimitRange bounds" in result.stderr
    assert "spec.limits[0].max[cpu]" in result.stderr


# --- admission fair sharing (a Configuration among the inputs, or --config) ---------------------

AFS = Path(__file__).parent / "admission_fair_sharing"
AFS_ARGS = ("--start", "2024-01-01T00:00:00Z")


def _reserved(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(minute, LocalQueue namespace) of every QuotaReserved, in order."""
    return [(e["time"][14:16], e["workload"].split("/")[0]) for e in events(doc, "QuotaReserved")]


def test_admission_fair_sharing_admits_the_quiet_team_ahead_of_the_flood() -> None:
    classical = simulate_json(str(AFS / "teams.yaml"), *AFS_ARGS)
    # Without admission fair sharing: creation order, team-b waits for all of team-a's flood.
    assert [ns for _, ns in _reserved(classical)] == ["team-a"] * 12 + ["team-b"] * 6
    assert "localQueues" not in classical
    # Kueue's Configuration (v1beta2, no metadata) as one more input document.
    fair = simulate_json(str(AFS / "teams.yaml"), str(AFS / "config.yaml"), *AFS_ARGS)
    order = _reserved(fair)
    # At 5m team-a's usage has accrued, team-b's is 0: team-b's four fill the freed quota.
    assert order[4:8] == [("05", "team-b")] * 4
    # Then team-b's usage is the higher one: team-a goes next.
    assert order[8:10] == [("10", "team-a")] * 2
    assert fair["localQueues"]["team-a/main"]["consumedResources"]["cpu"] != "0"
    # --config FILE is the same as the document among the inputs.
    same = simulate_json(str(AFS / "teams.yaml"), "--config", str(AFS / "config.yaml"), *AFS_ARGS)
    assert _reserved(same) == order


def test_two_configurations_are_refused() -> None:
    result = run_cli(
        "simulate", str(AFS / "teams.yaml"), str(AFS / "config.yaml"),
        "--config", str(AFS / "config.yaml"),
    )
    assert result.exit_code == 2
    assert "already has a Configuration; give one" in result.stderr


def test_local_queue_status_usage_decays_from_start(tmp_path: Path) -> None:
    """A LocalQueue's status consumedResources is its usage at --start: team-a starting with a
    large usage lets team-b (created later) go first from the start."""
    text = (AFS / "teams.yaml").read_text().replace(
        "metadata: {name: main, namespace: team-a}\nspec: {clusterQueue: shared}",
        "metadata: {name: main, namespace: team-a}\nspec: {clusterQueue: shared}\n"
        "status:\n  fairSharing:\n    admissionFairSharingStatus:\n"
        "      consumedResources: {cpu: '100'}\n      lastUpdate: '2020-01-01T00:00:00Z'",
    )
    scenario = tmp_path / "teams.yaml"
    scenario.write_text(text)
    fair = simulate_json(str(scenario), str(AFS / "config.yaml"), *AFS_ARGS)
    order = _reserved(fair)
    assert order[:4] == [("00", "team-a")] * 4  # team-b arrives at 1m
    assert order[4:8] == [("05", "team-b")] * 4
    assert order[8:10] == [("10", "team-b")] * 2


def test_elastic_job_with_slices_off_is_requeued_whole() -> None:
    """ElasticJobsViaWorkloadSlices false: the scale-up deletes the Workload and queues a new
    one of the new size (no WorkloadSliceReplaced, no quota kept for the old pods)."""
    out = simulate_json(str(SCENARIOS / "elastic-gate-off.yaml"))
    finished = sorted(e["reason"] for e in events(out, "Finished"))
    assert "WorkloadSliceReplaced" not in finished
    assert finished == ["Deleted", "Succeeded"], finished
    admitted = [e for e in events(out, "Admitted")]
    assert [e["time"] for e in admitted] == ["2024-01-01T00:00:00Z", "2024-01-01T00:00:10Z"]
    # The new Workload runs its whole 60 s again from its admission.
    [succeeded] = [e for e in events(out, "Finished") if e["reason"] == "Succeeded"]
    assert succeeded["time"] == "2024-01-01T00:01:10Z"
