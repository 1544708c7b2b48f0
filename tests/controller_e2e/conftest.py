"""One kqueue manager per test module, on the session's local cluster; an Api per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from kqueue.controller.kube import Kube
from kqueue.localcluster.cluster import LocalCluster
from tests.controller_e2e.harness import Api, KqueueProcess, kqueue_running


@pytest.fixture(scope="module")
def kqueue(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KqueueProcess]:
    proc = KqueueProcess(cluster=cluster, work_dir=Path(tmp_path_factory.mktemp("kqueue")))
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
    if report.when == "call" and report.failed and True:
        proc = item.funcargs.get("kqueue") if hasattr(item, "funcargs") else None
        if isinstance(proc, KqueueProcess):
            report.sections.append(("kqueue log (tail)", proc.log_tail(150)))
    return report
