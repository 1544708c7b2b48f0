"""Running kqueue against the real local control plane, and the builders the tests share.

:class:`KqueueProcess` runs ``kqueue run`` as a subprocess (the real CLI, its own event loop,
killable like a real replica) with the webhook configurations pointing at it on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from kqueue.api.config import DEFAULT_FRAMEWORKS, LabelSelector, LabelSelectorRequirement
from kqueue.api.v1alpha1 import constants as c
from kqueue.controller.kube import Kube, KubeError
from kqueue.controller.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    JOBS,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from kqueue.controller.webhook_server.certs import ensure_local_certs
from kqueue.controller.webhooks.config import webhook_configurations
from kqueue.localcluster.cluster import LocalCluster
from kqueue.localcluster.nodes import (
    COMPLETE_AFTER_ANNOTATION,
    DEFAULT_NODES,
    INSTANCE_TYPE_LABEL,
)

T = TypeVar("T")
Obj = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
API_DIR = ROOT / "api"
SAMPLES = ROOT / "config" / "samples"
# Cluster-scoped objects the tests create carry this label, so leftovers can be cleaned up.
E2E_LABEL = "e2e.kqueue.io/test"
KQUEUE_NAMESPACE = "kqueue-system"
# The kwok nodes every local cluster starts with: where released pods must land.
KWOK_NODES = frozenset(n.name for n in DEFAULT_NODES)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 60, what: str = "condition"
) -> T:
    """Poll until ``probe()`` returns something truthy; fail naming ``what`` after ``within``."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = await probe()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.2)


async def stays(
    probe: Callable[[], Awaitable[bool]], *, for_s: float, what: str
) -> None:
    """Check that ``probe()`` holds during an observation window (for "never happens" claims)."""
    deadline = asyncio.get_running_loop().time() + for_s
    while asyncio.get_running_loop().time() < deadline:
        if not await probe():
            pytest.fail(f"expected {what} to hold for {for_s}s, but it stopped holding")
        await asyncio.sleep(0.25)


def install_crds(cluster: LocalCluster) -> None:
    docs = []
    for path in sorted(API_DIR.glob("*.yaml")):
        docs += [
            d
            for d in yaml.safe_load_all(path.read_text())
            if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"
        ]
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs)
    )
    names = [f"crd/{d['metadata']['name']}" for d in docs]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)


