"""The controller's API client: a pool for watches and writes, no per-request env lookups."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kqueue.controller.rest import POOL_SIZE, new_api_client

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    return str(path)


async def test_without_a_proxy_requests_skip_the_environment(kubeconfig: str) -> None:
    api = await new_api_client(kubeconfig)
    try:
        session = api.rest_client.pool_manager
        assert session.trust_env is False
        assert session.connector is not None and session.connector.limit == POOL_SIZE
        assert api.configuration.host == "https://127.0.0.1:6443"
    finally:
        await api.close()
    assert session.closed and session.connector is None


async def test_a_proxy_in_the_environment_is_still_honoured(
    kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    api = await new_api_client(kubeconfig)
    try:
        assert api.rest_client.pool_manager.trust_env is True
    finally:
        await api.close()
