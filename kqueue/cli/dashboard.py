"""``kqueue dashboard``: the read-only web view against a cluster, served from this machine.

The same pages ``kqueue run`` serves with ``webView.bindAddress`` (:mod:`kqueue.cli.webview`),
read with the kubeconfig's identity: it needs to list kqueue's kinds, namespaces and priority
classes cluster-wide, as ``kqueue explain`` does.
"""

from __future__ import annotations

import asyncio
import contextlib

import click

from kqueue.cli.cluster import connect
from kqueue.cli.webview.server import DEFAULT_TTL, Snapshots, serve_web_view


@click.command(name="dashboard")
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    help="Kubeconfig of the cluster (default: in-cluster, else the default kubeconfig).",
)
@click.option("--context", help="The kubeconfig context to use (default: its current one).")
@click.option(
    "--address",
    default="127.0.0.1:8090",
    show_default=True,
    help="host:port to serve on (port 0: any free port).",
)
@click.option(
    "--refresh",
    type=click.FloatRange(min=0),
    default=DEFAULT_TTL,
    show_default=True,
    help="Seconds a snapshot of the cluster is reused for before pages read it again.",
)
def dashboard(kubeconfig: str | None, context: str | None, address: str, refresh: float) -> None:
    """Serve the web view: cohort tree with usage, pending workloads, explanations."""
    if address.count(":") != 1 or not address.rpartition(":")[2].isdigit():
        raise click.BadParameter(
            f"{address!r}: expected host:port, e.g. 127.0.0.1:8090", param_hint="--address"
        )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(kubeconfig, context, address, refresh))


async def _serve(kubeconfig: str | None, context: str | None, address: str, ttl: float) -> None:
    async with connect(kubeconfig, context) as client:
        try:
            runner = await serve_web_view(Snapshots.of_cluster(client, ttl=ttl), address)
        except OSError as err:
            raise click.ClickException(f"cannot listen on {address}: {err}") from err
        assert runner is not None
        host, port = runner.addresses[0][:2]
        click.echo(f"kqueue dashboard: http://{host}:{port}/ (Ctrl-C stops)", err=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
