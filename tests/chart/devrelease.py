"""The chart installed for real in development mode, with kqueue running on the host.

`helm install` creates everything but the Deployment: the webhook configurations point at
``https://127.0.0.1:<port>`` (the API server runs on this host) with our CA, and the
ServiceAccount, RBAC and Configuration are the chart's. ``kqueue run`` then runs as that
ServiceAccount (a token from the TokenRequest API), with the Configuration read back from the
chart's ConfigMap, so every test using it also proves the chart's RBAC sufficient.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqueue.controller.webhook_server.certs import ensure_local_certs
from kqueue.localcluster.cluster import LocalCluster
from tests.chart.conftest import CHART, ROOT, Helm

Obj = dict[str, Any]
RELEASE = "kqueue"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.3)


@dataclass
class Watch:
    """``kubectl get ... -w`` in the background; its lines as they arrive."""

    argv: list[str]
    lines: list[str] = field(default_factory=list)
    proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@dataclass
class DevRelease:
    cluster: LocalCluster
    helm: Helm
    namespace: str  # the release's
    # The only namespaces kqueue manages, so other tests' Jobs never reach this process.
    managed_namespaces: list[str]
    work_dir: Path
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    visibility_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.work_dir / "kqueue.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def install(self) -> None:
        bundle = ensure_local_certs(self.work_dir / "certs")
        values = {
            "webhook": {
                "devUrl": f"https://127.0.0.1:{self.webhook_port}",
                "caBundle": base64.b64encode(bundle.ca_pem).decode(),
                "namespaceSelectorExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "In",
                        "values": self.managed_namespaces,
                    }
                ],
            },
            "config": {"logging": {"format": "text", "level": "info"}},
        }
        path = self.work_dir / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        self.helm.run(
            "install",
            RELEASE,
            str(CHART),
            "--namespace",
            self.namespace,
            "-f",
            str(path),
            "--wait",
            "--timeout",
            "60s",
        )

    def kubeconfig_as_service_account(self) -> Path:
        """A kubeconfig that authenticates as the chart's ServiceAccount, nothing more."""
        token = self.cluster.kubectl(
            "create", "token", "kqueue", "-n", self.namespace, "--duration=1h"
        ).stdout.strip()
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.cluster.server_url,
                        "certificate-authority": str(self.cluster.ca_path),
                    },
                }
            ],
            "users": [{"name": "kqueue", "user": {"token": token}}],
            "contexts": [{"name": "kqueue", "context": {"cluster": "local", "user": "kqueue"}}],
            "current-context": "kqueue",
        }
        path = self.work_dir / "kqueue.kubeconfig"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def configuration(self) -> Path:
        """The chart's Configuration, with what differs on a host instead of a pod."""
        text = self.cluster.kubectl(
            "get",
            "configmap",
            f"{RELEASE}-config",
            "-n",
            self.namespace,
            "-o",
            r"jsonpath={.data.controller_config\.yaml}",
        ).stdout
        cfg = yaml.safe_load(text)
        assert cfg["namespace"] == self.namespace
        assert cfg["internalCertManagement"]["enable"] is False
        cfg["webhook"] = {
            **cfg["webhook"],
            "host": "127.0.0.1",
            "port": self.webhook_port,
            "certDir": str(self.work_dir / "certs"),
        }
        cfg["health"] = {"bindAddress": f"127.0.0.1:{self.health_port}"}
        cfg["metrics"] = {**cfg["metrics"], "bindAddress": f"127.0.0.1:{self.metrics_port}"}
        if cfg.get("visibility", {}).get("bindAddress", "0") != "0":
            cfg["visibility"] = {
                **cfg["visibility"],
                "bindAddress": f"127.0.0.1:{self.visibility_port}",
            }
        path = self.work_dir / "config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def start(self) -> None:
        kubeconfig = self.kubeconfig_as_service_account()
        config = self.configuration()
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kqueue",
                    "run",
                    f"--kubeconfig={kubeconfig}",
                    f"--config={config}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"kqueue exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            try:
                url = f"http://127.0.0.1:{self.health_port}/readyz"
                with urllib.request.urlopen(url, timeout=1) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait_for("kqueue /readyz", ready, timeout=60)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def forbidden_in_log(self) -> list[str]:
        """Log lines showing the API server refused kqueue something (RBAC too narrow)."""
        return [
            line
            for line in self.log().splitlines()
            # Not a "403" inside a timestamp's milliseconds ("17:40:14,403 INFO").
            if re.search(r"(?<![,.:\d])\b403\b|forbidden", line, re.IGNORECASE)
            # Nor a namespace being deleted refusing new content: no permission is missing.
            and "because it is being terminated" not in line
        ]

    def uninstall(self) -> None:
        self.stop()
        self.helm.run("uninstall", RELEASE, "--namespace", self.namespace, "--wait", check=False)


@contextlib.contextmanager
def dev_release(
    cluster: LocalCluster,
    helm_bin: Path,
    work_dir: Path,
    managed_namespaces: list[str],
    request: pytest.FixtureRequest,
) -> Iterator[DevRelease]:
    """A fresh release namespace; the release is uninstalled and the namespace deleted after."""
    release = DevRelease(
        cluster=cluster,
        helm=Helm(helm_bin, kubeconfig=cluster.kubeconfig_path),
        namespace=f"kqueue-dev-{uuid.uuid4().hex[:6]}",
        managed_namespaces=managed_namespaces,
        work_dir=work_dir,
    )
    cluster.kubectl("create", "namespace", release.namespace)
    try:
        yield release
    finally:
        release.uninstall()
        cluster.kubectl("delete", "namespace", release.namespace, "--wait=false", check=False)
        log = release.log()
        if log:
            request.node.add_report_section("call", "kqueue log (tail)", log[-6000:])


def kubectl_json(cluster: LocalCluster, *args: str) -> Obj:
    out: Obj = json.loads(cluster.kubectl(*args, "-o", "json").stdout)
    return out


def condition(obj: Obj, type_: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None
