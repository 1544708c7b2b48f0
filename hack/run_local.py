"""`make run`: kqueue on a local control plane, with the quickstart samples, until Ctrl-C.

1. Build (or reuse) the control plane binaries and start the local cluster (kube-apiserver,
   etcd, controller-manager, scheduler, kwok nodes).
2. Install kqueue's CRDs from api/, and the webhook configurations pointing at the kqueue
   process on this host (https://127.0.0.1:PORT, CA generated here).
3. Run `kqueue run` against the cluster and wait until it is ready.
4. With ``--operators jobset,trainer`` (``make run OPERATORS=jobset,trainer``): build on first
   use and start those operators (their CRDs, webhooks on 127.0.0.1), before kqueue, and turn on
   the integrations they serve (``integrations.frameworks``); see docs/local-cluster.md.
5. Apply config/samples/quickstart.yaml and print the commands to submit the sample Job.
6. Ctrl-C (or SIGTERM): stop kqueue, then the cluster.

With ``--multikueue-workers N`` (``make run-multikueue``, docs/multikueue.md): a manager and N
worker clusters (each a whole local control plane as above, on its own loopback ports) with a
kqueue each; the workers' kubeconfigs as Secrets on the manager, a MultiKueueConfig, its
AdmissionCheck, a ClusterQueue behind it and the LocalQueue default/user-queue on the manager,
the same queue names on every worker (kqueue/localcluster/multikueue.py); one kubeconfig with a
context per cluster. kqueue's logs go to files then (printed), not to the terminal.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kqueue.api.config import default_managed_namespace_selector  # noqa: E402
from kqueue.controller.webhook_server.certs import ensure_local_certs  # noqa: E402
from kqueue.controller.webhooks.config import webhook_configurations  # noqa: E402
from kqueue.localcluster import multikueue as mk  # noqa: E402
from kqueue.localcluster.build import BuildError, ensure_binaries  # noqa: E402
from kqueue.localcluster.cluster import ClusterStartError, LocalCluster  # noqa: E402
from kqueue.localcluster.operators import (  # noqa: E402
    OPERATORS,
    OperatorError,
    integrations_for,
    parse_names,
)

NAMESPACE = "kqueue-system"


def _port(preferred: int) -> int:
    """``preferred`` if it is free on 127.0.0.1, else any free port."""
    for candidate in (preferred, 0):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise RuntimeError("no free port")


def _say(text: str) -> None:
    # The terminal (or a pipe reading it) may be gone after Ctrl-C: saying so must never stop
    # the clean-up that follows.
    with contextlib.suppress(OSError):
        print(f"[make run] {text}", file=sys.stderr, flush=True)


def _crds() -> str:
    docs = []
    for path in sorted((ROOT / "api").glob("*.yaml")):
        docs += [
            d
            for d in yaml.safe_load_all(path.read_text())
            if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"
        ]
    return yaml.safe_dump_all(docs)


def _wait_ready(proc: subprocess.Popen[bytes], health_port: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kqueue exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"kqueue was not ready within {timeout:.0f}s")


@dataclass
class Kqueue:
    """A ``kqueue run`` subprocess on one local cluster, and where to reach it."""

    proc: subprocess.Popen[bytes]
    metrics_port: int
    health_port: int
    config_path: Path
    log_path: Path | None


def install_kqueue_crds(cluster: LocalCluster) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=_crds())
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)


def start_kqueue(
    cluster: LocalCluster,
    work: Path,
    frameworks: list[str],
    extra_config: dict[str, Any] | None = None,
    *,
    preferred_ports: tuple[int, int, int] = (9443, 8080, 8081),
    log_path: Path | None = None,
) -> Kqueue:
    """kqueue on ``cluster`` (CRDs installed): its webhook configurations (CA in ``work``), its
    Configuration (``extra_config`` merged in), started and ready; logs to ``log_path`` or the
    terminal."""
    webhook_port, metrics_port, health_port = (_port(p) for p in preferred_ports)
    bundle = ensure_local_certs(work / "certs")
    mutating, validating = webhook_configurations(
        namespace_selector=default_managed_namespace_selector(NAMESPACE),
        base_url=f"https://127.0.0.1:{webhook_port}",
        ca_bundle=bundle.ca_pem,
        frameworks=frameworks,
    )
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([mutating, validating]))
    config = {
        "apiVersion": "config.kqueue.io/v1alpha1",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"bindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {
            "bindAddress": f"127.0.0.1:{metrics_port}",
            "enableClusterQueueResources": True,
            # A development loop reads metrics with curl: plain HTTP on loopback.
            "secure": False,
        },
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(work / "certs")},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": frameworks},
        **(extra_config or {}),
    }
    config_path = work / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))

    _say(f"starting kqueue (config {config_path})")
    log: IO[bytes] | None = log_path.open("ab") if log_path is not None else None
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "kqueue", "run",
            f"--kubeconfig={cluster.kubeconfig_path}", f"--config={config_path}",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
    )
    if log is not None:
        log.close()  # the child has its own descriptor
    kq = Kqueue(proc, metrics_port, health_port, config_path, log_path)
    try:
        _wait_ready(proc, health_port)
    except RuntimeError:
        stop_kqueue(kq)
        raise
    return kq


def stop_kqueue(kq: Kqueue) -> None:
    if kq.proc.poll() is None:
        kq.proc.send_signal(signal.SIGTERM)
        try:
            kq.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            kq.proc.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/run-local.sh", description=__doc__.split("\n")[0])
    parser.add_argument("--work-dir", help="keep certificates, config and logs here")
    parser.add_argument("--no-samples", action="store_true", help="do not apply the samples")
    parser.add_argument(
        "--stock",
        action="store_true",
        help="a cluster as it comes (every feature gate at its default, no PodGroup API); by "
        "default kube-scheduler's gang scheduling is on, so admitted gangs are placed whole",
    )
    parser.add_argument(
        "--operators",
        default=os.environ.get("OPERATORS", ""),
        help="comma-separated operators to start too (their integrations are turned on): "
        + ", ".join(OPERATORS),
    )
    parser.add_argument(
        "--multikueue-workers",
        type=int,
        default=0,
        metavar="N",
        help="MultiKueue: a manager and N worker clusters, each with its own kqueue (make "
        "run-multikueue: 2)",
    )
    args = parser.parse_args(argv)
    try:
        operator_names = parse_names(args.operators)
    except OperatorError as exc:
        parser.error(f"--operators: {exc}")
    if args.multikueue_workers < 0 or args.multikueue_workers > MAX_WORKERS:
        parser.error(f"--multikueue-workers: {args.multikueue_workers}; allowed: 0 (no "
                     f"MultiKueue) to {MAX_WORKERS} (a MultiKueueConfig's limit)")
    if args.multikueue_workers and operator_names:
        parser.error("--operators: not with --multikueue-workers (only Jobs are dispatched here)")
    frameworks = integrations_for(operator_names)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kqueue-run-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.multikueue_workers:
            return _run_multikueue(args, work, frameworks, stop)
        return _run_single(args, work, operator_names, frameworks, stop)
    finally:
        if args.work_dir is None:
            # Certificates and config of this run only: nothing to keep after Ctrl-C.
            shutil.rmtree(work, ignore_errors=True)


def _wait_for_stop(kqs: dict[str, Kqueue], stop: threading.Event) -> int:
    while not stop.is_set():
        for name, kq in kqs.items():
            if kq.proc.poll() is not None:
                _say(f"kqueue ({name}) exited with status {kq.proc.returncode}")
                return 1
        stop.wait(0.5)
    return 0


def _run_single(
    args: argparse.Namespace,
    work: Path,
    operator_names: list[str],
    frameworks: list[str],
    stop: threading.Event,
) -> int:
    _say("starting the local control plane (the first build of its binaries takes a while)")
    cluster = LocalCluster(gang_scheduling=not args.stock)
    try:
        cluster.start()
    except (ClusterStartError, BuildError) as exc:
        _say(f"local cluster failed to start: {exc}")
        return 1
    kq: Kqueue | None = None
    try:
        _say(f"cluster up in {cluster.startup_seconds:.1f}s; installing CRDs and webhooks")
        install_kqueue_crds(cluster)

        # Before kqueue: their CRDs must be served when kqueue starts watching their kinds.
        for name in operator_names:
            _say(f"starting operator {name} (built from its Go module on first use)")
            cluster.start_operator(name)
            _say(f"operator {name} ready in {cluster.operator_start_seconds[name]:.1f}s")
        _say(f"integrations on: {', '.join(frameworks)}")
        kq = start_kqueue(cluster, work, frameworks)
        if not args.no_samples:
            cluster.kubectl("apply", "-f", str(ROOT / "config" / "samples" / "quickstart.yaml"))
        kubectl = cluster.bin_dir / "kubectl" if cluster.bin_dir else "kubectl"
        print(
            f"""
