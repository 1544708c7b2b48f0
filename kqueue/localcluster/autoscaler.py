"""cluster-autoscaler's ProvisioningRequest API for the local cluster (docs/local-cluster.md).

The CRD comes from the Go module ``k8s.io/autoscaler/cluster-autoscaler/apis`` at the version
Kueue pins, downloaded through the Go module proxy into the module cache like every other
component (build.py); cluster-autoscaler itself is not run: tests play its part with a small
provisioner (tests/controller_e2e/provisioner.py) that creates kwok nodes and sets the
request's conditions. Installed only when a test asks (``LocalCluster.install_provisioning_requests``).
"""

from __future__ import annotations

import os
from pathlib import Path

from kqueue.localcluster import build, operators

APIS_MODULE = "k8s.io/autoscaler/cluster-autoscaler/apis"
APIS_VERSION = os.environ.get(
    "KQUEUE_AUTOSCALER_APIS_VERSION", "v0.0.0-20240830133931-adfbe7e45277"
)
CRD_FILE = "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"

COMPONENT = build.Component("cluster-autoscaler-apis", APIS_MODULE, APIS_VERSION, binaries=())


def module_dir() -> Path:
    """The module's files in the Go module cache (downloaded if needed)."""
    root = build.cache_dir()
    info = build.module_info(
        COMPONENT,
        root / "gomod" / COMPONENT.dir_name,
        root / "logs" / f"download-{COMPONENT.dir_name}.log",
    )
    return Path(info["Dir"])


def install_provisioning_request_crd(api: operators.ApiClient) -> None:
    """Apply the ProvisioningRequest CRD and wait until it is served."""
    operators.install_crd_files(api, (CRD_FILE,), module_dir())
