"""``python -m kqueue.localcluster up``: run the local control plane until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from kqueue.localcluster.build import BuildError, ensure_binaries
from kqueue.localcluster.cluster import ClusterStartError, LocalCluster
from kqueue.localcluster.operators import OPERATORS, OperatorError, parse_names


def _up(ns: argparse.Namespace) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # SIGTERM must tear the cluster down just like Ctrl-C does.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    work_dir = Path(ns.work_dir) if ns.work_dir else None
    cluster = LocalCluster(
        work_dir=work_dir, keep_work_dir=ns.keep, verbosity=ns.v,
        gang_scheduling=not ns.stock,
    )
    try:
        cluster.start()
    except (ClusterStartError, BuildError) as exc:
        print(f"local cluster failed to start: {exc}", file=sys.stderr)
        return 1
    try:
        print(f"local cluster up in {cluster.startup_seconds:.1f}s", file=sys.stderr)
        for name in ns.operators:
            try:
                cluster.start_operator(name)
            except ClusterStartError as exc:
                print(f"operator failed to start: {exc}", file=sys.stderr)
                return 1
            print(
                f"operator {name} ready in {cluster.operator_start_seconds[name]:.1f}s",
                file=sys.stderr,
            )
        print(f"logs: {cluster.log_dir}", file=sys.stderr)
        print(f"export KUBECONFIG={cluster.kubeconfig_path}", flush=True)
        print(f"export PATH={cluster.bin_dir}:$PATH", flush=True)
        print("press Ctrl-C to stop", file=sys.stderr)
        if ns.kubeconfig_out:
            Path(ns.kubeconfig_out).write_text(cluster.kubeconfig_path.read_text())
        stop.wait()
    finally:
        cluster.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kqueue.localcluster")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the local control plane and wait until Ctrl-C")
    up.add_argument("--work-dir", help="directory for certificates, etcd data and logs")
    up.add_argument("--keep", action="store_true", help="keep the work directory after stopping")
    up.add_argument("--kubeconfig-out", help="also copy the admin kubeconfig to this path")
    up.add_argument(
        "--stock",
        action="store_true",
        help="every feature gate at its default, no PodGroup API (as most clusters run); by "
        "default the PodGroup API and kube-scheduler's gang scheduling are on (on 1.37: "
        "scheduling.k8s.io/v1beta1, gates GenericWorkload and TopologyAwareWorkloadScheduling)",
    )
    up.add_argument("-v", type=int, default=1, help="log verbosity of the components")
    up.add_argument(
        "--operators",
        default="",
        help=f"comma-separated operators to start too ({', '.join(OPERATORS)}); built from "
        "their Go modules on first use",
    )
    sub.add_parser("build", help="build (or reuse) the binaries and print their directory")
    ns = parser.parse_args(argv)
    if ns.command == "up":
        try:
            ns.operators = parse_names(ns.operators)
        except OperatorError as exc:
            parser.error(f"--operators: {exc}")
    if ns.command == "build":
        try:
            print(ensure_binaries())
        except BuildError as exc:
            print(f"build failed: {exc}", file=sys.stderr)
            return 1
        return 0
    return _up(ns)


if __name__ == "__main__":
    sys.exit(main())
