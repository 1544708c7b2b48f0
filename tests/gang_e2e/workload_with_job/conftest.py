"""A gang-scheduling control plane with ``WorkloadWithJob`` on too (alpha in 1.36 and 1.37):
the Job controller makes a Job's own scheduling Workload and PodGroup (``Job.spec.scheduling``).

``cluster`` and ``kubeconfig`` are overridden once more for this directory; the kqueue and
``api`` fixtures of the parent conftest then run against this control plane.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kqueue.localcluster.cluster import LocalCluster
from tests.fixtures.cluster import gang_cluster
from tests.gang_e2e.conftest import kubeconfig

__all__ = ["cluster", "kubeconfig"]


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    yield from gang_cluster("WorkloadWithJob", gang_gates=("WorkloadWithJob",))

