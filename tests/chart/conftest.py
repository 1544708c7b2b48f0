"""Fixtures for the chart, image, kubectl, samples and docs tests.

``helm`` runs the binary of the ``helm_bin`` fixture (tests/fixtures/tools.py) and ``kubectl``
the control plane build's (both built on first use, like the cluster itself); a missing binary
is a failure, never a skip.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.localcluster import build

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kqueue"
RELEASE = "kqueue"
RELEASE_NAMESPACE = "kqueue-system"

Obj = dict[str, Any]


def _bin_dir(component: str) -> Path:
    ready = build.binaries_ready()
    if ready is not None:
        return ready
    try:
        return build.ensure_binaries(only=[component])
    except build.BuildError as exc:
        pytest.fail(f"building {component} failed: {exc}")


@dataclass(frozen=True)
class Helm:
    path: Path
    kubeconfig: Path | None = None

    def run(
        self,
        *args: str,
        check: bool = True,
        timeout: float = 180,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        # A private HOME-independent state: helm keeps its repository cache and release
        # drivers' config under these, and tests must not read or write a developer's.
        state = Path(tempfile.gettempdir()) / "kqueue-tests-helm"
        full_env = {
            **os.environ,
            "HELM_CACHE_HOME": str(state / "cache"),
            "HELM_CONFIG_HOME": str(state / "config"),
            "HELM_DATA_HOME": str(state / "data"),
            **(env or {}),
        }
        argv = [str(self.path), *args]
        if self.kubeconfig is not None:
            argv.append(f"--kubeconfig={self.kubeconfig}")
        res = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, env=full_env
        )
        if check and res.returncode != 0:
            pytest.fail(f"helm {' '.join(args)} failed ({res.returncode}):\n{res.stderr}")
        return res

    def template(
        self,
        values: Obj | None = None,
        *,
        release: str = RELEASE,
        namespace: str = RELEASE_NAMESPACE,
        extra: tuple[str, ...] = (),
    ) -> list[Obj]:
        """The rendered objects of the chart with these values."""
        res = self.template_raw(values, release=release, namespace=namespace, extra=extra)
        if res.returncode != 0:
            pytest.fail(f"helm template failed:\n{res.stderr}")
        return [d for d in yaml.safe_load_all(res.stdout) if d]

    def template_raw(
        self,
        values: Obj | None = None,
        *,
        release: str = RELEASE,
        namespace: str = RELEASE_NAMESPACE,
        extra: tuple[str, ...] = (),
    ) -> subprocess.CompletedProcess[str]:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
            yaml.safe_dump(values or {}, fh)
        try:
            return self.run(
                "template",
                release,
                str(CHART),
                "--namespace",
                namespace,
                "-f",
                fh.name,
                *extra,
                check=False,
            )
        finally:
            os.unlink(fh.name)


@pytest.fixture(scope="session")
def helm(helm_bin: Path) -> Helm:
    """helm without a cluster (lint, template)."""
    return Helm(helm_bin)


def find(objs: list[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [
        o for o in objs if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = find(objs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
