"""A real Kubernetes control plane as local processes, for tests and for running kqueue locally.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as they would in a cluster
(TLS, RBAC, service accounts, admission); kwok plays the kubelets of a few fake nodes, so pods
are bound by the real scheduler and then reach Running/Succeeded without containers. Everything
listens on 127.0.0.1 on free ports, lives in one temporary directory and is torn down by
``stop()`` (or at interpreter exit, or when the parent process dies).

    with LocalCluster() as cluster:
        print(cluster.kubeconfig_path)
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import http.client
import json
import os
import queue
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

import yaml

from kqueue.localcluster import autoscaler, build, operators
from kqueue.localcluster.certs import CertificateAuthority, CertKey, service_account_keys
from kqueue.localcluster.nodes import (
    DEFAULT_NODES,
    KWOK_NODE_ANNOTATION,
    KWOK_NODE_ANNOTATION_VALUE,
    FakeNode,
    kwok_config_documents,
)

T = TypeVar("T")

LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"

# The controllers kqueue's behaviour depends on (Jobs, their pods, garbage collection,
# namespaces, service accounts) and the ones that keep a cluster tidy. The node lifecycle
# controller is left out on purpose: kwok nodes have no kubelet heartbeats worth judging, and
# a node tainted "unreachable" in the middle of a test would evict pods for no reason.
CONTROLLERS = (
    "job-controller",
    "cronjob-controller",
    "clusterrole-aggregation-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "pod-garbage-collector-controller",
    "ttl-after-finished-controller",
    "replicaset-controller",
    "deployment-controller",
    "statefulset-controller",
    "disruption-controller",
    "resourcequota-controller",
    "endpointslice-controller",
    # DRA: creates each pod's ResourceClaims from the ResourceClaimTemplates it names
    # (kube-scheduler allocates them; docs/dra.md).
    "resourceclaim-controller",
)

# Whole-gang placement by kube-scheduler (KEP-4671, refined by KEP-5832): the PodGroup API and
# kube-scheduler's GangScheduling plugin. The gates and the API version differ by minor version
# (read from pkg/features/kube_features.go of each release):
# * v1.36: scheduling.k8s.io/v1alpha2, gates GenericWorkload and GangScheduling (alpha, off);
#   WorkloadAwarePreemption (alpha) adds the PodGroup's disruptionMode and priority.
# * v1.37: v1alpha2 is gone; scheduling.k8s.io/v1beta1 (Workload, PodGroup with a mutable
#   minCount, disruptionMode, priority), served with GenericWorkload (beta, still off by
#   default). GangScheduling and WorkloadAwarePreemption are folded into GenericWorkload (a
#   1.37 binary refuses them as unknown gates). TopologyAwareWorkloadScheduling (alpha) serves
#   the PodGroup's schedulingConstraints.topology and turns on kube-scheduler's
#   TopologyPlacementGenerator plugin.
# A beta API version, like an alpha one, is served only when --runtime-config turns it on.
GANG_GATES_BY_MINOR: dict[int, tuple[str, ...]] = {
    36: ("GenericWorkload", "GangScheduling"),
    37: ("GenericWorkload", "TopologyAwareWorkloadScheduling"),
}
GANG_API_BY_MINOR: dict[int, str] = {36: "scheduling.k8s.io/v1alpha2", 37: "scheduling.k8s.io/v1beta1"}
# Gates of 1.36 that a later release folded into GenericWorkload: asked for on 1.37 they are
# dropped, since the binary would refuse to start on an unknown gate.
FOLDED_GATES = {"GangScheduling": 37, "WorkloadAwarePreemption": 37}


def kubernetes_minor(version: str) -> int:
    """35 for ``v1.35.2``; the message names the version if it is not ``v1.<minor>.<patch>``."""
    match = re.match(r"v1\.(\d+)\.", version)
    if match is None:
        raise ClusterStartError(f"Kubernetes version {version!r}: expected v1.<minor>.<patch>")
    return int(match.group(1))


def binary_version(apiserver: Path) -> str:
    """``v1.37.2`` from ``kube-apiserver --version`` ("Kubernetes v1.37.2")."""
    try:
        out = subprocess.run(
            [str(apiserver), "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClusterStartError(f"{apiserver} --version failed: {exc}") from exc
    match = re.search(r"v\d+\.\d+\.\d+", out)
    if match is None:
        raise ClusterStartError(f"{apiserver} --version printed no version: {out.strip()!r}")
    return match.group(0)


def gang_flags(version: str, extra: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(feature gates, runtime-config) that serve the PodGroup API and gang scheduling on
    Kubernetes ``version``, with the ``extra`` gates that exist in it."""
    minor = kubernetes_minor(version)
    known = [m for m in GANG_GATES_BY_MINOR if m <= minor]
    if not known:
        raise ClusterStartError(
            f"gang scheduling needs Kubernetes v1.36 or later (the PodGroup API); got {version}"
        )
    base = GANG_GATES_BY_MINOR[max(known)]
    gates = [*base, *(g for g in extra if g not in base and FOLDED_GATES.get(g, 99) > minor)]
    api = GANG_API_BY_MINOR[max(known)]
    return [f"{g}=true" for g in gates], [f"{api}=true"]


