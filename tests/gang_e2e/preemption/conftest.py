"""A gang-scheduling control plane with ``WorkloadAwarePreemption`` on too (KEP-5710), for the
PodGroup's ``disruptionMode`` and ``priorityClassName``.

``cluster`` and ``kubeconfig`` are overridden once more for this directory; the kqueue and
``api`` fixtures of the parent conftest then run against this control plane.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqueue.localcluster import build
from kqueue.localcluster.cluster import ClusterStartError, LocalCluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    lc = LocalCluster(
        bin_dir=build.binaries_ready(),
        gang_scheduling=True,
        gang_gates=("WorkloadAwarePreemption",),
    )
    try:
        lc.start()
    except ClusterStartError as exc:
        lc.keep_work_dir = lc.log_dir.exists()
        lc.stop()
        pytest.fail(
            f"local cluster (workload-aware preemption) failed to start: {exc}\n"
            f"work dir: {lc.work_dir}"
        )
    print(f"\nworkload-aware preemption cluster up: KUBECONFIG={lc.kubeconfig_path}", file=sys.stderr)
    yield lc
    lc.keep_work_dir = lc.keep_work_dir or bool(os.environ.get("KQUEUE_KEEP_CLUSTER"))
    lc.stop()


@pytest.fixture(scope="session")
def kubeconfig(cluster: LocalCluster) -> Path:
    return cluster.kubeconfig_path
