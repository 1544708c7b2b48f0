"""The CLI's live-cluster mode: which namespace a kubeconfig context means."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kqueue.cli.cluster import current_namespace

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [
        {"name": "team", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
        {"name": "bare", "context": {"cluster": "c", "user": "u"}},
    ],
    "current-context": "team",
}


@pytest.mark.parametrize(
    ("context", "want"),
    [
        pytest.param(None, "team-a", id="the current context's namespace"),
        pytest.param("bare", "default", id="a context without namespace: default"),
        pytest.param("team", "team-a", id="a context named with --context"),
        pytest.param("missing", "default", id="an unknown context: default"),
    ],
)
def test_current_namespace(tmp_path: Path, context: str | None, want: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    assert current_namespace(str(path), context) == want


def test_unreadable_kubeconfig_means_default(tmp_path: Path) -> None:
    assert current_namespace(str(tmp_path / "nope")) == "default"
