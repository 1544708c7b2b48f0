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
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from types import FrameType

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kqueue.api.config import default_managed_namespace_selector  # noqa: E402
from kqueue.controller.webhook_server.certs import ensure_local_certs  # noqa: E402
from kqueue.controller.webhooks.config import webhook_configurations  # noqa: E402
from kqueue.localcluster.build import BuildError  # noqa: E402
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
    args = parser.parse_args(argv)
    try:
        operator_names = parse_names(args.operators)
    except OperatorError as exc:
        parser.error(f"--operators: {exc}")
    frameworks = integrations_for(operator_names)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kqueue-run-"))
    work.mkdir(parents=True, exist_ok=True)
    _say("starting the local control plane (the first build of its binaries takes a while)")
    cluster = LocalCluster(gang_scheduling=not args.stock)
    try:
        cluster.start()
    except (ClusterStartError, BuildError) as exc:
        _say(f"local cluster failed to start: {exc}")
        return 1
    proc: subprocess.Popen[bytes] | None = None
    try:
        _say(f"cluster up in {cluster.startup_seconds:.1f}s; installing CRDs and webhooks")
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=_crds())
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        cluster.kubectl("create", "namespace", NAMESPACE, check=False)

        # Before kqueue: their CRDs must be served when kqueue starts watching their kinds.
        for name in operator_names:
            _say(f"starting operator {name} (built from its Go module on first use)")
            cluster.start_operator(name)
            _say(f"operator {name} ready in {cluster.operator_start_seconds[name]:.1f}s")
        _say(f"integrations on: {', '.join(frameworks)}")
        webhook_port, metrics_port, health_port = _port(9443), _port(8080), _port(8081)
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
        }
        config_path = work / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))

        _say(f"starting kqueue (config {config_path})")
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "kqueue", "run",
                f"--kubeconfig={cluster.kubeconfig_path}", f"--config={config_path}",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        _wait_ready(proc, health_port)
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

Metrics: http://127.0.0.1:{metrics_port}/metrics   Health: http://127.0.0.1:{health_port}/readyz
Operators: {", ".join(operator_names) or "none (make run OPERATORS=jobset,trainer,...)"}
Integrations on (integrations.frameworks): {", ".join(frameworks)}
Component logs: {cluster.log_dir}
Press Ctrl-C to stop kqueue and the cluster.
""",
            flush=True,
        )
        while not stop.is_set():
            if proc.poll() is not None:
                _say(f"kqueue exited with status {proc.returncode}")
                return 1
            stop.wait(0.5)
        return 0
    except (RuntimeError, subprocess.SubprocessError) as exc:  # ClusterStartError included
        _say(str(exc))
        return 1
    finally:
        _say("stopping")
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        cluster.stop()
        if args.work_dir is None:
            # Certificates and config of this run only: nothing to keep after Ctrl-C.
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
