"""The web view's pages: server-rendered HTML, one stylesheet, no scripts.

Every value is escaped; elements a reader (or a test) looks for carry ids and ``data-``
attributes: ``#cohort-tree`` with ``.node[data-kind][data-name]`` and ``.bar[data-flavor]
[data-resource][data-used][data-nominal]``; ``#pending`` rows ``.pending-workload`` with
``data-position``; ``#explanation`` on a workload's page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from html import escape
from urllib.parse import quote

from kqueue import __version__
from kqueue.api.quantity import format_quantity
from kqueue.api.v1alpha1 import format_time
from kqueue.cli.kubectl.rows import cluster_cell
from kqueue.cli.webview.board import Bar, Node, WorkloadRow
from kqueue.sim.explain import Explanation
from kqueue.visibility.pending import PendingWorkload

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1f2328;
background:#f6f8fa}
header{background:#24292f;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:baseline}
header a{color:#fff;text-decoration:none}header .brand{font-weight:700;font-size:18px}
header .meta{margin-left:auto;font-size:12px;color:#9da7b3}
main{padding:16px 24px;max-width:1200px}
h1{font-size:20px;margin:8px 0 16px}h2{font-size:16px;margin:20px 0 8px}
.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 16px;margin:0 0 12px}
ul.tree{list-style:none;padding-left:22px;margin:0;border-left:1px dashed #d0d7de}
#cohort-tree>ul.tree{padding-left:0;border-left:none}
.node{margin:8px 0}.node>.head{display:flex;gap:12px;align-items:baseline}
.kind{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:#57606a;
border:1px solid #d0d7de;border-radius:10px;padding:0 6px}
.name{font-weight:600}.counts{font-size:12px;color:#57606a}
.inactive{font-size:12px;color:#cf222e}
.bars{display:grid;grid-template-columns:160px 1fr 170px;gap:3px 10px;margin:6px 0 0;
max-width:760px;font-size:12px;align-items:center}
.track{background:#eaeef2;border-radius:3px;height:12px;position:relative;overflow:hidden}
.fill{background:#2da44e;height:100%;float:left}.fill.borrow{background:#bf8700}
.fill.full{background:#cf222e}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border-bottom:1px solid #d0d7de;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}td.msg{color:#57606a;max-width:520px}
.status-Pending{color:#9a6700}.status-Admitted{color:#1a7f37}.status-Finished{color:#57606a}
pre{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px;white-space:pre-wrap;
font-size:13px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:0}dt{color:#57606a}
dd{margin:0}.error{color:#cf222e}
"""


def _page(title: str, body: str, taken_at: datetime | None) -> str:
    meta = (
        f"snapshot {escape(taken_at.strftime('%Y-%m-%d %H:%M:%S UTC'))} · kqueue {__version__}"
        if taken_at is not None
        else f"kqueue {__version__}"
    )
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)} · kqueue</title>"
        "<meta http-equiv=\"refresh\" content=\"30\">"
        f"<style>{_CSS}</style></head><body>"
        "<header><a class=\"brand\" href=\"/\">kqueue</a>"
        "<a href=\"/\">Queues</a><a href=\"/workloads\">Workloads</a>"
        f"<span class=\"meta\">{meta}</span></header>"
        f"<main>{body}</main></body></html>"
    )


def _q(amount: int, resource: str) -> str:
    return format_quantity(amount, resource)


