"""What every command shares: the cluster options, running a request, kubectl-like errors."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from kqueue.api.suggest import did_you_mean
from kqueue.cli.cluster import connect, current_namespace, list_retrying
from kqueue.controller import kube as k
from kqueue.controller import resources as r
from kqueue.controller.resources import Resource

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# Kind names a command takes, as kueuectl spells them (and kubectl's plurals), by kind.
KIND_NAMES: dict[str, tuple[str, ...]] = {
    "workloads": ("workload", "workloads", "wl"),
    "clusterqueues": ("clusterqueue", "clusterqueues", "cq"),
    "localqueues": ("localqueue", "localqueues", "lq"),
    "resourceflavors": ("resourceflavor", "resourceflavors", "rf", "flavor", "flavors"),
}

RESOURCES: dict[str, tuple[Resource, str]] = {
    "clusterqueues": (r.CLUSTER_QUEUES, "ClusterQueue"),
    "localqueues": (r.LOCAL_QUEUES, "LocalQueue"),
    "workloads": (r.WORKLOADS, "Workload"),
    "resourceflavors": (r.RESOURCE_FLAVORS, "ResourceFlavor"),
}


class AliasGroup(click.Group):
    """Subcommands also answer to their singular, plural and short names (``cq``, ``lq``...)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            return found
        for name in self.list_commands(ctx):
            for kind, aliases in KIND_NAMES.items():
                if cmd_name in aliases and name in (kind, *aliases):
                    return super().get_command(ctx, name)
        return None


@dataclass(frozen=True)
class Target:
    """The cluster and namespace a command works on."""

    kubeconfig: str | None
    context: str | None
    namespace_flag: str | None

    @property
    def namespace(self) -> str:
        return self.namespace_flag or current_namespace(self.kubeconfig, self.context)

    def run(self, work: Callable[[k.Kube], Awaitable[T]]) -> T:
        """Run ``work`` with a client; an API error becomes a one-line error naming the object."""

        async def go() -> T:
            async with connect(self.kubeconfig, self.context) as client:
                return await work(client)

        try:
            return asyncio.run(go())
        except k.KubeError as err:
            raise click.ClickException(str(err)) from err


def cluster_options(f: F) -> F:
    """``--kubeconfig``, ``--context`` and ``-n``: kubectl does not pass its own global flags
    to a plugin, so the plugin takes them itself (and reads ``KUBECONFIG`` like kubectl)."""

    @click.option(
        "--kubeconfig",
        envvar="KUBECONFIG",
        type=click.Path(dir_okay=False),
        help="Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).",
    )
    @click.option("--context", help="The kubeconfig context to use.")
    @click.option(
        "-n",
        "--namespace",
        "namespace_flag",
        help="Namespace (default: the context's namespace, else default).",
    )
    @functools.wraps(f)
    def wrapper(
        *args: Any,
        kubeconfig: str | None,
        context: str | None,
        namespace_flag: str | None,
        **kwargs: Any,
    ) -> Any:
        return f(*args, target=Target(kubeconfig, context, namespace_flag), **kwargs)

    return wrapper  # type: ignore[return-value]


def write_options(dry_run_help: str) -> Callable[[F], F]:
    """``-o/--output`` and ``--dry-run`` (``client``, or the bare flag: ``dry_run_help``) of the
    commands that write an object, with :func:`cluster_options`."""

    def decorate(f: F) -> F:
        f = click.option(
            "-o", "--output", type=click.Choice(("yaml", "json", "name")), help="Print the object."
        )(f)
        f = click.option(
            "--dry-run",
            type=click.Choice(("none", "client")),
            default="none",
            is_flag=False,
            flag_value="client",
            help=dry_run_help,
        )(f)
        return cluster_options(f)

    return decorate


async def not_found(
    client: k.Kube, kind: str, name: str, namespace: str | None = None
) -> click.ClickException:
    """``ClusterQueue "x" not found``, with the closest name that exists, else those that do."""
    resource, label = RESOURCES[kind]
    try:
        items = await list_retrying(client, resource, namespace=namespace)
        names = sorted(str((i.get("metadata") or {}).get("name")) for i in items)
    except k.KubeError:
        names = []
    where = f" in namespace {namespace}" if namespace and resource.namespaced else ""
    hint = did_you_mean(name, names)
    if hint:
        return click.ClickException(f'{label} "{name}" not found{where}; {hint}')
    known = f" (existing: {', '.join(names)})" if names else f" (there are none{where})"
    return click.ClickException(f'{label} "{name}" not found{where}{known}')


async def get_or_explain(
    client: k.Kube, kind: str, name: str, namespace: str | None = None
) -> dict[str, Any]:
    resource, _ = RESOURCES[kind]
    try:
        return await client.get(resource, name, namespace if resource.namespaced else None)
    except k.NotFound:
        raise await not_found(client, kind, name, namespace) from None


def complete_names(kind: str) -> Callable[[click.Context, click.Parameter, str], list[str]]:
    """Shell completion of object names from the cluster (nothing when it cannot be read)."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
        p = ctx.params
        target = Target(p.get("kubeconfig"), p.get("context"), p.get("namespace_flag"))
        resource, _ = RESOURCES[kind]
        try:
            items = target.run(
                lambda c: c.list(
                    resource, namespace=target.namespace if resource.namespaced else None
                )
            )
        except Exception:
            return []
        names = [str((i.get("metadata") or {}).get("name", "")) for i in items]
        return sorted(n for n in names if n.startswith(incomplete))

    return complete


def qualified(kind: str, name: str) -> str:
    """``clusterqueue.kqueue.io/name``, as kubectl names an object in its messages."""
    resource, label = RESOURCES[kind]
    return f"{label.lower()}.{resource.group}/{name}"