@dataclass
class KqueueProcess:
    """``kqueue run`` against the local cluster, restartable like a real replica."""

    cluster: LocalCluster
    work_dir: Path
    webhook_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def log_path(self) -> Path:
        return self.work_dir / "kqueue.log"

    def config_yaml(self) -> str:
        return yaml.safe_dump(
            {
                "apiVersion": "config.kqueue.io/v1alpha1",
                "kind": "Configuration",
                "namespace": KQUEUE_NAMESPACE,
                "health": {"bindAddress": f"127.0.0.1:{self.health_port}"},
                "metrics": {
                    "bindAddress": f"127.0.0.1:{self.metrics_port}",
                    "enableClusterQueueResources": True,
                    # The tests read metrics over plain HTTP; test_visibility_api.py checks
                    # the secure server.
                    "secure": False,
                },
                "webhook": {
                    "host": "127.0.0.1",
                    "port": self.webhook_port,
                    "certDir": str(self.work_dir / "certs"),
                },
                # Short timings: a crashed leader's lease expires quickly in the restart test.
                "leaderElection": {
                    "leaderElect": True,
                    "resourceName": "kqueue-e2e",
                    "leaseDuration": "4s",
                    "renewDeadline": "3s",
                    "retryPeriod": "1s",
                },
                "internalCertManagement": {"enable": False},
                "logging": {"level": "info"},
            }
        )

    def setup(self) -> None:
        install_crds(self.cluster)
        self.cluster.kubectl(
            "create", "namespace", KQUEUE_NAMESPACE, check=False
        )
        bundle = ensure_local_certs(self.work_dir / "certs")
        selector = LabelSelector(
            match_expressions=[
                LabelSelectorRequirement(
                    key="kubernetes.io/metadata.name",
                    operator="NotIn",
                    values=["kube-system", KQUEUE_NAMESPACE],
                )
            ]
        )
        config = yaml.safe_load(self.config_yaml())
        mutating, validating = webhook_configurations(
            namespace_selector=selector,
            base_url=f"https://127.0.0.1:{self.webhook_port}",
            ca_bundle=bundle.ca_pem,
            # The plain-pod webhook only when this kqueue runs the pod integration.
            frameworks=(config.get("integrations") or {}).get("frameworks", DEFAULT_FRAMEWORKS),
        )
        self.cluster.kubectl(
            "apply", "-f", "-", input=yaml.safe_dump_all([mutating, validating])
        )
        (self.work_dir / "config.yaml").write_text(self.config_yaml())

    def start(self) -> None:
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"\n==== start #{self.starts} ====\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kqueue",
                "run",
                f"--kubeconfig={self.cluster.kubeconfig_path}",
                f"--config={self.work_dir / 'config.yaml'}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kqueue exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self._ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"kqueue not ready after 60s:\n{self.log_tail()}")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}/readyz", timeout=1
            ) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()

    def metrics(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as resp:
            return str(resp.read().decode())

    def metric(self, name: str, **labels: str) -> float:
        """The value of one sample (0 when absent)."""
        want = {k: v for k, v in labels.items()}
        for line in self.metrics().splitlines():
            if line.startswith("#"):
                continue
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
            if m is None or m.group(1) != name:
                continue
            got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            if all(got.get(k) == v for k, v in want.items()):
                return float(m.group(4))
        return 0.0

    def log_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def teardown(self) -> None:
        self.stop()
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            name = "kqueue-mutating-webhook-configuration" if kind.startswith("m") else (
                "kqueue-validating-webhook-configuration"
            )
            self.cluster.kubectl("delete", kind, name, "--ignore-not-found", check=False)
        # Objects left behind by failed tests: drop the finalizer kqueue can no longer remove.
        for kind in ("clusterqueues", "resourceflavors", "cohorts", "workloadpriorityclasses"):
            res = self.cluster.kubectl(
                "get", f"{kind}.kqueue.io", "-l", E2E_LABEL, "-o", "name", check=False
            )
            for name in res.stdout.split():
                self.cluster.kubectl(
                    "patch", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                    check=False,
                )
                self.cluster.kubectl("delete", name, "--wait=false", check=False)


P = TypeVar("P", bound=KqueueProcess)


def kqueue_running(proc: P) -> Iterator[P]:
    """Set up and start ``proc``, yield it, and finally tear it down: the body of every kqueue
    fixture (``yield from kqueue_running(KqueueProcess(...))``)."""
    proc.setup()
    proc.start()
    try:
        yield proc
    finally:
        proc.teardown()


# -- builders ------------------------------------------------------------------------------------


def pause_container(cpu: str, *, name: str = "main") -> Obj:
    """A container that only sleeps, requesting ``cpu`` and 64Mi: what quota is charged for."""
    return {
        "name": name,
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def flavor(name: str, instance_type: str, *, spot: bool = False) -> Obj:
    spec: Obj = {"nodeLabels": {INSTANCE_TYPE_LABEL: instance_type}}
    if spot:
        spec["nodeTaints"] = [{"key": "spot", "value": "true", "effect": "NoSchedule"}]
        spec["tolerations"] = [
            {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ]
    return {
        "apiVersion": c.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name, "labels": {E2E_LABEL: "true"}},
        "spec": spec,
    }


def cluster_queue(
    name: str,
    flavors: list[tuple[str, str]],
    *,
    cohort: str | None = None,
    strategy: str = "BestEffortFIFO",
    preemption: Obj | None = None,
    stop_policy: str | None = None,
    borrowing_limit: str | None = None,
) -> Obj:
    """``flavors``: (flavor name, cpu nominal quota); memory is generous."""
    resources_of = []
    for fname, cpu in flavors:
        cpu_quota: Obj = {"name": "cpu", "nominalQuota": cpu}
        if borrowing_limit is not None:
            cpu_quota["borrowingLimit"] = borrowing_limit
        resources_of.append(
            {"name": fname, "resources": [cpu_quota, {"name": "memory", "nominalQuota": "64Gi"}]}
        )
    spec: Obj = {
        "namespaceSelector": {},
        "queueingStrategy": strategy,
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": resources_of}],
    }
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = preemption
    if stop_policy:
        spec["stopPolicy"] = stop_policy
    return {
        "apiVersion": c.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {E2E_LABEL: "true"}},
        "spec": spec,
    }


def local_queue(name: str, namespace: str, cq: str) -> Obj:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def priority_class(name: str, value: int) -> Obj:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name, "labels": {E2E_LABEL: "true"}},
        "value": value,
    }


