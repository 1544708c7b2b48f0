"""A gang-scheduling control plane with ``WorkloadAwarePreemption`` on too (KEP-5710), for the
PodGroup's ``disruptionMode`` and ``priorityClassName`` (on 1.37 the gate is folded into
GenericWorkload and dropped: the cluster is then the same as the parent directory's).

``cluster`` and ``kubeconfig`` are overridden once more for this directory; the kqueue and
``api`` fixtures of the parent conftest then run against this control plane.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kqueue.localcluster.cluster import LocalCluster
from tests.fixtures.cluster import gang_cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    yield from gang_cluster("workload-aware preemption", gang_gates=("WorkloadAwarePreemption",))


@pytest.fixture(scope="session")
def kubeconfig(cluster: LocalCluster) -> Path:
    return cluster.kubeconfig_path
