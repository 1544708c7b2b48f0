"""A CronJob in ``kqueue simulate`` and ``kqueue explain``: its schedule expanded into the Jobs
the CronJob controller creates over the simulated window (kqueue/sim/cronjob.py), each queued
by the Job integration; Kueue's sample-cronjob, converted (config/samples/cronjob.yaml), is
admitted."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kqueue.api.durations import parse_duration
from kqueue.api.integrations import IntegrationError
from kqueue.cli.main import cli
from kqueue.sim import cronjob

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "config" / "samples"
START = datetime(2024, 1, 1, tzinfo=UTC)  # a Monday


def _cronjob(schedule: str, **spec: Any) -> dict[str, Any]:
    doc = yaml.safe_load((SAMPLES / "cronjob.yaml").read_text())
    doc["spec"]["schedule"] = schedule
    doc["spec"].update(spec)
    return doc


def _times(schedule: str, window: timedelta, **spec: Any) -> list[timedelta]:
    """When each Job arrives, from the start."""
    jobs, _ = cronjob.jobs_of(_cronjob(schedule, **spec), START, window)
    return [parse_duration(j["metadata"]["annotations"]["simulate.kqueue.io/arrival"]) for j in jobs]


M, H, D = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)


@pytest.mark.parametrize(
    ("schedule", "window", "expected"),
    [
        pytest.param("* * * * *", timedelta(minutes=3), [0 * M, 1 * M, 2 * M], id="every minute"),
        pytest.param("*/15 * * * *", timedelta(hours=1), [0 * M, 15 * M, 30 * M, 45 * M], id="step"),
        pytest.param("5,10-11 * * * *", timedelta(minutes=30), [5 * M, 10 * M, 11 * M], id="list and range"),
        pytest.param("@hourly", timedelta(hours=3), [0 * H, 1 * H, 2 * H], id="descriptor"),
        pytest.param("0 0 * * TUE", timedelta(days=7), [1 * D], id="day name (2024-01-02 is a Tuesday)"),
        pytest.param("0 0 2 * 0", timedelta(days=8), [1 * D, 6 * D], id="both day fields: either matches"),
        pytest.param("0 9 * * *", timedelta(hours=12), [9 * H], id="hour"),
    ],
)
def test_schedule_fires(schedule: str, window: timedelta, expected: list[timedelta]) -> None:
    assert _times(schedule, window) == expected


def test_time_zone_moves_the_schedule() -> None:
    assert _times("0 9 * * *", timedelta(days=1), timeZone="Europe/Paris") == [8 * H]


def test_jobs_are_named_and_owned_as_the_cronjob_controller_makes_them() -> None:
    jobs, warnings = cronjob.jobs_of(_cronjob("* * * * *"), START, timedelta(minutes=2))
    assert [j["metadata"]["name"] for j in jobs] == [
        f"sample-cronjob-{int(START.timestamp()) // 60 + n}" for n in range(2)
    ]
    [owner] = jobs[0]["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("CronJob", "sample-cronjob", True)
    assert jobs[0]["metadata"]["labels"] == {"kqueue.io/queue-name": "user-queue"}
    assert jobs[0]["spec"]["parallelism"] == 3
    assert warnings == []


def test_a_suspended_cronjob_creates_no_job_and_forbid_is_reported() -> None:
    assert cronjob.jobs_of(_cronjob("* * * * *", suspend=True), START, timedelta(hours=1))[0] == []
    _, warnings = cronjob.jobs_of(_cronjob("* * * * *", concurrencyPolicy="Forbid"), START, timedelta(minutes=1))
    assert warnings == ["spec.concurrencyPolicy Forbid is simulated as Allow (every scheduled Job is created)"]


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        pytest.param({"schedule": "* * *"}, "spec.schedule", "expected 5 fields", id="too few fields"),
        pytest.param({"schedule": "61 * * * *"}, "spec.schedule", "outside 0-59", id="minute out of range"),
        pytest.param({"schedule": "* * * FOO *"}, "spec.schedule", "is not a number", id="bad name"),
        pytest.param({"timeZone": "Mars/Olympus"}, "spec.timeZone", "unknown time zone", id="bad zone"),
        pytest.param({"jobTemplate": {}}, "spec.jobTemplate.spec", "required", id="no job template"),
    ],
)
def test_bad_cronjobs_are_refused_naming_the_field(spec: dict[str, Any], path: str, message: str) -> None:
    doc = _cronjob("* * * * *")
    doc["spec"].update(spec)
    with pytest.raises(IntegrationError) as info:
        cronjob.jobs_of(doc, START, timedelta(minutes=5))
    assert info.value.path == path and message in info.value.detail


def test_kueue_s_sample_cronjob_is_admitted_by_simulate() -> None:
    res = CliRunner().invoke(
        cli,
        ["simulate", "-o", "json", "--until", "3m", "--start", "2024-01-01T00:00:00Z",
         str(SAMPLES / "quickstart.yaml"), str(SAMPLES / "cronjob.yaml")],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    admitted = sorted(k for k, w in out["workloads"].items() if w["state"] == "Admitted")
    # Every minute of the 3 (at 0s, 1m, 2m; the --until end is exclusive): 3 pods of 1 CPU each,
    # 12 CPUs of quota in the quickstart's two flavors.
    assert len(admitted) == 3, out["workloads"]
    assert all(w.startswith("default/job-sample-cronjob-") for w in admitted)


def test_explain_finds_the_cronjob_s_current_job() -> None:
    res = CliRunner().invoke(
        cli,
        ["explain", "default/sample-cronjob", "-f", str(SAMPLES / "quickstart.yaml"),
         "-f", str(SAMPLES / "cronjob.yaml")],
    )
    assert res.exit_code == 0, res.output
    first = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp()) // 60
    assert res.output.startswith(f"Workload default/job-sample-cronjob-{first}-"), res.output
