"""`kqueue convert` of Kueue's KEP-9876 preemption protection fields (docs/contracts.md §6)."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner, Result

from kqueue.api.config import parse_configuration
from kqueue.cli.main import cli

HEAD = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def _convert(text: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["convert", *args, "-"], input=text)


def test_kep_9876_preemption_protection_is_kept_as_it_is() -> None:
    text = HEAD + (
        "preemptionProtection:\n"
        "  fairSharing: {minAdmitDuration: 1h}\n"
        "  reclaimWithinCohort: {minAdmitDuration: 10m}\n"
    )
    res = _convert(text, "--strict")
    assert res.exit_code == 0, res.stderr
    out = yaml.safe_load(res.stdout)
    assert out["preemptionProtection"] == {
        "fairSharing": {"minAdmitDuration": "1h"},
        "reclaimWithinCohort": {"minAdmitDuration": "10m"},
    }
    cfg = parse_configuration(out).preemption_protection
    assert cfg is not None and cfg.reclaim_within_cohort is not None
    assert cfg.reclaim_within_cohort.min_admit_duration.total_seconds() == 600


def test_kep_9876_first_revision_names_become_preemption_protection() -> None:
    text = HEAD + (
        "fairSharing: {preemptionStrategies: [LessThanInitialShare], minAdmitDuration: 30m}\n"
        "reclaimMinAdmitDuration: 5m\n"
    )
    res = _convert(text, "--strict")
    assert res.exit_code == 0, res.stderr
    out = yaml.safe_load(res.stdout)
    assert out["fairSharing"] == {"preemptionStrategies": ["LessThanInitialShare"]}
    assert out["preemptionProtection"] == {
        "fairSharing": {"minAdmitDuration": "30m"},
        "reclaimWithinCohort": {"minAdmitDuration": "5m"},
    }


def test_current_name_wins_over_the_first_revisions() -> None:
    text = HEAD + (
        "reclaimMinAdmitDuration: 5m\n"
        "preemptionProtection: {reclaimWithinCohort: {minAdmitDuration: 10m}}\n"
    )
    res = _convert(text)
    assert res.exit_code == 0, res.stderr
    out = yaml.safe_load(res.stdout)
    assert out["preemptionProtection"] == {"reclaimWithinCohort": {"minAdmitDuration": "10m"}}
    assert "reclaimMinAdmitDuration: preemptionProtection.reclaimWithinCohort is given too" in (
        res.stderr
    )
    assert _convert(text, "--strict").exit_code == 2


@pytest.mark.parametrize("bad", ["-5m", "ten minutes"])
def test_bad_duration_is_refused_naming_the_field(bad: str) -> None:
    res = _convert(HEAD + f"reclaimMinAdmitDuration: {bad}\n")
    assert res.exit_code == 2
    assert "preemptionProtection.reclaimWithinCohort.minAdmitDuration" in res.stderr


def test_kep_9876_feature_gate_on_is_kqueues_behaviour_off_is_warned_about() -> None:
    """Kueue's implementation of KEP-9876 reads preemptionProtection only with its alpha gate
    PreemptionProtection; kqueue always reads it: the gate set true converts silently, set false
    is warned about by name (kqueue would protect where that Kueue does not)."""
    body = "preemptionProtection: {reclaimWithinCohort: {minAdmitDuration: 10m}}\n"
    on = _convert(HEAD + "featureGates: {PreemptionProtection: true}\n" + body, "--strict")
    assert on.exit_code == 0, on.stderr
    assert yaml.safe_load(on.stdout)["featureGates"] == {"PreemptionProtection": True}
    off = _convert(HEAD + "featureGates: {PreemptionProtection: false}\n" + body)
    assert off.exit_code == 0, off.stderr
    assert (
        "featureGates.PreemptionProtection: kqueue always behaves as if it were true; false "
        "ignored"
    ) in off.stderr
    assert yaml.safe_load(off.stdout)["preemptionProtection"] == {
        "reclaimWithinCohort": {"minAdmitDuration": "10m"}
    }
