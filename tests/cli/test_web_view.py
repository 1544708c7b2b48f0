"""The web view without a cluster: what a snapshot shows (tree, bars, positions,
explanations), the HTML it is rendered as, and the server's routes and snapshot reuse.
Against the real cluster in headless Chromium: tests/controller_e2e/test_web_view.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestServer

from kqueue.api.loader import Location, load_object
from kqueue.cli.webview import pages
from kqueue.cli.webview.board import Bar, Board, Node
from kqueue.cli.webview.server import Snapshots, web_view_app
from kqueue.controller import kube as k
from tests.visibility.scenario import finished

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)

MANIFESTS = """
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kqueue.io/v1alpha1
kind: Cohort
metadata: {name: ml}
spec: {parentName: org}
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata: {name: train}
spec:
  cohortName: ml
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: f
      resources: [{name: cpu, nominalQuota: "2", borrowingLimit: "0"}]
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata: {name: infer}
spec:
  cohortName: org
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: f
      resources: [{name: cpu, nominalQuota: "1"}]
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata: {name: solo}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: f
      resources: [{name: cpu, nominalQuota: "4"}]
---
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata: {name: q, namespace: team}
spec: {clusterQueue: train}
"""


def wl(name: str, cpu: str, created_s: int) -> Obj:
    return {
        "apiVersion": "kqueue.io/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": name, "namespace": "team", "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T11:00:{created_s:02d}Z",
        },
        "spec": {
            "queueName": "q",
            "podSets": [{
                "name": "main", "count": 1,
                "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"requests": {"cpu": cpu}}}
                ]}},
            }],
        },
    }


def docs() -> list[Obj]:
    return [
        *yaml.safe_load_all(MANIFESTS),
        wl("first", "2", 1), wl("second", "1", 2), wl("third", "1", 3),
    ]


def board(root: str = "org") -> Board:
    """The scene; ``root`` renames the root cohort (its place in name order changes)."""
    texts = [yaml.safe_dump(d).replace(": org", f": {root}") for d in docs()]
    objs = [
        load_object(yaml.safe_load(t), Location("<test>", i)) for i, t in enumerate(texts, 1)
    ]
    return Board.of([o for o in objs if o is not None], NOW)


def by_name(nodes: list[Node]) -> dict[str, Node]:
    out: dict[str, Node] = {}
    for n in nodes:
        out[n.name] = n
        out |= by_name(n.children)
    return out


def test_the_tree_nests_cohorts_and_cluster_queues() -> None:
    tree = board().tree()
    assert [(n.kind, n.name) for n in tree] == [("Cohort", "org"), ("ClusterQueue", "solo")]
    nodes = by_name(tree)
    org = nodes["org"]
    assert org.implicit, "org is only named as ml's parent and infer's cohort"
    assert not nodes["ml"].implicit
    assert [(c.kind, c.name) for c in org.children] == [("Cohort", "ml"), ("ClusterQueue", "infer")]
    assert [c.name for c in nodes["ml"].children] == ["train"]


@pytest.mark.parametrize("root", ["org", "all"], ids=["root after its child", "root first"])
def test_bars_are_the_engines_usage_against_quota(root: str) -> None:
    nodes = by_name(board(root).tree())
    nodes["org"] = nodes[root]
    train = nodes["train"]
    assert train.bars == [Bar("f", "cpu", used=2000, nominal=2000, borrowing_limit=0)]
    assert (train.pending, train.admitted) == (2, 1)
    assert nodes["infer"].bars == [Bar("f", "cpu", used=0, nominal=1000)]
    # the cohorts: their subtree's reservations against subtree quota
    assert nodes["ml"].bars == [Bar("f", "cpu", used=2000, nominal=2000)]
    assert nodes["org"].bars == [Bar("f", "cpu", used=2000, nominal=3000)]
    assert (nodes["org"].pending, nodes["org"].admitted) == (2, 1)


@pytest.mark.parametrize(
    ("case", "used", "nominal", "want_percent", "want_borrowed"),
    [
        ("empty", 0, 4, 0, 0),
        ("half", 2, 4, 50, 0),
        ("full", 4, 4, 100, 0),
        ("borrowing", 6, 4, 150, 2),
        ("no nominal quota, borrowing", 1, 0, 100, 1),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bar_figures(case: str, used: int, nominal: int, want_percent: int, want_borrowed: int) -> None:
    b = Bar("f", "cpu", used=used, nominal=nominal)
    assert (b.percent, b.borrowed) == (want_percent, want_borrowed)


def test_pending_workloads_in_admission_order_with_reasons() -> None:
    b = board()
    items = b.pending_in("train")
    assert [(p.name, p.position_in_cluster_queue, p.position_in_local_queue) for p in items] == [
        ("second", 0, 0),
        ("third", 1, 1),
    ]
    assert {p.reason for p in items} == {"WaitingForQuota"}
    rows = {r.name: r for r in b.workloads()}
    assert rows["first"].status == "Admitted" and rows["first"].cluster_queue == "train"
    assert (rows["second"].status, rows["second"].position) == ("Pending", 0)
    assert [r.name for r in b.workloads("train")] == ["second", "third", "first"]
    assert b.workloads("solo") == []


def test_a_workloads_explanation_is_kqueue_explains() -> None:
    result, text = board().explain("team/third")
    assert result.found and result.state == "Pending"
    assert text.splitlines()[0] == "Workload team/third: Pending"
    assert "reason: WaitingForQuota" in text
    assert "position: 2 in ClusterQueue, 2 in LocalQueue (1 = next)" in text
    result, text = board().explain("team/thrid")
    assert not result.found
    assert text == 'workload team/thrid not found; did you mean "team/third"?'


def test_pages_escape_what_they_show() -> None:
    node = Node("ClusterQueue", "a<b", bars=[Bar("f<", "cpu", 1000, 2000)], inactive="<x>")
    html = pages.overview([node], {}, NOW)
    assert "a<b" not in html and "a&lt;b" in html
    assert "&lt;x&gt;" in html and "<x>" not in html
    assert 'data-flavor="f&lt;"' in html and 'data-percent="50"' in html


# -- the server -----------------------------------------------------------------------------------


class Fetcher:
    def __init__(self, docs: list[Obj]) -> None:
        self.docs = docs
        self.calls = 0
        self.fail: Exception | None = None

    async def __call__(self) -> list[Obj]:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return self.docs


@pytest.fixture
async def server() -> AsyncIterator[tuple[TestServer, Fetcher]]:
    fetch = Fetcher(docs())
    srv = TestServer(web_view_app(Snapshots(fetch, ttl=3600)))
    await srv.start_server()
    try:
        yield srv, fetch
    finally:
        await srv.close()


async def get(srv: TestServer, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(srv.make_url(path)) as resp:
        assert resp.content_type == "text/html" or path == "/healthz"
        return resp.status, await resp.text()


@pytest.mark.parametrize(
    ("path", "want_status", "want_text"),
    [
        ("/", 200, 'data-kind="Cohort" data-name="org"'),
        ("/clusterqueues/train", 200, 'class="pending-workload" data-workload="team/second"'),
        ("/clusterqueues/trian", 404, "ClusterQueue &quot;trian&quot; not found; did you mean"),
        ("/workloads", 200, 'data-workload="team/first" data-status="Admitted"'),
        ("/workloads/team/third", 200, "reason: WaitingForQuota"),
        ("/workloads/team/nope", 404, 'id="not-found"'),
        ("/healthz", 200, "ok"),
    ],
)
async def test_routes(
    server: tuple[TestServer, Fetcher], path: str, want_status: int, want_text: str
) -> None:
    srv, _ = server
    status, text = await get(srv, path)
    assert status == want_status
    assert want_text in text


async def test_pages_share_a_snapshot_within_its_ttl(server: tuple[TestServer, Fetcher]) -> None:
    srv, fetch = server
    for path in ("/", "/workloads", "/clusterqueues/train"):
        assert (await get(srv, path))[0] == 200
    assert fetch.calls == 1


async def test_a_cluster_that_cannot_be_read_is_a_503_saying_why() -> None:
    fetch = Fetcher(docs())
    fetch.fail = k.KubeError.of(
        "list workloads", 403, {"reason": "Forbidden", "message": "workloads.kqueue.io is forbidden"}
    )
    srv = TestServer(web_view_app(Snapshots(fetch, ttl=0)))
    await srv.start_server()
    try:
        status, text = await get(srv, "/")
    finally:
        await srv.close()
    assert status == 503
    assert "Cannot read the cluster" in text and "forbidden" in text


def test_pending_workloads_show_their_predicted_start() -> None:
    # The queue's earlier runs took 2 h: "first" (admitted at the snapshot's start, 11:00:03)
    # frees train's 2 cpu at 13:00:03, when "second" and "third" start.
    history = [finished(f"done-{i}", 0, 7200, queue="q") for i in range(3)]
    objs = [load_object(d, Location("<test>", i)) for i, d in enumerate([*docs(), *history], 1)]
    b = Board.of([o for o in objs if o is not None], NOW)
    items = b.pending_in("train")
    want = datetime(2026, 1, 1, 13, 0, 3, tzinfo=UTC)
    assert [(p.name, p.estimated_start) for p in items] == [("second", want), ("third", want)]
    html = pages.cluster_queue(by_name(b.tree())["train"], items, [], NOW)
    assert html.count('data-eta="2026-01-01T13:00:03Z"') == 2
    assert ">in 1h<" in html
    # Without history: no estimate, said so.
    assert "unknown" in pages.cluster_queue(by_name(board().tree())["train"],
                                            board().pending_in("train"), [], NOW)


def test_a_workload_waiting_for_admission_checks_shows_them() -> None:
    reserved = wl("first", "2", 1)
    reserved["status"] = {
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
             "lastTransitionTime": "2026-01-01T11:00:05Z"},
            {"type": "Admitted", "status": "False", "reason": "UnsatisfiedAdmissionChecks",
             "message": "", "lastTransitionTime": "2026-01-01T11:00:05Z"},
        ],
        "admission": {"clusterQueue": "train", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "2"}, "count": 1}]},
        "admissionChecks": [{"name": "prov", "state": "Pending", "message": ""}],
    }
    objs = [
        load_object(d, Location("<test>", i))
        for i, d in enumerate([*yaml.safe_load_all(MANIFESTS), reserved], 1)
    ]
    b = Board.of([o for o in objs if o is not None], NOW)
    row = {r.name: r for r in b.workloads()}["first"]
    assert (row.status, row.reason, row.message) == ("Admitted", "AdmissionChecks", "prov=Pending")
