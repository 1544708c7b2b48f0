"""tests/controller_e2e/test_topology.py's node-loss cases with ``topologyHandOff:
Constraint`` on the gang cluster (v1beta1 PodGroups): the pods are not pinned, kube-scheduler
binds them inside the rack, and each test reads the hosts where the pods run (the assignment
follows the binding) or, when they are never bound, checks that none is failed for a node it
was not sent to (docs/topology.md). On 1.36 (v1alpha2) the hand-off pins as NodeSelector does,
and the same tests check the pinned behaviour."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.support_extra import ConfiguredKqueue, configured_kqueue
from tests.controller_e2e.test_topology import (
    test_a_lost_node_under_a_rack_job_is_replaced_in_the_same_rack,
    test_a_pod_pinned_to_a_node_that_turns_not_ready_is_failed_and_replaced,
)

pytestmark = pytest.mark.cluster

__all__ = [
    "test_a_lost_node_under_a_rack_job_is_replaced_in_the_same_rack",
    "test_a_pod_pinned_to_a_node_that_turns_not_ready_is_failed_and_replaced",
]


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConfiguredKqueue]:
    work = Path(tmp_path_factory.mktemp("kqueue-constraint"))
    yield from configured_kqueue(cluster, work, {"topologyHandOff": "Constraint"})
