"""The controller Configuration: defaults, round trip, errors that name the field."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from kqueue.api.config import (
    Configuration,
    ConfigurationError,
    LabelSelector,
    configuration_reference_markdown,
    dump_configuration,
    load_configuration,
    parse_bind_address,
    sample_configuration_yaml,
)
from kqueue.api.durations import format_duration, parse_duration

ROOT = Path(__file__).resolve().parents[2]


def test_defaults() -> None:
    cfg = load_configuration("")
    assert cfg == Configuration()
    assert cfg.namespace == "kqueue-system"
    assert cfg.health.bind_address == ":8081"
    assert cfg.metrics.bind_address == ":8080"
    assert cfg.webhook.port == 9443
    le = cfg.leader_election
    assert (le.leader_elect, le.resource_name) == (True, "kqueue-leader")
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (
        timedelta(seconds=15),
        timedelta(seconds=10),
        timedelta(seconds=2),
    )
    assert cfg.lease_namespace == "kqueue-system"
    assert (cfg.client_connection.qps, cfg.client_connection.burst) == (300, 500)
    wfpr = cfg.wait_for_pods_ready
    assert (wfpr.enable, wfpr.timeout, wfpr.blocks_admission) == (
        False,
        timedelta(minutes=5),
        False,
    )
    rs = wfpr.requeuing_strategy
    assert (rs.timestamp, rs.backoff_base_seconds, rs.backoff_max_seconds) == ("Eviction", 60, 3600)
    assert rs.backoff_limit_count is None
    assert cfg.integrations.frameworks == ["batch/job", "pod"]
    assert cfg.manage_jobs_without_queue_name is False
    assert cfg.internal_cert_management.enable is True
    assert (cfg.logging.format, cfg.logging.level) == ("text", "info")


def test_block_admission_follows_enable_unless_set() -> None:
    assert load_configuration(
        "waitForPodsReady: {enable: true}"
    ).wait_for_pods_ready.blocks_admission
    cfg = load_configuration("waitForPodsReady: {enable: true, blockAdmission: false}")
    assert not cfg.wait_for_pods_ready.blocks_admission


def test_namespace_selector_default_excludes_system_and_own_namespace() -> None:
    sel = load_configuration("namespace: batch-system").managed_jobs_namespace_selector
    name = "kubernetes.io/metadata.name"
    assert not sel.matches({name: "kube-system"})
    assert not sel.matches({name: "batch-system"})
    assert sel.matches({name: "team-a"})
    # An explicit selector replaces the default entirely.
    cfg = load_configuration("managedJobsNamespaceSelector: {matchLabels: {kqueue: enabled}}")
    assert cfg.managed_jobs_namespace_selector == LabelSelector(match_labels={"kqueue": "enabled"})


def test_round_trip() -> None:
    text = """
namespace: ops
leaderElection: {leaseDuration: 20s, renewDeadline: 12s, retryPeriod: 1500ms}
waitForPodsReady:
  enable: true
  timeout: 1h2m3s
  recoveryTimeout: 90s
  requeuingStrategy: {timestamp: Creation, backoffLimitCount: 3}
