"""The chart installed for real in development mode, with kqueue running on the host.

`helm install` creates everything but the Deployment: the webhook configurations point at
``https://127.0.0.1:<port>`` (the API server runs on this host) with our CA, and the
ServiceAccount, RBAC and Configuration are the chart's. ``kqueue run`` then runs as that
ServiceAccount (a token from the TokenRequest API), with the Configuration read back from the
chart's ConfigMap, so the chart's RBAC is proven sufficient by a real controller doing real work
(any 403 fails the test). A Job goes from pending to admitted to finished through kubectl,
watched with ``kubectl get workloads.kqueue.io -w`` and explained by ``kubectl describe``.
"""

from __future__ import annotations

import base64
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

from kqueue.controller.webhook.certs import ensure_local_certs
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import COMPLETE_AFTER_ANNOTATION
from tests.chart.conftest import CHART, ROOT, Helm
from tests.chart.test_install import CLUSTER_SCOPED

pytestmark = pytest.mark.cluster

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
    workloads_namespace: str  # where the Job runs
    work_dir: Path
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
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
                # Only this test's namespace is managed, so other tests' Jobs never reach us.
                "namespaceSelectorExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "In",
                        "values": [self.workloads_namespace],
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


@pytest.fixture
def dev_release(
    cluster: LocalCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[DevRelease]:
    assert cluster.bin_dir is not None
    suffix = uuid.uuid4().hex[:6]
    release = DevRelease(
        cluster=cluster,
        helm=Helm(cluster.bin_dir / "helm", kubeconfig=cluster.kubeconfig_path),
        namespace=f"kqueue-dev-{suffix}",
        workloads_namespace=f"team-{suffix}",
        work_dir=tmp_path,
    )
    for ns in (release.namespace, release.workloads_namespace):
        cluster.kubectl("create", "namespace", ns)
    try:
        yield release
    finally:
        release.stop()
        release.helm.run("uninstall", RELEASE, "--namespace", release.namespace, check=False)
        for ns in (release.namespace, release.workloads_namespace):
            cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
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


def test_job_admitted_end_to_end_through_the_chart_in_development_mode(
    cluster: LocalCluster, dev_release: DevRelease
) -> None:
    ns, suffix = dev_release.workloads_namespace, dev_release.namespace.rsplit("-", 1)[1]
    flavor, cq = f"on-demand-{suffix}", f"team-{suffix}"
    dev_release.install()

    # Nothing runs in the cluster; the webhook configurations point at the host.
    assert (
        cluster.kubectl("get", "deploy,svc", "-n", dev_release.namespace, "-o", "name").stdout == ""
    )
    hooks = kubectl_json(
        cluster, "get", "mutatingwebhookconfiguration", "kqueue-mutating-webhook-configuration"
    )["webhooks"]
    assert all(
        h["clientConfig"]["url"].startswith(f"https://127.0.0.1:{dev_release.webhook_port}/")
        for h in hooks
    )
    dev_release.start()

    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=f"""
apiVersion: kqueue.io/v1alpha1
kind: ResourceFlavor
metadata:
  name: {flavor}
spec:
  nodeLabels:
    instance-type: on-demand
---
apiVersion: kqueue.io/v1alpha1
kind: ClusterQueue
metadata:
  name: {cq}
spec:
  namespaceSelector: {{}}
  # Held at first, so the Job is seen pending; resumed below.
  stopPolicy: Hold
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: {flavor}
      resources:
      - name: cpu
        nominalQuota: "2"
      - name: memory
        nominalQuota: 4Gi
---
apiVersion: kqueue.io/v1alpha1
kind: LocalQueue
metadata:
  name: user-queue
  namespace: {ns}
spec:
  clusterQueue: {cq}
""",
    )
    watch = Watch(
        [
            str(cluster.bin_dir / "kubectl"),
            f"--kubeconfig={cluster.kubeconfig_path}",  # type: ignore[operator]
            "get",
            "workloads.kqueue.io",
            "-n",
            ns,
            "-w",
        ]
    )
    watch.start()
    try:
        _run_job(cluster, dev_release, ns, flavor, cq, watch)
    finally:
        watch.stop()
        # Deleted while kqueue runs, so it can lift its resource-in-use finalizers.
        cluster.kubectl("delete", "job", "--all", "-n", ns, "--wait=true", check=False)
        cluster.kubectl("delete", "localqueue", "user-queue", "-n", ns, check=False)
        cluster.kubectl("delete", "clusterqueue", cq, "--timeout=30s", check=False)
        cluster.kubectl("delete", "resourceflavor", flavor, "--timeout=30s", check=False)

    # kqueue did all of this with the chart's permissions and nothing more.
    log = dev_release.log()
    assert not re.search(r"\b403\b|forbidden", log, re.IGNORECASE), log[-4000:]

    dev_release.stop()
    dev_release.helm.run("uninstall", RELEASE, "--namespace", dev_release.namespace, "--wait")
    left = cluster.kubectl(
        "get",
        ",".join(CLUSTER_SCOPED),
        "-l",
        f"app.kubernetes.io/instance={RELEASE}",
        "-o",
        "name",
    ).stdout.split()
    assert left == []


