"""A stock control plane (every feature gate at its default, no PodGroup API), for the tests of
what kqueue does where the cluster does not serve gang scheduling.

The session's ``cluster`` turns the PodGroup API and kube-scheduler's gang scheduling on (the
default of ``LocalCluster``, as ``make run``); here ``cluster`` is overridden by
``LocalCluster(gang_scheduling=False)``, as most clusters run. The kqueue, ``api`` and
``kubeconfig`` fixtures are the gang directory's, so they follow this ``cluster``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kqueue.localcluster.cluster import LocalCluster
from tests.fixtures.cluster import gang_cluster
from tests.gang_e2e.conftest import api, kqueue, kubeconfig

__all__ = ["api", "cluster", "kqueue", "kubeconfig"]


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    yield from gang_cluster("stock", gang_scheduling=False)
