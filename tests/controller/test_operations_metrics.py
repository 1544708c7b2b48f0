"""kqueue's own metrics beyond Kueue's, which the shipped alerts and dashboard query: webhook
answers by result, leader status, and the oldest pending workload per ClusterQueue."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest

from kqueue.api.v1alpha1 import ClusterQueue, LocalQueue, ResourceFlavor, Workload
from kqueue.controller.metrics import Metrics
from kqueue.controller.webhook_server import WebhookServer
from kqueue.controller.webhook_server.certs import ensure_local_certs
from kqueue.engine import from_api
from kqueue.engine.engine import Engine
from tests.controller.test_queue_metrics import cq_in_cohort, value
from tests.controller.test_scheduler import NOW, NS, key, workload
from tests.controller.test_webhook_server import (
    client_context,
    crash,
    review,
    slow,
    validate_workload,
)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Metrics, str, aiohttp.ClientSession]]:
    metrics = Metrics()
    bundle = ensure_local_certs(tmp_path)
    server = WebhookServer(
        cert_dir=tmp_path, host="127.0.0.1", port=0, handler_timeout=0.3,
        observe=metrics.webhook_request,
    )
    server.add_validating("/validate-workload", validate_workload)
    server.add_validating("/crash", crash)
    server.add_validating("/slow", slow)
    await server.start()
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=client_context(bundle.ca_pem))
    )
    try:
        yield metrics, f"https://127.0.0.1:{server.port}", session
    finally:
        await session.close()
        await server.stop()


WEBHOOK_CASES = [
    ("allowed", "/validate-workload", review(), "allowed"),
    ("denied: the object is refused", "/validate-workload", "count0", "denied"),
    ("handler raises", "/crash", review(), "error"),
    ("handler times out", "/slow", review(), "error"),
    ("unreadable request", "/validate-workload", b"not json", "error"),
]


@pytest.mark.parametrize(
    ("case", "path", "body", "want_result"), WEBHOOK_CASES, ids=[c[0] for c in WEBHOOK_CASES]
)
async def test_webhook_answers_are_counted_by_result(
    served: tuple[Metrics, str, aiohttp.ClientSession],
    case: str,
    path: str,
    body: object,
    want_result: str,
) -> None:
    metrics, base, session = served
    if body == "count0":
        doc = review()
        doc["request"]["object"]["spec"]["count"] = 0
        body = doc
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with session.post(base + path, data=data) as resp:
        await resp.read()
    results = ("allowed", "denied", "error")
    counts = {
        r: value(metrics, "kqueue_webhook_requests_total", webhook=path, result=r) or 0
        for r in results
    }
    assert counts == {r: (1.0 if r == want_result else 0) for r in results}
    assert value(metrics, "kqueue_webhook_request_duration_seconds_count", webhook=path) == 1


def test_leader_status_follows_the_lease() -> None:
    m = Metrics()
    assert value(m, "kqueue_leader_election_master_status", name="kqueue") is None
    m.leader_status("kqueue", leading=False)
    assert value(m, "kqueue_leader_election_master_status", name="kqueue") == 0
    m.leader_status("kqueue", leading=True)
    assert value(m, "kqueue_leader_election_master_status", name="kqueue") == 1


def _engine() -> tuple[Engine, ClusterQueue]:
    engine = Engine()
    engine.upsert_flavor(from_api.flavor(ResourceFlavor.model_validate(
        {"apiVersion": "kqueue.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )))
    cq = cq_in_cohort("a", "2")
    engine.upsert_cluster_queue(from_api.cluster_queue(cq))
    engine.upsert_local_queue(from_api.local_queue(LocalQueue.model_validate({
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": NS},
        "spec": {"clusterQueue": "a"},
    })))
    return engine, cq


def _timestamp(created_s: int) -> float:
    return datetime(2026, 1, 1, 11, 0, created_s, tzinfo=UTC).timestamp()


def test_oldest_pending_workload_is_the_earliest_queued_still_pending() -> None:
    engine, cq = _engine()
    m = Metrics()
    m.report_cluster_queue(cq, engine, resources=False)
    m.exposition()
    assert value(m, "kqueue_oldest_pending_workload_timestamp_seconds", cluster_queue="a") is None
    # "first" fits and is admitted; "big" (created second) and "late" wait.
    for name, cpu, created in (("first", "2", 1), ("big", "2", 2), ("late", "1", 3)):
        from_api.apply_workload(engine, Workload.model_validate(workload(name, cpu, created_s=created)))
    m.exposition()
    assert value(
        m, "kqueue_oldest_pending_workload_timestamp_seconds", cluster_queue="a"
    ) == _timestamp(1)
    assert [a.workload for a in engine.schedule(NOW).admitted] == [key("first")]
    m.exposition()
    assert value(
        m, "kqueue_oldest_pending_workload_timestamp_seconds", cluster_queue="a"
    ) == _timestamp(2)
    m.forget_cluster_queue("a")
    m.exposition()
    assert value(m, "kqueue_oldest_pending_workload_timestamp_seconds", cluster_queue="a") is None
