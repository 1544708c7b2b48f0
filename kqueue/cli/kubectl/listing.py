"""``list`` and ``pending``: what is in the queues, with positions and pending reasons.

Positions and reasons come from an engine built from the cluster's objects
(:mod:`kqueue.cli.cluster`, :func:`kqueue.visibility.state.settled_engine`), the way
``kqueue explain`` reads a cluster, and are computed by :mod:`kqueue.visibility.pending`, which
the visibility API serves as well. ``pending`` asks that API first (the controller's live
queues) and computes locally only when it is not served, saying on stderr which it did. The ETA
column is the predicted start (``estimatedStartTime``): the controller's, or computed here from
the cluster's objects (:mod:`kqueue.visibility.estimates`, finished Workloads giving the run
times).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click

from kqueue.api.loader import LoadError
from kqueue.api.v1alpha1 import parse_time
from kqueue.cli.cluster import fetch_engine_objects, list_retrying, load_cluster_objects
from kqueue.cli.kubectl import printing, rows
from kqueue.cli.kubectl.common import (
    RESOURCES,
    AliasGroup,
    Target,
    cluster_options,
    complete_names,
    not_found,
    qualified,
)
from kqueue.cli.manifests import InvalidInput
from kqueue.controller import kube as k
from kqueue.controller import resources as r
from kqueue.engine.engine import Engine
from kqueue.engine.types import WorkloadKey
from kqueue.sim.scenario import build_scenario
from kqueue.visibility import estimates
from kqueue.visibility import pending as visibility
from kqueue.visibility.state import settled_engine

Obj = dict[str, Any]

LIST_OUTPUTS = ("wide", "yaml", "json", "name")
STATUSES = ("pending", "quotareserved", "admitted", "finished")


def engine_of(docs: list[Obj]) -> Engine:
    """The engine in the controller's state for these listed objects."""
    try:
        scenario = build_scenario(load_cluster_objects(docs))
    except LoadError as err:
        raise InvalidInput(str(err)) from err
    return settled_engine(scenario)


def _emit_objects(kind: str, items: Sequence[Obj], output: str) -> None:
    if output == "name":
        for item in items:
            click.echo(qualified(kind, str((item.get("metadata") or {}).get("name"))))
        return
    resource, label = RESOURCES[kind]
    for item in items:
        item.setdefault("apiVersion", resource.api_version)
        item.setdefault("kind", label)
    click.echo(printing.dump(printing.as_list(items), output))


def _emit_table(table: rows.Table, what: str, namespace: str | None) -> None:
    if not table.rows:
        where = f" in {namespace} namespace" if namespace else ""
        click.echo(f"No {what} found{where}.", err=True)
        return
    click.echo(printing.table(table.headers, table.rows))


def _by_name(items: list[Obj]) -> list[Obj]:
    return sorted(
        items,
        key=lambda o: ((o.get("metadata") or {}).get("namespace", ""), o["metadata"]["name"]),
    )


def list_options(f: Any) -> Any:
    f = click.option(
        "-o", "--output", type=click.Choice(LIST_OUTPUTS), help="Output format (default: table)."
    )(f)
    f = click.option(
        "-l", "--selector", default="", help="Label selector, as kubectl's (e.g. -l team=a)."
    )(f)
    return cluster_options(f)


def namespaced_list_options(f: Any) -> Any:
    f = click.option("-A", "--all-namespaces", is_flag=True, help="List across all namespaces.")(f)
    return list_options(f)


@click.group(name="list", cls=AliasGroup)
def list_group() -> None:
    """List workloads, clusterqueues, localqueues or resourceflavors."""