def job(
    name: str,
    namespace: str,
    queue: str,
    *,
    count: int = 1,
    cpu: str = "1",
    complete_after: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    pod_annotations = {COMPLETE_AFTER_ANNOTATION: complete_after} if complete_after else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {c.QUEUE_NAME_LABEL: queue, **(labels or {})},
            "annotations": annotations or {},
        },
        "spec": {
            "parallelism": count,
            "completions": count,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": pod_annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        pause_container(cpu)
                    ],
                },
            },
        },
    }


# -- reading ------------------------------------------------------------------------------------


def condition(obj: Obj, type_: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_true(obj: Obj, type_: str) -> bool:
    cond = condition(obj, type_)
    return cond is not None and cond.get("status") == "True"


@dataclass
class Api:
    """The test's view of the cluster, over kqueue's JSON client."""

    kube: Kube
    created: list[tuple[Any, str, str | None]] = field(default_factory=list)

    async def apply(self, obj: Obj) -> Obj:
        resource = {
            "ResourceFlavor": RESOURCE_FLAVORS,
            "ClusterQueue": CLUSTER_QUEUES,
            "Cohort": COHORTS,
            "LocalQueue": LOCAL_QUEUES,
            "WorkloadPriorityClass": WORKLOAD_PRIORITY_CLASSES,
            "Job": JOBS,
        }[obj["kind"]]
        ns = obj["metadata"].get("namespace")
        out = await self.kube.create(resource, obj, namespace=ns)
        if not resource.namespaced:
            self.created.append((resource, obj["metadata"]["name"], None))
        return out

    async def cleanup(self) -> None:
        for resource, name, ns in reversed(self.created):
            with contextlib.suppress(KubeError):
                await self.kube.delete(resource, name, namespace=ns)

    async def workload_of(self, namespace: str, job_name: str, kind: str = "Job") -> Obj | None:
        """The Workload owned by the ``kind`` named ``job_name``, if there is one yet."""
        for wl in await self.kube.list(WORKLOADS, namespace=namespace):
            for ref in wl["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == kind and ref.get("name") == job_name:
                    return wl
        return None

    async def wait_workload(
        self, namespace: str, job_name: str, pred: Callable[[Obj], bool], *, what: str,
        within: float = 60,
    ) -> Obj:
        async def probe() -> Obj | None:
            wl = await self.workload_of(namespace, job_name)
            return wl if wl is not None and pred(wl) else None

        return await eventually(probe, within=within, what=f"Workload of Job {job_name}: {what}")

    async def pods_of(self, namespace: str, job_name: str) -> list[Obj]:
        from kqueue.controller.resources import PODS

        return await self.kube.list(PODS, namespace=namespace, label_selector=f"job-name={job_name}")

    async def job(self, namespace: str, name: str) -> Obj:
        return await self.kube.get(JOBS, name, namespace)

    async def events_for(self, namespace: str, name: str) -> list[Obj]:
        from kqueue.controller.resources import EVENTS

        items = await self.kube.list(EVENTS, namespace=namespace)
        return [e for e in items if e["involvedObject"].get("name") == name]


async def after_second_of(timestamp: str) -> None:
    """Wait until the wall clock is past the second of ``timestamp`` (RFC 3339).

    Queue order among equal priorities is by creationTimestamp, which has one-second
    resolution: objects meant to be ordered must be created in different seconds.
    """
    from datetime import UTC, datetime, timedelta

    from kqueue.api.v1alpha1 import parse_time

    target = parse_time(timestamp) + timedelta(seconds=1)

    async def passed() -> bool:
        return datetime.now(UTC) >= target

    await eventually(passed, within=5, what=f"the second after {timestamp}")


def pending_reason(wl: Obj) -> str | None:
    cond = condition(wl, c.QUOTA_RESERVED)
    if cond is None or cond.get("status") != "False":
        return None
    return str(cond.get("reason"))
