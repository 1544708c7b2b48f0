"""A second local control plane, with gang scheduling on, for the tests in this directory.

The session's ``cluster`` (tests/fixtures/cluster.py) runs Kubernetes as it comes: the
``GenericWorkload`` and ``GangScheduling`` gates off, no PodGroup API. Here ``cluster`` and
``kubeconfig`` are overridden by one started with ``LocalCluster(gang_scheduling=True)``, so
``api_client``, ``namespace`` and the kqueue fixtures below talk to it; tests elsewhere keep the
default cluster, and tests of both behaviours run in one session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from kqueue.controller.kube import Kube
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, KqueueProcess, kqueue_running
from tests.fixtures.cluster import gang_cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    yield from gang_cluster("gang scheduling")


@pytest.fixture(scope="session")
def kubeconfig(cluster: LocalCluster) -> Path:
    return cluster.kubeconfig_path


@pytest.fixture(scope="module")
def kqueue(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KqueueProcess]:
    proc = KqueueProcess(cluster=cluster, work_dir=Path(tmp_path_factory.mktemp("kqueue-gang")))
    yield from kqueue_running(proc)


@pytest.fixture
async def api(kqueue: KqueueProcess, api_client: client.ApiClient) -> AsyncIterator[Api]:
    a = Api(Kube(api_client))
    try:
        yield a
    finally:
        await a.cleanup()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    if report.when == "call" and report.failed:
        proc = item.funcargs.get("kqueue") if hasattr(item, "funcargs") else None
        if isinstance(proc, KqueueProcess):
            report.sections.append(("kqueue log (tail)", proc.log_tail(150)))
    return report