def _run_job(
    cluster: LocalCluster, dev: DevRelease, ns: str, flavor: str, cq: str, watch: Watch
) -> None:
    res = cluster.kubectl(
        "create",
        "-o",
        "json",
        "-f",
        "-",
        input=yaml.safe_dump(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "sample",
                    "namespace": ns,
                    "labels": {"kqueue.io/queue-name": "user-queue"},
                },
                "spec": {
                    "parallelism": 2,
                    "completions": 2,
                    "template": {
                        "metadata": {"annotations": {COMPLETE_AFTER_ANNOTATION: "3s"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}},
                                }
                            ],
                        },
                    },
                },
            }
        ),
    )
    job = json.loads(res.stdout)
    # The mutating webhook on the host gated the Job's pods.
    template = job["spec"]["template"]
    assert {"name": "kqueue.io/admission"} in template["spec"]["schedulingGates"]

    def workload() -> Obj | None:
        items = kubectl_json(cluster, "get", "workloads.kqueue.io", "-n", ns)["items"]
        return items[0] if items else None

    def pending() -> Obj | None:
        wl = workload()
        cond = condition(wl, "QuotaReserved") if wl else None
        return wl if cond is not None and cond["status"] == "False" else None

    wl = wait_for("a pending Workload", pending)
    name = wl["metadata"]["name"]
    described = cluster.kubectl("describe", "workload", name, "-n", ns).stdout
    assert "QuotaReserved" in described and cq in described, described

    cluster.kubectl(
        "patch", "clusterqueue", cq, "--type=merge", "-p", '{"spec":{"stopPolicy":"None"}}'
    )

    def finished() -> Obj | None:
        wl = workload()
        cond = condition(wl, "Finished") if wl else None
        return wl if cond is not None and cond["status"] == "True" else None

    wl = wait_for("the Workload to finish", finished, timeout=90)
    assert wl["status"]["admission"]["clusterQueue"] == cq
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == flavor
    job = kubectl_json(cluster, "get", "job", "sample", "-n", ns)
    assert condition(job, "Complete") is not None

    # describe shows the conditions and the events that explain them.
    described = cluster.kubectl("describe", "workload", name, "-n", ns).stdout
    for text in (
        "Conditions:",
        "Admitted",
        "Finished",
        "Events:",
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {cq}",
    ):
        assert text in described, (text, described)

    # The watch saw the Workload pending, then admitted, then finished.
    wait_for(
        "the watch to print the finished Workload",
        lambda: any(re.search(r"\bTrue\s+True\b", line) for line in watch.lines),
        timeout=15,
    )
    rows = [re.split(r"\s{2,}", line.strip()) for line in watch.lines if line.startswith(name)]
    header = re.split(r"\s{2,}", watch.lines[0].strip())
    states = []
    for row in rows:
        cells = dict(zip(header, row, strict=False))
        state = (
            "finished"
            if cells.get("FINISHED") == "True"
            else "admitted"
            if cells.get("ADMITTED") == "True"
            else "pending"
        )
        if not states or states[-1] != state:
            states.append(state)
    assert states == ["pending", "admitted", "finished"], watch.lines
