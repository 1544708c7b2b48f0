"""The CLI's live-cluster mode: connect with a kubeconfig, read the objects the engine needs.

``kqueue explain`` and the ``kubectl kqueue`` plugin read the cluster the same way: one
:class:`~kqueue.controller.kube.Kube` (the controller's JSON client and its error types) over a
client made from ``--kubeconfig`` / ``--context``, the in-cluster service account, or the
default kubeconfig; then every kind the engine is fed (:func:`fetch_engine_objects`), loaded
through the manifest loader so a cluster and a ``kubectl get -o yaml`` dump are read alike.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import click
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient

from kqueue.api.loader import LoadedObject, LoadError, Location, load_object
from kqueue.controller import kube as k
from kqueue.controller import resources as r
from kqueue.controller.resources import NAMESPACES, PRIORITY_CLASSES, Resource

# Statuses worth another try: an API server that is starting or overloaded (429 "storage is
# (re)initializing" right after a CRD is established, 503 while it is not ready).
_TRANSIENT = frozenset({429, 500, 503, 504})

# What the engine is built from, in the order it is fed.
ENGINE_KINDS: tuple[tuple[Resource, str], ...] = (
    (NAMESPACES, "Namespace"),
    (r.LIMIT_RANGES, "LimitRange"),
    (PRIORITY_CLASSES, "PriorityClass"),
    (r.RESOURCE_FLAVORS, "ResourceFlavor"),
    (r.COHORTS, "Cohort"),
    (r.CLUSTER_QUEUES, "ClusterQueue"),
    (r.LOCAL_QUEUES, "LocalQueue"),
    (r.WORKLOAD_PRIORITY_CLASSES, "WorkloadPriorityClass"),
    # DRA quota (docs/dra.md): what sizes device claims, when the Configuration maps classes.
    (r.RESOURCE_CLAIM_TEMPLATES, "ResourceClaimTemplate"),
    (r.DEVICE_CLASSES, "DeviceClass"),
    (r.RESOURCE_SLICES, "ResourceSlice"),
    (r.WORKLOADS, "Workload"),
)
# Kinds read only to size DRA claims: a user who may not list them still gets an answer, with
# claims counted as far as what could be read allows.
_OPTIONAL: frozenset[Resource] = frozenset(
    {r.RESOURCE_CLAIM_TEMPLATES, r.DEVICE_CLASSES, r.RESOURCE_SLICES}
)
_FORBIDDEN = 403


async def _api_client(kubeconfig: str | None, context: str | None) -> ApiClient:
    if kubeconfig or context:
        return await kube_config.new_client_from_config(config_file=kubeconfig, context=context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
        return ApiClient()
    return await kube_config.new_client_from_config()


@asynccontextmanager
async def connect(kubeconfig: str | None, context: str | None = None) -> AsyncIterator[k.Kube]:
    """A client for the cluster of ``kubeconfig`` (and ``context``), closed on exit."""
    try:
        api = await _api_client(kubeconfig, context)
    except (kube_config.ConfigException, OSError) as err:
        raise click.ClickException(f"cannot load the kubeconfig: {err}") from err
    try:
        yield k.Kube(api)
    finally:
        await api.close()


def current_namespace(kubeconfig: str | None, context: str | None = None) -> str:
    """The namespace of the kubeconfig's (current or given) context, as kubectl resolves it."""
    if not kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as fh:
                return fh.read().strip() or "default"
        except OSError:
            return "default"
    try:
        contexts, active = kube_config.list_kube_config_contexts(kubeconfig)
    except (kube_config.ConfigException, OSError):
        return "default"
    chosen = active
    if context:
        chosen = next((c for c in contexts if c.get("name") == context), None)
    ns = ((chosen or {}).get("context") or {}).get("namespace")
    return str(ns) if ns else "default"


async def list_retrying(
    client: k.Kube, resource: Resource, *, namespace: str | None = None, label_selector: str = ""
) -> list[dict[str, Any]]:
    """``client.list`` with a few retries on statuses of a starting or overloaded API server."""
    delay = 0.2
    for attempt in range(8):
        try:
            return await client.list(resource, namespace=namespace, label_selector=label_selector)
        except k.KubeError as err:
            if err.status not in _TRANSIENT or attempt == 7:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 3.0)
    raise AssertionError("unreachable")


async def fetch_engine_objects(client: k.Kube) -> list[dict[str, Any]]:
    """Every object the engine is built from, as manifests (apiVersion and kind filled in)."""
    docs: list[dict[str, Any]] = []
    try:
        for resource, kind in ENGINE_KINDS:
            try:
                items = await list_retrying(client, resource)
            except k.NotFound:
                continue  # that kind is not installed: nothing of it to take into account
            except k.KubeError as err:
                if err.status == _FORBIDDEN and resource in _OPTIONAL:
                    click.echo(f"warning: cannot list {resource}: {err}", err=True)
                    continue
                raise
            for item in items:
                # List items from the API server do not always repeat their kind.
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", kind)
                docs.append(item)
    except k.KubeError as err:
        raise click.ClickException(f"cannot read the cluster: {err}") from err
    return docs


def load_cluster_objects(docs: list[dict[str, Any]]) -> list[LoadedObject]:
    """Load listed objects as the manifest loader does; one that cannot be read is skipped with
    a warning (the rest of the cluster still has an answer)."""
    out = []
    for index, doc in enumerate(docs, start=1):
        try:
            obj = load_object(doc, Location("<cluster>", index))
        except LoadError as err:
            click.echo(f"warning: skipped: {err}", err=True)
            continue
        if obj is not None:
            out.append(obj)
    return out


def cluster_objects(kubeconfig: str | None, context: str | None = None) -> list[LoadedObject]:
    """Connect, read everything the engine needs, load it (for synchronous callers)."""

    async def run() -> list[dict[str, Any]]:
        async with connect(kubeconfig, context) as client:
            return await fetch_engine_objects(client)

    return load_cluster_objects(asyncio.run(run()))
