"""MultiKueue: the worker cluster a workload runs on (``status.clusterName``), or the ones its
copies are offered to (``status.nominatedClusterNames``), in ``kqueue explain`` (text and JSON)
and the web view (its workload table and workload page). ``kubectl kqueue list -o wide``:
tests/cli/kubectl/test_rows.py."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kqueue.api.loader import Location, load_object
from kqueue.cli import explain as cli_explain
from kqueue.cli.webview import pages
from kqueue.cli.webview.board import Board
from tests.cli.test_web_view import MANIFESTS, NOW, wl

Obj = dict[str, Any]
T = "2026-01-01T11:00:05Z"
ADMISSION = {"clusterQueue": "train", "podSetAssignments": [
    {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "1"}, "count": 1}]}


def _cond(type_: str, status: str, reason: str) -> Obj:
    return {"type": type_, "status": status, "reason": reason, "message": "",
            "lastTransitionTime": T}


def _on_workers(name: str, check: str, message: str, **placement: Any) -> Obj:
    out = wl(name, "1", 1)
    admitted = "True" if check == "Ready" else "False"
    out["status"] = {
        "conditions": [_cond("QuotaReserved", "True", "QuotaReserved"),
                       _cond("Admitted", admitted, "Admitted")],
        "admission": ADMISSION,
        "admissionChecks": [{"name": "mk", "state": check, "message": message,
                             "lastTransitionTime": T}],
        **placement,
    }
    return out


RUNNING = _on_workers("running", "Ready", "The workload was admitted on 'worker-2'",
                      clusterName="worker-2")
OFFERED = _on_workers(
    "offered", "Pending",
    "Dispatched to worker clusters 'worker-1', 'worker-2'; the first to admit the workload runs it",
    nominatedClusterNames=["worker-1", "worker-2"],
)
FINISHED = _on_workers("done", "Ready", "The workload was admitted on 'worker-1'",
                       clusterName="worker-1")
FINISHED["status"]["conditions"].append(_cond("Finished", "True", "Succeeded"))
WAITING = _on_workers("waiting", "Pending",
                      "Not dispatched yet: waiting for admission checks prov to be Ready")


def _board() -> Board:
    objs = [load_object(d, Location("<test>", i))
            for i, d in enumerate([*yaml.safe_load_all(MANIFESTS), RUNNING, OFFERED, WAITING, FINISHED], 1)]
    return Board.of([o for o in objs if o is not None], NOW)


@pytest.mark.parametrize(
    ("name", "line", "json_fields"),
    [
        pytest.param("running", "MultiKueue: runs on worker cluster worker-2",
                     {"clusterName": "worker-2"}, id="admitted on a worker"),
        pytest.param("offered",
                     "MultiKueue: dispatched to worker clusters worker-1, worker-2; "
                     "none has admitted it yet",
                     {"nominatedClusterNames": ["worker-1", "worker-2"]},
                     id="copies offered, none admitted"),
        pytest.param("done", "MultiKueue: ran on worker cluster worker-1",
                     {"clusterName": "worker-1"}, id="finished on a worker"),
    ],
)
def test_explain_says_which_worker_cluster(name: str, line: str, json_fields: Obj) -> None:
    result, hints = cli_explain.explain_with_hints(_board().scenario, f"team/{name}", now=NOW)
    text = cli_explain.format_text(result, hints)
    assert line in text.splitlines()
    as_json = cli_explain.to_json(result, hints)
    assert {k: as_json.get(k) for k in json_fields} == json_fields


def test_explain_of_a_workload_not_dispatched_says_why() -> None:
    result, hints = cli_explain.explain_with_hints(_board().scenario, "team/waiting", now=NOW)
    text = cli_explain.format_text(result, hints)
    # The check's message (the MultiKueue controller's reason) and no worker cluster.
    assert ("  admission check mk: Pending (Not dispatched yet: waiting for admission checks "
            "prov to be Ready)") in text.splitlines()
    assert "MultiKueue:" not in text
    assert "clusterName" not in cli_explain.to_json(result, hints)


def test_web_view_shows_the_worker_cluster() -> None:
    b = _board()
    rows = {r.name: r for r in b.workloads()}
    assert (rows["running"].cluster, rows["offered"].cluster, rows["waiting"].cluster) == (
        "worker-2", "nominated:worker-1,worker-2", ""
    )
    html = pages.workloads(list(rows.values()), NOW)
    assert "<th>Worker cluster</th>" in html
    assert 'data-cluster="worker-2">worker-2</td>' in html
    result, text = b.explain("team/running")
    page = pages.workload("team/running", result, text, NOW)
    assert "<dt>Worker cluster</dt><dd>worker-2</dd>" in page
    assert "MultiKueue: runs on worker cluster worker-2" in page
