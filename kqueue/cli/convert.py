"""`kqueue convert`: Kueue manifests in, the equivalent kqueue manifests out (a migration path)."""

from __future__ import annotations

import json
from typing import Any

import click
import yaml

from kqueue.cli.manifests import read_manifests

# Set by the API server; an applied manifest must not carry them.
_SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def _clean(doc: dict[str, Any], keep_status: bool) -> dict[str, Any]:
    if keep_status:
        return doc
    doc = {k: v for k, v in doc.items() if k != "status"}
    meta = {k: v for k, v in (doc.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k != "kubectl.kubernetes.io/last-applied-configuration"
    }
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    if not meta.get("finalizers"):
        meta.pop("finalizers", None)
    if not meta.get("labels"):
        meta.pop("labels", None)
    doc["metadata"] = meta
    return doc


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True
)
@click.option(
    "--keep-status",
    is_flag=True,
    help="Keep status and server-set metadata (uid, resourceVersion, ...), e.g. for simulate.",
)
def convert(files: tuple[str, ...], output: str, keep_status: bool) -> None:
    """Print kqueue manifests equivalent to Kueue manifests (`-` reads stdin).

    Reads kueue.x-k8s.io/v1beta1 and v1beta2 objects (and Jobs and Pods with Kueue labels) and
    prints kqueue.io/v1alpha1 objects with kqueue's labels, annotations and scheduling gate.
    What kqueue does not support is reported on stderr, never dropped silently. Exit status 2 on
    invalid input.
    """
    loaded = read_manifests(files)
    docs = []
    for obj in loaded.objects:
        doc = obj.model.to_dict() if obj.model is not None else obj.raw
        docs.append(_clean(doc, keep_status))
    if output == "json":
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=2))
    else:
        click.echo(yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False), nl=False)