_STOP_GRACE_SECONDS = 10.0
_LOG_TAIL_LINES = 40


class ClusterStartError(RuntimeError):
    """The control plane could not be started; the message says which part and why."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


_PR_SET_PDEATHSIG = 1
# Loaded here, not in the child: loading a library between fork and exec can deadlock.
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:
    _LIBC = None


def _die_with_parent() -> None:
    """Run in the child before exec: get SIGKILL if the process that started us dies.

    This is what prevents orphans when the test runner itself is killed (SIGKILL, OOM), where
    no cleanup code gets to run.
    """
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _Spawner:
    """Starts every component from one long-lived daemon thread.

    The parent-death signal fires when the *thread* that forked a child exits, so children
    forked from short-lived threads (``asyncio.to_thread`` in a test restarting the API server)
    would be killed when that thread ends. One thread that lives as long as the interpreter
    gives every child the same guarantee: it dies with us, even on SIGKILL.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while True:
            fn, fut = self._jobs.get()
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)

    def run(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="kqueue-localcluster-spawner", daemon=True
                )
                self._thread.start()
        fut: Future[T] = Future()
        self._jobs.put((fn, fut))
        return fut.result()


_SPAWNER = _Spawner()


def _spawn(
    argv: list[str], *, log: IO[bytes], env: dict[str, str] | None
) -> subprocess.Popen[bytes]:
    return _SPAWNER.run(
        lambda: subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            # own process group: stop() signals the group, so nothing a component forks leaks
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    )


@dataclass
class _Component:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    stop_grace: float = _STOP_GRACE_SECONDS

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n==== start #{self.restarts}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = _spawn(self.argv, log=log, env=self.env)
        self.restarts += 1

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        grace = self.stop_grace
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            # The whole process group, so nothing a component forked survives it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace)
        self.proc = None

    def tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - 200 * lines))
                data = fh.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(data.splitlines()[-lines:])


_LIVE: weakref.WeakSet[LocalCluster] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.stop()


@dataclass
class _Endpoints:
    etcd_client: int = 0
    etcd_peer: int = 0
    apiserver: int = 0
    controller_manager: int = 0
    scheduler: int = 0
    kwok: int = 0

    def allocate(self) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, _free_port())


