"""`kqueue convert`: Kueue manifests in, the equivalent kqueue manifests out (a migration path).

The output is the input rewritten, not re-serialised: keys stay in the input's order and fields
the input left out stay out (``--with-defaults`` prints the objects as kqueue's models fill them
in instead). Every object is validated by kqueue's models all the same, so what is printed
applies. Objects of kinds kqueue does not read (a ConfigMap, a Service) pass
through with Kueue's labels and annotations renamed, so a whole directory can be converted.
"""

from __future__ import annotations

import json
from typing import Any

import click
import yaml

from kqueue.api import feature_gates
from kqueue.api.loader import LoadedObject
from kqueue.cli.manifests import InvalidInput, read_manifests

# Set by the API server; an applied manifest must not carry them.
_SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def _clean(doc: dict[str, Any], keep_status: bool) -> dict[str, Any]:
    if keep_status:
        return doc
    doc = {k: v for k, v in doc.items() if k != "status"}
    if not isinstance(doc.get("metadata"), dict):
        return doc
    meta = {k: v for k, v in doc["metadata"].items() if k not in _SERVER_METADATA}
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k != "kubectl.kubernetes.io/last-applied-configuration"
    }
    if annotations:
        meta["annotations"] = annotations
    elif "annotations" in meta:
        del meta["annotations"]
    if "finalizers" in meta and not meta["finalizers"]:
        del meta["finalizers"]
    if "labels" in meta and not meta["labels"]:
        del meta["labels"]
    doc["metadata"] = meta
    return doc


def _output(obj: LoadedObject, *, with_defaults: bool, keep_status: bool) -> dict[str, Any]:
    doc = obj.model.to_dict() if with_defaults and obj.model is not None else obj.raw
    if obj.generate_name is not None and isinstance(doc.get("metadata"), dict):
        # The loader named it to read it; the manifest stays one for `kubectl create`.
        doc = {**doc, "metadata": {k: v for k, v in doc["metadata"].items() if k != "name"}}
    return _clean(doc, keep_status)


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
@click.option(
    "--strict",
    is_flag=True,
    help="Fail (exit status 2, printing nothing) if anything would be dropped; list every "
    "dropped field with its path.",
)
@click.option(
    "--with-defaults",
    is_flag=True,
    help="Print kqueue objects with every defaulted field filled in (default: only the fields "
    "of the input, in its order).",
)
def convert(
    files: tuple[str, ...], output: str, keep_status: bool, strict: bool, with_defaults: bool
) -> None:
    """Print kqueue manifests equivalent to Kueue manifests (`-` reads stdin).

    Reads kueue.x-k8s.io/v1beta1 and v1beta2 objects (and Jobs, Pods and other objects with
    Kueue labels) and prints kqueue.io/v1alpha1 objects with kqueue's labels, annotations and
    scheduling gate. What kqueue does not support is reported on stderr, never dropped
    silently; with --strict it is an error. Exit status 2 on invalid input.
    """
    loaded = read_manifests(files, warn=not strict, migrate=True)
    if strict and loaded.warnings:
        raise InvalidInput(
            f"--strict: {len(loaded.warnings)} field(s) or document(s) would be dropped:\n  "
            + "\n  ".join(loaded.warnings)
        )
    for obj in loaded.objects:
        # Not a warning (nothing is dropped): what the honoured gates set off change.
        for line in feature_gates.honoured(obj.config.feature_gates if obj.config else {}):
            click.echo(f"note: {obj.location} ({obj.ref}): {line}", err=True)
    docs = [
        _output(obj, with_defaults=with_defaults, keep_status=keep_status)
        for obj in loaded.objects
    ]
    if output == "json":
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=2))
    else:
        click.echo(yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False), nl=False)
