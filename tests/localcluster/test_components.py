"""The control plane's command lines, built without starting anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kqueue.localcluster.cluster import LocalCluster


def argv(tmp_path: Path, component: str, **kwargs: Any) -> list[str]:
    cluster = LocalCluster(work_dir=tmp_path, bin_dir=tmp_path, **kwargs)
    cluster.ports.allocate()
    cluster._prepare_pki()
    cluster._write_kubeconfigs()
    return cluster._define_components()[component].argv


def flag(args: list[str], name: str) -> str | None:
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"{name}=")]
    assert len(values) <= 1, f"{name} given {len(values)} times: {values}"
    return values[0] if values else None


CASES = [
    ("controller manager: defaults", {}, "kube-controller-manager",
     {"--kube-api-qps": "100", "--kube-api-burst": "200"}),
    ("controller manager: raised", {"controller_manager_qps": 1000,
                                    "controller_manager_burst": 2000},
     "kube-controller-manager", {"--kube-api-qps": "1000", "--kube-api-burst": "2000"}),
    ("controller manager: fractional qps", {"controller_manager_qps": 12.5},
     "kube-controller-manager", {"--kube-api-qps": "12.5", "--kube-api-burst": "200"}),
    ("controller manager: job syncs at its default", {}, "kube-controller-manager",
     {"--concurrent-job-syncs": None}),
    ("controller manager: job syncs raised", {"concurrent_job_syncs": 50},
     "kube-controller-manager", {"--concurrent-job-syncs": "50"}),
    ("scheduler: its own defaults", {}, "kube-scheduler",
     {"--kube-api-qps": None, "--kube-api-burst": None}),
    ("scheduler: raised", {"scheduler_qps": 500, "scheduler_burst": 1000}, "kube-scheduler",
     {"--kube-api-qps": "500", "--kube-api-burst": "1000"}),
    ("scheduler: qps only", {"scheduler_qps": 500}, "kube-scheduler",
     {"--kube-api-qps": "500", "--kube-api-burst": None}),
]


@pytest.mark.parametrize(("name", "kwargs", "component", "want"), CASES, ids=[c[0] for c in CASES])
def test_client_limits_reach_the_command_line(
    tmp_path: Path, name: str, kwargs: dict[str, Any], component: str, want: dict[str, str | None]
) -> None:
    args = argv(tmp_path, component, **kwargs)
    assert {k: flag(args, k) for k in want} == want, name


def test_scheduler_limits_do_not_touch_the_controller_manager(tmp_path: Path) -> None:
    args = argv(tmp_path, "kube-controller-manager", scheduler_qps=500, scheduler_burst=1000)
    assert (flag(args, "--kube-api-qps"), flag(args, "--kube-api-burst")) == ("100", "200")


def test_api_server_stores_in_its_own_etcd_by_default(tmp_path: Path) -> None:
    cluster = LocalCluster(work_dir=tmp_path, bin_dir=tmp_path)
    cluster.ports.allocate()
    cluster._prepare_pki()
    cluster._write_kubeconfigs()
    args = cluster._define_components()["kube-apiserver"].argv
    assert flag(args, "--etcd-servers") == f"http://127.0.0.1:{cluster.ports.etcd_client}"
    assert flag(args, "--etcd-prefix") == "/registry"


def test_api_server_on_a_shared_etcd_uses_its_prefix(tmp_path: Path) -> None:
    # The MultiKueue scale benchmark's workers: one etcd, each API server under its prefix.
    args = argv(tmp_path, "kube-apiserver", etcd_servers="http://127.0.0.1:2379",
                etcd_prefix="/worker3")
    assert flag(args, "--etcd-servers") == "http://127.0.0.1:2379"
    assert flag(args, "--etcd-prefix") == "/worker3"
