"""Plain JSON requests to the API server through kubernetes-asyncio's authenticated client.

The generated typed clients drop fields they do not know when an object is read and written
back; controllers that update objects they do not own (Leases, Secrets, webhook
configurations) use raw JSON instead, so nothing is lost, and handle HTTP statuses themselves
(409 Conflict is an expected answer, not an exception).
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient

Obj = dict[str, Any]


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