integrations: {frameworks: [pod]}
logging: {format: json, level: debug}
"""
    cfg = load_configuration(text)
    assert cfg.wait_for_pods_ready.timeout == timedelta(seconds=3723)
    assert cfg.wait_for_pods_ready.recovery_timeout == timedelta(seconds=90)
    assert cfg.leader_election.retry_period == timedelta(milliseconds=1500)
    dumped = dump_configuration(cfg)
    assert "timeout: 1h2m3s" in dumped
    assert "retryPeriod: 1.5s" in dumped  # Go's time.Duration.String()
    assert load_configuration(dumped) == cfg


@pytest.mark.parametrize(
    ("text", "want_field", "want_words"),
    [
        ("waitForPodsReady: {timeout: 5x}", "waitForPodsReady.timeout", "'5x'"),
        ("waitForPodsReady: {timeout: 300}", "waitForPodsReady.timeout", "300"),
        ("waitForPodsReady: {timeout: 0s}", "waitForPodsReady.timeout", "positive"),
        ("leaderElection: {leaseDuration: 5s}", "leaderElection.renewDeadline", "shorter"),
        ("leaderElection: {leaseDuration: 15500ms}", "leaderElection.leaseDuration", "whole"),
        (
            "leaderElection: {renewDeadline: 2s, retryPeriod: 2s}",
            "leaderElection.renewDeadline",
            "retryPeriod",
        ),
        ("integrations: {frameworks: [pod, ray]}", "integrations.frameworks[1]", "'ray'"),
        ("integrations: {frameworks: [pod, pod]}", "integrations.frameworks[1]", "twice"),
        ("apiVersion: config.kueue.x-k8s.io/v1beta1", "apiVersion", "config.kqueue.io/v1alpha1"),
        ("kind: Settings", "kind", "Configuration"),
        ("metrics: {bindAddress: localhost}", "metrics.bindAddress", "host:port"),
        ("health: {bindAddress: ':99999'}", "health.bindAddress", "host:port"),
        ("clientConnection: {qps: '50'}", "clientConnection.qps", "integer"),
        ("clientConnection: {qps: 5, burst: 0}", "clientConnection.burst", ">= 1"),
        ("webhook: {port: 70000}", "webhook.port", "65535"),
        ("namespace: Kqueue_System", "namespace", "namespace name"),
        ("leaderElection: {leaderElekt: true}", "leaderElection.leaderElekt", "unknown field"),
        ("logging: {level: trace}", "logging.level", "'trace'"),
        (
            "waitForPodsReady: {requeuingStrategy: {backoffMaxSeconds: 10}}",
            "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
            "backoffBaseSeconds",
        ),
        (
            "managedJobsNamespaceSelector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}",
            "managedJobsNamespaceSelector.matchExpressions[0].values",
            "empty",
        ),
    ],
)
def test_errors_name_the_field(text: str, want_field: str, want_words: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_configuration(text, source="config.yaml")
    fields = [path for path, _ in info.value.problems]
    assert want_field in fields, info.value.problems
    msg = dict(info.value.problems)[want_field]
    assert want_words in msg
    assert "config.yaml" in str(info.value)


@pytest.mark.parametrize("text", ["- a\n- b", "a: [", "42"])
def test_not_a_mapping(text: str) -> None:
    with pytest.raises(ConfigurationError):
        load_configuration(text)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0", timedelta(0)),
        ("15s", timedelta(seconds=15)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5h", timedelta(minutes=90)),
        ("2m3.25s", timedelta(seconds=123, milliseconds=250)),
        ("250ms", timedelta(milliseconds=250)),
        ("7us", timedelta(microseconds=7)),
        ("3000ns", timedelta(microseconds=3)),
        ("-1m", timedelta(minutes=-1)),
    ],
)
def test_parse_duration(text: str, want: timedelta) -> None:
    assert parse_duration(text) == want
    assert parse_duration(format_duration(want)) == want


@pytest.mark.parametrize("text", ["", "5", "5 m", "1d", "m", "1.5ns", "s5"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_parse_bind_address() -> None:
    assert parse_bind_address(":8080") == ("", 8080)
    assert parse_bind_address("127.0.0.1:9") == ("127.0.0.1", 9)
    assert parse_bind_address("[::1]:8443") == ("::1", 8443)
    assert parse_bind_address("0") is None


def test_sample_file_matches_the_model() -> None:
    text = (ROOT / "config" / "controller_config.yaml").read_text()
    assert text == sample_configuration_yaml(), (
        "config/controller_config.yaml is stale; regenerate it with "
        "`python -c 'from kqueue.api.config import sample_configuration_yaml as s; print(s(), end=\"\")'`"
    )
    assert load_configuration(text) == Configuration()


def test_reference_lists_every_field() -> None:
    doc = configuration_reference_markdown()
    for path in [
        "namespace",
        "health.bindAddress",
        "webhook.certDir",
        "leaderElection.renewDeadline",
        "clientConnection.burst",
        "waitForPodsReady.requeuingStrategy.backoffLimitCount",
        "waitForPodsReady.recoveryTimeout",
        "integrations.frameworks",
        "managedJobsNamespaceSelector",
        "manageJobsWithoutQueueName",
        "internalCertManagement.webhookSecretName",
        "logging.format",
    ]:
        assert f"| `{path}` |" in doc, path
    assert "| `waitForPodsReady.timeout` | duration | `5m0s` |" in doc
    # Every row has a description.
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    assert all(not line.rstrip().endswith("|  |") for line in rows)