def _bar(b: Bar) -> str:
    label = f"{escape(b.flavor)} / {escape(b.resource)}"
    if b.nominal > 0:
        within = min(b.used, b.nominal) * 100 / b.nominal
        over = min(b.borrowed * 100 / b.nominal, 100 - within) if b.borrowed else 0.0
    else:
        within, over = 0.0, (100.0 if b.used else 0.0)
    cls = "fill full" if b.used >= b.nominal > 0 and not b.borrowed else "fill"
    fills = f'<div class="{cls}" style="width:{within:.1f}%"></div>'
    if over:
        fills += f'<div class="fill borrow" style="width:{over:.1f}%"></div>'
    text = f"{_q(b.used, b.resource)} / {_q(b.nominal, b.resource)} ({b.percent}%)"
    if b.borrowed:
        text += f", borrowing {_q(b.borrowed, b.resource)}"
    title = f"reserved {b.used} of nominal {b.nominal}" + (
        f", borrowing limit {_q(b.borrowing_limit, b.resource)}"
        if b.borrowing_limit is not None
        else ""
    )
    return (
        f'<span>{label}</span><div class="track bar" title="{escape(title)}" '
        f'data-flavor="{escape(b.flavor)}" data-resource="{escape(b.resource)}" '
        f'data-used="{_q(b.used, b.resource)}" data-nominal="{_q(b.nominal, b.resource)}" '
        f'data-percent="{b.percent}">{fills}</div><span>{escape(text)}</span>'
    )


def _node(n: Node) -> str:
    if n.kind == "ClusterQueue":
        name = f'<a class="name" href="/clusterqueues/{quote(n.name)}">{escape(n.name)}</a>'
    else:
        name = f'<span class="name">{escape(n.name)}</span>'
    implicit = ' <span class="counts">(implicit)</span>' if n.implicit else ""
    inactive = f'<span class="inactive">inactive: {escape(n.inactive)}</span>' if n.inactive else ""
    bars = f'<div class="bars">{"".join(_bar(b) for b in n.bars)}</div>' if n.bars else ""
    children = (
        f'<ul class="tree">{"".join(_node(c) for c in n.children)}</ul>' if n.children else ""
    )
    return (
        f'<li class="node" data-kind="{escape(n.kind)}" data-name="{escape(n.name)}">'
        f'<div class="head"><span class="kind">{escape(n.kind)}</span>{name}{implicit}'
        f'<span class="counts">{n.pending} pending · {n.admitted} admitted</span>{inactive}'
        f"</div>{bars}{children}</li>"
    )


def _age(created: datetime | None, now: datetime) -> str:
    if created is None:
        return ""
    return _span(now - created)


