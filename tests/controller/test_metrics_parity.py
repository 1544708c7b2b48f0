"""Every Kueue metric is exported by kqueue (``kueue_*`` -> ``kqueue_*``) with Kueue's labels, or
is listed with the reason it is not, and docs/observability.md says the same.

Kueue's names and labels are data here, read from kubernetes-sigs/kueue pkg/metrics/metrics.go
at KUEUE_COMMIT. When that list is refreshed from a newer Kueue, a new metric fails
``test_every_kueue_metric_is_exported_or_has_a_documented_reason`` until kqueue exports it or
the tables below (and the docs) say why not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kqueue.controller.metric_table import METRICS
from kqueue.controller.metrics import Metrics

KUEUE_COMMIT = "ff69552e79ad21652c36caa97038382e55625cf7"  # v0.20.0-devel-377, 2026-08-22

# Kueue's metrics (the exposition names: counters with their _total) and their labels, without
# ``replica_role`` and the optional custom labels, which every Kueue metric carries (see
# REPLICA_ROLE below). ``multikueue_*`` is Kueue's MultiKueue subsystem.
KUEUE_METRICS: dict[str, tuple[str, ...]] = {
    "kueue_admission_attempts_total": ("result",),
    "kueue_admission_attempt_duration_seconds": ("result",),
    "multikueue_workloads_dispatched_total": ("cluster_queue", "cluster"),
    "multikueue_workloads_admitted_total": ("cluster_queue", "cluster"),
    "kueue_admission_cycle_preemption_skips": ("cluster_queue",),
    "kueue_preemption_target_recomputations_total": ("cluster_queue", "result"),
    "kueue_build_info": (
        "git_version", "git_commit", "build_date", "go_version", "compiler", "platform",
    ),
    "kueue_pending_workloads": ("cluster_queue", "status"),
    "kueue_pending_scheduling_hashes": ("cluster_queue", "status"),
    "kueue_local_queue_pending_workloads": ("name", "namespace", "status"),
    "kueue_finished_workloads": ("cluster_queue",),
    "kueue_local_queue_finished_workloads": ("name", "namespace"),
    "kueue_quota_reserved_workloads_total": ("cluster_queue", "priority_class"),
    "kueue_local_queue_quota_reserved_workloads_total": ("name", "namespace", "priority_class"),
    "kueue_finished_workloads_total": ("cluster_queue", "priority_class"),
    "kueue_local_queue_finished_workloads_total": ("name", "namespace", "priority_class"),
    "kueue_execution_time_seconds": ("cluster_queue", "priority_class"),
    "kueue_local_queue_execution_time_seconds": ("name", "namespace", "priority_class"),
    "kueue_quota_reserved_wait_time_seconds": ("cluster_queue", "priority_class"),
    "kueue_pods_ready_to_evicted_time_seconds": ("cluster_queue", "reason", "underlying_cause"),
    "kueue_local_queue_quota_reserved_wait_time_seconds": ("name", "namespace", "priority_class"),
    "kueue_admitted_workloads_total": ("cluster_queue", "priority_class"),
    "kueue_local_queue_admitted_workloads_total": ("name", "namespace", "priority_class"),
    "kueue_admission_wait_time_seconds": ("cluster_queue", "priority_class"),
    "kueue_ready_wait_time_seconds": ("cluster_queue", "priority_class"),
    "kueue_admitted_until_ready_wait_time_seconds": ("cluster_queue", "priority_class"),
    "kueue_local_queue_admission_wait_time_seconds": ("name", "namespace", "priority_class"),
    "kueue_admission_checks_wait_time_seconds": ("cluster_queue", "priority_class"),
    "kueue_local_queue_admission_checks_wait_time_seconds": (
        "name", "namespace", "priority_class",
    ),
    "kueue_local_queue_ready_wait_time_seconds": ("name", "namespace", "priority_class"),
    "kueue_local_queue_admitted_until_ready_wait_time_seconds": (
        "name", "namespace", "priority_class",
    ),
    "kueue_workload_creation_latency_seconds": ("job_kind",),
    "kueue_pod_scheduling_gate_removal_seconds": ("name", "cluster_queue", "is_group"),
    "kueue_evicted_workloads_total": (
        "cluster_queue", "reason", "underlying_cause", "priority_class",
    ),
    "kueue_replaced_workload_slices_total": ("cluster_queue",),
    "kueue_local_queue_evicted_workloads_total": (
        "name", "namespace", "reason", "underlying_cause", "priority_class",
    ),
    "kueue_evicted_workloads_once_total": (
        "cluster_queue", "reason", "underlying_cause", "priority_class",
    ),
    "kueue_preempted_workloads_total": ("preempting_cluster_queue", "reason"),
    "kueue_workload_eviction_latency_seconds": ("cluster_queue", "reason"),
    "kueue_reserving_active_workloads": ("cluster_queue",),
    "kueue_local_queue_reserving_active_workloads": ("name", "namespace"),
    "kueue_admitted_active_workloads": ("cluster_queue",),
    "kueue_local_queue_admitted_active_workloads": ("name", "namespace"),
    "kueue_cluster_queue_status": ("cluster_queue", "status"),
    "kueue_local_queue_status": ("name", "namespace", "active"),
    "kueue_unadmitted_workloads": ("cluster_queue", "reason", "underlying_cause"),
    "kueue_local_queue_unadmitted_workloads": (
        "name", "namespace", "cluster_queue", "reason", "underlying_cause",
    ),
    "kueue_cluster_queue_resource_reservation": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_cluster_queue_resource_pending": ("cluster_queue", "resource"),
    "kueue_cluster_queue_resource_usage": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_local_queue_resource_reservation": ("name", "namespace", "flavor", "resource"),
    "kueue_local_queue_resource_usage": ("name", "namespace", "flavor", "resource"),
    "kueue_local_queue_admission_fair_sharing_usage": ("name", "namespace", "cluster_queue"),
    "kueue_cluster_queue_nominal_quota": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_cluster_queue_borrowing_limit": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_cluster_queue_lending_limit": ("cohort", "cluster_queue", "flavor", "resource"),
    "kueue_cluster_queue_weighted_share": ("cluster_queue", "cohort"),
    "kueue_cohort_weighted_share": ("cohort",),
    "kueue_cohort_subtree_quota": ("cohort", "flavor", "resource"),
    "kueue_cohort_subtree_admitted_workloads_total": ("cohort", "priority_class"),
    "kueue_cohort_subtree_resource_reservations": ("cohort", "flavor", "resource"),
    "kueue_cohort_subtree_admitted_active_workloads": ("cohort",),
    "kueue_cohort_info": ("cohort", "parent_cohort", "root_cohort"),
    "kueue_cluster_queue_info": ("cluster_queue", "parent_cohort", "root_cohort"),
}

UNADMITTED = (
    "behind Kueue's alpha UnadmittedWorkloadsObservability gate; not yet: pending reasons are on "
    "each Workload's QuotaReserved condition and in kubectl kqueue list workloads"
)

# kqueue names of Kueue metrics kqueue does not export, and why. docs/observability.md lists
# the same names with the same reasons.
NOT_EXPORTED: dict[str, str] = {
    "kqueue_pending_scheduling_hashes": (
        "Kueue's SchedulingEquivalenceHashing feature: kqueue parks equivalent workloads "
        "together (docs/engine.md, cycle step 6) but does not export how many pending workloads "
        "share each class"
    ),
    "kqueue_preemption_target_recomputations_total": (
        "kqueue skips a head whose preemption targets overlap another's (counted by "
        "kqueue_admission_cycle_preemption_skips) and never recomputes targets within a cycle"
    ),
    "kqueue_unadmitted_workloads": UNADMITTED,
    "kqueue_local_queue_unadmitted_workloads": UNADMITTED,
}

# Exported metrics whose labels differ from Kueue's (besides replica_role), and why.
LABEL_DIFFERENCES: dict[str, str] = {
    "kqueue_build_info": "labels `version` and `python` instead of Go's build labels",
}

# Every Kueue metric has a replica_role label (leader, follower, standalone); kqueue has none.
REPLICA_ROLE = "No `replica_role` label: only the leader reports queue and workload metrics"

DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def kqueue_name(kueue: str) -> str:
    if kueue.startswith("multikueue_"):
        return "kqueue_" + kueue
    assert kueue.startswith("kueue_"), kueue
    return "kqueue_" + kueue.removeprefix("kueue_")


def exported() -> dict[str, tuple[str, tuple[str, ...], str]]:
    """kqueue's metrics, from the table they are built from: exposition name -> (type, labels,
    help)."""
    out = {
        spec.exposed_name: (spec.kind.__name__.lower(), spec.labels, spec.help)
        for spec in METRICS
    }
    assert len(out) == len(METRICS), "a metric declared twice"
    # The registry serves exactly the table: each name once, with the table's type and help.
    served: dict[str, tuple[str, str]] = {}
    text = Metrics().exposition().decode().splitlines()
    for line in text:
        if line.startswith("# HELP "):
            _, _, name, help_text = line.split(" ", 3)
            assert name not in served, f"{name} served twice"
            served[name] = ("", help_text)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            served[name] = (kind, served[name][1])
    assert served == {name: (kind, help_text) for name, (kind, _, help_text) in out.items()}
    return out


def test_every_kueue_metric_is_exported_or_has_a_documented_reason() -> None:
    ours = exported()
    missing = [
        kqueue_name(k)
        for k in KUEUE_METRICS
        if kqueue_name(k) not in ours and kqueue_name(k) not in NOT_EXPORTED
    ]
    assert missing == [], f"Kueue metrics not exported and without a reason: {missing}"
    stale = sorted(set(NOT_EXPORTED) & set(ours))
    assert stale == [], f"exported now, remove from NOT_EXPORTED: {stale}"
    unknown = sorted(set(NOT_EXPORTED) - {kqueue_name(k) for k in KUEUE_METRICS})
    assert unknown == [], f"not Kueue metrics: {unknown}"


def test_exported_metrics_carry_kueues_labels() -> None:
    ours = exported()
    kueue = {kqueue_name(k): labels for k, labels in KUEUE_METRICS.items()}
    differ = sorted(
        name for name, (_, labels, _) in ours.items()
        if name in kueue and set(labels) != set(kueue[name])
    )
    assert differ == sorted(LABEL_DIFFERENCES), (
        "label sets differing from Kueue's must be exactly those LABEL_DIFFERENCES explains"
    )


# kqueue's own metrics (not Kueue's): what the shipped alerts and dashboard need that Kueue leaves
# to controller-runtime and client-go (webhook answers, leadership) or does not have (the
# longest wait). docs/observability.md lists them.
KQUEUE_ONLY = {
    "kqueue_webhook_requests_total",
    "kqueue_webhook_request_duration_seconds",
    "kqueue_leader_election_master_status",
    "kqueue_oldest_pending_workload_timestamp_seconds",
    "kqueue_preemptions_deferred_by_protection_total",
    "kqueue_workload_resync_repairs_total",
    "kqueue_workload_resync_duration_seconds",
    "kqueue_start_prediction_error_seconds",
}


def test_the_only_metrics_beyond_kueues_are_kqueues_own() -> None:
    ours = exported()
    kueue = {kqueue_name(k) for k in KUEUE_METRICS}
    assert sorted(set(ours) - kueue) == sorted(KQUEUE_ONLY)


def _docs_rows() -> dict[str, list[str]]:
    text = DOCS.read_text()
    section = text.split("\n## Metrics\n", 1)
    assert len(section) == 2, "docs/observability.md has a '## Metrics' section"
    rows: dict[str, list[str]] = {}
    for line in section[1].split("\n## ", 1)[0].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        match = re.fullmatch(r"`(kqueue_\w+)`", cells[0]) if line.startswith("| ") else None
        if match:
            rows[match.group(1)] = cells[1:]
    return rows


def test_docs_list_every_exported_metric_with_its_labels_and_every_gap_with_its_reason() -> None:
    rows = _docs_rows()
    for name, (kind, labels, _) in exported().items():
        assert name in rows, f"docs/observability.md: no row for {name}"
        want = ", ".join(f"`{label}`" for label in labels) or "none"
        assert rows[name][:2] == [kind, want], (name, rows[name])
    for name, reason in NOT_EXPORTED.items():
        assert name in rows, f"docs/observability.md: no row for the gap {name}"
        assert rows[name] == [reason], (name, rows[name])
    text = DOCS.read_text()
    for name, reason in LABEL_DIFFERENCES.items():
        assert f"`{name}`: {reason}" in text, name
    assert REPLICA_ROLE in text


def test_the_docs_list_no_metric_beyond_the_table_and_its_gaps() -> None:
    """The converse of the test above: a metric dropped from the table leaves no row behind."""
    rows = _docs_rows()
    assert sorted(rows) == sorted({*exported(), *NOT_EXPORTED})


# -- promtool-style lint (there is no promtool in the venv; these are its metric-name rules) ---

_UNIT_ABBREVIATIONS = re.compile(r"_(ms|us|ns|sec|secs|min|mins|hrs|kb|mb|gb|b)(_|$)")


@pytest.mark.parametrize("name", sorted(exported()))
def test_names_follow_the_prometheus_naming_rules(name: str) -> None:
    kind, labels, help_text = exported()[name]
    assert re.fullmatch(r"[a-z_][a-z0-9_]*", name), "snake_case"
    assert help_text.strip(), "HELP text"
    if kind == "counter":
        assert name.endswith("_total"), "counters end in _total"
    else:
        assert not name.endswith("_total"), "only counters end in _total"
    if kind == "histogram":
        assert not re.search(r"_(count|sum|bucket)$", name), "reserved histogram suffix"
    assert not _UNIT_ABBREVIATIONS.search(name), "base units spelled out (seconds, bytes)"
    assert not re.search(r"_(milliseconds|minutes|hours|days)(_|$)", name), "base unit seconds"
    for label in labels:
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", label) and not label.startswith("__"), label