@dataclass(eq=False)
class LocalCluster:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on 127.0.0.1."""

    bin_dir: Path | None = None
    work_dir: Path | None = None
    nodes: Sequence[FakeNode] = DEFAULT_NODES
    # Build missing binaries (slow the first time) instead of failing.
    build: bool = True
    # Leave the work directory (logs, certs, etcd data) behind after stop().
    keep_work_dir: bool = False
    verbosity: int = 1
    start_timeout: float = 120.0
    # Serve the PodGroup API and let kube-scheduler place gangs all or nothing (see
    # GANG_GATES_BY_MINOR). On by default: a newcomer sees the best path; False is the stock
    # cluster (every gate at its default), as most clusters run.
    gang_scheduling: bool = True
    # More gates for kube-apiserver, kube-controller-manager and kube-scheduler with
    # gang_scheduling, e.g. ("WorkloadWithJob",); gates a release folded into GenericWorkload
    # (WorkloadAwarePreemption on 1.37) are dropped.
    gang_gates: tuple[str, ...] = ()
    # The Kubernetes release the binaries are from (picks the gates and API version); None:
    # asked of kube-apiserver --version at start.
    kubernetes_version: str | None = None
    # Client rate limits of kube-controller-manager (its Job and ReplicaSet controllers create
    # pods through them) and kube-scheduler (bindings). Raise them to measure kqueue without
    # those bounds; None for the scheduler keeps its own default (QPS 50, burst 100).
    controller_manager_qps: float = 100
    controller_manager_burst: int = 200
    scheduler_qps: float | None = None
    scheduler_burst: int | None = None
    # Jobs the Job controller syncs at once (its pods are created in slow-start batches within
    # one sync, each batch waiting for the last); None keeps its default (5).
    concurrent_job_syncs: int | None = None
    # Only kube-apiserver (and etcd): no controller manager, scheduler, kwok or nodes, so no
    # pod ever runs; for controllers that need none, e.g. the MultiKueue scale benchmark's
    # workers (bench/multikueue_scale.py), where ten whole clusters do not fit on 2 cores.
    apiserver_only: bool = False
    # Store in this etcd (another LocalCluster's etcd_url) instead of one of its own, under
    # etcd_prefix: several API servers on one etcd, each seeing only its own objects.
    etcd_servers: str | None = None
    etcd_prefix: str = "/registry"

    kubeconfig_path: Path = field(init=False)
    ca_path: Path = field(init=False)
    log_dir: Path = field(init=False)
    ca: CertificateAuthority = field(init=False)
    ports: _Endpoints = field(init=False, default_factory=_Endpoints)
    _components: dict[str, _Component] = field(init=False, default_factory=dict)
    _owns_work_dir: bool = field(init=False, default=False)
    _admin: CertKey = field(init=False)
    _started: bool = field(init=False, default=False)
    _serving: CertKey = field(init=False)
    _clients: dict[str, CertKey] = field(init=False, default_factory=dict)
    _kubeconfigs: dict[str, Path] = field(init=False, default_factory=dict)
    _sa_key: Path = field(init=False)
    _sa_pub: Path = field(init=False)
    _front_proxy_ca: Path = field(init=False)
    _front_proxy_client: CertKey = field(init=False)
    # wall-clock seconds the last start() took
    startup_seconds: float = field(init=False, default=0.0)
    # operator name -> wall-clock seconds its last start_operator() took (build excluded)
    operator_start_seconds: dict[str, float] = field(init=False, default_factory=dict)
    _operator_lock: threading.RLock = field(init=False, default_factory=threading.RLock)

    def __post_init__(self) -> None:
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="kqueue-cluster-"))
            self._owns_work_dir = True
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.work_dir / "logs"
        self.kubeconfig_path = self.work_dir / "kubeconfig"
        self.ca_path = self.work_dir / "pki" / "ca.crt"

    def __repr__(self) -> str:
        state = "running" if self._started else "stopped"
        return f"<LocalCluster {state} {self.server_url} work_dir={self.work_dir}>"

    # ------------------------------------------------------------------ public API

    @property
    def server_url(self) -> str:
        return f"https://{LOOPBACK}:{self.ports.apiserver}"

    @property
    def etcd_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.etcd_client}"

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start every component and wait until nodes are Ready; raise ClusterStartError."""
        if self._started:
            return
        started = time.monotonic()
        self.bin_dir = self._resolve_binaries()
        _LIVE.add(self)
        try:
            # A port picked free can be taken by someone else before the component binds it;
            # one retry with fresh ports makes that race harmless.
            for attempt in (1, 2):
                try:
                    self._start_once()
                    break
                except ClusterStartError as exc:
                    busy = "address already in use" in self.logs_tail().lower()
                    self._stop_components()
                    if attempt == 2 or not busy:
                        raise ClusterStartError(f"{exc}\n\n{self.logs_tail()}") from None
            self._started = True
            self.startup_seconds = time.monotonic() - started
        except BaseException:
            self._stop_components()
            raise

    def stop(self) -> None:
        """Stop every component (process groups, SIGTERM then SIGKILL) and clean up."""
        self._stop_components()
        self._started = False
        _LIVE.discard(self)
        if self._owns_work_dir and not self.keep_work_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port (etcd keeps the data)."""
        self.stop_component("kube-apiserver")
        self.start_component("kube-apiserver")

    def stop_component(self, name: str) -> None:
        self._components[name].stop()

    def start_component(self, name: str) -> None:
        comp = self._components[name]
        comp.start()
        self._wait_ready(name, self.start_timeout)

    # ------------------------------------------------------------------ operators

    def start_operator(self, name: str, *, build_missing: bool | None = None) -> None:
        """Start an operator (``operators.OPERATORS``) against this cluster; a no-op if running.

        Installs its CRDs (from its module version's files), builds its binary on first use
        (unless ``build_missing`` is false; default: this cluster's ``build``), registers its
        webhooks on 127.0.0.1 where it serves any, starts it and waits until it is ready.
        Operators it requires (its ``requires``) are started first. Raises ClusterStartError
        with the operator's last log lines when something does not work.
        """
        if not self._started:
            raise ClusterStartError(f"start_operator({name!r}): the cluster is not started")
        with self._operator_lock:
            try:
                op = operators.get(name)
            except operators.OperatorError as exc:
                raise ClusterStartError(str(exc)) from None
            for dep in op.requires:
                self.start_operator(dep, build_missing=build_missing)
            comp = self._components.get(op.name)
            if comp is not None and comp.running():
                return
            try:
                self._start_operator(op, self.build if build_missing is None else build_missing)
            except (build.BuildError, operators.OperatorError, RuntimeError) as exc:
                # RuntimeError: a kubectl call failed (ClusterStartError is one too)
                raise ClusterStartError(f"operator {op.label}: {exc}") from exc

    def install_provisioning_requests(self) -> None:
        """Serve cluster-autoscaler's ProvisioningRequest API (autoscaling.x-k8s.io/v1): its CRD
        from the Go module kqueue/localcluster/autoscaler.py names. A no-op once served."""
        if not self._started:
            raise ClusterStartError("install_provisioning_requests(): the cluster is not started")
        with self._operator_lock:
            try:
                autoscaler.install_provisioning_request_crd(self)
            except (build.BuildError, operators.OperatorError, RuntimeError) as exc:
                raise ClusterStartError(f"ProvisioningRequest CRD: {exc}") from exc

    def stop_operator(self, name: str) -> None:
        """Stop an operator and remove its webhook configurations (its CRDs and objects stay)."""
        with self._operator_lock:
            comp = self._components.pop(name, None)
            if comp is not None:
                comp.stop()
            operators.delete_webhooks(self, operators.get(name))

    def operator_running(self, name: str) -> bool:
        comp = self._components.get(name)
        return comp is not None and comp.running()

    def _start_operator(self, op: operators.Operator, build_missing: bool) -> None:
        assert self.work_dir is not None
        started = time.monotonic()
        binary = operators.built(op)
        if binary is None:
            if not build_missing:
                raise operators.OperatorError(
                    f"not built; run `python -m kqueue.localcluster.operators {op.name}`"
                )
            binary = operators.ensure_built(op)
            started = time.monotonic()
        operators.check_fixed_ports(op)
        root = operators.module_dir(op)
        operators.install_crds(self, op, root)

        run_dir = self.work_dir / "operators" / op.name
        cert_dir = run_dir / "tmp" / "k8s-webhook-server" / "serving-certs"
        cert_dir.mkdir(parents=True, exist_ok=True)
        creds = self.ca.issue(
            self.work_dir / "pki",
            f"operator-{op.name}",
            common_name=f"kqueue-local-{op.name}",
            # Operators act as cluster admins here: what is tested is their reconciling, and
            # their RBAC manifests name in-cluster service accounts.
            organizations=("system:masters",),
            client=True,
        )
        kubeconfig = run_dir / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(self._kubeconfig(creds, f"operator-{op.name}")))
        ctx = operators.RunContext(
            binary=binary,
            work_dir=run_dir,
            kubeconfig=kubeconfig,
            health_port=_free_port(),
            webhook_port=_free_port(),
            cert_dir=cert_dir,
        )
        if op.webhooks is not None or op.serving_cert:
            self.ca.serving(cert_dir, "tls")
        if op.webhooks is not None:
            hooks = operators.webhook_documents(
                op,
                root,
                base_url=f"https://{LOOPBACK}:{ctx.webhook_port}",
                ca_bundle_b64=base64.b64encode(self.ca.pem).decode(),
            )
            self.kubectl(
                "apply",
                "--server-side",
                "--force-conflicts",
                "-f",
                "-",
                input=yaml.safe_dump_all(hooks),
            )
        for fixed in op.fixed_cert_dirs:
            # A directory the operator's code names (not a flag): its serving certificate from
            # the local CA unless one is there (only its existence is checked, as no webhook of
            # the operator is registered; another cluster's is as good).
            if not (Path(fixed) / "tls.crt").exists():
                self.ca.serving(Path(fixed), "tls")
        objects = [*op.objects, *(op.run_objects(ctx) if op.run_objects is not None else ())]
        if objects:
            # What the operator's own manifests would have created for it (an empty Secret
            # its certificate rotator fills, its configuration).
            self.kubectl(
                "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(objects)
            )
        if op.lease is not None:
            # Readiness is "holds the lease", so a lease left by an earlier run must go.
            ns, lease = op.lease
            self.request("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{lease}")
        args, env = op.command(ctx)
        comp = _Component(
            name=op.name,
            argv=[str(binary), *args],
            log_path=self.log_dir / f"{op.name}.log",
            env={**os.environ, "KUBECONFIG": str(kubeconfig), **env},
        )
        self._components[op.name] = comp
        comp.start()
        try:
            self._wait_for(
                f"{op.label} ready",
                lambda: self._operator_ready(op, ctx),
                120.0,
                component=op.name,
            )
        except ClusterStartError as exc:
            comp.stop()
            self._components.pop(op.name, None)
            operators.delete_webhooks(self, op)
            if comp.log_path.name in str(exc):  # it exited: the message has its log already
                raise operators.OperatorError(str(exc)) from None
            raise operators.OperatorError(
                f"{exc}\n---- {op.name} log ({comp.log_path}) ----\n{comp.tail()}"
            ) from None
        self.operator_start_seconds[op.name] = time.monotonic() - started

    def _operator_ready(self, op: operators.Operator, ctx: operators.RunContext) -> bool:
        if op.readiness == "lease":
            assert op.lease is not None
            ns, lease = op.lease
            status, body = self.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{lease}"
            )
            return status == 200 and bool((body.get("spec") or {}).get("holderIdentity"))
        if not _http_ok(LOOPBACK, ctx.health_port, "/readyz", tls=None):
            return False
        # An operator's /readyz can answer before its webhook server listens (controller-runtime
        # starts them side by side): the API server would then fail its webhooks closed.
        return op.webhooks is None or _port_open(LOOPBACK, ctx.webhook_port)

    def logs_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last lines of every component's log, for failure reports."""
        parts = []
        for comp in self._components.values():
            state = "running" if comp.running() else "stopped"
            if comp.proc is not None and comp.proc.poll() is not None:
                state = f"exited with {comp.proc.returncode}"
            parts.append(f"---- {comp.name} ({state}; {comp.log_path}) ----\n{comp.tail(lines)}")
        return "\n".join(parts) if parts else "(no component was started)"

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        assert self.bin_dir is not None
        res = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig_path}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and res.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {res.stderr.strip()}")
        return res

    def env(self) -> dict[str, str]:
        """Environment for child processes that should talk to this cluster."""
        assert self.bin_dir is not None
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig_path),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def request(
        self, method: str, path: str, body: Any = None, *, timeout: float = 10.0
    ) -> tuple[int, Any]:
        """A synchronous call to the API server as cluster admin (JSON in, JSON out)."""
        conn = http.client.HTTPSConnection(
            LOOPBACK, self.ports.apiserver, context=self._client_tls(), timeout=timeout
        )
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Accept": "application/json"}
            if payload is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        try:
            return resp.status, json.loads(data) if data else None
        except json.JSONDecodeError:
            return resp.status, data.decode(errors="replace")

    # ------------------------------------------------------------------ start-up

    def _resolve_binaries(self) -> Path:
        if self.bin_dir is not None:
            bin_dir = Path(self.bin_dir)
        elif self.build:
            try:
                bin_dir = build.ensure_binaries()
            except build.BuildError as exc:
                raise ClusterStartError(
                    f"building the control plane binaries failed: {exc}"
                ) from exc
        else:
            ready = build.binaries_ready()
            if ready is None:
                raise ClusterStartError(
                    "control plane binaries are not built; run `python -m kqueue.localcluster.build`"
                )
            bin_dir = ready
        needed = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
        missing = [b for b in needed if not os.access(bin_dir / b, os.X_OK)]
        if missing:
            raise ClusterStartError(f"missing binaries in {bin_dir}: {', '.join(missing)}")
        if self.kubernetes_version is None and self.gang_scheduling:
            self.kubernetes_version = binary_version(bin_dir / "kube-apiserver")
        return bin_dir

    def _start_once(self) -> None:
        assert self.work_dir is not None
        self.ports.allocate()
        self._prepare_pki()
        self._write_kubeconfigs()
        self._components = self._define_components()
        deadline = time.monotonic() + self.start_timeout
        for name in ("kube-apiserver",) if self.etcd_servers else ("etcd", "kube-apiserver"):
            self._components[name].start()
            self._wait_ready(name, deadline - time.monotonic())
        if self.apiserver_only:
            return
        # These three only need the API server; starting them together saves seconds.
        rest = ("kube-controller-manager", "kube-scheduler", "kwok")
        for name in rest:
            self._components[name].start()
        for name in rest:
            self._wait_ready(name, deadline - time.monotonic())
        self._create_nodes()
        self._wait_for(
            "kwok nodes Ready", self._nodes_ready, deadline - time.monotonic(), component="kwok"
        )
        # The service-account controller creating "default" in a namespace proves the
        # controller manager is really working, and pods cannot be created before it exists.
        self._wait_for(
            "service account default/default",
            lambda: (
                self.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
            ),
            deadline - time.monotonic(),
            component="kube-controller-manager",
        )

    def _prepare_pki(self) -> None:
        assert self.work_dir is not None
        pki = self.work_dir / "pki"
        self.ca = CertificateAuthority.create(pki)
        self.ca_path = self.ca.cert_path
        self._serving = self.ca.issue(
            pki,
            "apiserver",
            common_name="kube-apiserver",
            dns_names=(
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            # 10.96.0.1 is the "kubernetes" Service's ClusterIP in SERVICE_CIDR.
            ip_addresses=(LOOPBACK, "10.96.0.1"),
            server=True,
        )
        self._admin = self.ca.issue(
            pki, "admin", common_name="kqueue-admin", organizations=("system:masters",), client=True
        )
        self._clients = {
            "kube-controller-manager": self.ca.issue(
                pki, "controller-manager", common_name="system:kube-controller-manager", client=True
            ),
            "kube-scheduler": self.ca.issue(
                pki, "scheduler", common_name="system:kube-scheduler", client=True
            ),
            # kwok stands in for every kubelet; the Node authorizer would need one identity per
            # node, so it gets cluster-admin instead.
            "kwok": self.ca.issue(
                pki,
                "kwok",
                common_name="kwok-controller",
                organizations=("system:masters",),
                client=True,
            ),
        }
        self._sa_key, self._sa_pub = service_account_keys(pki)
        # The aggregation layer's own CA and client (as kubeadm sets it up). Without a
        # request-header CA the controller manager and scheduler log errors forever about the
        # missing bundle in kube-system/extension-apiserver-authentication.
        front_proxy = CertificateAuthority.create(pki / "front-proxy", "kqueue-front-proxy-ca")
        self._front_proxy_ca = front_proxy.cert_path
        self._front_proxy_client = front_proxy.issue(
            pki / "front-proxy", "front-proxy-client", common_name="front-proxy-client", client=True
        )

    def _kubeconfig(self, creds: CertKey, user: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "kqueue-local",
                    "cluster": {
                        "server": self.server_url,
                        "certificate-authority": str(self.ca_path),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate": str(creds.cert_path),
                        "client-key": str(creds.key_path),
                    },
                }
            ],
            "contexts": [
                {"name": "kqueue-local", "context": {"cluster": "kqueue-local", "user": user}}
            ],
            "current-context": "kqueue-local",
            "preferences": {},
        }

    def _write_kubeconfigs(self) -> None:
        assert self.work_dir is not None
        self.kubeconfig_path.write_text(yaml.safe_dump(self._kubeconfig(self._admin, "admin")))
        self._kubeconfigs = {}
        for name, creds in self._clients.items():
            path = self.work_dir / f"{name}.kubeconfig"
            path.write_text(yaml.safe_dump(self._kubeconfig(creds, name)))
            self._kubeconfigs[name] = path

    def _define_components(self) -> dict[str, _Component]:
        assert self.work_dir is not None and self.bin_dir is not None
        b, p, w, v = self.bin_dir, self.ports, self.work_dir, str(self.verbosity)
        pki = w / "pki"
        gate_list, runtime = (
            gang_flags(self.kubernetes_version or build.KUBERNETES_VERSION, self.gang_gates)
            if self.gang_scheduling
            else ([], [])
        )
        gates = ",".join(gate_list)
        gang_apiserver = (
            [f"--feature-gates={gates}", f"--runtime-config={','.join(runtime)}"]
            if self.gang_scheduling
            else []
        )
        gang_scheduler = [f"--feature-gates={gates}"] if self.gang_scheduling else []
        scheduler_limits = [
            *([f"--kube-api-qps={self.scheduler_qps:g}"] if self.scheduler_qps is not None else []),
            *(
                [f"--kube-api-burst={self.scheduler_burst}"]
                if self.scheduler_burst is not None
                else []
            ),
        ]
        # The API server puts the podgroup-protection finalizer on every PodGroup; only this
        # controller (GenericWorkload gate) lifts it, once no live pod names the group.
        controllers = (*CONTROLLERS, "podgroup-protection-controller") if self.gang_scheduling else CONTROLLERS

        def comp(
            name: str, argv: list[str], env: dict[str, str] | None = None, grace: float = 10.0
        ) -> _Component:
            return _Component(
                name=name,
                argv=argv,
                log_path=self.log_dir / f"{name}.log",
                env=env,
                stop_grace=grace,
            )

        kwok_config = w / "kwok.yaml"
        kwok_config.write_text(
            yaml.dump_all(kwok_config_documents(), Dumper=_LiteralDumper, sort_keys=False)
        )
        # kwok also reads ~/.kwok/kwok.yaml when it exists; a private HOME keeps a developer's
        # own kwok configuration out of the tests.
        kwok_home = w / "kwok-home"
        kwok_home.mkdir(exist_ok=True)

        return {
            "etcd": comp(
                "etcd",
                [
                    str(b / "etcd"),
                    "--name=kqueue",
                    f"--data-dir={w / 'etcd'}",
                    f"--listen-client-urls=http://{LOOPBACK}:{p.etcd_client}",
                    f"--advertise-client-urls=http://{LOOPBACK}:{p.etcd_client}",
                    f"--listen-peer-urls=http://{LOOPBACK}:{p.etcd_peer}",
                    f"--initial-advertise-peer-urls=http://{LOOPBACK}:{p.etcd_peer}",
                    f"--initial-cluster=kqueue=http://{LOOPBACK}:{p.etcd_peer}",
                    "--initial-cluster-state=new",
                    # Durability is worthless for a throwaway test cluster; fsync is slow.
                    "--unsafe-no-fsync",
                    "--log-level=warn",
                ],
            ),
            "kube-apiserver": comp(
                "kube-apiserver",
                [
                    str(b / "kube-apiserver"),
                    f"--etcd-servers={self.etcd_servers or self.etcd_url}",
                    f"--etcd-prefix={self.etcd_prefix}",
                    f"--bind-address={LOOPBACK}",
                    f"--secure-port={p.apiserver}",
                    # Without this the API server derives its address from the default route,
                    # and fails to start on a host that has none.
                    f"--advertise-address={LOOPBACK}",
                    # A loopback address is not a valid endpoint for the "kubernetes" Service;
                    # nothing in the cluster needs that Service, so do not maintain it.
                    "--endpoint-reconciler-type=none",
                    f"--tls-cert-file={self._serving.cert_path}",
                    f"--tls-private-key-file={self._serving.key_path}",
                    f"--client-ca-file={self.ca_path}",
                    "--authorization-mode=RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={self._sa_pub}",
                    f"--service-account-signing-key-file={self._sa_key}",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    "--allow-privileged=true",
                    # This plugin puts node.kubernetes.io/not-ready on every new node, for the
                    # node lifecycle controller to lift; that controller is not run (see
                    # CONTROLLERS), so kwok nodes must come up untainted.
                    "--disable-admission-plugins=TaintNodesByCondition",
                    # The aggregation layer, as kubeadm configures it: aggregated APIs (kqueue's
                    # visibility.kqueue.io) get requests with the front-proxy client certificate
                    # and X-Remote-* headers, and trust them through this CA, published in
                    # kube-system/extension-apiserver-authentication. Aggregator routing stays
                    # off (the default): with no kube-proxy it would have to pick an endpoint
                    # address, and EndpointSlices refuse the loopback address a host process
                    # listens on; an ExternalName Service ("localhost") reaches it instead.
                    f"--requestheader-client-ca-file={self._front_proxy_ca}",
                    "--requestheader-allowed-names=front-proxy-client",
                    "--requestheader-username-headers=X-Remote-User",
                    "--requestheader-group-headers=X-Remote-Group",
                    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                    f"--proxy-client-cert-file={self._front_proxy_client.cert_path}",
                    f"--proxy-client-key-file={self._front_proxy_client.key_path}",
                    "--profiling=false",
                    f"--cert-dir={pki / 'apiserver-generated'}",
                    *gang_apiserver,
                    f"--v={v}",
                ],
                # After SIGTERM it stops listening within milliseconds, then can sit for many
                # seconds in its own shutdown; nothing is lost by not waiting for that.
                grace=3.0,
            ),
            "kube-controller-manager": comp(
                "kube-controller-manager",
                [
                    str(b / "kube-controller-manager"),
                    f"--kubeconfig={self._kubeconfigs['kube-controller-manager']}",
                    f"--authentication-kubeconfig={self._kubeconfigs['kube-controller-manager']}",
                    f"--authorization-kubeconfig={self._kubeconfigs['kube-controller-manager']}",
                    f"--bind-address={LOOPBACK}",
                    f"--secure-port={p.controller_manager}",
                    f"--cert-dir={pki / 'controller-manager-generated'}",
                    "--leader-elect=false",
                    f"--controllers={','.join(controllers)}",
                    # Each controller acts as its own service account, as in a real cluster, so
                    # RBAC is exercised the same way.
                    "--use-service-account-credentials=true",
                    f"--service-account-private-key-file={self._sa_key}",
                    f"--root-ca-file={self.ca_path}",
                    f"--cluster-cidr={POD_CIDR}",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    f"--kube-api-qps={self.controller_manager_qps:g}",
                    f"--kube-api-burst={self.controller_manager_burst}",
                    *(
                        [f"--concurrent-job-syncs={self.concurrent_job_syncs}"]
                        if self.concurrent_job_syncs is not None
                        else []
                    ),
                    "--profiling=false",
                    *gang_scheduler,
                    f"--v={v}",
                ],
            ),
            "kube-scheduler": comp(
                "kube-scheduler",
                [
                    str(b / "kube-scheduler"),
                    f"--kubeconfig={self._kubeconfigs['kube-scheduler']}",
                    f"--authentication-kubeconfig={self._kubeconfigs['kube-scheduler']}",
                    f"--authorization-kubeconfig={self._kubeconfigs['kube-scheduler']}",
                    f"--bind-address={LOOPBACK}",
                    f"--secure-port={p.scheduler}",
                    f"--cert-dir={pki / 'scheduler-generated'}",
                    "--leader-elect=false",
                    "--profiling=false",
                    # Deprecated, but honoured while no --config file is given (none is).
                    *scheduler_limits,
                    *gang_scheduler,
                    f"--v={v}",
                ],
            ),
            "kwok": comp(
                "kwok",
                [
                    str(b / "kwok"),
                    f"--kubeconfig={self._kubeconfigs['kwok']}",
                    f"--config={kwok_config}",
                    "--manage-all-nodes=false",
                    "--manage-nodes-with-annotation-selector="
                    f"{KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
                    f"--cidr={POD_CIDR}",
                    f"--server-address={LOOPBACK}:{p.kwok}",
                    "--node-lease-duration-seconds=40",
                ],
                env={**os.environ, "HOME": str(kwok_home)},
            ),
        }

    # ------------------------------------------------------------------ readiness

    def _client_tls(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_path))
        ctx.load_cert_chain(str(self._admin.cert_path), str(self._admin.key_path))
        return ctx

    def _probe(self, name: str) -> bool:
        p = self.ports
        if name == "etcd":
            return _http_ok(LOOPBACK, p.etcd_client, "/health", tls=None, expect='"health":"true"')
        if name == "kube-apiserver":
            return _http_ok(LOOPBACK, p.apiserver, "/readyz", tls=self._client_tls())
        # These serve their own self-signed certificates; only liveness matters here.
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        if name == "kube-controller-manager":
            return _http_ok(LOOPBACK, p.controller_manager, "/healthz", tls=insecure)
        if name == "kube-scheduler":
            return _http_ok(LOOPBACK, p.scheduler, "/healthz", tls=insecure)
        if name == "kwok":
            return _http_ok(LOOPBACK, p.kwok, "/healthz", tls=None)
        raise KeyError(name)

    def _wait_ready(self, name: str, timeout: float) -> None:
        self._wait_for(f"{name} ready", lambda: self._probe(name), timeout, component=name)

    def _wait_for(
        self, what: str, check: Callable[[], bool], timeout: float, *, component: str
    ) -> None:
        deadline = time.monotonic() + max(timeout, 1.0)
        delay = 0.05
        last_error = ""
        while True:
            comp = self._components.get(component)
            if comp is not None and comp.proc is not None and comp.proc.poll() is not None:
                raise ClusterStartError(
                    f"{component} exited with code {comp.proc.returncode} while waiting for "
                    f"{what}; last log lines:\n{comp.tail()}"
                )
            try:
                if check():
                    return
            except (OSError, http.client.HTTPException) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                detail = f" (last error: {last_error})" if last_error else ""
                raise ClusterStartError(
                    f"timed out after {timeout:.0f}s waiting for {what}{detail}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _create_nodes(self) -> None:
        for node in self.nodes:
            status, body = self.request("POST", "/api/v1/nodes", node.manifest())
            if status not in (201, 409):
                raise ClusterStartError(f"creating node {node.name} failed ({status}): {body}")

    def _nodes_ready(self) -> bool:
        status, body = self.request("GET", "/api/v1/nodes")
        if status != 200:
            return False
        ready = set()
        for item in body.get("items", []):
            for cond in item.get("status", {}).get("conditions") or []:
                if cond.get("type") == "Ready" and cond.get("status") == "True":
                    ready.add(item["metadata"]["name"])
        return all(n.name in ready for n in self.nodes)

    def _stop_components(self) -> None:
        # Reverse start order: clients first, etcd last, so nothing logs storms of
        # connection errors on the way down.
        for comp in reversed(list(self._components.values())):
            with contextlib.suppress(Exception):
                comp.stop()


class _LiteralDumper(yaml.SafeDumper):
    """Writes multi-line strings (kwok's status templates) as readable literal blocks."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_representer)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _http_ok(
    host: str, port: int, path: str, *, tls: ssl.SSLContext | None, expect: str | None = None
) -> bool:
    conn: http.client.HTTPConnection
    if tls is None:
        conn = http.client.HTTPConnection(host, port, timeout=2)
    else:
        conn = http.client.HTTPSConnection(host, port, context=tls, timeout=2)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read().decode(errors="replace")
    finally:
        conn.close()
    return resp.status == 200 and (expect is None or expect in body.replace(" ", ""))