kqueue is running against a local cluster. In another terminal:

  export KUBECONFIG={cluster.kubeconfig_path}
  export PATH={cluster.bin_dir}:$PATH          # kubectl ({kubectl})

  kubectl get clusterqueues,localqueues -A     # the quickstart queues
  kubectl create -f {ROOT / 'config/samples/job.yaml'}
  kubectl get workloads.kqueue.io -A -w        # QuotaReserved/Admitted, then Finished
  kubectl get pods -o wide -w                  # gated, then bound to kwok-on-demand-*
  kubectl describe workloads.kqueue.io -A      # conditions and events

Metrics: http://127.0.0.1:{kq.metrics_port}/metrics   Health: http://127.0.0.1:{kq.health_port}/readyz
Operators: {", ".join(operator_names) or "none (make run OPERATORS=jobset,trainer,...)"}
Integrations on (integrations.frameworks): {", ".join(frameworks)}
Component logs: {cluster.log_dir}
Press Ctrl-C to stop kqueue and the cluster.
""",
            flush=True,
        )
        return _wait_for_stop({"local": kq}, stop)
    except (RuntimeError, subprocess.SubprocessError) as exc:  # ClusterStartError included
        _say(str(exc))
        return 1
    finally:
        _say("stopping")
        if kq is not None:
            stop_kqueue(kq)
        cluster.stop()


# The sample names of `make run-multikueue` (config/samples/multikueue/job.yaml uses the queue).
MANAGER = "manager"
MK_CONFIG = "multikueue-sample"
MK_CHECK = "multikueue-sample"
MK_FLAVOR = "default-flavor"
MK_CLUSTER_QUEUE = "cluster-queue"
MK_QUEUE = "user-queue"
MK_NAMESPACE = "default"
# The manager's quota is what it may have dispatched at once; each worker's is its own.
MANAGER_CPU = "8"
WORKER_CPU = "4"
MAX_WORKERS = 20


def _run_multikueue(
    args: argparse.Namespace, work: Path, frameworks: list[str], stop: threading.Event
) -> int:
    names = [MANAGER] + [f"worker{i}" for i in range(1, args.multikueue_workers + 1)]
    try:
        bin_dir = ensure_binaries()  # once, not once per cluster
    except BuildError as exc:
        _say(f"building the control plane binaries failed: {exc}")
        return 1
    clusters = {n: LocalCluster(bin_dir=bin_dir, gang_scheduling=not args.stock) for n in names}
    kqs: dict[str, Kqueue] = {}
    _say(f"starting {len(names)} local control planes ({', '.join(names)}; the first build "
         "of their binaries takes a while)")
    try:
        # The starts wait on processes and sockets: side by side they take the time of one.
        with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
            for name, fut in [(n, pool.submit(lc.start)) for n, lc in clusters.items()]:
                try:
                    fut.result()
                except (ClusterStartError, BuildError) as exc:
                    _say(f"local cluster {name} failed to start: {exc}")
                    return 1
        for i, (name, lc) in enumerate(clusters.items()):
            _say(f"{name} up in {lc.startup_seconds:.1f}s; installing CRDs, webhooks, kqueue")
            install_kqueue_crds(lc)
            (work / name).mkdir(exist_ok=True)
            kqs[name] = start_kqueue(
                lc, work / name, frameworks,
                # The manager: lost workers' workloads go elsewhere after a minute, not 15.
                {"multiKueue": {"gcInterval": "30s", "workerLostTimeout": "1m"}}
                if name == MANAGER else None,
                # The manager's on the usual ports if free; the workers' anywhere.
                preferred_ports=(9443, 8080, 8081) if i == 0 else (0, 0, 0),
                log_path=work / f"kqueue-{name}.log",
            )
        lq = mk.local_queue(MK_QUEUE, MK_NAMESPACE, MK_CLUSTER_QUEUE)
        manifests: dict[str, list[dict[str, Any]]] = {}
        for name, lc in clusters.items():
            if name == MANAGER:
                workers = {n: c.kubeconfig_path for n, c in clusters.items() if n != MANAGER}
                objs = mk.manager_objects(workers, NAMESPACE, config=MK_CONFIG, check=MK_CHECK)
                objs += mk.queue_objects(MK_FLAVOR, MK_CLUSTER_QUEUE, MANAGER_CPU, [MK_CHECK])
            else:
                objs = mk.queue_objects(MK_FLAVOR, MK_CLUSTER_QUEUE, WORKER_CPU, [])
            manifests[name] = [*objs, lq]
            # Written out for a person to read (the Secrets hold the workers' credentials).
            path = work / f"{name}-objects.yaml"
            path.write_text(yaml.safe_dump_all(manifests[name]))
            lc.kubectl("apply", "-f", str(path))
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(mk.merged_kubeconfig(
            {n: lc.kubeconfig_path for n, lc in clusters.items()}, current=MANAGER)))
        manager = clusters[MANAGER]
        lines = "\n".join(
            f"  {n:<9} {lc.server_url}  kqueue metrics http://127.0.0.1:{kqs[n].metrics_port}"
            f"/metrics  log {kqs[n].log_path}  components {lc.log_dir}"
            for n, lc in clusters.items()
        )
        print(
            f"""
