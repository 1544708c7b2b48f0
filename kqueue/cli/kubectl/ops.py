"""``stop`` and ``resume``: ClusterQueue and LocalQueue ``spec.stopPolicy``, Workload
``spec.active``, each one merge patch (kueuectl's commands and flags)."""

from __future__ import annotations

import json
from typing import Any

import click

from kqueue.cli.kubectl import printing
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
from kqueue.controller.kube import MERGE_PATCH

Obj = dict[str, Any]


def stop_patch(kind: str, *, keep_already_running: bool = False) -> Obj:
    """The patch that stops a queue or deactivates a workload (kueuectl's ``stop``)."""
    if kind == "workloads":
        return {"spec": {"active": False}}
    return {"spec": {"stopPolicy": "Hold" if keep_already_running else "HoldAndDrain"}}


def resume_patch(kind: str) -> Obj:
    if kind == "workloads":
        return {"spec": {"active": True}}
    return {"spec": {"stopPolicy": "None"}}


def _unchanged(obj: Obj, patch: Obj) -> bool:
    spec = obj.get("spec") or {}
    want = patch["spec"]
    defaults = {"stopPolicy": "None", "active": True}
    return all(spec.get(key, defaults[key]) == value for key, value in want.items())


def apply_patch(
    target: Target, kind: str, name: str, patch: Obj, *, verb: str, dry_run: str, output: str | None
) -> None:
    resource, _ = RESOURCES[kind]
    namespace = target.namespace if resource.namespaced else None

    async def work(client: k.Kube) -> tuple[Obj, bool]:
        current = await get_or_explain(client, kind, name, namespace)
        if dry_run == "client":
            return current, _unchanged(current, patch)
        changed = not _unchanged(current, patch)
        return await client.patch(resource, name, patch, namespace=namespace), not changed

    obj, unchanged = target.run(work)
    if dry_run == "client":
        path = resource.object_path(name, namespace)
        click.echo(f"{qualified(kind, name)} {verb} (dry run)")
        click.echo(f"PATCH {path} ({MERGE_PATCH})")
        click.echo(json.dumps(patch, separators=(",", ":")))
        return
    if output in ("yaml", "json"):
        click.echo(printing.dump(obj, output))
        return
    if output == "name":
        click.echo(qualified(kind, name))
        return
    click.echo(f"{qualified(kind, name)} {verb}" + (" (no change)" if unchanged else ""))


op_options = write_options("client (or the bare flag): print the patch instead of sending it.")


def _queue_command(group: click.Group, kind: str, *, stop: bool) -> None:
    label = RESOURCES[kind][1]

    @click.argument("name", shell_complete=complete_names(kind))
    @op_options
    def command(target: Target, name: str, dry_run: str, output: str | None, **kw: Any) -> None:
        if stop:
            patch = stop_patch(kind, keep_already_running=kw.get("keep_already_running", False))
        else:
            patch = resume_patch(kind)
        verb = "stopped" if stop else "resumed"
        apply_patch(target, kind, name, patch, verb=verb, dry_run=dry_run, output=output)

    if stop and kind != "workloads":
        command = click.option(
            "--keep-already-running",
            is_flag=True,
            help="Hold: admit nothing new but let admitted workloads run (default "
            "HoldAndDrain also evicts them).",
        )(command)
    what = {
        "clusterqueues": "ClusterQueue NAME (spec.stopPolicy",
        "localqueues": "LocalQueue NAME in -n NAMESPACE (spec.stopPolicy",
        "workloads": "Workload NAME in -n NAMESPACE (spec.active",
    }[kind]
    value = (
        ("HoldAndDrain, or Hold with --keep-already-running)" if kind != "workloads" else "false)")
        if stop
        else ("None)" if kind != "workloads" else "true)")
    )
    command.__doc__ = f"{'Stop' if stop else 'Resume'} {what} {value}."
    group.command(name=label.lower())(command)


@click.group(name="stop", cls=AliasGroup)
def stop_group() -> None:
    """Stop admission in a ClusterQueue or LocalQueue, or deactivate a Workload."""


@click.group(name="resume", cls=AliasGroup)
def resume_group() -> None:
    """Resume a stopped ClusterQueue or LocalQueue, or reactivate a Workload."""


for _kind in ("clusterqueues", "localqueues", "workloads"):
    _queue_command(stop_group, _kind, stop=True)
    _queue_command(resume_group, _kind, stop=False)