@list_group.command(name="workloads")
@namespaced_list_options
@click.option("-c", "--clusterqueue", default="", help="Only workloads of this ClusterQueue.")
@click.option("-q", "--localqueue", default="", help="Only workloads of this LocalQueue.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(STATUSES, case_sensitive=False),
    help="Only workloads in this status (repeatable).",
)
def list_workloads(
    target: Target,
    output: str | None,
    selector: str,
    all_namespaces: bool,
    clusterqueue: str,
    localqueue: str,
    statuses: Sequence[str],
) -> None:
    """Workloads with their queue position, pending reason, flavors and age."""
    namespace = None if all_namespaces else target.namespace

    async def work(client: k.Kube) -> tuple[list[Obj], list[Obj], list[Obj]]:
        docs: list[Obj] = []
        if output not in ("yaml", "json", "name"):
            docs = await _engine_objects_if_allowed(client)
        if selector or not docs:
            shown = await list_retrying(
                client, r.WORKLOADS, namespace=namespace, label_selector=selector
            )
        else:
            shown = [
                d
                for d in docs
                if d.get("kind") == "Workload"
                and (namespace is None or d["metadata"].get("namespace") == namespace)
            ]
        if docs:
            lqs = [d for d in docs if d.get("kind") == "LocalQueue"]
        else:
            lqs = await list_retrying(client, r.LOCAL_QUEUES, namespace=namespace)
        return docs, lqs, shown

    docs, lqs, shown = target.run(work)
    lq_targets = {
        f"{d['metadata'].get('namespace')}/{d['metadata']['name']}": str(
            (d.get("spec") or {}).get("clusterQueue", "")
        )
        for d in lqs
    }
    if clusterqueue:
        shown = [w for w in shown if rows.workload_cluster_queue(w, lq_targets) == clusterqueue]
    if localqueue:
        shown = [w for w in shown if (w.get("spec") or {}).get("queueName") == localqueue]
    if statuses:
        wanted = {s.upper() for s in statuses}
        shown = [w for w in shown if rows.workload_status(w) in wanted]
    shown = _by_name(shown)
    if output in ("yaml", "json", "name"):
        _emit_objects("workloads", shown, output)
        return
    keys = [f"{w['metadata'].get('namespace')}/{w['metadata']['name']}" for w in shown]
    queued: dict[str, visibility.PendingWorkload] = {}
    reasons: dict[str, tuple[str, str]] = {}
    if docs:
        engine = engine_of(docs)
        starts = estimates.starts_from_documents(engine, docs, datetime.now(UTC))
        queued = visibility.positions(engine, keys, starts)
        for key in keys:
            details = engine.explain(WorkloadKey(key)) if key not in queued else None
            if details is not None:
                reasons[key] = (str(details.reason), details.message)
    table = rows.workloads_table(
        shown,
        now=datetime.now(UTC),
        lq_targets=lq_targets,
        queued=queued,
        reasons=reasons,
        all_namespaces=all_namespaces,
        wide=output == "wide",
    )
    _emit_table(table, "workloads", namespace)


async def _engine_objects_if_allowed(client: k.Kube) -> list[Obj]:
    """Everything the engine needs, or nothing (with a warning) when RBAC forbids reading it:
    a user who may read only their namespace still gets the list, with the reasons kqueue wrote
    on the Workloads but without positions."""
    try:
        return await fetch_engine_objects(client)
    except click.ClickException as err:
        cause = err.__cause__
        if not (isinstance(cause, k.KubeError) and cause.status == 403):
            raise
        click.echo(
            f"warning: no positions: they need read access to every kqueue object ({cause})",
            err=True,
        )
        return []


def _list_kind(target: Target, kind: str, selector: str, namespace: str | None) -> list[Obj]:
    resource, _ = RESOURCES[kind]
    items = target.run(
        lambda c: list_retrying(c, resource, namespace=namespace, label_selector=selector)
    )
    return _by_name(items)


def _active_filter(items: list[Obj], active: bool | None) -> list[Obj]:
    if active is None:
        return items
    want = "True" if active else "False"
    return [i for i in items if (rows.condition(i, "Active") or {}).get("status") == want]