MultiKueue is running: a manager and {len(names) - 1} workers, each a local control plane with
its own kqueue. Contexts (in {kubeconfig}):
{lines}
Objects applied: {work}/<context>-objects.yaml (Secrets {', '.join(mk.kubeconfig_secret_name(n) for n in names[1:])} in {NAMESPACE} on the manager).

In another terminal:

  export KUBECONFIG={kubeconfig}
  export PATH={manager.bin_dir}:$PATH

  kubectl get multikueueclusters,admissionchecks           # ACTIVE True
  kubectl create -f {ROOT / 'config/samples/multikueue/job.yaml'}
  kubectl get workloads.kqueue.io -o wide -w               # CLUSTER: the worker that runs it
  kubectl --context worker1 get jobs,pods,workloads.kqueue.io
  kubectl --context worker2 get jobs,pods,workloads.kqueue.io
  kubectl get jobs -w                                      # its status, copied back

Press Ctrl-C to stop every kqueue and cluster.
""",
            flush=True,
        )
        return _wait_for_stop(kqs, stop)
    except (RuntimeError, subprocess.SubprocessError) as exc:  # ClusterStartError included
        _say(str(exc))
        return 1
    finally:
        _say("stopping")
        for kq in kqs.values():
            stop_kqueue(kq)
        for lc in clusters.values():
            lc.stop()


if __name__ == "__main__":
    sys.exit(main())
