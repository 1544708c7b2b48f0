"""``create clusterqueue|localqueue|resourceflavor`` from flags, with kueuectl's flag names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from kqueue.cli.kubectl import objects, printing
from kqueue.cli.kubectl.common import (
    RESOURCES,
    AliasGroup,
    Target,
    complete_names,
    get_or_explain,
    qualified,
    write_options,
)
from kqueue.controller import kube as k

Obj = dict[str, Any]


def _build(make: Any, *args: Any, **kwargs: Any) -> Obj:
    try:
        doc: Obj = make(*args, **kwargs)
    except objects.FlagError as err:
        raise click.UsageError(str(err)) from err
    return doc


def _create(
    target: Target,
    kind: str,
    doc: Obj,
    *,
    dry_run: str,
    output: str | None,
    check_cluster_queue: str | None = None,
) -> None:
    resource, _ = RESOURCES[kind]
    name = doc["metadata"]["name"]
    namespace = doc["metadata"].get("namespace")

    async def work(client: k.Kube) -> Obj:
        if check_cluster_queue is not None:
            await get_or_explain(client, "clusterqueues", check_cluster_queue)
        if dry_run == "client":
            return doc
        try:
            return await client.create(resource, doc, namespace=namespace)
        except k.Conflict:
            where = f" in namespace {namespace}" if namespace else ""
            raise click.ClickException(
                f'{RESOURCES[kind][1]} "{name}" already exists{where}'
            ) from None

    # A client dry run still reads the ClusterQueue a LocalQueue names, as kueuectl does.
    offline = dry_run == "client" and check_cluster_queue is None
    created = doc if offline else target.run(work)
    suffix = " (dry run)" if dry_run == "client" else ""
    if output in ("yaml", "json"):
        click.echo(printing.dump(created, output))
    elif output == "name":
        click.echo(qualified(kind, name))
    else:
        click.echo(f"{qualified(kind, name)} created{suffix}")


create_options = write_options("client (or the bare flag): print the object instead of creating it.")


@click.group(name="create", cls=AliasGroup)
def create_group() -> None:
    """Create a ClusterQueue, LocalQueue or ResourceFlavor from flags."""


@create_group.command(name="clusterqueue")
@click.argument("name")
@click.option("--cohort", help="The cohort this ClusterQueue belongs to.")
@click.option("--queuing-strategy", help="BestEffortFIFO (default) or StrictFIFO.")
@click.option(
    "--namespace-selector",
    multiple=True,
    help="KEY=VALUE[,KEY=VALUE]: namespaces allowed to submit (default: all).",
)
@click.option("--reclaim-within-cohort", help="Never (default), LowerPriority or Any.")
@click.option(
    "--preemption-within-cluster-queue",
    help="Never (default), LowerPriority or LowerOrNewerEqualPriority.",
)
@click.option(
    "--nominal-quota",
    multiple=True,
    help='FLAVOR:RESOURCE=QUANTITY[;...][,FLAVOR:...], e.g. "default:cpu=9;memory=36Gi".',
)
@click.option("--borrowing-limit", multiple=True, help="Same syntax as --nominal-quota.")
@click.option("--lending-limit", multiple=True, help="Same syntax as --nominal-quota.")
@create_options
def create_cluster_queue(
    target: Target,
    name: str,
    cohort: str | None,
    queuing_strategy: str | None,
    namespace_selector: Sequence[str],
    reclaim_within_cohort: str | None,
    preemption_within_cluster_queue: str | None,
    nominal_quota: Sequence[str],
    borrowing_limit: Sequence[str],
    lending_limit: Sequence[str],
    dry_run: str,
    output: str | None,
) -> None:
    """Create ClusterQueue NAME."""
    doc = _build(
        objects.cluster_queue,
        name,
        cohort=cohort,
        queuing_strategy=queuing_strategy,
        namespace_selector=namespace_selector,
        reclaim_within_cohort=reclaim_within_cohort,
        preemption_within_cluster_queue=preemption_within_cluster_queue,
        nominal_quota=nominal_quota,
        borrowing_limit=borrowing_limit,
        lending_limit=lending_limit,
    )
    _create(target, "clusterqueues", doc, dry_run=dry_run, output=output)


@create_group.command(name="localqueue")
@click.argument("name")
@click.option(
    "-c",
    "--clusterqueue",
    required=True,
    shell_complete=complete_names("clusterqueues"),
    help="The ClusterQueue the LocalQueue submits to.",
)
@click.option(
    "-i", "--ignore-unknown-cq", is_flag=True, help="Create it even if the ClusterQueue is missing."
)
@create_options
def create_local_queue(
    target: Target,
    name: str,
    clusterqueue: str,
    ignore_unknown_cq: bool,
    dry_run: str,
    output: str | None,
) -> None:
    """Create LocalQueue NAME in -n NAMESPACE, pointing to ClusterQueue -c."""
    doc = _build(objects.local_queue, name, target.namespace, clusterqueue)
    _create(
        target,
        "localqueues",
        doc,
        dry_run=dry_run,
        output=output,
        check_cluster_queue=None if ignore_unknown_cq else clusterqueue,
    )


@create_group.command(name="resourceflavor")
@click.argument("name")
@click.option("--node-labels", multiple=True, help="KEY=VALUE[,KEY=VALUE] of the flavor's nodes.")
@click.option("--node-taints", multiple=True, help="KEY[=VALUE]:EFFECT[,...] the nodes have.")
@click.option(
    "--tolerations", multiple=True, help="KEY[=VALUE][:EFFECT][,...] added to admitted pods."
)
@create_options
def create_resource_flavor(
    target: Target,
    name: str,
    node_labels: Sequence[str],
    node_taints: Sequence[str],
    tolerations: Sequence[str],
    dry_run: str,
    output: str | None,
) -> None:
    """Create ResourceFlavor NAME."""
    doc = _build(
        objects.resource_flavor,
        name,
        node_labels=node_labels,
        node_taints=node_taints,
        toleration_specs=tolerations,
    )
    _create(target, "resourceflavors", doc, dry_run=dry_run, output=output)
