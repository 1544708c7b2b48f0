"""Reads and writes of the objects the controller manages, over plain JSON.

Every write names the object and says what went wrong in one exception type, so callers decide
on outcomes (``Conflict``: someone wrote first, read again; ``NotFound``: it is gone) instead of
parsing HTTP statuses. Status writes carry the resourceVersion that was read: the API server
refuses a write based on a stale read (optimistic concurrency), which is what keeps two writers,
or a writer and a restart, from admitting one workload twice.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
from kubernetes_asyncio.client import ApiClient

from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.informer import (
    JOBS,
    NAMESPACES,
    PODS,
    PRIORITY_CLASSES,
    Resource,
)

Obj = dict[str, Any]

# The kqueue.io kinds, as the informers and writers address them.
RESOURCE_FLAVORS: Final = Resource(c.GROUP, c.VERSION, "resourceflavors", namespaced=False)
CLUSTER_QUEUES: Final = Resource(c.GROUP, c.VERSION, "clusterqueues", namespaced=False)
COHORTS: Final = Resource(c.GROUP, c.VERSION, "cohorts", namespaced=False)
WORKLOAD_PRIORITY_CLASSES: Final = Resource(
    c.GROUP, c.VERSION, "workloadpriorityclasses", namespaced=False
)
LOCAL_QUEUES: Final = Resource(c.GROUP, c.VERSION, "localqueues")
WORKLOADS: Final = Resource(c.GROUP, c.VERSION, "workloads")
EVENTS_V1: Final = Resource("", "v1", "events")

__all__ = [
    "CLUSTER_QUEUES",
    "COHORTS",
    "JOBS",
    "LOCAL_QUEUES",
    "NAMESPACES",
    "PODS",
    "PRIORITY_CLASSES",
    "RESOURCE_FLAVORS",
    "WORKLOADS",
    "WORKLOAD_PRIORITY_CLASSES",
    "Conflict",
    "Kube",
    "KubeError",
    "NotFound",
]

MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"


class KubeError(Exception):
    """A request the API server refused; ``status`` is the HTTP status."""

    def __init__(self, *, what: str, status: int, body: Obj) -> None:
        self.status = status
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", ""))
        super().__init__(f"{what}: HTTP {status} {self.reason}: {self.message}")


class Conflict(KubeError):
    """409: the object changed since it was read (or already exists)."""


class NotFound(KubeError):
    """404: the object (or its namespace) is gone."""


class WriteDeadlinePassed(TimeoutError):
    """A write not sent: the leadership it would have been issued under may be over."""


def _raise_for(what: str, status: int, body: Obj) -> None:
    if status == 409:
        raise Conflict(what=what, status=status, body=body)
    if status == 404:
        raise NotFound(what=what, status=status, body=body)
    if not 200 <= status < 300:
        raise KubeError(what=what, status=status, body=body)


def object_path(resource: Resource, name: str, namespace: str | None = None) -> str:
    return f"{resource.collection_path(namespace)}/{name}"


@dataclass
class Kube:
    """The controller's JSON client; one per process, shared by every writer."""

    api: ApiClient
    timeout: float = 30.0
    write_deadline: Callable[[], float | None] | None = None
    """Event-loop time by which a write (any method but GET) must be over; None: no bound.

    With leader election this is the leader's renew deadline
    (:meth:`~kqueue.controller.leader.LeaderElector.write_deadline`): the client abandons a
    write before the leadership it was issued under can end, and refuses to send one after.
    A request the API server already accepted may still complete: that is the bound's limit.
    """

    def _timeout(self, method: str, what: str) -> float:
        if method == "GET" or self.write_deadline is None:
            return self.timeout
        deadline = self.write_deadline()
        if deadline is None:
            return self.timeout
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            raise WriteDeadlinePassed(
                f"{method} {what}: not sent, the leadership it was issued under may be over "
                f"(renew deadline passed {-left:.1f}s ago)"
            )
        return min(self.timeout, left)

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
    ) -> tuple[int, Obj]:
        timeout = self._timeout(method, path)
        response: aiohttp.ClientResponse = await self.api.call_api(
            path,
            method,
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=timeout),
        )
        async with response:
            raw = await response.read()
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {"message": raw[:500].decode("utf-8", "replace")}
        return response.status, data if isinstance(data, dict) else {"message": str(data)[:500]}

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        what = _what(resource, name, namespace)
        status, body = await self.request("GET", object_path(resource, name, namespace))
        _raise_for(f"get {what}", status, body)
        return body

    async def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        name = (obj.get("metadata") or {}).get("name") or "<generated>"
        status, body = await self.request("POST", resource.collection_path(namespace), obj)
        _raise_for(f"create {_what(resource, name, namespace)}", status, body)
        return body

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str = "",
        content_type: str = MERGE_PATCH,
    ) -> Obj:
        path = object_path(resource, name, namespace) + (f"/{subresource}" if subresource else "")
        status, body = await self.request("PATCH", path, patch, content_type=content_type)
        what = _what(resource, name, namespace) + (f" ({subresource})" if subresource else "")
        _raise_for(f"patch {what}", status, body)
        return body

    async def replace_status(
        self, resource: Resource, obj: Obj, *, namespace: str | None = None
    ) -> Obj:
        """PUT the status subresource; ``obj`` carries the resourceVersion it was read at."""
        name = obj["metadata"]["name"]
        path = object_path(resource, name, namespace) + "/status"
        status, body = await self.request("PUT", path, obj)
        _raise_for(f"update status of {_what(resource, name, namespace)}", status, body)
        return body

    async def replace(self, resource: Resource, obj: Obj, *, namespace: str | None = None) -> Obj:
        name = obj["metadata"]["name"]
        status, body = await self.request("PUT", object_path(resource, name, namespace), obj)
        _raise_for(f"update {_what(resource, name, namespace)}", status, body)
        return body

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation: str = "Background",
    ) -> None:
        status, body = await self.request(
            "DELETE",
            object_path(resource, name, namespace),
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation},
        )
        if status == 404:
            return
        _raise_for(f"delete {_what(resource, name, namespace)}", status, body)

    async def list(
        self, resource: Resource, *, namespace: str | None = None, label_selector: str = ""
    ) -> list[Obj]:
        query = [("labelSelector", label_selector)] if label_selector else []
        status, body = await self.request(
            "GET", resource.collection_path(namespace), query=query
        )
        _raise_for(f"list {resource}", status, body)
        return list(body.get("items") or [])


def _what(resource: Resource, name: str, namespace: str | None) -> str:
    return f"{resource} {namespace}/{name}" if namespace else f"{resource} {name}"