@list_group.command(name="clusterqueues")
@list_options
@click.option("--active", type=bool, default=None, help="Only active (true) or inactive (false).")
def list_cluster_queues(
    target: Target, output: str | None, selector: str, active: bool | None
) -> None:
    """ClusterQueues with cohort, pending and admitted counts, and usage against nominal quota."""
    items = _active_filter(_list_kind(target, "clusterqueues", selector, None), active)
    if output in ("yaml", "json", "name"):
        _emit_objects("clusterqueues", items, output)
        return
    table = rows.cluster_queues_table(items, now=datetime.now(UTC), wide=output == "wide")
    _emit_table(table, "clusterqueues", None)


@list_group.command(name="localqueues")
@namespaced_list_options
@click.option("-c", "--clusterqueue", default="", help="Only LocalQueues of this ClusterQueue.")
@click.option("--active", type=bool, default=None, help="Only active (true) or inactive (false).")
def list_local_queues(
    target: Target,
    output: str | None,
    selector: str,
    all_namespaces: bool,
    clusterqueue: str,
    active: bool | None,
) -> None:
    """LocalQueues with their ClusterQueue and pending and admitted counts."""
    namespace = None if all_namespaces else target.namespace
    items = _active_filter(_list_kind(target, "localqueues", selector, namespace), active)
    if clusterqueue:
        items = [i for i in items if (i.get("spec") or {}).get("clusterQueue") == clusterqueue]
    if output in ("yaml", "json", "name"):
        _emit_objects("localqueues", items, output)
        return
    table = rows.local_queues_table(
        items, now=datetime.now(UTC), all_namespaces=all_namespaces, wide=output == "wide"
    )
    _emit_table(table, "localqueues", namespace)


@list_group.command(name="resourceflavors")
@list_options
def list_resource_flavors(target: Target, output: str | None, selector: str) -> None:
    """ResourceFlavors with their node labels (and, wide, taints and tolerations)."""
    items = _list_kind(target, "resourceflavors", selector, None)
    if output in ("yaml", "json", "name"):
        _emit_objects("resourceflavors", items, output)
        return
    table = rows.resource_flavors_table(items, now=datetime.now(UTC), wide=output == "wide")
    _emit_table(table, "resourceflavors", None)


# -- pending ------------------------------------------------------------------------------------


@click.group(name="pending", cls=AliasGroup)
def pending_group() -> None:
    """Pending workloads of a queue, in the order kqueue would admit them."""


def pending_options(f: Any) -> Any:
    f = click.option(
        "-o", "--output", type=click.Choice(("wide", "yaml", "json")), help="Output format."
    )(f)
    f = click.option(
        "--offset",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="Skip this many workloads from the head of the queue.",
    )(f)
    f = click.option(
        "--limit",
        type=click.IntRange(min=0),
        default=visibility.DEFAULT_LIMIT,
        show_default=True,
        help="At most this many workloads.",
    )(f)
    return cluster_options(f)


def _emit_pending(items: list[visibility.PendingWorkload], output: str | None, what: str) -> None:
    if output in ("yaml", "json"):
        click.echo(printing.dump(visibility.summary(items), output))
        return
    if not items:
        click.echo(f"No pending workloads in {what}.", err=True)
        return
    table = rows.pending_table(items, now=datetime.now(UTC))
    click.echo(printing.table(table.headers, table.rows))


VISIBILITY_PATH = f"/apis/{visibility.API_VERSION}"


def _from_api(item: Obj, cluster_queue: str) -> visibility.PendingWorkload:
    meta = item.get("metadata") or {}
    return visibility.PendingWorkload(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        local_queue=str(item.get("localQueueName", "")),
        cluster_queue=cluster_queue,
        priority=int(item.get("priority", 0)),
        created=parse_time(str(meta.get("creationTimestamp"))),
        position_in_cluster_queue=int(item.get("positionInClusterQueue", 0)),
        position_in_local_queue=int(item.get("positionInLocalQueue", 0)),
        reason=str(item.get("reason", "")),
        message=str(item.get("message", "")),
        estimated_start=(
            parse_time(str(item["estimatedStartTime"])) if item.get("estimatedStartTime") else None
        ),
    )


