"""Plain JSON requests to the API server through kubernetes-asyncio's authenticated client.

The generated typed clients drop fields they do not know when an object is read and written
back; controllers that update objects they do not own (Leases, Secrets, webhook
configurations) use raw JSON instead, so nothing is lost, and handle HTTP statuses themselves
(409 Conflict is an expected answer, not an exception).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import aiohttp
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client import Configuration as ClientConfiguration

Obj = dict[str, Any]

# Connections the client may hold: each informer's watch keeps one open for good, and the
# writers (scheduler, job reconcilers, queue status, events, the lease) need theirs beside them.
# kubernetes_asyncio's default of 100 could make writes wait for a watch to end.
POOL_SIZE = 256
# Matches kubernetes_asyncio's session: watch events of large objects exceed aiohttp's default.
_READ_BUFSIZE = 2**21


async def new_api_client(kubeconfig: str | None) -> ApiClient:
    """The controller's client: the kubeconfig's cluster, else the in-cluster service account."""
    configuration = type.__call__(ClientConfiguration)  # a fresh one, not the shared default
    if kubeconfig:
        await kube_config.load_kube_config(
            config_file=kubeconfig, client_configuration=configuration
        )
    else:
        kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = POOL_SIZE
    api = ApiClient(configuration=configuration)
    skip_environment_lookups(api)
    return api


def skip_environment_lookups(api: ApiClient) -> None:
    """No proxy or netrc lookups per request unless the environment names a proxy.

    kubernetes_asyncio builds its aiohttp session with ``trust_env=True``: every request then
    looks up the proxy variables and reads ``~/.netrc`` (1.3% of the controller's CPU under
    load). With no proxy in the environment that finds nothing, so the session is rebuilt on
    the same connection pool without it. A proxy from the kubeconfig is passed per request
    and is unaffected.
    """
    if urllib.request.getproxies():
        return
    rest = api.rest_client
    session: aiohttp.ClientSession = rest.pool_manager
    connector = session.connector
    if connector is None or session.closed:
        return
    session.detach()  # the new session owns the pool; the old one closes nothing
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=_READ_BUFSIZE
    )


async def request_json(
    api: ApiClient,
    method: str,
    path: str,
    body: Obj | None = None,
    *,
    total_timeout: float = 30.0,
) -> tuple[int, Obj]:
    """``(HTTP status, decoded JSON body)``; a non-JSON body comes back as ``{"message": ...}``."""
    response: aiohttp.ClientResponse = await api.call_api(
        path,
        method,
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=aiohttp.ClientTimeout(total=total_timeout),
    )
    async with response:
        raw = await response.read()
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        data = {"message": raw[:500].decode("utf-8", "replace")}
    return response.status, data if isinstance(data, dict) else {"message": str(data)[:500]}