def _span(d: timedelta) -> str:
    secs = max(int(d.total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def _wl_link(namespace: str, name: str) -> str:
    return (
        f'<a href="/workloads/{quote(namespace)}/{quote(name)}">'
        f"{escape(namespace)}/{escape(name)}</a>"
    )


def _eta_cell(start: datetime | None, now: datetime) -> str:
    """The predicted start: how far off, the time itself on hover and in ``data-eta``."""
    if start is None:
        return '<td class="eta" title="no estimate: no run-time history">unknown</td>'
    stamp = format_time(start)
    text = "now" if start <= now else "in " + _span(start - now)
    return f'<td class="eta" data-eta="{stamp}" title="{stamp}">{text}</td>'


def _pending_table(items: Sequence[PendingWorkload], now: datetime) -> str:
    if not items:
        return '<table id="pending"><tr><td>No pending workloads.</td></tr></table>'
    rows = "".join(
        f'<tr class="pending-workload" data-workload="{escape(p.key)}" '
        f'data-position="{p.position_in_cluster_queue}" data-reason="{escape(p.reason)}">'
        f"<td>{p.position_in_cluster_queue}</td><td>{p.position_in_local_queue}</td>"
        f"<td>{_wl_link(p.namespace, p.name)}</td><td>{escape(p.local_queue)}</td>"
        f"<td>{p.priority}</td><td>{escape(p.reason)}</td><td>{_age(p.created, now)}</td>"
        f"{_eta_cell(p.estimated_start, now)}"
        f'<td class="msg">{escape(p.message)}</td></tr>'
        for p in items
    )
    return (
        '<table id="pending"><tr><th>CQ position</th><th>LQ position</th><th>Workload</th>'
        "<th>LocalQueue</th><th>Priority</th><th>Reason</th><th>Age</th><th>ETA</th>"
        "<th>Message</th></tr>"
        f"{rows}</table>"
    )


def _workload_table(rows: Iterable[WorkloadRow], now: datetime, table_id: str) -> str:
    body = "".join(
        f'<tr class="workload" data-workload="{escape(r.key)}" data-status="{r.status}">'
        f"<td>{_wl_link(r.namespace, r.name)}</td><td>{escape(r.local_queue)}</td>"
        f"<td>{escape(r.cluster_queue)}</td><td class=\"status-{r.status}\">{r.status}</td>"
        f"<td>{'' if r.position is None else r.position}</td><td>{escape(r.reason)}</td>"
        f"<td>{r.priority}</td><td>{_age(r.created, now)}</td>"
        f'<td class="cluster" data-cluster="{escape(r.cluster)}">{escape(r.cluster)}</td></tr>'
        for r in rows
    )
    if not body:
        body = '<tr><td colspan="9">No workloads.</td></tr>'
    return (
        f'<table id="{table_id}"><tr><th>Workload</th><th>LocalQueue</th><th>ClusterQueue</th>'
        "<th>Status</th><th>CQ position</th><th>Reason</th><th>Priority</th><th>Age</th>"
        "<th>Worker cluster</th></tr>"
        f"{body}</table>"
    )


def overview(tree: Sequence[Node], pending_by_cq: dict[str, list[PendingWorkload]],
             now: datetime) -> str:
    cards = "".join(
        f'<h2><a href="/clusterqueues/{quote(cq)}">{escape(cq)}</a></h2>'
        f"{_pending_table(items, now)}"
        for cq, items in sorted(pending_by_cq.items())
        if items
    ) or "<p>No pending workloads.</p>"
    body = (
        "<h1>Cohorts and ClusterQueues</h1>"
        '<section id="cohort-tree" class="card">'
        f'<ul class="tree">{"".join(_node(n) for n in tree)}</ul></section>'
        f'<h1>Pending workloads</h1><section id="pending-by-queue">{cards}</section>'
    )
    return _page("Queues", body, now)


def cluster_queue(node: Node, items: Sequence[PendingWorkload], admitted: Sequence[WorkloadRow],
                  now: datetime) -> str:
    body = (
        f"<h1>ClusterQueue {escape(node.name)}</h1>"
        f'<section id="cohort-tree" class="card"><ul class="tree">{_node(node)}</ul></section>'
        f"<h2>Pending workloads, in the order kqueue would admit them</h2>"
        f"{_pending_table(items, now)}"
        "<h2>Workloads holding quota</h2>"
        f"{_workload_table(admitted, now, 'admitted')}"
    )
    return _page(f"ClusterQueue {node.name}", body, now)


def workloads(rows: Sequence[WorkloadRow], now: datetime) -> str:
    body = f"<h1>Workloads</h1>{_workload_table(rows, now, 'workloads')}"
    return _page("Workloads", body, now)


def workload(key: str, result: Explanation, text: str, now: datetime) -> str:
    if not result.found:
        body = (
            f"<h1>Workload {escape(key)}</h1>"
            f'<p class="error" id="not-found">{escape(text)}</p>'
        )
        return _page(key, body, now)
    facts = [
        ("State", result.state),
        ("LocalQueue", result.local_queue),
        ("ClusterQueue", result.cluster_queue or "(none)"),
    ]
    d = result.pending
    if d is not None:
        facts += [("Reason", str(d.reason)), ("Message", d.message)]
    where = cluster_cell(result.cluster_name, result.nominated_clusters)
    if where:
        facts.append(("Worker cluster", where))
    dl = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts)
    body = (
        f"<h1>Workload {escape(result.key)}</h1>"
        f'<section class="card"><dl id="facts" data-state="{escape(result.state)}">{dl}</dl>'
        "</section><h2>Explanation</h2>"
        f'<pre id="explanation">{escape(text)}</pre>'
    )
    return _page(result.key, body, now)


def error(title: str, message: str, now: datetime | None) -> str:
    return _page(title, f'<h1>{escape(title)}</h1><p class="error">{escape(message)}</p>', now)
