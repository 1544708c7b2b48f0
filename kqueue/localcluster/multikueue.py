"""MultiKueue across local clusters: the objects that make one cluster a manager of others.

One implementation for `make run-multikueue` (hack/run_local.py), the multi-cluster tests
(tests/controller_e2e/test_multikueue.py) and the scale benchmark (bench/multikueue_scale.py):
each worker's admin kubeconfig with its files inlined, stored as a Secret in the manager's
kqueue namespace (docs/multikueue.md), a MultiKueueCluster per worker, the MultiKueueConfig and
AdmissionCheck naming them, and the flavor and ClusterQueue each side needs.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from kqueue.api.v1alpha1 import constants as c
from kqueue.api.v1alpha1.multikueue import CONTROLLER_NAME

Obj = dict[str, Any]

# The Secret key MultiKueue reads a kubeconfig from (Kueue's).
KUBECONFIG_KEY = "kubeconfig"


def embedded_kubeconfig(kubeconfig_path: Path) -> str:
    """The kubeconfig at ``kubeconfig_path`` with its CA and client certificate files inlined,
    as a Secret must carry it (the manager's kqueue may run where those files are not)."""
    cfg = yaml.safe_load(kubeconfig_path.read_text())
    for entry in cfg["clusters"]:
        ca = entry["cluster"].pop("certificate-authority")
        entry["cluster"]["certificate-authority-data"] = _b64(Path(ca).read_bytes())
    for entry in cfg["users"]:
        user = entry["user"]
        user["client-certificate-data"] = _b64(Path(user.pop("client-certificate")).read_bytes())
        user["client-key-data"] = _b64(Path(user.pop("client-key")).read_bytes())
    return str(yaml.safe_dump(cfg))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def secret(name: str, namespace: str, data: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: _b64(v.encode()) for k, v in data.items()},
    }


def kubeconfig_secret_name(cluster: str) -> str:
    return f"{cluster}-kubeconfig"


def multikueue_cluster(name: str, location: str, location_type: str = "Secret") -> Obj:
    return {
        "apiVersion": c.API_VERSION, "kind": "MultiKueueCluster", "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": location_type, "location": location}}},
    }


def multikueue_config(name: str, clusters: list[str]) -> Obj:
    return {
        "apiVersion": c.API_VERSION, "kind": "MultiKueueConfig", "metadata": {"name": name},
        "spec": {"clusters": clusters},
    }


def multikueue_check(name: str, config: str) -> Obj:
    return {
        "apiVersion": c.API_VERSION, "kind": "AdmissionCheck", "metadata": {"name": name},
        "spec": {
            "controllerName": CONTROLLER_NAME,
            "parameters": {"apiGroup": c.GROUP, "kind": "MultiKueueConfig", "name": config},
        },
    }


def queue_objects(flavor: str, cluster_queue: str, cpu: str, checks: list[str],
                  memory: str = "64Gi") -> list[Obj]:
    """A flavor and a ClusterQueue over every namespace with ``cpu`` and ``memory`` of it,
    behind the admission ``checks`` (the manager's MultiKueue check; none on a worker)."""
    cq_spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [{
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": flavor, "resources": [
                {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}
            ]}],
        }],
    }
    if checks:
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in checks]}
    return [
        {"apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {}},
        {"apiVersion": c.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
         "spec": cq_spec},
    ]


def local_queue(name: str, namespace: str, cluster_queue: str) -> Obj:
    return {"apiVersion": c.API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}


def manager_objects(workers: dict[str, Path], namespace: str, *, config: str, check: str) -> list[Obj]:
    """On the manager: per worker (name -> its admin kubeconfig file) the kubeconfig Secret in
    the kqueue ``namespace`` and the MultiKueueCluster reading it; the MultiKueueConfig of them
    all, in the given order (the Incremental dispatcher's), and the check using it."""
    out: list[Obj] = []
    for name, path in workers.items():
        secret_name = kubeconfig_secret_name(name)
        out += [secret(secret_name, namespace, {KUBECONFIG_KEY: embedded_kubeconfig(path)}),
                multikueue_cluster(name, secret_name)]
    return [*out, multikueue_config(config, list(workers)), multikueue_check(check, config)]


def merged_kubeconfig(kubeconfigs: dict[str, Path], current: str) -> Obj:
    """One kubeconfig with a context per cluster (name -> its admin kubeconfig file), each
    context, cluster and user named after it, so ``kubectl --context worker1`` reaches worker1."""
    merged: Obj = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
                   "contexts": [], "current-context": current, "preferences": {}}
    for name, path in kubeconfigs.items():
        cfg = yaml.safe_load(path.read_text())
        ctx = next(x["context"] for x in cfg["contexts"] if x["name"] == cfg["current-context"])
        cluster = next(x["cluster"] for x in cfg["clusters"] if x["name"] == ctx["cluster"])
        user = next(x["user"] for x in cfg["users"] if x["name"] == ctx["user"])
        merged["clusters"].append({"name": name, "cluster": cluster})
        merged["users"].append({"name": name, "user": user})
        merged["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    return merged