async def _served_pending(
    client: k.Kube, kind: str, name: str, namespace: str | None, offset: int, limit: int
) -> list[visibility.PendingWorkload] | None:
    """The controller's answer from the visibility API; None when the API is not served
    (no APIService, or kqueue's server unavailable), for the caller to compute it locally."""
    status, _ = await client.request("GET", VISIBILITY_PATH, time_limit=10)
    if status != 200:
        click.echo(
            f"visibility API {visibility.API_VERSION} not served (HTTP {status}): positions "
            "computed here from the cluster's objects",
            err=True,
        )
        return None
    if kind == "clusterqueues":
        path = f"{VISIBILITY_PATH}/clusterqueues/{name}/pendingworkloads"
    else:
        path = f"{VISIBILITY_PATH}/namespaces/{namespace}/localqueues/{name}/pendingworkloads"
    query = [("offset", str(offset)), ("limit", str(limit))]
    status, body = await client.request("GET", path, query=query, time_limit=30)
    if status != 200:
        raise click.ClickException(
            f"{body.get('message') or body.get('reason') or 'error'} (HTTP {status} from the "
            f"visibility API {visibility.API_VERSION})"
        )
    click.echo(f"from the visibility API {visibility.API_VERSION} (kqueue's live queues)", err=True)
    cq = name if kind == "clusterqueues" else ""
    return [_from_api(i, cq) for i in body.get("items") or []]


def _pending(
    target: Target, kind: str, name: str, namespace: str | None, offset: int, limit: int
) -> list[visibility.PendingWorkload]:
    served = target.run(
        lambda client: _served_pending(client, kind, name, namespace, offset, limit)
    )
    if served is not None:
        return served
    return _pending_locally(target, kind, name, namespace, offset, limit)


def _pending_locally(
    target: Target, kind: str, name: str, namespace: str | None, offset: int, limit: int
) -> list[visibility.PendingWorkload]:
    async def work(client: k.Kube) -> list[Obj]:
        docs = await fetch_engine_objects(client)
        label = RESOURCES[kind][1]
        exists = any(
            d.get("kind") == label
            and d["metadata"]["name"] == name
            and (namespace is None or d["metadata"].get("namespace") == namespace)
            for d in docs
        )
        if not exists:
            raise await not_found(client, kind, name, namespace)
        return docs

    docs = target.run(work)
    engine = engine_of(docs)
    starts = estimates.starts_from_documents(engine, docs, datetime.now(UTC))
    try:
        if kind == "clusterqueues":
            return visibility.in_cluster_queue(
                engine, name, offset=offset, limit=limit, estimates=starts
            )
        assert namespace is not None
        return visibility.in_local_queue(
            engine, namespace, name, offset=offset, limit=limit, estimates=starts
        )
    except visibility.UnknownQueue as err:
        # Listed but not taken by the engine (invalid): say which, not "not found".
        raise click.ClickException(f"{err}: it could not be read; see the warnings above") from err


@pending_group.command(name="clusterqueue")
@click.argument("name", shell_complete=complete_names("clusterqueues"))
@pending_options
def pending_cluster_queue(
    target: Target, name: str, output: str | None, offset: int, limit: int
) -> None:
    """Pending workloads of ClusterQueue NAME with their positions (0 = admitted next)."""
    items = _pending(target, "clusterqueues", name, None, offset, limit)
    _emit_pending(items, output, f"ClusterQueue {name}")


@pending_group.command(name="localqueue")
@click.argument("name", shell_complete=complete_names("localqueues"))
@pending_options
def pending_local_queue(
    target: Target, name: str, output: str | None, offset: int, limit: int
) -> None:
    """Pending workloads of LocalQueue NAME (in -n NAMESPACE) with their positions."""
    ns = target.namespace
    items = _pending(target, "localqueues", name, ns, offset, limit)
    _emit_pending(items, output, f"LocalQueue {ns}/{name}")
